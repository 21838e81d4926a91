//! Replaying a live instruction trace from valgrind's lackey tool, streamed, never stored.
//!
//! `valgrind --tool=lackey --trace-mem=yes` prints one line per guest instruction executed and
//! per data access (Nethercote & Seward, "Valgrind: A Framework for Heavyweight Dynamic Binary
//! Instrumentation", PLDI 2007; the format is `lk_main.c`'s `printf("I  %08lx,%lu\n", ...)`):
//!
//! ```text
//! I  04001234,3        instruction fetch: hex address, decimal size in bytes
//!  L 1ffefff8a8,8      data load   (ignored)
//!  S 1ffefff8a0,8      data store  (ignored)
//!  M 0010c010,4        data modify (ignored)
//! ==1234== message     valgrind's own messages on the same descriptor (kept, last few)
//! --1234-- message     its verbose messages (kept, last few)
//! ```
//!
//! A run of a real program prints hundreds of millions of lines, so [`Capture::replay`] reads
//! them from any [`BufRead`] one at a time and keeps only what the metrics need:
//!
//! 1. **Merging.** Consecutive instructions that follow each other in memory (the next starts
//!    where the previous ended) are merged into one fetch range, which is flushed when the
//!    stream jumps. A range is fed once to every array, one access per line or page it covers,
//!    in address order. Cachegrind (`cg_sim.c`) instead accesses the line of every instruction,
//!    but repeating an access to the most recently used block of a set changes neither the LRU
//!    order nor the miss count, so the two agree except for one case: an instruction that
//!    straddles two lines and misses on both counts one miss in cachegrind and two here.
//! 2. **Several machines in one pass.** The caller builds any number of [`SetAssocLru`] arrays
//!    (L1i geometries, iTLBs of several sizes and associativities); every range goes through
//!    all of them, so one valgrind run answers every geometry (cachegrind needs one run per
//!    I1 geometry).
//! 3. **Footprint of one object.** Ranges inside the *text range* (the main executable's code,
//!    set by the caller with [`Capture::set_text`]) are counted per distinct `(start, len)`;
//!    [`Capture::exec_profile`] turns the counts into an [`ExecProfile`] for the
//!    touched / 99% / 99.9% / lower-bound numbers. The map is bounded by the number of distinct
//!    straight-line runs of the program, not by the length of the run. A range crossing an end
//!    of the text range is clipped to it.
//!
//! 4. **Views: other layouts of the same run.** Besides the arrays of the layout as it ran,
//!    [`Capture::add_view`] adds arrays that see the text range moved by a [`TextMap`]: every
//!    text address shifted by a constant ([`TextMap::Shift`], the layout a pad of that many
//!    bytes before the code would give) or each function moved to a new start
//!    ([`TextMap::Relayout`], a proposed function order). Addresses outside the text range
//!    (the dynamic loader, libc) are fed unchanged, in the same stream order, so one lackey
//!    run answers K shifts times M orders. A view's footprint ([`Capture::view_profile`]) is
//!    the base footprint map moved the same way, so it costs nothing during the run.
//!
//! 5. **Views in parallel.** The views' fetches wait in a batch of [`VIEW_BATCH`] ranges, and
//!    a full batch is fed to the views split over [`Capture::set_threads`] threads (each view
//!    is fed by one thread, in stream order, so the counts do not depend on the number of
//!    threads). With many views (sixteen page phases times ten orders) the views are nearly
//!    all of the replay's work, and lackey itself needs a fraction of a core.
//!
//! Instruction counts are kept for the whole process and for the text range, so that the
//! total can be checked against cachegrind's `Ir` (both count the same guest instructions).
//!
//! Why a virtual shift instead of K relinks: a relink per shift costs one valgrind run per
//! shift; the virtual shift costs K more array lookups per fetch in one run. What it does not
//! reproduce is what a linker does differently when a pad is present (a pad before `.text`
//! does not move `.init` or the PLT, which the virtual shift moves with the rest of the text
//! range); `docs/journal/simulator.md` compares the two on the demo.
//!
//! Turned down: storing the trace (a file of tens of gigabytes for a few seconds of a real
//! program), and `--log-file` to a named pipe (a reader opening the FIFO blocks forever when
//! valgrind fails before opening it). The caller hands lackey a pipe as its log descriptor.
//!
//! Hostile input: lines are capped at [`MAX_LINE_BYTES`], instruction sizes at
//! [`MAX_INSN_BYTES`] (x86's 15 bytes, with room for other architectures), addresses are
//! parsed with overflow checks, and anything that is neither an instruction, a data access nor
//! a valgrind message is an error naming its line.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufRead, Read};

