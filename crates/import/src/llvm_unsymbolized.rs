//! Writes exact callgrind counts as `llvm-profgen`'s *unsymbolized profile*, the input from
//! which LLVM 16 makes a sample profile for clang's `-fprofile-sample-use` (AutoFDO).
//!
//! AutoFDO normally starts from hardware branch records (LBR): every sample holds the last 16
//! to 32 taken branches, and `llvm-profgen` turns consecutive records into two counters over
//! the binary's addresses. A *range* `start-end:n` says that the straight-line code from the
//! instruction at `start` to the instruction at `end` (both included) ran `n` times; a
//! *branch* `src->dst:n` says that the branch at `src` went to `dst` `n` times. The tool then
//! symbolizes them with the binary's line tables: a range gives every instruction in it a body
//! count at its (inline stack, line offset, discriminator), keeping the largest count per
//! source location; a branch whose target starts a function gives the callee head samples and
//! the call site a call-target count (what indirect-call promotion reads). Virtual machines
//! have no LBR, but callgrind with `--dump-instr=yes --collect-jumps=yes` counts exactly what
//! LBR only samples: every instruction's executions, every taken jump and every call by
//! address ([`InstrCounts`]).
//!
//! The conversion writes:
//! - one range per executed instruction, `a-a:count`. Callgrind gives no instruction sizes, so
//!   two executed instructions cannot be proven adjacent (a never-run instruction may lie
//!   between two with equal counts); one-instruction ranges are exact and `llvm-profgen`
//!   accepts them (it splits all ranges into disjoint pieces first anyway). The cost is file
//!   size: one line per executed instruction (about 100,000 lines for SQLite).
//! - one branch per (site, target) pair of a taken jump or a call inside the binary, counts
//!   summed when a pair is both. Returns are not recorded by callgrind, and `llvm-profgen`
//!   does not use them for a profile without calling contexts.
//! - nothing with a zero count (callgrind writes untaken conditional jumps with a zero taken
//!   count): such a line carries nothing and only lengthens the file.
//!
//! The format, as `PerfScriptReader::writeUnsymbolizedProfile` writes it and
//! `UnsymbolizedProfileReader` reads it (LLVM 16, `llvm/tools/llvm-profgen/PerfReader.cpp`;
//! checked against the output of the real `llvm-profgen --skip-symbolization` 16.0.6):
//!
//! ```text
//! 2                  number of range lines (decimal)
//! 150-160:1          start-end:count, addresses in hex without 0x, count decimal
//! 168-17f:1
//! 1                  number of branch lines
//! 160->168:1         src->dst:count
//! ```
//!
//! Addresses are offsets from the *preferred base*, the link-time address of the first
//! executable `PT_LOAD` segment rounded down to a 4 KiB page (`--use-offset`, on by default;
//! `ProfiledBinary` rounds with a fixed 4 KiB page whatever `p_align` says). A profile without
//! calling contexts has no `[context]` header line.
//!
//! Limits: counts are clamped to [`MAX_COUNT`] so a hostile callgrind file cannot push
//! `llvm-profgen`'s sums (count x instruction bytes) past 64 bits; addresses outside the
//! binary's executable segments (PLT stubs are inside; a profile of another build may not be)
//! are counted and left out.

use crate::callgrind::InstrCounts;
use crate::Error;
use sediment_elf::Segment;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Page size `llvm-profgen` 16 rounds the preferred base to (`ProfiledBinary`'s fixed 4 KiB,
/// not the segment's `p_align`).
pub const PROFGEN_PAGE: u64 = 0x1000;

/// Largest count written for one range or branch: 2^48, about a day of one instruction
/// retiring every cycle at 3 GHz. `llvm-profgen` multiplies a range's count by each
/// instruction's size (up to 15 bytes) and sums over the function, so this keeps its totals in
/// 64 bits for any profile of less than 2^12 such maximal counts.
pub const MAX_COUNT: u64 = 1 << 48;

/// The text of an unsymbolized profile and what went into it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// The profile, ready to write to a file.
    pub text: String,
    /// Range lines (executed instructions inside the executable segments).
    pub ranges: usize,
    /// Branch lines (distinct taken jumps and calls).
    pub branches: usize,
    /// Sum of the range counts: instructions executed in the binary's code.
    pub instructions: u64,
    /// Executed instructions, jumps and calls left out because an address lies outside the
    /// executable segments.
    pub outside: usize,
    /// The preferred base the offsets are relative to.
    pub base: u64,
}

