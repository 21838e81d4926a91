//! The instruction fetch trace format and its streaming reader.
//!
//! A trace is UTF-8 text, one fetch per line, read line by line so that traces larger than
//! memory can be replayed:
//!
//! ```text
//! sediment-trace 1
//! # blank lines and lines starting with '#' are ignored
//! a 0x401000 32
//! f 12 0x1c 17
//! ```
//!
//! - the first line is the header `sediment-trace 1` (magic and version);
//! - `a START LEN`: bytes `[START, START + LEN)` fetched once; START in hexadecimal with a
//!   `0x` prefix, LEN in decimal;
//! - `f FUNC OFFSET LEN`: a range relative to function FUNC (a decimal index into the layout
//!   the trace is replayed under, see [`crate::Layout`]), OFFSET in hexadecimal with `0x`, LEN
//!   in decimal.
//!
//! Fields are separated by single spaces; a trailing `\r` is tolerated. Every range is a basic
//! block or superblock executed once, so LEN is between 1 and [`MAX_RANGE_LEN`]; a line is at
//! most [`MAX_LINE_BYTES`] long. Both caps exist so that a corrupt or hostile trace can neither
//! make the reader buffer an unbounded line nor make one event loop over billions of blocks.
//! Numbers accept digits only (no sign, no `_`), so every trace has one spelling and the
//! [`Display`](std::fmt::Display) form of a [`TraceEvent`] reads back identically.
//!
//! Turned down: a binary format. Text costs a few times more bytes, but it can be produced by
//! `awk` from valgrind lackey or `perf script` output, diffed, and cut by hand into test cases;
//! the simulator, not parsing, dominates replay time for realistic caches.

use std::fmt;
use std::io::{BufRead, Read};

use crate::{Error, FuncRange};

/// First word of the header line.
pub const TRACE_MAGIC: &str = "sediment-trace";

/// The format version this build reads and writes.
pub const TRACE_VERSION: u32 = 1;

/// Longest accepted line in bytes, without its newline.
pub const MAX_LINE_BYTES: usize = 4096;

/// Longest accepted range. Real basic blocks and superblocks are tens to hundreds of bytes; a
/// megabyte is generous and still bounds the work of one line to 16 Ki line accesses.
pub const MAX_RANGE_LEN: u64 = 1 << 20;

/// One fetch of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TraceEvent {
    /// An absolute address range.
    Abs {
        /// First byte.
        start: u64,
        /// Length in bytes.
        len: u64,
    },
    /// A function-relative range.
    Func(FuncRange),
}

impl fmt::Display for TraceEvent {
    /// The event as a trace line, without the newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Abs { start, len } => write!(f, "a {start:#x} {len}"),
            Self::Func(r) => write!(f, "f {} {:#x} {}", r.func, r.offset, r.len),
        }
    }
}

/// The header line, without the newline.
pub fn header() -> String {
    format!("{TRACE_MAGIC} {TRACE_VERSION}")
}

