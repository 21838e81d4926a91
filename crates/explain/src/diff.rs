//! What moved between two builds of a program, and why.
//!
//! A benchmark that swings after an unrelated one-line change has usually not become faster or
//! slower code: the change grew one function by a few bytes, and every function linked after it
//! moved by the same amount, crossing cache-line and page boundaries differently. This module
//! answers "what moved, by how much, and because of what" from the function symbols of two
//! builds, with no I/O of its own (the caller reads the ELF files and the optional profile):
//!
//! 1. **Pairing.** Functions are matched by name (the caller's display key, which includes the
//!    source file for local symbols). Several functions of one name are paired in address order.
//! 2. **Shift segments.** Walking the pairs in the old build's address order, consecutive
//!    functions that moved by the same number of bytes (and kept their relative order) form one
//!    segment: they moved as a block. At each segment boundary the change of shift is split
//!    into its parts, which add up exactly:
//!    `Δshift = Δsize(previous function) + (bytes arriving between the two) - (bytes leaving
//!    from between them) + Δpadding`. A boundary where the next function now lies *before* the
//!    previous one is a reordering, not a shift.
//! 3. **Reordering.** The number of functions that changed relative order is the pair count
//!    minus the longest increasing subsequence of new addresses in old order (the fewest
//!    functions that must move for one order to become the other).
//! 4. **Hot footprint.** With weights (a profile's self weight per function), the distinct 64-byte
//!    lines and 4 KiB pages covered by the executed functions, and by the hottest functions
//!    holding 99% of the weight, in each build; and the hot functions whose span in cache lines
//!    changed (a function of 100 bytes spans two lines at offset 0 and three at offset 60).
//!    This is what ties a layout change to the I-cache and iTLB misses that moved.
//!
//! Non-goals: it reads no trace (`sediment sim` measures misses), and it does not look inside
//! functions (a changed body of equal size is invisible here, as it is to the cache).
//! Deterministic: every list is sorted with its tie-break stated at the field.

use serde::Serialize;
use std::collections::HashMap;

/// Cache-line size the footprint and span figures use (x86-64 and most arm64 cores).
pub const LINE: u64 = 64;
/// Page size the footprint figures use (the base page of x86-64 and most Linux arm64 builds).
pub const PAGE: u64 = 4096;

/// One function of a linked build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Display key: the symbol name, plus the source file for local symbols.
    pub name: String,
    /// Link-time start address.
    pub address: u64,
    /// Size in bytes (0 when the symbol did not say; treated as 1 byte for footprints).
    pub size: u64,
    /// Profile weight (self samples or instructions); 0 when unknown or never executed.
    pub weight: u64,
}

impl Placed {
    /// A binary's functions with their display keys and the weights of `weights` (0 for a
    /// function it does not name).
    pub fn of_binary(
        b: &sediment_elf::Binary,
        weights: &std::collections::HashMap<sediment_profile::FuncKey, u64>,
    ) -> Vec<Placed> {
        b.functions
            .iter()
            .map(|s| Placed {
                name: s.key.to_string(),
                address: s.address,
                size: s.size,
                weight: weights.get(&s.key).copied().unwrap_or(0),
            })
            .collect()
    }
}

/// Why the shift changed at a segment boundary, between the previous function of the old
/// order (`after`) and the first function of the segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// The function just before the boundary in the old build's address order.
    pub after: String,
    /// The first function lies before `after` in the new build: the order changed here.
    pub reordered: bool,
    /// Change of `after`'s size in bytes.
    pub size_change: i64,
    /// Functions between the two in the new build, and their bytes.
    pub arrived: usize,
    /// Of `arrived`, how many exist only in the new build.
    pub arrived_new: usize,
    /// Bytes of the functions between the two in the new build.
    pub arrived_bytes: u64,
    /// Functions between the two in the old build, and their bytes.
    pub left: usize,
    /// Of `left`, how many exist only in the old build.
    pub left_removed: usize,
    /// Bytes of the functions between the two in the old build.
    pub left_bytes: u64,
    /// Change of the padding and unnamed bytes between the two (alignment, other sections).
    pub padding_change: i64,
}

