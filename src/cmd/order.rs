//! `sediment order`: profile -> function order.
//!
//! Reads a profile, runs one ordering algorithm of `sediment-order` on it, and writes the
//! linker-neutral order file atomically. Only functions the profile saw are listed; the linker
//! places all others after them in its default order.
//!
//! `--fill-from STATIC.sprof` extends the order with functions a static call graph (GCC
//! `-fcallgraph-info`, imported with `sediment import --format gcc-callgraph`) reaches from the
//! ordered ones, placed after them (`sediment_order::fill`). It is an `order` option rather than
//! a `merge` input because it must not change the measured profile: the static edges only
//! decide where functions the profile never saw go, never the order of the ones it did.

use crate::fsio;
use anyhow::{anyhow, Context, Result};
use sediment_order::{fill_order, order_profile, Algorithm, FillParams};
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
    /// A static call graph (`import --format gcc-callgraph`): append the functions its edges
    /// reach from the ordered ones, after them (low confidence; never reorders the profile's).
    #[arg(long, value_name = "STATIC")]
    pub fill_from: Option<PathBuf>,
    /// With `--fill-from`: how many levels of static edges to follow.
    #[arg(long, value_name = "N", default_value_t = FillParams::default().max_depth)]
    pub fill_depth: u32,
    /// With `--fill-from`: follow static edges back to callers too, not only to callees.
    #[arg(long)]
    pub fill_callers: bool,
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
    let mut order = order_profile(&profile, args.algorithm)
        .with_context(|| format!("{}: cannot order", args.profile.display()))?;
    if let Some(path) = &args.fill_from {
        let text = fsio::read_text(path)?;
        let graph = Profile::from_text(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let params = FillParams {
            max_depth: args.fill_depth,
            callers: args.fill_callers,
        };
        let sampled = order.functions.len();
        let (filled, added) = fill_order(&order, &graph, &params)
            .with_context(|| format!("{}: cannot fill the order", path.display()))?;
        eprintln!(
            "sediment: {sampled} functions ordered from the profile, {added} added from {}",
            path.display()
        );
        order = filled;
    }
    fsio::write_atomic(&args.output, order.to_text().as_bytes())
}
