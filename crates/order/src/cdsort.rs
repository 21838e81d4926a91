//! Cache-Directed Sort (CDSort): function ordering by greedy chain merging under a cache model.
//!
//! Pupyrev, Ottoni et al., "Cache-Directed Sort" (the function-layout algorithm LLVM ships as
//! `computeCacheDirectedLayout` in `CodeLayout.cpp` and BOLT as `-reorder-functions=cdsort`),
//! uses the same greedy scheme as [`crate::ext_tsp`]: every seen function is a chain, the pair of
//! chains joined by a call edge with the largest positive merge gain is concatenated (`X+Y` or
//! `Y+X`), and the gains of the merged chain with its neighbours are recomputed. Only the gain
//! differs. It has two terms:
//! - **distance locality**: a call from address `s` to address `t` is worth
//!   `count · max(|t - s|, 0.1)^(-distance_power)`, a slowly decaying function of distance
//!   (unlike ExtTSP's cliff at 1 KiB, it still rewards calls a page apart). The gain is this value
//!   for the calls between the two chains once merged, minus their value "before", which is
//!   taken as if they were as far apart as the whole hot code (`total_size`).
//! - **frequency locality**: a chain of density `ρ` (weight per byte) is modelled as missing the
//!   cache with probability `(1 - ρ · cache_size / total_samples)^cache_entries`, i.e. a cache
//!   of `cache_entries` lines of `cache_size` bytes under a random-access model; the gain is the
//!   drop of `weight · miss` when the two chains become one. It favours joining chains of
//!   similar hotness.
//!
//! `gain = distance + frequency_scale · frequency`, divided (when non-negative) by the smaller
//! chain size in bytes so that small chains merge first. Finally chains are sorted by density,
//! descending.
//!
//! As in LLVM: a function's weight is the largest of its self weight, its total incoming call
//! count and its total outgoing call count (a function that calls a lot was executed a lot even
//! if it sampled little); `total_samples` is the sum of self weights; `total_size` the size of
//! the functions with a positive self weight; sizes of zero count as one byte; recursive calls
//! are ignored. Deviation: LLVM is given the offset of each call site inside its caller; a
//! profile does not have it, so every call is taken to leave from the *middle* of its caller.
//!
//! Parameters ([`CdSortParams`]) are LLVM's `CDSortConfig` defaults, "tuned for the best
//! performance of large-scale front-end bound binaries" (the authors' Meta services):
//! `cache_entries` 16, `cache_size` 2048 bytes, `max_chain_size` 128 functions,
//! `distance_power` 0.25, `frequency_scale` 0.25.
//!
//! Ties: as in [`crate::ext_tsp`] (equal gains go to the smaller chain ids, `X+Y` before `Y+X`,
//! equal densities by chain id). Complexity: as [`crate::ext_tsp`], with `max_chain_size` 128
//! (also the number of heaviest jumps a node keeps, see `merge.rs`), but every node of a
//! merged chain is swept, not only its ends; each chain's `weight * miss_probability` is kept
//! with the chain, computed once when it forms, not twice per pair evaluated.
//! `distance_power` 0.25 is computed as two square roots rather than `powf` (the same value
//! within a rounding or two; SQLite's speedtest1 profile gives the same bytes either way).
//!
//! Graphs above the large-graph gate ([`crate::large`], 2,000,000 calls) are merged as ExtTSP
//! merges them there (each function's 4 heaviest calls, starting from their paths; no hub
//! cap, `LARGE_GRAPH_HUB_CAP`), and a merged chain's gains count only the calls of its
//! nodes within [`LARGE_GRAPH_REACH`] (1024 bytes) of either end: the distance term of farther calls is left out, an approximation the
//! full algorithm does not make. There the nodes are also renamed, paths first and densest
//! first (`gated_names`), so that the records the merging reads at random are mostly near
//! each other (ties between equal gains then go by the new names), and the miss
//! probability is raised by `powi`. Below the gate the layout is unchanged.

