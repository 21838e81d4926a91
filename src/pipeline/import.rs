//! The `import` stage: a profiler's output files -> one Sediment profile per binary they
//! describe, with the main executable's marked ([`sediment_import::Imported`]).
//!
//! [`import`] is the one entry, taking a [`Format`]. The readers of [`sediment_import`] parse
//! bytes and ask for the bytes of each binary through a resolver; this module opens the input
//! files and the binaries (read from the path the profiler recorded, or from
//! [`Options::binary`] for the binary of that base name) through `crate::fsio`, which refuses
//! FIFOs, devices, directories and pseudo-file-system files a stranger's profile might name.
//! Every read of one import is charged to one `fsio::ReadBudget` ([`Options::max_input_bytes`]),
//! and the object paths a profile names go through one `fsio::ObjectNames`, so that each file
//! is read once and gives one profile however many ways the profile spells its path.
//! [`outputs`] says where each profile goes (the main executable's to `OUT`, every other to
//! `OUT.<basename>.sprof`, `OUT` without its `.sprof` suffix).

use super::timings;
use crate::fsio;
use anyhow::{bail, Result};
use sediment_import::perf::Mode;
use sediment_import::report::{
    bind_warning, callgrind_command, callgrind_warnings, heaviest_binary, is_foreign_object,
    perf_warnings, stripped_warning,
};
use sediment_import::{callgrind, perf, Imported};
use sediment_profile::{base_name, Meta, Profile};
use std::path::{Path, PathBuf};

/// The input formats [`import`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `perf.data` (call graphs, or LBR branch stacks).
    Perf,
    /// `callgrind.out`, one file or several of one run (threads, processes), summed.
    Callgrind,
    /// Text output of `perf script`.
    PerfScript,
    /// BOLT `.fdata`; needs [`Options::binary`].
    Fdata,
    /// gprof `gmon.out`; needs [`Options::binary`].
    Gprof,
    /// pprof `profile.proto`.
    Pprof,
    /// GCC `-fcallgraph-info` `.ci` files; needs [`Options::binary`].
    GccCallgraph,
    /// Relocatable objects' static call graph; needs [`Options::binary`].
    Objects,
    /// The historical Sediment `.gv` call graph.
    Gv,
    /// Sediment's Parquet table (`sediment_parquet`).
    Parquet,
}

impl Format {
    /// Whether the format takes several input files (the others take exactly one).
    pub fn takes_many(self) -> bool {
        matches!(
            self,
            Format::GccCallgraph | Format::Objects | Format::Callgrind | Format::Pprof
        )
    }

    /// Whether the format holds sampled call chains, which [`Options::mode`] turns into edges.
    pub fn is_sampled(self) -> bool {
        matches!(self, Format::Perf | Format::PerfScript | Format::Pprof)
    }
}

/// How [`import`] reads its inputs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Import only the binary of this base name, read from this file instead of the path the
    /// profiler recorded (for formats that do not name their binary: the binary described).
    pub binary: Option<PathBuf>,
    /// How sampled call chains become edges; `None` is the default (`leaf`). Refused for
    /// formats without sampled chains.
    pub mode: Option<Mode>,
    /// callgrind: the program that was recorded (from `sediment record`), which names the main
    /// executable instead of the `cmd:` header.
    pub command: Option<PathBuf>,
    /// Whole-package recording: binaries without a symbol table are left out (one counted
    /// warning) instead of failing the import.
    pub skip_stripped: bool,
    /// The bytes the whole import may read, inputs and the binaries they name together
    /// (`fsio::ReadBudget`); `None`: `SEDIMENT_MAX_INPUT_BYTES` when set, else 4 GiB
    /// (`fsio::DEFAULT_RUN_INPUT_BYTES`).
    pub max_input_bytes: Option<u64>,
    /// The memory the process may hold while the import runs (`crate::membudget`); `None`:
    /// `SEDIMENT_MAX_MEMORY` when set, else three quarters of the machine's memory.
    pub max_memory: Option<u64>,
    /// perf.data: processes that were not the recording's targets (a whole-machine recording's
    /// own `perf record`), each with how the warning names it; their samples are counted in one
    /// warning and attributed to no binary.
    pub exclude_pids: Vec<(i32, String)>,
}

