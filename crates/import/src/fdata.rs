//! BOLT's `.fdata` branch profile: reading it into a [`Profile`] and writing a profile's call
//! edges back out, so that profiles can travel between Sediment and `llvm-bolt -data=`.
//!
//! The format is the one `perf2bolt` writes and BOLT's `DataReader` parses (llvm-project,
//! `bolt/lib/Profile/DataReader.cpp`). It is line-oriented text, fields separated by one or more
//! spaces, names never quoted (so a name with a space cannot be written at all):
//!
//! ```text
//! no_lbr cpu-clock            optional first line: a sample profile, with its event names
//! boltedcollection            optional: the profile was taken on a BOLTed binary
//! 1 main 1f 1 work 0 0 120    LBR form: FROM TO mispredictions count
//! 1 work 0 180                no_lbr form: LOCATION count
//! 4 main 2a 3 [heap] 10 5     memory-event records (flags 3/4/5): read and ignored
//! ```
//!
//! A *location* is three fields: a flag, a name and a hexadecimal offset (no `0x`). Flag `0`
//! means the name is a DSO (or `[unknown]`) and the offset a raw address; `1` a global symbol
//! and `2` a local symbol, the offset counted from the symbol's start. Mispredictions and counts
//! are decimal. Memory records use flags `3`/`4`/`5` (the branch flags plus three) and are
//! skipped: they say nothing about calls.
//!
//! **Names of local symbols.** BOLT keeps same-named statics apart by renaming them
//! `name/file/N` (the name, the base name of the `STT_FILE` symbol, and a 1-based counter from
//! its `NameResolver`), or `name/N` when the object had no file symbol. On reading, a name of
//! the first shape becomes the local key `(name, file)`, the second the key `name` with no file
//! (the file cannot be told; [`crate::bind`] can settle it against the binary later), and any
//! other name is taken whole as a global.
//!
//! **Weights** (a choice: fdata has no notion of self time).
//! - *LBR form:* every branch whose target is a symbol adds its count to the target function's
//!   self weight. The number of branches landing in a function tracks how much of it runs, and it
//!   needs no knowledge of the code. A branch from function A to offset 0 of a function B is a
//!   call and adds its count to the edge A -> B. A jump to offset 0 of *the same* function is
//!   recursion (BOLT reads it as an entry too) and is kept as a self edge, as the perf importer
//!   keeps recursion. Tail calls cannot be told from calls and count as calls, as in BOLT.
//! - *no_lbr form:* each sample record adds its count to its function's self weight and to the
//!   profile's sample at that offset ([`sediment_profile::Sample`]); there are no edges.
//! - Records whose locations are not symbols still count in [`Meta::total`].
//!
//! **Writing** ([`write()`]) produces the `no_lbr` form: a `no_lbr` header line, then for each
//! function, in the profile's order, one `flag function offset weight` line per sample the
//! profile holds for it (offsets in hex, ascending), or, for a function with self weight and no
//! samples, one line at offset 0 with its self weight.
//!
//! What BOLT (16) does with it (`DataReader::readSampleData`): a block's count is the sum of
//! the samples whose offsets fall between its start and the next block's start, times 1000,
//! divided by the block's instruction count when an event name in the header contains
//! `cycles` or `instructions`; edge counts are then inferred from block counts. A block without
//! samples counts as never run, and `-split-functions` moves it to the cold part. Samples at
//! instruction offsets (callgrind: every executed instruction with its count; perf: every
//! sampled instruction pointer) therefore give every block that ran a count, while a function
//! written at offset 0 alone has only its entry block hot. Callgrind's event `Ir` counts every
//! instruction's executions, so the header names it `instructions` ([`INSTRUCTIONS_EVENT`]):
//! BOLT's division then turns a block's summed instructions back into its execution count.
//! Other events keep their own name (`cpu-clock`: BOLT does not divide, and a block's count is
//! its sample count). A profile without samples writes its event as before.
//!
//! No call lines: in a file that starts with `no_lbr`, BOLT parses every record as a sample
//! (location and count) and stops with an error at a branch record, so the two forms cannot be
//! mixed; and a branch record needs the call instruction's offset, which a profile does not
//! keep (a call written from offset 0 is a branch from an instruction that is not a call,
//! which BOLT rejects as a stale profile). A round trip keeps every function's self weight and
//! every sample. Keys that cannot be spelled in fdata (empty, or containing whitespace, control
//! characters or `/`) are skipped and counted. Weights above `i64::MAX` are written as
//! `i64::MAX`, since BOLT parses counts as signed 64-bit numbers.
//!
//! **Memory.** A stranger's file must not exhaust memory. Input files are already capped in
//! size by the caller, but a record can introduce two new functions and a call in 20 bytes,
//! each costing a few hundred bytes once imported, so the profile being built is checked after
//! every record against [`MAX_DECODED`] ([`ProfileBuilder::estimated_bytes`], which counts
//! every distinct function with its name and every distinct call once), and a file that would
//! exceed it is refused with a one-line error naming the file and the line it had reached.
//!
//! Turned down: reading the LBR form's branch offsets into a block-level profile. Sediment
//! orders whole functions; BOLT itself is the tool for what happens inside them.

