//! `sediment wrappers DIR` and `sediment ld --real LINKER -- ARGS`: the per-executable
//! link-order step for package builds.
//!
//! A distribution builds thousands of executables with build systems Sediment does not control
//! (make, CMake, Meson, autotools under rpmbuild or dpkg-buildpackage). The one place every one
//! of them passes through is the compiler driver calling the linker, and both gcc and clang
//! look for the linker (`ld`, or `ld.lld`/`ld.gold`/`ld.bfd` with `-fuse-ld=`) in the `-B`
//! directories first. `sediment wrappers DIR` writes small shell shims of those names into DIR,
//! each running `sediment ld --real /usr/bin/<name> -- "$@"`; a build adds `-BDIR/` to its link
//! flags (LDFLAGS, `CMAKE_*_LINKER_FLAGS`, `c_link_args`, `%build_ldflags`) and nothing else
//! changes. `integrations/` has the snippets for RPM, CMake, Meson and make (docs/packaging.md).
//!
//! At each link `sediment ld`:
//! 1. finds the output (`-o FILE`) and the profile for it: `$SEDIMENT_PROF_DIR` (or
//!    `$PROF_DIR`) `/<output base name>.sprof`, the naming `sediment record --prof-dir` writes;
//! 2. **safe default**: no profile directory, no profile for this output, a response file
//!    (`@file`), an ordering option already on the command line, or mold -> the real linker
//!    runs with exactly the arguments it was given, so a package without profiles links
//!    byte-identically to a build without the wrappers;
//! 3. otherwise orders the profile (`$SEDIMENT_ALGORITHM`, default `c3`), resolves the order
//!    against the ELF relocatable objects and archives on the command line (every argument
//!    that is such a file; option values like the dynamic linker or the LTO plugin are shared
//!    objects and are skipped by their ELF type), emits the input of the linker the shim stands
//!    for (detected from `LINKER --version`: LLD, GNU gold or GNU ld) into a private temporary
//!    directory, and runs the real linker with the matching option appended. One line on
//!    standard error says what was applied.
//!
//! **LTO** (docs/packaging.md, "LTO"). Distributions build with `-flto`: then the inputs are
//! LLVM bitcode or GCC LTO objects (alone or in archives, told by their first bytes and, for
//! GCC, their `.gnu.lto_*` sections: [`sediment_elf::objects::Lto`]) and the code the linker
//! places is generated inside the link, where no check can see it beforehand. What the
//! linkers were seen to do (clang 14, gcc 12, lld 14, gold 1.16, GNU ld 2.40; the tests in
//! `tests/it/packaging.rs` repeat it):
//! - lld generates the bitcode's code with one section per function and applies
//!   `--symbol-ordering-file` afterwards, by name; gold and GNU ld with LLVMgold.so do the
//!   same, and order those sections by name, unqualified patterns included.
//! - GCC's code generation (lto-wrapper, run by the plugin in gold and GNU ld) writes
//!   `.text.NAME` sections (`.text.s.lto_priv.0` for a renamed static) only when
//!   `-ffunction-sections` is among the *link-time* options, which lto-wrapper reads from
//!   `$COLLECT_GCC_OPTIONS`; given at compile time only, it is dropped and every function of a
//!   partition lands in one `.text`. gold's `--section-ordering-file` (with globs) and a full
//!   GNU ld script (with unqualified patterns) then order them.
//!
//! So with LTO inputs the order is checked against the ordinary objects only
//! ([`sediment_link::resolve_lto`]): the other entries are written by name
//! ([`sediment_link::lto_sections`]), and once the real linker has succeeded the output's
//! symbols are read and the summary line says how many of the profiled functions are there in
//! the intended order ([`sediment_link::check_order`]). A profile none of whose functions is in
//! the output is the same mistake as one matching none of the objects: one line naming the
//! profile, exit 1, and the output removed, so that no build goes on with it. A GCC LTO link
//! whose link-time options lack `-ffunction-sections` cannot be ordered: it links unchanged,
//! with one line saying so.
//!
//! A corrupt profile is an error (one line naming the file, exit 1, nothing linked), not a
//! silent fallback: a packager who ships profiles wants to know one is broken. So is anything
//! else where the profile belongs (a directory, a symbolic link to nothing), and a profile
//! directory that is not a directory: only a name that does not exist is "no profile". A
//! profile that matches none of the objects is an error naming the profile, unless an input on
//! the command line could not be read: then it names that input (the link would fail on it
//! anyway). The real linker's exit status is passed on.
//!
//! Turned down: a compiler wrapper (`CC="sediment cc gcc"`): it would have to parse every
//! driver option of two compilers to find out whether a call links; the linker's own command
//! line, as the driver hands it over, is plain. Also turned down: writing the order file next
//! to the output (build systems glob their build directories at install time).

