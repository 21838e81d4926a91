//! `sediment link` and `sediment link-flags`: the order, checked against the object files,
//! turned into the chosen linker's input (see `docs/design/linkers.md`).
//!
//! Read the order -> read every object and archive into an inventory
//! ([`link::read_inventory`]) -> the `link` stage ([`link::link`]: resolve the order against
//! the inventory, (GNU ld only) ask `ld` for its version and default script, emit) -> print the
//! counted warnings -> write the file atomically.
//!
//! `--unseen-by-name` is for links whose objects are not all at hand: cargo links the final
//! crate from objects rustc writes to a temporary directory and deletes, while the
//! dependencies' and the standard library's objects sit in `.rlib` archives (ar archives the
//! inventory reads). The order is then resolved as for a link with LTO inputs
//! (`sediment_link::resolve_lto`): entries found in the given objects are checked as usual,
//! the others are written by name in their place, and the linked output is what confirms them.

use crate::fsio;
use crate::pipeline::link;
use anyhow::{anyhow, Result};
use sediment_link::{Linker, PieMode};
use sediment_profile::FunctionOrder;
use std::path::{Path, PathBuf};

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
    /// Write the order's entries found in none of the OBJECTs by name, in their place, instead
    /// of dropping them: for code whose objects are not at hand (the final crate of a cargo
    /// build, compiled to temporary objects; give the `.rlib` archives of the dependencies and
    /// the standard library as OBJECTs). Check the linked output with `sediment verify`.
    #[arg(long)]
    unseen_by_name: bool,
    #[command(flatten)]
    pub demangle: super::vocab::Demangle,
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
    let objects = link::read_inventory(&args.objects)?;
    if let Some(w) = link::lto_warning(&objects) {
        eprintln!("sediment link: warning: {}", args.demangle.text(&w));
    }
    let pie = if args.no_pie {
        PieMode::NoPie
    } else {
        PieMode::Pie
    };
    let linked = link::link(link::Request {
        linker,
        order: &order,
        objects: &objects,
        lto: args.unseen_by_name,
        bfd: link::Bfd::Ask { ld: args.ld, pie },
    })
    .map_err(|e| match e {
        link::Error::Resolve(e) => anyhow!("{}: {e}", args.order.display()),
        link::Error::Emit(e) => {
            // The warnings say what was skipped and why; the error alone names only the first.
            if let sediment_link::Error::NothingEmitted { warnings, .. } = &e {
                for w in warnings {
                    eprintln!("sediment link: warning: {}", args.demangle.text(w));
                }
            }
            e.into()
        }
        e => e.into(),
    })?;
    let (res, out) = (linked.resolution, linked.emitted);
    for w in &out.warnings {
        eprintln!("sediment link: warning: {}", args.demangle.text(w));
    }
    if !res.runtime.is_empty() {
        eprintln!("sediment link: {}", runtime_note(&res.runtime));
    }
    fsio::write_atomic(&args.output, out.text.as_bytes())?;
    if args.unseen_by_name {
        eprintln!(
            "sediment link: {} entries found in no object written by name (--unseen-by-name)",
            res.lto.len()
        );
    }
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

/// The one line about the order's entries that are the C runtime's start-up code.
fn runtime_note(runtime: &[sediment_profile::FuncKey]) -> String {
    let names: Vec<String> = runtime
        .iter()
        .take(4)
        .map(|k| sediment_profile::escape(&k.name))
        .collect();
    format!(
        "{} entries are the C runtime's start-up code ({}{}), which the compiler driver links from its own objects: left where the linker puts them",
        runtime.len(),
        names.join(", "),
        if runtime.len() > names.len() { ", ..." } else { "" }
    )
}