use crate::{Error, ExecProfile, ExecRange, Recording, SetAssocLru};

/// Longest accepted line in bytes, without its newline. Lackey's lines are under 40 bytes;
/// valgrind messages can carry a path.
pub const MAX_LINE_BYTES: usize = 4096;

/// Largest accepted instruction size. x86-64 instructions are at most 15 bytes.
pub const MAX_INSN_BYTES: u64 = 64;

/// How many valgrind message lines are kept (the last ones), for error reports.
pub const KEPT_MESSAGES: usize = 20;

/// Where one view puts the bytes of the text range.
#[derive(Debug, Clone)]
pub enum TextMap {
    /// Every text address plus this many bytes.
    Shift(u64),
    /// Functions moved to new starts (a proposed order); see [`Relayout`].
    Relayout(Relayout),
}

/// Functions of the text range moved to new start addresses. Bytes of the text range outside
/// every function (padding, code without a symbol) keep their address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayout {
    /// `(old start, old end, new start)`, sorted by old start, disjoint, non-empty.
    spans: Vec<(u64, u64, u64)>,
}

impl Relayout {
    /// From parallel arrays of old starts, sizes and new starts. Zero-sized functions are
    /// dropped; overlapping old ranges, or a new range past `u64::MAX`, are errors.
    pub fn new(old_starts: &[u64], sizes: &[u64], new_starts: &[u64]) -> Result<Self, Error> {
        for (what, other) in [
            ("old starts vs sizes", sizes.len()),
            ("old starts vs new starts", new_starts.len()),
        ] {
            if other != old_starts.len() {
                return Err(Error::LengthMismatch {
                    what,
                    left: old_starts.len(),
                    right: other,
                });
            }
        }
        let mut spans = Vec::with_capacity(sizes.len());
        for ((&old, &size), &new) in old_starts.iter().zip(sizes).zip(new_starts) {
            if size == 0 {
                continue;
            }
            for start in [old, new] {
                if start.checked_add(size).is_none() {
                    return Err(Error::AddressOverflow { start, len: size });
                }
            }
            spans.push((old, old + size, new));
        }
        spans.sort_unstable();
        if let Some(w) = spans.windows(2).find(|w| w[0].1 > w[1].0) {
            return Err(Error::Geometry(format!(
                "functions at {:#x} and {:#x} overlap",
                w[0].0, w[1].0
            )));
        }
        Ok(Self { spans })
    }

    /// Calls `out(start, end)` for the pieces of `[start, end)` in their new places, in the
    /// order of the old addresses (the order the bytes were fetched in).
    fn map(&self, start: u64, end: u64, out: &mut impl FnMut(u64, u64)) {
        let mut at = start;
        // First span that ends after `at`.
        let mut i = self.spans.partition_point(|&(_, e, _)| e <= at);
        while at < end {
            match self.spans.get(i) {
                Some(&(s, e, new)) if s <= at => {
                    let stop = end.min(e);
                    out(new + (at - s), new + (stop - s));
                    at = stop;
                    i += 1;
                }
                Some(&(s, _, _)) => {
                    let stop = end.min(s);
                    out(at, stop);
                    at = stop;
                }
                None => {
                    out(at, end);
                    at = end;
                }
            }
        }
    }
}

impl TextMap {
    /// Calls `out(start, end)` for each piece of the text range `[start, end)` in its new place.
    #[inline]
    fn map(&self, start: u64, end: u64, out: &mut impl FnMut(u64, u64)) {
        match self {
            TextMap::Shift(d) => out(start.saturating_add(*d), end.saturating_add(*d)),
            TextMap::Relayout(r) => r.map(start, end, out),
        }
    }
}

/// One other layout of the run: its map of the text range and its own arrays.
#[derive(Debug)]
struct View {
    map: TextMap,
    arrays: Vec<SetAssocLru>,
}

/// A fetch range `[start, end)` waiting for the views, with its part inside the text range
/// (clipped once, when it was flushed).
type BatchedFetch = (u64, u64, Option<(u64, u64)>);

