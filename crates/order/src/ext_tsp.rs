//! ExtTSP function ordering: greedy chain merging that maximises the Extended TSP score.
//!
//! Newell & Pupyrev, "Improved Basic Block Reordering", IEEE Transactions on Computers 69(12),
//! 2020, formulate code layout as maximising the ExtTSP objective ([`crate::score::ext_tsp_score`]):
//! an edge earns its full count when the callee starts exactly where the caller ends, a linearly
//! decaying tenth of it up to 1024 bytes forward or 640 bytes backward, and nothing beyond. The
//! problem is NP-hard; their heuristic, which LLVM's `CodeLayout.cpp` implements
//! (`computeExtTspLayout`) and BOLT uses for blocks and, at function level, for HFSort+'s
//! successor, is greedy chain merging:
//! 1. every seen node starts as its own chain;
//! 2. for every pair of chains joined by at least one edge, compute the best *merge gain*: the
//!    increase of the score when the two chains are concatenated, `X+Y` or `Y+X`;
//! 3. merge the pair with the largest positive gain, recompute the gains of the merged chain with
//!    its neighbours, and repeat until no pair gains;
//! 4. concatenate the chains by density (self weight / size, descending).
//!
//! Here a node is a function and an edge a call, scored as [`crate::score`] scores it: from the
//! caller's *end* to the callee's start, so the merging optimises exactly the score a layout is
//! judged by. Because a concatenation keeps the relative positions inside `X` and inside `Y`,
//! the gain of `X+Y` is just the score of the edges *between* `X` and `Y` in the merged chain.
//!
//! What can be proved, and is tested: the score of the result is at least the sum of the gains of
//! all merges (every gain is the score of edges that stay inside one chain afterwards, and
//! edges between final chains score `>= 0`), and the first merge joins the pair of nodes with the
//! best single-pair gain, so the result scores at least `max(count)` over non-recursive edges
//! (that edge as a fall-through). It is *not* guaranteed to beat `hot` on every graph.
//!
//! Parameters ([`ExtTspLayoutParams`]), with their source:
//! - the score weights and distances: [`ExtTspParams::default`], LLVM's defaults (fall-through
//!   1.0, forward 0.1 within 1024 bytes, backward 0.1 within 640 bytes), tuned by the authors on
//!   Facebook's data-center binaries. LLVM scores an unconditional fall-through 1.05 for basic
//!   blocks; a call has no such distinction, so 1.0 is used throughout.
//! - `max_chain_size` = 512 nodes: LLVM's `ext-tsp-max-chain-size`. A pair whose merged chain would
//!   hold more nodes is not considered, which bounds the cost of one merge.
//!
//! Deliberately left out (turned down for now): LLVM's chain *splitting* merge types (`X1+Y+X2`
//! etc., tried for chains of at most 128 nodes); they matter for basic blocks with loops far more
//! than for calls, and cost O(|X|) gain evaluations per pair. Also left out: LLVM's
//! `ext-tsp-max-merge-density-ratio`, a guard against gluing a cold chain onto a hot one.
//!
//! Ties are broken deterministically: among equal gains the pair with the smaller chain ids
//! (a chain's id is the smallest node index it started from, kept by the merged chain) wins;
//! `X+Y` is preferred to `Y+X` on an equal gain, `X` being the chain with the smaller id; chains
//! of equal density are concatenated by id.
//!
//! Complexity: see `merge.rs`, the engine this shares with CDSort. A merge re-evaluates
//! the merged chain against its neighbours in one sweep over the jumps of the nodes near its
//! ends; a node takes part with at most `max_chain_size` of its heaviest jumps (the bound a
//! chain puts on its partners; graphs where no node has more jumps are merged exactly as
//! without it). What is left is a random memory access per jump swept and per pair queued.
//!
//! Graphs above the large-graph gate ([`crate::large`], 2,000,000 calls: hundreds of times any
//! real profile) are merged on each function's 4 heaviest calls, starting from the paths those
//! calls form heaviest first (the fall-throughs the loop would make first). At 1,000,000
//! functions and 10,000,000 calls that took ExtTSP from 6 to 8 s of CPU to 2.0 to 2.7 s, for
//! 5.6% of the score, and a second round of faster passes (same layouts) to 1.4 to 1.7 s
//! (`docs/journal/scale.md`, "Scale"); below the gate the layout is unchanged.

