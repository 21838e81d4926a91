//! Data layout of structures: holes, tail padding, members that straddle a cache line, and
//! synchronisation members (atomics, locks) that share a cache line with other members.
//!
//! The last is the static signature of *false sharing*: when one thread writes a lock or a
//! counter and another thread reads or writes a neighbouring field on the same 64-byte line,
//! the line bounces between cores although no data is shared. A hardware tool (`perf c2c`)
//! measures it; this machine has no counters, and the layout alone already shows where it can
//! happen, as the Linux kernel's `____cacheline_aligned` annotations and `pahole` reports do.
//! Lines are counted from the structure's start, so the report assumes the structure starts on
//! a line boundary (true for `_Alignas(64)` objects and most heap blocks of 64 bytes or more;
//! otherwise the risk is greater, not smaller).
//!
//! Hardware prefetchers fetch 64-byte lines in 128-byte aligned pairs (the adjacent-line
//! prefetcher), so two synchronisation members on the two lines of one pair can still bounce
//! together: those pairs are reported too ([`PairedLines`]).
//!
//! Given how often each byte of the structure was accessed in a run (DHAT's per-offset counts
//! of heap blocks of the structure's size, `sediment_import::dhat`), [`weigh`] weighs members
//! by use, reports the hot lines and the hot 128-byte pairs, and proposes a hot/cold split:
//! the members that earn the first cache line, packed by accesses per byte until the line is
//! full, as the hand-made splits of hot structures do (the scheduler's `sched_clock` data, the
//! networking stack's `sk_buff` fields). It is a proposal to read, not a transformation:
//! reordering members changes the ABI and is the programmer's call.
//!
//! Holes are found by walking members in offset order and keeping the furthest end seen, so
//! bit-fields sharing a storage unit and overlapping members (anonymous unions) are no holes.

use crate::LINE;
use sediment_elf::types::StructLayout;
use serde::Serialize;

/// Unused bytes between two members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hole {
    /// The member before the hole.
    pub after: String,
    /// Offset of the first unused byte.
    pub offset: u64,
    /// Size of the hole.
    pub bytes: u64,
}

/// A cache line holding a synchronisation member and other members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SharedLine {
    /// Line index from the structure's start.
    pub line: u64,
    /// Atomics and locks on the line.
    pub sync: Vec<String>,
    /// The other members on the line.
    pub others: Vec<String>,
}

/// The two lines of one 128-byte pair, each holding a synchronisation member: the
/// adjacent-line prefetcher moves them together, so writers of either slow down readers of both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PairedLines {
    /// The pair's first line (even) from the structure's start.
    pub line: u64,
    /// Synchronisation members on the first line.
    pub first: Vec<String>,
    /// Synchronisation members on the second line.
    pub second: Vec<String>,
}

/// What [`analyze`] finds in one structure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StructReport {
    /// Tag name.
    pub name: String,
    /// `sizeof`.
    pub size: u64,
    /// Cache lines the structure covers from a line-aligned start.
    pub lines: u64,
    /// Holes in offset order.
    pub holes: Vec<Hole>,
    /// Unused bytes after the last member.
    pub tail_padding: u64,
    /// Members of at most one line's size that cross a line boundary.
    pub straddling: Vec<String>,
    /// Lines where a synchronisation member shares the line.
    pub shared_lines: Vec<SharedLine>,
    /// 128-byte pairs with synchronisation members on both lines.
    pub paired_lines: Vec<PairedLines>,
}

impl StructReport {
    /// Bytes in holes and tail padding.
    pub fn wasted(&self) -> u64 {
        self.holes.iter().map(|h| h.bytes).sum::<u64>() + self.tail_padding
    }

    /// True when there is anything to report.
    pub fn has_findings(&self) -> bool {
        self.wasted() > 0
            || !self.straddling.is_empty()
            || !self.shared_lines.is_empty()
            || !self.paired_lines.is_empty()
    }
}

