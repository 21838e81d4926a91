//! Call-Chain Clustering (C3), the function-ordering half of hfsort.
//!
//! Ottoni & Maher, "Optimizing Function Placement for Large-Scale Data-Center Applications",
//! CGO 2017, §4. The idea: a function should sit right after the caller that calls it most,
//! because then the call and the return stay within a page (fewer iTLB misses) and often within
//! a few cache lines. Pettis & Hansen merge along the heaviest edge in either direction; C3
//! looks only at callers, which makes the placement directional (callee after caller) and lets
//! it run in one pass.
//!
//! The algorithm, over nodes that were seen (positive count or an edge):
//! 1. Every node starts as its own cluster. A cluster's weight is the sum of its members' counts,
//!    its size the sum of their sizes, its density weight / size.
//! 2. For every node `f`, its *most likely caller* is the caller with the heaviest edge into `f`
//!    (ties: the smaller caller index). The arc's *probability* is that edge's count divided by
//!    the sum of all counts into `f`. Recursive self-edges are left out of both: they say
//!    nothing about where `f` should go.
//! 3. Visit nodes by decreasing *call density*, total incoming call count / size, as lld does
//!    (ties: index ascending); see "visit order" below for why not the paper's hotness.
//!    Append `f`'s whole cluster to the end of its most likely caller's cluster, unless
//!    - the arc probability is below [`C3Params::min_arc_probability`] (the caller is not
//!      really "the" caller of `f`), or
//!    - the caller is already in `f`'s cluster, or
//!    - the merged cluster would exceed [`C3Params::max_cluster_size`], or
//!    - the caller cluster's density would drop by more than
//!      [`C3Params::caller_degrade_factor`] (a hot, small caller should not be diluted by a
//!      big lukewarm callee).
//! 4. Sort the clusters by decreasing density (ties: the index of the cluster's first node) and
//!    concatenate them; never-seen nodes follow in input order.
//!
//! Clusters are circular linked lists over node indices (`next`), with the tail kept at the
//! leader, so a merge is O(1); cluster membership is a union-find with path halving. The whole
//! run is O(E + N log N) time and O(N) memory besides the edge array.
//!
//! Differences from the published implementations, on purpose:
//! - Visit order. The paper visits by hotness; lld's `CallGraphSort.cpp` visits by density of
//!   incoming calls (it has no self samples), BOLT's `HFSort.cpp` by sample density. We first
//!   followed the paper (self weight), and on SQLite's speedtest1 (`docs/journal/ordering.md`) that
//!   made 32% more iTLB-64 misses than lld's C3 (13968 against 10590). Visiting by self-weight
//!   density gave 10681, by incoming-call density 10232, below lld's own: the visit order was
//!   the whole gap, so we visit as lld does. Clusters are still weighed by the self samples a
//!   profile actually measured (for the degradation check and the final sort).
//! - BOLT measures arc probability against the callee's *samples*. Edge counts and self
//!   samples are different units when the profile comes from callgrind (calls vs instructions),
//!   so like lld we measure it against the callee's total *incoming call count*.
//! - Density is compared exactly in 128-bit integers rather than in floating point, so the
//!   result cannot depend on rounding.
//! - Sizes of zero count as one byte (a density needs a positive size); unknown sizes are the
//!   adapter's business (it substitutes [`crate::DEFAULT_FUNCTION_SIZE`]).

use crate::{append_unseen, check_graph, seen_nodes, EdgeCount, Error, NONE};
use std::cmp::Ordering;

/// Tuning parameters of C3, named as in the paper and its implementations.
#[derive(Debug, Clone, PartialEq)]
pub struct C3Params {
    /// Largest cluster, in bytes, that a merge may produce.
    ///
    /// 1 MiB, as lld (`MAX_CLUSTER_SIZE = 1024 * 1024`) and BOLT (`MaxClusterSize = 1 << 20`).
    /// HHVM's original hfsort used its page size, 2 MiB (one x86-64 huge page, which is where
    /// HHVM maps its hot text), for the same purpose. A cluster much larger than a page gains no
    /// iTLB locality from growing further, and bounding it keeps one giant cluster from
    /// swallowing the program.
    pub max_cluster_size: u64,
    /// How many times lower than the caller cluster's density the merged density may be.
    ///
    /// 8, as lld (`MAX_DENSITY_DEGRADATION`), BOLT and HHVM (`CallerDegradeFactor`); tuned by
    /// Ottoni & Maher on Facebook's HHVM and other data-center binaries. It is an integer in
    /// every implementation, so it is one here and the comparison is exact.
    pub caller_degrade_factor: u64,
    /// Smallest share of a callee's incoming calls its most likely caller must make for a merge.
    ///
    /// 0.1, as BOLT and HHVM (`MinArcProbability`) and lld (`weight * 10 <= initialWeight`
    /// skips). Below it, the callee is called from so many places that no single caller can
    /// claim it; placing it after one of them helps that one and no other.
    pub min_arc_probability: f64,
}