use crate::large::for_each_call_path;
use crate::merge::{concat_chains, greedy_merge, Chains, MergeType, Scan, EPS};
use crate::score::edge_score;
use crate::{check_graph, seen_nodes, EdgeCount, Error, ExtTspParams, LargeGraph};

/// LLVM's `ext-tsp-max-chain-size`: the largest chain, in nodes, that merging may create.
pub const EXT_TSP_MAX_CHAIN_SIZE: usize = 512;

/// Parameters of [`ext_tsp_layout`]; the defaults are LLVM's (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtTspLayoutParams {
    /// The score being maximised.
    pub score: ExtTspParams,
    /// Largest chain, in nodes, that a merge may create.
    pub max_chain_size: usize,
    /// The size gate: on graphs above it, merge along each function's heaviest calls only.
    pub large: LargeGraph,
    /// Node 0 starts the layout: a merge never puts a chain before the one holding it, and
    /// that chain comes first whatever its density (a function's entry block; LLVM's block
    /// layout keeps the entry first the same way). Graphs above the large-graph gate are
    /// pre-merged along paths that may not honour it. Off for functions.
    pub entry_first: bool,
}

impl Default for ExtTspLayoutParams {
    fn default() -> Self {
        ExtTspLayoutParams {
            score: ExtTspParams::default(),
            max_chain_size: EXT_TSP_MAX_CHAIN_SIZE,
            large: LargeGraph::default(),
            entry_first: false,
        }
    }
}

impl ExtTspLayoutParams {
    /// The parameters as `key=value` pairs separated by commas, for the order file's metadata.
    pub fn describe(&self) -> String {
        let s = &self.score;
        format!(
            "fallthrough-weight={},forward-weight={},backward-weight={},forward-distance={},\
             backward-distance={},max-chain-size={}",
            s.fallthrough_weight,
            s.forward_weight,
            s.backward_weight,
            s.forward_distance,
            s.backward_distance,
            self.max_chain_size
        )
    }
}

/// ExtTSP gain of concatenating two chains: the score of the jumps between them, for the better
/// of `X+Y` and `Y+X` (`X+Y` on a tie within [`EPS`]).
fn better(xy: f64, yx: f64) -> (f64, MergeType) {
    if yx > xy + EPS {
        (yx, MergeType::YX)
    } else {
        (xy, MergeType::XY)
    }
}

/// Orders nodes by greedy ExtTSP chain merging (see the module docs); returns a permutation of
/// `0..n`, never-seen nodes last in input order.
pub fn ext_tsp_layout(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    params: &ExtTspLayoutParams,
) -> Result<Vec<u32>, Error> {
    let sp = &params.score;
    // Beyond the longer of the two distances a jump scores nothing (see `merge::Scan`).
    let reach = sp.forward_distance.max(sp.backward_distance);
    layout_with_scan(sizes, counts, edges, params, Scan::Boundary(reach))
}