impl View {
    /// Feeds every range of `batch` to the arrays, with the part inside the text moved by the
    /// map: before the text, the text moved, after the text, in address order.
    fn feed(&mut self, batch: &[BatchedFetch]) {
        let arrays = &mut self.arrays;
        let mut feed = |a: u64, b: u64| {
            for x in arrays.iter_mut() {
                x.fetch(a, b - a);
            }
        };
        for &(start, end, inside) in batch {
            let Some((s, e)) = inside else {
                feed(start, end);
                continue;
            };
            if start < s {
                feed(start, s);
            }
            self.map.map(s, e, &mut feed);
            if e < end {
                feed(e, end);
            }
        }
    }
}

/// The footprint map's hasher: a multiply-rotate mix of the range's two words (the FxHash
/// scheme of rustc). The map is hashed once per fetch, and std's SipHash was a tenth of a
/// one-pass measurement's reader time; the keys are addresses from our own trace, so there is
/// no attacker to resist. Iteration order never reaches an output (see
/// [`Capture::exec_profile`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct RangeHasher(u64);

impl Hasher for RangeHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(K);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Fetch ranges the views wait for before a batch is fed to them ([`Capture::set_threads`]):
/// 40 bytes each, 640 KiB, about 0.1 s of work for a hundred views.
pub const VIEW_BATCH: usize = 1 << 14;

/// The replay state: arrays fed with every fetch range, counters, and the footprint map.
#[derive(Debug)]
pub struct Capture {
    arrays: Vec<SetAssocLru>,
    /// Other layouts fed the same stream, see [`Capture::add_view`].
    views: Vec<View>,
    /// Fetch ranges not yet fed to the views.
    batch: Vec<BatchedFetch>,
    /// Threads feeding the views a batch.
    threads: usize,
    /// `[start, end)` of the main object's code, if known.
    text: Option<(u64, u64)>,
    /// The range being merged: `[start, end)`.
    pending: Option<(u64, u64)>,
    instructions: u64,
    text_instructions: u64,
    fetches: u64,
    /// Execution count per distinct clipped range inside `text`.
    ranges: HashMap<(u64, u64), u64, BuildHasherDefault<RangeHasher>>,
    /// Start of each distinct range of `ranges`, in the order it first executed.
    first_seen: Vec<u64>,
    messages: Vec<String>,
    /// Keeps the stream for later replays, see [`Capture::set_recording`].
    recording: Option<Recording>,
    /// Lines read so far over all calls to [`Capture::replay`].
    line: u64,
    buf: Vec<u8>,
}

impl Capture {
    /// An empty capture feeding `arrays` (in the order given; read them back with
    /// [`Capture::arrays`]).
    pub fn new(arrays: Vec<SetAssocLru>) -> Self {
        Self {
            arrays,
            views: Vec::new(),
            batch: Vec::new(),
            threads: 1,
            text: None,
            pending: None,
            instructions: 0,
            text_instructions: 0,
            fetches: 0,
            ranges: HashMap::default(),
            first_seen: Vec::new(),
            messages: Vec::new(),
            recording: None,
            line: 0,
            buf: Vec::with_capacity(64),
        }
    }

    /// Sets the main object's code range `[start, end)`. Only ranges flushed after this call
    /// count towards the footprint, so set it before the first instruction of that object
    /// (under valgrind the dynamic loader runs first). An empty or reversed range is an error.
    pub fn set_text(&mut self, start: u64, end: u64) -> Result<(), Error> {
        if start >= end {
            return Err(Error::Geometry(format!(
                "empty text range {start:#x}..{end:#x}"
            )));
        }
        self.text = Some((start, end));
        Ok(())
    }

    /// The main object's code range `[start, end)`, once [`Capture::set_text`] set it.
    pub fn text(&self) -> Option<(u64, u64)> {
        self.text
    }

    /// Also keeps every fetch flushed from now on in `recording` (bounded, see
    /// [`crate::record`]); take it back with [`Capture::take_recording`].
    pub fn set_recording(&mut self, recording: Recording) {
        self.recording = Some(recording);
    }

    /// The recording set by [`Capture::set_recording`], once.
    pub fn take_recording(&mut self) -> Option<Recording> {
        self.recording.take()
    }

