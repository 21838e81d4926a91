//! The `merge` stage: several profiles of one executable -> one profile.
//!
//! Two callers, two shapes:
//! - [`merge`]: weighted profiles given by the user (`sediment merge`), read one at a time into
//!   a [`Merger`] (normalized to a common scale, exact sums, one rounding:
//!   [`sediment_profile::merge`]), so merging many submissions takes the memory of the largest
//!   one plus the result.
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
use anyhow::{anyhow, bail, Result};
use sediment_import::Imported;
use sediment_profile::{
    base_name, sum, Error as ProfileError, MergeOptions, Merger, Profile, META_RECORDINGS,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The `merge` stage for weighted inputs: reads each profile of `inputs` (weight, file) and
/// merges them. `force` merges even when the inputs name different binaries, build-ids or
/// architectures. Errors name the file concerned.
pub fn merge(inputs: &[(f64, PathBuf)], force: bool) -> Result<Profile> {
    let _t = timings::stage("merge");
    let mut merger = Merger::new();
    for (w, path) in inputs {
        let profile = fsio::read_profile(path)?;
        merger.add(*w, &profile).map_err(|e| match e {
            ProfileError::BadWeight { weight, .. } => anyhow!(
                "{}: weight {weight} is not a finite number >= 0",
                path.display()
            ),
            e => anyhow!("{}: {e}", path.display()),
        })?;
    }
    let options = MergeOptions { force };
    merger.finish(options).map_err(|e| match e {
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
    })
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
