//! The `link` stage: an order, checked against the object files of a program, turned into the
//! ordering input of one linker ([`link`]), and what reading a link's inputs takes: the objects
//! and archives ([`read_inventory`], [`read_objects_of`]), the kind of each argument of a
//! linker command line ([`link_inputs`], [`split_lto`]), which linker a program is
//! ([`detect_linker`]) and how GNU ld takes an order ([`bfd_flavor`]).
//!
//! The work itself is [`sediment_link`]'s (resolution, emitters, command-line parsing); this
//! module opens the files and runs the programs that crate leaves to its caller.
//!
//! ```text
//! order + objects -> resolve (lto: keep entries found in no object) -> (GNU ld: ask ld) -> emit
//! ```

use super::timings;
use crate::fsio;
use anyhow::{anyhow, bail, Context, Result};
use sediment_elf::objects::{Lto, ObjectFile};
use sediment_link::cmdline::{self, InputKind};
use sediment_link::{BfdFlavor, Emitted, Linker, PieMode, Resolution};
use sediment_profile::FunctionOrder;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the stage learns which input GNU ld takes ([`BfdFlavor`]); unused for other linkers.
pub enum Bfd<'a> {
    /// Already known (the linker shim asked the real linker before anything else).
    Known(&'a BfdFlavor),
    /// Ask this GNU ld program, for a final link of this PIE mode ([`bfd_flavor`]), once the
    /// order has been resolved.
    Ask {
        /// The `ld` program.
        ld: String,
        /// The PIE mode of the final link (which default script a full script starts from).
        pie: PieMode,
    },
}

/// What [`link`] works on.
pub struct Request<'a> {
    /// The linker to write for.
    pub linker: Linker,
    /// The order, hottest first.
    pub order: &'a FunctionOrder,
    /// The ordinary objects of the link, in command-line order.
    pub objects: &'a [ObjectFile],
    /// The link also has LTO inputs: entries found in no object are kept, written by name
    /// ([`sediment_link::resolve_lto`]), instead of counted as missing.
    pub lto: bool,
    /// GNU ld's flavour, or where to ask for it.
    pub bfd: Bfd<'a>,
}

/// What [`link`] made.
pub struct Linked {
    /// The order resolved against the objects (`placed` of `total` entries found).
    pub resolution: Resolution,
    /// The linker's input: its text, its counted warnings, how many entries it holds.
    pub emitted: Emitted,
}

