//! The cache of one-pass results ([`crate::onepass`]): a binary measured once with the same
//! inputs is not run again, so adding a variant to a comparison costs one run.
//!
//! **Location.** `$XDG_CACHE_HOME/sediment/measure/` (an absolute `XDG_CACHE_HOME` only, as
//! the XDG spec asks), else `~/.cache/sediment/measure/` ([`default_dir`]). One JSON file per
//! result, named by a 64-bit hash of its key.
//!
//! **Key.** Everything a run's numbers depend on, written out as text ([`Key::text`]):
//! the measurement's [`crate::onepass::VERSION`]; the trace tool's executable (its cache path
//! names a hash of its source and of the valgrind version); the binary's canonical path (it is
//! the program's `argv[0]`) and a hash of its whole content (stricter than a build-id, which a
//! relink in another order may keep); the working directory; the arguments; the whole
//! environment, sorted (its size alone moves the stack and changes the loader's instruction
//! count); a hash of the standard input file's content; the sampling limit. The entry stores
//! the key text and a lookup compares it, so a hash collision is a miss, not a wrong result.
//! What the key cannot see (files the program reads, the time, the kernel) is the user's to
//! hold still, as for any measurement; `--no-cache` skips the cache.
//!
//! **Writes are atomic**: an entry is written to a temporary file in the same directory and
//! renamed over its name, so a reader sees a whole entry or none, and concurrent writers of
//! one key leave one of their (equal) entries. A file that cannot be read or parsed is a miss.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::onepass::{Measured, VERSION};
use crate::Error;

/// `$XDG_CACHE_HOME/sediment/measure`, or `~/.cache/sediment/measure`; `None` when neither
/// variable is set.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(base.join("sediment").join("measure"))
}

/// What a run's key is made of, besides the process's environment and working directory.
#[derive(Debug, Clone, Copy)]
pub struct KeyInput<'a> {
    /// The binary's canonical path.
    pub binary: &'a Path,
    /// The binary's content.
    pub content: &'a [u8],
    /// The program's arguments.
    pub args: &'a [OsString],
    /// Hash of the standard input file ([`file_hash`]), `None` for none.
    pub stdin_hash: Option<&'a str>,
    /// Sampling limit in instructions.
    pub sample: Option<u64>,
    /// The trace tool's executable.
    pub tool: &'a Path,
}

/// A cache key: its full text and the file name derived from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    text: String,
}

impl Key {
    /// The key of a run of `input` from this process (its environment and directory).
    pub fn new(input: &KeyInput<'_>) -> Self {
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        env.sort();
        let cwd = std::env::current_dir().unwrap_or_default();
        Self::with(input, &env, &cwd)
    }

    /// The key of a run of `input` with environment `env` (sorted) in directory `cwd`.
    pub fn with(input: &KeyInput<'_>, env: &[(OsString, OsString)], cwd: &Path) -> Self {
        let mut t = format!("sediment measure one-pass v{VERSION}\n");
        t.push_str(&format!("tool {:?}\n", input.tool));
        t.push_str(&format!("binary {:?}\n", input.binary));
        t.push_str(&format!(
            "content {} {}\n",
            hash(input.content),
            input.content.len()
        ));
        t.push_str(&format!("cwd {cwd:?}\n"));
        for a in input.args {
            t.push_str(&format!("arg {a:?}\n"));
        }
        for (k, v) in env {
            t.push_str(&format!("env {k:?}={v:?}\n"));
        }
        t.push_str(&format!("stdin {}\n", input.stdin_hash.unwrap_or("none")));
        match input.sample {
            Some(n) => t.push_str(&format!("sample {n}\n")),
            None => t.push_str("sample none\n"),
        }
        Self { text: t }
    }

    /// The key written out, one field a line.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The entry's file name.
    pub fn file_name(&self) -> String {
        format!("{}.json", hash(self.text.as_bytes()))
    }
}

/// XXH3, 64 bits, as 16 hex digits.
fn hash(bytes: &[u8]) -> String {
    format!("{:016x}", twox_hash::XxHash3_64::oneshot(bytes))
}