use crate::large::{for_each_call_path, Kept};
use crate::merge::{concat_chains, greedy_merge, Chains, MergeType, Scan, Stat, EPS};
use crate::{check_graph, EdgeCount, Error, LargeGraph};

/// On a graph above the large-graph gate, calls of nodes more than this many bytes from both
/// ends of a merged chain are left out of its gains (see the module docs): ExtTSP's reach.
/// Tuned on the scale benchmark's 1,000,000-function graph: sweeping whole chains took 7.1 s
/// of CPU there; 4096 bytes 3.9 and 5.1 s, this 3.1 and 3.5 s (two runs each, alternating),
/// with a slightly better score (same-page 6.16% against 6.12%, ExtTSP 5.423e8 against
/// 5.422e8).
pub const LARGE_GRAPH_REACH: u64 = 1024;

/// Whether the gated path raises the miss probability's base to `cache_entries` by repeated
/// multiplication (`powi`) rather than `powf`: the two may differ in the last bits, so below
/// the gate `powf` stays (its layouts must not change). On the 1,000,000-function benchmark
/// graph `powf` was about 2% of the benchmark process's samples (2.5 million pairs
/// evaluated), and `powi` gave the same layout there.
const LARGE_GRAPH_POWI: bool = true;

/// Whether the gated path keeps only the `max_chain_size` heaviest of each node's jumps, as
/// below the gate (the hub cap of `merge.rs`). It does not: there a node has few calls left
/// (its own 4 heaviest, and those it is among the 4 heaviest of), and finding the nodes over
/// the cap took 0.07 to 0.12 s of wall time on the 1,000,000-function benchmark graph, for a
/// merge loop no faster with the cap than without (0.68 to 1.05 s with, 0.75 to 0.83 s
/// without) and the same scores (same-page weight 6.16% with, 6.17% without; ExtTSP 5.423e8
/// both).
const LARGE_GRAPH_HUB_CAP: bool = false;

/// Parameters of [`cdsort_layout`]; the defaults are LLVM's `CDSortConfig`.
#[derive(Debug, Clone, PartialEq)]
pub struct CdSortParams {
    /// Number of lines of the modelled cache (16).
    pub cache_entries: u32,
    /// Size of one line of the modelled cache in bytes (2048).
    pub cache_size: u64,
    /// Largest chain, in functions, that a merge may create (128).
    pub max_chain_size: usize,
    /// Exponent of the distance decay (0.25).
    pub distance_power: f64,
    /// Weight of the frequency term against the distance term (0.25).
    pub frequency_scale: f64,
    /// The size gate: on graphs above it, merge along each function's heaviest calls only.
    pub large: LargeGraph,
}

impl Default for CdSortParams {
    fn default() -> Self {
        CdSortParams {
            cache_entries: 16,
            cache_size: 2048,
            max_chain_size: 128,
            distance_power: 0.25,
            frequency_scale: 0.25,
            large: LargeGraph::default(),
        }
    }
}

impl CdSortParams {
    /// The parameters as `key=value` pairs separated by commas, for the order file's metadata.
    pub fn describe(&self) -> String {
        format!(
            "cache-entries={},cache-size={},max-chain-size={},distance-power={},frequency-scale={}",
            self.cache_entries,
            self.cache_size,
            self.max_chain_size,
            self.distance_power,
            self.frequency_scale
        )
    }
}

/// The whole-graph quantities the gain needs.
struct Model<'a> {
    p: &'a CdSortParams,
    total_samples: f64,
    /// Distance value of one call "before" a merge: at distance `total_size` (computed once;
    /// the same product [`Model::dist_score`] would form).
    before: f64,
    /// Raise to `cache_entries` by repeated multiplication (`powi`) instead of `powf`: on the
    /// gated path only, where the layout may differ in the last bits of a gain (see
    /// [`LARGE_GRAPH_POWI`]).
    powi: bool,
}

