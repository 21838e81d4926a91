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
//!   indices: 8 bytes a copy, see [`Jumps`]). After a merge,
//!   the gains of the merged chain `X` with every neighbour `Z` are computed in one sweep over the
//!   jumps of `X`'s nodes: each jump adds its value under `X+Z` and `Z+X` into a scratch slot of
//!   `Z`. Nothing is moved or re-sorted, so a hub costs its degree once per merge it is in.
//! - **A hub keeps its heaviest jumps only** ([`Chains::new`]): a jump takes part only when it is
//!   among the `max_chain_size` heaviest of *both* its endpoints. A node can share its chain with
//!   at most that many others, so this is the algorithms' own bound on a chain, applied to a
//!   node's partners. On the 1,000,000-node benchmark graph (calls drawn toward the hottest
//!   nodes, so those are hubs, swept whole every time their chain merged) ExtTSP then sweeps
//!   49.5 million jumps in all and its score drops by 0.07% (5.757e8 to 5.753e8). A graph in which no node has more
//!   jumps than the cap (SQLite's speedtest1 profile: at most 66; every tiny test) gives exactly
//!   the layout it gave without the cap.
//! - **One small record per neighbour.** A sweep is bound by memory latency: every jump leads
//!   to a random node. That node's record ([`Node`], 12 bytes: chain, offset and size, 32-bit)
//!   is all the sweep reads of it, and the sums per neighbour live in a small open-addressing
//!   table that stays in the L1 cache, so a jump costs one cache miss where it cost several
//!   (owner, offset, chain length, scratch slot). The records once held copies of their
//!   chain's length and size (32 bytes), which every merge rewrote for the whole merged chain
//!   (3.7 million records for CDSort's 237,640 merges at 1,000,000 functions); the sweep now
//!   reads those from the neighbour chains' records, gathered once per neighbour.
//! - **Random reads are gathered before they are used.** The records of all the neighbours
//!   a sweep will meet are first copied in a loop whose iterations do not depend on each other,
//!   so the processor keeps many of their cache misses in flight at once; then each jump's
//!   neighbour chain is looked up in the table, the neighbour chains' records ([`Stat`]: size,
//!   length, weight, CDSort's miss term, queue count) are gathered the same way, and the
//!   summing loop reads the copies in the same order as ever (same sums, bit for bit). The
//!   queue counts are bumped in a loop of their own. Measured on the 1,000,000-node benchmark:
//!   the sweep's time had been one serial cache miss per jump.
//! - **Per-chain terms computed once per chain.** CDSort's gain needs each chain's expected
//!   misses, `weight * miss_probability(density)` (a `powf`); it is kept in [`Stat::cost`],
//!   computed when the chain forms, instead of twice per pair evaluated (92 million pairs at
//!   1,000,000 nodes). The same expression on the same values: the same bits.
//! - **The first gains are heapified at once**, in linear time, instead of pushed one by one.
//! - **A four-ary heap** ([`QuadHeap`]): the heap holds millions of entries, far beyond the
//!   caches, and a pop walks it root to leaf; four children a level halve the levels, and the
//!   four are adjacent. Any correct priority queue pops the same merges, since the order of
//!   entries is total except between copies of one pair, of which at most one is current.
//!   On graphs of up to 2^21 nodes an entry takes 16 bytes instead of 24 ([`Packed`]: both
//!   slots and the stamp in 21 bits each), the same pops in the same order.
//! - **The heap holds only the top of the queue** ([`TwoTier`]): entries below a floor wait
//!   unordered beside it, and when the heap runs empty the largest eighth of them (found from
//!   a sample) become the heap under a lower floor, the stale ones dropped on the way. Most
//!   entries go stale before they come near the top, so a pop walks a heap of tens of
//!   thousands of entries instead of up to 886,140 (CDSort, 1,000,000 functions: first
//!   evaluation and loop 0.71-0.79 s of wall time against 0.74-0.82 s with one heap, four
//!   alternating runs each, load average 2.3). The same pops in the same order.
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
//!   `docs/journal/ordering.md` for after). LLVM's CDSort
//!   erases the merged chains' entries from a `std::set` instead; that needs per-pair storage of
//!   the queued key, which costs more memory than the occasional compaction.
//!
//! - **Large graphs start from paths** ([`Chains::pre_merge`]): above the gate of
//!   [`crate::large`], the chains the loop starts from are the paths of each node's heaviest
//!   jumps rather than single nodes (only the jumps kept there take part), so the loop makes
//!   fewer merges, each evaluated exactly as here.
//!
//! Every change listed here keeps the layouts byte for byte (checked on the benchmark graphs'
//! layout hashes and on real profiles), except the hub cap, as its item says, and the
//! large-graph start, which only graphs above the gate take.
//!
//! Turned down: renumbering nodes hottest first so that the records swept most are close
//! together (measured with the benchmark graph generated in rank order: ExtTSP 11.96 s
//! against 11.91 s of CPU, no gain: after the hub cap, most jumps swept lead to lukewarm
//! nodes); a lower hub cap for ExtTSP (128 jumps: no faster; 32: 17% faster, score -0.07%,
//! not worth a parameter LLVM does not have).
//!
//! Chains are indexed by *slot*: chain `c` starts as node `c`, and a merge of `x < y` keeps `x`
//! (so a chain's slot is always its smallest node index, which is the id ties are broken by).
//! Ties: the larger gain first, then the smaller `x`, then the smaller `y`; `X+Y` is chosen over
//! `Y+X` unless `Y+X` is better by more than [`EPS`].

use crate::{append_unseen, EdgeCount, NONE};
use std::cmp::{Ordering, Reverse};

/// Gains at or below this are treated as no gain (LLVM's `EPS`), so rounding noise in `f64`
/// sums never causes a merge.
pub(crate) const EPS: f64 = 1e-9;

/// Garbage the chains' node pool may hold beyond twice the number of nodes before it is
/// compacted ([`Chains::compact`]); none in tests, so that tiny graphs compact too.
const POOL_SLACK: usize = if cfg!(test) { 0 } else { 1024 };

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
    /// Nodes of every chain, in layout order ([`Chains::members`]): chain `c`'s are
    /// `pool[block[c].0..][..stat[c].len]`, and its block has room for `block[c].1`. One pool
    /// instead of a vector per chain: a million small allocations, freed as chains merged,
    /// were about 4% of the samples of CDSort's benchmark process at 1,000,000 functions.
    pool: Vec<u32>,
    block: Vec<(usize, u32)>,
    /// Size, weight and length of each chain (see [`Stat`]).
    pub stat: Vec<Stat>,
    /// Chain, offset and size of each node, together so that a sweep reads one cache line per
    /// neighbour.
    node: Vec<Node>,
    /// CSR index: the jumps of node `v` are `adj[adj_start[v]..adj_start[v + 1]]`.
    adj_start: Vec<usize>,
    /// The jumps (non-recursive edges with a positive count), grouped by endpoint: each appears
    /// under both of its endpoints, so a sweep reads them sequentially.
    adj: Jumps,
    /// Merge count at which each chain last changed; queue entries older than it are stale.
    /// (A merge count fits in `u32`: there are fewer merges than nodes.)
    changed_at: Vec<u32>,
}

