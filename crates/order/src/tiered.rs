//! Tiered CDSort (`tiered`): Sediment's own ordering. Split the functions into heat tiers by
//! density first, then run Cache-Directed Sort inside each tier.
//!
//! Why: every chain-merging algorithm ([`crate::c3`], [`crate::ext_tsp`], [`crate::cdsort`])
//! will glue a lukewarm callee onto a hot caller when the call is heavy enough, and the final
//! sort by chain density then drags that callee into the hot region. Each such function costs
//! hot-region bytes that hold little of the run time, so the pages and cache lines holding 99%
//! of the executed code grow, and with them iTLB and I-cache misses. `hot` packs the hot region
//! best but scatters call paths. Tiering keeps both: a function is only chained with functions
//! of its own heat tier.
//!
//! Algorithm:
//! 1. Sort the seen functions by density (self weight / size, exact in `u128`; ties by index)
//!    and cut the sorted list where the cumulative self weight first reaches each share of
//!    [`TieredParams::shares`] (99%, then 99.9%). Each cut closes a tier; the functions after
//!    the last cut form the last tier, and functions with no self weight but a call edge are
//!    in it too.
//! 2. Lay out each tier with [`crate::cdsort_layout`] on the subgraph of its functions and the
//!    calls between them (calls that cross tiers are dropped: they join code of different heat,
//!    which is the merge this algorithm exists to refuse).
//! 3. Concatenate the tiers, hottest first; never-seen nodes last, in input order.
//!
//! Its score is the number of pages (and lines) that hold 99% of the self weight under the
//! layout, [`crate::score::weight_footprint`], together with ExtTSP for the call paths.
//!
//! The shares are a choice, not a tuning: they are the shares Sediment's `compare` reports
//! (pages and lines holding 99% and 99.9% of executed bytes). Measured on SQLite's speedtest1
//! (`docs/journal/ordering.md`): the fewest pages for 99.9% of all variants (47, against 50 for
//! CDSort and 56 for lld's C3) and tied best for 99%, but more iTLB-64 misses than CDSort or
//! either C3 (0.282 of the default link against 0.245-0.257): the calls it cuts between tiers
//! cost more than the tighter hot region wins. It does not (yet) beat every published order.
//! Ties: by index throughout, as in the algorithms it calls.
//!
//! On a graph above the large-graph gate ([`crate::large`]) every tier is laid out by CDSort's
//! gated path, whatever the size of the tier itself; below it the layout is unchanged.

use crate::{cdsort_layout, check_graph, seen_nodes, CdSortParams, EdgeCount, Error, NONE};

/// Parameters of [`tiered_layout`].
#[derive(Debug, Clone, PartialEq)]
pub struct TieredParams {
    /// Cumulative shares of the self weight that close a tier, as `(num, den)` fractions in
    /// increasing order: `[(99, 100), (999, 1000)]`.
    pub shares: Vec<(u64, u64)>,
    /// Parameters of the CDSort run inside each tier (LLVM's defaults).
    pub cdsort: CdSortParams,
}

impl Default for TieredParams {
    fn default() -> Self {
        TieredParams {
            shares: vec![(99, 100), (999, 1000)],
            cdsort: CdSortParams::default(),
        }
    }
}

impl TieredParams {
    /// The parameters as `key=value` pairs separated by commas, for the order file's metadata.
    pub fn describe(&self) -> String {
        let shares: Vec<String> = self
            .shares
            .iter()
            .map(|(n, d)| format!("{n}/{d}"))
            .collect();
        format!("tiers={},{}", shares.join("+"), self.cdsort.describe())
    }
}

/// The tier of every node (0 hottest), `None` for never-seen nodes (see the module docs).
pub fn tiers(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    shares: &[(u64, u64)],
) -> Result<Vec<Option<u32>>, Error> {
    check_graph(sizes, counts, edges)?;
    Ok(tiers_of(sizes, counts, &seen_nodes(counts, edges), shares))
}