/// Analyses one structure.
pub fn analyze(s: &StructLayout) -> StructReport {
    let mut holes = Vec::new();
    let mut end = 0u64;
    let mut last = String::new();
    for m in &s.members {
        if m.offset > end && !last.is_empty() {
            holes.push(Hole {
                after: last.clone(),
                offset: end,
                bytes: m.offset - end,
            });
        }
        let m_end = m.offset.saturating_add(m.size);
        if m_end >= end {
            end = m_end;
            last.clone_from(&m.name);
        }
    }
    let straddling = s
        .members
        .iter()
        .filter(|m| {
            m.size > 0 && m.size <= LINE && m.offset / LINE != (m.offset + m.size - 1) / LINE
        })
        .map(|m| m.name.clone())
        .collect();
    let lines = s.size.div_ceil(LINE);
    let mut shared_lines = Vec::new();
    let mut sync_by_line = Vec::new();
    for line in 0..lines.min(1 << 16) {
        let (lo, hi) = (line * LINE, (line + 1) * LINE);
        let on: Vec<_> = s
            .members
            .iter()
            .filter(|m| m.offset < hi && m.offset.saturating_add(m.size.max(1)) > lo)
            .collect();
        let sync: Vec<String> = on
            .iter()
            .filter(|m| m.sync)
            .map(|m| m.name.clone())
            .collect();
        let others: Vec<String> = on
            .iter()
            .filter(|m| !m.sync)
            .map(|m| m.name.clone())
            .collect();
        if !sync.is_empty() && sync.len() + others.len() > 1 {
            shared_lines.push(SharedLine {
                line,
                sync: sync.clone(),
                others,
            });
        }
        sync_by_line.push(sync);
    }
    // A member straddling both lines of a pair is one member, not two that bounce.
    let paired_lines = sync_by_line
        .chunks_exact(2)
        .enumerate()
        .filter(|(_, p)| {
            !p[0].is_empty()
                && !p[1].is_empty()
                && (p[0].len() > 1 || p[1].len() > 1 || p[0] != p[1])
        })
        .map(|(i, p)| PairedLines {
            line: 2 * i as u64,
            first: p[0].clone(),
            second: p[1].clone(),
        })
        .collect();
    StructReport {
        name: s.name.clone(),
        size: s.size,
        lines,
        holes,
        tail_padding: s.size.saturating_sub(end),
        straddling,
        shared_lines,
        paired_lines,
    }
}

/// A line holding at least this share of a structure's accesses is hot; a 128-byte pair whose
/// two lines are both hot is reported. One tenth: below it a line's misses hardly matter to
/// the structure's users.
pub const HOT_LINE_SHARE: f64 = 0.10;

/// A split is proposed only when it raises the first line's share of accesses by at least this
/// much; smaller gains are within what one workload to the next changes.
pub const MIN_SPLIT_GAIN: f64 = 0.05;

/// One member and how often its bytes were accessed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberUse {
    /// Member name.
    pub name: String,
    /// Offset in bytes.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// Accesses of its bytes, summed (an 8-byte load counts 8).
    pub accesses: u64,
}

/// What [`weigh`] finds: members weighed by use and a proposed hot/cold split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Weighed {
    /// Byte accesses in all (members and padding).
    pub accesses: u64,
    /// Members in offset order.
    pub members: Vec<MemberUse>,
    /// Accesses per cache line from the structure's start.
    pub per_line: Vec<u64>,
    /// Pairs (their first, even line) whose two lines are both hot ([`HOT_LINE_SHARE`]).
    pub hot_pairs: Vec<u64>,
    /// Share of accesses that fall in the first line as laid out now.
    pub first_line_share: f64,
    /// The members proposed for the first line, hottest per byte first (empty when the split
    /// would not gain [`MIN_SPLIT_GAIN`]).
    pub hot: Vec<String>,
    /// Share of accesses the proposed first line would hold.
    pub proposed_share: f64,
}

/// Sums per-offset access counts of heap blocks of exactly `size` bytes, taken to hold one
/// `size`-byte structure each. `blocks` holds one (block size, per-offset counts) entry per
/// allocation point; returns the summed counts and the number of entries used.
///
/// Blocks of a multiple of the size (arrays) are not folded onto the structure: every block
/// is a multiple of a small structure's size, and folding made 16-byte list nodes out of
/// 128-byte blocks of something else.
pub fn fold(size: u64, blocks: &[(u64, &[u64])]) -> Option<(Vec<u64>, usize)> {
    let mut sum = vec![0u64; size as usize];
    let mut used = 0;
    for &(block, counts) in blocks {
        if block != size || size == 0 || counts.len() as u64 != block {
            continue;
        }
        for (slot, &c) in sum.iter_mut().zip(counts) {
            *slot = slot.saturating_add(c);
        }
        used += 1;
    }
    (used > 0).then_some((sum, used))
}

