//! Footprint metrics: how much instruction memory the executed code occupies under a layout,
//! and the least it could occupy under any layout.
//!
//! Input is a list of [`ExecRange`]s: bytes `[start, start + len)` executed `count` times each
//! (a basic block and its execution count, or one instruction and its count). Ranges may
//! overlap; counts of overlapping ranges add up per byte. The *weight* of a byte is its
//! execution count, the weight of a block (a cache line or a page) the sum over its bytes, and
//! the total weight `W` the sum over all bytes ("executed bytes").
//!
//! For a block size `B` we report, as [`Footprint`]:
//! - `touched`: blocks with non-zero weight;
//! - `p99` / `p999`: the smallest `k` such that the `k` heaviest blocks together hold at least
//!   99% (99.9%) of `W`, i.e. `sum >= ceil(W * num / den)` in exact integer arithmetic
//!   ([`Share`]). Blocks are sorted by weight descending; how ties between equal weights are
//!   broken cannot change `k`, because `k` depends only on the sorted sequence of weights;
//! - `bound_touched`, `bound_p99`, `bound_p999`: the same numbers for the densest possible
//!   layout, where every executed byte is packed from a block boundary in descending order of
//!   its count. Any layout's `k` heaviest blocks hold at most `k * B` bytes, whose weight is at
//!   most that of the `k * B` heaviest bytes, so these are true lower bounds: no layout of the
//!   same code does better. (They may not be reachable: functions and instructions cannot be
//!   split byte by byte.) `bound_p99 = ceil(b / B)` where `b` is the smallest number of bytes,
//!   taken hottest first, whose weight reaches the target.
//!
//! This is Sediment's one footprint definition; every "pages (lines) for 99%" figure is
//! counted by [`blocks_for_target`] over block weights built one of these ways, and its label
//! says which:
//! - **executed bytes**: the per-byte counts of a simulated trace, as above (`sediment sim`,
//!   `compare --shifts`);
//! - **executed instructions**: per-instruction counts without lengths (callgrind, for
//!   `sediment compare` and `noise`): each instruction is a one-byte range at its first byte;
//! - **predicted from the profile's weights**: a function's self weight spread evenly over its
//!   bytes, placed by a proposed order (`sediment_order::weight_footprint`, an `f64` weight);
//! - **functions covered** (`sediment diff`): the hottest functions holding 99% of the profile's
//!   weight, every byte of each weighing 1, counted as blocks touched.
//!
//! Why bytes and not instructions: the natural wording is "lines holding 99% of executed
//! instructions", but an instruction straddling a line boundary belongs to two lines, and with
//! instruction weights no packing argument gives an exact lower bound (a line can "hold" more
//! instruction starts than its bytes suggest). Weighing bytes makes the metric a property of
//! the bytes a fetch unit must bring in, and the bound exact. For x86 code with similar
//! instruction lengths the two shares differ little.
//!
//! Algorithm: a sweep over range starts and ends turns the records into disjoint segments of
//! constant count, in address order (`O(n log n)`). Block weights come from walking the
//! segments; a segment covering many whole blocks contributes one *run* `(weight, how many)`
//! instead of one entry per block, so memory is `O(records)` whatever the range lengths (an
//! untrusted length cannot make us allocate). Runs are sorted by weight and the answer is
//! counted arithmetically. The bound sorts segments by count the same way.

use crate::Error;

/// Bytes `[start, start + len)`, each executed `count` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExecRange {
    /// First byte.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// Executions of each byte.
    pub count: u64,
}

/// A fraction `num / den` of the total weight, `0 <= num <= den`, `den > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Numerator.
    pub num: u64,
    /// Denominator.
    pub den: u64,
}

impl Share {
    /// 99%.
    pub const P99: Self = Self { num: 99, den: 100 };
    /// 99.9%.
    pub const P999: Self = Self {
        num: 999,
        den: 1000,
    };