use crate::cli::link::{bfd_flavor, check_defines_functions, read_objects_of};
use crate::fsio;
use anyhow::{anyhow, bail, Context, Result};
use sediment_elf::objects::{Lto, ObjectFile};
use sediment_link::{BfdFlavor, Linker, PieMode};
use sediment_order::{order_profile, Algorithm};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Linker names a shim is written for, with the Debian path they usually have.
const SHIMS: [&str; 4] = ["ld", "ld.bfd", "ld.gold", "ld.lld"];

/// Arguments of `sediment wrappers`.
#[derive(clap::Args)]
pub struct WrappersArgs {
    /// Directory to write the linker shims into (created if missing).
    pub dir: PathBuf,
    /// Profile directory baked into the shims (else `$SEDIMENT_PROF_DIR`/`$PROF_DIR` at link time).
    #[arg(long, value_name = "DIR")]
    pub prof_dir: Option<PathBuf>,
}

/// Arguments of `sediment ld`.
#[derive(clap::Args)]
pub struct LdArgs {
    /// The real linker to run.
    #[arg(long, value_name = "LINKER")]
    pub real: PathBuf,
    /// The linker's arguments, as the compiler driver passed them (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// Runs `sediment wrappers`: finds the linkers, then writes their shims as one set
/// ([`fsio::replace_files`], executable), in DIR created if missing ([`fsio::in_dir`]), so a
/// failure (no linker on PATH, a directory in the way of a shim) leaves DIR as it was.
pub fn run_wrappers(args: WrappersArgs) -> Result<()> {
    let me = std::env::current_exe().context("cannot find the sediment executable")?;
    let prof_dir = match &args.prof_dir {
        Some(p) => {
            check_prof_dir(p, "--prof-dir")?;
            Some(
                std::path::absolute(p)
                    .with_context(|| format!("{}: cannot resolve", p.display()))?,
            )
        }
        None => None,
    };
    // The shim directory itself is skipped on PATH. One that does not exist yet cannot be on
    // PATH: its absolute path, which no existing directory resolves to, skips nothing.
    let skip = args
        .dir
        .canonicalize()
        .or_else(|_| std::path::absolute(&args.dir))
        .with_context(|| format!("{}: cannot resolve", args.dir.display()))?;
    let mut scripts = Vec::new();
    for name in SHIMS {
        let Some(real) = find_in_path(name, &skip) else {
            continue;
        };
        let mut script = String::from("#!/bin/sh\n# Written by `sediment wrappers`: orders this link from the profile of its output\n# when one exists (docs/packaging.md); otherwise runs the real linker unchanged.\n");
        if let Some(p) = &prof_dir {
            script.push_str(&format!(
                "SEDIMENT_PROF_DIR={}\nexport SEDIMENT_PROF_DIR\n",
                sh_quote(p)
            ));
        }
        script.push_str(&format!(
            "exec {} ld --real {} -- \"$@\"\n",
            sh_quote(&me),
            sh_quote(&real)
        ));
        scripts.push((name, script));
    }
    if scripts.is_empty() {
        bail!(
            "{}: no linker (ld, ld.bfd, ld.gold, ld.lld) found on PATH; nothing written",
            args.dir.display()
        );
    }
    let dir = fsio::in_dir(&args.dir, || {
        let dir = args
            .dir
            .canonicalize()
            .with_context(|| format!("{}: cannot resolve", args.dir.display()))?;
        let paths: Vec<PathBuf> = scripts.iter().map(|(name, _)| dir.join(name)).collect();
        let set: Vec<fsio::Replacement<'_>> = paths
            .iter()
            .zip(&scripts)
            .map(|(path, (_, script))| {
                fsio::Replacement::write(path, script.as_bytes()).with_mode(0o755)
            })
            .collect();
        fsio::replace_files(&set)?;
        Ok(dir)
    })?;
    let written: Vec<&str> = scripts.iter().map(|(name, _)| *name).collect();
    eprintln!(
        "sediment wrappers: wrote {} to {}",
        written.join(", "),
        dir.display()
    );
    println!("-B{}/", dir.display());
    Ok(())
}

/// Refuses a profile directory that exists as something else (a regular file, say): every
/// link would look up `<it>/<output>.sprof` and fail. One that does not exist yet is fine, the
/// safe default: a package without profiles links unchanged (the RPM macros point at
/// `%{_sourcedir}/sediment-profiles` whether or not the package ships any). `what` names where
/// the directory came from.
fn check_prof_dir(dir: &Path, what: &str) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!(
            "{}: not a directory ({what} names the directory of <output>.sprof profiles)",
            dir.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => bail!("{}: cannot read ({what}): {e}", dir.display()),
    }
}

