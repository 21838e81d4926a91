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
}

impl StructReport {
    /// Bytes in holes and tail padding.
    pub fn wasted(&self) -> u64 {
        self.holes.iter().map(|h| h.bytes).sum::<u64>() + self.tail_padding
    }

    /// True when there is anything to report.
    pub fn has_findings(&self) -> bool {
        self.wasted() > 0 || !self.straddling.is_empty() || !self.shared_lines.is_empty()
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
            shared_lines.push(SharedLine { line, sync, others });
        }
    }
    StructReport {
        name: s.name.clone(),
        size: s.size,
        lines,
        holes,
        tail_padding: s.size.saturating_sub(end),
        straddling,
        shared_lines,
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