/// Consecutive functions (old address order) that moved by the same number of bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// First function of the segment.
    pub first: String,
    /// Old address of the first function.
    pub old_address: u64,
    /// Number of functions in the segment.
    pub functions: usize,
    /// New address minus old address, in bytes.
    pub shift: i64,
    /// Summed weight of the segment's functions.
    pub weight: u64,
    /// Why the shift changed here; `None` for the first segment.
    pub cause: Option<Cause>,
}

/// A function whose size changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeChange {
    /// The function.
    pub name: String,
    /// Size in the old build.
    pub old_size: u64,
    /// Size in the new build.
    pub new_size: u64,
    /// Its weight.
    pub weight: u64,
}

/// A hot function whose span in cache lines changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpanChange {
    /// The function.
    pub name: String,
    /// Its weight.
    pub weight: u64,
    /// Start offset inside its first cache line, old build.
    pub old_offset: u64,
    /// Start offset inside its first cache line, new build.
    pub new_offset: u64,
    /// Cache lines covered, old build.
    pub old_lines: u64,
    /// Cache lines covered, new build.
    pub new_lines: u64,
}

/// Distinct lines and pages a set of functions covers ("functions covered": every byte of each
/// function, hot or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Footprint {
    /// Functions in the set.
    pub functions: usize,
    /// Their summed size in bytes.
    pub bytes: u64,
    /// Distinct [`LINE`]-byte lines they cover.
    pub lines: u64,
    /// Distinct [`PAGE`]-byte pages they cover.
    pub pages: u64,
}

/// Hot-code footprint of both builds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HotFootprint {
    /// Every function with weight > 0, old build.
    pub old_executed: Footprint,
    /// Every function with weight > 0, new build.
    pub new_executed: Footprint,
    /// The hottest functions holding 99% of the weight, old build.
    pub old_hot99: Footprint,
    /// The hottest functions holding 99% of the weight, new build.
    pub new_hot99: Footprint,
}

/// Everything [`diff`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutDiff {
    /// Functions present in both builds.
    pub matched: usize,
    /// Functions only in the old build, by address.
    pub only_old: Vec<String>,
    /// Functions only in the new build, by address.
    pub only_new: Vec<String>,
    /// Matched functions that changed relative order.
    pub reordered: usize,
    /// Shift segments in old address order.
    pub segments: Vec<Segment>,
    /// Size changes, largest absolute change first, then by name.
    pub size_changes: Vec<SizeChange>,
    /// Hot functions whose line span changed, heaviest first, then by name.
    pub span_changes: Vec<SpanChange>,
    /// Present when any function has a weight.
    pub hot: Option<HotFootprint>,
}