/// Runs `sediment ld`: plans the ordering, runs the real linker, checks an LTO link's output,
/// exits with the linker's status.
pub fn run_ld(args: LdArgs) -> Result<()> {
    let plan = plan(&args)?;
    let extra: Vec<OsString> = plan.as_ref().map(|p| p.extra.clone()).unwrap_or_default();
    let status = Command::new(&args.real)
        .args(&args.args)
        .args(&extra)
        .status()
        .with_context(|| format!("{}: cannot run the linker", args.real.display()))?;
    if status.success() {
        if let Some(check) = plan.as_ref().and_then(|p| p.after_lto.as_ref()) {
            check_after_lto(check)?;
        }
    }
    drop(plan);
    // The binary, not a library, ends the process: the exit code is the linker's.
    std::process::exit(status.code().unwrap_or(1));
}

/// What to add to the link: the options, and the directory holding the file they name.
struct Plan {
    extra: Vec<OsString>,
    /// Set for a link with LTO inputs: the output is checked once the linker has succeeded.
    after_lto: Option<AfterLto>,
    _dir: tempfile::TempDir,
}

/// What [`check_after_lto`] needs: the output, the profile, the order's function names, and
/// the middle of the summary line (`c3, lld, 0 warnings`).
struct AfterLto {
    output: PathBuf,
    profile: PathBuf,
    names: Vec<String>,
    how: String,
}

/// Reads the symbols of an LTO link's output and prints the summary line: how many of the
/// profiled functions are in the output, in the intended order. None of them there means a
/// profile of another program: the output is removed and the link fails, naming the profile.
/// An output without a symbol table (`-s`) cannot be checked, which the line says.
fn check_after_lto(check: &AfterLto) -> Result<()> {
    let out = check.output.display();
    let read = fsio::read_bytes(&check.output).and_then(|data| {
        sediment_elf::Binary::parse(&out.to_string(), &data).map_err(anyhow::Error::from)
    });
    let unchecked = match &read {
        Ok(b) if b.from_dynsym => Some(format!(
            "{out}: no symbol table (stripped?), only dynamic symbols"
        )),
        Ok(_) => None,
        Err(e) => Some(format!("{e:#}")),
    };
    if let Some(why) = unchecked {
        eprintln!(
            "sediment ld: {out}: ordered after LTO, not checked: {why} ({}) from {}",
            check.how,
            check.profile.display()
        );
        return Ok(());
    }
    let binary = read?;
    let functions: Vec<(&str, u64)> = binary
        .functions
        .iter()
        .map(|f| (f.key.name.as_str(), f.address))
        .collect();
    let names: Vec<&str> = check.names.iter().map(String::as_str).collect();
    let c = sediment_link::check_order(&names, &functions);
    if c.found == 0 {
        // Only a regular file the linker wrote is removed (never a device named by `-o`).
        if std::fs::symlink_metadata(&check.output).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&check.output).with_context(|| format!("{out}: cannot remove"))?;
        }
        bail!(
            "{}: order/profile does not match {out} after LTO (0 of {} functions in its symbol table; recorded from another program?); {out} removed",
            check.profile.display(),
            c.total
        );
    }
    eprintln!(
        "sediment ld: {out}: ordered after LTO: {} of {} profiled functions found in order in the output ({} found; {}) from {}",
        c.in_order,
        c.total,
        c.found,
        check.how,
        check.profile.display()
    );
    Ok(())
}

