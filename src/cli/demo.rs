//! `sediment demo [--dir DIR] [--via callgrind|perf] [--build-only] [--json]`: the whole pipeline on the
//! built-in example program (`demo/`, described in `docs/guide/demo.md`).
//!
//! The passes, each one function below and each timed on standard error:
//! 1. write the sources (embedded in this executable) into DIR: `main.c`, `unit.h`, and 40
//!    two-line `unitNN.c` wrappers that set UNIT/NEXT and include `unit.h`;
//! 2. compile them with gcc, `-O2 -ffunction-sections -fno-omit-frame-pointer
//!    -fno-toplevel-reorder`, in parallel;
//! 3. link `demo-default` with gcc's default linker and no ordering;
//! 4. call the pipeline's stages as a user's commands would: `record` (into `prof.sprof`),
//!    `order` (C3, into `demo.order`), then per installed linker (lld, gold, GNU ld) `link`
//!    (into `order.<linker>`), the driver flags `link-flags` prints, and a gcc relink with
//!    them into `demo-<linker>`;
//! 5. the `measure` stage (`sediment compare`'s) on the default link and every relinked
//!    binary, printed as one table.
//!
//! `-fno-toplevel-reorder` keeps gcc's output order equal to the source's definition order.
//! Without it gcc 12 emits the static helpers first and the externally visible hot functions
//! last in each object, which happens to cluster this example's hot code; a real program's hot
//! functions sit wherever their authors wrote them, which is what the flag reproduces.
//!
//! Without `--dir`, the work happens in a temporary directory removed at the end.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use sediment_link::{Linker, PieMode};
use sediment_order::{Algorithm, CallGraph};
use sediment_profile::FunctionOrder;

use crate::fsio;
use crate::pipeline::{self, import, link, measure, record};

/// The example's sources, embedded so that the demo needs nothing but the executable.
const MAIN_C: &str = include_str!("../../demo/main.c");
const UNIT_H: &str = include_str!("../../demo/unit.h");
/// Number of `unitNN.c` translation units (must match the `UNITS` list in `demo/main.c`).
const UNITS: usize = 40;
/// Compiler flags of every object (see the module comment for `-fno-toplevel-reorder`).
const CFLAGS: [&str; 4] = [
    "-O2",
    "-ffunction-sections",
    "-fno-omit-frame-pointer",
    "-fno-toplevel-reorder",
];
/// Linkers the demo relinks with, in table order: (`sediment link` name, executable to probe).
const LINKERS: [(&str, &str); 3] = [("lld", "ld.lld"), ("gold", "ld.gold"), ("bfd", "ld.bfd")];

/// Arguments of `sediment demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Work directory (created if missing; files are overwritten). Default: a temporary
    /// directory removed at the end.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Profiler used by `sediment record`.
    #[arg(long, default_value = "callgrind", value_parser = ["callgrind", "perf"])]
    pub via: String,
    /// Only write the sources, compile, and link `demo-default`.
    #[arg(long)]
    pub build_only: bool,
    /// Print the comparison as JSON (`sediment compare --json`) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `sediment demo`.
pub fn run(args: Args) -> Result<()> {
    let tmp;
    let dir: PathBuf = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .with_context(|| format!("{}: cannot create", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("sediment-demo-")
                .tempdir()
                .context("cannot create a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };

    let t = Instant::now();
    let sources = write_sources(&dir)?;
    let objects = compile(&dir, &sources)?;
    link_default(&dir, &objects)?;
    eprintln!(
        "demo: built {} objects and demo-default in {} ({:.1} s)",
        objects.len(),
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    if args.build_only {
        return Ok(());
    }

    let t = Instant::now();
    record_and_order(&dir, &args.via)?;
    eprintln!(
        "demo: recorded and ordered ({:.1} s)",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let order_path = dir.join("demo.order");
    let order = FunctionOrder::from_text(&fsio::read_text(&order_path)?)
        .map_err(|e| anyhow!("{}: {e}", order_path.display()))?;
    let object_paths: Vec<PathBuf> = objects.iter().map(|o| dir.join(o)).collect();
    let inventory = link::read_inventory(&object_paths)?;
    let mut binaries = vec!["demo-default".to_string()];
    for (linker, probe) in LINKERS {
        if !tool_runs(probe) {
            eprintln!("demo: {probe} not found, skipping {linker}");
            continue;
        }
        binaries.push(relink(&dir, linker, &order, &inventory, &objects)?);
    }
    eprintln!(
        "demo: relinked with {} linkers ({:.1} s)",
        binaries.len() - 1,
        t.elapsed().as_secs_f64()
    );

    // Pass 5: the measure stage, as `sediment compare` runs it; the table (or JSON) goes
    // straight to our standard output.
    let paths: Vec<PathBuf> = binaries.iter().map(|b| dir.join(b)).collect();
    let compared = measure::compare(
        &paths,
        &[],
        &sediment_measure::onepass::OnePassOptions::default(),
        &|_, _| {},
    )?;
    for n in &compared.notes {
        eprintln!("demo: {n}");
    }
    for w in &compared.warnings {
        eprintln!("demo: warning: {w}");
    }
    let text = if args.json {
        sediment_measure::format_json(&compared.columns)
    } else {
        format!(
            "{}{}\n",
            sediment_measure::format_table(&compared.columns),
            sediment_measure::FOOTPRINT_NOTE
        )
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Pass 1: writes `main.c`, `unit.h` and the unit wrappers; returns the `.c` files to compile.
fn write_sources(dir: &Path) -> Result<Vec<String>> {
    fsio::write_atomic(&dir.join("main.c"), MAIN_C.as_bytes())?;
    fsio::write_atomic(&dir.join("unit.h"), UNIT_H.as_bytes())?;
    let mut sources = vec!["main.c".to_string()];
    for k in 0..UNITS {
        let next = if k + 1 < UNITS { (k + 1) as i64 } else { -1 };
        let name = format!("unit{k:02}.c");
        let text = format!("#define UNIT {k}\n#define NEXT {next}\n#include \"unit.h\"\n");
        fsio::write_atomic(&dir.join(&name), text.as_bytes())?;
        sources.push(name);
    }
    Ok(sources)
}

/// Pass 2: compiles every source to an object in `dir`, on as many cores as there are;
/// returns the object names in source order (the link order).
fn compile(dir: &Path, sources: &[String]) -> Result<Vec<String>> {
    let objects: Vec<String> = sources.iter().map(|s| s.replace(".c", ".o")).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let errors: std::sync::Mutex<Vec<(usize, String)>> = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= sources.len() {
                    break;
                }
                let r = run_tool(
                    dir,
                    "gcc",
                    CFLAGS.iter().map(|s| s.to_string()).chain([
                        "-c".into(),
                        sources[i].clone(),
                        "-o".into(),
                        objects[i].clone(),
                    ]),
                );
                if let Err(e) = r {
                    errors
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, format!("{e:#}")));
                }
            });
        }
    });
    let mut errors = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    // Report the first failing source in source order, whichever thread saw it first.
    errors.sort();
    if let Some((_, e)) = errors.into_iter().next() {
        bail!(e);
    }
    Ok(objects)
}

