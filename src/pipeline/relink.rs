//! Relinking one program's objects into layouts that differ only in where the code lands:
//! the layouts of `sediment noise --vary shift`, of `sediment stat --layouts` and of
//! `sediment align --build`.
//!
//! A layout is the objects linked by the compiler driver with, optionally, a *pad* object: one
//! `.text.0sediment_pad` section of `BYTES` zero bytes (alignment 1, so the shift is exact),
//! written as a two-line assembler file and assembled with `CC -c`. Placed first on the link
//! line it moves every function of the objects (a pad before the code); placed after an
//! object it moves only the code of the objects after it, as growth at the end of that object
//! would (an unrelated change in an early file). With GNU ld's default script, sections placed
//! before plain `.text.*` (`.text.startup`, `.text.hot`, `.text.unlikely`) and the C runtime's
//! code do not move. When a link argument names an ordering file and the pad goes first, each
//! layout links with a copy that lists the pad first ([`pad_first`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::fsio;

/// Default pad step of `noise --vary shift` and `stat --layouts`, in bytes. 80 = one 64-byte cache line plus 16: each
/// step moves every function to another I-cache set and, because gcc aligns functions to 16
/// bytes, also to another of the four 16-byte positions within a line, so consecutive
/// variants differ both in set mapping and in which functions straddle a line.
pub const DEFAULT_PAD_STEP: u64 = 80;

/// Largest pad a layout may get: 64 MiB, far beyond any cache or TLB reach.
pub const MAX_PAD_BYTES: u64 = 64 << 20;

/// Where a layout's pad goes on the link line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadAt {
    /// Before every input: all the objects' code moves.
    First,
    /// Right after the input at this index: only the code of the inputs after it moves.
    After(usize),
}

/// One layout to link.
pub struct Layout<'a> {
    /// The compiler driver that links (and assembles the pad).
    pub cc: &'a str,
    /// The link line's inputs: objects, archives, driver flags, in order.
    pub inputs: &'a [OsString],
    /// Extra arguments after the inputs (ordering files among them get the pad first).
    pub link_args: &'a [String],
    /// The pad: its size in bytes and where it goes; `None`: no pad.
    pub pad: Option<(u64, PadAt)>,
    /// Driver flags after everything else (e.g. lld's `--shuffle-sections`).
    pub flags: &'a [String],
}

/// Links `layout` into `output`, writing its pad and ordering-file copies into `dir` under
/// names tagged `tag` (unique per layout).
pub fn link_layout(layout: &Layout<'_>, dir: &Path, tag: &str, output: &Path) -> Result<()> {
    let mut link: Vec<OsString> = Vec::new();
    let pad = match layout.pad {
        Some((bytes, at)) => Some((write_pad(layout.cc, dir, tag, bytes)?.into_os_string(), at)),
        None => None,
    };
    if let Some((p, PadAt::First)) = &pad {
        link.push(p.clone());
    }
    for (i, input) in layout.inputs.iter().enumerate() {
        link.push(input.clone());
        if let Some((p, PadAt::After(j))) = &pad {
            if *j == i {
                link.push(p.clone());
            }
        }
    }
    if matches!(pad, Some((_, PadAt::First))) {
        for a in layout.link_args {
            link.push(pad_first(a, dir, tag)?.into());
        }
    } else {
        link.extend(layout.link_args.iter().map(OsString::from));
    }
    link.extend(layout.flags.iter().map(OsString::from));
    link.push("-o".into());
    link.push(output.as_os_str().to_owned());
    run_cc(layout.cc, &link)
}