/// Decides whether and how to order this link; `None` is the safe default (link unchanged).
fn plan(args: &LdArgs) -> Result<Option<Plan>> {
    let verbose = std::env::var_os("SEDIMENT_VERBOSE").is_some();
    let skip = |why: &str| {
        if verbose {
            eprintln!("sediment ld: not ordered: {why}");
        }
        Ok(None)
    };
    let Some((variable, prof_dir)) = crate::cli::vocab::prof_dir_from_env() else {
        return skip("no SEDIMENT_PROF_DIR or PROF_DIR");
    };
    let Some(output) = output_of(&args.args) else {
        return skip("no -o on the command line");
    };
    let Some(base) = Path::new(&output).file_name() else {
        return skip("the output has no file name");
    };
    let mut profile_name = base.to_os_string();
    profile_name.push(".sprof");
    check_prof_dir(Path::new(&prof_dir), &format!("${variable}"))?;
    let profile_path = Path::new(&prof_dir).join(profile_name);
    // Only a name that is not there at all is "no profile"; anything else in its place (a
    // directory, a dangling link, a file that cannot be read) is a broken setup, and linking
    // unordered would hide it, like a corrupt profile.
    match std::fs::metadata(&profile_path) {
        Ok(m) if m.is_file() => {}
        Ok(m) => bail!(
            "{}: {} where the profile of {} should be; nothing linked",
            profile_path.display(),
            if m.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            },
            Path::new(&output).display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if profile_path.symlink_metadata().is_ok() {
                bail!(
                    "{}: a symbolic link to nothing where the profile of {} should be; nothing linked",
                    profile_path.display(),
                    Path::new(&output).display()
                );
            }
            return skip(&format!("no profile {}", profile_path.display()));
        }
        Err(e) => bail!("{}: cannot read: {e}", profile_path.display()),
    }
    if let Some(why) = why_not_ordered(&args.args) {
        eprintln!(
            "sediment ld: {}: not ordered: {why}",
            Path::new(&output).display()
        );
        return Ok(None);
    }
    let linker = detect_linker(&args.real)?;
    if linker == Linker::Mold {
        eprintln!(
            "sediment ld: {}: not ordered: mold cannot order functions (docs/linkers.md)",
            Path::new(&output).display()
        );
        return Ok(None);
    }
    let bfd = if linker == Linker::Bfd {
        let shared = args.args.iter().any(|a| a == "-shared");
        let pie = if args
            .args
            .iter()
            .any(|a| a == "-pie" || a == "--pic-executable")
        {
            PieMode::Pie
        } else {
            PieMode::NoPie
        };
        let flavor = bfd_flavor(&args.real.to_string_lossy(), pie)?;
        if shared && matches!(flavor, BfdFlavor::FullScript { .. }) {
            eprintln!(
                "sediment ld: {}: not ordered: GNU ld before 2.43 needs a full script, which Sediment writes for executables only",
                Path::new(&output).display()
            );
            return Ok(None);
        }
        flavor
    } else {
        BfdFlavor::OrderingFile
    };

    let profile = fsio::read_profile(&profile_path)?;
    let algorithm_name = std::env::var("SEDIMENT_ALGORITHM").unwrap_or_else(|_| "c3".to_string());
    let algorithm =
        Algorithm::from_name(&algorithm_name).map_err(|e| anyhow!("SEDIMENT_ALGORITHM: {e}"))?;
    let order = order_profile(&profile, algorithm)
        .with_context(|| format!("{}: cannot order", profile_path.display()))?;
    let inputs = link_inputs(&args.args);
    let SplitInputs { objects, lto } = split_lto(&inputs, linker, has_plugin(&args.args))?;
    if !lto.is_empty() {
        if let Some(why) = why_not_after_lto(&lto) {
            eprintln!(
                "sediment ld: {}: not ordered: {why}",
                Path::new(&output).display()
            );
            return Ok(None);
        }
        let res = sediment_link::resolve_lto(&order, &objects);
        let emitted = sediment_link::emit(linker, &res, &objects, &bfd)
            .map_err(|e| anyhow!("{}: {e}", profile_path.display()))?;
        let (extra, dir) = write_order(linker, &bfd, &emitted.text)?;
        let after_lto = AfterLto {
            output: PathBuf::from(&output),
            profile: profile_path.clone(),
            names: order.functions.iter().map(|k| k.name.clone()).collect(),
            how: format!(
                "{algorithm_name}, {linker}, {} warnings",
                emitted.warnings.len()
            ),
        };
        return Ok(Some(Plan {
            extra,
            after_lto: Some(after_lto),
            _dir: dir,
        }));
    }
    let paths: Vec<PathBuf> = inputs.into_iter().map(|(p, _)| p).collect();
    check_defines_functions(&paths, &objects)?;
    let res = sediment_link::resolve(&order, &objects).map_err(|e| {
        // The objects the profile was checked against are the ones that could be read: with an
        // input missing, "the profile does not match" would blame the wrong file, and the
        // link fails on that input anyway.
        match unreadable_inputs(&args.args).first() {
            Some((path, why)) => anyhow!(
                "{}: input of the link of {}: {why}; nothing linked",
                path.display(),
                Path::new(&output).display()
            ),
            None => anyhow!("{}: {e}", profile_path.display()),
        }
    })?;
    let emitted = sediment_link::emit(linker, &res, &objects, &bfd)?;
    let (extra, dir) = write_order(linker, &bfd, &emitted.text)?;
    eprintln!(
        "sediment ld: {}: ordered {} of {} profiled functions ({algorithm_name}, {linker}, {} warnings) from {}",
        Path::new(&output).display(),
        res.placed.len(),
        res.total,
        emitted.warnings.len(),
        profile_path.display()
    );
    Ok(Some(Plan {
        extra,
        after_lto: None,
        _dir: dir,
    }))
}