/// Why [`link`] failed, by step, so that each caller names the right file.
#[derive(Debug)]
pub enum Error {
    /// The order matches none of the objects.
    Resolve(sediment_link::Error),
    /// GNU ld could not be asked for its version or default script.
    Ld(anyhow::Error),
    /// Nothing could be written ([`sediment_link::Error::NothingEmitted`] carries the warnings).
    Emit(sediment_link::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Resolve(e) | Error::Emit(e) => e.fmt(f),
            Error::Ld(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for Error {}

/// The `link` stage: resolves `request.order` against the objects, then (GNU ld) learns which
/// input the linker takes, then emits that linker's ordering input. Writes nothing: the caller
/// writes [`Emitted::text`] and prints [`Emitted::warnings`].
pub fn link(request: Request<'_>) -> Result<Linked, Error> {
    let _t = timings::stage("link");
    let resolution = if request.lto {
        sediment_link::resolve_lto(request.order, request.objects)
    } else {
        sediment_link::resolve(request.order, request.objects).map_err(Error::Resolve)?
    };
    let asked;
    let bfd = match (request.linker, request.bfd) {
        (_, Bfd::Known(flavor)) => flavor,
        (Linker::Bfd, Bfd::Ask { ld, pie }) => {
            asked = bfd_flavor(&ld, &pie.verbose_args()).map_err(Error::Ld)?;
            &asked
        }
        (_, Bfd::Ask { .. }) => &BfdFlavor::OrderingFile,
    };
    let emitted = sediment_link::emit(request.linker, &resolution, request.objects, bfd)
        .map_err(Error::Emit)?;
    Ok(Linked {
        resolution,
        emitted,
    })
}

/// The warning `sediment link` gives for LTO objects among `objects`: the code the linker
/// places for them is generated inside the link, where a file written beforehand cannot name it.
pub fn lto_warning(objects: &[ObjectFile]) -> Option<String> {
    let lto: Vec<String> = objects
        .iter()
        .filter(|o| o.lto.is_some())
        .map(|o| o.display_name())
        .collect();
    lto.first().map(|first| {
        format!(
            "{} inputs are LTO objects (first: {}): the code the linker places for them is generated at link time, which this file cannot order; order LTO links through `sediment wrappers` (docs/guide/packaging.md)",
            lto.len(),
            sediment_profile::escape(first)
        )
    })
}

/// Reads every object and archive; the inventory keeps command-line order. Fails, naming the
/// inputs, when none of them defines a function (an empty archive, say): matching an order
/// against nothing would blame the order.
pub fn read_inventory(paths: &[PathBuf]) -> Result<Vec<ObjectFile>> {
    let all = read_objects_of(paths)?;
    check_defines_functions(paths, &all)?;
    Ok(all)
}

/// Reads every object and archive (LTO inputs included, marked), in command-line order.
pub fn read_objects_of(paths: &[PathBuf]) -> Result<Vec<ObjectFile>> {
    let mut all = Vec::new();
    for p in paths {
        let bytes = fsio::read_bytes(p)?;
        let label = p
            .to_str()
            .ok_or_else(|| anyhow!("{}: path is not UTF-8", p.display()))?;
        all.extend(sediment_elf::objects::read_objects(label, &bytes)?);
    }
    Ok(all)
}

/// Fails, naming the inputs, when none of `all` (read from `paths`) defines a function.
pub fn check_defines_functions(paths: &[PathBuf], all: &[ObjectFile]) -> Result<()> {
    if let [first, rest @ ..] = paths {
        if all.iter().all(|o| o.functions.is_empty()) {
            let others = match rest.len() {
                0 => String::new(),
                n => format!(" (and the {n} other inputs)"),
            };
            let lto = all.iter().filter(|o| o.lto.is_some()).count();
            let why = if lto > 0 {
                format!("LTO inputs among them: {lto}, whose functions only exist once the linker has run code generation; order such links through `sediment wrappers`, docs/guide/packaging.md")
            } else {
                "an empty archive, or no code?".to_string()
            };
            bail!(
                "{}{others}: no object defines a function ({why})",
                first.display()
            );
        }
    }
    Ok(())
}

/// GNU ld >= 2.43 reads a section-ordering fragment; older ones get a full script made from
/// their own default script for the link's mode: `ld --verbose MODE`, MODE being `-pie` or
/// `-no-pie` ([`PieMode::verbose_args`]) or the options of a link's command line that choose
/// the script (`-shared`, `-z ...`: [`cmdline::script_mode_args`]).
pub fn bfd_flavor(ld: &str, mode: &[String]) -> Result<BfdFlavor> {
    let version = tool_stdout(ld, &["--version"])?;
    let first = version.lines().next().unwrap_or("");
    let version = cmdline::parse_ld_version(first)
        .ok_or_else(|| anyhow!("{ld} --version: cannot read a version from `{first}`"))?;
    if cmdline::bfd_reads_ordering_file(version) {
        return Ok(BfdFlavor::OrderingFile);
    }
    let mut args = vec!["--verbose"];
    args.extend(mode.iter().map(String::as_str));
    let verbose_output = tool_stdout(ld, &args)?;
    Ok(BfdFlavor::FullScript {
        verbose_output,
        mode: mode.to_vec(),
    })
}

/// The standard output of `tool args`; a failure says how, with the tool's first line of
/// standard error.
fn tool_stdout(tool: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .with_context(|| format!("cannot run `{tool}` (is GNU binutils installed?)"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stderr.lines().find(|l| !l.trim().is_empty());
        bail!(
            "`{tool} {}` failed ({}){}",
            args.join(" "),
            out.status,
            said.map_or(String::new(), |l| format!(
                ": {}",
                sediment_profile::quote_whole(l)
            ))
        );
    }
    String::from_utf8(out.stdout)
        .map_err(|_| anyhow!("`{tool} {}` printed non-UTF-8 output", args.join(" ")))
}

/// Which linker `real` is, from the first line of `real --version`
/// ([`cmdline::linker_from_version`]).
pub fn detect_linker(real: &Path) -> Result<Linker> {
    let out = Command::new(real)
        .arg("--version")
        .output()
        .with_context(|| format!("{}: cannot run", real.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("");
    match cmdline::linker_from_version(first) {
        Some(linker) => Ok(linker),
        None => bail!(
            "{}: unknown linker `{first}` (Sediment orders for lld, gold and GNU ld)",
            real.display()
        ),
    }
}

/// The kind of the file at `p` from its first bytes ([`cmdline::input_kind`]); `None` for
/// anything else (shared objects, linker scripts, files that cannot be opened).
pub fn input_kind(p: &Path) -> Option<InputKind> {
    use std::io::Read as _;
    let mut head = [0u8; cmdline::INPUT_HEAD_BYTES];
    let mut f = std::fs::File::open(p).ok()?;
    let mut n = 0;
    // A short read is not the end of the file: read until the 18 bytes or the end.
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    cmdline::input_kind(&head[..n])
}

/// Arguments of a linker command line that name ELF relocatable objects, static archives or
/// LLVM bitcode files (by their first bytes), with which they are, in command-line order. A
/// library named with `-l` is the first file the linker `ld` (of kind `linker`) would take for
/// it ([`cmdline::link_input_args`]: `-L` directories, then the linker's own search path,
/// [`default_search_dirs`], asked only when there is a `-l`): a static archive is an input, a
/// shared library (or a linker script in its place, like `libc.so`) has nothing to order.
pub fn link_inputs(
    args: &[OsString],
    ld: &Path,
    linker: Linker,
) -> Result<Vec<(PathBuf, InputKind)>> {
    let any_library = cmdline::link_input_args(args, &[])
        .iter()
        .any(|a| matches!(a, cmdline::InputArg::Library(_)));
    let defaults = if any_library {
        default_search_dirs(ld, linker)?
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    for arg in cmdline::link_input_args(args, &defaults) {
        let path = match arg {
            cmdline::InputArg::File(a) => PathBuf::from(a),
            cmdline::InputArg::Library(files) => {
                match files
                    .into_iter()
                    .find(|f| std::fs::metadata(f).is_ok_and(|m| m.is_file()))
                {
                    Some(f) => f,
                    None => continue,
                }
            }
        };
        if let Some(kind) = input_kind(&path) {
            out.push((path, kind));
        }
    }
    Ok(out)
}

/// The linker's built-in library search path, searched after the `-L` directories: GNU ld's
/// `SEARCH_DIR`s of its default script (`ld --verbose`, [`cmdline::search_dirs_of_script`]).
/// lld and gold have none built in (the compiler driver passes its search path as `-L`
/// options), nor has mold, which is never ordered.
pub fn default_search_dirs(ld: &Path, linker: Linker) -> Result<Vec<PathBuf>> {
    if linker != Linker::Bfd {
        return Ok(Vec::new());
    }
    let verbose = tool_stdout(&ld.to_string_lossy(), &["--verbose"])?;
    Ok(cmdline::search_dirs_of_script(&verbose))
}

/// The arguments in input position (neither an option nor the value of one) that cannot be
/// opened, with the reason: the inputs [`link_inputs`] could not look at.
pub fn unreadable_inputs(args: &[OsString]) -> Vec<(PathBuf, std::io::Error)> {
    let mut out = Vec::new();
    for a in cmdline::input_arguments(args) {
        let p = Path::new(a);
        if let Err(e) = std::fs::File::open(p) {
            out.push((p.to_path_buf(), e));
        }
    }
    out
}

/// The inputs of a link, split by who makes the code the linker places.
pub struct SplitInputs {
    /// The ordinary objects: their code is placed as it is.
    pub objects: Vec<ObjectFile>,
    /// The LTO inputs, by display name: their code is generated inside the link.
    pub lto: Vec<(String, Lto)>,
}

/// The ordinary objects of the link and its LTO inputs ([`SplitInputs`]). LLVM bitcode is
/// always LTO input (lld reads it itself, gold and GNU ld through LLVMgold.so, and nothing
/// links it otherwise). A GCC LTO object is LTO input when a linker plugin is loaded (gcc
/// passes `-plugin liblto_plugin.so`), except for lld, which ignores `-plugin` and links a fat
/// object's ordinary code (and fails on a slim one); without the plugin a fat object's
/// ordinary code is linked too. Bitcode files are not read past their first bytes.
pub fn split_lto(
    inputs: &[(PathBuf, InputKind)],
    linker: Linker,
    plugin: bool,
) -> Result<SplitInputs> {
    let mut lto = Vec::new();
    let mut readable = Vec::new();
    for (path, kind) in inputs {
        match kind {
            InputKind::Bitcode => lto.push((path.display().to_string(), Lto::Bitcode)),
            InputKind::Objects => readable.push(path.clone()),
        }
    }
    let gcc_by_plugin = plugin && linker != Linker::Lld;
    let mut objects = Vec::new();
    for o in read_objects_of(&readable)? {
        match o.lto {
            Some(kind @ Lto::Bitcode) => lto.push((o.display_name(), kind)),
            Some(kind @ Lto::Gcc { .. }) if gcc_by_plugin => lto.push((o.display_name(), kind)),
            _ => objects.push(o),
        }
    }
    Ok(SplitInputs { objects, lto })
}

/// The command line `args` with its response files (`@FILE`) expanded
/// ([`sediment_link::response::expand`]), each read by
/// `fsio::ReadBudget::read_response_file`: a name that cannot be opened or a directory
/// stays a literal argument, as in GNU; a FIFO, a socket, a device or a kernel file is an
/// error naming it. A stranger's response file is bounded by the budgets every input has: each
/// file by `fsio::MAX_INPUT_BYTES`, all of them together by the run's read budget
/// (`fsio::MAX_INPUT_BYTES_ENV`, default `fsio::DEFAULT_RUN_INPUT_BYTES`), the arguments
/// they expand to by the memory limit ([`crate::membudget`], `SEDIMENT_MAX_MEMORY`), and the
/// number of files by [`sediment_link::response::MAX_EXPANSIONS`].
pub fn expand_response_files(args: &[OsString]) -> Result<sediment_link::response::Expansion> {
    if !args.iter().any(|a| a.as_encoded_bytes().starts_with(b"@")) {
        return Ok(sediment_link::response::Expansion::Plain);
    }
    let mut budget = fsio::ReadBudget::from_flag_or_env(None)?;
    let _memory = crate::membudget::Limit::from_flag_or_env(None)?;
    sediment_link::response::expand(args, |p| budget.read_response_file(p))
}

/// Writes `args` as the response file `args` in `dir` (the private directory of
/// [`write_for_linker`], the file 0600) and returns the argument that names it (`@DIR/args`).
pub fn write_response_file(dir: &Path, args: &[OsString]) -> Result<OsString> {
    let file = dir.join("args");
    let text = sediment_link::response::write(args);
    fsio::replace_files(&[fsio::Replacement::write(&file, &text).with_mode(0o600)])?;
    let mut arg = OsString::from("@");
    arg.push(&file);
    Ok(arg)
}

/// Writes the linker input `text` into a private temporary directory (mode 0700, the file
/// 0600: the order names a package's functions, and no other user may swap it before the
/// linker reads it); returns the options that make `linker` read it
/// ([`cmdline::linker_options`]), and the directory (removed when dropped, after the link).
pub fn write_for_linker(
    linker: Linker,
    bfd: &BfdFlavor,
    text: &str,
) -> Result<(Vec<OsString>, tempfile::TempDir)> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix("sediment-ld")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .context("cannot create a temporary directory")?;
    let file = dir.path().join("order");
    fsio::replace_files(&[fsio::Replacement::write(&file, text.as_bytes()).with_mode(0o600)])?;
    Ok((cmdline::linker_options(linker, bfd, &file), dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    // A failing tool: its exit status, and its first line of stderr when it said anything.
    #[test]
    fn failing_tool_says_how() {
        let err = tool_stdout("false", &["--version"])
            .unwrap_err()
            .to_string();
        assert_eq!(err, "`false --version` failed (exit status: 1)");
        let err = tool_stdout("sh", &["-c", "echo >&2; echo oops >&2; exit 3"])
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("failed (exit status: 3): oops"), "{err}");
    }

    // What gcc's driver passes (option values that are no files: `elf_x86_64`, `now`, a map
    // not yet written) is not mistaken for a missing input; the missing object is.
    #[test]
    fn unreadable_inputs_skip_option_values() {
        let line = args(&[
            "-plugin",
            "/nonexistent/liblto_plugin.so",
            "--build-id",
            "-m",
            "elf_x86_64",
            "-dynamic-linker",
            "/nonexistent/ld.so",
            "-pie",
            "-o",
            "app",
            "-L/nonexistent",
            "-z",
            "now",
            "-rpath",
            "/nonexistent",
            "-Map",
            "app.map",
            "/nonexistent/gone.o",
            "-lc",
            "--push-state",
            "--as-needed",
            "--pop-state",
            "-(",
            "-)",
        ]);
        let found: Vec<PathBuf> = unreadable_inputs(&line)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(found, [PathBuf::from("/nonexistent/gone.o")]);
    }

    // Inputs are told by their first bytes: bitcode (raw or wrapped), ELF relocatables and
    // archives are looked into; shared objects, scripts and short files are not.
    #[test]
    fn input_kinds_by_first_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let p = tmp.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            input_kind(&p)
        };
        let elf = |e_type: u8| {
            let mut h = b"\x7fELF\x02\x01\x01".to_vec();
            h.resize(16, 0);
            h.extend_from_slice(&[e_type, 0, 0x3e, 0]);
            h
        };
        assert_eq!(
            file("a.bc", b"BC\xC0\xDE\x35\x14"),
            Some(InputKind::Bitcode)
        );
        assert_eq!(
            file("w.bc", b"\xDE\xC0\x17\x0B\0\0\0\0"),
            Some(InputKind::Bitcode)
        );
        assert_eq!(file("a.o", &elf(1)), Some(InputKind::Objects));
        assert_eq!(file("l.a", b"!<arch>\n"), Some(InputKind::Objects));
        assert_eq!(file("l.so", &elf(3)), None);
        assert_eq!(file("s.ld", b"INPUT(a.o)\n"), None);
        assert_eq!(file("short", b"BC"), None);
        assert_eq!(input_kind(&tmp.path().join("missing")), None);
    }
}
