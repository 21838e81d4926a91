//! The linker's command line, as a compiler driver hands it to `ld` (what the linker shims of
//! `sediment wrappers` see): where the output goes, whether the build already orders or
//! scripts the link itself, whether a linker plugin (LTO) is loaded, which arguments are in
//! input position, and which option makes each linker read Sediment's ordering input. Also the
//! two version lines Sediment reads: `LINKER --version` (which linker) and GNU ld's (whether it
//! takes a section-ordering fragment or needs a full script).
//!
//! Options are those of GNU ld, gold and lld, from `ld --help` and `ld.lld --help`: one or two
//! dashes, a value attached (`-oFILE`, `--output=FILE`) or as the next argument
//! ([`SEPARATE_VALUE`]). Arguments are bytes ([`OsString`]), not text: a path need not be UTF-8.
//!
//! Pure, like the rest of the crate: the caller opens the files (their first
//! [`INPUT_HEAD_BYTES`] bytes tell an input's kind, [`input_kind`]), runs the linker for its
//! version line and reads `$COLLECT_GCC_OPTIONS`.

use crate::{BfdFlavor, Linker, PieMode};
use sediment_elf::objects::Lto;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The value of `-o FILE`, `-oFILE`, `--output FILE` or `--output=FILE` (the last one wins, as
/// in the linkers).
pub fn output_of(args: &[OsString]) -> Option<OsString> {
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

/// Why this command line must be left alone, if it must. Response files (`@FILE`) are expanded
/// before ([`crate::response::expand`]); one left on the line is a file that could not be
/// read, a literal argument the linker reports itself.
pub fn why_not_ordered(args: &[OsString]) -> Option<&'static str> {
    for a in args {
        let b = a.as_bytes();
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

/// Whether the link makes a shared object (`-shared`, `-Bshareable`).
pub fn is_shared(args: &[OsString]) -> bool {
    args.iter()
        .any(|a| a == "-shared" || a == "--shared" || a == "-Bshareable")
}

/// The options of the command line that choose GNU ld's default script, as `ld --verbose`
/// takes them to print that script (ld picks one of its built-in scripts by these: the
/// `.xs*` family for `-shared`, `.xd*` for `-pie`, and within a family by `-z combreloc`,
/// `-z relro` with `-z now`, `-z separate-code`, `-z text`): `-shared` for a shared object,
/// else `-pie` or `-no-pie` ([`pie_mode`]), then every `-z KEYWORD` (or `-zKEYWORD`) as
/// given, in order, and the emulation (`-m NAME`, `-mNAME`), which names another target's
/// scripts. Options with characters outside [`crate::emit::is_safe_mode_arg`] are left out:
/// none of ld's keywords has them.
pub fn script_mode_args(args: &[OsString]) -> Vec<String> {
    let mut out = vec![if is_shared(args) {
        "-shared".to_string()
    } else {
        pie_mode(args).verbose_args().remove(0)
    }];
    let safe = |v: &OsString| {
        v.to_str()
            .filter(|s| crate::emit::is_safe_mode_arg(s))
            .map(str::to_string)
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let b = a.as_bytes();
        let (flag, value) = match b {
            b"-z" | b"-m" => (a.to_string_lossy().into_owned(), it.next().and_then(safe)),
            b"-mllvm" => {
                it.next();
                continue;
            }
            _ if b.len() > 2 && (b.starts_with(b"-z") || b.starts_with(b"-m")) => (
                String::from_utf8_lossy(&b[..2]).into_owned(),
                safe(&OsStr::from_bytes(&b[2..]).to_os_string()),
            ),
            _ => continue,
        };
        if let Some(v) = value {
            out.push(flag);
            out.push(v);
        }
    }
    out
}

/// The PIE mode of the link: [`PieMode::Pie`] with `-pie` or `--pic-executable`, else
/// [`PieMode::NoPie`].
pub fn pie_mode(args: &[OsString]) -> PieMode {
    if args.iter().any(|a| a == "-pie" || a == "--pic-executable") {
        PieMode::Pie
    } else {
        PieMode::NoPie
    }
}

/// Whether a linker plugin is loaded (`-plugin FILE`, `--plugin=FILE`; not `-plugin-opt`).
pub fn has_plugin(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        let b = a.as_bytes();
        b == b"-plugin"
            || b == b"--plugin"
            || b.starts_with(b"-plugin=")
            || b.starts_with(b"--plugin=")
    })
}

/// Why a link with LTO inputs `lto` (display name, kind) cannot be ordered, if it cannot:
/// GCC's code generation without `-ffunction-sections` among the link-time options
/// (`collect_gcc_options`, the value of `$COLLECT_GCC_OPTIONS`: see [`gcc_function_sections`]),
/// which then puts every function of a partition in one `.text`.
pub fn why_not_after_lto(
    lto: &[(String, Lto)],
    collect_gcc_options: Option<&OsStr>,
) -> Option<String> {
    let (gcc, _) = lto
        .iter()
        .find(|(_, kind)| matches!(kind, Lto::Gcc { .. }))?;
    if gcc_function_sections(collect_gcc_options) {
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
pub fn gcc_function_sections(options: Option<&OsStr>) -> bool {
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
pub fn linker_options(linker: Linker, bfd: &BfdFlavor, file: &Path) -> Vec<OsString> {
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

/// What an input argument of the link is, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// An ELF relocatable object (GCC LTO objects included) or a static archive: read whole.
    Objects,
    /// LLVM bitcode: LTO input, not read further.
    Bitcode,
}

/// How many first bytes of a file [`input_kind`] looks at.
pub const INPUT_HEAD_BYTES: usize = 18;

/// The kind of a file from its first bytes (at most [`INPUT_HEAD_BYTES`]; fewer when the file
/// is shorter); `None` for anything else (shared objects, linker scripts, short files).
pub fn input_kind(head: &[u8]) -> Option<InputKind> {
    let n = head.len();
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

/// The arguments that may name an input file: every one not starting with `-`. Option values
/// given as the next argument (the dynamic linker, the LTO plugin) are among them; their file
/// kind ([`input_kind`]) tells them apart.
pub fn input_candidates(args: &[OsString]) -> impl Iterator<Item = &OsString> {
    args.iter().filter(|a| !a.as_bytes().starts_with(b"-"))
}

/// One argument of a link in input position, in command-line order: a file named as such, or
/// a library named with `-l` ([`link_input_args`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputArg<'a> {
    /// An argument not starting with `-` ([`input_candidates`]).
    File(&'a OsString),
    /// `-lNAME`, `-l NAME`, `--library[=]NAME` (or `-l:FILE`): the files the linker would take
    /// for it, in the order it tries them; it takes the first that exists.
    Library(Vec<PathBuf>),
}

/// The arguments that may name an input file ([`input_candidates`]) and the libraries named
/// with `-l`, in command-line order, each library as the files the linker tries for it, the
/// way GNU ld, gold and lld search (`ld --help`, GNU ld's manual, "-l namespec"):
/// - the directories are every `-L DIR` / `-LDIR` / `--library-path[=]DIR` of the command
///   line, in their order, wherever they stand (all of them apply to every `-l`), then
///   `default_dirs` (the linker's built-in search path), unless `-nostdlib` is given;
/// - `-l:FILE` is `DIR/FILE`; `-lNAME` is `DIR/libNAME.so` then `DIR/libNAME.a` in each
///   directory in turn (a shared library found first wins), or `DIR/libNAME.a` only after
///   `-Bstatic` (also spelled `-static`, `-dn`, `-non_shared`) until `-Bdynamic` (`-dy`,
///   `-call_shared`): the mode is positional, as in the linkers.
///
/// A `-l` whose files exist nowhere is kept (an empty or missing-file list) so the caller sees
/// every request; the linker reports it as missing itself.
pub fn link_input_args<'a>(args: &'a [OsString], default_dirs: &[PathBuf]) -> Vec<InputArg<'a>> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut nostdlib = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let b = a.as_bytes();
        if b == b"-L" || b == b"--library-path" || b == b"-library-path" {
            if let Some(d) = it.next() {
                dirs.push(PathBuf::from(d));
            }
        } else if let Some(d) = b
            .strip_prefix(b"--library-path=")
            .or_else(|| b.strip_prefix(b"-library-path="))
            .or_else(|| b.strip_prefix(b"-L").filter(|d| !d.is_empty()))
        {
            dirs.push(PathBuf::from(OsStr::from_bytes(d)));
        } else if b == b"-nostdlib" || b == b"--nostdlib" {
            nostdlib = true;
        }
    }
    if !nostdlib {
        dirs.extend(default_dirs.iter().cloned());
    }
    let library = |spec: &[u8], static_only: bool| -> InputArg<'a> {
        let mut files = Vec::new();
        if let Some(file) = spec.strip_prefix(b":") {
            files.extend(dirs.iter().map(|d| d.join(OsStr::from_bytes(file))));
        } else {
            let name = |ext: &str| {
                let mut n = b"lib".to_vec();
                n.extend_from_slice(spec);
                n.extend_from_slice(ext.as_bytes());
                OsString::from_vec(n)
            };
            for d in &dirs {
                if !static_only {
                    files.push(d.join(name(".so")));
                }
                files.push(d.join(name(".a")));
            }
        }
        InputArg::Library(files)
    };
    let mut out = Vec::new();
    let mut static_only = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let b = a.as_bytes();
        match b {
            b"-Bstatic" | b"-static" | b"-dn" | b"-non_shared" | b"--Bstatic" | b"--static" => {
                static_only = true
            }
            b"-Bdynamic" | b"-dy" | b"-call_shared" | b"--Bdynamic" => static_only = false,
            b"-L" | b"--library-path" | b"-library-path" => {
                it.next();
            }
            b"-l" | b"--library" | b"-library" => {
                if let Some(spec) = it.next() {
                    out.push(library(spec.as_bytes(), static_only));
                }
            }
            _ => {
                if let Some(spec) = b
                    .strip_prefix(b"--library=")
                    .or_else(|| b.strip_prefix(b"-library="))
                    .or_else(|| b.strip_prefix(b"-l").filter(|s| !s.is_empty()))
                {
                    out.push(library(spec, static_only));
                } else if !b.starts_with(b"-") {
                    out.push(InputArg::File(a));
                }
            }
        }
    }
    out
}