/// Compares two builds' function layouts.
pub fn diff(old: &[Placed], new: &[Placed]) -> LayoutDiff {
    let pairs = pair(old, new);
    let old_side = Side::new(old, pairs.iter().map(|&(o, _)| o));
    let new_side = Side::new(new, pairs.iter().map(|&(_, n)| n));

    let mut segments: Vec<Segment> = Vec::new();
    for (k, &(o, n)) in pairs.iter().enumerate() {
        let shift = signed_diff(new[n].address, old[o].address);
        let weight = old[o].weight.max(new[n].weight);
        let prev = k.checked_sub(1).map(|j| pairs[j]);
        let continues = prev.is_some_and(|(po, pn)| {
            new[n].address >= new[pn].address
                && signed_diff(new[pn].address, old[po].address) == shift
        });
        match segments.last_mut() {
            Some(seg) if continues => {
                seg.functions += 1;
                seg.weight = seg.weight.saturating_add(weight);
            }
            _ => segments.push(Segment {
                first: old[o].name.clone(),
                old_address: old[o].address,
                functions: 1,
                shift,
                weight,
                cause: prev.map(|p| cause(old, new, &old_side, &new_side, p, (o, n))),
            }),
        }
    }

    let mut size_changes: Vec<SizeChange> = pairs
        .iter()
        .filter(|&&(o, n)| old[o].size != new[n].size)
        .map(|&(o, n)| SizeChange {
            name: old[o].name.clone(),
            old_size: old[o].size,
            new_size: new[n].size,
            weight: old[o].weight.max(new[n].weight),
        })
        .collect();
    size_changes.sort_by(|a, b| {
        let da = a.old_size.abs_diff(a.new_size);
        let db = b.old_size.abs_diff(b.new_size);
        db.cmp(&da).then_with(|| a.name.cmp(&b.name))
    });

    let mut span_changes: Vec<SpanChange> = pairs
        .iter()
        .filter_map(|&(o, n)| {
            let weight = old[o].weight.max(new[n].weight);
            let (ol, nl) = (lines_spanned(&old[o]), lines_spanned(&new[n]));
            (weight > 0 && ol != nl).then(|| SpanChange {
                name: old[o].name.clone(),
                weight,
                old_offset: old[o].address % LINE,
                new_offset: new[n].address % LINE,
                old_lines: ol,
                new_lines: nl,
            })
        })
        .collect();
    span_changes.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));

    let weighted = old.iter().chain(new).any(|f| f.weight > 0);
    let hot = weighted.then(|| HotFootprint {
        old_executed: footprint(old.iter().filter(|f| f.weight > 0)),
        new_executed: footprint(new.iter().filter(|f| f.weight > 0)),
        old_hot99: footprint(hottest(old, 990)),
        new_hot99: footprint(hottest(new, 990)),
    });

    LayoutDiff {
        matched: pairs.len(),
        only_old: unpaired_names(old, &old_side.paired),
        only_new: unpaired_names(new, &new_side.paired),
        reordered: pairs.len()
            - sediment_elf::longest_in_address_order(pairs.iter().map(|&(_, n)| new[n].address)),
        segments,
        size_changes,
        span_changes,
        hot,
    }
}

/// Pairs functions of the same name, in address order within each name; the result is
/// sorted by old address (then by new address, for aliases at one address).
pub fn pair(old: &[Placed], new: &[Placed]) -> Vec<(usize, usize)> {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for i in by_address(new) {
        by_name.entry(new[i].name.as_str()).or_default().push(i);
    }
    let mut taken: HashMap<&str, usize> = HashMap::new();
    let mut pairs = Vec::new();
    for o in by_address(old) {
        let name = old[o].name.as_str();
        let Some(candidates) = by_name.get(name) else {
            continue;
        };
        let next = taken.entry(name).or_insert(0);
        if let Some(&n) = candidates.get(*next) {
            pairs.push((o, n));
            *next += 1;
        }
    }
    pairs
}

/// Indices sorted by (address, name, index).
fn by_address(fs: &[Placed]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..fs.len()).collect();
    idx.sort_by(|&a, &b| (fs[a].address, &fs[a].name, a).cmp(&(fs[b].address, &fs[b].name, b)));
    idx
}