use crate::Error;
use sediment_profile::{quote, FuncId, FuncKey, Meta, Profile, ProfileBuilder};
use std::fmt::Write as _;

/// Value of `meta source` in profiles read from fdata.
pub const SOURCE: &str = "fdata";

/// Largest memory, estimated by [`ProfileBuilder::estimated_bytes`], that the functions and
/// calls read from one file may take (1 GiB, the budget of pprof's
/// [`MAX_DECODED`](crate::pprof::MAX_DECODED)): some 2.5 million distinct functions with
/// 20-byte names and as many calls, or 13 million calls between fewer functions. A real
/// profile names only the functions of one binary that ran, far fewer.
pub const MAX_DECODED: u64 = 1 << 30;

/// A parsed location: the function key (None for flag 0, a DSO or raw address) and the offset.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Location {
    key: Option<FuncKey>,
    offset: u64,
}

/// Reads an fdata file held in `text`; `path` names it in errors and `binary` becomes the
/// profile's `meta binary` (fdata does not say which binary it describes).
pub fn read(path: &str, text: &str, binary: &str) -> Result<Profile, Error> {
    read_capped(path, text, binary, MAX_DECODED)
}

/// [`read`] with the memory budget as a parameter (tests use small ones).
fn read_capped(path: &str, text: &str, binary: &str, budget: u64) -> Result<Profile, Error> {
    let syntax = |line: usize, message: String| Error::Syntax {
        path: path.to_string(),
        line,
        message,
    };
    let mut meta = Meta {
        binary: binary.to_string(),
        source: SOURCE.to_string(),
        ..Meta::default()
    };
    let mut no_lbr = false;
    let mut records = 0u64;
    let mut total = 0u64;
    let mut builder = ProfileBuilder::new(Meta::default());
    if !text.is_empty() && !text.ends_with('\n') {
        // perf2bolt ends every record with a newline: a cut file would lose or shorten a count.
        let last = text.bytes().filter(|&b| b == b'\n').count() + 1;
        return Err(syntax(
            last,
            "file ends in the middle of a line (truncated?)".into(),
        ));
    }
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let fields: Vec<&str> = line.split(' ').filter(|f| !f.is_empty()).collect();
        let Some(&first) = fields.first() else {
            continue;
        };
        if first == "no_lbr" {
            if line_no != 1 {
                return Err(syntax(line_no, "`no_lbr` must be the first line".into()));
            }
            no_lbr = true;
            if fields.len() > 1 {
                meta.event = Some(fields[1..].join(","));
            }
            continue;
        }
        if first == "boltedcollection" {
            if records > 0 || fields.len() != 1 {
                return Err(syntax(
                    line_no,
                    "`boltedcollection` must stand alone before the first record".into(),
                ));
            }
            meta.extra.insert("bolted".into(), "yes".into());
            continue;
        }
        records += 1;
        match first {
            "3" | "4" | "5" => {
                // Memory event: FROM-location ADDR-location count. Checked, then ignored.
                if fields.len() != 7 {
                    return Err(syntax(
                        line_no,
                        format!(
                            "memory record needs 7 fields, found {} (`{}`)",
                            fields.len(),
                            quote(line)
                        ),
                    ));
                }
                location(&fields[0..3], true).map_err(|m| syntax(line_no, m))?;
                location(&fields[3..6], true).map_err(|m| syntax(line_no, m))?;
                count(fields[6]).map_err(|m| syntax(line_no, m))?;
            }
            _ if no_lbr => {
                if fields.len() != 4 {
                    return Err(syntax(
                        line_no,
                        format!(
                            "no_lbr sample record needs 4 fields (location, count), found {}",
                            fields.len()
                        ),
                    ));
                }
                let at = location(&fields[0..3], false).map_err(|m| syntax(line_no, m))?;
                let n = count(fields[3]).map_err(|m| syntax(line_no, m))?;
                total = total.saturating_add(n);
                if let Some(key) = at.key {
                    builder.add_self(&key, n);
                    builder.add_sample(&key, at.offset, n);
                }
            }
            _ => {
                if fields.len() != 8 {
                    return Err(syntax(
                        line_no,
                        format!(
                            "branch record needs 8 fields (from, to, mispredictions, count), \
                             found {}",
                            fields.len()
                        ),
                    ));
                }
                let from = location(&fields[0..3], false).map_err(|m| syntax(line_no, m))?;
                let to = location(&fields[3..6], false).map_err(|m| syntax(line_no, m))?;
                fields[6].parse::<i64>().map_err(|_| {
                    syntax(
                        line_no,
                        format!("bad misprediction count `{}`", quote(fields[6])),
                    )
                })?;
                let n = count(fields[7]).map_err(|m| syntax(line_no, m))?;
                total = total.saturating_add(n);
                if let Some((caller, callee)) = branch(
                    &mut builder,
                    from.key.as_ref(),
                    to.key.as_ref(),
                    to.offset,
                    n,
                ) {
                    builder.add_call(&caller, &callee, n);
                }
            }
        }
        if builder.estimated_bytes() > budget {
            return Err(Error::Format {
                path: path.to_string(),
                message: format!(
                    "too large to import: by line {line_no}, its {} functions and {} calls \
                     would take more than the {budget}-byte memory limit",
                    builder.len(),
                    builder.edge_count()
                ),
            });
        }
    }
    if records == 0 {
        return Err(Error::Format {
            path: path.to_string(),
            message: "no fdata records (not a BOLT profile, or empty)".into(),
        });
    }
    meta.total = total;
    meta.extra.insert(
        "fdata-form".into(),
        if no_lbr { "no_lbr" } else { "lbr" }.into(),
    );
    *builder.meta_mut() = meta;
    Ok(builder.build())
}