    /// `ceil(total * num / den)`, without overflow (`total = q * den + r`, so the product is
    /// `q * num + r * num / den` and `q * num <= total`).
    fn target(self, total: u128) -> Result<u128, Error> {
        if self.den == 0 || self.num > self.den {
            return Err(Error::Share {
                num: self.num,
                den: self.den,
            });
        }
        let (num, den) = (u128::from(self.num), u128::from(self.den));
        let (q, r) = (total / den, total % den);
        Ok(q * num + (r * num).div_ceil(den))
    }
}

/// Disjoint range of bytes with one execution count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    start: u64,
    /// Exclusive.
    end: u64,
    count: u128,
}

/// Per-byte execution counts of a workload, in canonical form (disjoint segments in address
/// order, adjacent segments of equal count merged), ready to be measured at any block size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecProfile {
    segments: Vec<Segment>,
    weight: u128,
    bytes: u64,
}

/// Footprint of one workload at one block size. See the module documentation for the exact
/// definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Footprint {
    /// Block size in bytes (line or page).
    pub block_size: u64,
    /// Blocks with non-zero weight.
    pub touched: u64,
    /// Heaviest blocks needed to hold 99% of the weight.
    pub p99: u64,
    /// Heaviest blocks needed to hold 99.9% of the weight.
    pub p999: u64,
    /// Lower bound of `touched` over all layouts: `ceil(executed bytes / block size)`.
    pub bound_touched: u64,
    /// Lower bound of `p99` over all layouts.
    pub bound_p99: u64,
    /// Lower bound of `p999` over all layouts.
    pub bound_p999: u64,
}

impl ExecProfile {
    /// Builds the per-byte counts. Records with `len == 0` or `count == 0` are ignored; a
    /// record running past `u64::MAX` is an error. The result does not depend on the order of
    /// the records.
    pub fn new(records: &[ExecRange]) -> Result<Self, Error> {
        // Events (address, is_end, count); sorting makes the sweep independent of input order.
        let mut events = Vec::with_capacity(records.len().saturating_mul(2));
        for r in records {
            if r.len == 0 || r.count == 0 {
                continue;
            }
            let end = r.start.checked_add(r.len).ok_or(Error::AddressOverflow {
                start: r.start,
                len: r.len,
            })?;
            events.push((r.start, false, r.count));
            events.push((end, true, r.count));
        }
        events.sort_unstable();
        let mut segments: Vec<Segment> = Vec::new();
        // Sum of the counts of records covering the current position: at most n * 2^64 < 2^128.
        let mut cur: u128 = 0;
        let mut prev = 0u64;
        let mut i = 0;
        while i < events.len() {
            let at = events[i].0;
            if cur > 0 && prev < at {
                match segments.last_mut() {
                    Some(s) if s.end == prev && s.count == cur => s.end = at,
                    _ => segments.push(Segment {
                        start: prev,
                        end: at,
                        count: cur,
                    }),
                }
            }
            while i < events.len() && events[i].0 == at {
                let (_, is_end, c) = events[i];
                if is_end {
                    cur -= u128::from(c);
                } else {
                    cur += u128::from(c);
                }
                i += 1;
            }
            prev = at;
        }
        let mut weight: u128 = 0;
        let mut bytes: u64 = 0;
        for s in &segments {
            let len = s.end - s.start;
            // Disjoint segments inside [0, u64::MAX): their lengths sum below 2^64.
            bytes += len;
            weight = s
                .count
                .checked_mul(u128::from(len))
                .and_then(|w| weight.checked_add(w))
                .ok_or(Error::WeightOverflow)?;
        }
        Ok(Self {
            segments,
            weight,
            bytes,
        })
    }

    /// Total weight `W`: the sum over bytes of their execution counts.
    pub fn weight(&self) -> u128 {
        self.weight
    }

