//! Greedy chain merging, the engine shared by [`crate::ext_tsp`] and [`crate::cdsort`].
//!
//! Both algorithms (Newell & Pupyrev's ExtTSP heuristic and Cache-Directed Sort, as LLVM's
//! `CodeLayout.cpp` implements them) run the same loop and differ only in the *gain* of
//! concatenating two chains:
//! 1. every node is a chain of one;
//! 2. for every pair of chains joined by a jump (a call edge), evaluate the gain of `X+Y` and of
//!    `Y+X` and queue the better one when it is positive;
//! 3. pop the best pair, concatenate it, and re-evaluate the merged chain against the chains it
//!    now shares jumps with; repeat until the queue is empty;
//! 4. order the final chains by density ([`concat_chains`]).
//!
//! How it scales (the first version moved per-chain `BTreeMap` adjacency lists on every merge,
//! and took 22.6 s for ExtTSP at 100,000 nodes and 1,000,000 power-law edges):
//! - **No chain-level adjacency.** Jumps are kept in a node-level CSR array (each jump copied
//!   under both endpoints, so a sweep reads memory sequentially instead of chasing edge
//!   indices: at 10,000,000 edges that costs 320 MB, within the 1 GiB budget). After a merge,
//!   the gains of the merged chain `X` with every neighbour `Z` are computed in one sweep over the
//!   jumps of `X`'s nodes: each jump adds its value under `X+Z` and `Z+X` into a scratch slot of
//!   `Z`. Nothing is moved or re-sorted, so a hub costs its degree once per merge it is in.
//! - **Only nodes that can matter are swept** ([`Scan::Boundary`]). A gain is the value of the
//!   jumps *between* the two chains once concatenated; when the value is zero beyond a distance
//!   `D` (ExtTSP: 1024 bytes), a node whose start and end are both more than `D` bytes from
//!   either end of its chain contributes zero under both concatenations, and is skipped. A long
//!   chain is then swept at its two ends only. CDSort's value never reaches zero, so it sweeps
//!   every node ([`Scan::All`]).
//! - **A heap with lazy deletion, compacted.** An entry records the merge count at which it was
//!   pushed; it is stale once either of its chains has merged since. Each chain counts the
//!   entries queued for it, so a merge knows (within a factor of two) how many entries it made
//!   stale; when that estimate passes half the heap, the heap is filtered in place. Memory then
//!   stays proportional to the live pairs rather than to every gain ever computed, and the heap
//!   stays small enough for its pops to hit the cache: before this, stale entries made pops
//!   two thirds of the run time (100,000 nodes, 1,000,000 edges: 21 s before, see
//!   `docs/algorithms.md` for after). LLVM's CDSort
//!   erases the merged chains' entries from a `std::set` instead; that needs per-pair storage of
//!   the queued key, which costs more memory than the occasional compaction.
//!
//! Chains are indexed by *slot*: chain `c` starts as node `c`, and a merge of `x < y` keeps `x`
//! (so a chain's slot is always its smallest node index, which is the id ties are broken by).
//! Ties: the larger gain first, then the smaller `x`, then the smaller `y`; `X+Y` is chosen over
//! `Y+X` unless `Y+X` is better by more than [`EPS`].

use crate::{append_unseen, EdgeCount};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Gains at or below this are treated as no gain (LLVM's `EPS`), so rounding noise in `f64`
/// sums never causes a merge.
pub(crate) const EPS: f64 = 1e-9;

/// Smallest heap length at which stale entries are filtered out (below it, filtering costs more
/// than the memory it frees).
const MIN_COMPACT_LEN: usize = 1 << 16;

/// Which concatenation a merge makes; `X` is the chain with the smaller slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MergeType {
    /// `X` then `Y`.
    XY,
    /// `Y` then `X`.
    YX,
}

/// Which nodes of a merged chain are swept to find its gains (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scan {
    /// Every node: the value of a jump never drops to zero with distance.
    All,
    /// Only nodes within this many bytes of either end of the chain: the value of a jump is zero
    /// beyond this distance.
    Boundary(u64),
}

/// The chains of the greedy merging.
pub(crate) struct Chains {
    /// Nodes of each chain, in layout order; a merged-away chain is left empty.
    pub nodes: Vec<Vec<u32>>,
    /// Size of each chain in bytes (sum of its nodes' sizes, saturating).
    pub size: Vec<u64>,
    /// Weight of each chain (sum of its nodes' weights as the algorithm counts them).
    pub weight: Vec<f64>,
    /// Size of each node as this algorithm counts it.
    pub node_size: Vec<u64>,
    /// Start of each node, in bytes from the start of its chain.
    pub offset: Vec<u64>,
    /// The chain (slot) each node is in.
    owner: Vec<u32>,
    /// Number of nodes in each chain (`nodes[c].len()`, kept dense for the sweep's cache).
    len: Vec<u32>,
    /// CSR index: the jumps of node `v` are `adj[adj_start[v]..adj_start[v + 1]]`.
    adj_start: Vec<usize>,
    /// The jumps (non-recursive edges with a positive count), grouped by endpoint: each appears
    /// under both of its endpoints, as the edge itself, so a sweep reads them sequentially.
    adj: Vec<EdgeCount>,
    /// Merge count at which each chain last changed; queue entries older than it are stale.
    changed_at: Vec<u64>,
}