/// `a - b` as a signed number, saturating at the `i64` range.
fn signed_diff(a: u64, b: u64) -> i64 {
    let d = i128::from(a) - i128::from(b);
    d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// One build's functions in address order with prefix sums, to count and weigh the functions
/// strictly between two addresses in O(log n).
struct Side {
    /// Addresses in ascending order.
    addresses: Vec<u64>,
    /// `count_new[k]`: unpaired functions among the first `k` in address order.
    unpaired_prefix: Vec<usize>,
    /// `bytes_prefix[k]`: bytes of the first `k` functions in address order.
    bytes_prefix: Vec<u64>,
    /// Paired flag per input index.
    paired: Vec<bool>,
}

impl Side {
    fn new(fs: &[Placed], paired_idx: impl Iterator<Item = usize>) -> Side {
        let mut paired = vec![false; fs.len()];
        for i in paired_idx {
            paired[i] = true;
        }
        let order = by_address(fs);
        let mut unpaired_prefix = vec![0];
        let mut bytes_prefix = vec![0u64];
        for &i in &order {
            unpaired_prefix.push(unpaired_prefix.last().unwrap_or(&0) + usize::from(!paired[i]));
            bytes_prefix.push(bytes_prefix.last().unwrap_or(&0).saturating_add(fs[i].size));
        }
        Side {
            addresses: order.iter().map(|&i| fs[i].address).collect(),
            unpaired_prefix,
            bytes_prefix,
            paired,
        }
    }

    /// (functions, of which unpaired, bytes) with an address in `(lo, hi)`.
    fn between(&self, lo: u64, hi: u64) -> (usize, usize, u64) {
        if hi <= lo {
            return (0, 0, 0);
        }
        let a = self.addresses.partition_point(|&x| x <= lo);
        let b = self.addresses.partition_point(|&x| x < hi).max(a);
        (
            b - a,
            self.unpaired_prefix[b] - self.unpaired_prefix[a],
            self.bytes_prefix[b] - self.bytes_prefix[a],
        )
    }
}

/// Splits the change of shift between pair `p` and the next pair `q` into its parts.
fn cause(
    old: &[Placed],
    new: &[Placed],
    old_side: &Side,
    new_side: &Side,
    (po, pn): (usize, usize),
    (qo, qn): (usize, usize),
) -> Cause {
    let (left, left_removed, left_bytes) = old_side.between(old[po].address, old[qo].address);
    let reordered = new[qn].address < new[pn].address;
    let (arrived, arrived_new, arrived_bytes) = if reordered {
        (0, 0, 0)
    } else {
        new_side.between(new[pn].address, new[qn].address)
    };
    let size_change = signed_diff(new[pn].size, old[po].size);
    let shift_change = signed_diff(new[qn].address, old[qo].address)
        .saturating_sub(signed_diff(new[pn].address, old[po].address));
    let padding_change = shift_change
        .saturating_sub(size_change)
        .saturating_sub(signed_diff(arrived_bytes, left_bytes));
    Cause {
        after: old[po].name.clone(),
        reordered,
        size_change,
        arrived,
        arrived_new,
        arrived_bytes,
        left,
        left_removed,
        left_bytes,
        padding_change,
    }
}

/// Names of the functions not paired, in address order.
fn unpaired_names(fs: &[Placed], paired: &[bool]) -> Vec<String> {
    by_address(fs)
        .into_iter()
        .filter(|&i| !paired[i])
        .map(|i| fs[i].name.clone())
        .collect()
}

/// Cache lines a function covers (a size of 0 counts as one byte).
pub fn lines_spanned(f: &Placed) -> u64 {
    let last = f.address.saturating_add(f.size.max(1) - 1);
    last / LINE - f.address / LINE + 1
}

/// The hottest functions (weight descending, then address, then name) whose cumulative
/// weight first reaches `per_mille`/1000 of the total weight.
fn hottest(fs: &[Placed], per_mille: u64) -> impl Iterator<Item = &Placed> {
    let mut idx: Vec<usize> = (0..fs.len()).filter(|&i| fs[i].weight > 0).collect();
    idx.sort_by(|&a, &b| {
        (std::cmp::Reverse(fs[a].weight), fs[a].address, &fs[a].name).cmp(&(
            std::cmp::Reverse(fs[b].weight),
            fs[b].address,
            &fs[b].name,
        ))
    });
    let total: u128 = idx.iter().map(|&i| u128::from(fs[i].weight)).sum();
    let mut acc: u128 = 0;
    let mut keep = 0;
    for &i in &idx {
        if acc * 1000 >= total * u128::from(per_mille) {
            break;
        }
        acc += u128::from(fs[i].weight);
        keep += 1;
    }
    idx.truncate(keep);
    idx.into_iter().map(move |i| &fs[i])
}

/// Distinct lines and pages covered by `fs` (each function's whole extent, a size of 0 as one
/// byte): the "functions covered" footprint, counted by the simulator's footprint module.
pub fn footprint<'a>(fs: impl Iterator<Item = &'a Placed>) -> Footprint {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut fp = Footprint::default();
    for f in fs {
        fp.functions += 1;
        fp.bytes = fp.bytes.saturating_add(f.size);
        ranges.push((f.address, f.address.saturating_add(f.size.max(1) - 1)));
    }
    fp.lines = distinct_blocks(&ranges, LINE);
    fp.pages = distinct_blocks(&ranges, PAGE);
    fp
}