    /// The arrays, in the order given to [`Capture::new`].
    pub fn arrays(&self) -> &[SetAssocLru] {
        &self.arrays
    }

    /// Feeds the views a batch on up to `threads` threads (1, the default: on this one).
    /// The counts are the same for any number.
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.max(1);
    }

    /// Adds a view: `arrays` are fed the same stream with the text range moved by `map`
    /// (addresses outside it unchanged). Returns the view's index for
    /// [`Capture::view_arrays`] and [`Capture::view_profile`]. Add views before replaying;
    /// a view added later misses the fetches before it.
    pub fn add_view(&mut self, map: TextMap, arrays: Vec<SetAssocLru>) -> usize {
        self.drain();
        self.views.push(View { map, arrays });
        self.views.len() - 1
    }

    /// How many views were added.
    pub fn view_count(&self) -> usize {
        self.views.len()
    }

    /// The arrays of view `i` (empty for an index that was never returned by
    /// [`Capture::add_view`]); complete after [`Capture::finish`].
    pub fn view_arrays(&self, i: usize) -> &[SetAssocLru] {
        self.views.get(i).map_or(&[], |v| v.arrays.as_slice())
    }

    /// Per-byte execution counts of the text range under view `i`'s layout (the base profile
    /// for an unknown index).
    pub fn view_profile(&self, i: usize) -> Result<ExecProfile, Error> {
        let Some(view) = self.views.get(i) else {
            return self.exec_profile();
        };
        let mut records = Vec::with_capacity(self.ranges.len());
        for (&(start, len), &count) in &self.ranges {
            view.map.map(start, start + len, &mut |s, e| {
                records.push(ExecRange {
                    start: s,
                    len: e - s,
                    count,
                });
            });
        }
        // As in `exec_profile`, the result does not depend on the map's iteration order.
        ExecProfile::new(&records)
    }

    /// Run-time start addresses of the distinct executed ranges of the text, in the order they
    /// first executed: the program's first-execution order, which a startup layout (`bp`)
    /// needs and which no counting profile keeps. As bounded as the footprint map itself.
    pub fn first_executed(&self) -> &[u64] {
        &self.first_seen
    }

    /// Instructions executed by the whole process.
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// Instructions whose first byte lies in the text range.
    pub fn text_instructions(&self) -> u64 {
        self.text_instructions
    }

    /// Merged fetch ranges fed to the arrays.
    pub fn fetches(&self) -> u64 {
        self.fetches
    }

    /// Lines read so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    /// The last [`KEPT_MESSAGES`] valgrind message lines (`==pid==` / `--pid--`), oldest first.
    pub fn messages(&self) -> &[String] {
        &self.messages
    }

    /// Reads lackey output to its end. Can be called again with the rest of a stream (the
    /// merge state and line numbers carry over). Call [`Capture::finish`] at the very end.
    pub fn replay<R: BufRead>(&mut self, input: R) -> Result<(), Error> {
        let mut input = input;
        let cap = MAX_LINE_BYTES as u64 + 1;
        loop {
            self.buf.clear();
            let line = self.line + 1;
            let n = (&mut input)
                .take(cap)
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| Error::Io { line, source })?;
            if n == 0 {
                return Ok(());
            }
            self.line = line;
            if self.buf.last() == Some(&b'\n') {
                self.buf.pop();
            } else if self.buf.len() > MAX_LINE_BYTES {
                return Err(Error::Trace {
                    line,
                    message: format!("line longer than {MAX_LINE_BYTES} bytes"),
                });
            }
            match self.buf.first() {
                Some(b'I') => {
                    let (addr, size) = parse_insn(&self.buf).map_err(|message| Error::Trace {
                        line,
                        message: message.to_string(),
                    })?;
                    self.instruction(addr, size);
                }
                Some(b' ') if matches!(self.buf.get(1), Some(b'L' | b'S' | b'M')) => {}
                Some(b'=' | b'-') if self.buf.get(1) == self.buf.first() => {
                    if self.messages.len() == KEPT_MESSAGES {
                        self.messages.remove(0);
                    }
                    self.messages
                        .push(String::from_utf8_lossy(&self.buf).into_owned());
                }
                _ => {
                    let shown: String = String::from_utf8_lossy(&self.buf)
                        .chars()
                        .take(60)
                        .collect();
                    return Err(Error::Trace {
                        line,
                        message: format!("not a lackey trace line: {shown:?}"),
                    });
                }
            }
        }
    }

    /// One instruction of `size` bytes at `addr`: extends the pending range or flushes it.
    #[inline]
    fn instruction(&mut self, addr: u64, size: u64) {
        // `parse_insn` bounds `size` and `addr + size` cannot overflow (checked there).
        self.run(addr, addr + size, 1);
    }

    /// `count` instructions executed one after the other, filling `[addr, end)` (a run of the
    /// binary trace, [`crate::bintrace`]): the same as `count` calls for its instructions,
    /// except that all of them count as text instructions when the first one starts inside
    /// the text range. An empty or reversed range is ignored.
    #[inline]
    pub fn run(&mut self, addr: u64, end: u64, count: u64) {
        if addr >= end {
            return;
        }
        self.instructions += count;
        if let Some((s, e)) = self.text {
            if addr >= s && addr < e {
                self.text_instructions += count;
            }
        }
        match &mut self.pending {
            Some((_, pend)) if *pend == addr => *pend = end,
            _ => {
                self.flush();
                self.pending = Some((addr, end));
            }
        }
    }

    /// Feeds the pending range to every array and counts it for the footprint.
    fn flush(&mut self) {
        let Some((start, end)) = self.pending.take() else {
            return;
        };
        self.fetches += 1;
        if let Some(r) = &mut self.recording {
            r.push(start, end);
        }
        for a in &mut self.arrays {
            a.fetch(start, end - start);
        }
        let inside = self.text.and_then(|(ts, te)| {
            let (s, e) = (start.max(ts), end.min(te));
            (s < e).then_some((s, e))
        });
        if !self.views.is_empty() {
            self.batch.push((start, end, inside));
            if self.batch.len() == VIEW_BATCH {
                self.drain();
            }
        }
        if let Some((s, e)) = inside {
            let count = self.ranges.entry((s, e - s)).or_insert(0);
            if *count == 0 {
                self.first_seen.push(s);
            }
            *count += 1;
        }
    }

    /// Feeds the batch to the views: each thread takes a contiguous share of them.
    fn drain(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = self.batch.as_slice();
        let threads = self.threads.min(self.views.len());
        if threads <= 1 {
            for v in &mut self.views {
                v.feed(batch);
            }
        } else {
            let share = self.views.len().div_ceil(threads);
            std::thread::scope(|scope| {
                for part in self.views.chunks_mut(share) {
                    scope.spawn(move || {
                        for v in part {
                            v.feed(batch);
                        }
                    });
                }
            });
        }
        self.batch.clear();
    }

    /// Flushes the last pending range and feeds the views what is left of their batch. Call
    /// once after the last [`Capture::replay`].
    pub fn finish(&mut self) {
        self.flush();
        self.drain();
    }

    /// Per-byte execution counts of the text range (empty when no text range was set).
    pub fn exec_profile(&self) -> Result<ExecProfile, Error> {
        let records: Vec<ExecRange> = self
            .ranges
            .iter()
            .map(|(&(start, len), &count)| ExecRange { start, len, count })
            .collect();
        // `ExecProfile::new` does not depend on the order of the records, so the hash map's
        // iteration order cannot change any number.
        ExecProfile::new(&records)
    }
}