/// A queued merge: highest gain first, then the smallest slots.
struct Candidate {
    gain: f64,
    x: u32,
    y: u32,
    /// Merge count when this entry was computed.
    stamp: u64,
    merge: MergeType,
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
        self.gain
            .total_cmp(&other.gain)
            .then(Reverse(self.x).cmp(&Reverse(other.x)))
            .then(Reverse(self.y).cmp(&Reverse(other.y)))
    }
}

impl Chains {
    /// One chain per node, with the node's size and weight.
    pub fn new(node_size: Vec<u64>, weight: Vec<f64>, edges: &[EdgeCount]) -> Chains {
        let n = node_size.len();
        let is_jump = |e: &EdgeCount| e.src != e.dst && e.count > 0;
        let mut adj_start = vec![0usize; n + 1];
        for e in edges.iter().filter(|e| is_jump(e)) {
            adj_start[e.src as usize + 1] += 1;
            adj_start[e.dst as usize + 1] += 1;
        }
        for v in 0..n {
            adj_start[v + 1] += adj_start[v];
        }
        let mut fill = adj_start.clone();
        let mut adj = vec![
            EdgeCount {
                src: 0,
                dst: 0,
                count: 0
            };
            adj_start[n]
        ];
        for e in edges.iter().filter(|e| is_jump(e)) {
            for v in [e.src, e.dst] {
                adj[fill[v as usize]] = *e;
                fill[v as usize] += 1;
            }
        }
        Chains {
            nodes: (0..n as u32).map(|v| vec![v]).collect(),
            size: node_size.clone(),
            weight,
            node_size,
            offset: vec![0; n],
            owner: (0..n as u32).collect(),
            len: vec![1; n],
            adj_start,
            adj,
            changed_at: vec![0; n],
        }
    }

    /// Start of node `v` when chains `x` and `y` are concatenated as `merge` says.
    pub fn merged_addr(&self, v: u32, x: u32, y: u32, merge: MergeType) -> u64 {
        let in_x = self.owner[v as usize] == x;
        let shift = match (merge, in_x) {
            (MergeType::XY, true) | (MergeType::YX, false) => 0,
            (MergeType::XY, false) => self.size[x as usize],
            (MergeType::YX, true) => self.size[y as usize],
        };
        self.offset[v as usize].saturating_add(shift)
    }

    /// Merges chain `y` into chain `x` (`x < y`) in the order `merge` says.
    fn merge(&mut self, x: u32, y: u32, merge: MergeType, now: u64) {
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
        self.len[xi] = self.nodes[xi].len() as u32;
        self.len[yi] = 0;
        self.size[xi] = sx.saturating_add(sy);
        self.weight[xi] += self.weight[yi];
        self.changed_at[xi] = now;
        self.changed_at[yi] = now;
    }

    /// The nodes of chain `x` that [`Scan`] says can contribute to a gain.
    fn scanned(&self, x: u32, scan: Scan) -> impl Iterator<Item = u32> + '_ {
        let nodes = &self.nodes[x as usize];
        let (front, back) = match scan {
            Scan::All => (nodes.len(), nodes.len()),
            Scan::Boundary(d) => {
                let size = self.size[x as usize];
                let front = nodes
                    .iter()
                    .take_while(|&&v| self.offset[v as usize] <= d)
                    .count();
                let tail = nodes[front..]
                    .iter()
                    .rev()
                    .take_while(|&&v| {
                        let end =
                            self.offset[v as usize].saturating_add(self.node_size[v as usize]);
                        size.saturating_sub(end) <= d
                    })
                    .count();
                (front, nodes.len() - tail)
            }
        };
        nodes[..front]
            .iter()
            .chain(&nodes[back.max(front)..])
            .copied()
    }
}

/// Per-neighbour sums of jump values, reused across merges (dense arrays indexed by slot, and
/// the list of slots touched so they can be reset in time linear in what was touched).
struct Scratch {
    xy: Vec<f64>,
    yx: Vec<f64>,
    touched: Vec<u32>,
    mark: Vec<bool>,
    /// Queue entries pushed for each chain since it last changed (an entry counts for both of
    /// its chains, so stale entries are over-estimated, at most twice).
    queued: Vec<u32>,
}