impl Model<'_> {
    /// Probability that a chain of this density misses the modelled cache.
    fn miss_probability(&self, density: f64) -> f64 {
        let page_samples = density * self.p.cache_size as f64;
        if page_samples >= self.total_samples {
            return 0.0;
        }
        let base = 1.0 - page_samples / self.total_samples;
        match i32::try_from(self.p.cache_entries) {
            Ok(e) if self.powi => base.powi(e),
            _ => base.powf(self.p.cache_entries as f64),
        }
    }

    /// Expected misses of a chain of this weight and size: `weight * miss_probability(density)`.
    fn cost(&self, weight: f64, size: u64) -> f64 {
        weight * self.miss_probability(weight / size as f64)
    }

    /// Distance locality of `count` calls between two addresses.
    fn dist_score(&self, s: u64, t: u64, count: u64) -> f64 {
        let d = s.abs_diff(t);
        let d = if d == 0 { 0.1 } else { d as f64 };
        // LLVM's power, 0.25, as two square roots: the same value within a rounding or two,
        // and several times cheaper than `powf` on the sweep that dominates the run time.
        let decay = if self.p.distance_power == 0.25 {
            d.sqrt().sqrt().recip()
        } else {
            d.powf(-self.p.distance_power)
        };
        count as f64 * decay
    }

    /// Distance value of one jump whose caller starts at `caller` (`caller_size` bytes) and
    /// whose callee starts at `callee` in the concatenation, minus its value "before" (at the
    /// whole hot code's distance). The call leaves from the middle of the caller.
    fn jump_value(&self, caller: u64, caller_size: u64, callee: u64, count: u64) -> f64 {
        let s = caller.saturating_add(caller_size / 2);
        self.dist_score(s, callee, count) - count as f64 * self.before
    }

    /// Gain of concatenating chains `x` and `y` whose jumps are worth `dist_xy` as `X+Y` and
    /// `dist_yx` as `Y+X` (see the module docs).
    fn gain(&self, x: &Stat, y: &Stat, dist_xy: f64, dist_yx: f64) -> (f64, MergeType) {
        let (wx, wy) = (x.weight, y.weight);
        let (sx, sy) = (x.size as f64, y.size as f64);
        // `cost` is `weight * miss_probability(density)` of each chain, kept by the engine.
        let cur = x.cost + y.cost;
        let new = (wx + wy) * self.miss_probability((wx + wy) / (sx + sy));
        let freq = cur - new;
        let total = |dist: f64| {
            let g = dist + self.p.frequency_scale * freq;
            if g >= 0.0 {
                g / sx.min(sy)
            } else {
                g
            }
        };
        let (xy, yx) = (total(dist_xy), total(dist_yx));
        if yx > xy + EPS {
            (yx, MergeType::YX)
        } else {
            (xy, MergeType::XY)
        }
    }
}

/// Orders nodes by Cache-Directed Sort (see the module docs); returns a permutation of `0..n`,
/// never-seen nodes last in input order.
pub fn cdsort_layout(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    params: &CdSortParams,
) -> Result<Vec<u32>, Error> {
    let n = check_graph(sizes, counts, edges)?;
    let node_size: Vec<u64> = sizes.iter().map(|&s| s.max(1)).collect();
    // Weight = max(self, total in, total out), summed saturating over non-recursive edges.
    let (inc, out, looped) = call_totals(n, edges);
    let seen = seen_by_totals(counts, &inc, &out, &looped);
    let weight: Vec<f64> = (0..n)
        .map(|v| counts[v].max(inc[v]).max(out[v]) as f64)
        .collect();
    let total_size = (0..n)
        .filter(|&v| counts[v] > 0)
        .fold(0u64, |a, v| a.saturating_add(node_size[v]));
    let mut model = Model {
        p: params,
        total_samples: counts.iter().map(|&c| c as f64).sum(),
        before: 0.0,
        powi: false,
    };
    model.before = model.dist_score(0, total_size, 1);
    if let Some(kept) = params.large.sparsify(n, edges) {
        model.powi = LARGE_GRAPH_POWI;
        return Ok(gated_layout(
            &model, &node_size, &weight, &seen, &kept, params,
        ));
    }
    let mut chains = Chains::new(node_size, weight, edges, params.max_chain_size);
    greedy_merge(
        &mut chains,
        params.max_chain_size,
        Scan::All,
        |caller, caller_size, callee, count| model.jump_value(caller, caller_size, callee, count),
        |_, x, y, xy, yx| model.gain(x, y, xy, yx),
        |w, size| model.cost(w, size),
    );
    Ok(concat_chains(
        &chains,
        &seen,
        |c| density(&chains, c),
        |a, b| b.total_cmp(a),
    ))
}

