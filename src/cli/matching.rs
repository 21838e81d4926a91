//! `sediment match -p PROFILE --binary BIN [-o OUT] [--json]`: carry a profile over to
//! another build.
//!
//! A profile is recorded on one build and used to lay out the next: a newer version, an LTO
//! build, a build with other optimization flags. Their function symbols differ a little: a
//! static was renamed, `foo.constprop.0` became `foo`, `foo` grew a `foo.cold` part. This
//! subcommand reads the profile and the function symbols of BIN (`.symtab`, else `.dynsym`;
//! see `sediment_elf::symbols`), maps each profile function to one of BIN's with the three
//! rules of `sediment_profile::names` (same name and file; same name, other file; same name
//! once compiler clone suffixes are stripped; for Rust, same path once the build hashes are
//! removed, instances of one path told apart by symbol size), and prints how much of the profile found a home:
//! the matched share of the self weight, the functions matched per rule, and the functions
//! missing on each side (count, then the heaviest unmatched profile functions and the first
//! unmatched target functions in key order).
//!
//! With `-o`, the profile is rewritten onto BIN's names (`sediment_profile::retarget`: clones that
//! land on one function are summed, unmatched functions and their calls dropped) and takes
//! BIN's identity: `meta binary` is BIN as given on the command line, `build-id` and `arch` are
//! BIN's (a build-id of the old build is removed, not kept), sizes are BIN's symbol sizes, and
//! `meta matched-from` records the old `binary`. `total` is kept, so the weight that did not
//! match still counts as unattributed. The file is written atomically, before the report is
//! printed, so a closed stdout never costs the output.
//!
//! A profile of another program is refused before anything is written: when less than
//! `--min-share` (default [`DEFAULT_MIN_SHARE`]) of the profile's weight lands on functions BIN
//! defines, or none does, `match` fails naming both files and the share found. The share leaves
//! out the names every C program defines (`main`, `_start` and the C runtime's start-up code,
//! [`sediment_profile::generic_name`]), which say nothing about which program a profile is of;
//! [`sediment_profile::binary_share`] computes it and [`sediment_profile::require_share`] turns
//! it into that error, for every subcommand that binds a profile to a binary by name (`diff`,
//! `heatmap`, `order --refine`; `order --fill-from` for its static graph).
//!
//! Turned down: refusing a target whose architecture differs from the profile's. Names, not
//! addresses, are matched, so an x86_64 profile is a fair guide to an aarch64 build; the report
//! header shows both architectures instead.

use crate::cli::vocab;
use crate::fsio;
use anyhow::{anyhow, Result};
use sediment_elf::Binary;
use sediment_profile::{match_profile_sized, retarget, FuncKey, MatchReport, Profile, Target};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// Arguments of `sediment match`.
#[derive(clap::Args)]
pub struct Args {
    /// Profile recorded on another build (a `sediment-profile 1` file).
    #[arg(short = 'p', long = "profile", value_name = "FILE")]
    pub profile: PathBuf,
    /// The build to match it to (a linked ELF executable or shared object with symbols).
    #[arg(long, value_name = "FILE")]
    pub binary: PathBuf,
    /// Write the profile remapped onto the binary's function names here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Least share (0 to 1) of the profile's weight, not counting `main` and the C runtime's
    /// start-up code, that must land on the binary's functions; below it (or with nothing matched)
    /// the profile is taken for one of another program and nothing is written.
    #[arg(
        long,
        value_name = "SHARE",
        default_value_t = DEFAULT_MIN_SHARE,
        value_parser = vocab::parse_share
    )]
    pub min_share: f64,
    #[command(flatten)]
    pub demangle: vocab::Demangle,
}

use sediment_profile::{binary_share, DEFAULT_MIN_SHARE};

/// Runs `sediment match`.
pub fn run(args: Args) -> Result<()> {
    // Read the profile and the target's function symbols.
    let profile = fsio::read_profile(&args.profile)?;
    let binary = fsio::read_binary(&args.binary)?;
    if binary.from_dynsym {
        eprintln!(
            "sediment: warning: {} has no .symtab; matching against its exported (.dynsym) \
             functions only",
            args.binary.display()
        );
    }
    let targets: Vec<FuncKey> = binary.functions.iter().map(|s| s.key.clone()).collect();

    // Refuse a profile of another program before anything is written.
    sediment_profile::require_share(
        binary_share(&profile, &targets),
        args.min_share,
        &args.binary.display().to_string(),
    )
    .map_err(|e| anyhow!("{}: {e}", args.profile.display()))?;

    // Match by name, then write the remapped profile (before printing, see the module docs).
    let sizes: Vec<u64> = binary.functions.iter().map(|s| s.size).collect();
    let (mapping, report) = match_profile_sized(&profile, &targets, &sizes);
    if let Some(out) = &args.output {
        let target = Target {
            binary: args.binary.display().to_string(),
            build_id: binary.build_id.clone(),
            arch: Some(binary.arch.clone()),
            functions: &targets,
            sizes: &sizes,
        };
        let moved = retarget(&profile, &mapping, target);
        fsio::write_atomic(out, moved.to_text().as_bytes())?;
    }

    // Print the report.
    let text = if args.json {
        format_json(&args, &profile, &binary, &report)?
    } else {
        format_text(&args, &profile, &binary, &report)
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// The report as text: where each side came from, then the library's report.
fn format_text(args: &Args, profile: &Profile, binary: &Binary, report: &MatchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "profile: {} (binary {}, arch {}, {} functions)",
        args.profile.display(),
        profile.meta.binary,
        profile.meta.arch.as_deref().unwrap_or("unknown"),
        profile.functions.len()
    );
    let _ = writeln!(
        s,
        "target:  {} (arch {}, {} functions{})",
        args.binary.display(),
        binary.arch,
        binary.functions.len(),
        if binary.from_dynsym {
            ", from .dynsym"
        } else {
            ""
        }
    );
    if args.demangle.no_demangle {
        s.push_str(&report.to_string());
    } else {
        s.push_str(&format!("{report:#}"));
    }
    s
}

/// One side of the JSON report's `profile`: where it came from and how big it is.
#[derive(Serialize)]
struct JsonProfile<'a> {
    path: String,
    binary: &'a str,
    arch: Option<&'a str>,
    functions: usize,
}

