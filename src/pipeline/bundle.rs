//! Contributor bundles: one file a user sends in, holding the profiles of one recording
//! (`sediment record --bundle FILE`), and the reading side a packager's `sediment merge
//! --prof-dir` uses on an inbox of them ([`super::merge::merge_inbox`]).
//!
//! A bundle is a gzip-compressed tar file (`.sbundle`), written in one order with fixed times,
//! owners and modes, so that one recording gives one byte sequence. Its members:
//!
//! - `manifest.json` first: the format (`sediment-bundle`, [`FORMAT`]), the submitter and the
//!   time of the recording when known (`submitter`, `recorded_at`, Unix seconds), the profiler
//!   (`source`, `event`), the recording's wall-clock `duration_ms` and its `total` weight (the
//!   samples, for perf) over every binary it saw, and one entry per profile: the member file,
//!   the binary's base name, build-id, architecture, package name and version where the
//!   system's package manager knows the file ([`package_of`]), and its weight;
//! - `profiles/<name>.sprof` (`<name>.<build-id>.sprof` when two builds share a base name):
//!   the profiles, each a plain Sediment profile whose `meta` repeats the package, version,
//!   submitter and time, so a profile taken out of the bundle still says where it came from.
//!
//! Nothing private goes in unless the user asks (`record --keep-paths`): binaries are named by
//! base name and build-id, no command line, no directory (the record stage's
//! [`super::record::drop_private`]).
//!
//! Reading is bounded and strict: a bundle larger than [`MAX_BUNDLE_BYTES`] compressed or
//! [`MAX_UNPACKED_BYTES`] unpacked, a member other than the manifest and `profiles/*.sprof`, a
//! manifest entry without its profile (or the reverse) are one-line errors naming the file.
//! The bundle's identity is the SHA-256 of its bytes ([`Bundle::hash`]): two submissions with
//! the same bytes are one.
//!
//! Turned down: a plain directory (several files to send, which mail and upload forms do not
//! take), and zip (random access is not needed; tar and gzip are what every Linux system opens
//! to look inside).

use anyhow::{anyhow, bail, Context, Result};
use sediment_profile::Profile;
use serde::{Deserialize, Serialize};
use std::io::Read as _;
use std::path::Path;
use std::process::Command;

/// The file extension of bundles.
pub const EXTENSION: &str = "sbundle";
/// The manifest's `format` value.
pub const FORMAT: &str = "sediment-bundle 1";
/// The most compressed bytes a bundle may have.
pub const MAX_BUNDLE_BYTES: u64 = 256 << 20;
/// The most bytes a bundle may unpack to.
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;
/// The `meta` key of a profile naming the package that ships the binary.
pub const META_PACKAGE: &str = "package";
/// The `meta` key of a profile giving that package's version.
pub const META_PACKAGE_VERSION: &str = "package-version";

/// The manifest of a bundle (`manifest.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// Who sent it, when the user said (`record --submitter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<String>,
    /// When the recording started, Unix seconds UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<i64>,
    /// The profiler's importer (`perf`, `callgrind`).
    pub source: String,
    /// The counted event (`cpu-clock`, `Ir`), when every profile names the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Wall-clock length of the recording in milliseconds.
    pub duration_ms: u64,
    /// Weight the recording saw in every binary, kept or not (perf: samples).
    pub total: u64,
    /// One entry per profile, in member order.
    pub profiles: Vec<Entry>,
}

/// One profile of a bundle, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The member holding it (`profiles/postgres.sprof`).
    pub file: String,
    /// The binary's base name.
    pub binary: String,
    /// Its GNU build-id, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// Its architecture, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// The package that installed it, when the package manager knows the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// That package's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The profile's `total` weight.
    pub total: u64,
}

/// A bundle read back: its manifest, its profiles (in manifest order), and its identity.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The manifest.
    pub manifest: Manifest,
    /// The profiles, in the manifest's order.
    pub profiles: Vec<Profile>,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub hash: String,
}