/// Each node's total incoming and outgoing call counts over the non-recursive edges, summed
/// saturating.
///
/// Summed in 32-bit counters, which take half the memory of 64-bit ones (8 MiB at 1,000,000
/// nodes instead of 16), so that more of them stay in the cache while the edges, in no
/// order, update them at random: a counter that wraps adds 2^32 to its node's carry, kept
/// aside (rare: a node's calls must add up to four billion), and a count of 2^32 or more goes
/// there whole. The result is the exact sum, clamped as a saturating sum would be.
///
/// Also returns the nodes of the recursive edges of a positive count, which the sums leave
/// out, for [`seen_by_totals`].
fn call_totals(n: usize, edges: &[EdgeCount]) -> (Vec<u64>, Vec<u64>, Vec<u32>) {
    // (node, 0 for out or 1 for in, amount) to add beside the 32-bit counters.
    let mut aside: Vec<(u32, usize, u64)> = Vec::new();
    let mut looped: Vec<u32> = Vec::new();
    let mut low = [vec![0u32; n], vec![0u32; n]];
    for e in edges {
        if e.src == e.dst {
            if e.count > 0 {
                looped.push(e.src);
            }
            continue;
        }
        for (side, v) in [(0, e.src), (1, e.dst)] {
            let c = &mut low[side][v as usize];
            match u32::try_from(e.count) {
                Ok(count) => {
                    let (sum, wrapped) = c.overflowing_add(count);
                    *c = sum;
                    if wrapped {
                        aside.push((v, side, 1 << 32));
                    }
                }
                Err(_) => aside.push((v, side, e.count)),
            }
        }
    }
    let mut sums = low.map(|l| l.into_iter().map(u64::from).collect::<Vec<u64>>());
    if !aside.is_empty() {
        let mut exact = sums
            .each_ref()
            .map(|s| s.iter().map(|&v| u128::from(v)).collect::<Vec<u128>>());
        for (v, side, amount) in aside {
            exact[side][v as usize] += u128::from(amount);
        }
        for (sums, exact) in sums.iter_mut().zip(&exact) {
            for (s, &t) in sums.iter_mut().zip(exact) {
                *s = u64::try_from(t).unwrap_or(u64::MAX);
            }
        }
    }
    let [out, inc] = sums;
    (inc, out, looped)
}

/// The seen nodes ([`crate::seen_nodes`]) from the totals of [`call_totals`]: a node with a
/// positive count, a positive total in or out (a non-recursive edge of a positive count), or
/// a recursive edge of a positive count (`looped`). The same as [`crate::seen_nodes`] without
/// its pass over the edges, whose writes at random took 0.03 s of wall time on the scale
/// benchmark's 1,000,000-function graph.
fn seen_by_totals(counts: &[u64], inc: &[u64], out: &[u64], looped: &[u32]) -> Vec<bool> {
    let mut seen: Vec<bool> = (0..counts.len())
        .map(|v| counts[v] > 0 || inc[v] > 0 || out[v] > 0)
        .collect();
    for &v in looped {
        seen[v as usize] = true;
    }
    seen
}

/// A chain's density, weight per byte (the key the final chains are sorted by, descending).
fn density(chains: &Chains, c: u32) -> f64 {
    let c = &chains.stat[c as usize];
    c.weight / c.size as f64
}