/// Parses `I  ADDR,SIZE` (hex address, decimal size). Spaces between `I` and the address may
/// be one or more.
fn parse_insn(line: &[u8]) -> Result<(u64, u64), &'static str> {
    let rest = &line[1..];
    let rest = match rest.iter().position(|&b| b != b' ') {
        Some(0) | None => return Err("instruction line: expected `I  ADDRESS,SIZE`"),
        Some(i) => &rest[i..],
    };
    let comma = rest
        .iter()
        .position(|&b| b == b',')
        .ok_or("instruction line: no `,` between address and size")?;
    let (hex, dec) = (&rest[..comma], &rest[comma + 1..]);
    if hex.is_empty() || hex.len() > 16 {
        return Err("instruction line: bad address");
    }
    let mut addr: u64 = 0;
    for &b in hex {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return Err("instruction line: bad hex digit in address"),
        };
        addr = (addr << 4) | u64::from(d);
    }
    if dec.is_empty() || dec.len() > 3 {
        return Err("instruction line: bad size");
    }
    let mut size: u64 = 0;
    for &b in dec {
        if !b.is_ascii_digit() {
            return Err("instruction line: bad digit in size");
        }
        size = size * 10 + u64::from(b - b'0');
    }
    if size == 0 || size > MAX_INSN_BYTES {
        return Err("instruction line: size out of range");
    }
    if addr.checked_add(size).is_none() {
        return Err("instruction line: runs past the end of the address space");
    }
    Ok((addr, size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CacheConfig;

    fn cap() -> Capture {
        let l1 = CacheConfig {
            size: 256,
            ways: 2,
            line: 64,
        }
        .build()
        .unwrap();
        Capture::new(vec![l1])
    }

    // Sequential instructions merge into one range; a jump flushes; data lines are skipped.
    // Two iterations of a 3-instruction loop at 0x1000 (bytes 0x1000..0x1008) crossing no line:
    // 2 fetches, 1 line access each, 1 compulsory miss.
    #[test]
    fn merges_sequential_instructions() {
        let t = "==1== hello\nI  00001000,3\n L 7ff0,8\nI  00001003,5\n S 7ff8,8\n\
                 I  00001000,3\nI  00001003,5\n";
        let mut c = cap();
        c.set_text(0x1000, 0x2000).unwrap();
        c.replay(t.as_bytes()).unwrap();
        c.finish();
        assert_eq!(
            (c.instructions(), c.text_instructions(), c.fetches()),
            (4, 4, 2)
        );
        let s = c.arrays()[0].stats();
        assert_eq!((s.accesses, s.misses), (2, 1));
        assert_eq!(c.messages(), ["==1== hello"]);
        let p = c.exec_profile().unwrap();
        assert_eq!((p.bytes(), p.weight()), (8, 16));
    }

    // A range crossing the text end is clipped; ranges outside do not count.
    // Ranges are listed once, when they first run, and only inside the text.
    #[test]
    fn first_executed_in_time_order() {
        let t = "I  00001040,4\nI  00005000,2\nI  00001000,3\nI  00001040,4\nI  00001100,2\n";
        let mut c = cap();
        c.set_text(0x1000, 0x2000).unwrap();
        c.replay(t.as_bytes()).unwrap();
        c.finish();
        assert_eq!(c.first_executed(), [0x1040, 0x1000, 0x1100]);
    }

    #[test]
    fn footprint_only_inside_text() {
        let t = "I  00000ffe,4\nI  00005000,2\n";
        let mut c = cap();
        c.set_text(0x1000, 0x2000).unwrap();
        c.replay(t.as_bytes()).unwrap();
        c.finish();
        let p = c.exec_profile().unwrap();
        assert_eq!((p.bytes(), p.weight()), (2, 2));
        assert_eq!(c.text_instructions(), 0); // 0xffe starts before the text
        assert_eq!(c.instructions(), 2);
    }

    // Bad lines are errors naming the line.
    #[test]
    fn bad_lines_name_the_line() {
        let cases = [
            (
                "I  1000,3\nhello\n",
                "line 2: not a lackey trace line: \"hello\"",
            ),
            (
                "I  10x0,3\n",
                "line 1: instruction line: bad hex digit in address",
            ),
            ("I  1000,0\n", "line 1: instruction line: size out of range"),
            (
                "I  1000\n",
                "line 1: instruction line: no `,` between address and size",
            ),
            (
                "I1000,2\n",
                "line 1: instruction line: expected `I  ADDRESS,SIZE`",
            ),
            (
                "I  ffffffffffffffff,2\n",
                "line 1: instruction line: runs past the end of the address space",
            ),
            (
                "I  00000001000000000,2\n",
                "line 1: instruction line: bad address",
            ),
        ];
        for (input, want) in cases {
            let e = cap().replay(input.as_bytes()).unwrap_err();
            assert_eq!(e.to_string(), want, "{input:?}");
        }
        let long = "I".repeat(MAX_LINE_BYTES + 1);
        let e = cap().replay(long.as_bytes()).unwrap_err();
        assert_eq!(e.to_string(), "line 1: line longer than 4096 bytes");
    }

    // Replaying in two pieces gives the same counts as one piece (merge state carries over).
    #[test]
    fn split_stream_same_result() {
        let t = "I  00001000,3\nI  00001003,5\nI  00001040,4\nI  00001000,3\n";
        let mut one = cap();
        one.replay(t.as_bytes()).unwrap();
        one.finish();
        let mut two = cap();
        let (a, b) = t.split_at(14);
        two.replay(a.as_bytes()).unwrap();
        two.replay(b.as_bytes()).unwrap();
        two.finish();
        assert_eq!(one.arrays()[0].stats(), two.arrays()[0].stats());
        assert_eq!((one.fetches(), two.fetches()), (3, 3));
        assert_eq!(two.lines(), 4);
    }

    // A view shifted by 16 bytes: the text range 0x1030..0x1050 (two instructions, one fetch)
    // crosses a line boundary as it ran (2 line accesses, 2 compulsory misses) and not when
    // moved to 0x1040..0x1060 (1 access, 1 miss). The libc range at 0x9000 is not moved: one
    // more access and miss in both. Footprints: 2 lines touched as run, 1 moved.
    #[test]
    fn shift_view_moves_only_the_text() {
        let mut c = cap();
        c.set_text(0x1000, 0x2000).unwrap();
        let l1 = CacheConfig {
            size: 256,
            ways: 2,
            line: 64,
        };
        let v = c.add_view(TextMap::Shift(16), vec![l1.build().unwrap()]);
        c.replay("I  00001030,16\nI  00001040,16\nI  00009000,4\n".as_bytes())
            .unwrap();
        c.finish();
        let (a, b) = (c.arrays()[0].stats(), c.view_arrays(v)[0].stats());
        assert_eq!((a.accesses, a.misses), (3, 3));
        assert_eq!((b.accesses, b.misses), (2, 2));
        assert_eq!(c.exec_profile().unwrap().touched(64).unwrap(), 2);
        assert_eq!(c.view_profile(v).unwrap().touched(64).unwrap(), 1);
        assert_eq!(c.view_count(), 1);
        assert!(c.view_arrays(7).is_empty());
    }

    // f0 = 0x1000..0x1040 moves to 0x1040, f1 = 0x2000..0x2040 to 0x1000; the gap between
    // them stays. A range from the end of f0 into f1 comes out as three pieces in fetch order.
    #[test]
    fn relayout_splits_at_function_edges() {
        let r = Relayout::new(&[0x1000, 0x2000], &[0x40, 0x40], &[0x1040, 0x1000]).unwrap();
        let mut pieces = Vec::new();
        r.map(0x1030, 0x2010, &mut |a, b| pieces.push((a, b)));
        assert_eq!(
            pieces,
            [(0x1070, 0x1080), (0x1040, 0x2000), (0x1000, 0x1010)]
        );
        pieces.clear();
        r.map(0x3000, 0x3004, &mut |a, b| pieces.push((a, b)));
        assert_eq!(pieces, [(0x3000, 0x3004)]);
        assert_eq!(
            Relayout::new(&[0x1000, 0x1010], &[0x20, 4], &[0, 0x100])
                .unwrap_err()
                .to_string(),
            "invalid geometry: functions at 0x1000 and 0x1010 overlap"
        );
        assert!(Relayout::new(&[0], &[1, 2], &[0]).is_err());
        assert!(Relayout::new(&[0], &[2], &[u64::MAX]).is_err());
    }

    /// A 512-byte 2-way cache geometry and a capture feeding one such cache, text range
    /// 0x1000..0x1400, for the property tests below.
    fn small_capture() -> (CacheConfig, Capture) {
        let cfg = CacheConfig {
            size: 512,
            ways: 2,
            line: 64,
        };
        let mut c = Capture::new(vec![cfg.build().unwrap()]);
        c.set_text(0x1000, 0x1400).unwrap();
        (cfg, c)
    }

    /// Lackey instruction lines for `(offset from 0xe00, size)` pairs.
    fn lackey_lines(trace: &[(u64, u64)]) -> String {
        trace
            .iter()
            .map(|(off, len)| format!("I  {:x},{len}\n", 0xe00 + off))
            .collect()
    }

    // A trace of more than two batches (40,000 jumps over 0x800 bytes, from an LCG) replayed
    // with the views fed on one thread and on three: every view's counts and footprint are
    // the same, and the shift-0 view's counts are the base arrays', batch boundaries and all.
    #[test]
    fn views_count_alike_on_any_number_of_threads() {
        let mut x: u64 = 1;
        let trace: Vec<(u64, u64)> = (0..40_000)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                ((x >> 33) % 0x800, 1 + (x >> 20) % 15)
            })
            .collect();
        let text = lackey_lines(&trace);
        let run = |threads: usize| {
            let (cfg, mut c) = small_capture();
            c.set_threads(threads);
            for d in [0, 0x40, 0x1_0000] {
                c.add_view(TextMap::Shift(d), vec![cfg.build().unwrap()]);
            }
            let r = Relayout::new(&[0x1000, 0x1100], &[0x100, 0x300], &[0x1300, 0x1000]).unwrap();
            c.add_view(TextMap::Relayout(r), vec![cfg.build().unwrap()]);
            c.replay(text.as_bytes()).unwrap();
            c.finish();
            assert!(c.fetches() > 2 * VIEW_BATCH as u64);
            let views: Vec<_> = (0..c.view_count())
                .map(|v| (c.view_arrays(v)[0].stats(), c.view_profile(v).unwrap()))
                .collect();
            (c.arrays()[0].stats(), views)
        };
        let (base, one) = run(1);
        assert_eq!(one[0].0, base);
        assert_ne!(one[1].0, base);
        assert_eq!(run(3), (base, one));
    }

    proptest::proptest! {
        // A view that moves nothing (shift 0, or every function to where it was) sees exactly
        // what the base arrays see, and a shift by a multiple of the cache's way size (the
        // set-index period) keeps the same miss count.
        #[test]
        fn identity_views_match_the_base(
            trace in proptest::collection::vec((0u64..0x800, 1u64..16), 1..300)) {
            let (cfg, mut c) = small_capture();
            let shift0 = c.add_view(TextMap::Shift(0), vec![cfg.build().unwrap()]);
            let starts = [0x1000, 0x1100, 0x1200];
            let sizes = [0x100, 0x100, 0x200];
            let same = Relayout::new(&starts, &sizes, &starts).unwrap();
            let same = c.add_view(TextMap::Relayout(same), vec![cfg.build().unwrap()]);
            let period = c.add_view(TextMap::Shift(0x1_0000), vec![cfg.build().unwrap()]);
            c.replay(lackey_lines(&trace).as_bytes()).unwrap();
            c.finish();
            let base = c.arrays()[0].stats();
            for v in [shift0, same] {
                proptest::prop_assert_eq!(c.view_arrays(v)[0].stats(), base);
                proptest::prop_assert_eq!(c.view_profile(v).unwrap(), c.exec_profile().unwrap());
            }
            // Ranges straddling the text start split into two pieces in the moved view, so
            // only the misses (not the accesses) must agree there.
            proptest::prop_assert_eq!(c.view_arrays(period)[0].stats().misses, base.misses);
        }

        // A recording replayed at the layout it was recorded in, and at a relayout, gives the
        // misses and footprint of the capture's own arrays and views: what `refine` evaluates
        // is what `sim --order` measures.
        #[test]
        fn recording_replays_like_the_views(
            trace in proptest::collection::vec((0u64..0x800, 1u64..16), 1..300)) {
            let (cfg, mut c) = small_capture();
            let starts = [0x1000, 0x1100, 0x1200];
            let sizes = [0x100, 0x100, 0x200];
            let moved = [0x1300, 0x1200, 0x1000];
            let r = Relayout::new(&starts, &sizes, &moved).unwrap();
            let view = c.add_view(TextMap::Relayout(r), vec![cfg.build().unwrap()]);
            c.set_recording(Recording::new(starts.to_vec(), sizes.to_vec(), 1 << 20).unwrap());
            c.replay(lackey_lines(&trace).as_bytes()).unwrap();
            c.finish();
            let rec = c.take_recording().unwrap();
            for (layout, arrays, profile) in [
                (&starts, c.arrays(), c.exec_profile().unwrap()),
                (&moved, c.view_arrays(view), c.view_profile(view).unwrap()),
            ] {
                let mut sets = vec![vec![cfg.build().unwrap()]];
                rec.replay(layout, &[0], &mut sets).unwrap();
                proptest::prop_assert_eq!(sets[0][0].stats().misses, arrays[0].stats().misses);
                proptest::prop_assert_eq!(rec.exec_profile(layout).unwrap(), profile);
            }
        }
    }
}
