//! The `merge` stage: several profiles of one executable -> one profile.
//!
//! Two callers, two shapes:
//! - [`merge`]: weighted profiles given by the user (`sediment merge`: files, directories of
//!   `*.sprof`, list files), read one at a time per thread into a [`Merger`] (normalized to a
//!   common scale, exact sums, one rounding: [`sediment_profile::merge`]), with the fleet
//!   weights of [`sediment_profile::fleet_plan`] when asked; merging many submissions takes
//!   the memory of the largest one plus the sums, per thread.
//! - [`into_prof_dir`]: the profiles of one recording (`sediment record --prof-dir`, a linker
//!   shim's profile directory) merged into the files already in a profile directory, one file
//!   per binary, by the naming scheme below.
//!
//! The naming scheme of a profile directory: `DIR/<basename>.sprof`. Two *different* binaries
//! of one base name in one recording (same name, other build-id; without build-ids, other
//! paths) each go to `DIR/<basename>.<build-id>.sprof` (or, without a build-id, the path with
//! `/` spelled `%2F`). Copies of one build (same build-id) at two paths are one binary: their
//! weights are summed ([`sediment_profile::sum`]). An existing file of the same binary is
//! merged with the new recording, each recording counting once (the file's `meta recordings`,
//! 1 if absent, is its weight; the new recording's is 1; the result says one more). An existing
//! file that describes another build is left alone: the new profile goes to the
//! `<basename>.<identity>.sprof` name instead, with a warning.

