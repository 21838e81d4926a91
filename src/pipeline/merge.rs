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
            if p.extension().is_some_and(|e| e == "sprof") && !p.is_dir() {
                files.push(p);
            }
        }
        if files.is_empty() {
            bail!("{}: no *.sprof file in this directory", path.display());
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
        fsio::ProfileSlot::Profile(p) => p,
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
