//! The binary instruction trace of Sediment's own valgrind tool (`sedtrace`, the C source in
//! `crates/valgrind/tool/`), decoded into a [`Capture`].
//!
//! Lackey prints one text line per executed instruction from a helper called per instruction,
//! about a million instructions per second. The tool instead cuts every translated superblock
//! into *segments*, runs of instructions that follow each other in memory with no side exit
//! between them, and calls one helper per executed segment with the segment's start, length
//! and instruction count (constants of the translation). The helper merges a segment into the
//! pending *run* when it starts where the run ends, which is the rule [`Capture`] merges
//! lackey's instructions by, and otherwise writes the run as one 16-byte record. The helper
//! calls sit where lackey flushes its events (before each side exit and at the end of the
//! superblock), so the instructions, their order and the fetch ranges are lackey's.
//!
//! # Format
//!
//! A stream of little-endian integers, no padding or alignment:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `SEDTRACE` |
//! | 4 | version, `u32` ([`VERSION`]) |
//! | 4 | flags, `u32`, zero |
//!
//! then records, each starting with a `u64` word `W`:
//!
//! - **run** (`W` bit 63 clear): `W` is the address of the first byte, followed by `u32`
//!   length in bytes and `u32` instruction count; `count` instructions executed one after the
//!   other, filling `[W, W + length)`. A run never starts where the previous one ended unless
//!   one of its fields would have overflowed (the reader merges such runs again).
//! - **control** (`W` bit 63 set): bits 32..39 are the kind, bits 0..31 the payload length in
//!   bytes; the payload follows.
//!   - kind 1, **mapping** (payload at least 32 bytes): `u64` start, `u64` end (exclusive),
//!     `u64` file offset of the start, `u32` protection (1 read, 2 write, 4 execute), `u32`
//!     zero, then the mapped file's path, the rest of the payload (bytes, no terminator).
//!     Every executable file mapping of the client is written once before the first run
//!     (from valgrind's address space manager, so the reader needs no `/proc/PID/maps`), and
//!     later ones (`dlopen`) when they appear, before the runs that execute them.
//!   - kind 2, **end** (payload 16 bytes): `u64` instructions and `u64` run records written.
//!     The last record of a complete trace; the reader checks both totals, so a stream cut
//!     short or a lost record is an error, not a smaller count.
//!   - kind 3, **exec** (payload 16 bytes): the same totals, written before an `execve`.
//!     Valgrind runs the new program natively (no `--trace-children`) and the tool writes no
//!     end record, so a stream may end right after an exec record; when the `execve` fails,
//!     runs follow it and the stream goes on to its end record. Lackey's trace of such a
//!     program likewise stops at the exec.
//!
//! Instructions of a run count as text instructions ([`Capture::text_instructions`]) when the
//! run starts inside the text range. A run that crossed an edge of the text would be counted
//! by its first byte where lackey counts each instruction; the text range is the hull of the
//! executable's code segments, whose edges are mapping edges with no code falling through
//! them, so the two counts agree on ordinary ELF files.
//!
//! Hostile input: an unknown kind or version, a run with a zero count, more instructions than
//! bytes, more than [`MAX_INSN_BYTES`] bytes per instruction or an address overflow, a path
//! longer than [`MAX_PATH_BYTES`], and bytes after the end record are errors naming the byte
//! offset of the record.
//!
//! Turned down: storing each segment's record from inline IR instead of calling a helper
//! (the instrumented code appends to the buffer, a helper runs only when it is full): measured
//! on the `capture` bench's workload, 10% less tool CPU time for 18% more bytes, as segments
//! are no longer merged into runs; not worth the larger tool. Varint or delta encoding (about half the bytes, but a pipe moves gigabytes per
//! second and valgrind, not the pipe, is the limit), and simulating inside the tool (fastest,
//! but every view, order and recording of [`Capture`] would have to be rewritten in C).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::capture::MAX_INSN_BYTES;
use crate::lackey::RunLayouts;
use crate::{geometry, Capture, Error};