/// [`tiers`] of a checked graph whose seen nodes are `seen`.
fn tiers_of(
    sizes: &[u64],
    counts: &[u64],
    seen: &[bool],
    shares: &[(u64, u64)],
) -> Vec<Option<u32>> {
    let hot = crate::by_density(sizes, counts);
    let total: u128 = counts.iter().map(|&c| u128::from(c)).sum();
    let last = shares.len() as u32;
    let mut tier: Vec<Option<u32>> = seen.iter().map(|&s| s.then_some(last)).collect();
    let (mut t, mut acc) = (0usize, 0u128);
    for v in hot {
        // A share is reached once acc * den >= total * num; the node that reaches it is the
        // last of its tier.
        tier[v as usize] = Some(t as u32);
        acc += u128::from(counts[v as usize]);
        while t < shares.len() {
            let (num, den) = shares[t];
            if acc * u128::from(den.max(1)) >= total * u128::from(num) {
                t += 1;
            } else {
                break;
            }
        }
    }
    tier
}

/// Orders nodes by tiered CDSort (see the module docs); returns a permutation of `0..n`,
/// never-seen nodes last in input order.
pub fn tiered_layout(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    params: &TieredParams,
) -> Result<Vec<u32>, Error> {
    let n = check_graph(sizes, counts, edges)?;
    let seen = seen_nodes(counts, edges);
    let tier = tiers_of(sizes, counts, &seen, &params.shares);
    // The large-graph gate is decided on the whole graph: every tier of a graph above it is
    // laid out on the gated path, even a tier whose own calls are fewer (on the scale
    // benchmark's 1,000,000-function graph the coldest tier, 575,630 functions and 801,046
    // calls, is under the gate by itself, and took 1.5 s of the 4.8 s before this).
    let calls = edges
        .iter()
        .filter(|e| e.src != e.dst && e.count > 0)
        .count();
    let mut cdsort = params.cdsort.clone();
    if calls > cdsort.large.min_calls {
        cdsort.large.min_calls = 0;
    }
    // Every tier's nodes, renumbered 0.. in index order, and every tier's calls, in input
    // order, from one pass over the edges (a pass per tier read each edge's tiers at random,
    // 0.4 s of CPU at 1,000,000 functions and 10,000,000 calls); `place[v]` is node `v`'s
    // tier and number in it, one read per call end.
    let tiers_len = params.shares.len() + 1;
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); tiers_len];
    let mut place = vec![(NONE, NONE); n];
    for (v, t) in tier.iter().enumerate() {
        if let Some(t) = *t {
            let mine = &mut members[t as usize];
            place[v] = (t, mine.len() as u32);
            mine.push(v as u32);
        }
    }
    let mut sub_edges: Vec<Vec<EdgeCount>> = vec![Vec::new(); tiers_len];
    for e in edges {
        let ((ts, src), (td, dst)) = (place[e.src as usize], place[e.dst as usize]);
        if ts == td && ts != NONE {
            sub_edges[ts as usize].push(EdgeCount {
                src,
                dst,
                count: e.count,
            });
        }
    }
    drop(place);
    let mut layout = Vec::with_capacity(n);
    for (members, sub_edges) in members.iter().zip(sub_edges) {
        if members.is_empty() {
            continue;
        }
        let sub_sizes: Vec<u64> = members.iter().map(|&v| sizes[v as usize]).collect();
        // A member that only had cross-tier calls is still seen: give it a count of one so
        // that CDSort places it inside the tier rather than treating it as never seen.
        let sub_counts: Vec<u64> = members.iter().map(|&v| counts[v as usize].max(1)).collect();
        let sub = cdsort_layout(&sub_sizes, &sub_counts, &sub_edges, &cdsort)?;
        drop(sub_edges);
        layout.extend(sub.into_iter().map(|i| members[i as usize]));
    }
    crate::append_unseen(&mut layout, &seen);
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use crate::{cdsort_layout, score::weight_footprint, ExtTspParams, PAGE_SIZE};
    use proptest::prelude::*;

    // Nearly all weight is in 0 and 2, one unit in 1, none in 3 (only called). The path
    // 0 -> 1 -> 2 is called often, so CDSort glues the lukewarm 1 between the hot pair; tiering
    // keeps 1 out of the hot tier: [0, 2] first (joined by their call), then 1, then 3.
    #[test]
    fn keeps_lukewarm_callee_out_of_the_hot_tier() {
        let sizes = [2048, 2048, 2048, 64];
        let counts = [500, 1, 490, 0];
        let edges = [e(0, 1, 1000), e(1, 2, 1000), e(0, 2, 10), e(1, 3, 5)];
        let t = tiers(&sizes, &counts, &edges, &[(99, 100), (999, 1000)]).unwrap();
        // 0 and 2 hold 990 of 991 (99.9%): tier 0; 1 closes 99.9%: tier 1; 3 never sampled.
        assert_eq!(t, vec![Some(0), Some(1), Some(0), Some(2)]);
        let l = tiered_layout(&sizes, &counts, &edges, &TieredParams::default()).unwrap();
        assert_eq!(l, vec![0, 2, 1, 3]);
        let c = cdsort_layout(&sizes, &counts, &edges, &CdSortParams::default()).unwrap();
        assert_eq!(c, vec![0, 1, 2, 3]);
        // 99% of the weight sits in one page under tiering, two under CDSort.
        let fp = |l: &[u32]| weight_footprint(&sizes, &counts, l, PAGE_SIZE, (99, 100)).unwrap();
        assert_eq!((fp(&l), fp(&c)), (1, 2));
    }

    proptest! {
        // A permutation, the same twice, unseen nodes last in input order, and tiers in order:
        // every node of tier t comes before every node of tier t + 1.
        #[test]
        fn properties((sizes, counts, edges) in graph()) {
            let p = TieredParams::default();
            let l = tiered_layout(&sizes, &counts, &edges, &p).unwrap();
            prop_assert!(is_permutation(&l, sizes.len()));
            prop_assert_eq!(&l, &tiered_layout(&sizes, &counts, &edges, &p).unwrap());
            let un = unseen(&counts, &edges);
            prop_assert_eq!(&l[l.len() - un.len()..], &un[..]);
            let t = tiers(&sizes, &counts, &edges, &p.shares).unwrap();
            let ts: Vec<u32> = l.iter().filter_map(|&v| t[v as usize]).collect();
            prop_assert!(ts.windows(2).all(|w| w[0] <= w[1]));
            let s = crate::ext_tsp_score(&sizes, &edges, &l, &ExtTspParams::default()).unwrap();
            prop_assert!(s.is_finite());
        }
    }
}

#[cfg(test)]
mod large_tests {
    use super::*;
    use crate::large::tests::forced;
    use crate::testutil::e;

    // The gate is the whole graph's: 5 calls pass a gate of 4, so the hot tier {0, 1, 2} is
    // laid out gated although its own 3 calls would not pass (CDSort's tiny-graph test of the
    // gate: [0, 1, 2] gated, [0, 2, 1] not); the cold pair 3 -> 4 follows.
    #[test]
    fn gate_is_decided_on_the_whole_graph() {
        let sizes = [64; 5];
        let counts = [1, 1, 1, 0, 0];
        let edges = [e(0, 1, 10), e(2, 1, 6), e(2, 1, 6), e(3, 4, 1), e(3, 4, 1)];
        let params = |min_calls| TieredParams {
            cdsort: CdSortParams {
                large: crate::LargeGraph {
                    min_calls,
                    ..forced(2, 64)
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let l = |min_calls| tiered_layout(&sizes, &counts, &edges, &params(min_calls)).unwrap();
        assert_eq!(l(4), vec![0, 1, 2, 3, 4]);
        assert_eq!(l(5), vec![0, 2, 1, 3, 4]);
    }
}
