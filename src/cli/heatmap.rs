//! `sediment heatmap BIN... [-p PROFILE] -o OUT.svg`: a picture of where the executed code
//! sits in each binary (`sediment_explain::heatmap`): one row per 4 KiB page, one cell per
//! 64-byte line, coloured by the profile's weight, the binaries side by side on one scale.
//! Weights are bound to each binary's symbols by key, as in `sediment diff`, so one profile
//! serves a default and a reordered build of the same program; a profile too little of whose
//! weight names functions of any of the binaries is refused (a profile of another program).
//! Without a profile every function is grey: the picture then only shows where code is.

use crate::fsio;
use crate::pipeline::measure::read_weights;
use anyhow::Result;
use sediment_elf::Binary;
use std::path::{Path, PathBuf};

/// Arguments of `sediment heatmap`.
#[derive(clap::Args)]
pub struct Args {
    /// The binaries to draw, left to right.
    #[arg(required = true, value_name = "BINARY")]
    pub binaries: Vec<PathBuf>,
    /// Profile giving the weights (of any of the binaries' builds).
    #[arg(short = 'p', long = "profile", value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Where to write the SVG picture.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
}

/// Runs `sediment heatmap`.
pub fn run(args: Args) -> Result<()> {
    let mut binaries = Vec::with_capacity(args.binaries.len());
    for path in &args.binaries {
        binaries.push((path.as_path(), fsio::read_binary(path)?));
    }
    let pairs: Vec<(&Path, &Binary)> = binaries.iter().map(|(p, b)| (*p, b)).collect();
    let weights = read_weights(args.profile.as_deref(), &pairs)?;
    let panels: Vec<_> = binaries
        .iter()
        .map(|(path, b)| {
            (
                path.display().to_string(),
                sediment_explain::Placed::of_binary(b, &weights),
            )
        })
        .collect();
    fsio::write_atomic(
        &args.output,
        sediment_explain::heatmap::svg(&panels).as_bytes(),
    )
}