/// Pass 3: the default link, no ordering.
fn link_default(dir: &Path, objects: &[String]) -> Result<()> {
    let args = ["-o".to_string(), "demo-default".to_string()]
        .into_iter()
        .chain(objects.iter().cloned());
    run_tool(dir, "gcc", args)?;
    Ok(())
}

/// Pass 4, first half: the `record` stage on `demo-default` (profiles written as `sediment
/// record -o prof.sprof` writes them), then the `order` stage (C3) into `demo.order`.
fn record_and_order(dir: &Path, via: &str) -> Result<()> {
    let command = [dir.join("demo-default").display().to_string()];
    let imported = record::record(&record::Request {
        via: if via == "perf" {
            record::Via::Perf
        } else {
            record::Via::Callgrind
        },
        command: &command,
        mode: None,
        whole: false,
        quiet: true,
        keep_partial: false,
        duration: None,
    })?;
    let prof_path = dir.join("prof.sprof");
    let out = import::outputs(&prof_path, imported)?;
    fsio::write_profiles(&out.as_set(), &out.warnings)?;
    let profile = fsio::read_profile(&prof_path)?;
    let graph = CallGraph::from_profile(&profile);
    let order = pipeline::order::order(&profile, &prof_path, &graph, Algorithm::C3)?;
    fsio::write_atomic(&dir.join("demo.order"), order.to_text().as_bytes())
}

/// Pass 4, per linker: the `link` stage emits the linker's ordering input for `order` into
/// `order.<linker>`, and gcc relinks with the driver flags for it into `demo-<linker>`.
/// Returns the binary's name.
fn relink(
    dir: &Path,
    linker: &str,
    order: &FunctionOrder,
    inventory: &[sediment_elf::objects::ObjectFile],
    objects: &[String],
) -> Result<String> {
    let kind: Linker = linker.parse()?;
    let linked = link::link(link::Request {
        linker: kind,
        order,
        objects: inventory,
        lto: false,
        bfd: link::Bfd::Ask {
            ld: "ld.bfd".to_string(),
            pie: PieMode::Pie,
        },
    })
    .map_err(|e| anyhow!("demo.order: {e}"))?;
    let input = format!("order.{linker}");
    fsio::write_atomic(&dir.join(&input), linked.emitted.text.as_bytes())?;
    let flags = sediment_link::flags(kind, &input, Some(&linked.emitted.text));
    let binary = format!("demo-{linker}");
    let args = ["-o".to_string(), binary.clone()]
        .into_iter()
        .chain(objects.iter().cloned())
        .chain(
            flags
                .iter()
                .flat_map(|f| f.split_ascii_whitespace().map(str::to_string)),
        );
    run_tool(dir, "gcc", args)?;
    Ok(binary)
}

/// Runs an external tool in `dir`; fails with its name, status and last error line.
fn run_tool(dir: &Path, tool: &str, args: impl IntoIterator<Item = String>) -> Result<Output> {
    let args: Vec<OsString> = args.into_iter().map(OsString::from).collect();
    let out = Command::new(tool)
        .args(&args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {tool} (is it installed?)"))?;
    if !out.status.success() {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut cmd = format!("{tool} {}", shown.join(" "));
        if cmd.len() > 120 {
            cmd.truncate(117);
            cmd.push_str("...");
        }
        bail!(
            "`{cmd}` failed ({}): {}",
            out.status,
            last_line(&out.stderr)
        );
    }
    Ok(out)
}

/// True when `tool --version` runs successfully.
fn tool_runs(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The last non-empty line of a tool's standard error.
fn last_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no error message")
        .trim()
        .to_string()
}