/// What a gain needs to know about a chain, in one record: evaluating a merged chain's gains
/// reads it for every neighbour, and one cache line per neighbour is the cost (CDSort read
/// size, weight and its miss term from three arrays, three misses, before).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    /// Size in bytes (sum of the nodes' sizes, saturating).
    pub size: u64,
    /// Weight (sum of the nodes' weights as the algorithm counts them).
    pub weight: f64,
    /// A term of the gain that depends on the chain alone (CDSort's expected cache misses),
    /// computed once when the chain forms instead of once per pair evaluated.
    pub cost: f64,
    /// Number of nodes (zero for a merged-away chain).
    len: u32,
    /// Queue entries pushed for the chain since it last changed (an entry counts for both of
    /// its chains, so stale entries are over-estimated, at most twice).
    queued: u32,
}

/// Where a node is: its chain (slot), its start from the start of the chain, and its size as
/// the algorithm counts it. Positions and sizes are 32-bit, saturating at 4 GiB (a chain of
/// more code than that is far beyond any binary; a call that far is worth nothing to ExtTSP,
/// and CDSort's distance term for it is 2^-8 of its value at one byte): 12 bytes, where
/// 64-bit fields and copies
/// of the chain's length and size took 32. The sweeps read one such record per call at
/// random; at 1,000,000 functions the records take 12 MiB instead of 32, and more of them
/// stay in the cache; and a merge rewrites only the records of the nodes that move or change
/// chain, not those of the whole merged chain.
#[derive(Debug, Clone, Copy)]
struct Node {
    owner: u32,
    offset: u32,
    size: u32,
}

/// `v` as a node position or size ([`Node`]), saturating.
fn narrow(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The jumps of every node, each as seen from one of its endpoints, in 8 bytes: the other
/// endpoint in the low 32 bits, then whether this endpoint is the caller, then the count in
/// the top 31 bits. A count that does not fit there ([`Jumps::BIG`] or more) is kept aside in
/// `big` by its place, and [`Jumps::BIG`] stands in for it.
///
/// Why 8 bytes and not a record of 16 (other, direction, a 64-bit count): every jump is
/// copied into its place at random while the array is built, and the sweeps read a node's
/// jumps; a real count is far below 2^31. On CDSort's gated run of the 1,000,000-function
/// benchmark graph (8 million jump ends) the array takes 64 MiB instead of 128, and needs no
/// pass to fill it before the copy (zeroed memory comes from the allocator as it is).
struct Jumps {
    word: Vec<u64>,
    /// (place, count) of each jump whose count is [`Jumps::BIG`] or more, by place.
    big: Vec<(usize, u64)>,
}

impl Jumps {
    /// Counts from this one up are kept aside.
    const BIG: u64 = (1 << 31) - 1;

    /// `len` zeroed places.
    fn zeroed(len: usize) -> Jumps {
        Jumps {
            word: vec![0; len],
            big: Vec::new(),
        }
    }

    /// Puts a jump to `other` of `count` calls at place `at`; `out` when this end calls.
    fn set(&mut self, at: usize, other: u32, out: bool, count: u64) {
        let small = if count >= Self::BIG {
            self.big.push((at, count));
            Self::BIG
        } else {
            count
        };
        self.word[at] = small << 33 | u64::from(out) << 32 | u64::from(other);
    }

    /// The other endpoint of the jump at place `at`.
    fn other(&self, at: usize) -> u32 {
        self.word[at] as u32
    }

    /// Whether this endpoint of the jump at place `at` is the caller.
    fn out(&self, at: usize) -> bool {
        self.word[at] >> 32 & 1 == 1
    }

    /// The count of the jump at place `at`.
    fn count(&self, at: usize) -> u64 {
        let small = self.word[at] >> 33;
        if small < Self::BIG {
            small
        } else {
            self.big_count(at)
        }
    }

    #[cold]
    fn big_count(&self, at: usize) -> u64 {
        let i = self.big.partition_point(|&(p, _)| p < at);
        self.big[i].1
    }

    /// Puts the counts kept aside in place order, once every jump is set.
    fn finish(&mut self) {
        self.big.sort_unstable();
    }

    /// Every jump as (other endpoint, caller or not, count), in place order.
    #[cfg(test)]
    fn all(&self) -> Vec<(u32, bool, u64)> {
        (0..self.word.len())
            .map(|at| (self.other(at), self.out(at), self.count(at)))
            .collect()
    }
}

/// A queued merge: highest gain first, then the smallest slots.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    gain: f64,
    x: u32,
    y: u32,
    /// Merge count when this entry was computed.
    stamp: u32,
    merge: MergeType,
}

/// What the merge loop needs of a queue entry: [`Candidate`], or [`Packed`] when the slots and
/// merge counts fit in 21 bits.
trait Entry: Ord + Copy {
    fn new(gain: f64, x: u32, y: u32, stamp: u32, merge: MergeType) -> Self;
    fn x(&self) -> u32;
    fn y(&self) -> u32;
    fn stamp(&self) -> u32;
    fn merge(&self) -> MergeType;
}

impl Entry for Candidate {
    fn new(gain: f64, x: u32, y: u32, stamp: u32, merge: MergeType) -> Self {
        Candidate {
            gain,
            x,
            y,
            stamp,
            merge,
        }
    }
    fn x(&self) -> u32 {
        self.x
    }
    fn y(&self) -> u32 {
        self.y
    }
    fn stamp(&self) -> u32 {
        self.stamp
    }
    fn merge(&self) -> MergeType {
        self.merge
    }
}

/// A [`Candidate`] in 16 bytes instead of 24, for graphs of at most [`Packed::MAX_SLOTS`]
/// nodes: `x`, `y` and the stamp in 21 bits each and the concatenation in one, in a `u64`
/// that compares as the candidate's `(Reverse(x), Reverse(y))` does. The queue holds up to
/// 886,140 entries on the 1,000,000-function benchmark graph (21 MiB at 24 bytes, 14 at 16),
/// and a pop reads four children on each of its ten levels.
#[derive(Debug, Clone, Copy)]
struct Packed {
    gain: f64,
    /// `x << 43 | y << 22 | stamp << 1 | (merge == YX)`.
    key: u64,
}

impl Packed {
    /// Slots (nodes) at most: every slot and merge count is then below 2^21.
    const MAX_SLOTS: usize = 1 << 21;
    const BITS: u32 = 21;
    const MASK: u64 = (1 << Self::BITS) - 1;
}

impl Entry for Packed {
    fn new(gain: f64, x: u32, y: u32, stamp: u32, merge: MergeType) -> Self {
        let (x, y, stamp) = (u64::from(x), u64::from(y), u64::from(stamp));
        debug_assert!(x.max(y).max(stamp) <= Self::MASK);
        let key = x << (2 * Self::BITS + 1)
            | y << (Self::BITS + 1)
            | stamp << 1
            | u64::from(merge == MergeType::YX);
        Packed { gain, key }
    }
    fn x(&self) -> u32 {
        (self.key >> (2 * Self::BITS + 1)) as u32
    }
    fn y(&self) -> u32 {
        ((self.key >> (Self::BITS + 1)) & Self::MASK) as u32
    }
    fn stamp(&self) -> u32 {
        ((self.key >> 1) & Self::MASK) as u32
    }
    fn merge(&self) -> MergeType {
        if self.key & 1 == 1 {
            MergeType::YX
        } else {
            MergeType::XY
        }
    }
}