/// The large-graph path (see the module docs): merges along the kept calls `kept`, starting
/// from their paths, sweeping only the nodes within [`LARGE_GRAPH_REACH`] of a chain's ends,
/// on the nodes renamed by [`gated_names`] so that the records the merging reads at random
/// are mostly near each other.
fn gated_layout(
    model: &Model,
    node_size: &[u64],
    weight: &[f64],
    seen: &[bool],
    kept: &Kept,
    params: &CdSortParams,
) -> Vec<u32> {
    let n = node_size.len();
    let len = params.large.path_len.min(params.max_chain_size);
    let (order, paths) = gated_names(node_size, weight, seen, &kept.heaviest, len);
    let mut name = vec![0u32; n];
    for (new, &old) in order.iter().enumerate() {
        name[old as usize] = new as u32;
    }
    // No hub cap here (see LARGE_GRAPH_HUB_CAP).
    let mut chains = Chains::renamed(
        order.iter().map(|&v| node_size[v as usize]).collect(),
        order.iter().map(|&v| weight[v as usize]).collect(),
        &kept.calls,
        if LARGE_GRAPH_HUB_CAP {
            params.max_chain_size
        } else {
            usize::MAX
        },
        |v| name[v as usize],
    );
    drop(name);
    // Each path's nodes are consecutive names.
    let mut path: Vec<u32> = Vec::with_capacity(len);
    for &(first, count) in &paths {
        path.clear();
        path.extend(first..first + count);
        chains.pre_merge(&path);
    }
    greedy_merge(
        &mut chains,
        params.max_chain_size,
        Scan::Boundary(LARGE_GRAPH_REACH),
        |caller, caller_size, callee, count| model.jump_value(caller, caller_size, callee, count),
        |_, x, y, xy, yx| model.gain(x, y, xy, yx),
        |w, size| model.cost(w, size),
    );
    let seen_by_name: Vec<bool> = order.iter().map(|&v| seen[v as usize]).collect();
    let mut layout = concat_chains(
        &chains,
        &seen_by_name,
        |c| density(&chains, c),
        |a, b| b.total_cmp(a),
    );
    for v in &mut layout {
        *v = order[*v as usize];
    }
    layout
}