/// The `import` stage: reads `inputs` in `format`. Nothing is written; the warnings are in the
/// result.
pub fn import(format: Format, inputs: &[PathBuf], options: &Options) -> Result<Imported> {
    let _t = timings::stage("import");
    let Some(input) = inputs.first() else {
        bail!("no input to import");
    };
    if !format.takes_many() && inputs.len() != 1 {
        bail!(
            "{}: one input file expected for this format ({} given)",
            inputs[1].display(),
            inputs.len()
        );
    }
    if let (false, Some(mode)) = (format.is_sampled(), options.mode) {
        bail!(
            "--mode {} is for sampled call chains (perf, perf-script, pprof): this format has none",
            mode.name()
        );
    }
    let mode = options.mode.unwrap_or_default();
    let binary = options.binary.as_deref();
    let budget = &mut fsio::ReadBudget::from_flag_or_env(options.max_input_bytes)?;
    let _memory = crate::membudget::Limit::from_flag_or_env(options.max_memory)?;
    match format {
        Format::Perf => import_perf(
            input,
            binary,
            mode,
            options.skip_stripped,
            &options.exclude_pids,
            budget,
        ),
        Format::Callgrind => import_callgrind(
            inputs,
            binary,
            options.command.as_deref(),
            options.skip_stripped,
            budget,
        ),
        Format::PerfScript => import_perf_script(input, binary, mode, budget),
        Format::Fdata => import_fdata(input, binary, budget),
        Format::Gprof => import_gprof(input, binary, budget),
        Format::Pprof => import_pprofs(inputs, mode, budget),
        Format::GccCallgraph => import_gcc_callgraph(inputs, binary, budget),
        Format::Objects => import_objects(inputs, binary, budget),
        Format::Gv => import_gv(input, binary, budget),
        Format::Parquet => import_parquet(input, binary, budget),
    }
}

/// Labels every profile of `imported` with the submission identity the user gave: `meta
/// submitter` and `meta recorded-at` (integer Unix seconds), replacing what the input said.
pub fn label(imported: &mut Imported, submitter: Option<&str>, recorded_at: Option<i64>) {
    for p in &mut imported.profiles {
        if let Some(s) = submitter {
            p.meta
                .extra
                .insert(sediment_profile::META_SUBMITTER.into(), s.to_string());
        }
        if let Some(t) = recorded_at {
            p.meta
                .extra
                .insert(sediment_profile::META_RECORDED_AT.into(), t.to_string());
        }
    }
}

/// Profiles to write, each with its file, and the warnings to print once they are written.
#[derive(Debug, Clone, Default)]
pub struct ProfileFiles {
    /// (file, profile), in the order they are reported.
    pub files: Vec<(PathBuf, Profile)>,
    /// One-line warnings (counted, never one per function).
    pub warnings: Vec<String>,
}

impl ProfileFiles {
    /// The files as `fsio::write_profiles` takes them.
    pub fn as_set(&self) -> Vec<(&Path, &Profile)> {
        self.files
            .iter()
            .map(|(path, p)| (path.as_path(), p))
            .collect()
    }
}

/// Where each profile of `imported` goes: the main executable's to `out`, every other to
/// `STEM.<basename>.sprof` beside it (STEM: `out` without `.sprof`, see `side_path`), `out` first. A main executable without samples gets an
/// empty profile, with a warning added. Fails when the main executable is not known.
pub fn outputs(out: &Path, mut imported: Imported) -> Result<ProfileFiles> {
    let Some(main) = imported.main.clone() else {
        bail!(
            "{}: cannot tell the main executable of the recording (use --binary)",
            out.display()
        );
    };
    let mut files: Vec<(PathBuf, Profile)> = Vec::new();
    let mut taken = std::collections::BTreeSet::new();
    taken.insert(out.to_path_buf());
    let mut main_profile = None;
    for p in imported.profiles {
        if main_profile.is_none() && p.meta.binary == main {
            main_profile = Some(p);
        } else {
            let path = side_path(out, &p.meta.binary, &mut taken);
            files.push((path, p));
        }
    }
    let main_profile = main_profile.unwrap_or_else(|| {
        imported.warnings.push(format!(
            "the main executable {} got no samples",
            sediment_profile::escape(&main)
        ));
        Profile {
            meta: Meta {
                binary: main.clone(),
                source: imported.source.to_string(),
                ..Meta::default()
            },
            ..Profile::default()
        }
    });
    files.insert(0, (out.to_path_buf(), main_profile));
    Ok(ProfileFiles {
        files,
        warnings: imported.warnings,
    })
}

/// Which binaries besides the main executable a recording written to one file keeps
/// (`sediment record --keep-binaries`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeepBinaries {
    /// The main executable only.
    #[default]
    MainOnly,
    /// Every binary that got samples.
    All,
    /// The main executable and the binaries of these base names.
    Named(Vec<String>),
}

impl std::str::FromStr for KeepBinaries {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(KeepBinaries::All);
        }
        let names: Vec<String> = s.split(',').map(str::to_string).collect();
        if names.iter().any(|n| n.is_empty() || n.contains('/')) {
            return Err(format!(
                "`{}`: expected `all` or base names separated by commas (libz.so.1,helper)",
                sediment_profile::escape(s)
            ));
        }
        Ok(KeepBinaries::Named(names))
    }
}

