//! `sediment merge`: several weighted profiles of one executable -> one profile.
//!
//! `sediment merge -o OUT -w 2 -p a.sprof -p b.sprof -w 0.5 -p c.sprof`: each profile given
//! with `-p` (or as a plain argument; `-f`, `--file` are old spellings) takes the weight of the most recent `-w` before it, 1.0
//! when there is none, as in the seed's `gen_profile_merge`. The arithmetic (normalization to a
//! common scale, exact sums, one rounding) is `sediment_profile::merge`, run by the `merge`
//! stage ([`crate::pipeline::merge::merge`]); this file only pairs weights with files, calls
//! the stage and writes atomically.
//!
//! The pairing depends on the order of `-w` and `-p` on the command line, which clap's derive
//! cannot express, so [`Args`] implements clap's traits by hand and reads argument positions.

use crate::fsio;
use crate::pipeline::merge;
use anyhow::{bail, Result};
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use std::path::PathBuf;

/// Arguments of `sediment merge`.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    /// Where to write the merged profile.
    pub output: PathBuf,
    /// The inputs with their weights, in command-line order.
    pub inputs: Vec<(f64, PathBuf)>,
    /// A `-w` that no profile followed (an error: it would silently do nothing).
    pub dangling_weight: Option<f64>,
    /// Merge even when the inputs name different binaries, build-ids or architectures.
    pub force: bool,
}

fn parse_weight(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
        _ => Err(format!("`{s}` is not a finite number >= 0")),
    }
}

impl clap::FromArgMatches for Args {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        // (position on the command line, weight) and (position, file), merged by position.
        let weights: Vec<(usize, f64)> = match (m.indices_of("weight"), m.get_many("weight")) {
            (Some(i), Some(v)) => i.zip(v.copied()).collect(),
            _ => Vec::new(),
        };
        let mut files: Vec<(usize, PathBuf)> = Vec::new();
        for id in ["file", "profiles"] {
            if let (Some(i), Some(v)) = (m.indices_of(id), m.get_many::<PathBuf>(id)) {
                files.extend(i.zip(v.cloned()));
            }
        }
        files.sort_by_key(|(i, _)| *i);
        let weight_before = |pos: usize| {
            weights
                .iter()
                .take_while(|(i, _)| *i < pos)
                .last()
                .map_or(1.0, |(_, w)| *w)
        };
        let inputs = files
            .into_iter()
            .map(|(pos, path)| (weight_before(pos), path))
            .collect();
        let last_file = m
            .indices_of("file")
            .into_iter()
            .flatten()
            .chain(m.indices_of("profiles").into_iter().flatten())
            .max();
        let dangling_weight = weights
            .last()
            .filter(|(i, _)| last_file.map_or(true, |f| *i > f))
            .map(|(_, w)| *w);
        Ok(Args {
            output: m.get_one::<PathBuf>("output").cloned().unwrap_or_default(),
            inputs,
            dangling_weight,
            force: m.get_flag("force"),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for Args {
    fn augment_args(cmd: Command) -> Command {
        cmd.arg(
            Arg::new("output")
                .short('o')
                .long("output")
                .value_name("FILE")
                .required(true)
                .value_parser(value_parser!(PathBuf))
                .help("Where to write the merged profile"),
        )
        .arg(
            Arg::new("weight")
                .short('w')
                .long("weight")
                .value_name("W")
                .action(ArgAction::Append)
                .allow_negative_numbers(true)
                .value_parser(parse_weight)
                .help("Weight of the profiles that follow (default 1.0; each input is first scaled to a total self weight of 10^9)"),
        )
        .arg(
            Arg::new("file")
                .short('p')
                .long("profile")
                .short_alias('f')
                .alias("file")
                .value_name("FILE")
                .action(ArgAction::Append)
                .value_parser(value_parser!(PathBuf))
                .help("A profile to merge, with the most recent -w"),
        )
        .arg(
            Arg::new("profiles")
                .value_name("PROFILE")
                .num_args(0..)
                .action(ArgAction::Append)
                .value_parser(value_parser!(PathBuf))
                .help("More profiles, like -p"),
        )
        .arg(
            Arg::new("force")
                .long("force")
                .action(ArgAction::SetTrue)
                .help("Merge even when the inputs name different binaries, build-ids or architectures"),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Runs `sediment merge`.
pub fn run(args: Args) -> Result<()> {
    if args.inputs.is_empty() {
        bail!("merge: no input profiles (give them with -p FILE)");
    }
    if let Some(w) = args.dangling_weight {
        bail!("merge: -w {w} after the last profile applies to nothing");
    }
    // One input in memory at a time (see the stage).
    let merged = merge::merge(&args.inputs, args.force)?;
    fsio::write_atomic(&args.output, merged.to_text().as_bytes())
}
