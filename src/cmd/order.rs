//! `sediment order`: profile -> function order.
//!
//! Reads a profile, runs one ordering algorithm of `sediment-order` on it, and writes the
//! linker-neutral order file atomically. Only functions the profile saw are listed; the linker
//! places all others after them in its default order.

use crate::fsio;
use anyhow::{anyhow, Context, Result};
use sediment_order::{order_profile, Algorithm};
use sediment_profile::Profile;
use std::path::PathBuf;

/// Arguments of `sediment order`.
#[derive(clap::Args)]
pub struct Args {
    /// Profile to order (a `sediment-profile 1` file from `record` or `import`).
    #[arg(short = 'p', long = "profile", value_name = "PROFILE")]
    pub profile: PathBuf,
    /// Ordering algorithm: `c3` (call-chain clustering, hfsort), `hot` (hottest first),
    /// `pettis-hansen` (greedy heaviest-edge chaining), `ext-tsp` (chain merging maximising the
    /// ExtTSP score) or `cdsort` (cache-directed sort).
    #[arg(long, value_name = "NAME", default_value = "c3", value_parser = parse_algorithm)]
    pub algorithm: Algorithm,
    /// Where to write the order file.
    #[arg(short = 'o', long = "output", value_name = "ORDER")]
    pub output: PathBuf,
}

fn parse_algorithm(name: &str) -> Result<Algorithm, String> {
    Algorithm::from_name(name).map_err(|e| e.to_string())
}

/// Runs `sediment order`.
pub fn run(args: Args) -> Result<()> {
    let text = fsio::read_text(&args.profile)?;
    let profile =
        Profile::from_text(&text).map_err(|e| anyhow!("{}: {e}", args.profile.display()))?;
    let order = order_profile(&profile, args.algorithm)
        .with_context(|| format!("{}: cannot order", args.profile.display()))?;
    fsio::write_atomic(&args.output, order.to_text().as_bytes())
}
