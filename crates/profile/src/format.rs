//! The text form of a profile (format version 1, or 2 when it holds per-instruction samples),
//! documented for users in `docs/design/profile-format.md`.
//!
//! ```text
//! sediment-profile 1
//! meta binary demo
//! meta source callgrind
//! meta total 123456
//! fn 0 1200 96 main -
//! fn 1 5000 - helper unit07.c
//! call 0 1 300
//! ```
//!
//! Line-oriented, one record per line, fields separated by single spaces, `#` starts a comment
//! line. Every string field is escaped with [`escape`]: bytes outside printable ASCII, space,
//! `%` and `#` become `%XX`, and a string that would read as the "absent" marker `-` is written
//! `%2D`. So every field is one token and no name can break the line structure.
//!
//! Version 2 is version 1 plus `at FUNCTION OFFSET WEIGHT` lines after the `call` lines, the
//! profile's [`Sample`]s. A profile without samples is written as version 1, byte for byte as
//! before samples existed, so older readers still read every profile they could; one with
//! samples says version 2, which an older reader refuses by its version rather than at the
//! first `at` line.

use crate::{Edge, Error, FuncKey, Function, Meta, Profile, Sample};
use std::fmt::Write as _;

/// First token of the first line.
pub const MAGIC: &str = "sediment-profile";
/// The format version of profiles without samples; this build reads it and
/// [`FORMAT_VERSION_SAMPLES`].
pub const FORMAT_VERSION: u32 = 1;
/// The format version of profiles with per-instruction samples (`at` lines).
pub const FORMAT_VERSION_SAMPLES: u32 = 2;

