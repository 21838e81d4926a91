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
//! Instruction counts are kept for the whole process and for the text range, so that the
//! total can be checked against cachegrind's `Ir` (both count the same guest instructions).
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
use std::io::{BufRead, Read};

use crate::{Error, ExecProfile, ExecRange, SetAssocLru};

/// Longest accepted line in bytes, without its newline. Lackey's lines are under 40 bytes;
/// valgrind messages can carry a path.
pub const MAX_LINE_BYTES: usize = 4096;

/// Largest accepted instruction size. x86-64 instructions are at most 15 bytes.
pub const MAX_INSN_BYTES: u64 = 64;

/// How many valgrind message lines are kept (the last ones), for error reports.
pub const KEPT_MESSAGES: usize = 20;

/// The replay state: arrays fed with every fetch range, counters, and the footprint map.
#[derive(Debug)]
pub struct Capture {
    arrays: Vec<SetAssocLru>,
    /// `[start, end)` of the main object's code, if known.
    text: Option<(u64, u64)>,
    /// The range being merged: `[start, end)`.
    pending: Option<(u64, u64)>,
    instructions: u64,
    text_instructions: u64,
    fetches: u64,
    /// Execution count per distinct clipped range inside `text`.
    ranges: HashMap<(u64, u64), u64>,
    messages: Vec<String>,
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
            text: None,
            pending: None,
            instructions: 0,
            text_instructions: 0,
            fetches: 0,
            ranges: HashMap::new(),
            messages: Vec::new(),
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

    /// The arrays, in the order given to [`Capture::new`].
    pub fn arrays(&self) -> &[SetAssocLru] {
        &self.arrays
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
        self.instructions += 1;
        if let Some((s, e)) = self.text {
            if addr >= s && addr < e {
                self.text_instructions += 1;
            }
        }
        // `parse_insn` bounds `size` and `addr + size` cannot overflow (checked there).
        let end = addr + size;
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
        for a in &mut self.arrays {
            a.fetch(start, end - start);
        }
        if let Some((ts, te)) = self.text {
            let (s, e) = (start.max(ts), end.min(te));
            if s < e {
                *self.ranges.entry((s, e - s)).or_insert(0) += 1;
            }
        }
    }

    /// Flushes the last pending range. Call once after the last [`Capture::replay`].
    pub fn finish(&mut self) {
        self.flush();
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
}