/// The first eight bytes of a trace.
pub const MAGIC: &[u8; 8] = b"SEDTRACE";

/// The format version this build reads.
pub const VERSION: u32 = 1;

/// Longest accepted path in a mapping record.
pub const MAX_PATH_BYTES: usize = 4096;

const CONTROL: u64 = 1 << 63;
const KIND_MAP: u64 = 1;
const KIND_END: u64 = 2;
const KIND_EXEC: u64 = 3;

/// One executable file mapping of the traced process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// Protection bits: 1 read, 2 write, 4 execute.
    pub prot: u32,
    /// The mapped file, as valgrind resolved it.
    pub path: PathBuf,
}

/// One record of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// `count` consecutive instructions filling `[start, start + len)`.
    Run {
        /// First byte.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// Instructions.
        count: u64,
    },
    /// An executable file mapping.
    Map(Mapping),
    /// The process is about to `execve` (the stream may end here).
    Exec {
        /// Instructions so far.
        instructions: u64,
        /// Run records so far.
        runs: u64,
    },
    /// The end of a complete trace.
    End {
        /// Instructions the tool saw.
        instructions: u64,
        /// Run records it wrote.
        runs: u64,
    },
}

/// Streaming decoder of a binary trace.
#[derive(Debug)]
pub struct BinTraceReader<R> {
    inner: BufReader<R>,
    /// Bytes consumed so far.
    offset: u64,
    instructions: u64,
    runs: u64,
    /// The end record was read.
    ended: bool,
    /// The last record read was an exec record.
    after_exec: bool,
}