/// Links every layout into `dir` as `PREFIX-NNNN` (fixed width, so that the path, and thus the
/// stack contents at start-up, has the same length in every layout); returns the binaries in
/// order. `labels` name the layouts in errors.
pub fn link_layouts(
    layouts: &[Layout<'_>],
    labels: &[String],
    dir: &Path,
    prefix: &str,
) -> Result<Vec<PathBuf>> {
    let _t = super::timings::stage("link");
    let mut binaries = Vec::with_capacity(layouts.len());
    for (i, (layout, label)) in layouts.iter().zip(labels).enumerate() {
        let tag = format!("{prefix}-{i:04}");
        let binary = dir.join(&tag);
        link_layout(layout, dir, &tag, &binary)
            .with_context(|| format!("linking variant {label} with {}", layout.cc))?;
        binaries.push(binary);
    }
    Ok(binaries)
}

/// Copies of `objects` in `dir` (named `NNNN-NAME`, in the order given) with every executable
/// section's alignment set to `align`, lowered or raised (`sediment_elf::realign::set_alignment`):
/// the objects as `-falign-functions=ALIGN` with `-ffunction-sections` would have given them,
/// without recompiling. Archives are refused (extract their members first).
pub fn aligned_copies(objects: &[PathBuf], align: u64, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let mut copies = Vec::with_capacity(objects.len());
    for (i, path) in objects.iter().enumerate() {
        let data = fsio::read_bytes(path)?;
        let shown = path.display().to_string();
        let (bytes, _) = sediment_elf::realign::set_alignment(&shown, &data, |_| Some(align))?;
        let name = path.file_name().map_or_else(
            || format!("object-{i}"),
            |n| n.to_string_lossy().into_owned(),
        );
        let copy = dir.join(format!("{i:04}-{name}"));
        fsio::write_atomic(&copy, &bytes)?;
        copies.push(copy);
    }
    Ok(copies)
}

/// A link argument with every ordering file it names replaced by a copy in `dir` that puts
/// the pad first; other arguments are returned unchanged.
///
/// Without this the pad would move nothing when an order is in use: lld and gold place the
/// listed sections first and the unlisted pad after them, and a GNU ld script lists the
/// ordered sections before the `.text.*` catch-all that takes the pad. So an lld
/// `--symbol-ordering-file` gets the pad's symbol as its first line, a gold
/// `--section-ordering-file` the pad's section, and a GNU ld script or 2.43 ordering fragment
/// (`-T`, `--section-ordering-file` with a `.text :` block, as `sediment link` writes them) a
/// `*(.text.0sediment_pad)` line at the top of its `.text` block. Arguments are read the way
/// `sediment link-flags` prints them: `-Wl,` followed by comma-separated linker arguments.
pub fn pad_first(arg: &str, dir: &Path, tag: &str) -> Result<String> {
    let Some(list) = arg.strip_prefix("-Wl,") else {
        return Ok(arg.to_string());
    };
    let mut items: Vec<String> = list.split(',').map(str::to_string).collect();
    let mut n = 0;
    for j in 0..items.len() {
        let (prefix, file) = if let Some(f) = items[j].strip_prefix("--symbol-ordering-file=") {
            ("--symbol-ordering-file=", f.to_string())
        } else if let Some(f) = items[j].strip_prefix("--section-ordering-file=") {
            ("--section-ordering-file=", f.to_string())
        } else if j > 0 && items[j - 1] == "-T" {
            ("", items[j].clone())
        } else {
            continue;
        };
        let text = fsio::read_text(Path::new(&file))?;
        let padded = if prefix == "--symbol-ordering-file=" {
            format!("{PAD_SYMBOL}\n{text}")
        } else if let Some(at) = text.find(".text :\n  {\n") {
            let at = at + ".text :\n  {\n".len();
            format!("{}    *({PAD_SECTION})\n{}", &text[..at], &text[at..])
        } else if prefix.is_empty() {
            bail!("{file}: a linker script without a `.text :` block; cannot place the pad before the ordered code");
        } else {
            format!("{PAD_SECTION}\n{text}")
        };
        let copy = dir.join(format!("order-{tag}-{n}"));
        n += 1;
        fsio::write_atomic(&copy, padded.as_bytes())?;
        items[j] = format!("{prefix}{}", copy.display());
    }
    Ok(format!("-Wl,{}", items.join(",")))
}

/// Name of the pad's section: sorts before every `.text.NAME` of a C program, so that GNU ld's
/// default `*(.text .text.*)` takes it first.
const PAD_SECTION: &str = ".text.0sediment_pad";

/// The pad's global symbol, for lld's symbol-ordering file.
const PAD_SYMBOL: &str = "sediment_pad";

/// Writes and assembles the pad object of layout `tag`: one `.text.0sediment_pad` section of
/// `bytes` zero bytes (alignment 1, so the shift is exact) with the global symbol
/// `sediment_pad` at its start, and a non-executable stack note so that the pad does not make
/// the program's stack executable.
fn write_pad(cc: &str, dir: &Path, tag: &str, bytes: u64) -> Result<PathBuf> {
    let source = dir.join(format!("pad-{tag}.s"));
    let object = dir.join(format!("pad-{tag}.o"));
    let text = format!(
        ".section {PAD_SECTION},\"ax\",@progbits\n.globl {PAD_SYMBOL}\n{PAD_SYMBOL}:\n\
         .skip {bytes}\n.section .note.GNU-stack,\"\",@progbits\n"
    );
    fsio::write_atomic(&source, text.as_bytes())?;
    let args: Vec<OsString> = vec![
        "-c".into(),
        source.clone().into_os_string(),
        "-o".into(),
        object.clone().into_os_string(),
    ];
    run_cc(cc, &args).with_context(|| format!("{}: cannot assemble the pad", source.display()))?;
    Ok(object)
}

/// Runs the compiler driver; fails with its status and last error line.
pub fn run_cc(cc: &str, args: &[OsString]) -> Result<()> {
    let out = Command::new(cc)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {cc} (is it installed?)"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{cc} failed ({}): {}",
            out.status,
            sediment_profile::quote_whole(failure_line(&stderr))
        );
    }
    Ok(())
}