use super::import::ProfileFiles;
use super::timings;
use crate::fsio;
use anyhow::{anyhow, bail, Context, Result};
use sediment_import::Imported;
use sediment_profile::{
    base_name, fleet_plan, sum, Error as ProfileError, FleetOptions, MergeOptions, Merger, Profile,
    Submission, META_RECORDINGS,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How [`merge`] runs: the checks, the fleet weighting, and the threads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MergeRun {
    /// Merge even when the inputs name different binaries, build-ids or architectures.
    pub force: bool,
    /// Fleet weighting from the inputs' `submitter` and `recorded-at`.
    pub fleet: FleetOptions,
    /// Threads that read and add inputs at once (at least 1).
    pub jobs: usize,
}

/// The `merge` stage for weighted inputs: reads each profile of `inputs` (weight, file) and
/// merges them. With fleet options, a first pass reads every input's metadata only (the lines
/// before its first `fn`) to compute the effective weights. The inputs are split into
/// `run.jobs` contiguous runs, each read one profile at a time into its own [`Merger`] by its
/// own thread; the partial merges are joined in order with [`Merger::absorb`], which is exact,
/// so the result is byte-identical for any number of threads and memory grows with the
/// distinct functions and calls (times the threads), not with the number of inputs. Errors
/// name the file concerned; of several bad inputs, the first in input order is reported.
pub fn merge(inputs: &[(f64, PathBuf)], run: &MergeRun) -> Result<Profile> {
    let _t = timings::stage("merge");
    let jobs = run.jobs.max(1);
    let plan = if run.fleet.is_active() {
        let metas = in_chunks(
            inputs.len(),
            jobs,
            Vec::new,
            |subs: &mut Vec<Submission>, i| {
                let (w, path) = &inputs[i];
                let meta = fsio::read_profile_meta(path)?;
                let sub = Submission::from_meta(*w, &meta)
                    .map_err(|e| anyhow!("{}: {e}", path.display()))?;
                subs.push(sub);
                Ok(())
            },
        )?;
        let subs: Vec<Submission> = metas.into_iter().flatten().collect();
        let plan = fleet_plan(&subs, &run.fleet).map_err(|e| match e {
            ProfileError::BadWeight { input, weight } => anyhow!(
                "{}: weight {weight} is not a finite number >= 0",
                inputs[input].1.display()
            ),
            e => anyhow!("merge: {e}"),
        })?;
        Some(plan)
    } else {
        None
    };
    let weight = |i: usize| plan.as_ref().map_or(inputs[i].0, |p| p.weights[i]);
    let parts = in_chunks(inputs.len(), jobs, Merger::new, |merger, i| {
        let path = &inputs[i].1;
        let profile = fsio::read_profile(path)?;
        merger.add(weight(i), &profile).map_err(|e| match e {
            ProfileError::BadWeight { weight, .. } => anyhow!(
                "{}: weight {weight} is not a finite number >= 0",
                path.display()
            ),
            e => anyhow!("{}: {e}", path.display()),
        })
    })?;
    let mut merger = Merger::new();
    for part in parts {
        merger.absorb(part);
    }
    let options = MergeOptions { force: run.force };
    let mut merged = merger.finish(options).map_err(|e| match e {
        ProfileError::Mismatch {
            what,
            first,
            other,
            a,
            b,
        } => anyhow!(
            "{} and {}: different {what} (`{a}` vs `{b}`); use --force to merge anyway",
            inputs[first].1.display(),
            inputs[other].1.display()
        ),
        e => anyhow!("merge: {e}"),
    })?;
    if let Some(plan) = &plan {
        plan.annotate(&mut merged.meta);
    }
    Ok(merged)
}

/// Runs `work(state, i)` for every `i` in `0..n` on `jobs` threads, thread `k` taking the
/// `k`-th contiguous run of indices in order with its own state from `init`; returns the
/// states in run order. A thread stops at its first error, and once some earlier run failed;
/// the error returned is the one of the earliest failing run, which is the first failing index
/// overall, whatever the timing.
fn in_chunks<S: Send>(
    n: usize,
    jobs: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) -> Result<()> + Sync,
) -> Result<Vec<S>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let jobs = jobs.clamp(1, n.max(1));
    let failed = AtomicUsize::new(usize::MAX);
    let (init, work, failed) = (&init, &work, &failed);
    let results: Vec<Result<S>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|k| {
                scope.spawn(move || {
                    let mut state = init();
                    for i in k * n / jobs..(k + 1) * n / jobs {
                        if failed.load(Ordering::Relaxed) < k {
                            break;
                        }
                        if let Err(e) = work(&mut state, i) {
                            failed.fetch_min(k, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(state)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.into_iter().collect()
}

/// The inputs of a merge: each `(weight, path)` of `inputs` whose path is a directory
/// replaced by the `*.sprof` files directly inside it, sorted by name, each with that weight;
/// then the entries of each list file of `lists` (see [`read_input_list`]), expanded alike.
pub fn expand_inputs(inputs: &[(f64, PathBuf)], lists: &[PathBuf]) -> Result<Vec<(f64, PathBuf)>> {
    expand_inputs_of(inputs, lists, "sprof")
}

/// [`expand_inputs`] for files named `*.EXT` (`sbundle`: an inbox of bundles).
pub fn expand_inputs_of(
    inputs: &[(f64, PathBuf)],
    lists: &[PathBuf],
    ext: &str,
) -> Result<Vec<(f64, PathBuf)>> {
    let mut given: Vec<(f64, PathBuf)> = inputs.to_vec();
    for list in lists {
        given.extend(read_input_list(list)?);
    }
    let mut out = Vec::with_capacity(given.len());
    for (w, path) in given {
        if !path.is_dir() {
            out.push((w, path));
            continue;
        }
        let mut files = Vec::new();
        let entries =
            std::fs::read_dir(&path).with_context(|| format!("{}: cannot list", path.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("{}: cannot list", path.display()))?;
            let p = entry.path();
            if p.extension().is_some_and(|e| e == ext) && !p.is_dir() {
                files.push(p);
            }
        }
        if files.is_empty() {
            bail!("{}: no *.{ext} file in this directory", path.display());
        }
        files.sort();
        out.extend(files.into_iter().map(|p| (w, p)));
    }
    Ok(out)
}

/// Reads a list of merge inputs: one `PATH` or `W,PATH` per line (`W` a weight, a finite
/// number `>= 0`; text before the first comma that is not a number is part of the path);
/// empty lines and lines starting with `#` are skipped. Relative paths are relative to the
/// current directory. Errors name the list and the line.
pub fn read_input_list(list: &Path) -> Result<Vec<(f64, PathBuf)>> {
    let text = fsio::read_text(list)?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (w, path) = match line.split_once(',') {
            Some((w, rest)) => match w.trim().parse::<f64>() {
                Ok(w) if w.is_finite() && w >= 0.0 => (w, rest),
                Ok(_) => bail!(
                    "{}: line {}: weight `{}` is not a finite number >= 0",
                    list.display(),
                    n + 1,
                    sediment_profile::quote(w)
                ),
                Err(_) => (1.0, line),
            },
            None => (1.0, line),
        };
        if path.is_empty() {
            bail!("{}: line {}: no path", list.display(), n + 1);
        }
        out.push((w, PathBuf::from(path)));
    }
    Ok(out)
}

/// The `merge` stage for a profile directory: the profiles of `imported` merged into the files
/// of `dir` by the naming scheme of the module docs. Reads the existing files, writes nothing:
/// returns every file to write (path and profile) and the warnings (the import's, then the
/// merge's), for the caller to write as one set; files come sorted by path.
pub fn into_prof_dir(dir: &Path, imported: Imported) -> Result<ProfileFiles> {
    let _t = timings::stage("merge");
    let mut warnings = imported.warnings;
    // Base names used by more than one binary of this recording.
    let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &imported.profiles {
        by_name
            .entry(base_name(&p.meta.binary).to_string())
            .or_default()
            .insert(identity(p));
    }
    // Copies of one build at two paths (same build-id: a build tree and an install) are one
    // binary: their costs in this recording are summed before anything is merged.
    let mut builds: BTreeMap<(String, String), Profile> = BTreeMap::new();
    for p in imported.profiles {
        let slot = (base_name(&p.meta.binary).to_string(), identity(&p));
        match builds.remove(&slot) {
            Some(first) => builds.insert(slot, sum(first, &p)),
            None => builds.insert(slot, p),
        };
    }
    let mut files: BTreeMap<PathBuf, Profile> = BTreeMap::new();
    for (_, mut p) in builds {
        let name = base_name(&p.meta.binary).to_string();
        p.meta.extra.insert(META_RECORDINGS.into(), "1".into());
        let plain = dir.join(format!("{name}.sprof"));
        let distinct = dir.join(format!("{name}.{}.sprof", identity(&p)));
        let mut path = if by_name[&name].len() > 1 {
            distinct.clone()
        } else {
            plain
        };
        let mut merged = merge_existing(&path, &p)?;
        if merged.is_none() && path != distinct {
            warnings.push(format!(
                "{} describes another build of {}; writing {}",
                path.display(),
                sediment_profile::escape(&name),
                distinct.display()
            ));
            path = distinct;
            merged = merge_existing(&path, &p)?;
        }
        let Some(profile) = merged else {
            bail!(
                "{}: describes another build of {} and cannot be merged",
                sediment_profile::quote_whole(&path.display().to_string()),
                sediment_profile::escape(&name)
            );
        };
        files.insert(path, profile);
    }
    Ok(ProfileFiles {
        files: files.into_iter().collect(),
        warnings,
    })
}

/// What tells two binaries of one base name apart in a file name: the build-id, else the path.
fn identity(p: &Profile) -> String {
    match &p.meta.build_id {
        Some(id) => id.clone(),
        None => p.meta.binary.replace('%', "%25").replace('/', "%2F"),
    }
}

/// `new` merged into the profile at `path` when that file exists (`Ok(None)` when it describes
/// another build), else `new` itself. The file's `meta recordings` (1 if absent) is its weight,
/// `new` counts once, and the result counts one more recording.
pub fn merge_existing(path: &Path, new: &Profile) -> Result<Option<Profile>> {
    // Opened once, without blocking: a FIFO in the directory never hangs the recording.
    let old = match fsio::read_profile_slot(path)? {
        fsio::ProfileSlot::Profile(p) => *p,
        fsio::ProfileSlot::Missing | fsio::ProfileSlot::Dangling => return Ok(Some(new.clone())),
        fsio::ProfileSlot::Other(kind) => {
            use std::os::unix::fs::FileTypeExt as _;
            bail!(
                "{}: not a regular file ({})",
                path.display(),
                if kind.is_fifo() || kind.is_socket() {
                    "a FIFO or a socket"
                } else {
                    "a directory or a device"
                }
            )
        }
    };
    let count = |p: &Profile| -> Result<u64> {
        p.meta.extra.get(META_RECORDINGS).map_or(Ok(1), |v| {
            v.parse().map_err(|_| {
                anyhow!(
                    "{}: meta {META_RECORDINGS} `{v}` is not a number",
                    path.display()
                )
            })
        })
    };
    let n_old = count(&old)?;
    match sediment_profile::merge(&[(n_old as f64, &old), (1.0, new)]) {
        Ok(mut m) => {
            m.meta
                .extra
                .insert(META_RECORDINGS.into(), (n_old + 1).to_string());
            Ok(Some(m))
        }
        Err(ProfileError::Mismatch { .. }) => Ok(None),
        Err(e) => Err(anyhow!("{}: {e}", path.display())),
    }
}

/// What a packager's inbox merge (`sediment merge --prof-dir OUT BUNDLE...`) is given.
#[derive(Debug, Clone, Copy)]
pub struct Inbox<'a> {
    /// The bundles, each with its command-line weight (directories already expanded).
    pub inputs: &'a [(f64, PathBuf)],
    /// The current build's binaries (`--binary`); empty: the build most submissions name.
    pub binaries: &'a [PathBuf],
    /// Fleet weighting (per submitter, decay, cap) from each bundle's submitter and time.
    pub fleet: FleetOptions,
    /// Least share of a profile's weight that must land on the current build's functions
    /// when it was recorded on another build ([`sediment_profile::binary_share`]).
    pub min_share: f64,
}

/// What became of one bundle in an inbox merge.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmissionReport {
    /// The bundle file.
    pub path: PathBuf,
    /// The first 16 hex digits of its SHA-256.
    pub id: String,
    /// Its submitter, when it names one.
    pub submitter: Option<String>,
    /// The binaries merged, each with the share of its weight that landed on the current
    /// build's functions (`None`: no `--binary` was given, and it is the inbox's build).
    pub merged: Vec<(String, Option<f64>)>,
    /// Binaries refused (another build that did not match well enough), one line each.
    pub refused: Vec<String>,
    /// Binaries the current build does not have (libc, the loader, ...), counted.
    pub outside: usize,
}

/// The result of [`merge_inbox`]: the profiles to write, what became of each bundle, and the
/// bundles left out as duplicates of an earlier one (`(duplicate, first)`).
#[derive(Debug, Clone)]
pub struct InboxResult {
    /// `(base name, merged profile)`, by base name.
    pub profiles: Vec<(String, Profile)>,
    /// One report per distinct bundle, in input order.
    pub submissions: Vec<SubmissionReport>,
    /// Bundles with the same bytes as an earlier input, counted once.
    pub duplicates: Vec<(PathBuf, PathBuf)>,
}

/// The `merge` stage for an inbox of contributor bundles ([`super::bundle`]): every profile of
/// every bundle, grouped by binary (base name), merged per binary with each bundle as one
/// submission: normalized to a common scale ([`Merger`]), weighted by its command-line weight
/// and the fleet options (its submitter and recording time come from its manifest).
///
/// Which build a profile is for: with [`Inbox::binaries`], a profile whose binary the build
/// has under the same base name is used as it is when the build-ids agree, and otherwise
/// matched onto the build's functions ([`sediment_profile::retarget`], as `sediment match`
/// does) when at least [`Inbox::min_share`] of its weight lands there; below that it is
/// refused with one line. Binaries the build does not have (the C library, the loader) are
/// counted and left out. Without binaries, the current build of each base name is the
/// build-id most bundles name (ties: the smallest id), and profiles of other builds are
/// refused with a line saying that `--binary` would match them.
///
/// Two bundles with the same bytes (SHA-256) are one submission: the later ones are reported
/// and skipped. The merged profile's `meta` keeps the provenance: `submissions` (how many
/// bundles went in) and one `submission.<id>` key per bundle (`id` the first 16 hex digits of
/// its SHA-256) whose value names its submitter, package and version, weight and share.
pub fn merge_inbox(inbox: &Inbox<'_>) -> Result<InboxResult> {
    use super::bundle::{self, Bundle, META_PACKAGE, META_PACKAGE_VERSION};
    let _t = timings::stage("merge");
    // Read every bundle; the same bytes twice are one submission.
    let mut bundles: Vec<(f64, PathBuf, Bundle)> = Vec::new();
    let mut duplicates = Vec::new();
    for (w, path) in inbox.inputs {
        let b = bundle::read(path)?;
        if let Some((_, first, _)) = bundles.iter().find(|(_, _, o)| o.hash == b.hash) {
            duplicates.push((path.clone(), first.clone()));
            continue;
        }
        bundles.push((*w, path.clone(), b));
    }
    // The current build: its binaries by base name.
    let mut build: BTreeMap<String, (PathBuf, sediment_elf::Binary)> = BTreeMap::new();
    for path in inbox.binaries {
        let bin = fsio::read_binary(path)?;
        let name = base_name(&path.to_string_lossy()).to_string();
        if let Some((other, _)) = build.get(&name) {
            bail!(
                "--binary {} and {}: two binaries named {}; give one per base name",
                other.display(),
                path.display(),
                sediment_profile::escape(&name)
            );
        }
        build.insert(name, (path.clone(), bin));
    }
    // Without binaries: the build-id most bundles name, per base name.
    let mut current: BTreeMap<String, Option<String>> = BTreeMap::new();
    if build.is_empty() {
        let mut votes: BTreeMap<&str, BTreeMap<Option<&str>, usize>> = BTreeMap::new();
        for (_, _, b) in &bundles {
            for p in &b.profiles {
                *votes
                    .entry(base_name(&p.meta.binary))
                    .or_default()
                    .entry(p.meta.build_id.as_deref())
                    .or_default() += 1;
            }
        }
        for (name, ids) in votes {
            // Most votes; ties to the smallest id (BTreeMap order, first maximum kept).
            let mut best: Option<(Option<&str>, usize)> = None;
            for (id, n) in ids {
                if best.map_or(true, |(_, m)| n > m) {
                    best = Some((id, n));
                }
            }
            current.insert(
                name.to_string(),
                best.and_then(|(id, _)| id.map(str::to_string)),
            );
        }
    }
    let describe = |p: &Profile| -> String {
        let mut s = format!("build-id {}", p.meta.build_id.as_deref().unwrap_or("none"));
        if let (Some(pkg), Some(v)) = (
            p.meta.extra.get(META_PACKAGE),
            p.meta.extra.get(META_PACKAGE_VERSION),
        ) {
            s.push_str(&format!(
                ", {} {}",
                sediment_profile::escape(pkg),
                sediment_profile::escape(v)
            ));
        }
        s
    };
    // Each bundle's profiles, placed onto the current build or refused.
    let mut groups: BTreeMap<String, Vec<(usize, Profile, Option<f64>)>> = BTreeMap::new();
    let mut submissions = Vec::with_capacity(bundles.len());
    for (i, (_, path, b)) in bundles.iter().enumerate() {
        let mut report = SubmissionReport {
            path: path.clone(),
            id: b.hash[..16].to_string(),
            submitter: b.manifest.submitter.clone(),
            merged: Vec::new(),
            refused: Vec::new(),
            outside: 0,
        };
        for p in &b.profiles {
            let name = base_name(&p.meta.binary).to_string();
            let mut p = p.clone();
            p.meta.binary = name.clone();
            if let Some(s) = &b.manifest.submitter {
                p.meta
                    .extra
                    .insert(sediment_profile::META_SUBMITTER.into(), s.clone());
            }
            if let Some(t) = b.manifest.recorded_at {
                p.meta
                    .extra
                    .insert(sediment_profile::META_RECORDED_AT.into(), t.to_string());
            }
            let placed = if build.is_empty() {
                let want = &current[&name];
                if p.meta.build_id != *want {
                    report.refused.push(format!(
                        "{}: {} is another build ({}) than the inbox's ({}); refused (give --binary to match it into the current build)",
                        path.display(),
                        sediment_profile::escape(&name),
                        describe(&p),
                        want.as_deref().map_or("no build-id".to_string(), |w| format!("build-id {w}"))
                    ));
                    continue;
                }
                (p, None)
            } else {
                let Some((bin_path, bin)) = build.get(&name) else {
                    report.outside += 1;
                    continue;
                };
                let targets: Vec<sediment_profile::FuncKey> =
                    bin.functions.iter().map(|s| s.key.clone()).collect();
                let share = sediment_profile::binary_share(&p, &targets);
                if p.meta.build_id.is_some() && p.meta.build_id == bin.build_id {
                    (p, Some(share.fraction()))
                } else if !share.is_enough(inbox.min_share) {
                    report.refused.push(format!(
                        "{}: {} ({}) matches {:.1}% of its weight to {}, less than {:.0}%; refused",
                        path.display(),
                        sediment_profile::escape(&name),
                        describe(&p),
                        100.0 * share.fraction(),
                        bin_path.display(),
                        100.0 * inbox.min_share
                    ));
                    continue;
                } else {
                    let (mapping, _) = sediment_profile::match_profile(&p, &targets);
                    let sizes: Vec<u64> = bin.functions.iter().map(|s| s.size).collect();
                    let mut moved = sediment_profile::retarget(
                        &p,
                        &mapping,
                        sediment_profile::Target {
                            binary: name.clone(),
                            build_id: bin.build_id.clone(),
                            arch: Some(bin.arch.clone()),
                            functions: &targets,
                            sizes: &sizes,
                        },
                    );
                    for key in [
                        sediment_profile::META_SUBMITTER,
                        sediment_profile::META_RECORDED_AT,
                        META_PACKAGE,
                        META_PACKAGE_VERSION,
                    ] {
                        if let Some(v) = p.meta.extra.get(key) {
                            moved.meta.extra.insert(key.into(), v.clone());
                        }
                    }
                    (moved, Some(share.fraction()))
                }
            };
            report.merged.push((name.clone(), placed.1));
            groups
                .entry(name)
                .or_default()
                .push((i, placed.0, placed.1));
        }
        submissions.push(report);
    }
    // Per binary: the fleet weights, the exact merge, the provenance.
    let mut profiles = Vec::with_capacity(groups.len());
    for (name, group) in groups {
        let subs: Vec<Submission> = group
            .iter()
            .map(|(i, p, _)| Submission::from_meta(bundles[*i].0, &p.meta))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow!("merge: {name}: {e}"))?;
        let plan = fleet_plan(&subs, &inbox.fleet).map_err(|e| anyhow!("merge: {e}"))?;
        let mut merger = Merger::new();
        for ((i, p, _), w) in group.iter().zip(&plan.weights) {
            merger
                .add(*w, p)
                .map_err(|e| anyhow!("{}: {name}: {e}", bundles[*i].1.display()))?;
        }
        let mut merged = merger
            .finish(MergeOptions { force: false })
            .map_err(|e| anyhow!("merge: {name}: {e}"))?;
        if inbox.fleet.is_active() {
            plan.annotate(&mut merged.meta);
        }
        merged
            .meta
            .extra
            .insert("submissions".into(), group.len().to_string());
        for ((i, p, share), w) in group.iter().zip(&plan.weights) {
            let b = &bundles[*i].2;
            let field = |k: &str| p.meta.extra.get(k).map_or("-".to_string(), Clone::clone);
            merged.meta.extra.insert(
                format!("submission.{}", &b.hash[..16]),
                format!(
                    "submitter={},package={},version={},weight={w},share={}",
                    b.manifest.submitter.as_deref().unwrap_or("-"),
                    field(META_PACKAGE),
                    field(META_PACKAGE_VERSION),
                    share.map_or("same-build".to_string(), |s| format!("{s:.4}")),
                ),
            );
        }
        profiles.push((name, merged));
    }
    Ok(InboxResult {
        profiles,
        submissions,
        duplicates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sediment_profile::{FuncKey, Meta, ProfileBuilder};

    fn profile(binary: &str, build_id: Option<&str>, weight: u64) -> Profile {
        let mut b = ProfileBuilder::new(Meta {
            binary: binary.to_string(),
            build_id: build_id.map(str::to_string),
            ..Meta::default()
        });
        b.add_self(&FuncKey::global("f"), weight);
        b.build()
    }

    // Copies of one build at two paths are summed into one file; two builds of one base name
    // get a file each, named by build-id; every file counts one recording.
    #[test]
    fn prof_dir_names_and_sums() {
        let dir = tempfile::tempdir().unwrap();
        let imported = Imported {
            source: "perf",
            profiles: vec![
                profile("/a/prog", Some("aa"), 1),
                profile("/b/prog", Some("aa"), 2),
                profile("/a/tool", Some("bb"), 3),
                profile("/b/tool", Some("cc"), 4),
            ],
            main: None,
            warnings: Vec::new(),
        };
        let out = into_prof_dir(dir.path(), imported).unwrap();
        let files: Vec<(String, u64, &str)> = out
            .files
            .iter()
            .map(|(path, p)| {
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    p.functions[0].self_weight,
                    p.meta.extra[META_RECORDINGS].as_str(),
                )
            })
            .collect();
        assert_eq!(
            files,
            [
                ("prog.sprof".to_string(), 3, "1"),
                ("tool.bb.sprof".to_string(), 3, "1"),
                ("tool.cc.sprof".to_string(), 4, "1"),
            ]
        );
        assert!(out.warnings.is_empty());
    }
}
