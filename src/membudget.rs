//! The memory limit of an import: a stranger's profile must not make Sediment exhaust the
//! machine's memory, whatever the number and size of the inputs of one run.
//!
//! The `sediment` binary's global allocator is [`Counting`]: it keeps the bytes the process
//! holds in one counter. While a [`Limit`] is alive (the `import` stage sets one for its whole
//! run, every input and every binary the inputs name together), an allocation that would take
//! that counter past the limit ends the process at once: one line on standard error naming the
//! input read last (the one being imported, as told by [`reading`]) and the limit, and exit
//! status 1. Nothing is half-written, since every output is written atomically after the
//! import. The line is formatted without allocating (the allocator cannot allocate), and the
//! process exits with `_exit`, as no destructor may run with the heap refusing.
//!
//! The linker shims hold the same limit while they expand a link's response files (a file of
//! a few megabytes naming itself thousands of times expands to gigabytes of arguments); the
//! line then says which response file was being expanded.
//!
//! The limit is `--max-memory BYTES` when given, else [`MAX_MEMORY_ENV`] when set, else
//! three quarters of the machine's physical memory ([`default_limit`]). Outside a [`Limit`]
//! the counter is kept but never checked.
//!
//! Turned down: an error returned by the importer (`Result`) when the limit is reached. It
//! would need every parser to account for what it builds, and a parser's growth happens in
//! allocations that have no way to fail softly in Rust's collections; counting in the
//! allocator bounds every importer, present and future, by one rule.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

/// The environment variable that sets the limit when `--max-memory` is not given.
pub const MAX_MEMORY_ENV: &str = "SEDIMENT_MAX_MEMORY";

/// Bytes the process holds now (allocated through [`Counting`] and not yet freed).
static HELD: AtomicUsize = AtomicUsize::new(0);
/// The limit in bytes while a [`Limit`] is alive; 0: none.
static LIMIT: AtomicUsize = AtomicUsize::new(0);
/// The path of the input read last ([`reading`]), cut to [`CONTEXT_MAX`] bytes.
static CONTEXT: [AtomicU8; CONTEXT_MAX] = [const { AtomicU8::new(0) }; CONTEXT_MAX];
static CONTEXT_LEN: AtomicUsize = AtomicUsize::new(0);
/// Whether the input named is a response file being expanded ([`expanding`]) rather than an
/// input being imported ([`reading`]).
static EXPANDING: AtomicBool = AtomicBool::new(false);
/// The longest input path the message shows (longer ones are cut, with `...`).
const CONTEXT_MAX: usize = 256;

/// The global allocator of the `sediment` binary: the system allocator, counting what is
/// held, and refusing past the [`Limit`] (module docs).
pub struct Counting;

// SAFETY: every method forwards to `System` with the same arguments; the counting only adds
// atomic arithmetic, and the refusal path ends the process without returning.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            take(new_size - layout.size());
        } else {
            HELD.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Counts `size` more bytes held; past the limit, ends the process ([`refuse`]).
fn take(size: usize) {
    let held = HELD.fetch_add(size, Ordering::Relaxed) + size;
    let limit = LIMIT.load(Ordering::Relaxed);
    if limit != 0 && held > limit {
        refuse(limit);
    }
}

/// Writes the one-line error and exits with status 1, without allocating.
fn refuse(limit: usize) -> ! {
    let mut line = Line::default();
    line.push(b"sediment: ");
    let len = CONTEXT_LEN.load(Ordering::Relaxed).min(CONTEXT_MAX);
    if len == 0 {
        line.push(b"the import");
    }
    for c in &CONTEXT[..len] {
        line.push(&[c.load(Ordering::Relaxed)]);
    }
    if EXPANDING.load(Ordering::Relaxed) {
        line.push(b": expanding it takes this run past its memory limit of ");
        line.number(limit);
        line.push(b" bytes (see ");
    } else {
        line.push(b": importing it takes this run past its memory limit of ");
        line.number(limit);
        line.push(b" bytes (see --max-memory or ");
    }
    line.push(MAX_MEMORY_ENV.as_bytes());
    line.push(b")\n");
    // SAFETY: write(2) of an initialised buffer, then _exit(2): no allocation, no destructor.
    unsafe {
        libc::write(2, line.buf.as_ptr().cast(), line.len);
        libc::_exit(1)
    }
}

/// A fixed buffer for [`refuse`]'s line (longer text is cut).
struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            buf: [0; 512],
            len: 0,
        }
    }
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.len < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
    }

    fn number(&mut self, mut n: usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// Tells the limit which input is being read, for its message: its path, cut to a few
/// hundred bytes, control characters shown as `?`.
pub fn reading(path: &std::path::Path) {
    EXPANDING.store(false, Ordering::Relaxed);
    name_input(path);
}

/// Tells the limit which response file is being read and expanded (the linker shims: the
/// arguments a file expands to are what the limit bounds there), for its message.
pub fn expanding(path: &std::path::Path) {
    EXPANDING.store(true, Ordering::Relaxed);
    name_input(path);
}

/// Keeps `path` for the message: cut to a few hundred bytes, control characters shown as `?`.
fn name_input(path: &std::path::Path) {
    let text = path.as_os_str().as_encoded_bytes();
    let (shown, cut) = if text.len() > CONTEXT_MAX {
        (&text[..CONTEXT_MAX - 3], true)
    } else {
        (text, false)
    };
    CONTEXT_LEN.store(0, Ordering::Relaxed);
    let mut n = 0;
    for &b in shown.iter().chain(if cut { &b"..."[..] } else { &b""[..] }) {
        CONTEXT[n].store(
            if b < 0x20 || b == 0x7f { b'?' } else { b },
            Ordering::Relaxed,
        );
        n += 1;
    }
    CONTEXT_LEN.store(n, Ordering::Relaxed);
}

/// The memory limit of a run while it is alive (module docs); dropping it lifts the limit.
#[derive(Debug)]
pub struct Limit {
    previous: usize,
}

impl Limit {
    /// Limits the process to `bytes` held from now until the value is dropped. A limit below
    /// what the process already holds refuses the next allocation.
    pub fn new(bytes: u64) -> Self {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX).max(1);
        Limit {
            previous: LIMIT.swap(bytes, Ordering::Relaxed),
        }
    }

    /// The limit: `flag` (`--max-memory`) when given, else [`MAX_MEMORY_ENV`] when set, else
    /// [`default_limit`].
    pub fn from_flag_or_env(flag: Option<u64>) -> anyhow::Result<Self> {
        let bytes = match flag {
            Some(b) => b,
            None => match std::env::var(MAX_MEMORY_ENV) {
                Ok(v) if !v.is_empty() => v
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("{MAX_MEMORY_ENV}={v}: not a number of bytes"))?,
                _ => default_limit(),
            },
        };
        Ok(Self::new(bytes))
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        LIMIT.store(self.previous, Ordering::Relaxed);
    }
}

/// Three quarters of the machine's physical memory (8 GiB when it cannot be read).
pub fn default_limit() -> u64 {
    // SAFETY: sysconf(3) reads a system value.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && page > 0 {
        (pages as u64).saturating_mul(page as u64) / 4 * 3
    } else {
        8 << 30
    }
}

/// Bytes held now (for tests and reports).
pub fn held() -> usize {
    HELD.load(Ordering::Relaxed)
}