/// [`ext_tsp_layout`] sweeping the nodes that `scan` says; every node (`Scan::All`) gives the
/// same layout, only slower, which a test checks.
fn layout_with_scan(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    params: &ExtTspLayoutParams,
    scan: Scan,
) -> Result<Vec<u32>, Error> {
    let n = check_graph(sizes, counts, edges)?;
    let seen = seen_nodes(counts, edges);
    let weights = counts.iter().map(|&c| c as f64).collect();
    let sparse = params.large.sparsify(n, edges);
    let jumps = sparse.as_ref().map_or(edges, |k| &k.calls);
    let mut chains = Chains::new(sizes.to_vec(), weights, jumps, params.max_chain_size);
    if let Some(kept) = &sparse {
        // Large graphs: merging starts from the heaviest calls' paths (see the module docs).
        let len = params.large.path_len.min(params.max_chain_size);
        for_each_call_path(n, &kept.heaviest, len, |p| chains.pre_merge(p));
    }
    let sp = &params.score;
    greedy_merge(
        &mut chains,
        params.max_chain_size,
        scan,
        |caller, caller_size, callee, count| {
            edge_score(caller.saturating_add(caller_size), callee, count, sp)
        },
        // Slot 0 is the chain holding node 0 (a merge keeps the smaller slot), and it is `X`.
        |x, _, _, xy, yx| {
            if params.entry_first && x == 0 {
                (xy, MergeType::XY)
            } else {
                better(xy, yx)
            }
        },
        |_, _| 0.0,
    );
    // Density = self weight / size, compared exactly as cross products in u128; a zero-size
    // chain counts as one byte.
    let key = |c: u32| {
        if params.entry_first && c == 0 {
            return (u64::MAX, 1);
        }
        let w = chains
            .members(c)
            .iter()
            .fold(0u64, |a, &v| a.saturating_add(counts[v as usize]));
        (w, chains.stat[c as usize].size.max(1))
    };
    let denser = |a: &(u64, u64), b: &(u64, u64)| {
        (u128::from(b.0) * u128::from(a.1)).cmp(&(u128::from(a.0) * u128::from(b.1)))
    };
    debug_assert_eq!(chains.slots(), n);
    Ok(concat_chains(&chains, &seen, key, denser))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use crate::{ext_tsp_score, hot_layout};
    use proptest::prelude::*;

    fn layout(sizes: &[u64], counts: &[u64], edges: &[EdgeCount]) -> Vec<u32> {
        ext_tsp_layout(sizes, counts, edges, &ExtTspLayoutParams::default()).unwrap()
    }

    // Place the hot chain 0 -> 3 -> 4 -> 2 continuously, in call order, ahead of colder chains.
    #[test]
    fn hot_chain() {
        let sizes = [64, 64, 64, 64, 64, 5000];
        let counts = [10, 1, 40, 30, 20, 35];
        let edges = [e(0, 3, 100), e(3, 4, 100), e(4, 2, 100)];
        let l = layout(&sizes, &counts, &edges);
        assert_eq!(l, vec![0, 3, 4, 2, 1, 5]);
        let p = ExtTspParams::default();
        assert_eq!(ext_tsp_score(&sizes, &edges, &l, &p).unwrap(), 300.0);
        // Hotness order scores 107 on the same graph (see score.rs).
        let hot = hot_layout(&sizes, &counts, &edges).unwrap();
        assert!(ext_tsp_score(&sizes, &edges, &hot, &p).unwrap() < 300.0);
    }

    // A call from 1 to 0 is best as the fall-through 1, 0 (Y+X), not as a backward jump (X+Y).
    #[test]
    fn picks_the_better_concatenation() {
        let l = layout(&[64, 64, 64], &[1, 1, 0], &[e(1, 0, 10)]);
        assert_eq!(l, vec![1, 0, 2]);
    }

    // Backward jumps count: 2 -> 0 (40) makes [0, 1, 2] worth more than [1, 2, 0] would be.
    #[test]
    fn backward_jump_breaks_the_tie() {
        // 0 -> 1 and 1 -> 2 are equally hot fall-throughs; 2 -> 0 is a short backward jump
        // (end of 2 at 192 back to 0: 0.1 * (1 - 192/640) * 40 = 2.8) whichever way round.
        let sizes = [64, 64, 64];
        let edges = [e(0, 1, 100), e(1, 2, 100), e(2, 0, 40)];
        let l = layout(&sizes, &[1, 1, 1], &edges);
        assert_eq!(l, vec![0, 1, 2]);
        let s = ext_tsp_score(&sizes, &edges, &l, &ExtTspParams::default()).unwrap();
        assert!((s - 202.8).abs() < 1e-9, "{s}");
    }

    // With `entry_first`, node 0 leads: the heavy jump 1 -> 0 would put 1 before it, so it
    // becomes a backward jump and 0 falls through to 2 instead; without, 1 goes first.
    #[test]
    fn entry_first_keeps_node_0_first() {
        let (sizes, counts) = ([64, 64, 64], [10, 10, 1]);
        let edges = [e(1, 0, 100), e(0, 2, 10)];
        assert_eq!(layout(&sizes, &counts, &edges), vec![1, 0, 2]);
        let p = ExtTspLayoutParams {
            entry_first: true,
            ..Default::default()
        };
        let l = ext_tsp_layout(&sizes, &counts, &edges, &p).unwrap();
        assert_eq!(l, vec![0, 2, 1]);
    }

    // No chain grows past max_chain_size: 0 -> 1 -> 2 stops at [0, 1]; denser 2 goes first.
    #[test]
    fn respects_max_chain_size() {
        let params = ExtTspLayoutParams {
            max_chain_size: 2,
            ..Default::default()
        };
        let l = ext_tsp_layout(
            &[64, 64, 64],
            &[1, 1, 5],
            &[e(0, 1, 10), e(1, 2, 10)],
            &params,
        )
        .unwrap();
        assert_eq!(l, vec![2, 0, 1]);
    }

    // Malformed arrays are errors, empty graphs an empty layout.
    #[test]
    fn rejects_bad_input() {
        assert!(layout(&[], &[], &[]).is_empty());
        let p = ExtTspLayoutParams::default();
        assert!(ext_tsp_layout(&[1], &[1, 2], &[], &p).is_err());
        assert!(ext_tsp_layout(&[1], &[1], &[e(0, 1, 1)], &p).is_err());
    }

    proptest! {
        // A permutation, the same twice, unseen nodes last in input order, finite score, and at
        // least the heaviest single call as a fall-through (the first merge's gain, see docs).
        #[test]
        fn properties((sizes, counts, edges) in graph()) {
            let l = layout(&sizes, &counts, &edges);
            prop_assert!(is_permutation(&l, sizes.len()));
            prop_assert_eq!(&l, &layout(&sizes, &counts, &edges));
            let un = unseen(&counts, &edges);
            prop_assert_eq!(&l[l.len() - un.len()..], &un[..]);
            let s = ext_tsp_score(&sizes, &edges, &l, &ExtTspParams::default()).unwrap();
            prop_assert!(s.is_finite() && s >= 0.0);
            let best = edges.iter().filter(|e| e.src != e.dst).map(|e| e.count as f64)
                .fold(0.0f64, f64::max);
            prop_assert!(s >= best * (1.0 - 1e-12), "score {} < heaviest call {}", s, best);
        }

        // With `entry_first` a seen node 0 leads every layout, still a permutation.
        #[test]
        fn entry_first_leads((sizes, counts, edges) in graph()) {
            let p = ExtTspLayoutParams { entry_first: true, ..Default::default() };
            let l = ext_tsp_layout(&sizes, &counts, &edges, &p).unwrap();
            prop_assert!(is_permutation(&l, sizes.len()));
            if !unseen(&counts, &edges).contains(&0) {
                prop_assert_eq!(l[0], 0);
            }
        }

        // Sweeping only the ends of chains loses nothing: the same layout as sweeping every
        // node, on graphs with chains long enough to have an interior (small sizes, many edges).
        #[test]
        fn boundary_scan_is_exact(
            (sizes, counts, edges) in graph(),
            small in proptest::collection::vec(0u64..400, 40),
        ) {
            let p = ExtTspLayoutParams::default();
            for sz in [sizes.clone(), small[..sizes.len()].to_vec()] {
                let fast = ext_tsp_layout(&sz, &counts, &edges, &p).unwrap();
                let full = layout_with_scan(&sz, &counts, &edges, &p, Scan::All).unwrap();
                prop_assert_eq!(fast, full);
            }
        }
    }
}

