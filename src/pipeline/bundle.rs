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
//! Reading is bounded and strict. What one bundle may hold ([`LIMITS`]): [`MAX_BUNDLE_BYTES`]
//! compressed, [`MAX_UNPACKED_BYTES`] unpacked (the gzip stream is counted as it is read, so
//! a gzip bomb stops at the limit), [`MAX_MEMBERS`] members, a manifest of
//! [`MAX_MANIFEST_BYTES`]; what the bundles of one run may unpack together ([`RunBudget`]): the
//! run's read budget (`SEDIMENT_MAX_INPUT_BYTES`, default 4 GiB: `fsio::ReadBudget`),
//! and [`MAX_RUN_MEMBERS`] members. Past any of them, a member other than the manifest and
//! `profiles/*.sprof`, a manifest entry without its profile (or the reverse): one-line errors
//! naming the file and the problem, never the tar library's own words. `record --bundle`
//! refuses to write a bundle over the per-bundle limits, so no user sends one a packager
//! would refuse. The bundle's identity is the SHA-256 of its bytes ([`Bundle::hash`]): two
//! submissions with the same bytes are one.
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
/// The most bytes a bundle may unpack to (the tar file: members, their headers and padding).
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;
/// The most members a bundle may hold: the manifest and one profile per binary the recording
/// kept (a whole system's recording keeps a few thousand).
pub const MAX_MEMBERS: usize = 1 << 16;
/// The most bytes of a bundle's manifest: [`MAX_MEMBERS`] entries of 1 KiB each.
pub const MAX_MANIFEST_BYTES: u64 = (MAX_MEMBERS as u64) << 10;
/// The most members the bundles of one run (an inbox merge) may hold together.
pub const MAX_RUN_MEMBERS: usize = 1 << 20;

/// What one bundle may hold (module docs); [`LIMITS`] are the ones bundles are read and
/// written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Compressed bytes.
    pub compressed: u64,
    /// Unpacked bytes (the tar file).
    pub unpacked: u64,
    /// Members.
    pub members: usize,
    /// Bytes of `manifest.json`.
    pub manifest: u64,
}

/// The limits of every bundle.
pub const LIMITS: Limits = Limits {
    compressed: MAX_BUNDLE_BYTES,
    unpacked: MAX_UNPACKED_BYTES,
    members: MAX_MEMBERS,
    manifest: MAX_MANIFEST_BYTES,
};

/// What the bundles of one run may unpack together: their unpacked bytes charged to the run's
/// read budget, and their members counted against [`MAX_RUN_MEMBERS`].
#[derive(Debug, Clone)]
pub struct RunBudget {
    bytes: crate::fsio::ReadBudget,
    members_left: usize,
}

impl RunBudget {
    /// `bytes` unpacked and `members` in all.
    pub fn new(bytes: u64, members: usize) -> Self {
        RunBudget {
            bytes: crate::fsio::ReadBudget::new(bytes),
            members_left: members,
        }
    }

    /// The run's read budget (`SEDIMENT_MAX_INPUT_BYTES`, else 4 GiB) and [`MAX_RUN_MEMBERS`].
    pub fn from_env() -> Result<Self> {
        Ok(RunBudget {
            bytes: crate::fsio::ReadBudget::from_flag_or_env(None)?,
            members_left: MAX_RUN_MEMBERS,
        })
    }
}
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
/// file with fixed times (0), owners (0) and modes (0644), gzip-compressed. A bundle over
/// [`LIMITS`] (one that [`read`] would refuse) is an error.
pub fn to_bytes(manifest: &Manifest, profiles: &[Profile]) -> Result<Vec<u8>> {
    to_bytes_within(manifest, profiles, LIMITS)
}

/// [`to_bytes`] with the limits as a parameter (tests use small ones).
fn to_bytes_within(manifest: &Manifest, profiles: &[Profile], limits: Limits) -> Result<Vec<u8>> {
    if manifest.profiles.len() != profiles.len() {
        bail!(
            "bundle: the manifest lists {} profiles, {} given",
            manifest.profiles.len(),
            profiles.len()
        );
    }
    let mut tar = tar::Builder::new(Vec::new());
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
    if json.len() as u64 > limits.manifest || manifest.profiles.len() >= limits.members {
        bail!(
            "a bundle of {} profiles, more than a bundle may hold ({}); record fewer binaries (--under, --keep-binaries)",
            profiles.len(),
            limits.members - 1
        );
    }
    add("manifest.json", json.as_bytes())?;
    for (e, p) in manifest.profiles.iter().zip(profiles) {
        add(&e.file, p.to_text().as_bytes())?;
    }
    let unpacked = tar
        .into_inner()
        .context("bundle: cannot finish the tar file")?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &unpacked).context("bundle: cannot compress")?;
    let bytes = gz.finish().context("bundle: cannot compress")?;
    let unpacked = unpacked.len() as u64;
    if unpacked > limits.unpacked || bytes.len() as u64 > limits.compressed {
        bail!(
            "a bundle of {} bytes ({unpacked} unpacked), more than a bundle may have ({} compressed, {} unpacked); record fewer binaries (--under, --keep-binaries)",
            bytes.len(),
            limits.compressed,
            limits.unpacked
        );
    }
    Ok(bytes)
}

