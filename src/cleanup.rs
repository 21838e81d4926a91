//! Clean-up on `SIGTERM` and `SIGINT`: a killed `sediment` leaves no temporary file beside an
//! output, no recording directory, and no profiler or workload running.
//!
//! Temporary paths and child processes are registered here while they exist ([`track_path`],
//! [`track_child`]). [`install`] sets a handler for both signals that only writes the signal's
//! number to a pipe (all a handler may safely do); a thread reading that pipe then, under the
//! registry's lock:
//! 1. sends `SIGTERM` to every registered child (`perf record` passes it on to its workload and
//!    ends) and to every process descended from this one (the workload's own children, which
//!    `valgrind --trace-children=yes` runs and no one signals; a process that starts a
//!    registered child is made a *child subreaper*, so orphaned descendants stay in its tree),
//!    waits up to [`CHILD_GRACE`] for them to end, and kills (`SIGKILL`) what still runs;
//! 2. removes every registered path (a directory with its contents);
//! 3. restores the signal's default action and raises it again, so the process ends as killed
//!    by that signal, as it would have without the handler.
//!
//! A recording that attaches to running processes (`record --pid`, `record --all`) ends on the
//! user's Ctrl-C and is then written, not thrown away: while a [`StopOnSignal`] is held, the
//! first signal only sets a flag the recording polls ([`StopOnSignal::requested`]); a second
//! signal cleans up and ends the process as above.
//!
//! Registration happens under the same lock as the creation of the file or the process, and a
//! path is unregistered under it together with the rename that makes it an output, so a signal
//! never finds a temporary path created but not registered, or an output renamed but still
//! registered. A signal that the process inherited as ignored (`nohup`, a background job of a
//! non-interactive shell) stays ignored. `SIGKILL` cannot be caught: children started with
//! [`sediment_valgrind::die_with_parent`] are then killed by the kernel, and a temporary file
//! being written is left behind.
//!
//! Turned down: unnamed temporary files (`O_TMPFILE`, then `linkat`), which the kernel removes
//! on any death; `linkat` cannot replace an existing output, so a named file exists between it
//! and the rename anyway, and children and recording directories need the handler regardless.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

/// How long the clean-up waits for signalled children to end before removing files and
/// ending (long enough for `perf record` to stop its workload and close its output).
const CHILD_GRACE: Duration = Duration::from_secs(5);

/// What a signal must clean up: paths to remove, processes to stop, by registration number.
struct Registry {
    next: u64,
    paths: BTreeMap<u64, PathBuf>,
    children: BTreeMap<u64, libc::pid_t>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next: 0,
    paths: BTreeMap::new(),
    children: BTreeMap::new(),
});

/// The write end of the pipe from the handler to the clean-up thread (-1 before [`install`]).
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// How many [`StopOnSignal`] guards are held.
static STOP_ARMED: AtomicUsize = AtomicUsize::new(0);
/// A signal arrived while a [`StopOnSignal`] was held.
static STOP_WANTED: AtomicBool = AtomicBool::new(false);

/// While held, the first `SIGINT` or `SIGTERM` asks the holder to stop (see the module docs)
/// instead of ending the process.
#[must_use = "dropping the guard restores the default clean-up at once"]
pub struct StopOnSignal(());

impl StopOnSignal {
    /// Arms the guard.
    pub fn arm() -> StopOnSignal {
        STOP_ARMED.fetch_add(1, Ordering::SeqCst);
        StopOnSignal(())
    }

    /// A new guard when one is already held (the caller of a stage armed it), else `None`.
    pub fn armed() -> Option<StopOnSignal> {
        (STOP_ARMED.load(Ordering::SeqCst) > 0).then(Self::arm)
    }

    /// Whether a signal asked to stop since the guard was armed.
    pub fn requested(&self) -> bool {
        STOP_WANTED.load(Ordering::SeqCst)
    }
}

impl Drop for StopOnSignal {
    fn drop(&mut self) {
        STOP_ARMED.fetch_sub(1, Ordering::SeqCst);
    }
}

fn registry() -> MutexGuard<'static, Registry> {
    // A panic elsewhere while holding the lock leaves the maps consistent (each change is one
    // insert or remove).
    REGISTRY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One registered path or child, unregistered when dropped.
#[must_use = "dropping the registration unregisters at once"]
pub struct Tracked(u64);

impl Tracked {
    /// Runs `f` (the rename that makes a temporary file an output, the wait that reaps a child)
    /// and unregisters, both under the registry's lock, so a signal sees either before or
    /// after.
    pub fn finish<R>(self, f: impl FnOnce() -> R) -> R {
        let mut reg = registry();
        let r = f();
        reg.paths.remove(&self.0);
        reg.children.remove(&self.0);
        drop(reg);
        std::mem::forget(self);
        r
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut reg = registry();
        reg.paths.remove(&self.0);
        reg.children.remove(&self.0);
    }
}

/// Creates something at a path (`create`) and registers the path (`path` of the result) for
/// removal on a signal, both under the registry's lock.
pub fn track_path<T, E>(
    create: impl FnOnce() -> Result<T, E>,
    path: impl FnOnce(&T) -> &Path,
) -> Result<(T, Tracked), E> {
    let mut reg = registry();
    let made = create()?;
    let id = reg.next;
    reg.next += 1;
    reg.paths.insert(id, path(&made).to_path_buf());
    Ok((made, Tracked(id)))
}

