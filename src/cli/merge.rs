//! `sediment merge`: several weighted profiles of one executable -> one profile.
//!
//! `sediment merge -o OUT -w 2 -p a.sprof -p b.sprof -w 0.5 -p c.sprof`: each profile given
//! with `-p` (or as a plain argument; `-f`, `--file` are old spellings) takes the weight of the most recent `-w` before it, 1.0
//! when there is none, as in the seed's `gen_profile_merge`. A directory stands for its
//! `*.sprof` files and `--inputs-from LIST` adds listed inputs
//! ([`crate::pipeline::merge::expand_inputs`]); `--per-submitter`, `--half-life`/`--now` and
//! `--cap-per-submitter` set the fleet weighting ([`sediment_profile::FleetOptions`]); `-j`
//! the threads. The arithmetic (normalization to a common scale, exact sums, one rounding) is
//! `sediment_profile::merge`, run by the `merge` stage ([`crate::pipeline::merge::merge`]);
//! this file only pairs weights with files, calls the stage and writes atomically.
//!
//! **An inbox of contributor bundles** (`--prof-dir DIR`, with `--binary FILE` per binary of
//! the current build): the inputs are bundles (`record --bundle`; a directory stands for its
//! `*.sbundle` files), merged per binary into `DIR/<basename>.sprof` by
//! [`crate::pipeline::merge::merge_inbox`]; one line per bundle on stdout says what it added
//! and at which coverage, refusals and duplicates are one line each on stderr.
//!
//! The pairing depends on the order of `-w` and `-p` on the command line, which clap's derive
//! cannot express, so [`Args`] implements clap's traits by hand and reads argument positions.

use crate::fsio;
use crate::pipeline::merge;
use anyhow::{bail, Result};
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use sediment_profile::FleetOptions;
use std::path::PathBuf;

/// Arguments of `sediment merge`.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    /// Where to write the merged profile (`-o`; empty with `--prof-dir`).
    pub output: PathBuf,
    /// Inbox mode: the inputs are contributor bundles, merged per binary into this directory.
    pub prof_dir: Option<PathBuf>,
    /// Inbox mode: the current build's binaries, which bundles of other builds are matched to.
    pub binaries: Vec<PathBuf>,
    /// Inbox mode: least share of another build's profile that must land on `--binary`.
    pub min_share: f64,
    /// The inputs with their weights, in command-line order.
    pub inputs: Vec<(f64, PathBuf)>,
    /// A `-w` that no profile followed (an error: it would silently do nothing).
    pub dangling_weight: Option<f64>,
    /// Merge even when the inputs name different binaries, build-ids or architectures.
    pub force: bool,
    /// List files of further inputs (`[W,]PATH` per line).
    pub inputs_from: Vec<PathBuf>,
    /// Fleet weighting.
    pub fleet: FleetOptions,
    /// Threads (default: the number of cores).
    pub jobs: Option<usize>,
}

fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w > 0.0 => Ok(w),
        _ => Err(format!("`{s}` is not a finite number > 0")),
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
            prof_dir: m.get_one::<PathBuf>("prof-dir").cloned(),
            binaries: m
                .get_many::<PathBuf>("binary")
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
            min_share: m
                .get_one::<f64>("min-share")
                .copied()
                .unwrap_or(sediment_profile::DEFAULT_MIN_SHARE),
            inputs,
            dangling_weight,
            force: m.get_flag("force"),
            inputs_from: m
                .get_many::<PathBuf>("inputs-from")
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
            fleet: FleetOptions {
                per_submitter: m.get_flag("per-submitter"),
                half_life_days: m.get_one::<f64>("half-life").copied(),
                now: m.get_one::<i64>("now").copied(),
                cap_per_submitter: m.get_one::<f64>("cap-per-submitter").copied(),
            },
            jobs: m.get_one::<usize>("jobs").copied(),
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
                .required_unless_present("prof-dir")
                .conflicts_with("prof-dir")
                .value_parser(value_parser!(PathBuf))
                .help("Where to write the merged profile"),
        )
        .arg(
            Arg::new("prof-dir")
                .long("prof-dir")
                .value_name("DIR")
                .value_parser(value_parser!(PathBuf))
                .help("Merge an inbox of contributor bundles (`record --bundle`; a directory means every *.sbundle file in it) per binary into DIR/<basename>.sprof, each bundle one submission; prints each bundle's coverage"),
        )
        .arg(
            Arg::new("binary")
                .long("binary")
                .value_name("FILE")
                .action(ArgAction::Append)
                .requires("prof-dir")
                .value_parser(value_parser!(PathBuf))
                .help("With --prof-dir: a binary of the current build (repeat for each); profiles of other builds are matched onto it, refused when too little of their weight lands on its functions, and binaries the build does not have are left out. Default: each binary's build is the one most bundles name, others refused"),
        )
        .arg(
            Arg::new("weight")
                .short('w')
                .long("weight")
                .value_name("W")
                .action(ArgAction::Append)
                .allow_negative_numbers(true)
                .value_parser(super::vocab::parse_weight)
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
                .help("A profile to merge, with the most recent -w; a directory means every *.sprof file in it"),
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
            Arg::new("min-share")
                .long("min-share")
                .value_name("SHARE")
                .requires("binary")
                .value_parser(super::vocab::parse_share)
                .help(format!("With --binary: least share (0 to 1) of a profile of another build's weight, not counting `main` and the C runtime's start-up code, that must land on the binary's functions; below it the profile is refused (default {})", sediment_profile::DEFAULT_MIN_SHARE)),
        )
        .arg(
            Arg::new("force")
                .long("force")
                .action(ArgAction::SetTrue)
                .help("Merge even when the inputs name different binaries, build-ids or architectures"),
        )
        .arg(
            Arg::new("inputs-from")
                .long("inputs-from")
                .value_name("FILE")
                .action(ArgAction::Append)
                .value_parser(value_parser!(PathBuf))
                .help("Also merge the profiles listed in FILE, one `PATH` or `W,PATH` per line (weight W, default 1; `#` comments)"),
        )
        .arg(
            Arg::new("per-submitter")
                .long("per-submitter")
                .action(ArgAction::SetTrue)
                .help("Each submitter (`meta submitter`; an input without one is its own) counts as one input of weight 1: its inputs' weights are divided by their sum"),
        )
        .arg(
            Arg::new("half-life")
                .long("half-life")
                .value_name("DAYS")
                .value_parser(parse_positive)
                .help("Halve an input's weight for every DAYS of age (`meta recorded-at`, Unix seconds; inputs without it are not decayed)"),
        )
        .arg(
            Arg::new("now")
                .long("now")
                .value_name("UNIX_SECONDS")
                .requires("half-life")
                .allow_negative_numbers(true)
                .value_parser(value_parser!(i64))
                .help("The time ages are measured from (default: the newest `recorded-at` among the inputs)"),
        )
        .arg(
            Arg::new("cap-per-submitter")
                .long("cap-per-submitter")
                .value_name("C")
                .value_parser(parse_positive)
                .help("Scale down a submitter whose inputs' weights (after --per-submitter and --half-life) sum to more than C, to C"),
        )
        .arg(
            Arg::new("jobs")
                .short('j')
                .long("jobs")
                .value_name("N")
                .value_parser(value_parser!(usize))
                .help("Read and add inputs on N threads (default: the number of cores); the result is the same for any N"),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Runs `sediment merge`.
pub fn run(args: Args) -> Result<()> {
    if let Some(w) = args.dangling_weight {
        bail!("merge: -w {w} after the last profile applies to nothing");
    }
    if let Some(dir) = &args.prof_dir {
        return run_inbox(&args, dir);
    }
    let inputs = merge::expand_inputs(&args.inputs, &args.inputs_from)?;
    if inputs.is_empty() {
        bail!("merge: no input profiles (give them with -p FILE or --inputs-from LIST)");
    }
    let run = merge::MergeRun {
        force: args.force,
        fleet: args.fleet,
        jobs: args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
    };
    // One input in memory at a time per thread (see the stage).
    let merged = merge::merge(&inputs, &run)?;
    fsio::write_atomic(&args.output, merged.to_text().as_bytes())
}

/// `sediment merge --prof-dir DIR BUNDLE...`: the inbox merge
/// ([`crate::pipeline::merge::merge_inbox`]), its profiles written as one set into DIR, then
/// one line per bundle on stdout (what it added, at which coverage) and the refusals on
/// stderr.
fn run_inbox(args: &Args, dir: &std::path::Path) -> Result<()> {
    if args.force {
        bail!(
            "merge: --force is for -o; an inbox merge matches other builds with --binary instead"
        );
    }
    let inputs = merge::expand_inputs_of(&args.inputs, &args.inputs_from, "sbundle")?;
    if inputs.is_empty() {
        bail!("merge: no bundles (give them as arguments, a directory of *.sbundle files, or --inputs-from LIST)");
    }
    let result = merge::merge_inbox(&merge::Inbox {
        inputs: &inputs,
        binaries: &args.binaries,
        fleet: args.fleet,
        min_share: args.min_share,
    })?;
    if result.profiles.is_empty() {
        bail!("merge: no profile of these bundles is for the current build; nothing written");
    }
    let files: Vec<(PathBuf, sediment_profile::Profile)> = result
        .profiles
        .into_iter()
        .map(|(name, p)| (dir.join(format!("{name}.sprof")), p))
        .collect();
    let set: Vec<(&std::path::Path, &sediment_profile::Profile)> =
        files.iter().map(|(f, p)| (f.as_path(), p)).collect();
    let mut warnings: Vec<String> = result
        .submissions
        .iter()
        .flat_map(|s| s.refused.iter().cloned())
        .collect();
    if let Some((dup, first)) = result.duplicates.first() {
        warnings.push(format!(
            "{} duplicate submission{} counted once ({} is {}{})",
            result.duplicates.len(),
            if result.duplicates.len() == 1 {
                ""
            } else {
                "s"
            },
            dup.display(),
            first.display(),
            if result.duplicates.len() > 1 {
                ", ..."
            } else {
                ""
            }
        ));
    }
    fsio::in_dir(dir, || fsio::write_profiles(&set, &warnings))?;
    let mut out = String::new();
    for s in &result.submissions {
        use std::fmt::Write as _;
        let merged: Vec<String> = s
            .merged
            .iter()
            .map(|(name, share)| match share {
                Some(share) => format!("{} {:.1}%", sediment_profile::escape(name), 100.0 * share),
                None => format!("{} (same build)", sediment_profile::escape(name)),
            })
            .collect();
        let _ = writeln!(
            out,
            "{} ({}, submitter {}): merged {}{}{}",
            s.path.display(),
            s.id,
            s.submitter
                .as_deref()
                .map_or("-".into(), sediment_profile::escape),
            if merged.is_empty() {
                "nothing".to_string()
            } else {
                merged.join(", ")
            },
            if s.refused.is_empty() {
                String::new()
            } else {
                format!("; {} refused", s.refused.len())
            },
            if s.outside == 0 {
                String::new()
            } else {
                format!("; {} not in the build", s.outside)
            },
        );
    }
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}