impl<R: Read> BinTraceReader<R> {
    /// A reader over `inner` (buffered here); reads and checks the header.
    pub fn new(inner: R) -> Result<Self, Error> {
        let mut r = Self {
            inner: BufReader::with_capacity(1 << 20, inner),
            offset: 0,
            instructions: 0,
            runs: 0,
            ended: false,
            after_exec: false,
        };
        let mut head = [0u8; 16];
        if !r.fill(&mut head, "header")? {
            return Err(r.err(0, "empty stream, expected the `SEDTRACE` header".into()));
        }
        if &head[..8] != MAGIC {
            return Err(r.err(0, "not a sedtrace stream (no `SEDTRACE` magic)".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap_or_default());
        if version != VERSION {
            return Err(r.err(
                0,
                format!("version {version}, this build reads version {VERSION}"),
            ));
        }
        Ok(r)
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn err(&self, offset: u64, message: String) -> Error {
        Error::BinTrace { offset, message }
    }

    /// Fills `buf` completely; `Ok(false)` at a clean end of stream before its first byte.
    /// Inlined, so that the copy of a record's fixed size from the buffer is a few moves:
    /// decoding was a third of a one-pass measurement's reader time before.
    #[inline]
    fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<bool, Error> {
        if let Some(bytes) = self.inner.buffer().get(..buf.len()) {
            buf.copy_from_slice(bytes);
            self.inner.consume(buf.len());
            self.offset += buf.len() as u64;
            return Ok(true);
        }
        self.fill_slow(buf, what)
    }

    /// [`Self::fill`] across a refill of the buffer.
    #[cold]
    fn fill_slow(&mut self, buf: &mut [u8], what: &str) -> Result<bool, Error> {
        let at = self.offset;
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => {
                    return Err(self.err(at, format!("stream ends inside a {what}")));
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err(at, format!("read failed: {e}"))),
            }
        }
        self.offset += buf.len() as u64;
        Ok(true)
    }

    /// The next record, or `None` after the end record (at the end of the stream).
    pub fn next_record(&mut self) -> Result<Option<Record>, Error> {
        let at = self.offset;
        let mut word = [0u8; 8];
        if !self.fill(&mut word, "record")? {
            if self.ended || self.after_exec {
                return Ok(None);
            }
            return Err(self.err(
                at,
                "stream ends without its end record (the traced run was killed or crashed)".into(),
            ));
        }
        if self.ended {
            return Err(self.err(at, "bytes after the end record".into()));
        }
        let w = u64::from_le_bytes(word);
        self.after_exec = false;
        if w & CONTROL == 0 {
            let mut rest = [0u8; 8];
            self.fill(&mut rest, "run record")?;
            let len = u64::from(u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]));
            let count = u64::from(u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]));
            if count == 0 || count > len || len > count * MAX_INSN_BYTES {
                return Err(self.err(
                    at,
                    format!("run at {w:#x}: {count} instructions cannot fill {len} bytes"),
                ));
            }
            // `w < 2^63` and `len < 2^32`: no overflow.
            self.instructions += count;
            self.runs += 1;
            return Ok(Some(Record::Run {
                start: w,
                len,
                count,
            }));
        }
        let kind = (w >> 32) & 0x7fff_ffff;
        let size = (w & 0xffff_ffff) as usize;
        match kind {
            KIND_MAP => {
                if !(32..=32 + MAX_PATH_BYTES).contains(&size) {
                    return Err(self.err(at, format!("mapping record of {size} bytes")));
                }
                let mut p = vec![0u8; size];
                self.fill(&mut p, "mapping record")?;
                let u = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().unwrap_or_default());
                let (start, end, offset) = (u(0), u(8), u(16));
                let prot = u32::from_le_bytes(p[24..28].try_into().unwrap_or_default());
                if start >= end {
                    return Err(self.err(at, format!("empty mapping {start:#x}..{end:#x}")));
                }
                use std::os::unix::ffi::OsStrExt;
                let path = PathBuf::from(std::ffi::OsStr::from_bytes(&p[32..]));
                Ok(Some(Record::Map(Mapping {
                    start,
                    end,
                    offset,
                    prot,
                    path,
                })))
            }
            KIND_END | KIND_EXEC => {
                let what = if kind == KIND_END { "end" } else { "exec" };
                if size != 16 {
                    return Err(self.err(at, format!("{what} record of {size} bytes")));
                }
                let mut p = [0u8; 16];
                self.fill(&mut p, "totals record")?;
                let instructions = u64::from_le_bytes(p[..8].try_into().unwrap_or_default());
                let runs = u64::from_le_bytes(p[8..].try_into().unwrap_or_default());
                if (instructions, runs) != (self.instructions, self.runs) {
                    return Err(self.err(
                        at,
                        format!(
                            "{what} record: the tool wrote {runs} runs of {instructions} \
                             instructions, the stream holds {} runs of {}",
                            self.runs, self.instructions
                        ),
                    ));
                }
                if kind == KIND_END {
                    self.ended = true;
                    Ok(Some(Record::End { instructions, runs }))
                } else {
                    self.after_exec = true;
                    Ok(Some(Record::Exec { instructions, runs }))
                }
            }
            _ => Err(self.err(at, format!("unknown record kind {kind}"))),
        }
    }

    /// Feeds `first` (a record already read, if any) and every further record to `capture`,
    /// to the end of the stream; returns the mappings met on the way. Call
    /// [`Capture::finish`] afterwards.
    pub fn replay(
        &mut self,
        capture: &mut Capture,
        first: Option<Record>,
    ) -> Result<Vec<Mapping>, Error> {
        let mut maps = Vec::new();
        let mut next = first;
        loop {
            match next {
                Some(Record::Run { start, len, count }) => capture.run(start, start + len, count),
                Some(Record::Map(m)) => maps.push(m),
                Some(Record::End { .. } | Record::Exec { .. }) | None => {}
            }
            next = self.next_record()?;
            if next.is_none() {
                return Ok(maps);
            }
        }
    }
}