/// Applies the LBR weight rule (module docs) to one branch `from -> to+to_offset` seen `n`
/// times: the target gets self weight, and a branch to offset 0 is returned as a call edge
/// (caller, callee) for the caller to add. Shared with the `perf script` importer.
pub(crate) fn branch(
    builder: &mut ProfileBuilder,
    from: Option<&FuncKey>,
    to: Option<&FuncKey>,
    to_offset: u64,
    n: u64,
) -> Option<(FuncKey, FuncKey)> {
    let to = to?;
    builder.add_self(to, n);
    let from = from?;
    (to_offset == 0).then(|| (from.clone(), to.clone()))
}

/// Parses a three-field location. `mem` selects the memory-record flags (3/4/5).
fn location(f: &[&str], mem: bool) -> Result<Location, String> {
    let base = if mem { 3 } else { 0 };
    let flag = match f[0].parse::<u8>() {
        Ok(v) if f[0].len() == 1 && (base..base + 3).contains(&v) => v - base,
        _ => {
            return Err(format!(
                "expected location flag {}, {} or {}, found `{}`",
                base,
                base + 1,
                base + 2,
                quote(f[0])
            ))
        }
    };
    let hex = f[2].strip_prefix("0x").unwrap_or(f[2]);
    let offset = u64::from_str_radix(hex, 16)
        .map_err(|_| format!("expected hexadecimal offset, found `{}`", quote(f[2])))?;
    let key = (flag != 0).then(|| parse_name(f[1]));
    Ok(Location { key, offset })
}