#[cfg(test)]
mod large_tests {
    use super::*;
    use crate::large::tests::forced;
    use crate::testutil::e;

    fn gated(keep: usize, path_len: usize) -> ExtTspLayoutParams {
        ExtTspLayoutParams {
            large: forced(keep, path_len),
            ..Default::default()
        }
    }

    // 1 is called by 0 (10) and twice by 2 (6 + 6). The greedy loop first makes 2 -> 1 a
    // fall-through (gain 12), then puts 0 in front, a call 64 bytes forward: [0, 2, 1]. The
    // forced gate pre-merges the heaviest single call, 0 -> 1, and 2 then goes in front
    // (forward 64 bytes beats backward 128): [2, 0, 1]. Paths of one node: the plain loop.
    #[test]
    fn gated_merges_from_the_heaviest_paths() {
        let sizes = [64, 64, 64];
        let counts = [1, 1, 1];
        let edges = [e(0, 1, 10), e(2, 1, 6), e(2, 1, 6)];
        let l = |p: &ExtTspLayoutParams| ext_tsp_layout(&sizes, &counts, &edges, p).unwrap();
        assert_eq!(l(&ExtTspLayoutParams::default()), vec![0, 2, 1]);
        assert_eq!(l(&gated(2, 64)), vec![2, 0, 1]);
        assert_eq!(l(&gated(2, 1)), vec![0, 2, 1]);
    }
}