/// Drops from `imported` the profiles of binaries other than the main executable that `keep`
/// does not ask for, and returns the dropped binaries' paths, heaviest (self weight) first.
pub fn keep_binaries(imported: &mut Imported, keep: &KeepBinaries) -> Vec<String> {
    let main = imported.main.clone();
    let wanted = |p: &Profile| {
        Some(&p.meta.binary) == main.as_ref()
            || match keep {
                KeepBinaries::MainOnly => false,
                KeepBinaries::All => true,
                KeepBinaries::Named(names) => names.iter().any(|n| n == base_name(&p.meta.binary)),
            }
    };
    let (kept, mut dropped): (Vec<Profile>, Vec<Profile>) = std::mem::take(&mut imported.profiles)
        .into_iter()
        .partition(wanted);
    imported.profiles = kept;
    dropped.sort_by(|a, b| {
        b.self_total()
            .cmp(&a.self_total())
            .then(a.meta.binary.cmp(&b.meta.binary))
    });
    dropped.into_iter().map(|p| p.meta.binary).collect()
}

/// Reads a binary that the input `for_input` names, for an importer: `None` when the path names
/// no regular file (missing, or a FIFO, a device or a directory that a stranger's profile named:
/// see [`fsio::ReadBudget::read_named_file`]). An unreadable file is an error naming the binary and the input.
fn read_binary(
    path: &Path,
    for_input: &str,
    budget: &mut fsio::ReadBudget,
) -> Result<Option<Vec<u8>>, String> {
    budget
        .read_named_file(path)
        .map_err(|e| format!("{e:#} (needed for {for_input})"))
}

/// Reads a binary for an importer when `skip_stripped` is set (whole-package recording): a
/// binary without a symbol table (a stripped `/bin/sh`) is left out, and its path noted in
/// `skipped`, instead of failing the whole recording. `for_input` names the input in errors.
fn read_symbolized(
    path: &Path,
    for_input: &str,
    skip_stripped: bool,
    skipped: &mut Vec<String>,
    budget: &mut fsio::ReadBudget,
) -> Result<Option<Vec<u8>>, String> {
    let bytes = read_binary(path, for_input, budget)?;
    if let (true, Some(b)) = (skip_stripped, &bytes) {
        let name = path.display().to_string();
        if let Err(sediment_elf::Error::NoSymbols { .. }) = sediment_elf::Binary::parse(&name, b) {
            skipped.push(name);
            return Ok(None);
        }
    }
    Ok(bytes)
}

/// Imports a perf.data file; `binary` replaces the recorded binary of the same base name;
/// `skip_stripped` leaves out binaries without a symbol table instead of failing.
fn import_perf(
    input: &Path,
    binary: Option<&Path>,
    mode: Mode,
    skip_stripped: bool,
    exclude: &[(i32, String)],
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let mut skipped = Vec::new();
    let data = budget.read_bytes(input)?;
    // Each file is read once, however many ways the recording spells its path.
    let mut names = fsio::ObjectNames::default();
    let mut cache: std::collections::HashMap<String, Option<Vec<u8>>> = Default::default();
    let for_input = input.display().to_string();
    let override_name = binary.map(|b| base_name(&b.to_string_lossy()).to_string());
    let mut overridden: Option<String> = None;
    let mut changed: Vec<String> = Vec::new();
    let mut resolver = |path: &str, build_id: Option<&str>| {
        if let (Some(bin), Some(name)) = (binary, &override_name) {
            if base_name(path) == name {
                overridden = Some(path.to_string());
                let name = bin.display().to_string();
                if let Some(bytes) = cache.get(&name) {
                    return Ok(bytes.clone());
                }
                let bytes = budget.read_bytes(bin).map_err(|e| format!("{e:#}"))?;
                cache.insert(name, Some(bytes.clone()));
                return Ok(Some(bytes));
            }
        }
        if binary.is_some() {
            // Only the named binary is imported: the others' files on this machine need not
            // be the ones that were recorded.
            return Ok(None);
        }
        let name = names.name(path);
        let bytes = match cache.get(&name) {
            Some(bytes) => bytes.clone(),
            None => {
                let bytes = read_symbolized(
                    Path::new(&name),
                    &for_input,
                    skip_stripped,
                    &mut skipped,
                    budget,
                )?;
                cache.insert(name, bytes.clone());
                bytes
            }
        };
        // A whole-package (or whole-machine) recording sees programs rebuilt while it ran:
        // one whose file is now another build gets no profile, instead of failing them all.
        if let (true, Some(want), Some(b)) = (skip_stripped, build_id, &bytes) {
            let found = sediment_elf::Binary::parse(path, b)
                .ok()
                .and_then(|e| e.build_id);
            if found.as_deref() != Some(want) {
                changed.push(path.to_string());
                return Ok(None);
            }
        }
        Ok(bytes)
    };
    let exclude_pids: Vec<i32> = exclude.iter().map(|(pid, _)| *pid).collect();
    let mut result = perf::read_excluding(
        &input.display().to_string(),
        &data,
        mode,
        &mut resolver,
        &exclude_pids,
    )?;
    result
        .stats
        .missing_binaries
        .retain(|(p, _)| !changed.contains(p));
    let mut main = result.main_binary;
    if let Some(bin) = binary {
        match overridden {
            Some(p) => main = Some(p),
            None => bail!(
                "{}: no binary named `{}` got samples in {} (main executable: {})",
                bin.display(),
                override_name.unwrap_or_default(),
                input.display(),
                main.as_deref().unwrap_or("unknown")
            ),
        }
    }
    let mut warnings: Vec<String> = stripped_warning(&skipped).into_iter().collect();
    if let Some(first) = changed.first() {
        warnings.push(format!(
            "{} binaries changed on disk since they ran and get no profile (first: {first})",
            changed.len()
        ));
    }
    if result.stats.excluded_samples > 0 {
        let names: Vec<&str> = exclude.iter().map(|(_, n)| n.as_str()).collect();
        warnings.push(format!(
            "{} of {} samples came from processes that were not targets and are left out ({})",
            result.stats.excluded_samples,
            result.stats.samples,
            names.join(", ")
        ));
    }
    warnings.extend(perf_warnings(&result.stats, binary.is_some()));
    warnings.extend(halves_warning(&result.profiles, &result.first_half));
    Ok(Imported {
        source: "perf",
        profiles: result.profiles,
        main,
        warnings,
    })
}