/// Writes the linker input `text` into a private temporary directory; returns the options
/// that make `linker` read it, and the directory (removed when dropped, after the link).
fn write_order(
    linker: Linker,
    bfd: &BfdFlavor,
    text: &str,
) -> Result<(Vec<OsString>, tempfile::TempDir)> {
    let dir = tempfile::Builder::new()
        .prefix("sediment-ld")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let file = dir.path().join("order");
    fsio::write_atomic(&file, text.as_bytes())?;
    Ok((linker_options(linker, bfd, &file), dir))
}

/// The inputs of a link, split by who makes the code the linker places.
struct SplitInputs {
    /// The ordinary objects: their code is placed as it is.
    objects: Vec<ObjectFile>,
    /// The LTO inputs, by display name: their code is generated inside the link.
    lto: Vec<(String, Lto)>,
}

/// The ordinary objects of the link and its LTO inputs ([`SplitInputs`]). LLVM bitcode is
/// always LTO input (lld reads it itself, gold and GNU ld through LLVMgold.so, and nothing
/// links it otherwise). A GCC LTO object is LTO input when a linker plugin is loaded (gcc
/// passes `-plugin liblto_plugin.so`), except for lld, which ignores `-plugin` and links a fat
/// object's ordinary code (and fails on a slim one); without the plugin a fat object's
/// ordinary code is linked too. Bitcode files are not read past their first bytes.
fn split_lto(inputs: &[(PathBuf, InputKind)], linker: Linker, plugin: bool) -> Result<SplitInputs> {
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

/// Whether a linker plugin is loaded (`-plugin FILE`, `--plugin=FILE`; not `-plugin-opt`).
fn has_plugin(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        let b = a.as_bytes();
        b == b"-plugin"
            || b == b"--plugin"
            || b.starts_with(b"-plugin=")
            || b.starts_with(b"--plugin=")
    })
}

