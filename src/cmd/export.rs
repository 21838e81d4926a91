//! `sediment export --format fdata -p PROFILE -o OUT`: writes a profile in another tool's format,
//! so a Sediment profile can feed BOLT (`llvm-bolt -data OUT`) and old users can move between
//! the two. Only call edges are exported: fdata has no way to state self weight that BOLT would
//! not read as a branch (see `sediment_import::fdata::write`).

use crate::fsio;
use anyhow::{Context, Result};
use sediment_profile::Profile;
use std::path::PathBuf;

/// Formats `sediment export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// BOLT `.fdata`, LBR form: one `caller -> callee` branch line per call edge.
    Fdata,
}

/// Arguments of `sediment export`.
#[derive(clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// The Sediment profile to export.
    #[arg(short = 'p', long = "profile", value_name = "PROFILE")]
    pub profile: PathBuf,
    /// Where to write the result.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
}

/// Runs `sediment export`.
pub fn run(args: Args) -> Result<()> {
    let text = fsio::read_text(&args.profile)?;
    let profile = Profile::from_text(&text).with_context(|| args.profile.display().to_string())?;
    let written = match args.format {
        Format::Fdata => sediment_import::fdata::write(&profile),
    };
    if written.skipped_edges > 0 {
        eprintln!(
            "sediment: warning: {} call edges have names fdata cannot spell (whitespace, `/`) and were left out",
            written.skipped_edges
        );
    }
    fsio::write_atomic(&args.output, written.text.as_bytes())?;
    eprintln!(
        "sediment: wrote {} ({} call edges)",
        args.output.display(),
        profile.edges.len() - written.skipped_edges
    );
    Ok(())
}