    /// Distinct executed bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Block weights at `block_size` as runs `(weight, number of blocks)`, heaviest first.
    fn block_runs(&self, block_size: u64) -> Result<Vec<(u128, u64)>, Error> {
        if block_size == 0 || !block_size.is_power_of_two() {
            return Err(Error::Geometry(format!(
                "block size {block_size} is not a power of two"
            )));
        }
        let sh = block_size.trailing_zeros();
        let mut runs: Vec<(u128, u64)> = Vec::new();
        // The block being accumulated: segments arrive in address order, so once a segment
        // starts in a later block the current one is complete.
        let mut cur: Option<(u64, u128)> = None;
        fn add(runs: &mut Vec<(u128, u64)>, cur: &mut Option<(u64, u128)>, b: u64, w: u128) {
            match cur {
                Some((cb, cw)) if *cb == b => *cw += w,
                _ => {
                    if let Some((_, cw)) = cur.take() {
                        runs.push((cw, 1));
                    }
                    *cur = Some((b, w));
                }
            }
        }
        // Products below are parts of the total weight, which fit in u128 (checked in `new`).
        for s in &self.segments {
            let (first, last) = (s.start >> sh, (s.end - 1) >> sh);
            if first == last {
                add(
                    &mut runs,
                    &mut cur,
                    first,
                    s.count * u128::from(s.end - s.start),
                );
                continue;
            }
            let head = ((first + 1) << sh) - s.start;
            add(&mut runs, &mut cur, first, s.count * u128::from(head));
            if last - first > 1 {
                if let Some((_, cw)) = cur.take() {
                    runs.push((cw, 1));
                }
                let full = s
                    .count
                    .checked_mul(u128::from(block_size))
                    .ok_or(Error::WeightOverflow)?;
                runs.push((full, last - first - 1));
            }
            let tail = s.end - (last << sh);
            add(&mut runs, &mut cur, last, s.count * u128::from(tail));
        }
        if let Some((_, cw)) = cur {
            runs.push((cw, 1));
        }
        // Heaviest first. Equal weights: the order among them cannot change any count below.
        runs.sort_unstable_by(|a, b| b.cmp(a));
        Ok(runs)
    }

    /// Blocks of `block_size` with non-zero weight under the actual addresses.
    pub fn touched(&self, block_size: u64) -> Result<u64, Error> {
        Ok(self.block_runs(block_size)?.iter().map(|r| r.1).sum())
    }

    /// The smallest number of blocks of `block_size`, heaviest first, holding at least
    /// `share` of the total weight (0 when nothing executed or the share is 0).
    pub fn blocks_for(&self, block_size: u64, share: Share) -> Result<u64, Error> {
        let runs = self.block_runs(block_size)?;
        let target = share.target(self.weight)?;
        Ok(count_for_target(&runs, target))
    }

    /// Lower bound of [`blocks_for`](Self::blocks_for) over every layout of the same bytes.
    pub fn bound_for(&self, block_size: u64, share: Share) -> Result<u64, Error> {
        if block_size == 0 || !block_size.is_power_of_two() {
            return Err(Error::Geometry(format!(
                "block size {block_size} is not a power of two"
            )));
        }
        let target = share.target(self.weight)?;
        let mut by_count: Vec<(u128, u64)> = self
            .segments
            .iter()
            .map(|s| (s.count, s.end - s.start))
            .collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        Ok(count_for_target(&by_count, target).div_ceil(block_size))
    }

    /// All footprint numbers at one block size.
    pub fn footprint(&self, block_size: u64) -> Result<Footprint, Error> {
        let runs = self.block_runs(block_size)?;
        let t99 = Share::P99.target(self.weight)?;
        let t999 = Share::P999.target(self.weight)?;
        Ok(Footprint {
            block_size,
            touched: runs.iter().map(|r| r.1).sum(),
            p99: count_for_target(&runs, t99),
            p999: count_for_target(&runs, t999),
            bound_touched: self.bytes.div_ceil(block_size),
            bound_p99: self.bound_for(block_size, Share::P99)?,
            bound_p999: self.bound_for(block_size, Share::P999)?,
        })
    }
}