/// A record count: a decimal number >= 0 that fits BOLT's signed 64 bits.
fn count(s: &str) -> Result<u64, String> {
    match s.parse::<i64>() {
        Ok(v) if v >= 0 => Ok(v as u64),
        _ => Err(format!(
            "expected a count (decimal number >= 0), found `{}`",
            quote(s)
        )),
    }
}

/// Turns a BOLT function name into a key (see "Names of local symbols" in the module docs).
pub fn parse_name(name: &str) -> FuncKey {
    let parts: Vec<&str> = name.split('/').collect();
    let counter = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        [base, file, n] if !base.is_empty() && !file.is_empty() && counter(n) => {
            FuncKey::local(*base, file)
        }
        [base, n] if !base.is_empty() && counter(n) => FuncKey::global(*base),
        _ => FuncKey::global(name),
    }
}

/// True when `s` can be one fdata name component.
fn writable(s: &str) -> bool {
    !s.is_empty()
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
}

/// The fdata spelling of a key: `(flag, name)`, or None when it cannot be written.
fn spell(key: &FuncKey) -> Option<(u8, String)> {
    if !writable(&key.name) {
        return None;
    }
    match &key.file {
        // Counter 1: the first (and, keyed by file, only) function of this name and file.
        Some(file) if writable(file) => Some((2, format!("{}/{}/1", key.name, file))),
        Some(_) => None,
        None => Some((1, key.name.clone())),
    }
}

/// What [`write()`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The fdata text (`no_lbr` form).
    pub text: String,
    /// Functions written (those with self weight or samples).
    pub functions: usize,
    /// Of those, functions written at their instruction offsets (from the profile's samples);
    /// the others are one sample at offset 0 with their self weight.
    pub with_offsets: usize,
    /// Sample lines written at instruction offsets.
    pub offsets: usize,
    /// Functions with self weight left out because their key could not be spelled in fdata.
    pub skipped_functions: usize,
}

/// The event name BOLT is told for a profile's `meta event` when samples are written at
/// instruction offsets: callgrind's `Ir` (instructions executed) is named `instructions`, the
/// name that makes BOLT divide a block's samples by its instruction count, which turns
/// per-instruction execution counts into the block's execution count. Other events keep
/// their name.
pub const INSTRUCTIONS_EVENT: &str = "instructions";

