//! File handling shared by every subcommand: bounded reads and atomic writes.
//!
//! Outputs are written to a temporary file in the destination directory and renamed into place,
//! so a failed or interrupted run never leaves a half-written profile, order file or script;
//! the files of one output (a profile and its side profiles, a plan, the linker shims) are
//! renamed only once all of them are written, so a failure leaves none of them.
//! Inputs are read with a size cap, so a stranger's file cannot exhaust memory.

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::path::Path;

/// Largest input file any subcommand reads into memory (1 GiB).
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Reads a whole file as bytes, refusing files larger than [`MAX_INPUT_BYTES`]. A pipe (`<(zcat
/// perf.data.gz)`) is read like a file; a directory or a device (`/dev/zero`, whose size says 0
/// and whose contents never end) is refused.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    read_opened(path, file)
}

/// [`ReadBudget::read_named_file`]: reads a whole file that an input *names* (a binary a
/// profiler recorded), size-capped like [`read_bytes`] and charged to `budget` when there is
/// one; `Ok(None)` when the path names no regular file: missing, a directory, a FIFO, a
/// socket, a device, or a file of a kernel pseudo file system (`/proc/self/mem`, `/sys/...`:
/// "regular" files that no binary is, some of which fail every read). A stranger's profile must not make Sediment read `/dev/zero` or wait
/// forever for a FIFO's writer: the path's type is checked first, so that a device is never
/// even opened (opening some has effects: a watchdog arms, a tape rewinds), then the path is
/// opened once with `O_NONBLOCK` and the type checked again on the opened handle, so that a
/// FIFO swapped in between neither blocks the open nor is read.
fn read_named_within(path: &Path, budget: Option<&mut ReadBudget>) -> Result<Option<Vec<u8>>> {
    let missing = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if missing(&e) => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot open", path.display())),
    }
    let file = match open_nonblocking(path) {
        Ok(f) => f,
        // Gone, or swapped for a socket (which cannot be opened: ENXIO).
        Err(e) if missing(&e) || e.raw_os_error() == Some(libc::ENXIO) => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot open", path.display())),
    };
    let meta = file
        .metadata()
        .with_context(|| format!("{}: cannot read its metadata", path.display()))?;
    if !meta.is_file() || on_pseudo_file_system(&file) {
        return Ok(None);
    }
    read_opened_within(path, file, budget).map(Some)
}

/// Default of [`ReadBudget`]: what one run of an importer may read, inputs and the binaries
/// they name together (4 GiB: four inputs at the per-file limit).
pub const DEFAULT_RUN_INPUT_BYTES: u64 = 4 << 30;

/// The environment variable that sets [`ReadBudget`]'s limit when `--max-input-bytes` is not
/// given (for the linker shims and package builds, whose command lines Sediment does not write).
pub const MAX_INPUT_BYTES_ENV: &str = "SEDIMENT_MAX_INPUT_BYTES";

/// The bytes one run may read from its inputs and the binaries they name, together: each file
/// is also held to [`MAX_INPUT_BYTES`], but a stranger's profile naming a thousand binaries, or
/// a thousand inputs each under the per-file limit, must not make one run read (and hold)
/// without end. Every read through the budget is charged; the read that would pass the limit
/// is refused, naming the file and the limit, before its bytes are read when its size is
/// known (a regular file) and as soon as it passes the limit otherwise (a pipe).
#[derive(Debug, Clone)]
pub struct ReadBudget {
    limit: u64,
    used: u64,
}

impl ReadBudget {
    /// A budget of `limit` bytes for the run.
    pub fn new(limit: u64) -> Self {
        ReadBudget { limit, used: 0 }
    }

    /// The limit: `flag` (`--max-input-bytes`) when given, else [`MAX_INPUT_BYTES_ENV`] when
    /// set, else [`DEFAULT_RUN_INPUT_BYTES`].
    pub fn from_flag_or_env(flag: Option<u64>) -> Result<Self> {
        if let Some(limit) = flag {
            return Ok(Self::new(limit));
        }
        match std::env::var(MAX_INPUT_BYTES_ENV) {
            Ok(v) if !v.is_empty() => {
                v.trim().parse().map(Self::new).map_err(|_| {
                    anyhow::anyhow!("{MAX_INPUT_BYTES_ENV}={v}: not a number of bytes")
                })
            }
            _ => Ok(Self::new(DEFAULT_RUN_INPUT_BYTES)),
        }
    }