/// Given units grouped as `(weight per unit, number of units)` heaviest first, the smallest
/// number of units whose weights sum to at least `target`. `target` never exceeds the total
/// (a [`Share`] is at most 1), so the loop always returns from inside.
fn count_for_target(groups: &[(u128, u64)], target: u128) -> u64 {
    blocks_for_target(groups, target)
}

/// A block weight [`blocks_for_target`] can sum: exact integers (a measured run) or `f64` (a
/// profile's weight spread evenly over a function's bytes, `sediment_order::weight_footprint`).
pub trait BlockWeight: Copy + PartialOrd {
    /// Zero.
    const ZERO: Self;
    /// `self * n`.
    fn times(self, n: u64) -> Self;
    /// `self + other`.
    fn plus(self, other: Self) -> Self;
    /// `ceil((target - cum) / self)` for `cum < target`, as a block count.
    fn blocks_to(self, cum: Self, target: Self) -> u64;
}

impl BlockWeight for u128 {
    const ZERO: Self = 0;
    fn times(self, n: u64) -> Self {
        self * u128::from(n)
    }
    fn plus(self, other: Self) -> Self {
        self + other
    }
    fn blocks_to(self, cum: Self, target: Self) -> u64 {
        (target - cum).div_ceil(self) as u64
    }
}

impl BlockWeight for f64 {
    const ZERO: Self = 0.0;
    fn times(self, n: u64) -> Self {
        self * n as f64
    }
    fn plus(self, other: Self) -> Self {
        self + other
    }
    fn blocks_to(self, cum: Self, target: Self) -> u64 {
        ((target - cum) / self).ceil().max(1.0) as u64
    }
}