/// Hash of a file's content (the standard input of the runs).
pub fn file_hash(path: &Path) -> Result<String, Error> {
    let data = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(format!("{} {}", hash(&data), data.len()))
}

/// One file of the cache.
#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    key: String,
    measured: Measured,
}

/// The entry for `key` in `dir`, if there is a readable one with exactly this key.
pub fn load(dir: &Path, key: &Key) -> Option<Measured> {
    let text = std::fs::read_to_string(dir.join(key.file_name())).ok()?;
    let entry: Entry = serde_json::from_str(&text).ok()?;
    (entry.key == key.text).then_some(entry.measured)
}

/// Writes `measured` as the entry for `key` in `dir` (created if missing), atomically.
pub fn store(dir: &Path, key: &Key, measured: &Measured) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let entry = Entry {
        key: key.text.clone(),
        measured: measured.clone(),
    };
    // Plain structs of strings and integers always serialise.
    let json = serde_json::to_vec_pretty(&entry).unwrap_or_default();
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    tmp.write_all(&json).map_err(io(tmp.path()))?;
    let dest = dir.join(key.file_name());
    tmp.persist(&dest).map_err(|e| Error::Io {
        path: dest,
        source: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metrics;

    fn input<'a>(content: &'a [u8], args: &'a [OsString]) -> KeyInput<'a> {
        KeyInput {
            binary: Path::new("/bin/prog"),
            content,
            args,
            stdin_hash: None,
            sample: None,
            tool: Path::new("/cache/tool"),
        }
    }

    fn measured(insns: u64) -> Measured {
        Measured {
            metrics: Metrics {
                instructions: insns,
                ..Metrics::default()
            },
            stderr_fnv1a: "e".into(),
            sampled: None,
            code_fingerprint: "c".into(),
            cached: false,
        }
    }

    // Each ingredient of the key changes it: content, arguments, environment, directory,
    // input, sampling.
    #[test]
    fn every_input_changes_the_key() {
        let args = [OsString::from("a")];
        let env = [(OsString::from("K"), OsString::from("v"))];
        let cwd = Path::new("/w");
        let base = Key::with(&input(b"elf", &args), &env, cwd);
        let mut others = vec![
            Key::with(&input(b"elf2", &args), &env, cwd),
            Key::with(&input(b"elf", &[]), &env, cwd),
            Key::with(&input(b"elf", &args), &[], cwd),
            Key::with(&input(b"elf", &args), &env, Path::new("/x")),
        ];
        let mut i = input(b"elf", &args);
        i.stdin_hash = Some("1234 5");
        others.push(Key::with(&i, &env, cwd));
        let mut i = input(b"elf", &args);
        i.sample = Some(1000);
        others.push(Key::with(&i, &env, cwd));
        for o in &others {
            assert_ne!(o.text(), base.text());
            assert_ne!(o.file_name(), base.file_name());
        }
        assert_eq!(Key::with(&input(b"elf", &args), &env, cwd), base);
    }

    // Store then load gives the entry back; another key, or a damaged file, is a miss; the
    // directory holds no temporary file afterwards.
    #[test]
    fn entries_round_trip_and_damage_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("measure");
        let args = [OsString::from("a")];
        let k = Key::with(&input(b"elf", &args), &[], Path::new("/"));
        assert_eq!(load(&d, &k), None);
        store(&d, &k, &measured(42)).unwrap();
        assert_eq!(load(&d, &k), Some(measured(42)));
        let other = Key::with(&input(b"elf2", &args), &[], Path::new("/"));
        assert_eq!(load(&d, &other), None);
        // A file of the right name whose stored key differs (a hash collision) is a miss.
        std::fs::copy(d.join(k.file_name()), d.join(other.file_name())).unwrap();
        assert_eq!(load(&d, &other), None);
        let names: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
        assert_eq!(names.len(), 2);
        std::fs::write(d.join(k.file_name()), "{ not json").unwrap();
        assert_eq!(load(&d, &k), None);
    }
}