/// Fewest samples a binary needs before its halves are compared: below it, any two halves
/// disagree by chance.
const HALVES_MIN_SAMPLES: u64 = 200;
/// Disagreement between the halves ([`sediment_order::half_disagreement`]) above which a
/// recording is called too short: an order from one half keeps a fifth more bytes hot for the
/// other's 90% than the other's own order does.
const HALVES_DISAGREE: f64 = 0.2;

/// The one line saying that a recording's two time halves disagree on some binaries' hot
/// code (each profile of `profiles` with at least `HALVES_MIN_SAMPLES`, its first half's self
/// weights in `first_half`), heaviest disagreement first, or `None` when they agree.
pub fn halves_warning(profiles: &[Profile], first_half: &[Vec<u64>]) -> Option<String> {
    let mut found: Vec<(f64, String)> = Vec::new();
    for (p, first) in profiles.iter().zip(first_half) {
        if p.self_total() < HALVES_MIN_SAMPLES || first.len() != p.functions.len() {
            continue;
        }
        let sizes: Vec<u64> = p.functions.iter().map(|f| f.size.unwrap_or(1)).collect();
        let second: Vec<u64> = p
            .functions
            .iter()
            .zip(first)
            .map(|(f, a)| f.self_weight.saturating_sub(*a))
            .collect();
        if let Ok(d) = sediment_order::half_disagreement(&sizes, first, &second, (9, 10)) {
            if d > HALVES_DISAGREE {
                found.push((d, base_name(&p.meta.binary).to_string()));
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    found.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let named: Vec<String> = found
        .iter()
        .take(3)
        .map(|(d, name)| format!("{} +{:.0}%", sediment_profile::escape(name), d * 100.0))
        .collect();
    let more = match found.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    Some(format!(
        "the two halves of the recording disagree on the hot code of {}{more} (an order from \
         one half needs that many more bytes for 90% of the other's samples): record longer, or \
         merge several recordings (sediment merge)",
        named.join(", ")
    ))
}

/// Imports callgrind.out files against each object's binary: by instruction address when the
/// files have instruction positions (`--dump-instr=yes`), else bound by name (see
/// `sediment_import::callgrind::import`). Several files (one per thread from
/// `--separate-threads=yes`, one per process from `--trace-children=yes`) are summed per object.
/// `binary` replaces the object of the same base name; `command` (from `record`) names the main
/// executable, else the first file's `cmd:` header does. `skip_stripped`: objects without a
/// symbol table are named by callgrind's names instead of failing the import.
fn import_callgrind(
    inputs: &[PathBuf],
    binary: Option<&Path>,
    command: Option<&Path>,
    skip_stripped: bool,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let mut skipped = Vec::new();
    let mut texts = Vec::with_capacity(inputs.len());
    for input in inputs {
        texts.push((input.display().to_string(), budget.read_text(input)?));
    }
    let Some((_, text)) = texts.first() else {
        bail!("no callgrind output to import");
    };
    let input = &inputs[0];
    let for_input = match inputs.len() {
        1 => input.display().to_string(),
        n => format!("{} and {} other inputs", input.display(), n - 1),
    };
    let override_name = binary.map(|b| base_name(&b.to_string_lossy()).to_string());
    // The main executable: --binary, else the recorded command, else the `cmd:` header.
    let main_name = override_name.clone().or_else(|| match command {
        Some(c) => Some(base_name(&c.to_string_lossy()).to_string()),
        None => callgrind_command(text),
    });
    // `???` (code callgrind could not place) and valgrind's own preloaded libraries are not
    // part of the program: no binary, and no profile, for them.
    let foreign = is_foreign_object;
    let mut unreadable = Vec::new();
    let mut resolver = |object: &str, _build_id: Option<&str>| {
        if foreign(object) {
            return Ok(None);
        }
        if let (Some(bin), Some(name)) = (binary, &override_name) {
            if base_name(object) == name {
                return budget
                    .read_bytes(bin)
                    .map(Some)
                    .map_err(|e| format!("{e:#}"));
            }
        }
        let bytes = read_symbolized(
            Path::new(object),
            &for_input,
            skip_stripped,
            &mut skipped,
            budget,
        )?;
        if bytes.is_none() && !skipped.iter().any(|s| s == object) {
            unreadable.push(object.to_string());
        }
        Ok(bytes)
    };
    let input_texts: Vec<callgrind::Input<'_>> = texts
        .iter()
        .map(|(path, text)| callgrind::Input { path, text })
        .collect();
    // One object per file, however many ways the files spell its path: each is read once.
    let mut names = fsio::ObjectNames::default();
    let result = callgrind::import_with_names(&input_texts, &mut resolver, &mut |o| names.name(o))?;
    let mut main = None;
    let mut profiles = Vec::with_capacity(result.profiles.len());
    for p in result.profiles {
        if foreign(&p.meta.binary) {
            continue;
        }
        if main.is_none() && main_name.as_deref() == Some(base_name(&p.meta.binary)) {
            main = Some(p.meta.binary.clone());
        }
        profiles.push(p);
    }
    if let (Some(name), None) = (&override_name, &main) {
        bail!(
            "{}: no object named `{name}` in {}",
            binary.map(|b| b.display().to_string()).unwrap_or_default(),
            input.display()
        );
    }
    let mut warnings: Vec<String> = stripped_warning(&skipped).into_iter().collect();
    warnings.extend(callgrind_warnings(&result.stats, &unreadable));
    Ok(Imported {
        source: "callgrind",
        profiles,
        main,
        warnings,
    })
}

/// Binds a profile whose keys came from names only (perf script, fdata) to the symbols of the
/// binary at `path`, when it can be read; returns the profile unchanged, with a warning, when
/// it names no regular file. `input` (the profile's file) is named in errors.
fn bind_to_file(
    profile: Profile,
    path: &Path,
    input: &Path,
    warnings: &mut Vec<String>,
    budget: &mut fsio::ReadBudget,
) -> Result<Profile> {
    let for_input = input.display().to_string();
    let Some(bytes) = read_binary(path, &for_input, budget).map_err(anyhow::Error::msg)? else {
        warnings.push(format!(
            "{}: not found (or not a regular file); function names kept as recorded \
             (same-named statics not told apart)",
            path.display()
        ));
        return Ok(profile);
    };
    let binary = sediment_elf::Binary::parse(&path.display().to_string(), &bytes)?;
    let (bound, report) = sediment_import::bind::bind(&profile, &binary);
    warnings.extend(bind_warning(&path.display().to_string(), &report));
    Ok(bound)
}

/// Imports `perf script` text. The main executable is `--binary` (matched by base name), else
/// the dso with the most weight; each dso is bound to its binary where it can be read.
fn import_perf_script(
    input: &Path,
    binary: Option<&Path>,
    mode: Mode,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let text = budget.read_text(input)?;
    // One profile per file, however many ways the text spells its path: each is read once.
    let mut names = fsio::ObjectNames::default();
    let result = sediment_import::perf_script::read_with_names(
        &input.display().to_string(),
        &text,
        mode,
        &mut |dso| names.name(dso),
    )?;
    let mut warnings = Vec::new();
    let override_name = binary.map(|b| base_name(&b.to_string_lossy()).to_string());
    let named = |p: &Profile| override_name.as_deref() == Some(base_name(&p.meta.binary));
    // Branch entries printed without their dso (`-F brstacksym`) belong to `--binary` when no
    // dso of that name was printed.
    let unknown_is_binary = !result.profiles.iter().any(named);
    let mut profiles = Vec::new();
    let mut main = None;
    for mut p in result.profiles {
        if unknown_is_binary && p.meta.binary == sediment_import::perf_script::UNKNOWN_DSO {
            if let Some(b) = binary {
                p.meta.binary = b.display().to_string();
            }
        }
        let is_main = named(&p);
        if binary.is_some() && !is_main {
            continue;
        }
        let path = match binary {
            Some(b) => b.to_path_buf(),
            None => PathBuf::from(&p.meta.binary),
        };
        if is_main {
            main = Some(p.meta.binary.clone());
        }
        profiles.push(bind_to_file(p, &path, input, &mut warnings, budget)?);
    }
    if let (Some(name), None) = (&override_name, &main) {
        bail!("{}: no dso named `{name}` in the samples", input.display());
    }
    if main.is_none() {
        // Heaviest dso, ties to the smaller path (profiles are sorted by path).
        main = heaviest_binary(&profiles);
    }
    Ok(Imported {
        source: "perf-script",
        profiles,
        main,
        warnings,
    })
}

/// The `--binary` a format that does not name its binary needs.
fn required_binary<'a>(input: &Path, binary: Option<&'a Path>, what: &str) -> Result<&'a Path> {
    binary.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: {what} does not say which binary it describes: pass --binary",
            input.display()
        )
    })
}