impl Default for C3Params {
    fn default() -> Self {
        C3Params {
            max_cluster_size: 1 << 20,
            caller_degrade_factor: 8,
            min_arc_probability: 0.1,
        }
    }
}

impl C3Params {
    /// The parameters as `key=value` pairs separated by commas, for the order file's metadata.
    pub fn describe(&self) -> String {
        format!(
            "max-cluster-size={},caller-degrade-factor={},min-arc-probability={}",
            self.max_cluster_size, self.caller_degrade_factor, self.min_arc_probability
        )
    }
}

/// Finds the leader of `v`'s cluster, halving the path as it goes.
fn find(leader: &mut [u32], mut v: u32) -> u32 {
    while leader[v as usize] != v {
        let grand = leader[leader[v as usize] as usize];
        leader[v as usize] = grand;
        v = grand;
    }
    v
}

/// `a` strictly denser than `b`, compared exactly: wa / sa > wb / sb  <=>  wa * sb > wb * sa.
fn denser(wa: u64, sa: u64, wb: u64, sb: u64) -> Ordering {
    (u128::from(wa) * u128::from(sb)).cmp(&(u128::from(wb) * u128::from(sa)))
}

/// Runs C3 and returns the clusters of seen nodes, in layout order, each in layout order.
///
/// Never-seen nodes are in no cluster. [`c3_layout`] concatenates these and appends them.
pub fn c3_clusters(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    params: &C3Params,
) -> Result<Vec<Vec<u32>>, Error> {
    let n = check_graph(sizes, counts, edges)?;
    let seen = seen_nodes(counts, edges);

    // Step 2: the most likely caller of every node and the node's total incoming count.
    let mut best_caller = vec![NONE; n];
    let mut best_count = vec![0u64; n];
    let mut in_total = vec![0u64; n];
    for e in edges {
        if e.count == 0 || e.src == e.dst {
            continue;
        }
        let d = e.dst as usize;
        in_total[d] = in_total[d].saturating_add(e.count);
        // Heavier wins; on equal counts the smaller caller index wins.
        if e.count > best_count[d] || (e.count == best_count[d] && e.src < best_caller[d]) {
            best_count[d] = e.count;
            best_caller[d] = e.src;
        }
    }

    // Step 1: singleton clusters. `next` links members circularly; `tail` is valid at leaders.
    let mut leader: Vec<u32> = (0..n as u32).collect();
    let mut next: Vec<u32> = (0..n as u32).collect();
    let mut tail: Vec<u32> = (0..n as u32).collect();
    let mut size: Vec<u64> = sizes.iter().map(|&s| s.max(1)).collect();
    let mut weight: Vec<u64> = counts.to_vec();

    // Step 3: visit by decreasing call density (incoming call count / size, exact), as lld
    // does; the stable sort keeps index order among equals.
    let mut visit: Vec<u32> = (0..n as u32).filter(|&i| seen[i as usize]).collect();
    let sz = |v: u32| sizes[v as usize].max(1);
    visit.sort_by(|&a, &b| denser(in_total[b as usize], sz(b), in_total[a as usize], sz(a)));
    for &f in &visit {
        let caller = best_caller[f as usize];
        if caller == NONE {
            continue;
        }
        // A division rather than `count >= p * total`: a ratio like 7/70 then rounds to the
        // same double as the literal 0.1 and the boundary behaves as written. `in_total` is
        // positive here because the best edge is counted in it.
        let probability = best_count[f as usize] as f64 / in_total[f as usize] as f64;
        if probability < params.min_arc_probability {
            continue;
        }
        let cf = find(&mut leader, f);
        let cp = find(&mut leader, caller);
        if cf == cp {
            continue;
        }
        let (cfu, cpu) = (cf as usize, cp as usize);
        let merged_size = size[cpu].saturating_add(size[cfu]);
        if merged_size > params.max_cluster_size {
            continue;
        }
        let merged_weight = weight[cpu].saturating_add(weight[cfu]);
        // Skip when density(caller) > density(merged) * factor, i.e.
        // wp / sp > k * wm / sm  <=>  wp * sm > k * wm * sp. The left side is a product of two
        // u64 and fits u128; the right one has three factors and saturates (a saturated right
        // side means "no degradation", which is right: it is astronomically large).
        let lhs = u128::from(weight[cpu]) * u128::from(merged_size);
        let rhs = (u128::from(params.caller_degrade_factor) * u128::from(merged_weight))
            .saturating_mul(u128::from(size[cpu]));
        if lhs > rhs {
            continue;
        }
        // Append cluster cf after cluster cp: splice the two circular lists.
        let (tp, tf) = (tail[cpu], tail[cfu]);
        next[tp as usize] = cf;
        next[tf as usize] = cp;
        tail[cpu] = tf;
        leader[cfu] = cp;
        size[cpu] = merged_size;
        weight[cpu] = merged_weight;
    }

    // Step 4: clusters by density descending; ties by the leader (= first node) ascending.
    // The leader of a cluster is always its first node, because merges append after the tail.
    let mut leaders: Vec<u32> = (0..n as u32)
        .filter(|&i| seen[i as usize] && leader[i as usize] == i)
        .collect();
    leaders.sort_by(|&a, &b| {
        let (a_, b_) = (a as usize, b as usize);
        denser(weight[b_], size[b_], weight[a_], size[a_]).then(a.cmp(&b))
    });
    let clusters = leaders
        .iter()
        .map(|&head| {
            let mut members = vec![head];
            let mut v = next[head as usize];
            while v != head {
                members.push(v);
                v = next[v as usize];
            }
            members
        })
        .collect();
    Ok(clusters)
}