/// Writes `profile` as `no_lbr` fdata (see the module docs). Lines follow the profile's
/// canonical function order, then offset order, so equal profiles give identical text.
pub fn write(profile: &Profile) -> Written {
    let mut text = String::from("no_lbr");
    let ir = profile.meta.event.as_deref() == Some("Ir");
    if ir && !profile.samples.is_empty() {
        text.push(' ');
        text.push_str(INSTRUCTIONS_EVENT);
    } else if let Some(event) = &profile.meta.event {
        // `read` joins the header's event names with commas; split them back.
        if event.split(',').all(writable) {
            for name in event.split(',') {
                text.push(' ');
                text.push_str(name);
            }
        }
    }
    text.push('\n');
    let (mut functions, mut skipped_functions, mut with_offsets, mut offsets) = (0, 0, 0, 0);
    for (i, f) in profile.functions.iter().enumerate() {
        let samples = profile.samples_of(i as FuncId);
        if f.self_weight == 0 && samples.is_empty() {
            continue;
        }
        let Some((flag, name)) = spell(&f.key) else {
            skipped_functions += 1;
            continue;
        };
        functions += 1;
        if samples.is_empty() {
            let w = f.self_weight.min(i64::MAX as u64);
            let _ = writeln!(text, "{flag} {name} 0 {w}");
            continue;
        }
        with_offsets += 1;
        for s in samples {
            let w = s.weight.min(i64::MAX as u64);
            let _ = writeln!(text, "{flag} {name} {:x} {w}", s.offset);
            offsets += 1;
        }
    }
    Written {
        text,
        functions,
        with_offsets,
        offsets,
        skipped_functions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(p: &Profile) -> Vec<(String, u64)> {
        p.functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight))
            .collect()
    }

    fn edges(p: &Profile) -> Vec<(String, String, u64)> {
        p.named_edges()
    }

    const FIXTURE: &str = include_str!("../../../tests/fixtures/fdata/lbr.fdata");
    const FIXTURE_NO_LBR: &str = include_str!("../../../tests/fixtures/fdata/no_lbr.fdata");

    #[test]
    fn lbr_fixture_weights() {
        // Calls are branches to offset 0; self weight is the branches landing in a function.
        let p = read("lbr.fdata", FIXTURE, "prog").unwrap();
        assert_eq!(
            weights(&p),
            vec![
                ("helper (a.c)".to_string(), 300),
                ("helper (b.c)".to_string(), 7),
                ("main".to_string(), 40),
                ("other".to_string(), 5),
                ("work".to_string(), 150 + 60),
            ]
        );
        assert_eq!(
            edges(&p),
            vec![
                ("main".to_string(), "other".to_string(), 5),
                ("main".to_string(), "work".to_string(), 150),
                ("other".to_string(), "helper (b.c)".to_string(), 7),
                ("work".to_string(), "helper (a.c)".to_string(), 300),
                ("work".to_string(), "work".to_string(), 60),
            ]
        );
        // Every count, including the unknown-source and DSO lines, is in the total.
        assert_eq!(p.meta.total, 150 + 300 + 40 + 60 + 7 + 5 + 9 + 11);
        assert_eq!(p.meta.source, "fdata");
        assert_eq!(
            p.meta.extra.get("fdata-form").map(String::as_str),
            Some("lbr")
        );
    }

    #[test]
    fn no_lbr_fixture_weights() {
        // Sample records are self weight only; the event names become meta event.
        let p = read("no_lbr.fdata", FIXTURE_NO_LBR, "prog").unwrap();
        assert_eq!(
            weights(&p),
            vec![
                ("helper (a.c)".to_string(), 25),
                ("main".to_string(), 3),
                ("work".to_string(), 12 + 30),
            ]
        );
        assert!(p.edges.is_empty());
        assert_eq!(p.meta.total, 25 + 3 + 12 + 30 + 4);
        assert_eq!(p.meta.event.as_deref(), Some("cpu-clock"));
    }

    #[test]
    fn local_names_follow_bolt_convention() {
        // name/file/N is a static of that file; name/N a static of unknown file.
        assert_eq!(parse_name("helper/a.c/2"), FuncKey::local("helper", "a.c"));
        assert_eq!(parse_name("helper/3"), FuncKey::global("helper"));
        assert_eq!(parse_name("a/b"), FuncKey::global("a/b"));
        assert_eq!(parse_name("main"), FuncKey::global("main"));
    }

    #[test]
    fn write_then_read_keeps_self_weights() {
        // The written fdata is the no_lbr sample form: it reads back to the same self weights,
        // statics included, and names no call (a profile keeps no call-site offsets).
        let mut b = ProfileBuilder::new(Meta {
            event: Some("cpu-clock".into()),
            ..Meta::default()
        });
        b.add_call(&FuncKey::global("main"), &FuncKey::global("work"), 7);
        b.add_self(&FuncKey::global("work"), 5);
        b.add_self(&FuncKey::local("h", "x.c"), 3);
        b.add_self(&FuncKey::global("cold"), 9);
        let p = b.build();
        let w = write(&p);
        assert_eq!((w.functions, w.skipped_functions), (3, 0));
        assert_eq!(
            w.text,
            "no_lbr cpu-clock\n1 cold 0 9\n2 h/x.c/1 0 3\n1 work 0 5\n"
        );
        assert!(!w.text.contains("main"));
        let q = read("w.fdata", &w.text, "").unwrap();
        assert_eq!(
            weights(&q),
            vec![
                ("cold".to_string(), 9),
                ("h (x.c)".to_string(), 3),
                ("work".to_string(), 5),
            ]
        );
        assert!(q.edges.is_empty());
        assert_eq!(q.meta.event.as_deref(), Some("cpu-clock"));
    }

    #[test]
    fn samples_are_written_at_their_offsets() {
        // With samples, each is a line at its offset (hex) and callgrind's `Ir` is named
        // `instructions`; a function without samples keeps its entry line. Reading the text
        // back gives the same weights and samples.
        let mut b = ProfileBuilder::new(Meta {
            event: Some("Ir".into()),
            ..Meta::default()
        });
        let (work, h, main) = (
            FuncKey::global("work"),
            FuncKey::local("h", "x.c"),
            FuncKey::global("main"),
        );
        b.add_self(&work, 130);
        b.add_sample(&work, 0, 10);
        b.add_sample(&work, 0x1c, 120);
        b.add_self(&h, 4);
        b.add_sample(&h, 0x10, 4);
        b.add_self(&main, 7);
        let p = b.build();
        let w = write(&p);
        assert_eq!((w.functions, w.with_offsets, w.offsets), (3, 2, 3));
        assert_eq!(
            w.text,
            "no_lbr instructions\n2 h/x.c/1 10 4\n1 main 0 7\n1 work 0 10\n1 work 1c 120\n"
        );
        let q = read("w.fdata", &w.text, "").unwrap();
        assert_eq!(weights(&q), weights(&p));
        let at = |p: &Profile| {
            (p.samples.iter())
                .map(|s| {
                    (
                        p.functions[s.func as usize].key.to_string(),
                        s.offset,
                        s.weight,
                    )
                })
                .collect::<Vec<_>>()
        };
        let mut want = at(&p);
        want.push(("main".into(), 0, 7));
        want.sort();
        assert_eq!(at(&q), want);
        // Without samples the header keeps the event's own name (profiles of older versions
        // export as before).
        let mut old = p.clone();
        old.samples.clear();
        assert!(write(&old).text.starts_with("no_lbr Ir\n2 h/x.c/1 0 4\n"));
    }

    #[test]
    fn unwritable_names_are_counted() {
        // A name with a space cannot be an fdata field: its function is skipped and counted;
        // an event name with a space is left out of the header.
        let mut b = ProfileBuilder::new(Meta {
            event: Some("a b".into()),
            ..Meta::default()
        });
        b.add_self(&FuncKey::global("a b"), 1);
        b.add_self(&FuncKey::global("c"), 2);
        let p = b.build();
        let w = write(&p);
        assert_eq!((w.functions, w.skipped_functions), (1, 1));
        assert_eq!(w.text, "no_lbr\n1 c 0 2\n");
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        // Each damaged record gives a one-line error with the file and the line number.
        let cases = [
            (
                "1 main 0 1 work 0 0 5\n1 main zz 1 work 0 0 5\n",
                2,
                "hexadecimal",
            ),
            ("1 main 0 1 work 0 0\n", 1, "8 fields"),
            ("7 main 0 1 work 0 0 5\n", 1, "flag"),
            ("1 main 0 1 work 0 0 -5\n", 1, "count"),
            ("1 main 0 1 work 0 x 5\n", 1, "misprediction"),
            ("1 main 0 1 work 0 0 5\nno_lbr\n", 2, "first line"),
        ];
        for (text, line, what) in cases {
            let e = read("bad.fdata", text, "p").unwrap_err().to_string();
            assert!(e.starts_with(&format!("bad.fdata: line {line}: ")), "{e}");
            assert!(e.contains(what), "{e}");
            assert!(!e.contains('\n'));
        }
        let e = read("e.fdata", "\n\n", "p").unwrap_err().to_string();
        assert_eq!(
            e,
            "e.fdata: no fdata records (not a BOLT profile, or empty)"
        );
    }

    // Regression: a file cut inside a record was read with the cut count (`... 0 0 1` for
    // `... 0 0 150`); and the fields quoted in errors reached the terminal raw.
    #[test]
    fn cut_file_is_truncated_and_errors_are_escaped() {
        let cut = &FIXTURE[..22];
        assert_eq!(
            read("cut.fdata", cut, "p").unwrap_err().to_string(),
            "cut.fdata: line 1: file ends in the middle of a line (truncated?)"
        );
        let e = read("x.fdata", "1 main 0 1 work 0 0 5\x1b[2J\x0b\n", "p")
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("found `5%1B[2J%0B`"), "{e}");
        let e = read(
            "x.fdata",
            &format!("1 main {}\x1b 1 w 0 0 5\n", "f".repeat(300)),
            "p",
        )
        .unwrap_err()
        .to_string();
        assert!(e.len() < 200 && !e.chars().any(char::is_control), "{e:?}");
    }

    // Regression: a file of calls between ever new names (20 bytes a record) took 36 times its
    // size in memory, and nothing bounded it: 88 MB of them took 3.2 GB.
    #[test]
    fn distinct_functions_are_capped_repeated_records_are_not() {
        use sediment_profile::{CALL_COST, FUNCTION_COST};
        // Two new 3-byte names and a call per line cost 2 * (FUNCTION_COST + 3) + CALL_COST;
        // a budget of five such lines is crossed on the sixth.
        let line = 2 * (FUNCTION_COST + 3) + CALL_COST;
        let text: String = (10..40)
            .map(|i| format!("1 a{i} 0 1 b{i} 0 0 1\n"))
            .collect();
        let e = read_capped("big.fdata", &text, "p", 5 * line)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "big.fdata: too large to import: by line 6, its 12 functions and 6 calls would \
                 take more than the {}-byte memory limit",
                5 * line
            )
        );
        // The same call on every line costs one call, however many lines: it fits in one.
        let same = "1 a10 0 1 b10 0 0 1\n".repeat(1000);
        let p = read_capped("same.fdata", &same, "p", line).unwrap();
        assert_eq!(edges(&p), vec![("a10".into(), "b10".into(), 1000)]);
        // The real limit takes files far beyond the fixtures.
        assert!(read("big.fdata", &text, "p").is_ok());
    }

    proptest::proptest! {
        #[test]
        fn mutated_fixture_never_panics(
            at in 0usize..4096,
            byte in proptest::prelude::any::<u8>(),
            cut in 0usize..4096,
        ) {
            // Any single-byte change or truncation gives a profile or an error, never a panic.
            for base in [FIXTURE, FIXTURE_NO_LBR] {
                let mut bytes = base.as_bytes().to_vec();
                let i = at % bytes.len();
                bytes[i] = byte;
                bytes.truncate(cut.max(1).min(bytes.len()));
                let text = String::from_utf8_lossy(&bytes);
                let _ = read("m.fdata", &text, "p");
            }
        }
    }
}
