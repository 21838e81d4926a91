//! A reader for the parts of callgrind's output that footprint metrics need: the execution
//! count of every instruction of one object.
//!
//! Format: "Callgrind Format Specification" in the Valgrind manual (cl-format). A file is a
//! header of `key: value` lines (`positions:` names the subpositions of each cost line,
//! `events:` the counters) followed by body lines:
//! - `ob=`, `fl=`, `fi=`, `fe=`, `fn=` set the object, file and function the next cost lines
//!   belong to; `cob=`, `cfi=`/`cfl=`, `cfn=` name the callee of the next `calls=` line.
//!   Names may be compressed: `ob=(5) /bin/x` defines id 5 and a later `ob=(5)` or `cob=(5)`
//!   refers to it. Objects and callee objects share one id space.
//! - A cost line is the subpositions then the counters, e.g. `0x4004f0 12 3` for
//!   `positions: instr line` and `events: Ir`. With position compression (callgrind's default)
//!   a subposition may be `+N` or `-N` (decimal, relative to the same subposition of the
//!   previous cost line) or `*` (unchanged); absolute values are decimal or `0x` hex. Missing
//!   trailing counters are zero.
//! - `calls=COUNT TARGET` is always followed by one cost line at the call site whose counters
//!   are the *inclusive* cost of the call. That line still moves the position, but its cost is
//!   not the call instruction's own and is skipped here (the call instruction's own `Ir` has its
//!   own cost line). `jump=`/`jcnd=` lines (with `--collect-jumps`) carry no cost.
//!
//! With `--dump-instr=yes`, the `Ir` of an instruction address is its execution count: that is
//! all this module extracts, summed per address over every context the address appears in.
//! The full profile importer (functions and call edges) lives in `sediment-import`; this one is
//! deliberately smaller and knows nothing of functions.

use std::collections::{BTreeMap, HashMap};

/// A parse failure: 1-based line number and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number in the callgrind output.
    pub line: usize,
    /// What was wrong with it.
    pub message: String,
}

/// Instruction execution counts of the selected object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstrCounts {
    /// Instruction address (as callgrind prints it) -> times executed.
    pub counts: BTreeMap<u64, u64>,
    /// Every object name the file mentions in an `ob=` line, in order of first appearance
    /// (for error messages when the wanted object is absent).
    pub objects: Vec<String>,
    /// True when at least one `ob=` line selected the wanted object.
    pub found: bool,
}

/// Reads the per-instruction `Ir` counts of the object `wanted` selects (called with each
/// object's name as written in `ob=` lines).
pub fn instruction_counts(
    text: &str,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<InstrCounts, ParseError> {
    let mut out = InstrCounts::default();
    // Header state.
    let mut instr_pos: Option<usize> = None;
    let mut npos = 1usize; // callgrind's default is `positions: line`
    let mut ir_index: Option<usize> = None;
    let mut saw_events = false;
    // Body state.
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut in_wanted = false;
    let mut skip_next_cost = false;
    let mut last: Vec<u64> = vec![0; npos];

    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let err = |message: String| ParseError {
            line: lineno,
            message,
        };
        let line = raw.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.as_bytes()[0];
        if first.is_ascii_digit() || first == b'+' || first == b'-' || first == b'*' {
            if !saw_events {
                return Err(err("cost line before the `events:` header".into()));
            }
            let Some(ip) = instr_pos else {
                return Err(err(
                    "no `instr` in `positions:` (record with --dump-instr=yes)".into(),
                ));
            };
            let mut fields = line.split_ascii_whitespace();
            for slot in last.iter_mut() {
                let f = fields
                    .next()
                    .ok_or_else(|| err("cost line has fewer fields than positions".into()))?;
                *slot = parse_position(f, *slot).map_err(err)?;
            }
            let mut ir = 0u64;
            for (k, f) in fields.enumerate() {
                let v = parse_number(f).ok_or_else(|| err(format!("bad counter `{f}`")))?;
                if Some(k) == ir_index {
                    ir = v;
                }
            }
            if skip_next_cost {
                skip_next_cost = false;
            } else if in_wanted && ir > 0 {
                let e = out.counts.entry(last[ip]).or_insert(0);
                *e = e.saturating_add(ir);
            }
            continue;
        }
        if skip_next_cost {
            return Err(err("`calls=` line not followed by a cost line".into()));
        }
        if let Some((key, value)) = split_spec(line) {
            match key {
                "ob" => {
                    let name = resolve_name(value, &mut names).map_err(err)?;
                    in_wanted = wanted(&name);
                    out.found |= in_wanted;
                    if !out.objects.contains(&name) {
                        out.objects.push(name);
                    }
                }
                "cob" => {
                    resolve_name(value, &mut names).map_err(err)?;
                }
                "calls" => skip_next_cost = true,
                // File, function and jump lines do not affect instruction counts.
                _ => {}
            }
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            let value = value.trim();
            match key.trim() {
                "positions" => {
                    let names: Vec<&str> = value.split_ascii_whitespace().collect();
                    if names.is_empty() {
                        return Err(err("empty `positions:` header".into()));
                    }
                    instr_pos = names.iter().position(|n| *n == "instr");
                    npos = names.len();
                    last = vec![0; npos];
                }
                "events" => {
                    ir_index = value.split_ascii_whitespace().position(|n| n == "Ir");
                    if ir_index.is_none() {
                        return Err(err("no `Ir` event in `events:` header".into()));
                    }
                    saw_events = true;
                }
                _ => {}
            }
            continue;
        }
        return Err(err(format!("unrecognised line `{}`", truncate(line))));
    }
    if skip_next_cost {
        return Err(ParseError {
            line: text.lines().count(),
            message: "file ends after a `calls=` line".into(),
        });
    }
    if !saw_events {
        return Err(ParseError {
            line: text.lines().count().max(1),
            message: "no `events:` header: not a callgrind output".into(),
        });
    }
    Ok(out)
}