    /// The error for `path`, which would take the run past the limit.
    fn exceeded(&self, path: &Path) -> anyhow::Error {
        anyhow::anyhow!(
            "{}: reading it would take this run past its {}-byte input limit ({} bytes read \
             before it; see --max-input-bytes)",
            path.display(),
            self.limit,
            self.used
        )
    }

    /// [`read_bytes`], charged to the budget.
    pub fn read_bytes(&mut self, path: &Path) -> Result<Vec<u8>> {
        crate::membudget::reading(path);
        let file = std::fs::File::open(path)
            .with_context(|| format!("{}: cannot open", path.display()))?;
        read_opened_within(path, file, Some(self))
    }

    /// [`read_text`], charged to the budget.
    pub fn read_text(&mut self, path: &Path) -> Result<String> {
        utf8(path, self.read_bytes(path)?)
    }

    /// Reads a file an input *names* (`read_named_within`: `None` for anything but a regular
    /// file), charged to the budget.
    pub fn read_named_file(&mut self, path: &Path) -> Result<Option<Vec<u8>>> {
        read_named_within(path, Some(self))
    }
}

/// The name and the file identity of a path that a stranger's profile names, for
/// [`ObjectNames`].
type Identity = (u64, u64);

/// One name per file for the object paths a profile names: a stranger's file may spell one
/// binary many ways (`./lib.so`, `././lib.so`, `//dir/../lib.so`, a symbolic link), and each
/// spelling must not cost a read of the binary, nor give an output file of its own.
///
/// [`ObjectNames::name`] first removes `.` components and repeated `/` from the spelling (no
/// file access; `..` is kept, since it cannot be removed without following symbolic links),
/// then, when the result names an existing file, looks up its identity (device and inode,
/// after symbolic links; only the path's metadata is read, the file is not opened): the first
/// name seen for an identity is the name of every later spelling of it. A name that names no
/// file keeps its cleaned spelling. Names perf invents (`//anon`, `[vdso]`) are left alone.
#[derive(Debug, Default)]
pub struct ObjectNames {
    by_spelling: std::collections::HashMap<String, String>,
    by_identity: std::collections::HashMap<Identity, String>,
}

impl ObjectNames {
    /// The one name of the file `spelling` names (see the type's documentation).
    pub fn name(&mut self, spelling: &str) -> String {
        if let Some(n) = self.by_spelling.get(spelling) {
            return n.clone();
        }
        let clean = clean_path(spelling);
        let name = match file_identity(Path::new(&clean)) {
            Some(id) => self.by_identity.entry(id).or_insert(clean).clone(),
            None => clean,
        };
        self.by_spelling.insert(spelling.to_string(), name.clone());
        name
    }
}

/// `path` without `.` components and repeated `/` (`./a//b/./c` -> `a/b/c`); `..` is kept.
/// Names that are not paths perf or callgrind wrote (`//anon`, `[vdso]`, `???`) are returned
/// unchanged, as is a path that would become empty.
pub fn clean_path(path: &str) -> String {
    if !path.contains('/') || (path.starts_with("//") && !path.starts_with("///")) {
        return path.to_string();
    }
    let absolute = path.starts_with('/');
    let parts: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => path.to_string(),
        (false, false) => joined,
    }
}