/// Escapes a string into one whitespace-free token (see the module docs).
pub fn escape(s: &str) -> String {
    if s == "-" {
        return "%2D".to_string();
    }
    if s.is_empty() {
        return "%".to_string();
    }
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_graphic() && b != b'%' && b != b'#' {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Reverses [`escape`]. Fails on a malformed escape (anything but `%` and two upper-case hex
/// digits) or on bytes that are not UTF-8. The messages quote the token with [`quote`].
pub fn unescape(token: &str) -> Result<String, String> {
    if token == "%" {
        return Ok(String::new());
    }
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = &bytes[i + 1..bytes.len().min(i + 3)];
            if hex.len() < 2 {
                return Err(format!("truncated escape in `{}`", quote(token)));
            }
            let digit = |b: u8| match b {
                b'0'..=b'9' => Some(b - b'0'),
                b'A'..=b'F' => Some(b - b'A' + 10),
                _ => None,
            };
            let (Some(hi), Some(lo)) = (digit(hex[0]), digit(hex[1])) else {
                return Err(format!(
                    "bad escape `%{}` in `{}` (escapes are `%` and two upper-case hex digits)",
                    quote(&String::from_utf8_lossy(hex)),
                    quote(token)
                ));
            };
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{}` does not decode to UTF-8", quote(token)))
}

/// The Unicode bidirectional-text controls (marks, embeddings, overrides, isolates): they
/// reorder what a terminal shows after them, so [`quote`] escapes them like control characters.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// The most characters of untrusted text [`quote`] shows.
pub const QUOTE_MAX: usize = 60;

/// Untrusted text (a token, a name, a line of a stranger's file) made fit to quote in a
/// one-line message: at most [`QUOTE_MAX`] characters, then `...` when there was more, with
/// every control character (C0 including tab and vertical tab, DEL, C1) and every
/// bidirectional-text control written `%XX` per UTF-8 byte, as [`escape`] writes bytes. So a
/// hostile input can neither reach the terminal raw nor break the message's line. Printable
/// text, spaces and `%` are kept, so a `.sprof` token reads as it was written.
///
/// Turned down: [`escape`] itself, which also rewrites spaces, `#` and non-ASCII letters,
/// making quoted lines hard to recognise; and Rust's `escape_debug`, whose `\u{..}` form
/// differs from the `%XX` the profile format and the link warnings already use.
pub fn quote(s: &str) -> String {
    quote_first(s, QUOTE_MAX)
}

/// As [`quote`], without the length limit: for text the user needs whole (a path in a
/// "wrote" line) that may still hold a stranger's bytes.
pub fn quote_whole(s: &str) -> String {
    quote_first(s, usize::MAX)
}

/// [`quote`] with at most `limit` characters shown.
fn quote_first(s: &str, limit: usize) -> String {
    let mut out = String::with_capacity(s.len().min(limit.saturating_mul(3)));
    let mut chars = s.chars();
    for c in chars.by_ref().take(limit) {
        if c.is_control() || is_bidi_control(c) {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

fn opt_field(v: &Option<String>) -> String {
    v.as_deref().map_or_else(|| "-".to_string(), escape)
}

pub(crate) fn write(p: &Profile) -> String {
    let mut out = String::new();
    let version = if p.samples.is_empty() {
        FORMAT_VERSION
    } else {
        FORMAT_VERSION_SAMPLES
    };
    let _ = writeln!(out, "{MAGIC} {version}");
    let m = &p.meta;
    let _ = writeln!(out, "meta binary {}", escape(&m.binary));
    if let Some(b) = &m.build_id {
        let _ = writeln!(out, "meta build-id {}", escape(b));
    }
    if let Some(a) = &m.arch {
        let _ = writeln!(out, "meta arch {}", escape(a));
    }
    let _ = writeln!(out, "meta source {}", escape(&m.source));
    if let Some(e) = &m.event {
        let _ = writeln!(out, "meta event {}", escape(e));
    }
    let _ = writeln!(out, "meta total {}", m.total);
    for (k, v) in &m.extra {
        let _ = writeln!(out, "meta {} {}", escape(k), escape(v));
    }
    let _ = writeln!(out, "# fn INDEX SELF-WEIGHT SIZE NAME FILE");
    for (i, f) in p.functions.iter().enumerate() {
        let size = f.size.map_or_else(|| "-".to_string(), |s| s.to_string());
        let _ = writeln!(
            out,
            "fn {i} {} {size} {} {}",
            f.self_weight,
            escape(&f.key.name),
            opt_field(&f.key.file)
        );
    }
    let _ = writeln!(out, "# call CALLER CALLEE WEIGHT");
    for e in &p.edges {
        let _ = writeln!(out, "call {} {} {}", e.caller, e.callee, e.weight);
    }
    if !p.samples.is_empty() {
        let _ = writeln!(out, "# at FUNCTION OFFSET WEIGHT");
        for s in &p.samples {
            let _ = writeln!(out, "at {} {} {}", s.func, s.offset, s.weight);
        }
    }
    out
}

struct LineCtx {
    line: usize,
}

impl LineCtx {
    fn err(&self, message: impl Into<String>) -> Error {
        Error::Parse {
            line: self.line,
            message: message.into(),
        }
    }

    /// A number in canonical form: decimal digits only, no sign, no leading zero (but `0`).
    fn num<T: std::str::FromStr>(&self, tok: &str, what: &str) -> Result<T, Error> {
        let canonical = !tok.is_empty()
            && tok.bytes().all(|b| b.is_ascii_digit())
            && (tok == "0" || !tok.starts_with('0'));
        canonical.then(|| tok.parse().ok()).flatten().ok_or_else(|| {
            self.err(format!(
                "{what} `{}` is not a number in canonical form (decimal digits, no sign, no leading zero)",
                quote(tok)
            ))
        })
    }

    /// An escaped string that is exactly what [`escape`] writes for its value, so that a file
    /// that parses is canonical (no lower-case or needless escapes).
    fn string(&self, tok: &str, what: &str) -> Result<String, Error> {
        // Most tokens need no escape: printable ASCII without `%` and `#`, not the absent
        // marker. Such a token is its own value and already canonical.
        if tok != "-"
            && !tok.is_empty()
            && tok
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'%' && b != b'#')
        {
            return Ok(tok.to_string());
        }
        let value = unescape(tok).map_err(|e| self.err(format!("{what}: {e}")))?;
        if escape(&value) != tok {
            return Err(self.err(format!(
                "{what} `{}` is not escaped in canonical form (write `{}`)",
                quote(tok),
                quote(&escape(&value))
            )));
        }
        Ok(value)
    }

    fn opt_string(&self, tok: &str, what: &str) -> Result<Option<String>, Error> {
        if tok == "-" {
            Ok(None)
        } else {
            self.string(tok, what).map(Some)
        }
    }
}

/// How much of a profile's text [`parse`] is given.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extent {
    /// The whole file.
    Whole,
    /// The lines before its first `fn` or `call` line: the records that must follow the header
    /// (the `at` lines of version 2) are not required.
    Header,
}

pub(crate) fn parse(text: &str, extent: Extent) -> Result<Profile, Error> {
    let mut lines = text.split('\n').enumerate();
    let first = lines.next().map(|(_, l)| l).unwrap_or("");
    let mut head = first.trim_end_matches('\r').split(' ');
    if head.next() != Some(MAGIC) {
        return Err(Error::NotAProfile);
    }
    let with_samples = match head.next() {
        Some(v) if v == FORMAT_VERSION.to_string() && head.next().is_none() => false,
        Some(v) if v == FORMAT_VERSION_SAMPLES.to_string() && head.next().is_none() => true,
        Some(v) => return Err(Error::UnsupportedVersion(quote(v))),
        None => return Err(Error::NotAProfile),
    };

    let mut meta = Meta::default();
    let mut saw_binary = false;
    // Built-in keys already given: a second one is an error, as for the extra keys.
    let mut seen_keys: Vec<&str> = Vec::new();
    let mut functions: Vec<Function> = Vec::new();
    let mut edges: Vec<Edge> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut last_line = 1;
    let ends_in_newline = text.ends_with('\n');
    let mut lines = lines.peekable();
    while let Some((i, raw)) = lines.next() {
        let cx = LineCtx { line: i + 1 };
        last_line = i + 1;
        // The piece after the last `\n` is a line cut short: report that, not what it lacks.
        if lines.peek().is_none() && !ends_in_newline {
            return Err(cx.err("file ends in the middle of a line (truncated?)"));
        }
        let line = raw.trim_end_matches('\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // At most 7 tokens are kept: every record takes 6 or fewer, so a 7th marks the line
        // as too long without collecting an unbounded list per line.
        let mut buf = [""; 7];
        let mut count = 0;
        for t in line.split(' ').take(buf.len()) {
            buf[count] = t;
            count += 1;
        }
        let toks = &buf[..count];
        match toks[0] {
            "meta" => {
                if toks.len() != 3 {
                    return Err(cx.err("`meta` takes a key and a value"));
                }
                if !functions.is_empty() || !edges.is_empty() {
                    return Err(cx.err("`meta` lines must come before `fn` lines"));
                }
                let value = cx.string(toks[2], "meta value")?;
                let builtin = ["binary", "build-id", "arch", "source", "event", "total"];
                if let Some(k) = builtin.iter().find(|k| **k == toks[1]) {
                    if seen_keys.contains(k) {
                        return Err(cx.err(format!("duplicate meta key `{k}`")));
                    }
                    seen_keys.push(k);
                }
                match toks[1] {
                    "binary" => {
                        meta.binary = value;
                        saw_binary = true;
                    }
                    "build-id" => meta.build_id = Some(value),
                    "arch" => meta.arch = Some(value),
                    "source" => meta.source = value,
                    "event" => meta.event = Some(value),
                    "total" => meta.total = cx.num(toks[2], "total")?,
                    other => {
                        let k = cx.string(other, "meta key")?;
                        if meta.extra.insert(k, value).is_some() {
                            return Err(cx.err(format!("duplicate meta key `{}`", quote(other))));
                        }
                    }
                }
            }
            "fn" => {
                if toks.len() != 6 {
                    return Err(cx.err("`fn` takes INDEX SELF-WEIGHT SIZE NAME FILE"));
                }
                if !edges.is_empty() || !samples.is_empty() {
                    return Err(cx.err("`fn` lines must come before `call` and `at` lines"));
                }
                let idx: usize = cx.num(toks[1], "index")?;
                if idx != functions.len() {
                    return Err(cx.err(format!(
                        "function index {idx} out of sequence (expected {})",
                        functions.len()
                    )));
                }
                let self_weight = cx.num(toks[2], "self weight")?;
                let size = if toks[3] == "-" {
                    None
                } else {
                    Some(cx.num(toks[3], "size")?)
                };
                let name = cx.string(toks[4], "name")?;
                if name.is_empty() {
                    return Err(cx.err("empty function name"));
                }
                let file = cx.opt_string(toks[5], "file")?;
                let key = FuncKey { name, file };
                if let Some(prev) = functions.last() {
                    if prev.key >= key {
                        return Err(cx.err(format!(
                            "function `{}` is out of order or repeated (functions are sorted by name, then file)",
                            quote(&key.to_string())
                        )));
                    }
                }
                functions.push(Function {
                    key,
                    self_weight,
                    size,
                });
            }
            "call" => {
                if toks.len() != 4 {
                    return Err(cx.err("`call` takes CALLER CALLEE WEIGHT"));
                }
                let caller: u32 = cx.num(toks[1], "caller")?;
                let callee: u32 = cx.num(toks[2], "callee")?;
                let weight: u64 = cx.num(toks[3], "weight")?;
                for id in [caller, callee] {
                    if id as usize >= functions.len() {
                        return Err(cx.err(format!("call refers to unknown function {id}")));
                    }
                }
                if weight == 0 {
                    return Err(cx.err("call weight must be positive"));
                }
                if !samples.is_empty() {
                    return Err(cx.err("`call` lines must come before `at` lines"));
                }
                if let Some(prev) = edges.last() {
                    if (prev.caller, prev.callee) >= (caller, callee) {
                        return Err(cx.err("call lines out of order or repeated"));
                    }
                }
                edges.push(Edge {
                    caller,
                    callee,
                    weight,
                });
            }
            "at" if with_samples => {
                if toks.len() != 4 {
                    return Err(cx.err("`at` takes FUNCTION OFFSET WEIGHT"));
                }
                let func: u32 = cx.num(toks[1], "function")?;
                let offset: u64 = cx.num(toks[2], "offset")?;
                let weight: u64 = cx.num(toks[3], "weight")?;
                if func as usize >= functions.len() {
                    return Err(cx.err(format!("`at` refers to unknown function {func}")));
                }
                if weight == 0 {
                    return Err(cx.err("sample weight must be positive"));
                }
                if let Some(prev) = samples.last() {
                    if (prev.func, prev.offset) >= (func, offset) {
                        return Err(cx.err("`at` lines out of order or repeated"));
                    }
                }
                samples.push(Sample {
                    func,
                    offset,
                    weight,
                });
            }
            "at" => {
                return Err(cx.err(format!(
                    "`at` lines need format version {FORMAT_VERSION_SAMPLES} (the file says {FORMAT_VERSION})"
                )));
            }
            other => {
                return Err(cx.err(format!("unknown record `{}`", quote(other))));
            }
        }
    }
    if !ends_in_newline {
        // Only the first line, which the loop never sees, can be left here.
        return Err(Error::Parse {
            line: last_line,
            message: "file ends in the middle of a line (truncated?)".into(),
        });
    }
    if !saw_binary {
        return Err(Error::Parse {
            line: last_line,
            message: "no `meta binary` line".into(),
        });
    }
    if with_samples && samples.is_empty() && extent == Extent::Whole {
        return Err(Error::Parse {
            line: last_line,
            message: format!(
                "format version {FORMAT_VERSION_SAMPLES} without `at` lines (a profile without samples is version {FORMAT_VERSION})"
            ),
        });
    }
    Ok(Profile {
        meta,
        functions,
        edges,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProfileBuilder;
    use proptest::prelude::*;

    // Control characters (a newline, ESC) never reach a message raw; plain text is unchanged.
    #[test]
    fn quote_whole_escapes_control_characters() {
        assert_eq!(quote_whole("out/p.sprof x"), "out/p.sprof x");
        let s = quote_whole("lib\nsediment: wrote evil\x1b[31m");
        assert!(!s.chars().any(char::is_control), "{s}");
        assert!(s.contains("%0A") && s.contains("%1B"), "{s}");
    }

    fn sample() -> Profile {
        let mut b = ProfileBuilder::new(Meta {
            binary: "demo".into(),
            build_id: Some("abcd".into()),
            arch: Some("x86_64".into()),
            source: "callgrind".into(),
            event: Some("Ir".into()),
            total: 100,
            extra: Default::default(),
        });
        b.add_self(&FuncKey::global("main"), 10);
        b.add_self(&FuncKey::local("helper", "unit07.c"), 50);
        b.set_size(&FuncKey::local("helper", "unit07.c"), 96);
        b.add_call(
            &FuncKey::global("main"),
            &FuncKey::local("helper", "unit07.c"),
            7,
        );
        b.build()
    }

    #[test]
    fn writes_documented_form() {
        let expect = "sediment-profile 1\n\
meta binary demo\n\
meta build-id abcd\n\
meta arch x86_64\n\
meta source callgrind\n\
meta event Ir\n\
meta total 100\n\
# fn INDEX SELF-WEIGHT SIZE NAME FILE\n\
fn 0 50 96 helper unit07.c\n\
fn 1 10 - main -\n\
# call CALLER CALLEE WEIGHT\n\
call 1 0 7\n";
        assert_eq!(sample().to_text(), expect);
        assert_eq!(Profile::from_text(expect).unwrap(), sample());
    }

    #[test]
    fn samples_make_version_2_and_round_trip() {
        // Samples add `at` lines after the calls and say version 2; the rest of the text is
        // what version 1 writes.
        let mut b = ProfileBuilder::from(sample());
        b.add_sample(&FuncKey::local("helper", "unit07.c"), 4, 30);
        b.add_sample(&FuncKey::local("helper", "unit07.c"), 0, 20);
        b.add_sample(&FuncKey::global("main"), 9, 10);
        let p = b.build();
        let text = p.to_text();
        let v1 = sample().to_text();
        assert_eq!(
            text,
            format!(
                "sediment-profile 2\n{}# at FUNCTION OFFSET WEIGHT\nat 0 0 20\nat 0 4 30\nat 1 9 10\n",
                &v1["sediment-profile 1\n".len()..]
            )
        );
        assert_eq!(Profile::from_text(&text).unwrap(), p);
        assert!(p.is_canonical());
        assert_eq!(p.samples_of(0).len(), 2);
        assert_eq!(p.samples_of(1)[0].offset, 9);
        // Each rule of the `at` lines is checked, with the line named.
        let cases = [
            (
                "at 1 9 10\n",
                "at 0 0 20\nat 0 4 30\nat 1 9 10\nat 1 9 10\n",
                "out of order",
            ),
            (
                "at 1 9 10\n",
                "at 0 0 20\nat 0 4 30\nat 5 9 10\n",
                "unknown function 5",
            ),
            (
                "at 1 9 10\n",
                "at 0 0 20\nat 0 4 30\nat 1 9 0\n",
                "positive",
            ),
            (
                "at 1 9 10\n",
                "at 0 0 20\nat 0 4 30\nat 1 9\n",
                "FUNCTION OFFSET WEIGHT",
            ),
            (
                "at 1 9 10\n",
                "at 0 0 20\nat 0 4 30\nat 1 09 10\n",
                "canonical",
            ),
            ("at 0 0 20\n", "at 0 0 20\ncall 1 0 7\n", "before `at`"),
        ];
        for (from, to, what) in cases {
            let bad = text.replacen(&format!("at 0 0 20\nat 0 4 30\n{from}"), to, 1);
            let bad = if bad == text {
                text.replacen(from, to, 1)
            } else {
                bad
            };
            let e = Profile::from_text(&bad).unwrap_err().to_string();
            assert!(e.starts_with("line ") && e.contains(what), "{what}: {e}");
        }
        // `at` lines in a version-1 file, and version 2 without them, are refused.
        let e = Profile::from_text(&text.replacen("sediment-profile 2", "sediment-profile 1", 1));
        assert!(e.unwrap_err().to_string().contains("need format version 2"));
        let e = Profile::from_text(&v1.replacen("sediment-profile 1", "sediment-profile 2", 1));
        assert!(e.unwrap_err().to_string().contains("without `at` lines"));
    }

    #[test]
    fn odd_names_round_trip_as_single_tokens() {
        let mut b = ProfileBuilder::new(Meta {
            binary: "my prog".into(),
            ..Default::default()
        });
        let evil = "x\n} SECTIONS { INCLUDE /etc/passwd * ( ) \"q\" % # -";
        b.add_self(&FuncKey::global(evil), 1);
        b.add_self(&FuncKey::global("-"), 1);
        b.add_self(&FuncKey::local("f", "we ird.c"), 1);
        let p = b.build();
        let text = p.to_text();
        for line in text.lines().filter(|l| l.starts_with("fn ")) {
            assert_eq!(line.split(' ').count(), 6, "{line}");
        }
        assert_eq!(Profile::from_text(&text).unwrap(), p);
    }

    #[test]
    fn errors_name_the_line() {
        let good = sample().to_text();
        let bad = good.replace("call 1 0 7", "call 1 9 7");
        assert_eq!(
            Profile::from_text(&bad).unwrap_err(),
            Error::Parse {
                line: 12,
                message: "call refers to unknown function 9".into()
            }
        );
        let truncated = &good[..good.len() - 3];
        assert!(matches!(
            Profile::from_text(truncated),
            Err(Error::Parse { line: 12, .. })
        ));
        assert_eq!(
            Profile::from_text("hello\n").unwrap_err(),
            Error::NotAProfile
        );
        assert_eq!(
            Profile::from_text("sediment-profile 9\n").unwrap_err(),
            Error::UnsupportedVersion("9".into())
        );
        let unsorted = good.replace("fn 0 50 96 helper", "fn 0 50 96 zzz");
        assert!(matches!(
            Profile::from_text(&unsorted),
            Err(Error::Parse { line: 10, .. })
        ));
    }

    // Regression: parse errors quoted a stranger's bytes raw (terminal escapes, a vertical tab
    // breaking the one-line message) and without bound.
    #[test]
    fn errors_quote_input_escaped_and_bounded() {
        let e = Profile::from_text("sediment-profile 1\x1b[2J\x1b[31mEVIL\n").unwrap_err();
        assert_eq!(
            e,
            Error::UnsupportedVersion("1%1B[2J%1B[31mEVIL".into()),
            "{e}"
        );
        let head = "sediment-profile 1\nmeta binary b\n";
        for (body, want) in [
            (
                "meta x a%zz\x1b]0;t\x07\n",
                "bad escape `%zz` in `a%zz%1B]0;t%07`",
            ),
            ("meta x\x0bk a\n", "meta key `x%0Bk` is not escaped"),
            ("meta x a\nmeta x b\n", "duplicate meta key `x`"),
            ("fn 0 1\x0b - f -\n", "self weight `1%0B` is not a number"),
            ("bogus\x1b[31m\n", "unknown record `bogus%1B[31m`"),
        ] {
            let msg = Profile::from_text(&format!("{head}{body}"))
                .unwrap_err()
                .to_string();
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
            assert!(!msg.chars().any(char::is_control), "{msg:?}");
        }
        let long = format!("{head}{}\n", "x".repeat(10_000));
        let msg = Profile::from_text(&long).unwrap_err().to_string();
        assert!(msg.len() < 200 && msg.contains("xxx..."), "{msg}");
        assert_eq!(quote("a\u{202E}b\u{85}"), "a%E2%80%AEb%C2%85");
        assert_eq!(quote("plain % text"), "plain % text");
    }

    // Regression: the reader took repeated built-in meta keys (last one won), signed and
    // zero-padded numbers and lower-case or needless escapes, so two texts parsed to one
    // profile; and a cut `fn` line was reported as a malformed one, not as truncated.
    #[test]
    fn only_the_canonical_form_parses() {
        let good = sample().to_text();
        for (from, to, want) in [
            (
                "meta binary demo\n",
                "meta binary demo\nmeta binary other\n",
                "duplicate meta key `binary`",
            ),
            (
                "meta total 100\n",
                "meta total 100\nmeta total 5\n",
                "duplicate meta key `total`",
            ),
            ("meta total 100", "meta total +100", "total `+100`"),
            ("fn 0 50 96", "fn 0 +50 96", "self weight `+50`"),
            ("fn 0 50 96", "fn 0 050 96", "self weight `050`"),
            ("call 1 0 7", "call 1 0 07", "weight `07`"),
            ("meta arch x86_64", "meta arch x86%5f64", "bad escape `%5f`"),
            ("meta arch x86_64", "meta arch x86%+1", "bad escape `%+1`"),
            ("meta arch x86_64", "meta arch x86%5F64", "write `x86_64`"),
            ("helper unit07.c", "help%65r unit07.c", "write `helper`"),
        ] {
            let bad = good.replacen(from, to, 1);
            assert_ne!(bad, good);
            let msg = Profile::from_text(&bad).unwrap_err().to_string();
            assert!(msg.contains(want), "{to}: {msg:?} lacks {want:?}");
        }
        // Cut in the middle of the first `fn` line (line 9).
        let cut = &good[..good.find("fn 0 50").unwrap() + 6];
        assert_eq!(
            Profile::from_text(cut).unwrap_err(),
            Error::Parse {
                line: 9,
                message: "file ends in the middle of a line (truncated?)".into()
            }
        );
        // Extra keys in any order, `%` for the empty string and `%2D` for `-` stay valid.
        let ok = good.replace(
            "meta total 100\n",
            "meta total 100\nmeta zz %\nmeta aa %2D\n",
        );
        let p = Profile::from_text(&ok).unwrap();
        assert_eq!(p.meta.extra["aa"], "-");
        assert_eq!(p.meta.extra["zz"], "");
    }

    proptest! {
        #[test]
        fn escape_round_trips(s in "\\PC*") {
            let e = escape(&s);
            prop_assert!(!e.is_empty());
            prop_assert!(e.bytes().all(|b| b.is_ascii_graphic() && b != b'#'));
            prop_assert_eq!(unescape(&e).unwrap(), s);
        }

        #[test]
        fn parse_never_panics(s in "(sediment-profile 1\n)?[a-z0-9 %#\\-\n]{0,200}") {
            let _ = Profile::from_text(&s);
        }

        #[test]
        fn text_round_trip(names in proptest::collection::vec(("[ -~]{1,12}", proptest::option::of("[a-z]{1,4}\\.c"), 0u64..1000), 1..20),
                           calls in proptest::collection::vec((0usize..20, 0usize..20, 1u64..50), 0..30)) {
            let mut b = ProfileBuilder::new(Meta { binary: "b".into(), ..Default::default() });
            let keys: Vec<FuncKey> = names.iter().map(|(n, f, _)| FuncKey { name: n.clone(), file: f.clone() }).collect();
            for (k, (_, _, w)) in keys.iter().zip(&names) { b.add_self(k, *w); }
            for (a, c, w) in calls { b.add_call(&keys[a % keys.len()], &keys[c % keys.len()], w); }
            let p = b.build();
            prop_assert!(p.is_canonical());
            let t = p.to_text();
            let q = Profile::from_text(&t).unwrap();
            prop_assert_eq!(&q, &p);
            prop_assert_eq!(q.to_text(), t);
        }
    }
}