/// The object name callgrind writes for code it cannot attribute to a file.
pub const UNNAMED_OBJECT: &str = "???";

/// Where valgrind (3.19, amd64) maps a position-independent executable: callgrind writes the
/// measured object's costs at link-time addresses, but `???` costs at run-time ones.
pub const VALGRIND_PIE_BASE: u64 = 0x10_8000;

/// Adds the `unnamed` counts (callgrind's `???` object, run-time addresses) that lie, `base`
/// removed, in one of the binary's executable `segments` (link-time `[start, end)`) to the
/// measured object's `counts`; returns the instructions added.
///
/// Why: valgrind 3.19 attaches to an object only the code of its one executable mapping's
/// `.text`-like range. BOLT's output has its rewritten `.text` in a new segment, its split-off
/// `.text.cold` beside it and the functions it left alone in the original segment: callgrind
/// names only the first, the rest comes as `???` at run-time addresses, and a footprint of the
/// named object alone leaves it out (18% of the program's instructions on SQLite's held-out
/// workload, docs/journal/blocks.md). Usual binaries have a few such instructions (start-up code).
pub fn add_unattributed(
    counts: &mut BTreeMap<u64, u64>,
    unnamed: &BTreeMap<u64, u64>,
    segments: &[(u64, u64)],
    base: u64,
) -> u64 {
    let mut added = 0u64;
    for (&a, &n) in unnamed {
        let Some(v) = a.checked_sub(base) else {
            continue;
        };
        if segments.iter().any(|&(lo, hi)| (lo..hi).contains(&v)) {
            let e = counts.entry(v).or_insert(0);
            *e = e.saturating_add(n);
            added = added.saturating_add(n);
        }
    }
    added
}

/// The executable `PT_LOAD` segments of an ELF file as link-time `[start, end)`, and whether
/// it is position-independent (`ET_DYN`). `None` for anything that is not a readable ELF file.
pub fn exec_segments(elf: &[u8]) -> Option<(Vec<(u64, u64)>, bool)> {
    use object::{Object, ObjectSegment};
    let file = object::File::parse(elf).ok()?;
    if file.format() != object::BinaryFormat::Elf {
        return None;
    }
    let out = file
        .segments()
        .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & object::elf::PF_X.0 != 0))
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    Some((out, file.kind() == object::ObjectKind::Dynamic))
}

/// Splits `key=value` body lines; keys are lower-case ASCII letters.
fn split_spec(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once('=')?;
    if !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase()) {
        Some((key, value))
    } else {
        None
    }
}

/// Resolves a possibly compressed name: `(id) name` defines, `(id)` refers, `name` is plain.
fn resolve_name(value: &str, names: &mut HashMap<u64, String>) -> Result<String, String> {
    let value = value.trim();
    let Some(rest) = value.strip_prefix('(') else {
        return Ok(value.to_string());
    };
    let (id, name) = rest
        .split_once(')')
        .ok_or_else(|| format!("unclosed name id in `{}`", truncate(value)))?;
    let id: u64 = id
        .parse()
        .map_err(|_| format!("bad name id `({})`", truncate(id)))?;
    let name = name.trim();
    if name.is_empty() {
        names
            .get(&id)
            .cloned()
            .ok_or_else(|| format!("name id ({id}) used before it is defined"))
    } else {
        names.insert(id, name.to_string());
        Ok(name.to_string())
    }
}

/// One subposition: absolute, `+N`/`-N` relative to `last`, or `*` for `last`.
fn parse_position(f: &str, last: u64) -> Result<u64, String> {
    if f == "*" {
        return Ok(last);
    }
    if let Some(d) = f.strip_prefix('+') {
        let d = parse_number(d).ok_or_else(|| format!("bad position `{f}`"))?;
        return last
            .checked_add(d)
            .ok_or_else(|| format!("position `{f}` overflows"));
    }
    if let Some(d) = f.strip_prefix('-') {
        let d = parse_number(d).ok_or_else(|| format!("bad position `{f}`"))?;
        return last
            .checked_sub(d)
            .ok_or_else(|| format!("position `{f}` goes below zero"));
    }
    parse_number(f).ok_or_else(|| format!("bad position `{f}`"))
}