/// Imports a pprof profile: one profile per mapping that got weight, the first mapping first.
/// Imports pprof files: one file as [`import_pprof`]; several (a fleet's windows) are read one
/// at a time, and each binary's profiles merged as `sediment merge` merges inputs of weight 1
/// (each file's profile of a binary normalised, exact sums: `sediment_profile::Merger`), so
/// that memory holds the distinct functions and calls of each binary, not the files. Binaries
/// are told apart by build-id, else by base name; they come out in the order first seen, the
/// first file's main binary first.
fn import_pprofs(
    inputs: &[PathBuf],
    mode: Mode,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    if inputs.len() == 1 {
        return import_pprof(&inputs[0], mode, budget);
    }
    let mut order: Vec<String> = Vec::new();
    let mut mergers: std::collections::HashMap<String, sediment_profile::Merger> =
        std::collections::HashMap::new();
    let mut main = None;
    for input in inputs {
        let imported = import_pprof(input, mode, budget)?;
        if main.is_none() {
            main = imported.main.clone();
        }
        for p in &imported.profiles {
            let key = match &p.meta.build_id {
                Some(id) => format!("build-id {id}"),
                None => format!("name {}", base_name(&p.meta.binary)),
            };
            let slot = mergers.entry(key.clone()).or_insert_with(|| {
                order.push(key.clone());
                sediment_profile::Merger::new()
            });
            slot.add(1.0, p)
                .map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
        }
    }
    let mut profiles = Vec::with_capacity(order.len());
    for key in &order {
        let merger = mergers.remove(key).expect("every key has a merger");
        let profile = merger
            .finish(sediment_profile::MergeOptions::default())
            .map_err(|e| anyhow::anyhow!("{}: {e}", inputs[0].display()))?;
        profiles.push(profile);
    }
    // The main binary's merged profile names the smallest of its inputs' paths.
    let main = main.and_then(|m| {
        let name = base_name(&m).to_string();
        profiles
            .iter()
            .find(|p| base_name(&p.meta.binary) == name)
            .map(|p| p.meta.binary.clone())
    });
    Ok(Imported {
        source: "pprof",
        profiles,
        main,
        warnings: Vec::new(),
    })
}