/// The footprint rule, the one definition every "blocks holding X%" figure of Sediment uses:
/// the number of blocks, heaviest first, whose weights sum to at least `target`. `groups` are
/// runs `(block weight, how many blocks)` sorted heaviest first; blocks of zero weight are
/// never counted. 0 when `target` is 0; every block when the target is out of reach.
pub fn blocks_for_target<W: BlockWeight>(groups: &[(W, u64)], target: W) -> u64 {
    if target.partial_cmp(&W::ZERO) != Some(std::cmp::Ordering::Greater) {
        return 0;
    }
    let mut cum = W::ZERO;
    let mut units: u64 = 0;
    for &(w, n) in groups {
        if w.partial_cmp(&W::ZERO) != Some(std::cmp::Ordering::Greater) {
            break;
        }
        // w * n is part of the total weight, which fits (u128: checked when built).
        let all = w.times(n);
        if cum.plus(all) >= target {
            return units + w.blocks_to(cum, target).min(n);
        }
        cum = cum.plus(all);
        units += n;
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // The one counting rule over exact and f64 weights: runs (heaviest first) 50 x1, 20 x2,
    // 5 x2 of 100; 50% takes one block, 90% three (50 + 20 + 20), 99% five, a zero target
    // none.
    #[test]
    fn blocks_for_target_on_both_weights() {
        let exact: [(u128, u64); 3] = [(50, 1), (20, 2), (5, 2)];
        let float: [(f64, u64); 3] = [(50.0, 1), (20.0, 2), (5.0, 2)];
        for (target, want) in [(50, 1), (90, 3), (99, 5), (0, 0), (1000, 5)] {
            assert_eq!(blocks_for_target(&exact, target), want, "{target}");
            assert_eq!(blocks_for_target(&float, target as f64), want, "{target}");
        }
    }

    fn r(start: u64, len: u64, count: u64) -> ExecRange {
        ExecRange { start, len, count }
    }

    // Known distribution, worked by hand. Total weight 900 + 90 + 9 + 1 = 1000.
    // Pages (4 KiB): weights 900, 90, 9, 1 -> 99% (990) needs 2 pages, 99.9% (999) needs 3.
    // Lines (64 B): A gives line 0 = 64*9 = 576 and line 1 = 36*9 = 324; B gives 64 and 26;
    // C 9; D 1. Sorted 576, 324, 64, 26, 9, 1: 990 is reached at 4 lines, 999 at 5.
    // Bound: 100 bytes of count 9 (900), then 100 bytes of count 1. 990 needs 100 + 90 = 190
    // bytes = 3 lines; 999 needs 199 bytes = 4 lines; all 200 bytes = 4 lines, 1 page.
    #[test]
    fn known_distribution() {
        let p = ExecProfile::new(&[
            r(0x0000, 100, 9),
            r(0x1000, 90, 1),
            r(0x2000, 9, 1),
            r(0x3000, 1, 1),
        ])
        .unwrap();
        assert_eq!((p.weight(), p.bytes()), (1000, 200));
        assert_eq!(
            p.footprint(4096).unwrap(),
            Footprint {
                block_size: 4096,
                touched: 4,
                p99: 2,
                p999: 3,
                bound_touched: 1,
                bound_p99: 1,
                bound_p999: 1,
            }
        );
        assert_eq!(
            p.footprint(64).unwrap(),
            Footprint {
                block_size: 64,
                touched: 6,
                p99: 4,
                p999: 5,
                bound_touched: 4,
                bound_p99: 3,
                bound_p999: 4,
            }
        );
    }

    // Overlapping records add per byte: [0,128) x1 and [64,192) x3 give byte counts 1 on
    // [0,64), 4 on [64,128), 3 on [128,192); W = 64 + 256 + 192 = 512, 99% target
    // ceil(506.88) = 507. Lines weigh 64, 256, 192: 256 + 192 = 448 < 507, so all 3 lines.
    // Bound: 64 bytes of 4 and 64 of 3 give 448, 59 more bytes of 1 -> 187 bytes = 3 lines.
    #[test]
    fn overlapping_records_add_up() {
        let p = ExecProfile::new(&[r(0, 128, 1), r(64, 128, 3)]).unwrap();
        assert_eq!((p.weight(), p.bytes()), (64 + 256 + 192, 192));
        assert_eq!(p.blocks_for(64, Share::P99).unwrap(), 3);
        assert_eq!(p.bound_for(64, Share::P99).unwrap(), 3);
        // At 16-byte blocks: 4 blocks of 64, 4 of 48, then ceil(59/16) = 4 of 16 -> 12.
        assert_eq!(p.blocks_for(16, Share::P99).unwrap(), 12);
        assert_eq!(p.bound_for(16, Share::P99).unwrap(), 12);
        assert_eq!(p.touched(16).unwrap(), 12);
    }

    // Share boundaries: 0 needs nothing, 1 needs every touched block, targets round up.
    #[test]
    fn share_edges() {
        let p = ExecProfile::new(&[r(0, 64, 99), r(64, 64, 1)]).unwrap();
        let at = |num, den| p.blocks_for(64, Share { num, den }).unwrap();
        assert_eq!(at(0, 1), 0);
        assert_eq!(at(1, 1), 2);
        assert_eq!(at(99, 100), 1); // 64*99 = 6336 = exactly 99% of 6400: reached by one line
        assert_eq!(at(991, 1000), 2);
        assert!(matches!(
            p.blocks_for(64, Share { num: 2, den: 1 }),
            Err(Error::Share { num: 2, den: 1 })
        ));
        assert!(p.blocks_for(64, Share { num: 0, den: 0 }).is_err());
        assert!(p.footprint(48).is_err());
    }

    // A range of huge length costs O(1) memory: one run covers its whole blocks.
    #[test]
    fn huge_range_is_run_length_encoded() {
        let p = ExecProfile::new(&[r(10, 1 << 50, 1)]).unwrap();
        let f = p.footprint(4096).unwrap();
        assert_eq!(f.touched, (1u64 << 50) / 4096 + 1);
        assert_eq!(f.bound_touched, (1u64 << 50) / 4096);
        assert!(ExecProfile::new(&[r(u64::MAX - 1, 2, 1)]).is_err());
    }

    // Nothing executed: every count is zero.
    #[test]
    fn empty_profile() {
        let p = ExecProfile::new(&[r(100, 0, 5), r(200, 5, 0)]).unwrap();
        let f = p.footprint(64).unwrap();
        assert_eq!(
            (f.touched, f.p99, f.bound_p99, f.bound_touched),
            (0, 0, 0, 0)
        );
    }

    fn records() -> impl Strategy<Value = Vec<ExecRange>> {
        proptest::collection::vec((0u64..20_000, 0u64..600, 0u64..50), 0..60)
            .prop_map(|v| v.into_iter().map(|(s, l, c)| r(s, l, c)).collect())
    }

    /// Per-byte brute force: weights per block from a byte map.
    fn brute(records: &[ExecRange], block: u64) -> (u64, u64) {
        let mut bytes = std::collections::BTreeMap::<u64, u128>::new();
        for x in records {
            for a in x.start..x.start + x.len {
                *bytes.entry(a).or_default() += u128::from(x.count);
            }
        }
        bytes.retain(|_, c| *c > 0);
        let total: u128 = bytes.values().sum();
        let target = Share::P99.target(total).unwrap();
        let mut blocks = std::collections::BTreeMap::<u64, u128>::new();
        for (a, c) in &bytes {
            *blocks.entry(a / block).or_default() += c;
        }
        let mut w: Vec<u128> = blocks.values().copied().collect();
        w.sort_unstable_by(|a, b| b.cmp(a));
        let mut b: Vec<u128> = bytes.values().copied().collect();
        b.sort_unstable_by(|a, b| b.cmp(a));
        let k = |v: &[u128]| {
            let (mut cum, mut k) = (0u128, 0u64);
            while cum < target {
                cum += v[k as usize];
                k += 1;
            }
            k
        };
        (k(&w), k(&b).div_ceil(block))
    }

    proptest! {
        // The run-length computation agrees with a byte-by-byte brute force.
        #[test]
        fn matches_brute_force(recs in records(), sh in 2u32..9) {
            let block = 1u64 << sh;
            let p = ExecProfile::new(&recs).unwrap();
            let (k, bound) = brute(&recs, block);
            prop_assert_eq!(p.blocks_for(block, Share::P99).unwrap(), k);
            prop_assert_eq!(p.bound_for(block, Share::P99).unwrap(), bound);
        }

        // The bound never exceeds the actual layout's number, and p99 <= p999 <= touched.
        #[test]
        fn bound_below_actual(recs in records(), sh in 2u32..13) {
            let f = ExecProfile::new(&recs).unwrap().footprint(1 << sh).unwrap();
            prop_assert!(f.bound_p99 <= f.p99 && f.bound_p999 <= f.p999);
            prop_assert!(f.bound_touched <= f.touched);
            prop_assert!(f.p99 <= f.p999 && f.p999 <= f.touched);
            prop_assert!(f.bound_p99 <= f.bound_p999 && f.bound_p999 <= f.bound_touched);
        }

        // Record order does not matter (determinism of the canonical form).
        #[test]
        fn order_independent(recs in records()) {
            let mut rev = recs.clone();
            rev.reverse();
            let a = ExecProfile::new(&recs).unwrap();
            prop_assert_eq!(&a, &ExecProfile::new(&rev).unwrap());
            prop_assert_eq!(a.footprint(64).unwrap(), ExecProfile::new(&rev).unwrap().footprint(64).unwrap());
        }
    }
}
