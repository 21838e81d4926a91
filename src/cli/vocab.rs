//! The shared vocabulary of the command line: the value parsers, help texts and environment
//! variables every verb that takes the same noun uses, so one noun has one flag, one value name
//! and one meaning everywhere. The table is `docs/reference/vocabulary.md`; the test
//! `tests/it/vocabulary.rs` walks the command tree and holds every verb to it.
//!
//! | noun | spelling |
//! |---|---|
//! | Sediment profile | `-p, --profile FILE` |
//! | an input ELF binary (one) | `--binary FILE`; positional `BINARY...` only where several are compared |
//! | raw profiler output | positional `INPUT...` (with `--format` where several formats are read) |
//! | an order file | `--order FILE` |
//! | output | `-o, --output FILE` (`DIR` where a verb writes a directory) |
//! | profile directory | `--prof-dir DIR`, environment `SEDIMENT_PROF_DIR` (alias `PROF_DIR`) |
//! | workload arguments | after `--` |
//!
//! Environment variables are read through this module and listed in the help of every verb
//! that reads them ([`RECORD_ENV_HELP`], [`LINK_TIME_ENV_HELP`], [`INPUT_LIMIT_ENV_HELP`]). The profile directory is the
//! one variable several verbs share; clap's own `env` is not used for it because clap counts a
//! value from the environment as given on the command line, which would make `-o OUT` conflict
//! with an exported `SEDIMENT_PROF_DIR`, and because it takes a single variable name (no alias).

use sediment_order::Algorithm;
use std::ffi::OsString;

/// `--algorithm`'s value, in every verb that takes one (`order`, `blocks plan`).
pub fn parse_algorithm(name: &str) -> Result<Algorithm, String> {
    Algorithm::from_name(name).map_err(|e| e.to_string())
}

/// Clap parser for a profile's weight (`-w W` of `merge`, `--weight W` of `export`): a finite
/// number `>= 0`.
pub fn parse_weight(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
        _ => Err(format!("`{s}` is not a finite number >= 0")),
    }
}

/// Checks `--stdin FILE` (`compare`, `stat --layouts`, `align`): a file every run of the
/// workload reads as its standard input, opened afresh for each run. Checked once, before any
/// run starts, so a wrong one is one line: a file, a device such as /dev/null or a pipe can be
/// read; a directory cannot.
pub fn check_stdin(path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let meta =
        std::fs::metadata(path).with_context(|| format!("{}: cannot open", path.display()))?;
    if meta.is_dir() {
        anyhow::bail!(
            "{}: a directory, not a file to read (--stdin)",
            path.display()
        );
    }
    Ok(())
}

/// The environment variable naming the profile directory.
pub const PROF_DIR_ENV: &str = "SEDIMENT_PROF_DIR";
/// Its older spelling, still honoured when [`PROF_DIR_ENV`] is unset.
pub const PROF_DIR_ENV_ALIAS: &str = "PROF_DIR";

/// The profile directory named by the environment: the first of `SEDIMENT_PROF_DIR` and
/// `PROF_DIR` that is set, with the variable's name (for messages). A set but empty variable
/// means "no profile directory" (it hides the alias, so `SEDIMENT_PROF_DIR=` turns a build's
/// ordering off even where `PROF_DIR` is exported).
pub fn prof_dir_from_env() -> Option<(&'static str, OsString)> {
    [PROF_DIR_ENV, PROF_DIR_ENV_ALIAS]
        .into_iter()
        .find_map(|v| std::env::var_os(v).map(|d| (v, d)))
        .filter(|(_, d)| !d.is_empty())
}

/// The help section of the linker shims (`wrappers`, and the `ld` they run): the variables read
/// at each link.
pub const LINK_TIME_ENV_HELP: &str = "Environment (read at each link):
  SEDIMENT_PROF_DIR    Profile directory: DIR/<output base name>.sprof is the link's profile
                       (alias: PROF_DIR, read when SEDIMENT_PROF_DIR is unset; empty: none)
  SEDIMENT_ALGORITHM   Ordering algorithm, as `sediment order --algorithm` (default: c3)
  SEDIMENT_VERBOSE     When set, say on stderr why a link was left unordered
  SEDIMENT_MIN_SHARE   Least share (0 to 1) of the profile's weight that must be in the link's
                       functions, else it links unordered as a stale profile (default: 0.5)
  SEDIMENT_MAX_INPUT_BYTES  Bytes a link's response files (@FILE) may hold together
                       (default: 4 GiB; each file at most 1 GiB)
  SEDIMENT_MAX_MEMORY  Bytes the shim may hold while it expands them (default: three
                       quarters of the machine's memory)
  COLLECT_GCC_OPTIONS  Set by gcc: whether a GCC LTO link has -ffunction-sections";

/// Parses a `SHARE`, a number from 0 to 1 (docs/reference/vocabulary.md), as every option and
/// variable spelled `SHARE` takes it.
pub fn parse_share(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("'{text}' is not a share between 0 and 1")),
    }
}

/// `--no-demangle`, in the verbs whose reports or warnings name functions (`diff`, `match`,
/// `export --format gv`, `link`, `sim`, `compare`, `order`): they show C++ and Rust names
/// demangled by default; this flag shows them as the symbol table spells them. Profiles, order
/// files and linker inputs always keep the symbol names.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct Demangle {
    /// Show function names as the symbol table spells them (mangled) instead of demangled (C++, Rust).
    #[arg(long = "no-demangle")]
    pub no_demangle: bool,
}

impl Demangle {
    /// A report label (`name` or `name (file)`) as this flag says to show it.
    pub fn show<'a>(&self, label: &'a str) -> std::borrow::Cow<'a, str> {
        if self.no_demangle {
            std::borrow::Cow::Borrowed(label)
        } else {
            sediment_profile::demangle_label(label)
        }
    }

    /// A warning line with the symbol names in it shown as this flag says.
    pub fn text<'a>(&self, line: &'a str) -> std::borrow::Cow<'a, str> {
        if self.no_demangle {
            std::borrow::Cow::Borrowed(line)
        } else {
            sediment_profile::demangle_text(line)
        }
    }
}

/// A duration in seconds (`--duration 2.5`): a finite number above zero.
pub fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(std::time::Duration::from_secs_f64(s)),
        _ => Err(format!("`{text}` is not a number of seconds above 0")),
    }
}

/// The help section of a verb that bounds what one run reads (`import`, `record`).
pub const INPUT_LIMIT_ENV_HELP: &str = "Environment:
  SEDIMENT_MAX_INPUT_BYTES  Bytes one run may read from its inputs and the binaries they name,
                            together, when --max-input-bytes is not given (default: 4 GiB)
  SEDIMENT_MAX_MEMORY       Bytes the run may hold while it imports, when --max-memory is not
                            given (default: three quarters of the machine's memory)";

/// The help section of `record`: the profile directory, and the input limit of its import.
pub const RECORD_ENV_HELP: &str = "Environment:
  SEDIMENT_PROF_DIR         Profile directory when --prof-dir is not given (alias: PROF_DIR,
                            read when SEDIMENT_PROF_DIR is unset; an empty value means none)
  SEDIMENT_MAX_INPUT_BYTES  Bytes the import of the recording may read, its output and the
                            binaries it names together (default: 4 GiB)
  SEDIMENT_MAX_MEMORY       Bytes the run may hold while it imports the recording (default:
                            three quarters of the machine's memory)";