/// Device and inode of the file `path` names (after symbolic links), when it exists.
fn file_identity(path: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether the opened `file` lives on a kernel pseudo file system (proc, sysfs, debugfs,
/// tracefs, securityfs, configfs, cgroup, bpf), whose files hold no binary.
fn on_pseudo_file_system(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd as _;
    const PSEUDO: [i64; 9] = [
        0x9fa0,      // proc
        0x6265_6572, // sysfs
        0x6462_6720, // debugfs
        0x7472_6163, // tracefs
        0x7363_6673, // securityfs
        0x6265_6570, // configfs
        0x0027_e0eb, // cgroup
        0x6367_7270, // cgroup2
        0xcafe_4a11, // bpf
    ];
    // SAFETY: fstatfs fills the zeroed struct it is given, for a descriptor this function
    // borrows.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    PSEUDO.contains(&(st.f_type as i64))
}

/// `path` opened for reading with `O_NONBLOCK`: a FIFO opens at once instead of waiting for a
/// writer (for a regular file the flag changes nothing).
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// The whole contents of the opened `file` (named `path` in errors), at most
/// [`MAX_INPUT_BYTES`]. The size from the handle's metadata is trusted only for a regular file
/// (to refuse it early and to size the buffer); a pipe is read up to the cap.
fn read_opened(path: &Path, file: std::fs::File) -> Result<Vec<u8>> {
    read_opened_within(path, file, None)
}

/// [`read_opened`], charged to `budget` when there is one: refused before the read when the
/// file's size is known to pass what is left of it, and once the bytes read pass it otherwise.
fn read_opened_within(
    path: &Path,
    file: std::fs::File,
    budget: Option<&mut ReadBudget>,
) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileTypeExt as _;
    let meta = file
        .metadata()
        .with_context(|| format!("{}: cannot read its metadata", path.display()))?;
    let kind = meta.file_type();
    let len = if kind.is_file() {
        meta.len()
    } else if kind.is_fifo() || kind.is_socket() {
        0
    } else {
        bail!(
            "{}: not a regular file (a directory or a device)",
            path.display()
        );
    };
    if len > MAX_INPUT_BYTES {
        bail!(
            "{}: file is {len} bytes, larger than the {MAX_INPUT_BYTES}-byte limit",
            path.display()
        );
    }
    let left = budget
        .as_deref()
        .map_or(u64::MAX, |b| b.limit.saturating_sub(b.used));
    if let Some(b) = budget.as_deref() {
        if len > left {
            return Err(b.exceeded(path));
        }
    }
    let cap = MAX_INPUT_BYTES.min(left);
    let mut buf = Vec::with_capacity(len as usize);
    file.take(cap + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("{}: read failed", path.display()))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        bail!(
            "{}: larger than the {MAX_INPUT_BYTES}-byte limit",
            path.display()
        );
    }
    if let Some(b) = budget {
        if buf.len() as u64 > left {
            return Err(b.exceeded(path));
        }
        b.used += buf.len() as u64;
    }
    Ok(buf)
}

/// Reads a whole UTF-8 text file (size-capped like [`read_bytes`]).
pub fn read_text(path: &Path) -> Result<String> {
    utf8(path, read_bytes(path)?)
}

/// `bytes`, read from `path`, as UTF-8 text; the error names the file and the offset.
fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Writes `contents` to `path` atomically: a temporary file beside it, then a rename (see
/// [`replace_files`] for the permissions it gets).
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    replace_files(&[Replacement::write(path, contents)])
}

/// One file of a set that [`replace_files`] puts in place.
pub struct Replacement<'a> {
    /// Where the file goes.
    pub path: &'a Path,
    /// Its new contents; `None` removes the file (one that does not exist is fine).
    pub contents: Option<&'a [u8]>,
    /// Permission bits to give it; `None` keeps those of the file it replaces, and gives a new
    /// file 0666 less the umask, as any program creating a file does.
    pub mode: Option<u32>,
}

impl<'a> Replacement<'a> {
    /// `path` with `contents`, permissions as described at [`Replacement::mode`].
    pub fn write(path: &'a Path, contents: &'a [u8]) -> Self {
        Replacement {
            path,
            contents: Some(contents),
            mode: None,
        }
    }

    /// `path` removed.
    pub fn remove(path: &'a Path) -> Self {
        Replacement {
            path,
            contents: None,
            mode: None,
        }
    }

    /// The same file with the permission bits `mode` (not subject to the umask).
    pub fn with_mode(self, mode: u32) -> Self {
        Replacement {
            mode: Some(mode),
            ..self
        }
    }
}