/// `PartialEq`, `Eq` and `PartialOrd` of queue entries, all from their `Ord`.
macro_rules! order_from_cmp {
    ($($t:ty),*) => {$(
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other) == Ordering::Equal
            }
        }
        impl Eq for $t {}
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
    )*};
}
order_from_cmp!(Packed, Candidate);

impl Ord for Packed {
    /// As [`Candidate`]'s: the larger gain, then the smaller `x`, then the smaller `y` (the
    /// pair is the key's bits above the stamp).
    fn cmp(&self, other: &Self) -> Ordering {
        let pair = |k: u64| k >> (Self::BITS + 1);
        self.gain
            .total_cmp(&other.gain)
            .then(pair(other.key).cmp(&pair(self.key)))
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
    /// One chain per node, with the node's size and weight. Only jumps that are among the
    /// `max_jumps` heaviest of *both* their endpoints take part (see [`kept_jumps`]).
    pub fn new(
        node_size: Vec<u64>,
        weight: Vec<f64>,
        edges: &[EdgeCount],
        max_jumps: usize,
    ) -> Chains {
        Chains::renamed(node_size, weight, edges, max_jumps, |v| v)
    }

    /// [`Chains::new`] on `edges` with each endpoint `v` renamed `rename(v)` (a bijection of
    /// the nodes; `node_size` and `weight` are indexed by the new names): the same chains as
    /// renaming the edges first and calling [`Chains::new`], without a renamed copy of them.
    /// Which jumps a hub keeps does not depend on the names ([`kept_jumps`] breaks ties by
    /// edge position), so they are chosen on the edges as given.
    pub fn renamed(
        node_size: Vec<u64>,
        weight: Vec<f64>,
        edges: &[EdgeCount],
        max_jumps: usize,
        rename: impl Fn(u32) -> u32,
    ) -> Chains {
        let n = node_size.len();
        let keep = kept_jumps(n, edges, max_jumps);
        let mut adj_start = vec![0usize; n + 1];
        for (e, _) in edges.iter().zip(&keep).filter(|(_, &k)| k) {
            adj_start[rename(e.src) as usize + 1] += 1;
            adj_start[rename(e.dst) as usize + 1] += 1;
        }
        for v in 0..n {
            adj_start[v + 1] += adj_start[v];
        }
        let kept = edges.iter().zip(&keep).filter(|(_, &k)| k).map(|(e, _)| e);
        let adj = place_jumps(&adj_start, kept, &rename, u32::MAX as usize);
        Chains {
            pool: (0..n as u32).collect(),
            block: (0..n).map(|v| (v, 1)).collect(),
            stat: (0..n)
                .map(|v| Stat {
                    size: node_size[v],
                    weight: weight[v],
                    cost: 0.0,
                    len: 1,
                    queued: 0,
                })
                .collect(),
            node: (0..n)
                .map(|v| Node {
                    owner: v as u32,
                    offset: 0,
                    size: narrow(node_size[v]),
                })
                .collect(),
            adj_start,
            adj,
            changed_at: vec![0; n],
        }
    }

    /// Makes `path` (two nodes or more, in layout order, disjoint from earlier paths) one
    /// chain, kept in the slot of its smallest node, as if the greedy loop had merged it; the
    /// loop then starts from these chains (the large-graph gate, [`crate::large`]).
    pub fn pre_merge(&mut self, path: &[u32]) {
        let slot = *path.iter().min().expect("paths are not empty");
        let (mut size, mut weight) = (0u64, 0.0f64);
        for &v in path {
            let vi = v as usize;
            self.node[vi].offset = narrow(size);
            size = size.saturating_add(u64::from(self.node[vi].size));
            weight += self.stat[vi].weight;
            self.stat[vi].len = 0;
            self.block[vi] = (0, 0);
        }
        let len = path.len() as u32;
        for &v in path {
            self.node[v as usize].owner = slot;
        }
        let stat = &mut self.stat[slot as usize];
        (stat.size, stat.weight, stat.len) = (size, weight, len);
        // A path of consecutive nodes (CDSort's renamed paths) is already in the pool, in
        // order, where its nodes began as chains of one: its block is that stretch, and the
        // pool does not grow (by 870,000 nodes on the scale benchmark's 1,000,000-function
        // graph, which filled most of the room allowed before the first compaction).
        let first = path[0] as usize;
        let in_place = first == slot as usize
            && path
                .iter()
                .enumerate()
                .all(|(i, &v)| v as usize == first + i)
            && self.pool[first..first + path.len()] == *path;
        if in_place {
            self.block[slot as usize] = (first, len);
        } else {
            self.block[slot as usize] = (self.pool.len(), len);
            self.pool.extend_from_slice(path);
        }
    }

    /// Number of chain slots (one per node).
    pub fn slots(&self) -> usize {
        self.block.len()
    }

    /// The nodes of chain `c`, in layout order; empty for a merged-away chain.
    pub fn members(&self, c: u32) -> &[u32] {
        let (at, _) = self.block[c as usize];
        &self.pool[at..at + self.stat[c as usize].len as usize]
    }

    /// Merges chain `y` into chain `x` (`x < y`) in the order `merge` says.
    fn merge(&mut self, x: u32, y: u32, merge: MergeType, now: u32) {
        let (xi, yi) = (x as usize, y as usize);
        let (sx, sy) = (self.stat[xi].size, self.stat[yi].size);
        let (lx, ly) = (self.stat[xi].len as usize, self.stat[yi].len as usize);
        let ((ax, cap), (ay, _)) = (self.block[xi], self.block[yi]);
        // `y`'s nodes join `x`; the offsets of the second chain's nodes move by the first
        // chain's size. Nothing else changes in the nodes' records.
        for i in ay..ay + ly {
            let node = &mut self.node[self.pool[i] as usize];
            node.owner = x;
            if merge == MergeType::XY {
                node.offset = narrow(u64::from(node.offset).saturating_add(sx));
            }
        }
        if merge == MergeType::YX {
            for i in ax..ax + lx {
                let o = &mut self.node[self.pool[i] as usize].offset;
                *o = narrow(u64::from(*o).saturating_add(sy));
            }
        }
        let len = lx + ly;
        if merge == MergeType::XY && len <= cap as usize {
            self.pool.copy_within(ay..ay + ly, ax + lx);
        } else {
            // A new block at the end of the pool, with room to grow; the old ones are garbage
            // until the pool is compacted.
            if self.pool.len() > 2 * self.block.len() + POOL_SLACK {
                self.compact();
            }
            let ((ax, _), (ay, _)) = (self.block[xi], self.block[yi]);
            let (first, second) = match merge {
                MergeType::XY => (ax..ax + lx, ay..ay + ly),
                MergeType::YX => (ay..ay + ly, ax..ax + lx),
            };
            let at = self.pool.len();
            let cap = len.next_power_of_two();
            self.pool.extend_from_within(first);
            self.pool.extend_from_within(second);
            self.pool.resize(at + cap, NONE);
            self.block[xi] = (at, cap as u32);
        }
        let size = sx.saturating_add(sy);
        self.stat[yi].len = 0;
        self.block[yi] = (0, 0);
        self.stat[xi].len = len as u32;
        self.stat[xi].size = size;
        self.stat[xi].weight += self.stat[yi].weight;
        self.changed_at[xi] = now;
        self.changed_at[yi] = now;
    }

    /// Rewrites the pool with each live chain's nodes only, each block exactly full.
    fn compact(&mut self) {
        let mut pool = Vec::with_capacity(self.block.len());
        for c in 0..self.block.len() as u32 {
            let members = self.members(c);
            let at = pool.len();
            pool.extend_from_slice(members);
            self.block[c as usize] = (at, members.len() as u32);
        }
        self.pool = pool;
    }

    /// The nodes of chain `x` that [`Scan`] says can contribute to a gain.
    fn scanned(&self, x: u32, scan: Scan) -> impl Iterator<Item = u32> + '_ {
        let nodes = self.members(x);
        let (front, back) = match scan {
            Scan::All => (nodes.len(), nodes.len()),
            Scan::Boundary(d) => {
                let size = self.stat[x as usize].size;
                let front = nodes
                    .iter()
                    .take_while(|&&v| u64::from(self.node[v as usize].offset) <= d)
                    .count();
                let tail = nodes[front..]
                    .iter()
                    .rev()
                    .take_while(|&&v| {
                        let node = self.node[v as usize];
                        let end = u64::from(node.offset) + u64::from(node.size);
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

/// The CSR array of the jumps `kept` (renamed by `rename`) given each node's first place
/// `adj_start`: each copied under both endpoints, in edge order. The next free place of each
/// node is kept in 32 bits when the array has at most `narrow_max` places, else in `usize`:
/// the copy reads and bumps it at random for every jump end, and at 4 MiB instead of 8 (a
/// million nodes) building the arrays of CDSort's gated run of the 1,000,000-function
/// benchmark graph went from 0.25-0.44 s to 0.22-0.29 s (wall, eight alternating runs each,
/// load average 3.6 to 3.8).
fn place_jumps<'e>(
    adj_start: &[usize],
    kept: impl Iterator<Item = &'e EdgeCount>,
    rename: impl Fn(u32) -> u32,
    narrow_max: usize,
) -> Jumps {
    let n = adj_start.len() - 1;
    let mut adj = Jumps::zeroed(adj_start[n]);
    if adj_start[n] <= narrow_max {
        let mut fill: Vec<u32> = adj_start[..n].iter().map(|&a| a as u32).collect();
        copy_jumps(&mut adj, kept, rename, |v| {
            fill[v] += 1;
            fill[v] as usize - 1
        });
    } else {
        let mut fill = adj_start[..n].to_vec();
        copy_jumps(&mut adj, kept, rename, |v| {
            fill[v] += 1;
            fill[v] - 1
        });
    }
    adj.finish();
    adj
}

/// The copying of [`place_jumps`]: `next(v)` gives the next free place of node `v`.
fn copy_jumps<'e>(
    adj: &mut Jumps,
    kept: impl Iterator<Item = &'e EdgeCount>,
    rename: impl Fn(u32) -> u32,
    mut next: impl FnMut(usize) -> usize,
) {
    for e in kept {
        let (src, dst) = (rename(e.src), rename(e.dst));
        for (v, other, out) in [(src, dst, true), (dst, src, false)] {
            adj.set(next(v as usize), other, out, e.count);
        }
    }
}

/// Which edges are jumps the merging looks at: non-recursive, a positive count, and among the
/// `max_jumps` heaviest jumps of *both* endpoints (heavier first, then the earlier edge).
///
/// Why a cap: a hub (a function called from hundreds of thousands of places) is swept with all
/// its jumps every time its chain merges, and its chain merges up to `max_chain_size` times;
/// on the scale benchmark's graph that was most of the run time. A chain holds at most
/// `max_chain_size` nodes, so at most that many of a node's partners can ever sit in its chain,
/// and the caller passes that bound: a node keeps as many jumps as its chain can have members.
/// Requiring both endpoints to keep a jump (not either) is what bounds the hub's degree; the
/// jumps dropped are, for the hub, lighter than every one it kept. A graph in which no node has
/// more jumps than the cap (every tiny test graph) is merged exactly as without it.
/// Turned down: sampling a hub's jumps (results would depend on the sample), and keeping a jump
/// when either endpoint keeps it (the hub keeps all its jumps again).
fn kept_jumps(n: usize, edges: &[EdgeCount], max_jumps: usize) -> Vec<bool> {
    let is_jump = |e: &EdgeCount| e.src != e.dst && e.count > 0;
    let mut keep: Vec<bool> = edges.iter().map(is_jump).collect();
    // No node has more jumps than there are edges.
    if max_jumps >= edges.len() {
        return keep;
    }
    let mut degree = vec![0usize; n];
    for e in edges.iter().filter(|e| is_jump(e)) {
        degree[e.src as usize] += 1;
        degree[e.dst as usize] += 1;
    }
    if degree.iter().all(|&d| d <= max_jumps) {
        return keep;
    }
    // The jumps of each over-cap node, as edge indices in a CSR array.
    let hub = |v: u32| degree[v as usize] > max_jumps;
    let mut start = vec![0usize; n + 1];
    for v in 0..n {
        start[v + 1] = start[v] + if degree[v] > max_jumps { degree[v] } else { 0 };
    }
    let mut fill = start.clone();
    let mut list = vec![0usize; start[n]];
    for (i, e) in edges.iter().enumerate().filter(|(_, e)| is_jump(e)) {
        for v in [e.src, e.dst] {
            if hub(v) {
                list[fill[v as usize]] = i;
                fill[v as usize] += 1;
            }
        }
    }
    let heavier = |a: &usize, b: &usize| edges[*b].count.cmp(&edges[*a].count).then(a.cmp(b));
    for v in 0..n {
        let mine = &mut list[start[v]..start[v + 1]];
        if mine.len() > max_jumps {
            mine.select_nth_unstable_by(max_jumps, heavier);
            for &i in &mine[max_jumps..] {
                keep[i] = false;
            }
        }
    }
    keep
}

/// Per-neighbour sums of jump values, reused across merges: a small open-addressing table
/// keyed by the neighbour's slot (it stays in the L1 cache, where an array indexed by slot
/// cost a cache miss per jump), and the neighbours in the order they were first met, which is
/// the order their gains are queued in.
struct Scratch {
    /// Slot of each table entry, [`NONE`] when free.
    keys: Vec<u32>,
    /// Position in `touched` of each table entry's neighbour.
    pos: Vec<u32>,
    /// Neighbours met in this sweep, in the order first met, with their table index.
    touched: Vec<(u32, usize)>,
    /// The sums of each neighbour met, in `touched` order.
    sums: Vec<Sums>,
    /// The records of the neighbours met, in `touched` order (gathered, see `evaluate`).
    stats: Vec<Stat>,
    /// The nodes of the chain being swept.
    swept: Vec<u32>,
    /// The records of the other endpoints of their jumps, in sweep order (see `evaluate`).
    others: Vec<Node>,
    /// For each of those jumps, its neighbour's position in `touched`, [`NONE`] when skipped.
    at: Vec<u32>,
}

/// One neighbour's sums of jump values as `X+Y` and as `Y+X`.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    xy: f64,
    yx: f64,
}

impl Scratch {
    /// The position of neighbour `z` in `touched`, inserted with zero sums when first met.
    fn position(&mut self, z: u32) -> u32 {
        if 2 * (self.touched.len() + 1) > self.keys.len() {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut i = (z.wrapping_mul(0x9E37_79B1) as usize) & mask;
        loop {
            if self.keys[i] == z {
                return self.pos[i];
            }
            if self.keys[i] == NONE {
                let p = self.touched.len() as u32;
                (self.keys[i], self.pos[i]) = (z, p);
                self.touched.push((z, i));
                self.sums.push(Sums::default());
                return p;
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the table, keeping the entries and their positions in `touched`.
    fn grow(&mut self) {
        let cap = (self.keys.len() * 2).max(64);
        self.keys = vec![NONE; cap];
        self.pos = vec![0; cap];
        let mask = cap - 1;
        for (p, (z, at)) in self.touched.iter_mut().enumerate() {
            let mut i = (z.wrapping_mul(0x9E37_79B1) as usize) & mask;
            while self.keys[i] != NONE {
                i = (i + 1) & mask;
            }
            (self.keys[i], self.pos[i], *at) = (*z, p as u32, i);
        }
    }

    /// Empties the table, in time linear in the neighbours met.
    fn clear(&mut self) {
        for &(_, i) in &self.touched {
            self.keys[i] = NONE;
        }
        self.touched.clear();
        self.sums.clear();
    }
}

/// Runs greedy merging, never creating a chain of more than `max_nodes` nodes.
///
/// `value(caller_start, caller_size, callee_start, count)` is what one jump is worth when, in
/// the concatenation being evaluated, its caller starts at `caller_start` and its callee at
/// `callee_start`; `gain(x, stat_x, stat_y, sum_xy, sum_yx)` turns the summed values of all jumps
/// between chains `x < y` (`x` the slot, so slot 0 is the chain holding node 0) into the merge
/// gain and the concatenation to use; `cost(weight,
/// size)` is the per-chain term it may read from [`Stat::cost`] (zero when unused).
pub(crate) fn greedy_merge<V, G, C>(
    chains: &mut Chains,
    max_nodes: usize,
    scan: Scan,
    value: V,
    gain: G,
    cost: C,
) where
    V: Fn(u64, u64, u64, u64) -> f64,
    G: Fn(u32, &Stat, &Stat, f64, f64) -> (f64, MergeType),
    C: Fn(f64, u64) -> f64,
{
    if chains.slots() <= Packed::MAX_SLOTS {
        merge_loop::<Packed, _, _, _>(chains, max_nodes, scan, value, gain, cost);
    } else {
        merge_loop::<Candidate, _, _, _>(chains, max_nodes, scan, value, gain, cost);
    }
}

/// [`greedy_merge`] with queue entries of type `E`.
fn merge_loop<E, V, G, C>(
    chains: &mut Chains,
    max_nodes: usize,
    scan: Scan,
    value: V,
    gain: G,
    cost: C,
) where
    E: Entry,
    V: Fn(u64, u64, u64, u64) -> f64,
    G: Fn(u32, &Stat, &Stat, f64, f64) -> (f64, MergeType),
    C: Fn(f64, u64) -> f64,
{
    let n = chains.slots();
    for c in &mut chains.stat {
        c.cost = cost(c.weight, c.size);
    }
    let mut s = Scratch {
        keys: vec![NONE; 64],
        pos: vec![0; 64],
        touched: Vec::new(),
        sums: Vec::new(),
        at: Vec::new(),
        stats: Vec::new(),
        swept: Vec::new(),
        others: Vec::new(),
    };
    let mut now = 0u32;
    // Sums the values of the jumps between `x` and each neighbour, then queues the gains.
    let evaluate = |chains_mut: &mut Chains,
                    s: &mut Scratch,
                    queue: &mut Vec<E>,
                    x: u32,
                    now: u32,
                    only_larger: bool| {
        let chains: &Chains = chains_mut;
        let this = chains.stat[x as usize];
        let (len_x, size_x) = (this.len as usize, this.size);
        let jumps_of = |v: u32| chains.adj_start[v as usize]..chains.adj_start[v as usize + 1];
        // Gather first: the records of all the neighbours, read in a loop whose iterations do
        // not depend on each other, so the processor overlaps their cache misses (the sweep
        // below, which hashes and sums, let it overlap few). Same jumps, same order.
        s.swept.clear();
        s.swept.extend(chains.scanned(x, scan));
        s.others.clear();
        // When only larger neighbours count (the first evaluation of all pairs), a jump to a
        // node below `x` is skipped unread: a chain's slot is its smallest node, so that
        // node's chain is below `x` too. It stands in as a record of `x`'s own, which the
        // sums skip as they skip `x`'s inner jumps. The same gains; on CDSort's gated run of
        // the 1,000,000-function benchmark graph the first evaluation went from 0.149-0.172
        // to 0.132-0.139 s (wall, three runs each, alternating, load average 3.6).
        let own = Node {
            owner: x,
            offset: 0,
            size: 0,
        };
        for &v in &s.swept {
            s.others.extend(jumps_of(v).map(|at| {
                let other = chains.adj.other(at);
                if only_larger && other < x {
                    own
                } else {
                    chains.node[other as usize]
                }
            }));
        }
        // Each jump's neighbour chain, then the neighbours' records (their sizes place their
        // nodes in `Y+X`), gathered as the nodes' records above, then the sums, in the same
        // order as ever. The chain's size used to be copied into every node's record, which
        // each merge then rewrote for every node of the merged chain.
        s.at.clear();
        for k in 0..s.others.len() {
            let z = s.others[k].owner;
            let p = if z == x || (only_larger && z < x) {
                NONE
            } else {
                s.position(z)
            };
            s.at.push(p);
        }
        s.stats.clear();
        s.stats
            .extend(s.touched.iter().map(|&(z, _)| chains.stat[z as usize]));
        let mut k = 0;
        for &v in &s.swept {
            let nv = chains.node[v as usize];
            for at in jumps_of(v) {
                let (p, no) = (s.at[k], s.others[k]);
                k += 1;
                if p == NONE {
                    continue;
                }
                let z = no.owner;
                // Chains too long to merge with `x` are summed too, and left out when queueing.
                // Shifts of x's and z's nodes as `X+Y` and as `Y+X`, `X` the smaller slot.
                let z_size = s.stats[p as usize].size;
                let (xy, yx) = if x < z {
                    ((0, size_x), (z_size, 0))
                } else {
                    ((z_size, 0), (0, size_x))
                };
                let (count, out) = (chains.adj.count(at), chains.adj.out(at));
                let sums = &mut s.sums[p as usize];
                for ((shift_x, shift_z), total) in [(xy, &mut sums.xy), (yx, &mut sums.yx)] {
                    let pv = u64::from(nv.offset).saturating_add(shift_x);
                    let po = u64::from(no.offset).saturating_add(shift_z);
                    *total += if out {
                        value(pv, u64::from(nv.size), po, count)
                    } else {
                        value(po, u64::from(no.size), pv, count)
                    };
                }
            }
        }
        let first = queue.len();
        for ((&(z, _), other), &slot) in s.touched.iter().zip(&s.stats).zip(&s.sums) {
            if len_x + other.len as usize > max_nodes {
                continue;
            }
            let (a, b) = (x.min(z), x.max(z));
            let (sa, sb) = if x < z {
                (&this, other)
            } else {
                (other, &this)
            };
            let (g, merge) = gain(a, sa, sb, slot.xy, slot.yx);
            if g > EPS {
                queue.push(E::new(g, a, b, now, merge));
            }
        }
        // Counted in a loop of its own: the neighbours' counters are random cache lines, and
        // independent increments let the processor overlap their misses.
        let chains = &mut *chains_mut;
        let q = &mut chains.stat[x as usize].queued;
        *q = q.saturating_add((queue.len() - first) as u32);
        for c in &queue[first..] {
            let z = if c.x() == x { c.y() } else { c.x() };
            let q = &mut chains.stat[z as usize].queued;
            *q = q.saturating_add(1);
        }
        s.clear();
    };
    // The first gains of all pairs are collected, then heapified at once (linear time).
    let mut fresh = Vec::new();
    for x in 0..n as u32 {
        evaluate(chains, &mut s, &mut fresh, x, now, true);
    }
    let stale = |c: &E, chains: &Chains| {
        chains.changed_at[c.x() as usize] > c.stamp()
            || chains.changed_at[c.y() as usize] > c.stamp()
    };
    let mut heap = TwoTier::from_vec(std::mem::take(&mut fresh));
    // Upper bound on the stale entries in the heap.
    let mut stale_entries = 0usize;
    while let Some(c) = heap.pop(|c| !stale(c, chains)) {
        if stale(&c, chains) {
            continue;
        }
        now += 1;
        let (x, y) = (c.x(), c.y());
        chains.merge(x, y, c.merge(), now);
        let merged = &mut chains.stat[x as usize];
        merged.cost = cost(merged.weight, merged.size);
        for z in [x, y] {
            stale_entries += std::mem::take(&mut chains.stat[z as usize].queued) as usize;
        }
        evaluate(chains, &mut s, &mut fresh, x, now, false);
        for c in fresh.drain(..) {
            heap.push(c);
        }
        if heap.len() > MIN_COMPACT_LEN && 2 * stale_entries > heap.len() {
            heap.retain(|c| !stale(c, chains));
            stale_entries = 0;
        }
    }
}

/// Fewest entries a [`TwoTier`] refill moves into its heap (one in tests, so that tiny queues
/// refill too).
const HOT_MIN: usize = if cfg!(test) { 1 } else { 1 << 14 };

/// A max-priority queue in two tiers: a [`QuadHeap`] of the largest entries, all at least
/// `floor`, and the others, all below it, in no order. An entry pushed below the floor goes to
/// the second tier; when the heap runs empty, the largest eighth or so of the second tier
/// (found from a sample) becomes the heap, under a lower floor, and the entries `keep`
/// rejects are dropped on the way. It pops what one heap of all the entries pops.
///
/// Why: the merge queue holds up to 886,140 entries on the scale benchmark's
/// 1,000,000-function graph, and most of them wait far below the top until they go stale,
/// making every pop walk a heap far larger than the caches.
struct TwoTier<T: Ord + Copy> {
    heap: QuadHeap<T>,
    low: Vec<T>,
    floor: Option<T>,
}

impl<T: Ord + Copy> TwoTier<T> {
    fn from_vec(v: Vec<T>) -> Self {
        let mut q = TwoTier {
            heap: QuadHeap { v: Vec::new() },
            low: v,
            floor: None,
        };
        q.refill(|_| true);
        q
    }

    fn len(&self) -> usize {
        self.heap.len() + self.low.len()
    }

    fn push(&mut self, item: T) {
        match self.floor {
            Some(f) if item < f => self.low.push(item),
            _ => self.heap.push(item),
        }
    }

    /// The largest entry; `keep` says which entries of the second tier to keep if it must be
    /// sorted out.
    fn pop(&mut self, mut keep: impl FnMut(&T) -> bool) -> Option<T> {
        loop {
            if let Some(top) = self.heap.pop() {
                return Some(top);
            }
            if self.low.is_empty() {
                return None;
            }
            self.refill(&mut keep);
        }
    }

    /// Keeps the entries `keep` says, in both tiers.
    fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.heap.retain(&mut keep);
        self.low.retain(keep);
    }

    /// Moves the largest entries of the second tier into the heap, which is empty, in one pass
    /// that also drops the entries `keep` rejects.
    fn refill(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut hot = std::mem::take(&mut self.heap.v);
        let want = (self.low.len() / 8).max(HOT_MIN);
        // The new floor: the entry of a sample of about 1,024 below which 7/8 of it lie.
        let floor = (self.low.len() > want).then(|| {
            let step = (self.low.len() / 1024).max(1);
            let mut sample: Vec<T> = self.low.iter().step_by(step).copied().collect();
            sample.sort_unstable();
            sample[sample.len() - (sample.len() * want / self.low.len()).max(1)]
        });
        self.low.retain(|e| {
            if !keep(e) {
                return false;
            }
            let up = floor.map_or(true, |f| *e >= f);
            if up {
                hot.push(*e);
            }
            !up
        });
        self.floor = floor;
        self.heap = QuadHeap::from_vec(hot);
    }
}

/// A max-heap with four children per node: half the levels of a binary heap, and the four
/// children of a node are adjacent (96 bytes of 24-byte entries), so a pop from a heap of
/// millions of entries, far larger than the caches, takes half as many dependent cache misses.
/// Which of two equal entries pops first cannot change the merges: equal entries are the same
/// pair with the same gain, of which at most one is current (see [`greedy_merge`]).
struct QuadHeap<T: Ord> {
    v: Vec<T>,
}

impl<T: Ord> QuadHeap<T> {
    /// Builds the heap in linear time.
    fn from_vec(v: Vec<T>) -> Self {
        let mut h = QuadHeap { v };
        h.heapify();
        h
    }

    fn heapify(&mut self) {
        let n = self.v.len();
        if n > 1 {
            for i in (0..=(n - 2) / 4).rev() {
                self.sift_down(i);
            }
        }
    }

    fn len(&self) -> usize {
        self.v.len()
    }

    fn push(&mut self, item: T) {
        self.v.push(item);
        self.sift_up(self.v.len() - 1);
    }

    fn pop(&mut self) -> Option<T> {
        let last = self.v.pop()?;
        if self.v.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.v[0], last);
        // Move the former last entry to the bottom along the largest children, then up: it
        // usually belongs near the bottom, so this compares less than a plain sift-down.
        let end = self.v.len();
        let mut i = 0;
        loop {
            let first = 4 * i + 1;
            if first >= end {
                break;
            }
            let mut best = first;
            for c in first + 1..(first + 4).min(end) {
                if self.v[c] > self.v[best] {
                    best = c;
                }
            }
            self.v.swap(i, best);
            i = best;
        }
        self.sift_up(i);
        Some(top)
    }

    /// Keeps the entries `keep` says, then rebuilds the heap.
    fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.v.retain(keep);
        self.heapify();
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.v[i] <= self.v[parent] {
                break;
            }
            self.v.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let end = self.v.len();
        loop {
            let first = 4 * i + 1;
            if first >= end {
                return;
            }
            let mut best = first;
            for c in first + 1..(first + 4).min(end) {
                if self.v[c] > self.v[best] {
                    best = c;
                }
            }
            if self.v[best] <= self.v[i] {
                return;
            }
            self.v.swap(i, best);
            i = best;
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
    let mut live: Vec<(u32, K)> = (0..chains.slots() as u32)
        .filter(|&c| seen[c as usize] && !chains.members(c).is_empty())
        .map(|c| (c, key(c)))
        .collect();
    live.sort_by(|a, b| denser(&a.1, &b.1).then(a.0.cmp(&b.0)));
    let mut layout: Vec<u32> = Vec::with_capacity(seen.len());
    for (c, _) in live {
        layout.extend_from_slice(chains.members(c));
    }
    append_unseen(&mut layout, seen);
    layout
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::e;
    use proptest::prelude::*;

    proptest! {
        // The four-ary heap pops any mix of pushes, heapified entries and a filter in
        // descending order, as a sort would.
        #[test]
        fn quad_heap_pops_in_order(
            first in proptest::collection::vec(0u32..50, 0..200),
            later in proptest::collection::vec(0u32..50, 0..200),
            drop_below in 0u32..50,
        ) {
            let mut heap = QuadHeap::from_vec(first.clone());
            for &v in &later {
                heap.push(v);
            }
            let mut expected: Vec<u32> = first.iter().chain(&later).copied().collect();
            // Pop a third, filter, then pop the rest.
            expected.sort_unstable_by(|a, b| b.cmp(a));
            let third = expected.len() / 3;
            for want in &expected[..third] {
                prop_assert_eq!(heap.pop(), Some(*want));
            }
            heap.retain(|&v| v >= drop_below);
            let rest: Vec<u32> =
                expected[third..].iter().copied().filter(|&v| v >= drop_below).collect();
            prop_assert_eq!(heap.len(), rest.len());
            for want in rest {
                prop_assert_eq!(heap.pop(), Some(want));
            }
            prop_assert_eq!(heap.pop(), None);
        }
    }

    proptest! {
        // The two tiers pop what one heap pops: nothing left that `keep` keeps is larger,
        // with pushes between pops; what is never popped was dropped by `keep`.
        #[test]
        fn two_tiers_pop_in_order(
            first in proptest::collection::vec(0u32..60, 0..300),
            later in proptest::collection::vec((0u32..60, 0usize..3), 0..300),
            drop_odd in any::<bool>(),
        ) {
            let keep = |v: &u32| !drop_odd || v % 2 == 0;
            let mut q = TwoTier::from_vec(first.clone());
            let mut all: Vec<u32> = first;
            // Pops one entry and checks it; false when the queue is empty.
            let pop = |q: &mut TwoTier<u32>, all: &mut Vec<u32>| {
                let Some(top) = q.pop(keep) else {
                    return Ok(false);
                };
                prop_assert!(all.iter().filter(|w| keep(w)).all(|&w| w <= top));
                let i = all.iter().position(|&w| w == top).unwrap();
                all.swap_remove(i);
                Ok::<bool, TestCaseError>(true)
            };
            for &(v, pops) in &later {
                q.push(v);
                all.push(v);
                for _ in 0..pops {
                    pop(&mut q, &mut all)?;
                }
            }
            while pop(&mut q, &mut all)? {}
            prop_assert!(all.iter().all(|w| !keep(w)));
            prop_assert_eq!(q.len(), 0);
        }
    }

    /// A queue entry's fields: a gain (often equal to another's), two slots and a stamp
    /// below 2^21 (often equal or at the ends of the range), and the concatenation.
    fn entry_fields() -> impl Strategy<Value = (f64, u32, u32, u32, MergeType)> {
        let slot = || prop_oneof![0u32..3, (1 << 21) - 3..1u32 << 21];
        (
            prop_oneof![Just(1.0), Just(2.5), 0.0f64..10.0],
            slot(),
            slot(),
            slot(),
            prop_oneof![Just(MergeType::XY), Just(MergeType::YX)],
        )
    }

    proptest! {
        // A packed entry gives back its fields, and two packed entries compare as the two
        // wide ones do.
        #[test]
        fn packed_entries_compare_as_candidates(a in entry_fields(), b in entry_fields()) {
            let wide = |(g, x, y, t, m)| <Candidate as Entry>::new(g, x, y, t, m);
            let packed = |(g, x, y, t, m)| <Packed as Entry>::new(g, x, y, t, m);
            let p = packed(a);
            prop_assert_eq!((p.gain, p.x(), p.y(), p.stamp(), p.merge()), a);
            prop_assert_eq!(packed(a).cmp(&packed(b)), wide(a).cmp(&wide(b)));
        }

        // The merge loop makes the same chains with packed entries as with wide ones.
        #[test]
        fn packed_and_wide_entries_merge_alike(
            (sizes, counts, edges) in crate::testutil::graph(),
        ) {
            let run = |packed: bool| {
                let weight = counts.iter().map(|&c| c as f64 + 1.0).collect();
                let mut c = Chains::new(sizes.clone(), weight, &edges, 4);
                let value = |s: u64, size: u64, t: u64, count: u64| {
                    count as f64 / (1.0 + (s + size / 2).abs_diff(t) as f64)
                };
                let gain = |_: u32, x: &Stat, y: &Stat, xy: f64, yx: f64| {
                    let g = if yx > xy + EPS { (yx, MergeType::YX) } else { (xy, MergeType::XY) };
                    (g.0 / (x.size.min(y.size) as f64 + 1.0), g.1)
                };
                if packed {
                    merge_loop::<Packed, _, _, _>(&mut c, 4, Scan::All, value, gain, |_, _| 0.0);
                } else {
                    merge_loop::<Candidate, _, _, _>(&mut c, 4, Scan::All, value, gain, |_, _| 0.0);
                }
                (0..c.slots() as u32).map(|x| c.members(x).to_vec()).collect::<Vec<_>>()
            };
            prop_assert_eq!(run(true), run(false));
        }
    }

    proptest! {
        // The next free places in 32 bits and in `usize` build the same array: each jump
        // under both endpoints, in edge order.
        #[test]
        fn narrow_and_wide_places_build_the_same_jumps(
            (sizes, _counts, edges) in crate::testutil::graph(),
            seed in any::<u64>(),
        ) {
            let n = sizes.len();
            let mut name: Vec<u32> = (0..n as u32).collect();
            name.sort_by_key(|&v| (u64::from(v) ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let calls: Vec<EdgeCount> =
                edges.into_iter().filter(|x| x.src != x.dst && x.count > 0).collect();
            let mut adj_start = vec![0usize; n + 1];
            for x in &calls {
                adj_start[name[x.src as usize] as usize + 1] += 1;
                adj_start[name[x.dst as usize] as usize + 1] += 1;
            }
            for v in 0..n {
                adj_start[v + 1] += adj_start[v];
            }
            let build = |narrow_max| -> Vec<(u32, bool, u64)> {
                place_jumps(&adj_start, calls.iter(), |v| name[v as usize], narrow_max).all()
            };
            prop_assert_eq!(build(0), build(usize::MAX));
        }
    }

    proptest! {
        // Every jump reads back as it was set, whatever its count: counts of 2^31 - 1 and
        // more are kept aside by place, in any order of setting.
        #[test]
        fn jumps_read_back_as_set(
            jumps in proptest::collection::vec(
                (
                    any::<u32>(),
                    any::<bool>(),
                    prop_oneof![
                        1u64..1000,
                        Jumps::BIG - 2..Jumps::BIG + 2,
                        Just(u64::MAX),
                    ],
                ),
                0..40,
            ),
            seed in any::<u64>(),
        ) {
            let mut places: Vec<usize> = (0..jumps.len()).collect();
            places.sort_by_key(|&p| (p as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut adj = Jumps::zeroed(jumps.len());
            for &p in &places {
                let (other, out, count) = jumps[p];
                adj.set(p, other, out, count);
            }
            adj.finish();
            prop_assert_eq!(adj.all(), jumps);
        }
    }

    proptest! {
        // Building the chains with the nodes renamed gives what renaming the edges first
        // gives: each node's jumps in the same order, each hub keeping the same jumps.
        #[test]
        fn renamed_chains_equal_chains_of_renamed_edges(
            (sizes, _counts, edges) in crate::testutil::graph(),
            seed in any::<u64>(),
            cap in 1usize..4,
        ) {
            let n = sizes.len();
            // A permutation from the seed: sort the nodes by a hash of (seed, node).
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_by_key(|&v| (u64::from(v) ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut name = vec![0u32; n];
            for (new, &old) in order.iter().enumerate() {
                name[old as usize] = new as u32;
            }
            let renamed_sizes: Vec<u64> = order.iter().map(|&v| sizes[v as usize]).collect();
            let renamed_edges: Vec<EdgeCount> = edges
                .iter()
                .map(|x| e(name[x.src as usize], name[x.dst as usize], x.count))
                .collect();
            let a = Chains::renamed(renamed_sizes.clone(), vec![1.0; n], &edges, cap, |v| {
                name[v as usize]
            });
            let b = Chains::new(renamed_sizes, vec![1.0; n], &renamed_edges, cap);
            let jumps = |c: &Chains| c.adj.all();
            prop_assert_eq!(&a.adj_start, &b.adj_start);
            prop_assert_eq!(jumps(&a), jumps(&b));
        }
    }

    // Hub 0 has three calls and a cap of two: it keeps its two heaviest (to 2 and 3), so the
    // lighter call to 1 is dropped although 1 itself is under the cap. Recursive and zero-count
    // edges are never jumps; on equal counts the earlier edge is the heavier.
    #[test]
    fn hub_keeps_its_heaviest_jumps() {
        let edges = [e(0, 1, 5), e(0, 2, 9), e(3, 0, 7), e(1, 1, 50), e(2, 3, 0)];
        assert_eq!(
            kept_jumps(4, &edges, 2),
            vec![false, true, true, false, false]
        );
        assert_eq!(
            kept_jumps(4, &edges, 3),
            vec![true, true, true, false, false]
        );
        // A cap of at least the number of edges keeps every jump (the gated CDSort's).
        assert_eq!(
            kept_jumps(4, &edges, edges.len()),
            vec![true, true, true, false, false]
        );
        let ties = [e(0, 1, 4), e(0, 2, 4), e(0, 3, 4)];
        assert_eq!(kept_jumps(4, &ties, 2), vec![true, true, false]);
    }

    // Merges keep each chain's nodes in order in the pool, whether the second chain is
    // appended in place, copied with the first into a new block, or moved by a compaction
    // (the pool has no slack in tests), and keep every node's chain and offset: 1+2 as `Y+X`
    // gives [2, 1]; a path [3, 4] is pre-merged; 0+1 as `X+Y` gives [0, 2, 1] in a new block
    // with room for four, where 0+5 appends 5 in place; 0+3 as `Y+X` gives [3, 4, 0, 2, 1, 5].
    #[test]
    fn merges_keep_members_and_offsets() {
        let sizes = vec![10, 20, 30, 40, 50, 60];
        let mut c = Chains::new(sizes.clone(), vec![1.0; 6], &[], 4);
        c.merge(1, 2, MergeType::YX, 1);
        assert_eq!(c.members(1), &[2, 1]);
        c.pre_merge(&[3, 4]);
        c.merge(0, 1, MergeType::XY, 2);
        assert_eq!((c.members(0), c.members(1)), (&[0, 2, 1][..], &[][..]));
        let block = c.block[0];
        c.merge(0, 5, MergeType::XY, 3);
        assert_eq!((c.members(0), c.block[0]), (&[0, 2, 1, 5][..], block));
        c.merge(0, 3, MergeType::YX, 4);
        assert_eq!(c.members(0), &[3, 4, 0, 2, 1, 5]);
        assert!((1..6).all(|v| c.members(v).is_empty()));
        assert_offsets(&c, 0, &sizes);
        assert_eq!((c.stat[0].size, c.stat[0].len), (210, 6));
    }

    /// Every member of chain `x` is owned by it at the sum of the sizes before it.
    fn assert_offsets(c: &Chains, x: u32, sizes: &[u64]) {
        let mut at = 0;
        for &v in c.members(x) {
            let node = c.node[v as usize];
            assert_eq!((node.owner, u64::from(node.offset)), (x, at));
            at += sizes[v as usize];
        }
    }

    // A path of consecutive nodes is pre-merged where its nodes already are in the pool;
    // another is appended. Either merges on as any chain does.
    #[test]
    fn consecutive_paths_pre_merge_in_place() {
        let sizes = vec![10, 20, 30, 40, 50, 60];
        let mut c = Chains::new(sizes.clone(), vec![1.0; 6], &[], 8);
        c.pre_merge(&[1, 2, 3]);
        assert_eq!(
            (c.members(1), c.block[1], c.pool.len()),
            (&[1, 2, 3][..], (1, 3), 6)
        );
        c.pre_merge(&[5, 0]);
        assert_eq!(
            (c.members(0), c.block[0], c.pool.len()),
            (&[5, 0][..], (6, 2), 8)
        );
        c.merge(0, 1, MergeType::XY, 1);
        assert_eq!(c.members(0), &[5, 0, 1, 2, 3]);
        assert_offsets(&c, 0, &sizes);
        assert_eq!((c.stat[0].size, c.stat[0].len), (160, 5));
    }
}