/// Why a link with LTO inputs cannot be ordered, if it cannot: GCC's code generation without
/// `-ffunction-sections` among the link-time options (module documentation).
fn why_not_after_lto(lto: &[(String, Lto)]) -> Option<String> {
    let (gcc, _) = lto
        .iter()
        .find(|(_, kind)| matches!(kind, Lto::Gcc { .. }))?;
    let options = std::env::var_os("COLLECT_GCC_OPTIONS");
    if gcc_function_sections(options.as_deref()) {
        return None;
    }
    Some(format!(
        "GCC compiles its LTO input ({}) at link time without -ffunction-sections, which it takes from the link flags only, not from the compile flags: add -ffunction-sections to the link flags",
        sediment_profile::escape(gcc)
    ))
}

/// Whether `-ffunction-sections` is in effect in `$COLLECT_GCC_OPTIONS`, the options the gcc
/// driver hands to collect2, the linker and from there to lto-wrapper: every option in single
/// quotes, separated by spaces, a quote inside an option written `'\''` (gcc.cc,
/// `set_collect_gcc_options`). The last of `-ffunction-sections` and `-fno-function-sections`
/// wins, as on a command line. Unset (the linker not run by gcc) is `false`.
fn gcc_function_sections(options: Option<&OsStr>) -> bool {
    let Some(options) = options else {
        return false;
    };
    let mut on = false;
    let mut word = Vec::new();
    let mut quoted = false;
    let mut escaped = false;
    let mut end_word = |word: &mut Vec<u8>| {
        match word.as_slice() {
            b"-ffunction-sections" => on = true,
            b"-fno-function-sections" => on = false,
            _ => {}
        }
        word.clear();
    };
    for &b in options.as_bytes() {
        match b {
            _ if escaped => {
                word.push(b);
                escaped = false;
            }
            b'\'' => quoted = !quoted,
            b'\\' if !quoted => escaped = true,
            b' ' if !quoted => end_word(&mut word),
            _ => word.push(b),
        }
    }
    end_word(&mut word);
    on
}

/// The options that make `linker` read `file`.
fn linker_options(linker: Linker, bfd: &BfdFlavor, file: &Path) -> Vec<OsString> {
    let with = |prefix: &str| {
        let mut s = OsString::from(prefix);
        s.push(file);
        s
    };
    match (linker, bfd) {
        (Linker::Lld, _) => vec![
            with("--symbol-ordering-file="),
            "--no-warn-symbol-ordering".into(),
        ],
        (Linker::Bfd, BfdFlavor::FullScript { .. }) => vec!["-T".into(), file.into()],
        _ => vec![with("--section-ordering-file=")],
    }
}

/// The value of `-o FILE`, `-oFILE`, `--output FILE` or `--output=FILE` (the last one wins, as
/// in the linkers).
fn output_of(args: &[OsString]) -> Option<OsString> {
    let mut out = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let b = a.as_bytes();
        if b == b"-o" || b == b"--output" {
            out = it.next().cloned();
        } else if let Some(v) = b.strip_prefix(b"--output=") {
            out = Some(OsStr::from_bytes(v).to_os_string());
        } else if b.len() > 2 && b.starts_with(b"-o") {
            out = Some(OsStr::from_bytes(&b[2..]).to_os_string());
        }
    }
    out
}

/// Why this command line must be left alone, if it must.
fn why_not_ordered(args: &[OsString]) -> Option<&'static str> {
    for a in args {
        let b = a.as_bytes();
        if b.starts_with(b"@") {
            return Some("a response file (@file) is on the command line");
        }
        if b.starts_with(b"--symbol-ordering-file")
            || b.starts_with(b"--section-ordering-file")
            || b.starts_with(b"--call-graph-ordering-file")
        {
            return Some("the build already passes an ordering file");
        }
        if is_script_option(b) {
            return Some("the build passes its own linker script");
        }
        if b == b"-r" || b == b"--relocatable" {
            return Some("a relocatable (-r) link");
        }
    }
    None
}