/// A reader counting the bytes read through it into a cell the caller keeps, and failing
/// once they pass `cap` (the tar reader then stops; the caller tells the reason by the count).
struct Counted<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
    cap: u64,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let read = self.read.get() + n as u64;
        self.read.set(read);
        if read > self.cap {
            return Err(std::io::Error::other("past the limit"));
        }
        Ok(n)
    }
}

/// Reads the bundle at `path` (module docs: limits, strictness), charging what it unpacks to
/// `run`; errors name the file.
pub fn read(path: &Path, run: &mut RunBudget) -> Result<Bundle> {
    read_within(path, LIMITS, run)
}

/// [`read`] with the per-bundle limits as a parameter (tests use small ones).
fn read_within(path: &Path, limits: Limits, run: &mut RunBudget) -> Result<Bundle> {
    use sha2::Digest as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let shown = path.display();
    let not_regular = || anyhow!("{shown}: not a regular file");
    if !std::fs::metadata(path)
        .with_context(|| format!("{shown}: cannot read"))?
        .is_file()
    {
        return Err(not_regular());
    }
    // Opened once without blocking (a FIFO swapped in does not wait for a writer) and checked
    // on the handle.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("{shown}: cannot read"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("{shown}: cannot read"))?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let too_big = |len: u64| {
        anyhow!(
            "{shown}: {len} bytes, more than a bundle may have ({})",
            limits.compressed
        )
    };
    if meta.len() > limits.compressed {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limits.compressed + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{shown}: cannot read"))?;
    if bytes.len() as u64 > limits.compressed {
        return Err(too_big(bytes.len() as u64));
    }
    let hash = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    // What this bundle may unpack to: its own limit, or what the run has left when that is less.
    let run_left = run.bytes.left();
    let unpacked = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut archive = tar::Archive::new(Counted {
        inner: flate2::read::GzDecoder::new(bytes.as_slice()),
        read: unpacked.clone(),
        cap: limits.unpacked.min(run_left),
    });
    // Past a limit the tar reader fails in its own words: the one line says which limit.
    let over = |e: std::io::Error| -> anyhow::Error {
        if unpacked.get() > limits.unpacked {
            anyhow!(
                "{shown}: unpacks to more than {} bytes, more than a bundle may (a gzip bomb?)",
                limits.unpacked
            )
        } else if unpacked.get() > run_left {
            run.bytes.exceeded(path)
        } else {
            anyhow!("{shown}: not a Sediment bundle (a gzip-compressed tar file): {e}")
        }
    };
    let mut manifest: Option<Manifest> = None;
    let mut members: std::collections::BTreeMap<String, String> = Default::default();
    let mut count = 0usize;
    let entries = archive.entries().map_err(&over)?;
    for entry in entries {
        let mut entry = entry.map_err(&over)?;
        count += 1;
        if count > limits.members {
            bail!(
                "{shown}: more than {} members, more than a bundle may hold",
                limits.members
            );
        }
        if count > run.members_left {
            bail!(
                "{shown}: reading it would take this run past {MAX_RUN_MEMBERS} bundle members in all"
            );
        }
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
        let is_manifest = name == "manifest.json";
        if is_manifest && entry.header().size().unwrap_or(0) > limits.manifest {
            bail!(
                "{shown}: manifest.json: more than {} bytes, more than a manifest may have",
                limits.manifest
            );
        }
        let mut text = String::new();
        entry.read_to_string(&mut text).map_err(|e| {
            if unpacked.get() > limits.unpacked.min(run_left) {
                over(e)
            } else {
                anyhow!("{shown}: member {}: {e}", sediment_profile::quote(&name))
            }
        })?;
        if is_manifest {
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
            if members.contains_key(&name) {
                bail!("{shown}: member {} twice", sediment_profile::quote(&name));
            }
            members.insert(name, text);
        } else {
            bail!(
                "{shown}: member {}: not part of a bundle (manifest.json, profiles/*.sprof)",
                sediment_profile::quote(&name)
            );
        }
    }
    run.bytes.charge(path, unpacked.get())?;
    run.members_left -= count;
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
        let text = members.get(&e.file).ok_or_else(|| {
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
        let back = read(&path, &mut RunBudget::from_env().unwrap()).unwrap();
        assert_eq!(back.manifest, manifest);
        assert_eq!(back.profiles, profiles);
        assert_eq!(back.hash.len(), 64);
    }

    /// A gzip-compressed tar file of `members` (name, bytes), as a hostile sender makes one.
    fn crafted(members: &[(String, Vec<u8>)]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let mut tar = tar::Builder::new(gz);
        for (name, data) in members {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut h, name, data.as_slice()).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }

    /// A manifest of `profiles` (format, entries; the rest fixed).
    fn manifest_of(profiles: &[Profile]) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            submitter: None,
            recorded_at: None,
            source: "perf".into(),
            event: None,
            duration_ms: 1,
            total: 1,
            profiles: entries(profiles),
        }
    }

    /// `bytes` written as `name` in `dir`; its path.
    fn file(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The one-line error of reading `path` within `limits` and `run`.
    fn refused(path: &Path, limits: Limits, run: &mut RunBudget) -> String {
        let e = format!("{:#}", read_within(path, limits, run).unwrap_err());
        assert!(!e.contains('\n'), "one line: {e}");
        assert!(e.starts_with(&format!("{}: ", path.display())), "{e}");
        e
    }

    const SMALL: Limits = Limits {
        compressed: 64 << 10,
        unpacked: 1 << 20,
        members: 10,
        manifest: 4 << 10,
    };

    // A gzip bomb of modest size (16 MiB of zeros in a few kilobytes) stops at the unpacked
    // limit with the project's one line, not the tar library's words; so does one under the
    // bundle's limit that passes what the run has left; the compressed size is checked first.
    #[test]
    fn a_gzip_bomb_stops_at_the_unpacked_limit() {
        let dir = tempfile::tempdir().unwrap();
        let bomb = crafted(&[("profiles/x.sprof".into(), vec![0; 16 << 20])]);
        assert!((bomb.len() as u64) < SMALL.compressed, "premise: small");
        let path = file(dir.path(), "bomb.sbundle", &bomb);
        let big_run = || RunBudget::new(u64::MAX, usize::MAX);
        let e = refused(&path, SMALL, &mut big_run());
        assert!(
            e.contains("unpacks to more than 1048576 bytes, more than a bundle may"),
            "{e}"
        );
        assert!(!e.contains("tar") && !e.contains("entire block"), "{e}");

        let e = refused(&path, SMALL, &mut RunBudget::new(100_000, usize::MAX));
        assert!(e.contains("past its 100000-byte input limit"), "{e}");

        let tight = Limits {
            compressed: 100,
            ..SMALL
        };
        let e = refused(&path, tight, &mut big_run());
        assert!(
            e.contains(&format!(
                "{} bytes, more than a bundle may have (100)",
                bomb.len()
            )),
            "{e}"
        );
    }

    // Too many members (empty ones: 512 bytes each unpacked, a few compressed) and a manifest
    // over its limit are refused by count and size before they are held; members of the
    // bundles of one run are counted together.
    #[test]
    fn too_many_members_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let many: Vec<(String, Vec<u8>)> = (0..50)
            .map(|i| (format!("profiles/p{i}.sprof"), Vec::new()))
            .collect();
        let path = file(dir.path(), "many.sbundle", &crafted(&many));
        let run = &mut RunBudget::new(u64::MAX, usize::MAX);
        let e = refused(&path, SMALL, run);
        assert!(
            e.contains("more than 10 members, more than a bundle may hold"),
            "{e}"
        );

        let fat = crafted(&[("manifest.json".into(), vec![b' '; 8 << 10])]);
        let path = file(dir.path(), "fat.sbundle", &fat);
        let e = refused(&path, SMALL, run);
        assert!(e.contains("manifest.json: more than 4096 bytes"), "{e}");

        let profiles = vec![profile("a", "aa", 1), profile("b", "bb", 2)];
        let ok = to_bytes(&manifest_of(&profiles), &profiles).unwrap();
        let path = file(dir.path(), "ok.sbundle", &ok);
        let run = &mut RunBudget::new(u64::MAX, 5);
        assert_eq!(read_within(&path, SMALL, run).unwrap().profiles, profiles);
        let e = refused(&path, SMALL, run);
        assert!(e.contains("bundle members in all"), "{e}");
    }

    // A bundle the reader would refuse is not written: too many profiles, or too many bytes.
    #[test]
    fn an_over_size_bundle_is_not_written() {
        let profiles: Vec<Profile> = (0..12)
            .map(|i| profile(&format!("b{i}"), &format!("{i:02x}"), 1))
            .collect();
        let e = to_bytes_within(&manifest_of(&profiles), &profiles, SMALL)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("12 profiles, more than a bundle may hold"),
            "{e}"
        );
        let tiny = Limits {
            unpacked: 2048,
            ..SMALL
        };
        let e = to_bytes_within(&manifest_of(&profiles[..2]), &profiles[..2], tiny)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than a bundle may have"), "{e}");
        assert!(to_bytes_within(&manifest_of(&profiles[..2]), &profiles[..2], SMALL).is_ok());
    }

    // Not a bundle: one line naming the file.
    #[test]
    fn garbage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sbundle");
        std::fs::write(&path, b"sediment-profile 1\n").unwrap();
        let e = read(&path, &mut RunBudget::from_env().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.sbundle: not a Sediment bundle"), "{e}");
    }
}