/// Writes `counts` (link-time addresses, as [`crate::callgrind::instr_counts`] returns them)
/// as an unsymbolized profile of the binary whose `PT_LOAD` segments are `segments`. `path`
/// names the binary in errors. Fails when the binary has no executable segment or when no
/// executed instruction lies in one (the profile is of another binary).
pub fn write(path: &str, segments: &[Segment], counts: &InstrCounts) -> Result<Written, Error> {
    let err = |message: String| Error::Format {
        path: path.to_string(),
        message,
    };
    let code: Vec<(u64, u64)> = segments
        .iter()
        .filter(|s| s.is_executable())
        .map(|s| (s.vaddr, s.vaddr.saturating_add(s.mem_size)))
        .collect();
    let base = code
        .first()
        .map(|&(start, _)| start & !(PROFGEN_PAGE - 1))
        .ok_or_else(|| err("no executable PT_LOAD segment".into()))?;
    let in_code = |a: u64| code.iter().any(|&(s, e)| a >= s && a < e);

    let mut out = Written {
        base,
        ..Written::default()
    };
    let mut ranges = String::new();
    for &(address, count) in &counts.executed {
        if count == 0 {
            continue;
        }
        if !in_code(address) {
            out.outside += 1;
            continue;
        }
        let count = count.min(MAX_COUNT);
        let offset = address - base;
        // Writing to a String cannot fail.
        let _ = writeln!(ranges, "{offset:x}-{offset:x}:{count}");
        out.ranges += 1;
        out.instructions = out.instructions.saturating_add(count);
    }
    if out.ranges == 0 {
        return Err(err(format!(
            "none of the {} executed instructions of `{}` lies in this binary's code \
             (a profile of another build?)",
            counts.executed.len(),
            counts.object
        )));
    }

    // BTreeMap: branches sorted by (site, target), so equal inputs give identical text.
    let mut branches: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for &(site, target, count) in counts.jumps.iter().chain(&counts.calls) {
        if count == 0 {
            continue;
        }
        if !in_code(site) || !in_code(target) {
            out.outside += 1;
            continue;
        }
        let slot = branches.entry((site - base, target - base)).or_insert(0);
        *slot = slot.saturating_add(count).min(MAX_COUNT);
    }
    out.branches = branches.len();

    let mut text = String::with_capacity(ranges.len() + 32 * branches.len() + 32);
    let _ = writeln!(text, "{}", out.ranges);
    text.push_str(&ranges);
    let _ = writeln!(text, "{}", out.branches);
    for ((site, target), count) in branches {
        let _ = writeln!(text, "{site:x}->{target:x}:{count}");
    }
    out.text = text;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs() -> Vec<Segment> {
        vec![
            Segment {
                vaddr: 0,
                offset: 0,
                file_size: 0x650,
                mem_size: 0x650,
                flags: 4,
            },
            // lld-style: code does not start on a page boundary.
            Segment {
                vaddr: 0x1730,
                offset: 0x730,
                file_size: 0x200,
                mem_size: 0x200,
                flags: 5,
            },
        ]
    }

    // Offsets from the page below the first code segment; zero counts and addresses outside
    // the code are left out; a jump and a call on the same pair are summed; sorted output.
    #[test]
    fn writes_offsets_from_the_code_page() {
        let counts = InstrCounts {
            object: "app".into(),
            executed: vec![(0x100, 9), (0x1730, 5), (0x1734, 0), (0x1740, 7)],
            jumps: vec![
                (0x1740, 0x1730, 4),
                (0x1738, 0x1740, 0),
                (0x1740, 0x9000, 1),
            ],
            calls: vec![(0x1740, 0x1730, 1)],
        };
        let w = write("app", &segs(), &counts).unwrap();
        assert_eq!(w.text, "2\n730-730:5\n740-740:7\n1\n740->730:5\n");
        assert_eq!((w.ranges, w.branches, w.outside, w.base), (2, 1, 2, 0x1000));
        assert_eq!(w.instructions, 12);
    }

    // A profile none of whose instructions is in the binary's code is refused.
    #[test]
    fn refuses_a_profile_of_another_binary() {
        let counts = InstrCounts {
            object: "other".into(),
            executed: vec![(0x9000, 3)],
            ..InstrCounts::default()
        };
        let e = write("app", &segs(), &counts).unwrap_err().to_string();
        assert!(e.starts_with("app: none of the 1 executed"), "{e}");
        let e = write("app", &segs()[..1], &counts).unwrap_err().to_string();
        assert_eq!(e, "app: no executable PT_LOAD segment");
    }

    // Counts beyond MAX_COUNT are clamped, also when summed.
    #[test]
    fn clamps_huge_counts() {
        let counts = InstrCounts {
            object: "app".into(),
            executed: vec![(0x1730, u64::MAX)],
            jumps: vec![(0x1730, 0x1740, u64::MAX)],
            calls: vec![(0x1730, 0x1740, u64::MAX)],
        };
        let w = write("app", &segs(), &counts).unwrap();
        assert_eq!(
            w.text,
            format!("1\n730-730:{MAX_COUNT}\n1\n730->740:{MAX_COUNT}\n")
        );
    }
}