/// The package that installed `path` and its version: `dpkg -S` then `dpkg-query` on Debian
/// and its derivatives, `rpm -qf` where rpm is; `None` when neither knows the file (a build
/// tree, `/usr/local`) or neither is installed. The path is tried as given and resolved
/// (Debian's merged `/usr` records `/lib/...` for files dpkg knows as `/usr/lib/...`, and the
/// reverse).
pub fn package_of(path: &Path) -> Option<(String, String)> {
    let mut tries = vec![path.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(path) {
        if real != path {
            tries.push(real);
        }
    }
    // Merged `/usr`: `/lib` is `/usr/lib`, and dpkg knows each file under one spelling.
    for p in tries.clone() {
        let other = match p.strip_prefix("/usr") {
            Ok(rest) => Path::new("/").join(rest),
            Err(_) => Path::new("/usr").join(p.strip_prefix("/").unwrap_or(&p)),
        };
        if !tries.contains(&other) {
            tries.push(other);
        }
    }
    for p in &tries {
        if let Some(found) = dpkg_package(p) {
            return Some(found);
        }
    }
    tries.iter().find_map(|p| rpm_package(p))
}

/// `dpkg -S PATH` (`libc6:amd64: /usr/lib/x86_64-linux-gnu/libc.so.6`), then the package's
/// version from `dpkg-query -W`.
fn dpkg_package(path: &Path) -> Option<(String, String)> {
    let out = Command::new("dpkg")
        .arg("-S")
        .arg(path)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?;
    // `pkg[:arch][, pkg2...]: path`; diversions start with `diversion by`.
    let (packages, _) = line.split_once(": ")?;
    let package = packages.split(", ").next()?.trim();
    if package.is_empty() || package.contains(' ') {
        return None;
    }
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", package])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || version.is_empty() {
        return None;
    }
    let name = package.split(':').next().unwrap_or(package).to_string();
    Some((name, version))
}

/// `rpm -qf PATH` with the name and `VERSION-RELEASE`.
fn rpm_package(path: &Path) -> Option<(String, String)> {
    let out = Command::new("rpm")
        .args(["-qf", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n"])
        .arg(path)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let (name, version) = text.lines().next()?.split_once('\t')?;
    Some((name.to_string(), version.to_string()))
}

/// The member name of each profile: `profiles/<name>.sprof`, or `<name>.<build-id>.sprof`
/// when two profiles share a base name (`<name>.<n>.sprof` without build-ids).
fn member_names(profiles: &[Profile]) -> Vec<String> {
    let base = |p: &Profile| sediment_profile::base_name(&p.meta.binary).to_string();
    profiles
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = base(p);
            let shared = profiles.iter().filter(|q| base(q) == name).count() > 1;
            let file = match (&p.meta.build_id, shared) {
                (_, false) => format!("{name}.sprof"),
                (Some(id), true) => format!("{name}.{id}.sprof"),
                (None, true) => format!("{name}.{i}.sprof"),
            };
            format!(
                "profiles/{}",
                sediment_profile::escape(&file).replace('/', "%2F")
            )
        })
        .collect()
}

/// The manifest entries of `profiles`, with their member names (`profiles/<name>.sprof`, module docs).
pub fn entries(profiles: &[Profile]) -> Vec<Entry> {
    profiles
        .iter()
        .zip(member_names(profiles))
        .map(|(p, file)| Entry {
            file,
            binary: sediment_profile::base_name(&p.meta.binary).to_string(),
            build_id: p.meta.build_id.clone(),
            arch: p.meta.arch.clone(),
            package: p.meta.extra.get(META_PACKAGE).cloned(),
            version: p.meta.extra.get(META_PACKAGE_VERSION).cloned(),
            total: p.meta.total,
        })
        .collect()
}

/// The bytes of a bundle: the manifest, then each profile at its entry's `file`, in a tar
/// file with fixed times (0), owners (0) and modes (0644), gzip-compressed.
pub fn to_bytes(manifest: &Manifest, profiles: &[Profile]) -> Result<Vec<u8>> {
    if manifest.profiles.len() != profiles.len() {
        bail!(
            "bundle: the manifest lists {} profiles, {} given",
            manifest.profiles.len(),
            profiles.len()
        );
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    let mut add = |name: &str, data: &[u8]| -> Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, name, data)
            .with_context(|| format!("bundle: cannot add {name}"))
    };
    let json = serde_json::to_string_pretty(manifest)? + "\n";
    add("manifest.json", json.as_bytes())?;
    for (e, p) in manifest.profiles.iter().zip(profiles) {
        add(&e.file, p.to_text().as_bytes())?;
    }
    let gz = tar
        .into_inner()
        .context("bundle: cannot finish the tar file")?;
    gz.finish().context("bundle: cannot compress")
}