/// Puts a set of files in place all or nothing, so the files of one output (a profile and its
/// side profiles, a plan's list and order, the linker shims) never come from two runs:
/// 1. every destination is checked (a directory or a device in the way, a name too long, a
///    parent that is not a directory are errors before anything is written);
/// 2. every new file is written to a temporary file in its destination's directory;
/// 3. only then is each renamed into place, and the files to remove are removed.
///
/// On an error in steps 1 and 2 the temporary files are removed and no destination has
/// changed. Step 3 renames each file within its own directory, which the checks leave nothing
/// to fail on but a file system error or a concurrent change.
///
/// A new file gets 0666 less the process umask: the temporary file is created with mode 0666
/// and the kernel applies the umask (no need to read it, which only setting it can do). A file
/// that replaces another gets the old one's permission bits (not the set-id bits, which
/// writing a file clears too).
///
/// Turned down: moving the old files aside so that a failed rename could be rolled back. It
/// doubles the renames, and the checks already catch what makes a rename fail in practice.
pub fn replace_files(files: &[Replacement<'_>]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    // 1. Check every destination; note the permission bits of each file replaced.
    let mut modes = Vec::with_capacity(files.len());
    for f in files {
        let path = f.path;
        let verb = if f.contents.is_some() {
            "replace"
        } else {
            "remove"
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => bail!("{}: is a directory, cannot {verb} it", path.display()),
            // A device or a FIFO (`-o /dev/null`) is never meant to become a regular file.
            Ok(m) if !m.is_file() && !m.file_type().is_symlink() => {
                bail!("{}: not a regular file, cannot {verb} it", path.display())
            }
            // A symbolic link is replaced itself; its target's bits are the ones users see.
            Ok(_) => modes.push(f.mode.or_else(|| {
                std::fs::metadata(path)
                    .ok()
                    .filter(std::fs::Metadata::is_file)
                    .map(|m| m.permissions().mode() & 0o777)
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => modes.push(f.mode),
            Err(e) => return Err(e).with_context(|| format!("{}: cannot write", path.display())),
        }
    }
    // 2. Write every new file to a temporary file beside its destination.
    let mut written = Vec::with_capacity(files.len());
    for (f, mode) in files.iter().zip(modes) {
        let Some(contents) = f.contents else {
            continue;
        };
        let path = f.path;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        // Registered for removal should a signal end the process ([`crate::cleanup`]).
        let (mut tmp, tracked) = crate::cleanup::track_path(
            || {
                tempfile::Builder::new()
                    .permissions(std::fs::Permissions::from_mode(0o666))
                    .tempfile_in(dir)
            },
            tempfile::NamedTempFile::path,
        )
        .with_context(|| {
            format!(
                "{}: cannot create a temporary file in {}",
                path.display(),
                dir.display()
            )
        })?;
        if let Some(mode) = mode {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("{}: cannot set permissions", path.display()))?;
        }
        tmp.write_all(contents)
            .and_then(|()| tmp.flush())
            .with_context(|| format!("{}: write failed", path.display()))?;
        // Closed now, kept by name: a set of thousands of files (an import naming thousands
        // of objects) must not hold a descriptor per file until the renames (EMFILE).
        written.push((tmp.into_temp_path(), tracked, path));
    }
    // 3. Put everything in place (temporary files not renamed are removed when dropped).
    for (tmp, tracked, path) in written {
        tracked.finish(|| tmp.persist(path)).map_err(|e| {
            anyhow::anyhow!("{}: cannot rename into place: {}", path.display(), e.error)
        })?;
    }
    for f in files.iter().filter(|f| f.contents.is_none()) {
        match std::fs::remove_file(f.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("{}: cannot remove", f.path.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Creates `dir` (and missing parents) and runs `write` in it; when `write` fails, the
/// directories created here are removed again (those that are still empty), so a failure
/// leaves no new output behind.
pub fn in_dir<T>(dir: &Path, write: impl FnOnce() -> Result<T>) -> Result<T> {
    // Deepest first: the order to remove them in.
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err())
        .collect();
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let result = write();
    if result.is_err() {
        for d in missing {
            // Not empty (someone else wrote there meanwhile): left alone.
            let _ = std::fs::remove_dir(d);
        }
    }
    result
}

/// An exclusive advisory lock on a directory, held until dropped: the read-merge-write of a
/// profile directory ([`crate::pipeline::merge::into_prof_dir`], then [`write_profiles`]) is
/// done under it, so concurrent `record --prof-dir` runs into one directory each merge into
/// the file the previous one wrote and no recording is lost. The lock is `flock` on the
/// directory itself (opened read-only), so it leaves no lock file in DIR; the kernel releases
/// it when the process ends, however it ends. The shim `sediment ld` only reads profiles and
/// takes no lock (a rename makes every file it reads complete).
///
/// On a file system without `flock` (`ENOLCK`, `EOPNOTSUPP`: some network file systems) the
/// directory is used unlocked, as it was before locking existed, rather than refusing to
/// record.
///
/// Turned down: a `DIR/.lock` file, which would be one more file in a directory whose listing
/// is the set of profiles, and would be left behind by a killed run.
pub struct DirLock {
    _dir: std::fs::File,
}

/// Takes [`DirLock`] on `dir` (which must exist), waiting for another holder to release it.
pub fn lock_dir(dir: &Path) -> Result<DirLock> {
    use std::os::fd::AsRawFd as _;
    let file =
        std::fs::File::open(dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    loop {
        // SAFETY: flock on a file descriptor this function owns; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ENOLCK | libc::EOPNOTSUPP) => break,
            _ => return Err(e).with_context(|| format!("{}: cannot lock", dir.display())),
        }
    }
    Ok(DirLock { _dir: file })
}

/// Writes a set of profiles all or nothing ([`replace_files`]), then says so on stderr: first
/// the import's `warnings` (only now, so that a failure is the one line of its error), then
/// one line per file with its counts (and, for a profile merged from several recordings, how
/// many). Names from the profiles are shown escaped: they come from the recording.
pub fn write_profiles(
    files: &[(&Path, &sediment_profile::Profile)],
    warnings: &[String],
) -> Result<()> {
    let texts: Vec<String> = files.iter().map(|(_, p)| p.to_text()).collect();
    let set: Vec<Replacement<'_>> = files
        .iter()
        .zip(&texts)
        .map(|((path, _), text)| Replacement::write(path, text.as_bytes()))
        .collect();
    replace_files(&set)?;
    for w in warnings {
        eprintln!("sediment: warning: {}", sediment_profile::quote_whole(w));
    }
    for (path, p) in files {
        let recordings = p
            .meta
            .extra
            .get(sediment_profile::META_RECORDINGS)
            .map_or(String::new(), |n| {
                format!(", {} recordings", sediment_profile::escape(n))
            });
        eprintln!(
            "sediment: wrote {} ({}: {} {}, {} functions, {} calls{recordings})",
            sediment_profile::quote_whole(&path.display().to_string()),
            sediment_profile::escape(&p.meta.binary),
            p.meta.total,
            p.meta
                .event
                .as_deref()
                .map_or_else(|| "weight".to_string(), sediment_profile::escape),
            p.functions.len(),
            p.edges.len()
        );
    }
    Ok(())
}

/// Reads and parses a Sediment profile; errors name the file.
pub fn read_profile(path: &Path) -> Result<sediment_profile::Profile> {
    parse_profile(path, read_bytes(path)?)
}

/// Reads and parses only the metadata of the Sediment profile at `path`: the lines before its
/// first `fn` or `call` line (a cheap first pass over many inputs); errors name the file.
/// Reads at most [`MAX_INPUT_BYTES`], and refuses directories and devices like [`read_bytes`].
pub fn read_profile_meta(path: &Path) -> Result<sediment_profile::Meta> {
    use std::io::BufRead as _;
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let kind = file
        .metadata()
        .with_context(|| format!("{}: cannot read its metadata", path.display()))?
        .file_type();
    use std::os::unix::fs::FileTypeExt as _;
    if !(kind.is_file() || kind.is_fifo() || kind.is_socket()) {
        bail!(
            "{}: not a regular file (a directory or a device)",
            path.display()
        );
    }
    let mut reader = std::io::BufReader::new(file.take(MAX_INPUT_BYTES));
    let mut head = Vec::new();
    loop {
        let start = head.len();
        let n = reader
            .read_until(b'\n', &mut head)
            .with_context(|| format!("{}: read failed", path.display()))?;
        let line = &head[start..];
        if line.starts_with(b"fn ") || line.starts_with(b"call ") {
            head.truncate(start);
            break;
        }
        if n == 0 {
            break;
        }
    }
    let text = utf8(path, head)?;
    sediment_profile::Profile::meta_from_text(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Parses the bytes of the profile at `path`; errors name the file.
fn parse_profile(path: &Path, bytes: Vec<u8>) -> Result<sediment_profile::Profile> {
    let text = utf8(path, bytes)?;
    sediment_profile::Profile::from_text(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// What [`read_profile_slot`] found where a profile belongs.
pub enum ProfileSlot {
    /// Nothing of that name.
    Missing,
    /// A symbolic link to nothing.
    Dangling,
    /// Something other than a regular file (after symbolic links): a directory, a FIFO, a
    /// socket, a device.
    Other(std::fs::FileType),
    /// The profile, read and parsed.
    Profile(Box<sediment_profile::Profile>),
}

/// Reads the profile at a path a profile *belongs* at (a profile directory's
/// `<output>.sprof`, where a linker shim or `record --prof-dir` looks), telling apart what
/// else may be there ([`ProfileSlot`]); a file that is there but cannot be read or parsed is
/// an error naming it.
///
/// The path's type is checked first (a device there is never opened, like in
/// `read_named_within`), then the path is opened once, with `O_NONBLOCK`, and the opened
/// handle's type decides: opening a FIFO without it waits for a writer forever, and the check
/// of the path may have been answered by another file than the one opened (a FIFO swapped in
/// between). Symbolic links are followed: a profile directory may link to profiles kept
/// elsewhere, and whatever the link leads to is checked on the handle like any other file.
pub fn read_profile_slot(path: &Path) -> Result<ProfileSlot> {
    let missing = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let absent = || {
        if std::fs::symlink_metadata(path).is_ok() {
            ProfileSlot::Dangling
        } else {
            ProfileSlot::Missing
        }
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(m) => return Ok(ProfileSlot::Other(m.file_type())),
        Err(e) if missing(&e) => return Ok(absent()),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read", path.display())),
    }
    open_profile_slot(path)
}

/// The second half of [`read_profile_slot`], once the path has been seen to be a regular file:
/// the one open and the check on the handle (what a file swapped in meanwhile gets).
fn open_profile_slot(path: &Path) -> Result<ProfileSlot> {
    let missing = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let absent = || {
        if std::fs::symlink_metadata(path).is_ok() {
            ProfileSlot::Dangling
        } else {
            ProfileSlot::Missing
        }
    };
    let file = match open_nonblocking(path) {
        Ok(f) => f,
        Err(e) if missing(&e) => return Ok(absent()),
        // Swapped for a socket, which cannot be opened (ENXIO): no profile either.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return match std::fs::metadata(path) {
                Ok(m) => Ok(ProfileSlot::Other(m.file_type())),
                Err(_) => Err(e).with_context(|| format!("{}: cannot open", path.display())),
            };
        }
        Err(e) => return Err(e).with_context(|| format!("{}: cannot open", path.display())),
    };
    let meta = file
        .metadata()
        .with_context(|| format!("{}: cannot read its metadata", path.display()))?;
    if !meta.is_file() {
        return Ok(ProfileSlot::Other(meta.file_type()));
    }
    let bytes = read_opened(path, file)?;
    parse_profile(path, bytes).map(|p| ProfileSlot::Profile(Box::new(p)))
}

/// Reads a linked ELF file's function symbols; errors name the file.
pub fn read_binary(path: &Path) -> Result<sediment_elf::Binary> {
    let data = read_bytes(path)?;
    // The crate's errors already name the file.
    Ok(sediment_elf::Binary::parse(
        &path.display().to_string(),
        &data,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt as _;
    use std::os::unix::fs::PermissionsExt as _;

    /// Permission bits of `path`.
    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    // A directory in the way of the second file: an error before anything is renamed, the
    // first file keeps its old contents and no temporary file is left.
    #[test]
    fn a_set_with_a_directory_in_the_way_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            tmp.path().join("a"),
            tmp.path().join("b"),
            tmp.path().join("c"),
        );
        std::fs::write(&a, "old").unwrap();
        std::fs::create_dir(&b).unwrap();
        let set = [
            Replacement::write(&a, b"new"),
            Replacement::write(&b, b"new"),
        ];
        let err = replace_files(&set).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old");
        // The same with a directory in the way of a removal.
        std::fs::write(&c, "old").unwrap();
        let set = [Replacement::write(&a, b"new"), Replacement::remove(&b)];
        assert!(replace_files(&set).is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old");
        assert_eq!(names(tmp.path()), ["a", "b", "c"]);
        // A FIFO (or a device: `-o /dev/null`) is not replaced by a regular file either.
        let fifo = tmp.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let err = write_atomic(&fifo, b"new").unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::remove_file(&fifo).unwrap();
        // Without them, every file is written and the removal done.
        std::fs::remove_dir(&b).unwrap();
        let absent = tmp.path().join("never-there");
        let set = [
            Replacement::write(&a, b"new"),
            Replacement::write(&b, b"new"),
            Replacement::remove(&c),
            Replacement::remove(&absent),
        ];
        replace_files(&set).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new");
        assert_eq!(names(tmp.path()), ["a", "b"]);
    }

    // A new file gets 0666 less the umask (not tempfile's 0600); a replaced file keeps its
    // permission bits; an explicit mode wins.
    #[test]
    fn new_files_follow_the_umask_and_replaced_files_keep_their_mode() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let umask = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .map(|v| u32::from_str_radix(v.trim(), 8).unwrap())
            .expect("Umask in /proc/self/status");
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("out");
        write_atomic(&path, b"1").unwrap();
        assert_eq!(mode(&path), 0o666 & !umask);
        for kept in [0o644, 0o640, 0o755] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(kept)).unwrap();
            write_atomic(&path, b"2").unwrap();
            assert_eq!(mode(&path), kept);
        }
        replace_files(&[Replacement::write(&path, b"3").with_mode(0o700)]).unwrap();
        assert_eq!(mode(&path), 0o700);
    }

    // Regression (issue 34): a FIFO where a profile belongs (or swapped in after the check)
    // made the open wait for a writer forever. Now it is told apart without blocking, as are a directory, a symbolic link to
    // nothing and a missing name; a corrupt file is an error naming it.
    #[test]
    fn regress_profile_slot_never_blocks_on_a_fifo() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("p.sprof");
        let made = std::process::Command::new("mkfifo").arg(&p).status();
        assert!(made.unwrap().success());
        assert!(matches!(read_profile_slot(&p), Ok(ProfileSlot::Other(t)) if t.is_fifo()));
        // The same FIFO swapped in after the path was checked: the open does not wait.
        let (tx, rx) = std::sync::mpsc::channel();
        let swapped = p.clone();
        std::thread::spawn(move || {
            tx.send(
                open_profile_slot(&swapped)
                    .is_ok_and(|s| matches!(s, ProfileSlot::Other(t) if t.is_fifo())),
            )
        });
        let told = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(told, Ok(true), "the open of a FIFO blocked");
        std::fs::remove_file(&p).unwrap();
        assert!(matches!(read_profile_slot(&p), Ok(ProfileSlot::Missing)));
        std::os::unix::fs::symlink("nothing", &p).unwrap();
        assert!(matches!(read_profile_slot(&p), Ok(ProfileSlot::Dangling)));
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(matches!(read_profile_slot(&p), Ok(ProfileSlot::Other(t)) if t.is_dir()));
        std::fs::remove_dir(&p).unwrap();
        std::fs::write(&p, "sediment-profile 1\nfn 0 x\n").unwrap();
        let err = format!("{:#}", read_profile_slot(&p).err().unwrap());
        assert!(err.starts_with(&format!("{}: ", p.display())), "{err}");
    }

    // Spellings of one path: `.` components and repeated `/` go, `..` and perf's invented
    // names stay; through a symbolic link, the first name seen is every later spelling's.
    #[test]
    fn object_names_are_one_per_file() {
        assert_eq!(clean_path("/a/./b//c/."), "/a/b/c");
        assert_eq!(clean_path("./././lib.so"), "lib.so");
        assert_eq!(clean_path("///x"), "/x");
        assert_eq!(clean_path("/a/../b"), "/a/../b");
        for same in ["//anon", "[vdso]", "???", "./", "."] {
            assert_eq!(clean_path(same), same);
        }
        let tmp = tempfile::tempdir().unwrap();
        let lib = tmp.path().join("lib.so");
        std::fs::write(&lib, "x").unwrap();
        std::os::unix::fs::symlink("lib.so", tmp.path().join("link.so")).unwrap();
        let d = tmp.path().display();
        let mut names = ObjectNames::default();
        let first = names.name(&format!("{d}/./lib.so"));
        assert_eq!(first, format!("{d}/lib.so"));
        for other in [format!("{d}/link.so"), format!("{d}//./lib.so")] {
            assert_eq!(names.name(&other), first);
        }
        assert_eq!(names.name("/nonexistent/./x"), "/nonexistent/x");
    }

    // A failed write removes the directories `in_dir` created, and only those.
    #[test]
    fn in_dir_removes_only_the_directories_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("x/y/z");
        let r: Result<()> = in_dir(&deep, || bail!("failed"));
        assert!(r.is_err());
        assert!(names(tmp.path()).is_empty());
        in_dir(&deep, || write_atomic(&deep.join("f"), b"1")).unwrap();
        assert!(deep.join("f").is_file());
    }
}
