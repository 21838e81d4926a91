//! `sediment export --format fdata|lld-call-graph|gv -p PROFILE... -o OUT`: writes profiles in
//! another tool's format, so a Sediment profile can feed BOLT (`llvm-bolt -data OUT`), lld's own
//! C3 (`--call-graph-ordering-file OUT`) or Graphviz, and old users can move between them.
//!
//! - `fdata` (one profile): BOLT's `no_lbr` sample form, one line per instruction offset the
//!   profile's samples name (profiles recorded with instruction addresses: `record`, perf and
//!   callgrind imports), so BOLT counts every block that ran; a function without samples gets
//!   one line at its entry with its self weight. No call lines: BOLT's sample form has none
//!   (see `sediment_import::fdata::write`).
//! - `lld-call-graph` (one profile): `caller callee weight` lines, mangled names; edges of a
//!   name several functions share (same-named statics) are left out and counted (see
//!   `sediment_link::call_graph`).
//! - `gv` (one or more profiles): the historical Sediment call graph, one DOT cluster per
//!   profile in the order given, edge labels as fractions (see `sediment_import::gv`). Several
//!   profiles of one recording (`app.sprof`, `app.libfoo.so.sprof`) make one graph.
//! - `parquet` (one or more profiles): Sediment's Parquet table (`sediment_parquet`,
//!   docs/design/parquet.md), one submission per profile, each with the id
//!   `submission_id` gives it and the weight of `--weight` (default 1): a fleet's profiles as one dataset.

use crate::fsio;
use anyhow::{bail, Result};
use std::path::PathBuf;

/// Formats `sediment export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// BOLT `.fdata`, `no_lbr` sample form: the profile's per-instruction samples at their function offsets, or each function's self weight at its entry when the profile has none (`llvm-bolt -data=FILE`).
    Fdata,
    /// lld's `--call-graph-ordering-file`: one `caller callee weight` line per call edge, for lld's own C3.
    LldCallGraph,
    /// The historical Sediment `.gv` call graph: Graphviz DOT, one cluster per profile.
    Gv,
    /// Sediment's Parquet table (docs/design/parquet.md): one submission per profile.
    Parquet,
}

/// Arguments of `sediment export`.
#[derive(clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// The Sediment profile to export (`gv`: repeat for one cluster per profile; `parquet`:
    /// repeat for one submission per profile).
    #[arg(short = 'p', long = "profile", value_name = "FILE", required = true)]
    pub profile: Vec<PathBuf>,
    /// parquet: the weight of every submission written (its `weight` column; as `-w` of
    /// `sediment merge`, applied after each profile is normalised; default 1).
    #[arg(short = 'w', long = "weight", value_name = "W", value_parser = super::vocab::parse_weight)]
    pub weight: Option<f64>,
    /// Where to write the result.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// `gv` only (the other formats are read by tools and keep symbol names).
    #[command(flatten)]
    pub demangle: super::vocab::Demangle,
}