/// Reads the bundle at `path` (module docs: limits, strictness); errors name the file.
pub fn read(path: &Path) -> Result<Bundle> {
    use sha2::Digest as _;
    let shown = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("{shown}: cannot read"))?;
    if !meta.is_file() {
        bail!("{shown}: not a regular file");
    }
    if meta.len() > MAX_BUNDLE_BYTES {
        bail!(
            "{shown}: {} bytes, more than a bundle may have ({MAX_BUNDLE_BYTES})",
            meta.len()
        );
    }
    let bytes = std::fs::read(path).with_context(|| format!("{shown}: cannot read"))?;
    let hash = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    let gz = flate2::read::GzDecoder::new(bytes.as_slice());
    let mut archive = tar::Archive::new(gz.take(MAX_UNPACKED_BYTES + 1));
    let mut manifest: Option<Manifest> = None;
    let mut members: Vec<(String, String)> = Vec::new();
    let entries = archive
        .entries()
        .map_err(|e| anyhow!("{shown}: not a Sediment bundle (a gzip-compressed tar file): {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| {
            anyhow!("{shown}: not a Sediment bundle (a gzip-compressed tar file): {e}")
        })?;
        let name = entry
            .path()
            .map_err(|e| anyhow!("{shown}: bad member name: {e}"))?
            .to_string_lossy()
            .into_owned();
        if entry.header().entry_type() != tar::EntryType::Regular {
            bail!(
                "{shown}: member {}: not a regular file",
                sediment_profile::quote(&name)
            );
        }
        let mut text = String::new();
        entry
            .read_to_string(&mut text)
            .map_err(|e| anyhow!("{shown}: member {}: {e}", sediment_profile::quote(&name)))?;
        if name == "manifest.json" {
            if manifest.is_some() {
                bail!("{shown}: two manifests");
            }
            let m: Manifest =
                serde_json::from_str(&text).map_err(|e| anyhow!("{shown}: manifest.json: {e}"))?;
            if m.format != FORMAT {
                bail!(
                    "{shown}: manifest.json: format `{}`, expected `{FORMAT}`",
                    sediment_profile::quote(&m.format)
                );
            }
            manifest = Some(m);
        } else if name.starts_with("profiles/")
            && name.ends_with(".sprof")
            && !name[9..].contains('/')
        {
            if members.iter().any(|(n, _)| *n == name) {
                bail!("{shown}: member {} twice", sediment_profile::quote(&name));
            }
            members.push((name, text));
        } else {
            bail!(
                "{shown}: member {}: not part of a bundle (manifest.json, profiles/*.sprof)",
                sediment_profile::quote(&name)
            );
        }
    }
    let manifest = manifest.with_context(|| format!("{shown}: no manifest.json"))?;
    if members.len() != manifest.profiles.len() {
        bail!(
            "{shown}: the manifest lists {} profiles, the bundle holds {}",
            manifest.profiles.len(),
            members.len()
        );
    }
    let mut profiles = Vec::with_capacity(members.len());
    for e in &manifest.profiles {
        let (_, text) = members.iter().find(|(n, _)| *n == e.file).ok_or_else(|| {
            anyhow!(
                "{shown}: the manifest lists {}, which is missing",
                sediment_profile::quote(&e.file)
            )
        })?;
        let p = Profile::from_text(text)
            .map_err(|err| anyhow!("{shown}: {}: {err}", sediment_profile::quote(&e.file)))?;
        profiles.push(p);
    }
    Ok(Bundle {
        manifest,
        profiles,
        hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sediment_profile::{FuncKey, Meta, ProfileBuilder};

    fn profile(binary: &str, id: &str, w: u64) -> Profile {
        let mut b = ProfileBuilder::new(Meta {
            binary: binary.into(),
            build_id: Some(id.into()),
            source: "perf".into(),
            total: w,
            ..Meta::default()
        });
        b.add_self(&FuncKey::global("f"), w);
        b.build()
    }

    // Written twice, the same bytes; read back, the same manifest and profiles; two builds of
    // one base name get a member each.
    #[test]
    fn round_trip_and_deterministic() {
        let profiles = vec![
            profile("tool", "aa", 3),
            profile("tool", "bb", 4),
            profile("libz.so.1", "cc", 5),
        ];
        let manifest = Manifest {
            format: FORMAT.into(),
            submitter: Some("alice".into()),
            recorded_at: Some(1_700_000_000),
            source: "perf".into(),
            event: None,
            duration_ms: 1500,
            total: 12,
            profiles: entries(&profiles),
        };
        let files: Vec<&str> = manifest.profiles.iter().map(|e| e.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "profiles/tool.aa.sprof",
                "profiles/tool.bb.sprof",
                "profiles/libz.so.1.sprof"
            ]
        );
        let a = to_bytes(&manifest, &profiles).unwrap();
        let b = to_bytes(&manifest, &profiles).unwrap();
        assert_eq!(a, b);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sbundle");
        std::fs::write(&path, &a).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.manifest, manifest);
        assert_eq!(back.profiles, profiles);
        assert_eq!(back.hash.len(), 64);
    }

    // Not a bundle: one line naming the file.
    #[test]
    fn garbage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sbundle");
        std::fs::write(&path, b"sediment-profile 1\n").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("x.sbundle: not a Sediment bundle"), "{e}");
    }
}