/// The JSON report's `target`: the binary matched to.
#[derive(Serialize)]
struct JsonTarget<'a> {
    path: String,
    arch: &'a str,
    functions: usize,
    from_dynsym: bool,
}

/// Functions matched per rule of `sediment_profile::names`; the Rust counts only when the
/// Rust rule found something.
#[derive(Serialize)]
struct JsonMatched {
    exact: usize,
    other_file: usize,
    normalized: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    rust_path: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rust_ambiguous: Option<usize>,
}

/// A function named in the report; `weight` only for unmatched profile functions.
#[derive(Serialize)]
struct JsonFunction<'a> {
    name: &'a str,
    file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<u64>,
}

impl<'a> JsonFunction<'a> {
    fn new(k: &'a FuncKey, weight: Option<u64>) -> Self {
        JsonFunction {
            name: &k.name,
            file: k.file.as_deref(),
            weight,
        }
    }
}

/// Profile functions with no home in the target: the count and the heaviest.
#[derive(Serialize)]
struct JsonMissingInTarget<'a> {
    count: usize,
    heaviest: Vec<JsonFunction<'a>>,
}

/// Target functions the profile does not mention: the count and the first in key order.
#[derive(Serialize)]
struct JsonMissingInProfile<'a> {
    count: usize,
    first: Vec<JsonFunction<'a>>,
}

/// The whole `--json` report; fields serialise in declaration order, so the bytes are
/// deterministic.
#[derive(Serialize)]
struct JsonReport<'a> {
    profile: JsonProfile<'a>,
    target: JsonTarget<'a>,
    profile_weight: u64,
    matched_weight: u64,
    matched_share: f64,
    matched: JsonMatched,
    missing_in_target: JsonMissingInTarget<'a>,
    missing_in_profile: JsonMissingInProfile<'a>,
}

/// The report as one pretty-printed JSON object with a trailing newline.
fn format_json(args: &Args, profile: &Profile, binary: &Binary, r: &MatchReport) -> Result<String> {
    let rust = r.rust_path > 0 || r.rust_ambiguous > 0;
    let report = JsonReport {
        profile: JsonProfile {
            path: args.profile.display().to_string(),
            binary: &profile.meta.binary,
            arch: profile.meta.arch.as_deref(),
            functions: profile.functions.len(),
        },
        target: JsonTarget {
            path: args.binary.display().to_string(),
            arch: &binary.arch,
            functions: binary.functions.len(),
            from_dynsym: binary.from_dynsym,
        },
        profile_weight: r.profile_weight,
        matched_weight: r.matched_weight,
        matched_share: r.matched_share(),
        matched: JsonMatched {
            exact: r.exact,
            other_file: r.other_file,
            normalized: r.normalized,
            rust_path: rust.then_some(r.rust_path),
            rust_ambiguous: rust.then_some(r.rust_ambiguous),
        },
        missing_in_target: JsonMissingInTarget {
            count: r.missing_in_target,
            heaviest: r
                .heaviest_missing_in_target
                .iter()
                .map(|(k, w)| JsonFunction::new(k, Some(*w)))
                .collect(),
        },
        missing_in_profile: JsonMissingInProfile {
            count: r.missing_in_profile,
            first: r
                .first_missing_in_profile
                .iter()
                .map(|k| JsonFunction::new(k, None))
                .collect(),
        },
    };
    let mut s = serde_json::to_string_pretty(&report)?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Quotes, backslashes and control characters are escaped, the rest passes through; a
    // function without a file has a null file, and no weight key unless it has one.
    #[test]
    fn json_strings_are_escaped() {
        let key = FuncKey {
            name: "a\"b\\c\n\u{1}é".to_string(),
            file: None,
        };
        let json = serde_json::to_string(&JsonFunction::new(&key, None)).unwrap();
        assert_eq!(json, r#"{"name":"a\"b\\c\n\u0001é","file":null}"#);
        let json = serde_json::to_string(&JsonFunction::new(&key, Some(3))).unwrap();
        assert!(json.ends_with(r#""file":null,"weight":3}"#), "{json}");
    }
}