/// The directories of `SEARCH_DIR("...")` in GNU ld's default linker script (the output of
/// `ld --verbose`), in order: its built-in library search path. A leading `=` stands for the
/// sysroot, which is `/` for a native linker; the directory is taken as it follows the `=`.
pub fn search_dirs_of_script(verbose_output: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for mut rest in verbose_output.split("SEARCH_DIR(\"").skip(1) {
        if let Some(end) = rest.find('"') {
            rest = &rest[..end];
            out.push(PathBuf::from(rest.strip_prefix('=').unwrap_or(rest)));
        }
    }
    out
}

/// Options of GNU ld, gold and lld that take their value as the next argument (given with one
/// or two dashes), from `ld --help` and `ld.lld --help`: that value is not an input file.
/// Attached forms (`-LDIR`, `--script=FILE`) are one argument and need no entry.
pub const SEPARATE_VALUE: &[&str] = &[
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

/// The arguments in input position: neither an option nor the value of one
/// ([`SEPARATE_VALUE`]).
pub fn input_arguments(args: &[OsString]) -> Vec<&OsString> {
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
        out.push(a);
    }
    out
}

/// Which linker printed `first` as the first line of its `--version`; `None` for one Sediment
/// does not know.
pub fn linker_from_version(first: &str) -> Option<Linker> {
    if first.contains("LLD") {
        Some(Linker::Lld)
    } else if first.contains("gold") {
        Some(Linker::Gold)
    } else if first.contains("mold") {
        Some(Linker::Mold)
    } else if first.starts_with("GNU ld") {
        Some(Linker::Bfd)
    } else {
        None
    }
}