/// Imports one pprof file: a profile per binary (mapping) it names.
fn import_pprof(input: &Path, mode: Mode, budget: &mut fsio::ReadBudget) -> Result<Imported> {
    let data = budget.read_bytes(input)?;
    let profiles = sediment_import::pprof::read(&input.display().to_string(), &data, None, mode)?;
    let main = profiles.first().map(|p| p.meta.binary.clone());
    Ok(Imported {
        source: "pprof",
        profiles,
        main,
        warnings: Vec::new(),
    })
}

/// Imports a gprof `gmon.out` against the `-pg` binary `--binary` names.
fn import_gprof(
    input: &Path,
    binary: Option<&Path>,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let bin = required_binary(input, binary, "gmon.out")?;
    let data = budget.read_bytes(input)?;
    let bin_name = bin.display().to_string();
    let bin_bytes = budget.read_bytes(bin)?;
    let elf = sediment_elf::Binary::parse(&bin_name, &bin_bytes)?;
    let profile =
        sediment_import::gprof::read(&input.display().to_string(), &data, &bin_name, &elf)?;
    Ok(Imported {
        source: "gprof",
        profiles: vec![profile],
        main: Some(bin_name),
        warnings: Vec::new(),
    })
}

/// Imports GCC `-fcallgraph-info` files into one static call graph for `--binary`; bound to the
/// binary's symbols when that file exists.
fn import_gcc_callgraph(
    inputs: &[PathBuf],
    binary: Option<&Path>,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let bin = required_binary(&inputs[0], binary, "a .ci file")?;
    let bin_name = bin.display().to_string();
    // One file at a time: its text and parse are dropped before the next is read.
    let mut reader = sediment_import::gcc_callgraph::Reader::default();
    for p in inputs {
        let text = budget.read_text(p)?;
        reader.add(&p.display().to_string(), &text)?;
    }
    let profile = reader.finish(&bin_name);
    let mut warnings = Vec::new();
    let profile = bind_to_file(profile, bin, &inputs[0], &mut warnings, budget)?;
    Ok(Imported {
        source: "gcc-callgraph",
        profiles: vec![profile],
        main: Some(bin_name),
        warnings,
    })
}

/// Imports the static call graph of relocatable objects for `--binary`; bound to the binary's
/// symbols when that file exists.
fn import_objects(
    inputs: &[PathBuf],
    binary: Option<&Path>,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let bin = required_binary(&inputs[0], binary, "an object file")?;
    let objects = super::link::read_inventory(inputs)?;
    let bin_name = bin.display().to_string();
    let profile = sediment_import::relocs::read(&objects, &bin_name)?;
    let mut warnings = Vec::new();
    let profile = bind_to_file(profile, bin, &inputs[0], &mut warnings, budget)?;
    Ok(Imported {
        source: sediment_import::relocs::SOURCE,
        profiles: vec![profile],
        main: Some(bin_name),
        warnings,
    })
}