/// Streaming reader: an iterator of events. After the first error it returns `None`.
#[derive(Debug)]
pub struct TraceReader<R> {
    inner: R,
    /// 1-based number of the last line read.
    line: u64,
    buf: Vec<u8>,
    header_seen: bool,
    done: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader over `inner`; nothing is read until the first call to `next`.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            line: 0,
            buf: Vec::new(),
            header_seen: false,
            done: false,
        }
    }

    /// 1-based number of the last line read (the line of the last event returned).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The next line without its line ending, or `None` at the end of input.
    fn next_line(&mut self) -> Result<Option<&str>, Error> {
        self.buf.clear();
        self.line += 1;
        let cap = MAX_LINE_BYTES as u64 + 1;
        let n = (&mut self.inner)
            .take(cap)
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| Error::Io {
                line: self.line,
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        } else if self.buf.len() > MAX_LINE_BYTES {
            return Err(self.err(format!("line longer than {MAX_LINE_BYTES} bytes")));
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        match std::str::from_utf8(&self.buf) {
            Ok(s) => Ok(Some(s)),
            Err(e) => Err(Error::Trace {
                line: self.line,
                message: format!("invalid UTF-8 at byte {}", e.valid_up_to()),
            }),
        }
    }

    fn err(&self, message: String) -> Error {
        Error::Trace {
            line: self.line,
            message,
        }
    }

    fn read_event(&mut self) -> Result<Option<TraceEvent>, Error> {
        loop {
            // Copied before `next_line` borrows the buffer the returned text lives in.
            let header_seen = self.header_seen;
            let line = self.line + 1;
            let err = |message| Error::Trace { line, message };
            let Some(text) = self.next_line()? else {
                if !header_seen {
                    return Err(err(format!("empty input, expected `{}`", header())));
                }
                return Ok(None);
            };
            if !header_seen {
                if text != header() {
                    return Err(err(if text.starts_with(TRACE_MAGIC) {
                        format!(
                            "unsupported trace version (this build reads `{}`)",
                            header()
                        )
                    } else {
                        format!("not a sediment trace (first line must be `{}`)", header())
                    }));
                }
                self.header_seen = true;
                continue;
            }
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            return parse_event(text).map(Some).map_err(err);
        }
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceEvent, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_event() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Parses one event line (not a header, comment or blank line).
fn parse_event(text: &str) -> Result<TraceEvent, String> {
    // At most 5 fields are kept (a valid line has 3 or 4; a fifth makes it invalid), in a
    // stack array: this runs once per fetch, and a `Vec` per line made replay ~20% slower.
    let mut buf = [""; 5];
    let mut n = 0;
    for (slot, field) in buf.iter_mut().zip(text.split(' ')) {
        *slot = field;
        n += 1;
    }
    let fields = &buf[..n];
    match fields {
        ["a", start, len] => Ok(TraceEvent::Abs {
            start: hex(start, "start address")?,
            len: length(len)?,
        }),
        ["f", func, offset, len] => {
            let func = dec(func, "function index")?;
            let func =
                u32::try_from(func).map_err(|_| format!("function index {func} too large"))?;
            Ok(TraceEvent::Func(FuncRange {
                func,
                offset: hex(offset, "offset")?,
                len: length(len)?,
            }))
        }
        ["a", ..] => Err("expected `a START LEN`".to_string()),
        ["f", ..] => Err("expected `f FUNC OFFSET LEN`".to_string()),
        _ => Err(format!(
            "unknown record `{}` (expected `a` or `f`)",
            fields[0].chars().take(16).collect::<String>()
        )),
    }
}

fn hex(s: &str, what: &str) -> Result<u64, String> {
    let digits = s
        .strip_prefix("0x")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| format!("{what} must be hexadecimal with a 0x prefix"))?;
    u64::from_str_radix(digits, 16).map_err(|_| format!("{what} does not fit in 64 bits"))
}

fn dec(s: &str, what: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} must be a decimal number"));
    }
    s.parse()
        .map_err(|_| format!("{what} does not fit in 64 bits"))
}

