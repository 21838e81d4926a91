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
//! Complexity: the priority structure is a binary heap with lazy deletion (an entry is stale
//! when either chain has merged since it was pushed). A merge of `X` and `Y` costs
//! O(|X| + |Y|) to concatenate (at most `max_chain_size`), O(deg(Y) log deg) to move `Y`'s
//! adjacency onto `X`, and recomputes the gain with each neighbour of the merged chain, in time
//! linear in the edges between them, each pushed in O(log H). There are fewer than `n` merges,
//! so the total is O(n · (max_chain_size + d · log H) + Σ_merges jumps(merged chain)), where `d`
//! is the chain degree; for real call graphs (small degrees but a few hubs) this is close to
//! O((n + E) log E). The heap holds one entry per push, stale ones included; hubs make it big
//! (100,000 functions and 1,000,000 power-law calls take about 20 s, see `docs/algorithms.md`),
//! so this is for real profiles, not the million-function case C3 meets. An indexed heap with
//! decrease-key, and recomputing only the pairs whose gain can change, are the next steps.

use crate::{append_unseen, check_graph, seen_nodes, EdgeCount, Error, ExtTspParams};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};

/// LLVM's `ext-tsp-max-chain-size`: the largest chain, in nodes, that merging may create.
pub const EXT_TSP_MAX_CHAIN_SIZE: usize = 512;

/// Gains at or below this are treated as no gain (LLVM's `EPS`), so rounding noise in `f64`
/// sums never causes a merge.
pub(crate) const EPS: f64 = 1e-9;

/// Parameters of [`ext_tsp_layout`]; the defaults are LLVM's (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtTspLayoutParams {
    /// The score being maximised.
    pub score: ExtTspParams,
    /// Largest chain, in nodes, that a merge may create.
    pub max_chain_size: usize,
}

impl Default for ExtTspLayoutParams {
    fn default() -> Self {
        ExtTspLayoutParams {
            score: ExtTspParams::default(),
            max_chain_size: EXT_TSP_MAX_CHAIN_SIZE,
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

/// The ExtTSP value of one edge whose caller ends at `from` and whose callee starts at `to`:
/// the same formula as [`crate::ext_tsp_score`], term for term.
pub(crate) fn edge_score(from: u64, to: u64, count: u64, p: &ExtTspParams) -> f64 {
    let weight = if from == to {
        p.fallthrough_weight
    } else if from < to {
        let d = to - from;
        if d <= p.forward_distance && p.forward_distance > 0 {
            p.forward_weight * (1.0 - d as f64 / p.forward_distance as f64)
        } else {
            0.0
        }
    } else {
        let d = from - to;
        if d <= p.backward_distance && p.backward_distance > 0 {
            p.backward_weight * (1.0 - d as f64 / p.backward_distance as f64)
        } else {
            0.0
        }
    };
    weight * count as f64
}

/// A non-recursive edge with a positive count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Jump {
    pub src: u32,
    pub dst: u32,
    pub count: u64,
}

/// The chains of the greedy merging, shared by [`ext_tsp_layout`] and [`crate::cdsort`].
///
/// Chain `c` starts as node `c` alone; a merged-away chain is left empty. Each chain knows the
/// other chains it shares jumps with and which jumps those are.
pub(crate) struct Chains {
    /// Nodes of each chain, in layout order.
    pub nodes: Vec<Vec<u32>>,
    /// Size of each chain in bytes (sum of its nodes' sizes, saturating).
    pub size: Vec<u64>,
    /// Weight of each chain (sum of its nodes' weights as the algorithm counts them).
    pub weight: Vec<f64>,
    /// Size of each node as this algorithm counts it.
    pub node_size: Vec<u64>,
    /// Start of each node, in bytes from the start of its chain.
    pub offset: Vec<u64>,
    /// The chain each node is in.
    owner: Vec<u32>,
    /// All jumps of the graph.
    pub jumps: Vec<Jump>,
    /// For each chain: neighbouring chain -> indices into `jumps` between the two.
    adj: Vec<BTreeMap<u32, Vec<u32>>>,
    /// Bumped on every merge into the chain; heap entries with an older version are stale.
    version: Vec<u32>,
}

/// Which concatenation a merge makes; `X` is the chain with the smaller id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MergeType {
    /// `X` then `Y`.
    XY,
    /// `Y` then `X`.
    YX,
}

/// A candidate merge in the heap: highest gain first, then the smallest chain ids.
struct Candidate {
    gain: f64,
    x: u32,
    y: u32,
    vx: u32,
    vy: u32,
    merge: MergeType,
}

impl Candidate {
    fn key(&self) -> (f64, Reverse<u32>, Reverse<u32>) {
        (self.gain, Reverse(self.x), Reverse(self.y))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.key(), other.key());
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
    }
}