/// `-T FILE`, `-TFILE`, `--script[=]FILE`, `-dT`/`--default-script`; not the address options
/// `-Ttext=`, `-Tdata=`, `-Tbss=`, `-Ttext-segment=`.
fn is_script_option(b: &[u8]) -> bool {
    let address = [&b"-Ttext"[..], b"-Tdata", b"-Tbss"]
        .iter()
        .any(|p| b.starts_with(p));
    (b.starts_with(b"-T") && !address)
        || b.starts_with(b"--script")
        || b.starts_with(b"-dT")
        || b.starts_with(b"--default-script")
}

/// What an input argument of the link is, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InputKind {
    /// An ELF relocatable object (GCC LTO objects included) or a static archive: read whole.
    Objects,
    /// LLVM bitcode: LTO input, not read further.
    Bitcode,
}

/// Arguments that name ELF relocatable objects, static archives or LLVM bitcode files (by
/// their first bytes), with which they are.
fn link_inputs(args: &[OsString]) -> Vec<(PathBuf, InputKind)> {
    args.iter()
        .filter(|a| !a.as_bytes().starts_with(b"-"))
        .map(PathBuf::from)
        .filter_map(|p| input_kind(&p).map(|k| (p, k)))
        .collect()
}

/// Options of GNU ld, gold and lld that take their value as the next argument (given with one
/// or two dashes), from `ld --help` and `ld.lld --help`: that value is not an input file.
/// Attached forms (`-LDIR`, `--script=FILE`) are one argument and need no entry.
const SEPARATE_VALUE: &[&str] = &[
    "a",
    "A",
    "b",
    "c",
    "e",
    "f",
    "F",
    "G",
    "h",
    "I",
    "l",
    "L",
    "m",
    "o",
    "O",
    "P",
    "R",
    "T",
    "u",
    "y",
    "Y",
    "z",
    "dT",
    "Tbss",
    "Tdata",
    "Ttext",
    "Ttext-segment",
    "Trodata-segment",
    "Tldata-segment",
    "architecture",
    "assert",
    "audit",
    "auxiliary",
    "default-script",
    "defsym",
    "depaudit",
    "dependency-file",
    "dynamic-linker",
    "dynamic-list",
    "entry",
    "error-handling-script",
    "exclude-libs",
    "export-dynamic-symbol",
    "export-dynamic-symbol-list",
    "filter",
    "fini",
    "format",
    "gpsize",
    "ignore-unresolved-symbol",
    "image-base",
    "init",
    "just-symbols",
    "library",
    "library-path",
    "Map",
    "mllvm",
    "mri-script",
    "oformat",
    "opt-remarks-filename",
    "opt-remarks-format",
    "opt-remarks-passes",
    "out-implib",
    "output",
    "plugin",
    "plugin-opt",
    "require-defined",
    "retain-symbols-file",
    "rpath",
    "rpath-link",
    "script",
    "section-start",
    "soname",
    "spare-dynamic-tags",
    "sysroot",
    "task-link",
    "trace-symbol",
    "undefined",
    "version-exports-section",
    "version-script",
    "wrap",
];

/// The arguments in input position (neither an option nor the value of one) that cannot be
/// opened, with the reason: the inputs [`link_inputs`] could not look at.
fn unreadable_inputs(args: &[OsString]) -> Vec<(PathBuf, std::io::Error)> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let b = a.as_bytes();
        if let Some(name) = b.strip_prefix(b"--").or_else(|| b.strip_prefix(b"-")) {
            if SEPARATE_VALUE.iter().any(|o| o.as_bytes() == name) {
                it.next();
            }
            continue;
        }
        let p = Path::new(a);
        if let Err(e) = std::fs::File::open(p) {
            out.push((p.to_path_buf(), e));
        }
    }
    out
}

