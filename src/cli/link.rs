//! `sediment link` and `sediment link-flags`: the order, checked against the object files,
//! turned into the chosen linker's input (see `docs/linkers.md`).
//!
//! The stage: read the order -> read every object and archive into an inventory ->
//! resolve the order against it -> (GNU ld only) ask `ld` for its version and default script ->
//! emit -> print the counted warnings -> write the file atomically.

use crate::fsio;
use anyhow::{anyhow, bail, Context, Result};
use sediment_link::{BfdFlavor, Linker, PieMode};
use sediment_profile::FunctionOrder;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `sediment link`.
#[derive(clap::Args)]
pub struct Args {
    /// Linker to write for: lld, gold, bfd (GNU ld) or mold.
    #[arg(long)]
    linker: String,
    /// Function order written by `sediment order`.
    #[arg(long, value_name = "FILE")]
    order: PathBuf,
    /// Output file (order file, section list or linker script).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// The final link is not position-independent (GNU ld: take the `-no-pie` default script).
    #[arg(long)]
    no_pie: bool,
    /// GNU ld program asked for its version and default script.
    #[arg(long, value_name = "PROGRAM", default_value = "ld.bfd")]
    ld: String,
    /// Object files (`.o`) and static archives (`.a`) of the program, as they will be linked.
    #[arg(required = true, value_name = "OBJECT")]
    objects: Vec<PathBuf>,
}

/// Arguments of `sediment link-flags`.
#[derive(clap::Args)]
pub struct FlagsArgs {
    /// Linker the file was written for: lld, gold, bfd or mold.
    #[arg(long)]
    linker: String,
    /// The file written by `sediment link`.
    file: String,
}

/// Runs `sediment link`.
pub fn run(args: Args) -> Result<()> {
    let linker: Linker = args.linker.parse()?;
    let order_text = fsio::read_text(&args.order)?;
    let order = FunctionOrder::from_text(&order_text)
        .map_err(|e| anyhow!("{}: {e}", args.order.display()))?;
    let objects = read_inventory(&args.objects)?;
    let lto: Vec<String> = objects
        .iter()
        .filter(|o| o.lto.is_some())
        .map(|o| o.display_name())
        .collect();
    if let Some(first) = lto.first() {
        eprintln!(
            "sediment link: warning: {} inputs are LTO objects (first: {}): the code the linker places for them is generated at link time, which this file cannot order; order LTO links through `sediment wrappers` (docs/packaging.md)",
            lto.len(),
            sediment_profile::escape(first)
        );
    }
    let res = sediment_link::resolve(&order, &objects)
        .map_err(|e| anyhow!("{}: {e}", args.order.display()))?;
    let bfd = if linker == Linker::Bfd {
        bfd_flavor(
            &args.ld,
            if args.no_pie {
                PieMode::NoPie
            } else {
                PieMode::Pie
            },
        )?
    } else {
        BfdFlavor::OrderingFile
    };
    let out = match sediment_link::emit(linker, &res, &objects, &bfd) {
        Ok(out) => out,
        Err(e) => {
            // The warnings say what was skipped and why; the error alone names only the first.
            if let sediment_link::Error::NothingEmitted { warnings, .. } = &e {
                for w in warnings {
                    eprintln!("sediment link: warning: {w}");
                }
            }
            return Err(e.into());
        }
    };
    for w in &out.warnings {
        eprintln!("sediment link: warning: {w}");
    }
    fsio::write_atomic(&args.output, out.text.as_bytes())?;
    eprintln!(
        "sediment link: {} of {} functions found; wrote {} entries for {linker} to {}",
        res.placed.len(),
        res.total,
        out.written,
        args.output.display()
    );
    if linker == Linker::Mold {
        eprintln!(
            "sediment link: mold cannot order functions itself; pre-link first: {}",
            sediment_link::flags(linker, &args.output.display().to_string(), None).join(", then ")
        );
    }
    Ok(())
}

/// Runs `sediment link-flags`. The file must exist and be what `sediment link` writes for
/// that linker ([`sediment_link::check_output`]): flags naming a missing file or another
/// linker's input would only fail later, inside the build, or link unordered.
pub fn run_flags(args: FlagsArgs) -> Result<()> {
    let linker: Linker = args.linker.parse()?;
    let contents = fsio::read_text(Path::new(&args.file))?;
    sediment_link::check_output(linker, &contents).map_err(|e| anyhow!("{}: {e}", args.file))?;
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    for line in sediment_link::flags(linker, &args.file, Some(&contents)) {
        writeln!(stdout, "{line}")?;
    }
    Ok(())
}

/// Reads every object and archive; the inventory keeps command-line order. Fails, naming the
/// inputs, when none of them defines a function (an empty archive, say): matching an order
/// against nothing would blame the order.
pub(crate) fn read_inventory(paths: &[PathBuf]) -> Result<Vec<sediment_elf::objects::ObjectFile>> {
    let all = read_objects_of(paths)?;
    check_defines_functions(paths, &all)?;
    Ok(all)
}

/// Reads every object and archive (LTO inputs included, marked), in command-line order.
pub(crate) fn read_objects_of(paths: &[PathBuf]) -> Result<Vec<sediment_elf::objects::ObjectFile>> {
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
pub(crate) fn check_defines_functions(
    paths: &[PathBuf],
    all: &[sediment_elf::objects::ObjectFile],
) -> Result<()> {
    if let [first, rest @ ..] = paths {
        if all.iter().all(|o| o.functions.is_empty()) {
            let others = match rest.len() {
                0 => String::new(),
                n => format!(" (and the {n} other inputs)"),
            };
            let lto = all.iter().filter(|o| o.lto.is_some()).count();
            let why = if lto > 0 {
                format!("LTO inputs among them: {lto}, whose functions only exist once the linker has run code generation; order such links through `sediment wrappers`, docs/packaging.md")
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
/// their own default script.
pub(crate) fn bfd_flavor(ld: &str, pie: PieMode) -> Result<BfdFlavor> {
    let version = tool_stdout(ld, &["--version"])?;
    let first = version.lines().next().unwrap_or("");
    let (major, minor) = parse_ld_version(first)
        .ok_or_else(|| anyhow!("{ld} --version: cannot read a version from `{first}`"))?;
    if (major, minor) >= (2, 43) {
        return Ok(BfdFlavor::OrderingFile);
    }
    let mode = match pie {
        PieMode::Pie => "-pie",
        PieMode::NoPie => "-no-pie",
    };
    let verbose_output = tool_stdout(ld, &["--verbose", mode])?;
    Ok(BfdFlavor::FullScript {
        verbose_output,
        pie,
    })
}

/// `GNU ld (GNU Binutils for Debian) 2.40` -> (2, 40): the last token that reads as N.M.
fn parse_ld_version(line: &str) -> Option<(u32, u32)> {
    line.split_whitespace().rev().find_map(|tok| {
        let mut parts = tok.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    })
}

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

#[cfg(test)]
mod tests {
    use super::{parse_ld_version, tool_stdout};

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
    }
}