/// Runs greedy merging, never creating a chain of more than `max_nodes` nodes.
///
/// `value(chains, x, y, merge, jump)` is what one jump between chains `x < y` is worth once
/// they are concatenated as `merge`; `gain(chains, x, y, sum_xy, sum_yx)` turns the summed
/// values of all jumps between them into the merge gain and the concatenation to use.
pub(crate) fn greedy_merge<V, G>(
    chains: &mut Chains,
    max_nodes: usize,
    scan: Scan,
    value: V,
    gain: G,
) where
    V: Fn(&Chains, u32, u32, MergeType, &EdgeCount) -> f64,
    G: Fn(&Chains, u32, u32, f64, f64) -> (f64, MergeType),
{
    let n = chains.nodes.len();
    let mut s = Scratch {
        xy: vec![0.0; n],
        yx: vec![0.0; n],
        touched: Vec::new(),
        mark: vec![false; n],
        queued: vec![0; n],
    };
    let mut heap = BinaryHeap::new();
    let mut now = 0u64;
    // Sums the values of the jumps between `x` and each neighbour, then queues the gains.
    let evaluate = |chains: &Chains,
                    s: &mut Scratch,
                    heap: &mut BinaryHeap<Candidate>,
                    x: u32,
                    now: u64,
                    only_larger: bool| {
        for v in chains.scanned(x, scan) {
            let v = v as usize;
            for e in &chains.adj[chains.adj_start[v]..chains.adj_start[v + 1]] {
                let other = if e.src as usize == v { e.dst } else { e.src };
                let z = chains.owner[other as usize];
                if z == x || (only_larger && z < x) {
                    continue;
                }
                if (chains.len[x as usize] + chains.len[z as usize]) as usize > max_nodes {
                    continue;
                }
                let (a, b) = (x.min(z), x.max(z));
                if !s.mark[z as usize] {
                    s.mark[z as usize] = true;
                    s.touched.push(z);
                }
                s.xy[z as usize] += value(chains, a, b, MergeType::XY, e);
                s.yx[z as usize] += value(chains, a, b, MergeType::YX, e);
            }
        }
        for &z in &s.touched {
            let zi = z as usize;
            let (a, b) = (x.min(z), x.max(z));
            let (g, merge) = gain(chains, a, b, s.xy[zi], s.yx[zi]);
            if g > EPS {
                s.queued[a as usize] = s.queued[a as usize].saturating_add(1);
                s.queued[b as usize] = s.queued[b as usize].saturating_add(1);
                heap.push(Candidate {
                    gain: g,
                    x: a,
                    y: b,
                    stamp: now,
                    merge,
                });
            }
            s.xy[zi] = 0.0;
            s.yx[zi] = 0.0;
            s.mark[zi] = false;
        }
        s.touched.clear();
    };
    for x in 0..n as u32 {
        evaluate(chains, &mut s, &mut heap, x, now, true);
    }
    // Upper bound on the stale entries in the heap.
    let mut stale_entries = 0usize;
    while let Some(c) = heap.pop() {
        let stale = |c: &Candidate, chains: &Chains| {
            chains.changed_at[c.x as usize] > c.stamp || chains.changed_at[c.y as usize] > c.stamp
        };
        if stale(&c, chains) {
            continue;
        }
        now += 1;
        chains.merge(c.x, c.y, c.merge, now);
        for z in [c.x, c.y] {
            stale_entries += std::mem::take(&mut s.queued[z as usize]) as usize;
        }
        evaluate(chains, &mut s, &mut heap, c.x, now, false);
        if heap.len() > MIN_COMPACT_LEN && 2 * stale_entries > heap.len() {
            heap.retain(|c| !stale(c, chains));
            stale_entries = 0;
        }
    }
}

/// Concatenates the final chains of seen nodes, densest first, then appends the never-seen
/// nodes in input order. `denser(a, b)` compares the keys of two chains (`Less` when `a` is
/// denser); equal keys go by slot, the smallest node index of the chain.
pub(crate) fn concat_chains<K>(
    chains: &Chains,
    seen: &[bool],
    key: impl Fn(u32) -> K,
    denser: impl Fn(&K, &K) -> Ordering,
) -> Vec<u32> {
    let mut live: Vec<(u32, K)> = (0..chains.nodes.len() as u32)
        .filter(|&c| seen[c as usize] && !chains.nodes[c as usize].is_empty())
        .map(|c| (c, key(c)))
        .collect();
    live.sort_by(|a, b| denser(&a.1, &b.1).then(a.0.cmp(&b.0)));
    let mut layout: Vec<u32> = Vec::with_capacity(seen.len());
    for (c, _) in live {
        layout.extend_from_slice(&chains.nodes[c as usize]);
    }
    append_unseen(&mut layout, seen);
    layout
}