/// New names for the nodes of a gated run, as `order` (new name -> node): the paths of the
/// calls `heaviest` (at most `max_len` nodes each) one after another, densest path first, then
/// the other seen nodes, densest first, then the never-seen nodes in input order; and each
/// path as (its first new name, its length). Ties go to the path found first (paths are
/// found by their first node's index) and to the smaller node index.
///
/// Why: the merging reads a record of every chain and node it meets at random, and the
/// benchmark's nodes, like a symbol-sorted profile's, are hot and cold in no order. Named
/// this way a path's nodes, swept and rewritten together, are adjacent, and the hot chains,
/// which most calls lead to, share a few cache lines at the front of each array. On the
/// 1,000,000-function benchmark graph the first evaluation of all pairs went from 0.40-0.46
/// to 0.18-0.20 s of wall time, and CDSort from 2.10-2.47 to 1.78-1.90 s of CPU in quiet
/// runs (`docs/journal/scale.md`, "Scale", third round).
fn gated_names(
    node_size: &[u64],
    weight: &[f64],
    seen: &[bool],
    heaviest: &[(u32, u32)],
    max_len: usize,
) -> (Vec<u32>, Vec<(u32, u32)>) {
    let n = node_size.len();
    let mut found: Vec<u32> = Vec::with_capacity(n);
    let mut paths: Vec<(f64, u32, u32)> = Vec::new();
    for_each_call_path(n, heaviest, max_len, |p| {
        let (w, size) = p.iter().fold((0.0, 0u64), |(w, s), &v| {
            (
                w + weight[v as usize],
                s.saturating_add(node_size[v as usize]),
            )
        });
        paths.push((w / size as f64, found.len() as u32, p.len() as u32));
        found.extend_from_slice(p);
    });
    paths.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut named: Vec<(u32, u32)> = Vec::with_capacity(paths.len());
    let mut on_path = vec![false; n];
    for &(_, at, len) in &paths {
        named.push((order.len() as u32, len));
        let p = &found[at as usize..(at + len) as usize];
        order.extend_from_slice(p);
        for &v in p {
            on_path[v as usize] = true;
        }
    }
    drop(found);
    // The other seen nodes with their densities, computed once rather than twice in every
    // comparison of the sort, each a read at random (128,770 nodes on the scale benchmark's
    // 1,000,000-function graph: the names went from 0.12-0.15 to 0.11-0.14 s of wall time).
    let mut singles: Vec<(f64, u32)> = (0..n as u32)
        .filter(|&v| seen[v as usize] && !on_path[v as usize])
        .map(|v| (weight[v as usize] / node_size[v as usize] as f64, v))
        .collect();
    singles.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    order.extend(singles.iter().map(|&(_, v)| v));
    drop(singles);
    order.extend((0..n as u32).filter(|&v| !seen[v as usize]));
    (order, named)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use crate::{ext_tsp_score, page_locality_score, ExtTspParams, PAGE_SIZE};
    use proptest::prelude::*;

    fn layout(sizes: &[u64], counts: &[u64], edges: &[EdgeCount]) -> Vec<u32> {
        cdsort_layout(sizes, counts, edges, &CdSortParams::default()).unwrap()
    }

    // Place the hot chain 0 -> 3 -> 4 -> 2 continuously ahead of the colder functions.
    #[test]
    fn hot_chain() {
        let sizes = [64, 64, 64, 64, 64, 5000];
        let counts = [10, 1, 40, 30, 20, 35];
        let edges = [e(0, 3, 100), e(3, 4, 100), e(4, 2, 100)];
        assert_eq!(layout(&sizes, &counts, &edges), vec![0, 3, 4, 2, 1, 5]);
    }

    // A function that samples nothing but is called often is weighted by its calls: callee 1
    // (weight 50 from calls) sits with caller 0, ahead of the lukewarm 2.
    #[test]
    fn call_counts_weigh_functions() {
        let l = layout(&[64, 64, 64], &[5, 0, 3], &[e(0, 1, 50)]);
        assert_eq!(l, vec![0, 1, 2]);
    }

    // Two big functions joined by a call merge caller first (the call leaves from the middle of
    // 2, 1500 bytes before 0 starts, against 1500 + 3000 the other way round); the small hot 1
    // is denser and goes first, and the call stays inside the first 4 KiB page.
    #[test]
    fn big_caller_then_callee() {
        let sizes = [3000, 64, 3000];
        let edges = [e(2, 0, 100)];
        let l = layout(&sizes, &[10, 50, 10], &edges);
        assert_eq!(l, vec![1, 2, 0]);
        assert_eq!(
            page_locality_score(&sizes, &edges, &l, PAGE_SIZE).unwrap(),
            100
        );
    }

    proptest! {
        // The 32-bit counters and what is kept aside give the plain saturating 64-bit sums:
        // with counts that wrap a counter once or several times, counts too large for one,
        // and sums that saturate.
        #[test]
        fn call_totals_equal_saturating_sums(
            calls in proptest::collection::vec(
                (
                    0u32..6,
                    0u32..6,
                    prop_oneof![
                        0u64..10,
                        u64::from(u32::MAX) - 3..u64::from(u32::MAX) + 3,
                        u64::MAX - 3..=u64::MAX,
                        any::<u64>(),
                    ],
                ),
                0..40,
            ),
        ) {
            let edges: Vec<EdgeCount> = calls.into_iter().map(|(s, d, c)| e(s, d, c)).collect();
            let (mut inc, mut out) = (vec![0u64; 6], vec![0u64; 6]);
            for x in edges.iter().filter(|x| x.src != x.dst) {
                out[x.src as usize] = out[x.src as usize].saturating_add(x.count);
                inc[x.dst as usize] = inc[x.dst as usize].saturating_add(x.count);
            }
            let looped: Vec<u32> = edges
                .iter()
                .filter(|x| x.src == x.dst && x.count > 0)
                .map(|x| x.src)
                .collect();
            prop_assert_eq!(call_totals(6, &edges), (inc, out, looped));
        }

        // The seen nodes found from the call totals are those `seen_nodes` finds.
        #[test]
        fn seen_by_totals_equals_seen_nodes((_sizes, counts, edges) in graph()) {
            let (inc, out, looped) = call_totals(counts.len(), &edges);
            prop_assert_eq!(
                seen_by_totals(&counts, &inc, &out, &looped),
                crate::seen_nodes(&counts, &edges)
            );
        }

        // A permutation, the same twice, unseen nodes last in input order, finite score.
        #[test]
        fn properties((sizes, counts, edges) in graph()) {
            let l = layout(&sizes, &counts, &edges);
            prop_assert!(is_permutation(&l, sizes.len()));
            prop_assert_eq!(&l, &layout(&sizes, &counts, &edges));
            let un = unseen(&counts, &edges);
            prop_assert_eq!(&l[l.len() - un.len()..], &un[..]);
            let s = ext_tsp_score(&sizes, &edges, &l, &ExtTspParams::default()).unwrap();
            prop_assert!(s.is_finite() && s >= 0.0);
        }
    }
}