/// Imports a BOLT `.fdata` file for the binary `--binary` names (required: fdata names no binary).
fn import_fdata(
    input: &Path,
    binary: Option<&Path>,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let bin = required_binary(input, binary, "fdata")?;
    let text = budget.read_text(input)?;
    let bin_name = bin.display().to_string();
    let profile = sediment_import::fdata::read(&input.display().to_string(), &text, &bin_name)?;
    let mut warnings = Vec::new();
    let profile = bind_to_file(profile, bin, input, &mut warnings, budget)?;
    Ok(Imported {
        source: "fdata",
        profiles: vec![profile],
        main: Some(bin_name),
        warnings,
    })
}

/// Imports a `.gv` call graph: every cluster is a profile; the main executable is the first
/// cluster, or with `binary` the cluster of that base name (and only it is imported).
fn import_gv(
    input: &Path,
    binary: Option<&Path>,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let text = budget.read_text(input)?;
    let mut profiles = sediment_import::gv::read(&input.display().to_string(), &text)?;
    let mut main = profiles.first().map(|p| p.meta.binary.clone());
    if let Some(bin) = binary {
        let name = base_name(&bin.to_string_lossy()).to_string();
        profiles.retain(|p| base_name(&p.meta.binary) == name);
        if profiles.is_empty() {
            bail!(
                "{}: no cluster for a binary named `{name}` in {}",
                bin.display(),
                input.display()
            );
        }
        main = Some(profiles[0].meta.binary.clone());
    }
    if main.is_none() {
        bail!("{}: the graph has no cluster", input.display());
    }
    // Two clusters of one binary name would be one file twice: merge is the tool for that.
    let mut seen = std::collections::BTreeSet::new();
    for p in &profiles {
        if !seen.insert(p.meta.binary.clone()) {
            bail!(
                "{}: two clusters are labelled `{}`",
                input.display(),
                p.meta.binary
            );
        }
    }
    profiles.sort_by(|a, b| a.meta.binary.cmp(&b.meta.binary));
    Ok(Imported {
        source: sediment_import::gv::SOURCE,
        profiles,
        main,
        warnings: Vec::new(),
    })
}

/// Imports a Parquet profile table: one profile per binary (several submissions of one binary
/// merged with their weights, see `sediment_parquet::by_binary`); the main executable is the
/// binary of the first `profile` row; with `binary`, only the binary of that base name is
/// imported (and is the main one).
fn import_parquet(
    input: &Path,
    binary: Option<&Path>,
    budget: &mut fsio::ReadBudget,
) -> Result<Imported> {
    let name = input.display().to_string();
    let data = budget.read_bytes(input)?;
    let mut submissions = sediment_parquet::read(&name, data)?;
    if let Some(bin) = binary {
        let wanted = base_name(&bin.to_string_lossy()).to_string();
        submissions.retain(|s| base_name(&s.profile.meta.binary) == wanted);
        if submissions.is_empty() {
            bail!(
                "{}: no profile of a binary named `{wanted}` in {name}",
                bin.display()
            );
        }
    }
    let Some(first) = submissions.first() else {
        bail!("{name}: the table holds no profile");
    };
    let first_identity = (
        first.profile.meta.build_id.clone(),
        base_name(&first.profile.meta.binary).to_string(),
    );
    let profiles = sediment_parquet::by_binary(&name, submissions)?;
    // The profile of the first row's binary; its `binary` may be another path after a merge.
    let main = profiles
        .iter()
        .find(|p| {
            (
                p.meta.build_id.clone(),
                base_name(&p.meta.binary).to_string(),
            ) == first_identity
        })
        .map(|p| p.meta.binary.clone());
    Ok(Imported {
        source: "parquet",
        profiles,
        main,
        warnings: Vec::new(),
    })
}