/// Decimal, or hexadecimal with a `0x` prefix.
fn parse_number(f: &str) -> Option<u64> {
    match f.strip_prefix("0x").or_else(|| f.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => f.parse().ok(),
    }
}

/// At most 60 characters of a line, for error messages.
fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // BOLT's layout: the object's counts lie in the new segment; `???` code in either
    // segment (at the PIE base) is the binary's and is added, `???` code outside the binary
    // (valgrind's own) is not.
    #[test]
    fn unattributed_code_of_the_binary_is_added() {
        let mut counts: BTreeMap<u64, u64> = [(0x40_0000, 5), (0x40_0010, 7)].into();
        let unnamed: BTreeMap<u64, u64> = [
            (VALGRIND_PIE_BASE + 0x8100, 3),
            (VALGRIND_PIE_BASE + 0x8104, 4),
            (VALGRIND_PIE_BASE + 0x43_a440, 9),
            (0x483_8000, 1),
        ]
        .into();
        let segs = [(0x8000, 0xd000), (0x20_0000, 0x62_0000)];
        assert_eq!(
            add_unattributed(&mut counts, &unnamed, &segs, VALGRIND_PIE_BASE),
            16
        );
        let want: BTreeMap<u64, u64> = [
            (0x8100, 3),
            (0x8104, 4),
            (0x40_0000, 5),
            (0x40_0010, 7),
            (0x43_a440, 9),
        ]
        .into();
        assert_eq!(counts, want);
        // A non-PIE binary (base 0): the run-time address is the link-time one.
        let mut fixed: BTreeMap<u64, u64> = BTreeMap::new();
        let unnamed: BTreeMap<u64, u64> = [(0x8100, 2), (0x10_8000 + 0x8100, 1)].into();
        assert_eq!(
            add_unattributed(&mut fixed, &unnamed, &[(0x8000, 0xd000)], 0),
            2
        );
        assert_eq!(fixed, [(0x8100, 2)].into());
    }

    #[test]
    fn exec_segments_of_this_test_binary() {
        // The running test program: rustc links position-independent executables on Linux.
        let elf = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let (segs, pie) = exec_segments(&elf).expect("an ELF file");
        assert!(pie);
        assert!(!segs.is_empty() && segs.iter().all(|&(lo, hi)| lo < hi));
        assert_eq!(exec_segments(&elf[..40]), None);
        assert_eq!(exec_segments(b"not an elf"), None);
    }

    const SAMPLE: &str = "\
# callgrind format
version: 1
positions: instr line
events: Ir
ob=(1) /bin/prog
fl=(1) a.c
fn=(1) main
0x1000 1 2
+4 * 3
cob=(2) /lib/libc.so
cfn=(2) puts
calls=1 0x9000 0
* * 500
+5 2 1
ob=(2)
fn=(3) puts
0x9000 0 500
ob=(1)
fn=(1)
0x1000 1 2
";

    #[test]
    fn relative_positions_and_skipped_call_cost() {
        // 0x1000 runs 2+2 times, 0x1004 3 times, 0x1009 once; the call's inclusive 500 is
        // not the call instruction's own cost, and libc's lines belong to another object.
        let got = instruction_counts(SAMPLE, &|o| o == "/bin/prog").unwrap();
        let want: BTreeMap<u64, u64> = [(0x1000, 4), (0x1004, 3), (0x1009, 1)].into();
        assert_eq!(got.counts, want);
        assert!(got.found);
        assert_eq!(got.objects, vec!["/bin/prog", "/lib/libc.so"]);
    }

    #[test]
    fn cob_defines_ids_for_later_ob() {
        // `ob=(2)` refers to the name first defined by `cob=(2) /lib/libc.so`.
        let got = instruction_counts(SAMPLE, &|o| o == "/lib/libc.so").unwrap();
        assert_eq!(got.counts, [(0x9000, 500)].into());
    }

    #[test]
    fn missing_instr_position_is_an_error() {
        // Without --dump-instr=yes there are no addresses to measure.
        let e =
            instruction_counts("positions: line\nevents: Ir\nob=x\n3 4\n", &|_| true).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.message.contains("--dump-instr=yes"), "{}", e.message);
    }

    #[test]
    fn undefined_name_id_is_an_error() {
        // `ob=(7)` without a definition is corrupt input, reported with its line.
        let e =
            instruction_counts("positions: instr\nevents: Ir\nob=(7)\n", &|_| true).unwrap_err();
        assert_eq!(
            e,
            ParseError {
                line: 3,
                message: "name id (7) used before it is defined".into()
            }
        );
    }

    #[test]
    fn negative_position_below_zero_is_an_error() {
        // A relative position may not wrap around.
        let e = instruction_counts("positions: instr\nevents: Ir\nob=x\n0x4 1\n-5 1\n", &|_| {
            true
        })
        .unwrap_err();
        assert_eq!(e.line, 5);
    }
}