impl Chains {
    /// One chain per node, with the node's size and weight; jumps are the non-recursive edges
    /// with a positive count.
    pub fn new(node_size: Vec<u64>, weight: Vec<f64>, edges: &[EdgeCount]) -> Chains {
        let n = node_size.len();
        let jumps: Vec<Jump> = edges
            .iter()
            .filter(|e| e.src != e.dst && e.count > 0)
            .map(|e| Jump {
                src: e.src,
                dst: e.dst,
                count: e.count,
            })
            .collect();
        let mut adj: Vec<BTreeMap<u32, Vec<u32>>> = vec![BTreeMap::new(); n];
        for (i, j) in jumps.iter().enumerate() {
            adj[j.src as usize].entry(j.dst).or_default().push(i as u32);
            adj[j.dst as usize].entry(j.src).or_default().push(i as u32);
        }
        Chains {
            nodes: (0..n as u32).map(|v| vec![v]).collect(),
            size: node_size.clone(),
            weight,
            node_size,
            offset: vec![0; n],
            owner: (0..n as u32).collect(),
            jumps,
            adj,
            version: vec![0; n],
        }
    }

    /// Start of node `v` when chains `x` and `y` are concatenated as `merge` says.
    pub fn merged_addr(&self, v: u32, x: u32, y: u32, merge: MergeType) -> u64 {
        let in_x = self.chain_of_member(v, x);
        let shift = match (merge, in_x) {
            (MergeType::XY, true) | (MergeType::YX, false) => 0,
            (MergeType::XY, false) => self.size[x as usize],
            (MergeType::YX, true) => self.size[y as usize],
        };
        self.offset[v as usize].saturating_add(shift)
    }

    /// Whether node `v` is in chain `x`.
    fn chain_of_member(&self, v: u32, x: u32) -> bool {
        self.owner[v as usize] == x
    }
}

/// Runs greedy merging with `gain(chains, x, y, jumps between them) -> (gain, merge type)`,
/// never creating a chain of more than `max_nodes` nodes, over the chains of `active` nodes.
pub(crate) fn greedy_merge<G>(chains: &mut Chains, active: &[bool], max_nodes: usize, gain: G)
where
    G: Fn(&Chains, u32, u32, &[u32]) -> (f64, MergeType),
{
    let mut heap = BinaryHeap::new();
    let push = |chains: &Chains, heap: &mut BinaryHeap<Candidate>, x: u32, y: u32| {
        let (x, y) = (x.min(y), x.max(y));
        if chains.nodes[x as usize].len() + chains.nodes[y as usize].len() > max_nodes {
            return;
        }
        let jumps = &chains.adj[x as usize][&y];
        let (g, merge) = gain(chains, x, y, jumps);
        if g > EPS {
            heap.push(Candidate {
                gain: g,
                x,
                y,
                vx: chains.version[x as usize],
                vy: chains.version[y as usize],
                merge,
            });
        }
    };
    for x in 0..chains.nodes.len() as u32 {
        if !active[x as usize] {
            continue;
        }
        let ys: Vec<u32> = chains.adj[x as usize]
            .keys()
            .copied()
            .filter(|&y| y > x)
            .collect();
        for y in ys {
            push(chains, &mut heap, x, y);
        }
    }
    while let Some(c) = heap.pop() {
        let (x, y) = (c.x as usize, c.y as usize);
        if chains.nodes[x].is_empty()
            || chains.nodes[y].is_empty()
            || chains.version[x] != c.vx
            || chains.version[y] != c.vy
        {
            continue;
        }
        chains.merge(c.x, c.y, c.merge);
        let neighbours: Vec<u32> = chains.adj[x].keys().copied().collect();
        for z in neighbours {
            push(chains, &mut heap, c.x, z);
        }
    }
}