/// Distinct `block`-byte blocks touched by inclusive byte ranges: the blocks of non-zero weight
/// of [`sediment_sim::ExecProfile`] with every byte weighing 1 (ranges overlapping the last
/// byte of the address space end one byte early: the profile's ranges are half-open).
fn distinct_blocks(ranges: &[(u64, u64)], block: u64) -> u64 {
    let records: Vec<sediment_sim::ExecRange> = ranges
        .iter()
        .map(|&(a, b)| sediment_sim::ExecRange {
            start: a,
            len: (b - a).saturating_add(1).min(u64::MAX - a),
            count: 1,
        })
        .collect();
    // Counts of 1 over disjoint-or-overlapping ranges below 2^64 bytes cannot overflow the
    // 128-bit weight, and LINE and PAGE are powers of two.
    sediment_sim::ExecProfile::new(&records)
        .and_then(|p| p.touched(block))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn f(name: &str, address: u64, size: u64, weight: u64) -> Placed {
        Placed {
            name: name.into(),
            address,
            size,
            weight,
        }
    }

    // The seed's scenario: one function grows by 16 bytes and everything after it moves.
    #[test]
    fn one_grown_function_shifts_everything_after_it() {
        let old = [
            f("a", 0x1000, 32, 0),
            f("b", 0x1020, 48, 0),
            f("c", 0x1050, 16, 0),
        ];
        let new = [
            f("a", 0x1000, 48, 0),
            f("b", 0x1030, 48, 0),
            f("c", 0x1060, 16, 0),
        ];
        let d = diff(&old, &new);
        assert_eq!(d.matched, 3);
        assert_eq!(d.reordered, 0);
        assert_eq!(d.segments.len(), 2);
        assert_eq!(
            (d.segments[0].first.as_str(), d.segments[0].shift),
            ("a", 0)
        );
        let seg = &d.segments[1];
        assert_eq!((seg.first.as_str(), seg.functions, seg.shift), ("b", 2, 16));
        let c = seg.cause.as_ref().unwrap();
        assert_eq!(
            (c.after.as_str(), c.size_change, c.padding_change),
            ("a", 16, 0)
        );
        assert_eq!(d.size_changes.len(), 1);
        assert_eq!(d.size_changes[0].name, "a");
    }

    // An inserted function and an alignment change are told apart from size changes.
    #[test]
    fn insertion_and_padding_are_separate_parts() {
        let old = [f("a", 0x1000, 20, 0), f("b", 0x1020, 16, 0)];
        // "new" (24 bytes) arrives after a; b is then aligned from 0x1038 up to 0x1040.
        let new = [
            f("a", 0x1000, 20, 0),
            f("new", 0x1014, 24, 0),
            f("b", 0x1040, 16, 0),
        ];
        let d = diff(&old, &new);
        assert_eq!(d.only_new, vec!["new".to_string()]);
        let c = d.segments[1].cause.as_ref().unwrap();
        assert_eq!((c.arrived, c.arrived_new, c.arrived_bytes), (1, 1, 24));
        assert_eq!(c.size_change, 0);
        assert_eq!(c.padding_change, 0x20 - 24);
        assert_eq!(d.segments[1].shift, 0x20);
    }

    // Swapping two functions is a reordering of one function, not a shift.
    #[test]
    fn swap_counts_one_reordered_function() {
        let old = [f("a", 0, 16, 0), f("b", 16, 16, 0), f("c", 32, 16, 0)];
        let new = [f("b", 0, 16, 0), f("a", 16, 16, 0), f("c", 32, 16, 0)];
        let d = diff(&old, &new);
        assert_eq!(d.reordered, 1);
        assert!(d.segments[1].cause.as_ref().unwrap().reordered);
    }

    // A 100-byte hot function spans two lines at offset 0 and three at offset 60.
    #[test]
    fn span_change_of_a_hot_function_is_reported() {
        let old = [f("hot", 0x1000, 100, 7), f("cold", 0x2000, 100, 0)];
        let new = [f("hot", 0x103c, 100, 7), f("cold", 0x2040, 100, 0)];
        let d = diff(&old, &new);
        assert_eq!(d.span_changes.len(), 1);
        let s = &d.span_changes[0];
        assert_eq!((s.old_lines, s.new_lines, s.new_offset), (2, 3, 60));
        let hot = d.hot.unwrap();
        assert_eq!((hot.old_executed.lines, hot.new_executed.lines), (2, 3));
        assert_eq!((hot.old_executed.pages, hot.new_executed.pages), (1, 1));
    }

    // 99% of the weight: the tiny-weight function is left out.
    #[test]
    fn hot99_leaves_out_the_last_percent() {
        let fs = [f("a", 0, 64, 990), f("b", 4096, 64, 10)];
        let fp = footprint(hottest(&fs, 990));
        assert_eq!((fp.functions, fp.lines, fp.pages), (1, 1, 1));
        let all = footprint(fs.iter());
        assert_eq!((all.functions, all.lines, all.pages), (2, 2, 2));
    }

    // Same-named statics pair in address order.
    #[test]
    fn same_names_pair_in_address_order() {
        let old = [f("s", 0x20, 8, 0), f("s", 0x10, 8, 0)];
        let new = [f("s", 0x110, 8, 0), f("s", 0x120, 8, 0)];
        assert_eq!(pair(&old, &new), vec![(1, 0), (0, 1)]);
    }

    #[test]
    fn distinct_blocks_merges_overlaps() {
        assert_eq!(distinct_blocks(&[(0, 63), (10, 70), (200, 200)], 64), 3);
        assert_eq!(distinct_blocks(&[], 64), 0);
    }

    fn layout() -> impl Strategy<Value = Vec<Placed>> {
        prop::collection::vec((0u8..12, 0u64..10_000, 0u64..300, 0u64..5), 0..40).prop_map(|v| {
            v.into_iter()
                .map(|(n, a, s, w)| f(&format!("f{n}"), a, s, w))
                .collect()
        })
    }

    proptest! {
        // The parts of every boundary add up to the change of shift, and each matched
        // function is in exactly one segment.
        #[test]
        fn causes_add_up(old in layout(), new in layout()) {
            let d = diff(&old, &new);
            prop_assert_eq!(d.segments.iter().map(|s| s.functions).sum::<usize>(), d.matched);
            prop_assert_eq!(d.matched + d.only_old.len(), old.len());
            prop_assert_eq!(d.matched + d.only_new.len(), new.len());
            for w in d.segments.windows(2) {
                let c = w[1].cause.as_ref().unwrap();
                if !c.reordered {
                    let parts = c.size_change + c.arrived_bytes as i64 - c.left_bytes as i64
                        + c.padding_change;
                    prop_assert_eq!(parts, w[1].shift - w[0].shift);
                }
            }
            prop_assert!(d.reordered <= d.matched);
            prop_assert_eq!(diff(&old, &new), d);
        }

        // A build compared with itself has one segment (or none) and no changes.
        #[test]
        fn identity_is_quiet(old in layout()) {
            let d = diff(&old, &old);
            prop_assert!(d.segments.len() <= 1);
            prop_assert_eq!(d.reordered, 0);
            prop_assert!(d.size_changes.is_empty() && d.span_changes.is_empty());
        }
    }
}