#[cfg(test)]
mod large_tests {
    use super::*;
    use crate::large::tests::forced;
    use crate::testutil::e;

    fn gated(keep: usize, path_len: usize) -> CdSortParams {
        CdSortParams {
            large: forced(keep, path_len),
            ..Default::default()
        }
    }

    // The hot chain 0 -> 3 -> 4 -> 2 is one pre-merged path under the forced gate, placed
    // ahead of the colder functions, as without the gate.
    #[test]
    fn gated_hot_chain() {
        let sizes = [64, 64, 64, 64, 64, 5000];
        let counts = [10, 1, 40, 30, 20, 35];
        let edges = [e(0, 3, 100), e(3, 4, 100), e(4, 2, 100)];
        let l = cdsort_layout(&sizes, &counts, &edges, &gated(1, 64)).unwrap();
        assert_eq!(l, vec![0, 3, 4, 2, 1, 5]);
    }

    // As in ExtTSP's test: CDSort merges the pair 2 -> 1 (two calls) first, and 0 joins in
    // front; the gate pre-merges the heaviest single call 0 -> 1, and 2 joins after it (its
    // calls leave from its middle, 96 bytes from 1 either way round, and `X+Y` wins ties).
    #[test]
    fn gated_merges_from_the_heaviest_paths() {
        let sizes = [64, 64, 64];
        let counts = [1, 1, 1];
        let edges = [e(0, 1, 10), e(2, 1, 6), e(2, 1, 6)];
        let l = |p: &CdSortParams| cdsort_layout(&sizes, &counts, &edges, p).unwrap();
        assert_eq!(l(&CdSortParams::default()), vec![0, 2, 1]);
        assert_eq!(l(&gated(2, 64)), vec![0, 1, 2]);
    }

    // The gated run's names: paths first, densest first (path 2 -> 3 weighs 10 per byte of
    // 2 bytes, 0 -> 1 one per byte), the other seen nodes densest first (5 over 4), then the
    // never-seen 6 and 7 in input order.
    #[test]
    fn gated_names_put_dense_paths_first() {
        let sizes = [1, 1, 1, 1, 1, 1, 1, 1];
        let weight = [1.0, 1.0, 10.0, 10.0, 2.0, 5.0, 0.0, 0.0];
        let seen = [true, true, true, true, true, true, false, false];
        let heaviest = [(2, 3), (0, 1)];
        let (order, paths) = gated_names(&sizes, &weight, &seen, &heaviest, 64);
        assert_eq!(order, vec![2, 3, 0, 1, 5, 4, 6, 7]);
        assert_eq!(paths, vec![(0, 2), (2, 2)]);
    }
}