fn length(s: &str) -> Result<u64, String> {
    let len = dec(s, "length")?;
    if len == 0 || len > MAX_RANGE_LEN {
        return Err(format!("length {len} is not between 1 and {MAX_RANGE_LEN}"));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(text: &str) -> Result<Vec<TraceEvent>, Error> {
        TraceReader::new(text.as_bytes()).collect()
    }

    fn first_error(text: &str) -> String {
        read_all(text).unwrap_err().to_string()
    }

    // Both record kinds, comments, blank lines and CRLF endings parse.
    #[test]
    fn reads_records() {
        let t = "sediment-trace 1\r\n# c\n\na 0x401000 32\r\nf 12 0x1c 17\n";
        assert_eq!(
            read_all(t).unwrap(),
            vec![
                TraceEvent::Abs {
                    start: 0x401000,
                    len: 32
                },
                TraceEvent::Func(FuncRange {
                    func: 12,
                    offset: 0x1c,
                    len: 17
                }),
            ]
        );
        // No final newline, header only.
        assert_eq!(read_all("sediment-trace 1").unwrap(), vec![]);
    }

    // Each kind of bad input is one error naming the line and the problem.
    #[test]
    fn errors_name_line_and_problem() {
        let h = "sediment-trace 1\n";
        assert_eq!(
            first_error(""),
            "line 1: empty input, expected `sediment-trace 1`"
        );
        assert_eq!(
            first_error("sediment-trace 2\n"),
            "line 1: unsupported trace version (this build reads `sediment-trace 1`)"
        );
        assert_eq!(
            first_error("a 0x0 1\n"),
            "line 1: not a sediment trace (first line must be `sediment-trace 1`)"
        );
        let body = |b: &str| first_error(&format!("{h}# x\n{b}\n"));
        assert_eq!(
            body("a 400 1"),
            "line 3: start address must be hexadecimal with a 0x prefix"
        );
        assert_eq!(
            body("a 0x+4 1"),
            "line 3: start address must be hexadecimal with a 0x prefix"
        );
        assert_eq!(
            body("a 0x10000000000000000 1"),
            "line 3: start address does not fit in 64 bits"
        );
        assert_eq!(
            body("a 0x4 0"),
            "line 3: length 0 is not between 1 and 1048576"
        );
        assert_eq!(
            body("a 0x4 1048577"),
            "line 3: length 1048577 is not between 1 and 1048576"
        );
        assert_eq!(body("a 0x4 -1"), "line 3: length must be a decimal number");
        assert_eq!(body("a 0x4"), "line 3: expected `a START LEN`");
        assert_eq!(body("f 1 0x4"), "line 3: expected `f FUNC OFFSET LEN`");
        assert_eq!(
            body("f 4294967296 0x0 1"),
            "line 3: function index 4294967296 too large"
        );
        assert_eq!(
            body("x 1 2"),
            "line 3: unknown record `x` (expected `a` or `f`)"
        );
        assert_eq!(body("a  0x4 1"), "line 3: expected `a START LEN`");
        let long = format!("{h}# {}\n", "y".repeat(MAX_LINE_BYTES));
        assert_eq!(first_error(&long), "line 2: line longer than 4096 bytes");
        let bad = [b"sediment-trace 1\na 0x\xff 1\n".as_slice()].concat();
        let err = TraceReader::new(bad.as_slice())
            .find_map(Result::err)
            .unwrap();
        assert_eq!(err.to_string(), "line 2: invalid UTF-8 at byte 4");
    }

    // Reading stops after the first error instead of resynchronising on garbage.
    #[test]
    fn stops_after_error() {
        let mut r = TraceReader::new("sediment-trace 1\nbad\na 0x0 1\n".as_bytes());
        assert!(r.next().unwrap().is_err());
        assert!(r.next().is_none());
    }

    // A line of exactly the maximum length is accepted.
    #[test]
    fn max_line_accepted() {
        let comment = format!("#{}", "z".repeat(MAX_LINE_BYTES - 1));
        let t = format!("sediment-trace 1\n{comment}\na 0x10 4");
        assert_eq!(read_all(&t).unwrap().len(), 1);
    }

    fn event() -> impl Strategy<Value = TraceEvent> {
        prop_oneof![
            (any::<u64>(), 1..=MAX_RANGE_LEN)
                .prop_map(|(start, len)| TraceEvent::Abs { start, len }),
            (any::<u32>(), any::<u64>(), 1..=MAX_RANGE_LEN)
                .prop_map(|(func, offset, len)| TraceEvent::Func(FuncRange { func, offset, len })),
        ]
    }

    proptest! {
        // Display writes what the reader reads back.
        #[test]
        fn display_round_trips(events in proptest::collection::vec(event(), 0..50)) {
            let mut text = header();
            text.push('\n');
            for e in &events {
                text.push_str(&e.to_string());
                text.push('\n');
            }
            prop_assert_eq!(read_all(&text).unwrap(), events);
        }

        // Arbitrary bytes never panic the reader.
        #[test]
        fn arbitrary_input_does_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut input = b"sediment-trace 1\n".to_vec();
            input.extend_from_slice(&bytes);
            let _ = TraceReader::new(input.as_slice()).count();
        }
    }
}