/// Path of the profile of a non-main binary: `STEM.<basename>.sprof`, where STEM is `OUT`
/// without its `.sprof` suffix (`app.sprof` -> `app.libz.so.1.sprof`; an `OUT` without the
/// suffix is kept whole), numbered on a clash (`STEM.<basename>.2.sprof`; the profiles come
/// sorted by binary path, so the numbers are the same on every run). The base name comes from
/// the recording, a stranger's file for `import`, so it goes through [`safe_file_name`] first:
/// no newline, escape sequence or `/` in a name.
fn side_path(out: &Path, binary: &str, taken: &mut std::collections::BTreeSet<PathBuf>) -> PathBuf {
    let out = out.display().to_string();
    let stem = out
        .strip_suffix(".sprof")
        .filter(|s| !s.is_empty() && !s.ends_with('/'))
        .unwrap_or(&out);
    let stem = format!("{stem}.{}", safe_file_name(base_name(binary)));
    let mut candidate = PathBuf::from(format!("{stem}.sprof"));
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = PathBuf::from(format!("{stem}.{n}.sprof"));
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// `name` with every character outside `[A-Za-z0-9._+-]` (the set `sediment_link::safe`
/// allows in a path component) replaced by `_`. Two names that become the same are told apart
/// by [`side_path`]'s numbering.
fn safe_file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(binary: &str) -> Profile {
        Profile {
            meta: Meta {
                binary: binary.to_string(),
                ..Meta::default()
            },
            ..Profile::default()
        }
    }

    // The main executable's profile goes to OUT, first; the others beside it by base name,
    // without a doubled `.sprof` (regression: `o.sprof.libx.so.sprof`), made safe and
    // numbered on a clash; a main executable without samples gets an empty profile and a
    // warning.
    #[test]
    fn outputs_name_every_profile() {
        let imported = Imported {
            source: "perf",
            profiles: vec![
                profile("/a/libx.so"),
                profile("/b/libx.so"),
                profile("/c/we\nird"),
            ],
            main: Some("/bin/prog".to_string()),
            warnings: vec!["w".to_string()],
        };
        let out = outputs(Path::new("o.sprof"), imported).unwrap();
        let paths: Vec<&Path> = out.files.iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(
            paths,
            [
                Path::new("o.sprof"),
                Path::new("o.libx.so.sprof"),
                Path::new("o.libx.so.2.sprof"),
                Path::new("o.we_ird.sprof"),
            ]
        );
        assert_eq!(out.files[0].1.meta.binary, "/bin/prog");
        assert_eq!(out.files[0].1.meta.source, "perf");
        assert_eq!(
            out.warnings,
            ["w", "the main executable /bin/prog got no samples"]
        );
    }

    // The main executable is always kept; others by `--keep-binaries`; the dropped are named
    // heaviest first.
    #[test]
    fn keep_binaries_selects_by_base_name() {
        let weighted = |binary: &str, w: u64| {
            let mut b = sediment_profile::ProfileBuilder::new(Meta {
                binary: binary.to_string(),
                ..Meta::default()
            });
            b.add_self(&sediment_profile::FuncKey::global("f"), w);
            b.build()
        };
        let imported = || Imported {
            source: "perf",
            profiles: vec![
                weighted("/bin/prog", 50),
                weighted("/lib/ld.so", 1),
                weighted("/lib/libc.so.6", 9),
                weighted("/lib/libz.so.1", 3),
            ],
            main: Some("/bin/prog".to_string()),
            warnings: Vec::new(),
        };
        let kept = |keep: &str| {
            let mut i = imported();
            let dropped = keep_binaries(&mut i, &keep.parse().unwrap());
            let kept: Vec<String> = i.profiles.iter().map(|p| p.meta.binary.clone()).collect();
            (kept, dropped)
        };
        let mut i = imported();
        let dropped = keep_binaries(&mut i, &KeepBinaries::MainOnly);
        assert_eq!(i.profiles.len(), 1);
        assert_eq!(dropped, ["/lib/libc.so.6", "/lib/libz.so.1", "/lib/ld.so"]);
        assert_eq!(kept("all").1, Vec::<String>::new());
        assert_eq!(
            kept("libz.so.1,nosuch"),
            (
                vec!["/bin/prog".to_string(), "/lib/libz.so.1".to_string()],
                vec!["/lib/libc.so.6".to_string(), "/lib/ld.so".to_string()]
            )
        );
        assert!("a,,b".parse::<KeepBinaries>().is_err());
        assert!("/lib/libz.so.1".parse::<KeepBinaries>().is_err());
    }

    // An output not ending in `.sprof` keeps its whole name as the stem.
    #[test]
    fn side_files_of_other_output_names() {
        let mut taken = std::collections::BTreeSet::new();
        assert_eq!(
            side_path(Path::new("d/app.prof"), "/lib/libz.so.1", &mut taken),
            Path::new("d/app.prof.libz.so.1.sprof")
        );
        assert_eq!(
            side_path(Path::new("d/.sprof"), "/lib/libz.so.1", &mut taken),
            Path::new("d/.sprof.libz.so.1.sprof")
        );
    }

    // A format that takes one input refuses two, and `--mode` is refused for a format without
    // sampled chains, before any file is read.
    #[test]
    fn arguments_checked_first() {
        let two = [
            PathBuf::from("/nonexistent/a"),
            PathBuf::from("/nonexistent/b"),
        ];
        let e = import(Format::Perf, &two, &Options::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/nonexistent/b: one input file expected for this format (2 given)"
        );
        let options = Options {
            mode: Some(Mode::Chain),
            ..Options::default()
        };
        let e = import(Format::Gv, &two[..1], &options).unwrap_err();
        assert!(
            e.to_string().starts_with("--mode chain is for sampled"),
            "{e}"
        );
    }
}