/// The line of a failed compiler driver's stderr that says why. The driver's own closing line
/// ("collect2: error: ld returned 1 exit status", clang's "linker command failed") says
/// nothing; the linker's last error line before it does (lld follows it with `>>>` lines of
/// detail), else its last line.
fn failure_line(stderr: &str) -> &str {
    let said: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("collect2:") && !l.contains("linker command failed")
        })
        .collect();
    said.iter()
        .rev()
        .find(|l| l.contains("error"))
        .or(said.last())
        .copied()
        .unwrap_or("no error message")
}

#[cfg(test)]
mod tests {
    use super::*;

    // The reason a link failed: lld's error line, not its `>>>` detail or the driver's
    // closing line; a message without "error" gives its last line.
    #[test]
    fn failure_line_is_the_linkers_error() {
        let lld =
            "ld.lld: error: duplicate symbol: counter\n>>> defined at b.c\n>>> b.o:(.bss+0x0)\n\
                   collect2: error: ld returned 1 exit status\n";
        assert_eq!(
            failure_line(lld),
            "ld.lld: error: duplicate symbol: counter"
        );
        assert_eq!(failure_line("warning: a\nsomething odd\n"), "something odd");
        assert_eq!(
            failure_line("collect2: error: ld returned 1\n"),
            "no error message"
        );
    }

    // Each ordering file named by a link argument is copied with the pad first: the symbol
    // for lld, the section for gold, a line at the top of the `.text` block for a GNU ld
    // script; other arguments pass through.
    #[test]
    fn ordering_files_get_the_pad_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sym = d.join("a.sym");
        std::fs::write(&sym, "hot\nwarm\n").unwrap();
        let sec = d.join("a.sec");
        std::fs::write(&sec, ".text.hot\n").unwrap();
        let script = d.join("a.ld");
        std::fs::write(
            &script,
            "# x\nSECTIONS\n{\n  .text :\n  {\n    *(.text.hot)\n",
        )
        .unwrap();
        let read = |arg: &str| {
            let path = arg.rsplit([',', '=']).next().unwrap();
            std::fs::read_to_string(path).unwrap()
        };
        let a = pad_first(
            &format!("-Wl,--symbol-ordering-file={}", sym.display()),
            d,
            "0003",
        )
        .unwrap();
        assert!(a.starts_with("-Wl,--symbol-ordering-file=") && a.ends_with("order-0003-0"));
        assert_eq!(read(&a), "sediment_pad\nhot\nwarm\n");
        let a = pad_first(
            &format!("-Wl,--section-ordering-file={}", sec.display()),
            d,
            "0001",
        )
        .unwrap();
        assert_eq!(read(&a), ".text.0sediment_pad\n.text.hot\n");
        let a = pad_first(&format!("-Wl,-T,{}", script.display()), d, "0002").unwrap();
        assert_eq!(
            read(&a),
            "# x\nSECTIONS\n{\n  .text :\n  {\n    *(.text.0sediment_pad)\n    *(.text.hot)\n"
        );
        assert_eq!(
            pad_first("-fuse-ld=lld", d, "0000").unwrap(),
            "-fuse-ld=lld"
        );
        assert_eq!(
            pad_first("-Wl,--gc-sections", d, "0000").unwrap(),
            "-Wl,--gc-sections"
        );
        std::fs::write(&script, "SECTIONS {}\n").unwrap();
        assert!(pad_first(&format!("-Wl,-T,{}", script.display()), d, "0004").is_err());
    }
}