/// `GNU ld (GNU Binutils for Debian) 2.40` -> (2, 40): the last token that reads as N.M.
pub fn parse_ld_version(line: &str) -> Option<(u32, u32)> {
    line.split_whitespace().rev().find_map(|tok| {
        let mut parts = tok.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    })
}

/// Whether GNU ld of version `(major, minor)` reads a `--section-ordering-file` fragment
/// (2.43 and later); older ones need a full script made from their default script.
pub fn bfd_reads_ordering_file(version: (u32, u32)) -> bool {
    version >= (2, 43)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn libs(line: &[&str], defaults: &[&str]) -> Vec<Vec<String>> {
        let line = args(line);
        let defaults: Vec<PathBuf> = defaults.iter().map(PathBuf::from).collect();
        link_input_args(&line, &defaults)
            .into_iter()
            .filter_map(|a| match a {
                InputArg::Library(f) => Some(f.iter().map(|p| p.display().to_string()).collect()),
                InputArg::File(_) => None,
            })
            .collect()
    }

    // Every -L applies to every -l wherever it stands, before the default path; .so before .a
    // in each directory, .a only while -Bstatic (or -static) holds.
    #[test]
    fn libraries_are_searched_as_the_linker_does() {
        assert_eq!(
            libs(&["-lx", "-L", "a", "-Lb"], &["/usr/lib"]),
            [vec![
                "a/libx.so",
                "a/libx.a",
                "b/libx.so",
                "b/libx.a",
                "/usr/lib/libx.so",
                "/usr/lib/libx.a"
            ]]
        );
        assert_eq!(
            libs(
                &[
                    "-La",
                    "-Bstatic",
                    "-l",
                    "x",
                    "-Bdynamic",
                    "--library=y",
                    "-static",
                    "-lz"
                ],
                &[]
            ),
            [
                vec!["a/libx.a"],
                vec!["a/liby.so", "a/liby.a"],
                vec!["a/libz.a"]
            ]
        );
        // -l:FILE names the file; -nostdlib drops the default path.
        assert_eq!(
            libs(
                &["-l:libq.a", "--library-path=d", "-nostdlib"],
                &["/usr/lib"]
            ),
            [vec!["d/libq.a"]]
        );
        // The value of `-l NAME` and `-L DIR` is not a file argument; the rest keep their order.
        let line = args(&["a.o", "-l", "x", "-L", "dir", "b.o"]);
        let got = link_input_args(&line, &[]);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], InputArg::File(&line[0]));
        assert_eq!(
            got[1],
            InputArg::Library(vec![
                PathBuf::from("dir/libx.so"),
                PathBuf::from("dir/libx.a")
            ])
        );
        assert_eq!(got[2], InputArg::File(&line[5]));
    }

    #[test]
    fn search_dirs_of_gnu_ld_script() {
        let script = r#"SEARCH_DIR("=/usr/local/lib/x86_64-linux-gnu"); SEARCH_DIR("=/lib"); SEARCH_DIR("/opt/lib");"#;
        assert_eq!(
            search_dirs_of_script(script),
            [
                PathBuf::from("/usr/local/lib/x86_64-linux-gnu"),
                PathBuf::from("/lib"),
                PathBuf::from("/opt/lib")
            ]
        );
    }

    // The options that choose ld's default script, as gcc hands them over.
    #[test]
    fn script_mode_from_the_command_line() {
        assert_eq!(
            script_mode_args(&args(&[
                "-plugin",
                "x.so",
                "--build-id",
                "-m",
                "elf_x86_64",
                "-shared",
                "-o",
                "libx.so",
                "-z",
                "relro",
                "-znow",
                "a.o",
                "-lc",
                "-z",
                "bad*/"
            ])),
            ["-shared", "-m", "elf_x86_64", "-z", "relro", "-z", "now"]
        );
        assert_eq!(
            script_mode_args(&args(&["-pie", "-o", "a", "a.o"])),
            ["-pie"]
        );
        assert_eq!(script_mode_args(&args(&["-o", "a", "a.o"])), ["-no-pie"]);
        // `-mllvm`, `-m32`-like driver spellings never reach ld; `-melf_i386` is an emulation.
        assert_eq!(
            script_mode_args(&args(&["-melf_i386", "-o", "a"])),
            ["-no-pie", "-m", "elf_i386"]
        );
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
        assert!(why_not_ordered(&args(&["-r"])).is_some());
        assert!(why_not_ordered(&args(&["-Ttext=0x1000", "-pie", "-o", "a"])).is_none());
    }

    // What gcc's driver passes (option values that are no files: `elf_x86_64`, `now`, a map
    // not yet written) is not in input position; the object is.
    #[test]
    fn input_arguments_skip_option_values() {
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
        assert_eq!(
            input_arguments(&line),
            [&OsString::from("/nonexistent/gone.o")]
        );
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
        let elf = |e_type: u8| {
            let mut h = b"\x7fELF\x02\x01\x01".to_vec();
            h.resize(16, 0);
            h.extend_from_slice(&[e_type, 0, 0x3e, 0]);
            h.truncate(INPUT_HEAD_BYTES);
            h
        };
        assert_eq!(input_kind(b"BC\xC0\xDE\x35\x14"), Some(InputKind::Bitcode));
        assert_eq!(
            input_kind(b"\xDE\xC0\x17\x0B\0\0\0\0"),
            Some(InputKind::Bitcode)
        );
        assert_eq!(input_kind(&elf(1)), Some(InputKind::Objects));
        assert_eq!(input_kind(b"!<arch>\n"), Some(InputKind::Objects));
        assert_eq!(input_kind(&elf(3)), None);
        assert_eq!(input_kind(b"INPUT(a.o)\n"), None);
        assert_eq!(input_kind(b"BC"), None);
        assert_eq!(input_kind(b""), None);
    }

    #[test]
    fn linkers_by_version_line() {
        assert_eq!(
            linker_from_version("LLD 14.0.6 (compatible with GNU linkers)"),
            Some(Linker::Lld)
        );
        assert_eq!(
            linker_from_version("GNU gold (GNU Binutils for Debian 2.40) 1.16"),
            Some(Linker::Gold)
        );
        assert_eq!(
            linker_from_version("GNU ld (GNU Binutils for Debian) 2.40"),
            Some(Linker::Bfd)
        );
        assert_eq!(
            linker_from_version("mold 1.10.1 (compatible with GNU ld)"),
            Some(Linker::Mold)
        );
        assert_eq!(linker_from_version("something else"), None);
    }

    #[test]
    fn ld_versions() {
        assert_eq!(
            parse_ld_version("GNU ld (GNU Binutils for Debian) 2.40"),
            Some((2, 40))
        );
        assert_eq!(
            parse_ld_version("GNU ld (GNU Binutils) 2.43.1"),
            Some((2, 43))
        );
        assert_eq!(parse_ld_version("nonsense"), None);
        assert!(bfd_reads_ordering_file((2, 43)) && !bfd_reads_ordering_file((2, 40)));
    }
}