/// Reads a `sedtrace` stream from `pipe` under every layout of `layouts`, as
/// [`crate::lackey::replay_run`] reads lackey's: `code_range` gets the mapping records that
/// precede the first run (the executable is mapped by then) and returns the run-time
/// `[start, end)` of the binary's code (usually [`exec_hull`]); views are added in the same
/// order, so [`crate::lackey::metrics`] reads the result.
pub fn replay_run(
    pipe: impl Read,
    code_range: impl FnOnce(&[Mapping]) -> Result<(u64, u64), Box<dyn std::error::Error + Send + Sync>>,
    layouts: &RunLayouts<'_>,
) -> Result<Capture, Error> {
    let mut capture = Capture::new(geometry::arrays()?);
    capture.set_threads(layouts.threads);
    let mut reader = BinTraceReader::new(pipe)?;
    let mut maps = Vec::new();
    let first = loop {
        match reader.next_record()? {
            Some(Record::Map(m)) => maps.push(m),
            other => break other,
        }
    };
    if matches!(first, Some(Record::Run { .. })) {
        let range = code_range(&maps).map_err(Error::CodeRange)?;
        crate::lackey::set_up(&mut capture, range, layouts)?;
    } else if layouts.shifts.len() > 1 || !layouts.relayouts.is_empty() {
        return Err(Error::NoInstruction);
    }
    reader.replay(&mut capture, first)?;
    capture.finish();
    Ok(capture)
}