/// Runs `sediment export`.
pub fn run(args: Args) -> Result<()> {
    let mut profiles = Vec::with_capacity(args.profile.len());
    for path in &args.profile {
        profiles.push(fsio::read_profile(path)?);
    }
    if args.weight.is_some() && args.format != Format::Parquet {
        bail!("--weight is for --format parquet (its `weight` column)");
    }
    if matches!(args.format, Format::Fdata | Format::LldCallGraph) && profiles.len() != 1 {
        bail!(
            "{}: {} describes one binary; give one profile ({} given)",
            args.profile[1].display(),
            match args.format {
                Format::Fdata => "fdata",
                _ => "a call-graph ordering file",
            },
            profiles.len()
        );
    }
    match args.format {
        Format::Fdata => {
            let profile = &profiles[0];
            let written = sediment_import::fdata::write(profile);
            if written.skipped_functions > 0 {
                eprintln!(
                    "sediment: warning: {} functions have names fdata cannot spell (whitespace, `/`) and were left out",
                    written.skipped_functions
                );
            }
            fsio::write_atomic(&args.output, written.text.as_bytes())?;
            eprintln!(
                "sediment: wrote {} (no_lbr samples: {} functions, {} at {} instruction offsets; call edges are not written)",
                args.output.display(),
                written.functions,
                written.with_offsets,
                written.offsets
            );
            if written.with_offsets == 0 && written.functions > 0 {
                eprintln!(
                    "sediment: note: {} has no instruction addresses (recorded by an older version, or imported from a source without them): BOLT gets each function's weight at its entry only, so the block counts inside functions are unknown to it",
                    args.profile[0].display()
                );
            }
        }
        Format::LldCallGraph => {
            let file = sediment_link::call_graph::write(&profiles[0]);
            if file.ambiguous > 0 {
                eprintln!(
                    "sediment: warning: {} call edges left out: their names belong to several functions (same-named statics), which lld cannot tell apart",
                    file.ambiguous
                );
            }
            if file.unsafe_names > 0 {
                eprintln!(
                    "sediment: warning: {} call edges left out: names with characters an order file cannot hold",
                    file.unsafe_names
                );
            }
            fsio::write_atomic(&args.output, file.text.as_bytes())?;
            eprintln!(
                "sediment: wrote {} ({} call edges; link with -Wl,--call-graph-ordering-file={})",
                args.output.display(),
                file.edges,
                args.output.display()
            );
        }
        Format::Gv => {
            let demangle = !args.demangle.no_demangle;
            let text =
                sediment_import::gv::write_with(&profiles, demangle).map_err(|e| match e {
                    sediment_import::Error::NameTooLong {
                        index,
                        what,
                        name,
                        len,
                        limit,
                    } => anyhow::anyhow!(
                    "{}: {what} `{name}` is {len} bytes written, longer than the {limit} bytes \
                     a Graphviz string may hold: cannot export it as gv",
                    args.profile[index].display()
                ),
                    e => e.into(),
                })?;
            fsio::write_atomic(&args.output, text.as_bytes())?;
            let edges: usize = profiles.iter().map(|p| p.edges.len()).sum();
            eprintln!(
                "sediment: wrote {} ({} clusters, {edges} call edges)",
                args.output.display(),
                profiles.len()
            );
        }
        Format::Parquet => {
            let ids = submission_ids(&profiles);
            let weight = args.weight.unwrap_or(1.0);
            let names: Vec<String> = args
                .profile
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            let rows: Vec<(&str, f64, &str, &sediment_profile::Profile)> = profiles
                .iter()
                .zip(&ids)
                .zip(&names)
                .map(|((p, id), name)| (id.as_str(), weight, name.as_str(), p))
                .collect();
            let bytes = sediment_parquet::write(&rows)?;
            fsio::write_atomic(&args.output, &bytes)?;
            eprintln!(
                "sediment: wrote {} ({} profiles)",
                args.output.display(),
                profiles.len()
            );
        }
    }
    Ok(())
}

/// The id of a submission: the XXH3-64 of its profile's text in hex, so the same profile gets
/// the same id wherever it is exported; a copy given twice in one export gets `.2`, `.3`, ...
fn submission_id(text: &str) -> String {
    format!("{:016x}", twox_hash::XxHash3_64::oneshot(text.as_bytes()))
}

/// [`submission_id`] of every profile, numbered where one export repeats a profile.
fn submission_ids(profiles: &[sediment_profile::Profile]) -> Vec<String> {
    let mut seen = std::collections::HashMap::new();
    profiles
        .iter()
        .map(|p| {
            let id = submission_id(&p.to_text());
            let n = seen.entry(id.clone()).or_insert(0u32);
            *n += 1;
            if *n == 1 {
                id
            } else {
                format!("{id}.{n}")
            }
        })
        .collect()
}