impl Chains {
    /// Merges chain `y` into chain `x` (`x < y`) in the order `merge` says.
    fn merge(&mut self, x: u32, y: u32, merge: MergeType) {
        let (xi, yi) = (x as usize, y as usize);
        let ynodes = std::mem::take(&mut self.nodes[yi]);
        let (sx, sy) = (self.size[xi], self.size[yi]);
        match merge {
            MergeType::XY => {
                for &v in &ynodes {
                    self.offset[v as usize] = self.offset[v as usize].saturating_add(sx);
                }
                self.nodes[xi].extend_from_slice(&ynodes);
            }
            MergeType::YX => {
                for &v in &self.nodes[xi] {
                    self.offset[v as usize] = self.offset[v as usize].saturating_add(sy);
                }
                let xnodes = std::mem::replace(&mut self.nodes[xi], ynodes);
                self.nodes[xi].extend_from_slice(&xnodes);
            }
        }
        for &v in &self.nodes[xi] {
            self.owner[v as usize] = x;
        }
        self.size[xi] = sx.saturating_add(sy);
        self.weight[xi] += self.weight[yi];
        self.version[xi] = self.version[xi].wrapping_add(1);
        self.version[yi] = self.version[yi].wrapping_add(1);
        // Move y's adjacency onto x; jumps between x and y become internal.
        let yadj = std::mem::take(&mut self.adj[yi]);
        self.adj[xi].remove(&y);
        for (z, js) in yadj {
            if z == x {
                continue;
            }
            let zi = z as usize;
            self.adj[zi].remove(&y);
            self.adj[zi].entry(x).or_default().extend_from_slice(&js);
            self.adj[xi].entry(z).or_default().extend_from_slice(&js);
        }
    }
}

/// ExtTSP gain of concatenating `x` and `y`: the score of the jumps between them, for the
/// better of `X+Y` and `Y+X` (`X+Y` on a tie within [`EPS`]).
fn ext_tsp_gain(
    chains: &Chains,
    x: u32,
    y: u32,
    jumps: &[u32],
    p: &ExtTspParams,
) -> (f64, MergeType) {
    let score = |merge: MergeType| {
        jumps
            .iter()
            .map(|&j| {
                let j = chains.jumps[j as usize];
                let from = chains
                    .merged_addr(j.src, x, y, merge)
                    .saturating_add(chains.node_size[j.src as usize]);
                let to = chains.merged_addr(j.dst, x, y, merge);
                edge_score(from, to, j.count, p)
            })
            .sum::<f64>()
    };
    let (xy, yx) = (score(MergeType::XY), score(MergeType::YX));
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
    let n = check_graph(sizes, counts, edges)?;
    let seen = seen_nodes(counts, edges);
    let weights = counts.iter().map(|&c| c as f64).collect();
    let mut chains = Chains::new(sizes.to_vec(), weights, edges);
    greedy_merge(&mut chains, &seen, params.max_chain_size, |c, x, y, js| {
        ext_tsp_gain(c, x, y, js, &params.score)
    });
    // Density = self weight / size, compared exactly as cross products in u128; a zero-size
    // chain counts as one byte. Ties by chain id.
    let mut live: Vec<(u32, u64, u64)> = (0..n as u32)
        .filter(|&c| seen[c as usize] && !chains.nodes[c as usize].is_empty())
        .map(|c| {
            let w = chains.nodes[c as usize]
                .iter()
                .fold(0u64, |a, &v| a.saturating_add(counts[v as usize]));
            (c, w, chains.size[c as usize].max(1))
        })
        .collect();
    live.sort_by(|a, b| {
        let l = a.1 as u128 * b.2 as u128;
        let r = b.1 as u128 * a.2 as u128;
        r.cmp(&l).then(a.0.cmp(&b.0))
    });
    let mut layout: Vec<u32> = Vec::with_capacity(n);
    for (c, _, _) in live {
        layout.extend_from_slice(&chains.nodes[c as usize]);
    }
    append_unseen(&mut layout, &seen);
    Ok(layout)
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

    // The per-edge score used for gains is the one `ext_tsp_score` sums, term for term.
    #[test]
    fn edge_score_matches_the_score_function() {
        let sizes = [100u64, 512, 0, 1000, 7];
        let edges = [e(0, 1, 10), e(0, 2, 3), e(3, 0, 9), e(2, 1, 64), e(4, 3, 5)];
        let order = [4u32, 0, 2, 1, 3];
        let p = ExtTspParams::default();
        let mut addr = [0u64; 5];
        let mut at = 0;
        for &v in &order {
            addr[v as usize] = at;
            at += sizes[v as usize];
        }
        let sum: f64 = edges
            .iter()
            .map(|j| {
                let from = addr[j.src as usize] + sizes[j.src as usize];
                edge_score(from, addr[j.dst as usize], j.count, &p)
            })
            .sum();
        assert_eq!(ext_tsp_score(&sizes, &edges, &order, &p).unwrap(), sum);
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
    }
}