/// The kind of the file at `p` from its first 18 bytes; `None` for anything else (shared
/// objects, linker scripts, files that cannot be opened).
fn input_kind(p: &Path) -> Option<InputKind> {
    use std::io::Read as _;
    let mut head = [0u8; 18];
    let mut f = std::fs::File::open(p).ok()?;
    let mut n = 0;
    // A short read is not the end of the file: read until the 18 bytes or the end.
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let head = &head[..n];
    if head.starts_with(b"!<arch>\n") {
        return Some(InputKind::Objects);
    }
    if sediment_elf::objects::is_bitcode(head) {
        return Some(InputKind::Bitcode);
    }
    // ELF, e_type at offset 16 (little or big endian): ET_REL = 1.
    let relocatable = n >= 18
        && head.starts_with(b"\x7fELF")
        && match head[5] {
            1 => head[16] == 1 && head[17] == 0,
            2 => head[16] == 0 && head[17] == 1,
            _ => false,
        };
    relocatable.then_some(InputKind::Objects)
}

/// Which linker `real` is, from the first line of `real --version`.
fn detect_linker(real: &Path) -> Result<Linker> {
    let out = Command::new(real)
        .arg("--version")
        .output()
        .with_context(|| format!("{}: cannot run", real.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("");
    Ok(if first.contains("LLD") {
        Linker::Lld
    } else if first.contains("gold") {
        Linker::Gold
    } else if first.contains("mold") {
        Linker::Mold
    } else if first.starts_with("GNU ld") {
        Linker::Bfd
    } else {
        bail!(
            "{}: unknown linker `{first}` (Sediment orders for lld, gold and GNU ld)",
            real.display()
        )
    })
}

/// `name` in `$PATH`, skipping `skip` (the wrapper directory itself).
fn find_in_path(name: &str, skip: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.canonicalize().ok().as_deref() != Some(skip))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `p` as one single-quoted shell word.
fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn output_forms() {
        assert_eq!(output_of(&args(&["-o", "a", "x.o"])), Some("a".into()));
        assert_eq!(output_of(&args(&["-ob"])), Some("b".into()));
        assert_eq!(
            output_of(&args(&["--output=c", "-o", "d"])),
            Some("d".into())
        );
        assert_eq!(output_of(&args(&["x.o"])), None);
    }

    #[test]
    fn left_alone_when_the_build_orders_or_scripts_itself() {
        assert!(why_not_ordered(&args(&["--symbol-ordering-file=x"])).is_some());
        assert!(why_not_ordered(&args(&["-T", "s.ld"])).is_some());
        assert!(why_not_ordered(&args(&["-Ts.ld"])).is_some());
        assert!(why_not_ordered(&args(&["@rsp"])).is_some());
        assert!(why_not_ordered(&args(&["-r"])).is_some());
        assert!(why_not_ordered(&args(&["-Ttext=0x1000", "-pie", "-o", "a"])).is_none());
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

    // $COLLECT_GCC_OPTIONS as gcc 12 sets it: the last of -ffunction-sections and
    // -fno-function-sections wins; the text inside another option (a macro's value, with its
    // quotes written '\'') is not an option.
    #[test]
    fn function_sections_from_collect_gcc_options() {
        let on = |s: &str| gcc_function_sections(Some(OsStr::new(s)));
        assert!(on(
            "'-O2' '-flto=auto' '-ffunction-sections' '-fuse-ld=gold' '-B' '/tmp/w/' '-o' 'x' '-mtune=generic' '-march=x86-64' '-dumpdir' 'x.'"
        ));
        assert!(!on("'-O2' '-flto=auto' '-fuse-ld=gold' '-o' 'x'"));
        assert!(!on("'-ffunction-sections' '-fno-function-sections'"));
        assert!(on("'-fno-function-sections' '-ffunction-sections'"));
        assert!(!on(r"'-DX='\''-ffunction-sections'\'''"));
        assert!(on(r"'-DX='\''a b'\''' '-ffunction-sections'"));
        assert!(!gcc_function_sections(None));
    }

    // gcc's `-plugin FILE` loads a plugin; `-plugin-opt=...` alone does not.
    #[test]
    fn plugin_on_the_command_line() {
        assert!(has_plugin(&args(&[
            "-plugin",
            "/x/liblto_plugin.so",
            "-o",
            "a"
        ])));
        assert!(has_plugin(&args(&["--plugin=/x/LLVMgold.so"])));
        assert!(!has_plugin(&args(&["-plugin-opt=O2", "-o", "a"])));
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

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(sh_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