/// Runs C3 (see the module docs) and returns the full layout: clusters, then never-seen nodes.
pub fn c3_layout(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    params: &C3Params,
) -> Result<Vec<u32>, Error> {
    let clusters = c3_clusters(sizes, counts, edges, params)?;
    let mut layout: Vec<u32> = clusters.into_iter().flatten().collect();
    append_unseen(&mut layout, &seen_nodes(counts, edges));
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use proptest::prelude::*;

    fn c3(sizes: &[u64], counts: &[u64], edges: &[EdgeCount]) -> Vec<u32> {
        c3_layout(sizes, counts, edges, &C3Params::default()).unwrap()
    }

    // Visit order is call density, as lld (regression: SQLite iTLB-64 misses, see module docs):
    // 2 takes 100 calls from 0 and 1 only 10, so 2 joins 0 first and sits right after it,
    // although 1 has ten times the self weight. By self weight it would be [0, 1, 2].
    #[test]
    fn visits_by_call_density_as_lld() {
        let l = c3_layout(
            &[64, 64, 64],
            &[10, 50, 5],
            &[e(0, 1, 10), e(0, 2, 100)],
            &C3Params::default(),
        )
        .unwrap();
        assert_eq!(l, vec![0, 2, 1]);
    }

    // Place the hot chain (0,3,4,2) contiguously, the lone hot node 1 after it, unseen 5 last.
    #[test]
    fn hot_chain() {
        let sizes = [64; 6];
        let counts = [10, 1, 40, 30, 20, 0];
        let edges = [e(0, 3, 100), e(3, 4, 100), e(4, 2, 100)];
        assert_eq!(c3(&sizes, &counts, &edges), vec![0, 3, 4, 2, 1, 5]);
        assert_eq!(
            c3_clusters(&sizes, &counts, &edges, &C3Params::default()).unwrap(),
            vec![vec![0, 3, 4, 2], vec![1]]
        );
    }

    // The callee follows its heaviest caller (2), not the first one (0).
    #[test]
    fn follows_most_likely_caller() {
        let sizes = [64; 4];
        let counts = [50, 40, 30, 20];
        let edges = [e(0, 3, 10), e(2, 3, 90)];
        // Clusters: [0] density 50/64, [1] 40/64, [2,3] 50/128.
        assert_eq!(c3(&sizes, &counts, &edges), vec![0, 1, 2, 3]);
        let clusters = c3_clusters(&sizes, &counts, &edges, &C3Params::default()).unwrap();
        assert_eq!(clusters, vec![vec![0], vec![1], vec![2, 3]]);
    }

    // Equal caller counts: the smaller caller index wins the callee.
    #[test]
    fn caller_ties_go_to_smaller_index() {
        let sizes = [64; 3];
        let counts = [10, 10, 10];
        let edges = [e(1, 2, 5), e(0, 2, 5)];
        assert_eq!(
            c3_clusters(&sizes, &counts, &edges, &C3Params::default()).unwrap(),
            vec![vec![0, 2], vec![1]]
        );
    }

    // A callee with eleven equal callers (each 1/11 < 0.1 of its calls) is merged with none.
    #[test]
    fn improbable_arc_is_not_followed() {
        let sizes = [64; 12];
        let mut counts = [1u64; 12];
        counts[11] = 100;
        let edges: Vec<EdgeCount> = (0..11).map(|c| e(c, 11, 7)).collect();
        assert_eq!(
            c3(&sizes, &counts, &edges),
            vec![11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        );
        // With ten callers (exactly 0.1 each) the arc qualifies, as in BOLT (`< 0.1` skips).
        let edges: Vec<EdgeCount> = (0..10).map(|c| e(c, 11, 7)).collect();
        assert_eq!(
            c3(&sizes, &counts, &edges),
            vec![0, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        );
    }

    // Two 600 KB functions would make a 1.2 MB cluster: they stay apart, ordered by density.
    #[test]
    fn cluster_size_limit() {
        let sizes = [600_000, 600_000];
        let counts = [10, 20];
        let edges = [e(0, 1, 100)];
        assert_eq!(c3(&sizes, &counts, &edges), vec![1, 0]);
        let small = C3Params {
            max_cluster_size: 2_000_000,
            ..C3Params::default()
        };
        assert_eq!(
            c3_layout(&sizes, &counts, &edges, &small).unwrap(),
            vec![0, 1]
        );
    }

    // A small hot caller is not diluted by a huge lukewarm callee (density would drop > 8x).
    #[test]
    fn caller_density_degradation() {
        let sizes = [64, 10_000, 64];
        let counts = [1000, 10, 5];
        let edges = [e(0, 1, 50), e(0, 2, 50)];
        // Node 1 (merged density 1010/10064, > 8x below 1000/64) stays out; node 2 (1005/128) joins.
        assert_eq!(c3(&sizes, &counts, &edges), vec![0, 2, 1]);
    }

    // Recursion neither picks a caller nor dilutes the arc probability.
    #[test]
    fn self_edges_are_ignored() {
        let sizes = [64; 2];
        let counts = [5, 9];
        let edges = [e(0, 1, 10), e(1, 1, 1000)];
        assert_eq!(c3(&sizes, &counts, &edges), vec![0, 1]);
    }

    // Zero sizes count as one byte and zero-count seen nodes still cluster behind their caller.
    #[test]
    fn zero_sizes_and_counts() {
        let sizes = [0, 0, 0];
        let counts = [3, 0, 0];
        let edges = [e(0, 1, 1)];
        assert_eq!(c3(&sizes, &counts, &edges), vec![0, 1, 2]);
    }

    // Malformed arrays are an error.
    #[test]
    fn rejects_bad_edges() {
        assert!(matches!(
            c3_layout(&[1], &[1], &[e(0, 1, 1)], &C3Params::default()),
            Err(Error::EdgeOutOfRange { .. })
        ));
    }

    proptest! {
        // Permutation, deterministic, never-seen nodes last in input order, cluster sizes bounded.
        #[test]
        fn c3_properties((sizes, counts, edges) in graph()) {
            let p = C3Params::default();
            let a = c3_layout(&sizes, &counts, &edges, &p).unwrap();
            prop_assert!(is_permutation(&a, counts.len()));
            prop_assert_eq!(&a, &c3_layout(&sizes, &counts, &edges, &p).unwrap());
            let tail = unseen(&counts, &edges);
            prop_assert_eq!(&a[counts.len() - tail.len()..], &tail[..]);
            for cluster in c3_clusters(&sizes, &counts, &edges, &p).unwrap() {
                let total: u64 = cluster.iter().map(|&v| sizes[v as usize].max(1)).sum();
                prop_assert!(cluster.len() == 1 || total <= p.max_cluster_size);
            }
        }
    }
}