/// Starts a child (`spawn`) and registers it to receive `SIGTERM` on a signal, both under the
/// registry's lock. Keep the [`Tracked`] until the child was waited for.
pub fn track_child(
    spawn: impl FnOnce() -> std::io::Result<std::process::Child>,
) -> std::io::Result<(std::process::Child, Tracked)> {
    // Orphaned descendants of the child (a workload's background job whose parent ended)
    // become this process's children instead of init's, so a signal's clean-up finds them.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut reg = registry();
    let child = spawn()?;
    let id = reg.next;
    reg.next += 1;
    reg.children.insert(id, child.id() as libc::pid_t);
    Ok((child, Tracked(id)))
}

/// Waits for a child registered by [`track_child`] and unregisters it before reaping it: the
/// wait itself leaves the ended child unreaped (`waitid` with `WNOWAIT`), so its pid cannot be
/// reused by another process while a signal could still send it `SIGTERM`, and the lock is
/// not held while the child runs.
pub fn wait_child(
    child: &mut std::process::Child,
    tracked: Tracked,
) -> std::io::Result<std::process::ExitStatus> {
    loop {
        // SAFETY: waitid fills the zeroed siginfo_t it is given; the pid is our unreaped child.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    tracked.finish(|| child.wait())
}

/// Whether a child registered by [`track_child`] has ended, without waiting and without
/// reaping it (reap it with [`wait_child`], which then returns at once).
pub fn child_ended(child: &std::process::Child) -> std::io::Result<bool> {
    // SAFETY: waitid fills the zeroed siginfo_t it is given; the pid is our unreaped child.
    let (r, info) = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            child.id() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
        );
        (r, info)
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    // With WNOHANG and no child ready, waitid leaves si_pid zero.
    // SAFETY: si_pid reads the union field waitid filled (or left zeroed).
    Ok(unsafe { info.si_pid() } != 0)
}

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is one byte on this stack.
        unsafe { libc::write(fd, std::ptr::addr_of!(byte).cast(), 1) };
    }
}

/// Installs the handler for `SIGTERM` and `SIGINT` (once; later calls do nothing). A signal
/// ignored at start stays ignored.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two-element array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return; // No handler: signals keep their default action.
        }
        let [read_fd, write_fd] = fds;
        PIPE_WRITE.store(write_fd, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("sediment-signals".into())
            .spawn(move || loop {
                let mut byte = 0u8;
                // SAFETY: reads one byte into a local.
                let n = unsafe { libc::read(read_fd, std::ptr::addr_of_mut!(byte).cast(), 1) };
                if n == 1 {
                    if STOP_ARMED.load(Ordering::SeqCst) > 0
                        && !STOP_WANTED.swap(true, Ordering::SeqCst)
                    {
                        continue;
                    }
                    clean_up_and_die(libc::c_int::from(byte));
                }
                if n == 0
                    || (n < 0
                        && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
                {
                    return;
                }
            });
        if spawned.is_err() {
            return;
        }
        for sig in [libc::SIGTERM, libc::SIGINT] {
            // SAFETY: sigaction with a zeroed struct filled here; the handler is async-signal-safe.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                    || old.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    });
}

/// True while `pid` runs (not yet ended: gone, or a zombie waiting to be reaped).
pub fn running(pid: libc::pid_t) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses, which may itself hold `)`.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// The processes descended from this one that still run, from `/proc` (children, their
/// children, ...; with [`track_child`]'s subreaper, orphaned grandchildren are children).
fn running_descendants() -> Vec<libc::pid_t> {
    running_descendants_of(std::process::id() as libc::pid_t)
}

/// The processes descended from `me` that still run (not zombies), from `/proc/*/stat`:
/// children, their children, and so on.
pub fn running_descendants_of(me: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parent_of: Vec<(libc::pid_t, libc::pid_t)> = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command name in parentheses (which may hold `)`): state, then ppid.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("X");
        let ppid = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if !state.starts_with(['Z', 'X']) {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|e| e.1 == p).map(|e| e.0));
        i += 1;
    }
    found.remove(0);
    found
}

/// Steps 1 to 3 of the module docs.
fn clean_up_and_die(sig: libc::c_int) -> ! {
    let reg = registry();
    for &pid in reg.children.values() {
        // SAFETY: kill(2) with a pid this process started and has not reaped (it is
        // unregistered under this lock when reaped).
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    // Their descendants too (a workload's children under `callgrind --trace-children`, which
    // no one passes the signal on to), until none runs or the grace period ends; then
    // whatever still runs is killed.
    let start = Instant::now();
    let mut signalled = std::collections::BTreeSet::new();
    if !reg.children.is_empty() {
        loop {
            let left = running_descendants();
            if left.is_empty() || start.elapsed() >= CHILD_GRACE {
                for pid in left {
                    // SAFETY: kill(2) of a running descendant (a process of this tree).
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                break;
            }
            for pid in left {
                if signalled.insert(pid) {
                    // SAFETY: kill(2) of a running descendant (a process of this tree).
                    unsafe { libc::kill(pid, libc::SIGTERM) };
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    while reg.children.values().any(|&pid| running(pid)) && start.elapsed() < CHILD_GRACE {
        std::thread::sleep(Duration::from_millis(20));
    }
    for path in reg.paths.values() {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir_all(path);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(path);
            }
            Err(_) => {}
        }
    }
    // SAFETY: restoring the default action and raising the signal ends the process as killed
    // by it; _exit is the fallback should the signal not end it.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
        libc::_exit(128 + sig)
    }
}