/// Weighs the members of `s` by `per_offset` (accesses per byte offset, [`fold`]) and proposes
/// the first line's members.
///
/// The split packs members by accesses per byte, highest first (ties: lower offset first),
/// each at its natural alignment (its size rounded down to a power of two, at most 8), skipping
/// those that no longer fit in the line; members never accessed stay cold.
pub fn weigh(s: &StructLayout, per_offset: &[u64]) -> Weighed {
    let at = |lo: u64, hi: u64| -> u64 {
        per_offset
            .iter()
            .take(hi.min(per_offset.len() as u64) as usize)
            .skip(lo as usize)
            .fold(0u64, |a, &c| a.saturating_add(c))
    };
    let total = at(0, per_offset.len() as u64);
    let members: Vec<MemberUse> = s
        .members
        .iter()
        .map(|m| MemberUse {
            name: m.name.clone(),
            offset: m.offset,
            size: m.size,
            accesses: at(m.offset, m.offset.saturating_add(m.size)),
        })
        .collect();
    let lines = s.size.div_ceil(LINE).min(1 << 16);
    let per_line: Vec<u64> = (0..lines).map(|l| at(l * LINE, (l + 1) * LINE)).collect();
    let share = |n: u64| {
        if total == 0 {
            0.0
        } else {
            n as f64 / total as f64
        }
    };
    let hot_pairs = per_line
        .chunks_exact(2)
        .enumerate()
        .filter(|(_, p)| share(p[0]) >= HOT_LINE_SHARE && share(p[1]) >= HOT_LINE_SHARE)
        .map(|(i, _)| 2 * i as u64)
        .collect();
    let first_line_share = share(per_line.first().copied().unwrap_or(0));

    let mut by_density: Vec<&MemberUse> = members
        .iter()
        .filter(|m| m.accesses > 0 && m.size > 0 && m.size <= LINE)
        .collect();
    by_density.sort_by(|a, b| {
        // accesses/size compared without division: a.acc * b.size vs b.acc * a.size.
        let l = u128::from(a.accesses) * u128::from(b.size);
        let r = u128::from(b.accesses) * u128::from(a.size);
        r.cmp(&l).then(a.offset.cmp(&b.offset))
    });
    let (mut end, mut hot, mut held) = (0u64, Vec::new(), 0u64);
    for m in by_density {
        let align = if m.size >= 8 { 8 } else { 1 << m.size.ilog2() };
        let start = end.div_ceil(align) * align;
        if start + m.size <= LINE {
            end = start + m.size;
            hot.push(m.name.clone());
            held += m.accesses;
        }
    }
    let mut proposed_share = share(held);
    if proposed_share < first_line_share + MIN_SPLIT_GAIN {
        hot.clear();
        proposed_share = first_line_share;
    }
    Weighed {
        accesses: total,
        members,
        per_line,
        hot_pairs,
        first_line_share,
        hot,
        proposed_share,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sediment_elf::types::Member;

    fn m(name: &str, offset: u64, size: u64, sync: bool) -> Member {
        Member {
            offset,
            name: name.into(),
            size,
            type_name: "t".into(),
            sync,
        }
    }

    // char a; int b; char c;  -> a 3-byte hole after a and 3 bytes of tail padding.
    #[test]
    fn holes_and_tail_padding() {
        let s = StructLayout {
            name: "holey".into(),
            size: 12,
            members: vec![
                m("a", 0, 1, false),
                m("b", 4, 4, false),
                m("c", 8, 1, false),
            ],
        };
        let r = analyze(&s);
        assert_eq!(
            r.holes,
            vec![Hole {
                after: "a".into(),
                offset: 1,
                bytes: 3
            }]
        );
        assert_eq!((r.tail_padding, r.wasted(), r.lines), (3, 6, 1));
        assert!(r.shared_lines.is_empty() && r.straddling.is_empty());
    }

    // An atomic counter next to a plain field shares line 0; 64-byte alignment cures it.
    #[test]
    fn atomic_sharing_a_line_is_reported_and_alignment_cures_it() {
        let shared = StructLayout {
            name: "stats".into(),
            size: 16,
            members: vec![m("hits", 0, 8, true), m("misses", 8, 8, false)],
        };
        let r = analyze(&shared);
        assert_eq!(r.shared_lines.len(), 1);
        assert_eq!(r.shared_lines[0].sync, vec!["hits".to_string()]);
        assert_eq!(r.shared_lines[0].others, vec!["misses".to_string()]);
        let aligned = StructLayout {
            name: "stats".into(),
            size: 128,
            members: vec![m("hits", 0, 8, true), m("misses", 64, 8, false)],
        };
        assert!(analyze(&aligned).shared_lines.is_empty());
    }

    // Two locks on lines 0 and 1 of one pair bounce together; on lines 1 and 2 they do not.
    #[test]
    fn sync_members_on_both_lines_of_a_pair_are_reported() {
        let paired = StructLayout {
            name: "q".into(),
            size: 256,
            members: vec![m("head_lock", 0, 8, true), m("tail_lock", 64, 8, true)],
        };
        let r = analyze(&paired);
        assert_eq!(
            r.paired_lines,
            vec![PairedLines {
                line: 0,
                first: vec!["head_lock".into()],
                second: vec!["tail_lock".into()],
            }]
        );
        assert!(r.has_findings());
        let apart = StructLayout {
            name: "q".into(),
            size: 256,
            members: vec![m("head_lock", 64, 8, true), m("tail_lock", 128, 8, true)],
        };
        assert!(analyze(&apart).paired_lines.is_empty());
    }

    // hits (line 0) and last (line 5) are hot, name (line 0) is cold: the split moves `last`
    // into the first line in place of `name`, and both members' counts are their bytes' sums.
    #[test]
    fn weigh_proposes_the_hot_members_for_the_first_line() {
        let s = StructLayout {
            name: "conn".into(),
            size: 328,
            members: vec![
                m("hits", 0, 8, false),
                m("name", 8, 100, false),
                m("misses", 108, 8, false),
                m("pad", 116, 200, false),
                m("last", 320, 8, false),
            ],
        };
        let mut counts = vec![0u64; 328];
        counts[0..8].fill(100);
        counts[320..328].fill(50);
        counts[108..116].fill(10);
        counts[8] = 1;
        let w = weigh(&s, &counts);
        assert_eq!(w.accesses, 800 + 400 + 80 + 1);
        let acc: Vec<u64> = w.members.iter().map(|m| m.accesses).collect();
        assert_eq!(acc, vec![800, 1, 80, 0, 400]);
        assert_eq!(w.hot, vec!["hits", "last", "misses"]);
        assert!((w.first_line_share - 801.0 / 1281.0).abs() < 1e-9);
        assert!((w.proposed_share - 1280.0 / 1281.0).abs() < 1e-9);
        assert_eq!(w.per_line.len(), 6);
        assert!(
            w.hot_pairs.is_empty(),
            "lines 0 and 5 are in different pairs"
        );
        // Already packed: no split proposed.
        let mut packed = vec![0u64; 328];
        packed[0..8].fill(100);
        let w = weigh(&s, &packed);
        assert!(w.hot.is_empty());
        assert_eq!(w.proposed_share, w.first_line_share);
    }

    #[test]
    fn fold_sums_blocks_of_the_size_and_skips_others() {
        let one = [1u64, 2, 3, 4];
        let two = [5u64, 5, 5, 5];
        let array = [1u64, 1, 1, 1, 5, 5, 5, 5];
        let other = [9u64; 6];
        let (sum, used) = fold(4, &[(4, &one), (8, &array), (4, &two), (6, &other)]).unwrap();
        assert_eq!((sum, used), (vec![6, 7, 8, 9], 2));
        assert!(fold(4, &[(6, &other)]).is_none());
        assert!(fold(0, &[(4, &one)]).is_none());
    }

    // A long at offset 60 crosses into line 1; overlapping members (a union) are no hole.
    #[test]
    fn straddling_and_overlaps() {
        let s = StructLayout {
            name: "p".into(),
            size: 68,
            members: vec![
                m("pad", 0, 60, false),
                m("u1", 56, 4, false),
                m("x", 60, 8, false),
            ],
        };
        let r = analyze(&s);
        assert_eq!(r.straddling, vec!["x".to_string()]);
        assert!(r.holes.is_empty());
        assert_eq!(r.tail_padding, 0);
    }
}