/// The run-time `[start, end)` hull of a file's executable segments, each given as
/// `(file offset, size in memory)`: for each segment the executable mapping of `file` that
/// holds its file offset gives its start, `map start + (segment offset - map offset)`. The
/// file offset of the first segment not mapped is the error.
pub fn exec_hull(
    maps: &[Mapping],
    file: &Path,
    segments: &[(u64, u64)],
) -> Result<(u64, u64), u64> {
    let mut hull: Option<(u64, u64)> = None;
    for &(seg_offset, mem_size) in segments {
        let found = maps.iter().find(|m| {
            m.prot & 4 != 0
                && m.path == file
                && seg_offset >= m.offset
                && seg_offset - m.offset < m.end - m.start
        });
        let Some(m) = found else {
            return Err(seg_offset);
        };
        let start = m.start + (seg_offset - m.offset);
        let end = start.saturating_add(mem_size);
        hull = Some(match hull {
            None => (start, end),
            Some((a, b)) => (a.min(start), b.max(end)),
        });
    }
    hull.ok_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SetAssocLru;

    fn header() -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend(VERSION.to_le_bytes());
        v.extend(0u32.to_le_bytes());
        v
    }

    fn run(v: &mut Vec<u8>, start: u64, len: u32, count: u32) {
        v.extend(start.to_le_bytes());
        v.extend(len.to_le_bytes());
        v.extend(count.to_le_bytes());
    }

    fn end(v: &mut Vec<u8>, instructions: u64, runs: u64) {
        v.extend((CONTROL | KIND_END << 32 | 16).to_le_bytes());
        v.extend(instructions.to_le_bytes());
        v.extend(runs.to_le_bytes());
    }

    fn map(v: &mut Vec<u8>, start: u64, end: u64, offset: u64, path: &str) {
        v.extend((CONTROL | KIND_MAP << 32 | (32 + path.len() as u64)).to_le_bytes());
        for x in [start, end, offset] {
            v.extend(x.to_le_bytes());
        }
        v.extend(5u32.to_le_bytes());
        v.extend(0u32.to_le_bytes());
        v.extend(path.as_bytes());
    }

    fn capture() -> Capture {
        Capture::new(vec![SetAssocLru::new(64, 8, 2).unwrap()])
    }

    // Runs that continue each other merge into one fetch, as lackey's instructions would:
    // the same stream as lackey text gives the same counts.
    #[test]
    fn runs_replay_like_lackey_lines() {
        let mut v = header();
        map(&mut v, 0x1000, 0x2000, 0x1000, "/bin/x");
        run(&mut v, 0x1000, 8, 3);
        run(&mut v, 0x1008, 4, 1); // continues: same fetch
        run(&mut v, 0x1000, 8, 3); // jump back: a new fetch
        end(&mut v, 7, 3);
        let mut r = BinTraceReader::new(v.as_slice()).unwrap();
        let Some(Record::Map(m)) = r.next_record().unwrap() else {
            panic!("first record is the mapping");
        };
        assert_eq!(
            exec_hull(&[m], Path::new("/bin/x"), &[(0x1100, 0x200)]),
            Ok((0x1100, 0x1300))
        );
        let mut c = capture();
        c.set_text(0x1000, 0x1100).unwrap();
        assert!(r.replay(&mut c, None).unwrap().is_empty());
        c.finish();

        let text = "I  00001000,3\nI  00001003,3\nI  00001006,2\nI  00001008,4\n\
                    I  00001000,3\nI  00001003,3\nI  00001006,2\n";
        let mut l = capture();
        l.set_text(0x1000, 0x1100).unwrap();
        l.replay(text.as_bytes()).unwrap();
        l.finish();
        assert_eq!(c.instructions(), 7);
        assert_eq!(c.fetches(), 2);
        assert_eq!(
            (c.instructions(), c.text_instructions(), c.fetches()),
            (l.instructions(), l.text_instructions(), l.fetches())
        );
        assert_eq!(c.arrays()[0].stats(), l.arrays()[0].stats());
        assert_eq!(c.exec_profile().unwrap(), l.exec_profile().unwrap());
    }

    // A stream cut short, totals that disagree, and junk after the end are errors.
    #[test]
    fn incomplete_streams_are_errors() {
        let mut v = header();
        run(&mut v, 0x1000, 8, 3);
        let cut = v.clone();
        let mut r = BinTraceReader::new(cut.as_slice()).unwrap();
        let e = r.replay(&mut capture(), None).unwrap_err().to_string();
        assert!(e.contains("without its end record"), "{e}");

        let mut bad = v.clone();
        end(&mut bad, 4, 1);
        let mut r = BinTraceReader::new(bad.as_slice()).unwrap();
        let e = r.replay(&mut capture(), None).unwrap_err().to_string();
        assert!(e.contains("byte 32"), "{e}");

        let mut extra = v.clone();
        end(&mut extra, 3, 1);
        extra.push(0);
        let mut r = BinTraceReader::new(extra.as_slice()).unwrap();
        assert!(r.replay(&mut capture(), None).is_err());

        // A stream may end after an exec record; runs after one (a failed execve) continue it.
        let mut exec = v.clone();
        exec.extend((CONTROL | KIND_EXEC << 32 | 16).to_le_bytes());
        exec.extend(3u64.to_le_bytes());
        exec.extend(1u64.to_le_bytes());
        let mut c = capture();
        BinTraceReader::new(exec.as_slice())
            .unwrap()
            .replay(&mut c, None)
            .unwrap();
        assert_eq!(c.instructions(), 3);
        run(&mut exec, 0x2000, 4, 1);
        let mut r = BinTraceReader::new(exec.as_slice()).unwrap();
        assert!(
            r.replay(&mut capture(), None).is_err(),
            "no end after the runs"
        );
        end(&mut exec, 4, 2);
        let mut r = BinTraceReader::new(exec.as_slice()).unwrap();
        assert!(r.replay(&mut capture(), None).is_ok());

        let mut zero = header();
        run(&mut zero, 0x1000, 8, 0);
        let mut r = BinTraceReader::new(zero.as_slice()).unwrap();
        assert!(r.next_record().is_err());
        assert!(BinTraceReader::new(&b"SEDTRACE\x02\0\0\0\0\0\0\0"[..]).is_err());
        assert!(BinTraceReader::new(&b""[..]).is_err());
    }
}
