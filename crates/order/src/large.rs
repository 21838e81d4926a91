//! The size gate for very large call graphs: each function's few heaviest calls, and the
//! paths they form, before the published algorithm runs.
//!
//! The chain-merging and partitioning algorithms cost a random memory access per call per step
//! ([`crate::ext_tsp`], [`crate::cdsort`], [`crate::pettis_hansen`], [`crate::bp`]; see "The
//! merging engine" in `docs/journal/ordering.md`), which made them 3.5 to 45 times slower than the
//! 2-second target at 1,000,000 functions and 10,000,000 calls. On a graph with more than
//! [`LargeGraph::min_calls`] calls, far more than any real profile (SQLite's has about 1,000
//! executed functions, PostgreSQL's a few thousand), they run on a reduced graph instead:
//! 1. **Sparsify** (`LargeGraph::sparsify`): every function keeps only its
//!    [`LargeGraph::keep`] heaviest calls (each call edge judged on its own count, in or out),
//!    and a call stays when it is among the heaviest of *either* of its ends, so no function
//!    with a call loses all of them. What a layout can give a function is a predecessor and a
//!    successor beside it and a few neighbours within reach, so its heaviest calls are the
//!    ones that can matter.
//! 2. **Coarsen along call paths**: visiting the kept calls heaviest first, a call `u -> v`
//!    links `u` to `v` when `u` ends a path and `v` starts another, up to
//!    [`LargeGraph::path_len`] functions. This is heavy-edge matching, the coarsening step of
//!    multilevel partitioning (Karypis & Kumar, "A Fast and High Quality Multilevel Scheme for
//!    Partitioning Irregular Graphs", SIAM J. Sci. Comput. 1998), restricted to path ends so
//!    that a path is also a layout: the heaviest call becomes a fall-through, which is what
//!    ExtTSP's and Pettis & Hansen's greedy loops do first anyway, but here with one sort and
//!    one pass instead of a queue re-evaluated after every merge.
//! 3. **Run the algorithm on what is left**: ExtTSP and CDSort start their merging from the
//!    paths (node positions inside a path are exact, so every gain is still computed as the
//!    paper says); Pettis & Hansen's chaining is the path cover itself (undirected, its own
//!    rule), sorted by density; bp partitions groups of paths (paths of paths joined by their
//!    calls, until at most `bp::LARGE_GRAPH_GROUPS` are left) instead of functions.
//!
//! Scores are still computed on the whole graph, so what the gate gives up shows in them
//! (`docs/journal/scale.md`, "Scale"). Below the gate nothing changes: the algorithms see every
//! call, and their layouts are byte for byte what they were before the gate existed.
//!
//! Ties between calls of equal count go to the earlier edge in the input, so the kept set, the
//! paths and every layout depend on the input alone.

use crate::EdgeCount;

/// Calls (non-recursive edges with a positive count) above which a graph takes the gated path:
/// twice the 1,000,000 calls of the scale benchmark's 100,000-function graph, whose layouts
/// must not change, and hundreds of times the calls of any real profile Sediment has met.
pub const LARGE_GRAPH_MIN_CALLS: usize = 2_000_000;

/// Heaviest calls each function keeps on a large graph. Tuned on the scale benchmark's
/// 1,000,000-function, 10,000,000-call graph (seed 42; `docs/journal/scale.md`, "Scale"): with
/// the paths, ExtTSP took 2.2 s of CPU and scored 5.429e8 keeping 4, 2.0 s and 5.176e8
/// keeping 3 (5.753e8 with every call); keeping the heaviest 4,000,000 calls of the whole
/// graph instead (4 a function on average) scored 5.189e8 in the same time.
pub const LARGE_GRAPH_KEEP: usize = 4;

/// Longest call path, in functions, formed on a large graph. Tuned on the same graph: 64 and
/// 512 gave ExtTSP and CDSort the same layouts, 16 the same time and a slightly lower CDSort
/// score (5.420e8 against 5.422e8).
pub const LARGE_GRAPH_PATH_LEN: usize = 64;

/// When a graph takes the large-graph path, and how much it is reduced (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LargeGraph {
    /// Graphs with more calls than this are sparsified ([`LARGE_GRAPH_MIN_CALLS`]).
    pub min_calls: usize,
    /// Heaviest calls each function keeps ([`LARGE_GRAPH_KEEP`]).
    pub keep: usize,
    /// Longest call path pre-merged before the algorithm runs ([`LARGE_GRAPH_PATH_LEN`]).
    pub path_len: usize,
}

impl Default for LargeGraph {
    fn default() -> Self {
        LargeGraph {
            min_calls: LARGE_GRAPH_MIN_CALLS,
            keep: LARGE_GRAPH_KEEP,
            path_len: LARGE_GRAPH_PATH_LEN,
        }
    }
}

impl LargeGraph {
    /// The calls to lay out `n` nodes by: `None` when the graph is under the gate (use every
    /// edge), else the kept calls ([`Kept`]; recursive and zero-count edges dropped: no
    /// algorithm uses them, and which nodes count as seen is decided on the full graph).
    ///
    /// One sort of all the calls, heaviest first (ties by position), then one walk: a call is
    /// among node `v`'s `keep` heaviest exactly when fewer than `keep` of `v`'s calls came
    /// before it, so a counter per node, read at both ends of each call, decides the kept set,
    /// and the kept calls come out in the order [`call_paths`] visits them. The counters are a
    /// byte each (a megabyte at 1,000,000 nodes: they stay in the cache), where the selection
    /// it replaced kept each node's best calls so far in slots read at random for every call
    /// end, and sorted the kept calls again for the paths (on the scale benchmark's
    /// 1,000,000-function graph, the two took 1.71 s of ExtTSP's 3.24 s of wall time, load
    /// average 4.9; 0.56 s of 1.51 s after, load average 2.7; `docs/journal/scale.md`, "Scale").
    pub(crate) fn sparsify(&self, n: usize, edges: &[EdgeCount]) -> Option<Kept> {
        // Only a graph of more edges than the gate can pass it: only then are the calls of
        // each count counted for the ranking's buckets in the same pass.
        let (calls, max, by_count) = count_calls(edges, edges.len() > self.min_calls);
        if calls <= self.min_calls {
            return None;
        }
        let ranked = rank_calls(edges, calls, max, by_count);
        let k = self.keep.max(1);
        let mut kept = vec![0u64; edges.len().div_ceil(64)];
        let heaviest = match u8::try_from(k) {
            Ok(k) => take_heaviest(n, &ranked, k, &mut kept),
            Err(_) => take_heaviest(n, &ranked, u32::try_from(k).unwrap_or(u32::MAX), &mut kept),
        };
        drop(ranked);
        let calls = edges
            .iter()
            .enumerate()
            .filter(|&(i, _)| kept[i / 64] & (1 << (i % 64)) != 0)
            .map(|(_, e)| *e)
            .collect();
        Some(Kept { calls, heaviest })
    }
}

/// The calls a graph above the gate is laid out by ([`LargeGraph::sparsify`]), in two orders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The kept calls, in input order.
    pub calls: Vec<EdgeCount>,
    /// The same calls as `(caller, callee)`, heaviest first, ties by input position: the order
    /// [`call_paths`] and [`group_nodes`] visit them in.
    pub heaviest: Vec<(u32, u32)>,
}

/// A call the layout algorithms use: not recursive, a positive count.
fn is_call(e: &EdgeCount) -> bool {
    e.src != e.dst && e.count > 0
}

/// A call in [`rank_calls`]' order: its ends and its position in the input (graphs have fewer
/// than 2^32 edges: their nodes are `u32`, and 2^32 edges would take 64 GiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ranked {
    src: u32,
    dst: u32,
    at: u32,
}

/// The number of calls of `edges`, their largest count, and, when `by_count` and every count
/// is below the number of edges, the number of calls of each count (else nothing): one pass
/// for the gate's test and the counting of [`rank_calls`], which took a pass of its own
/// (0.01-0.02 s of wall time on the scale benchmark's 1,000,000-function graph).
fn count_calls(edges: &[EdgeCount], by_count: bool) -> (usize, u64, Vec<usize>) {
    let (mut calls, mut max) = (0usize, 0u64);
    let (mut hist, mut fits) = (Vec::new(), by_count);
    for e in edges.iter().filter(|e| is_call(e)) {
        calls += 1;
        max = max.max(e.count);
        if fits {
            match usize::try_from(e.count) {
                Ok(c) if c < edges.len() => {
                    if c >= hist.len() {
                        hist.resize(c + 1, 0);
                    }
                    hist[c] += 1;
                }
                _ => fits = false,
            }
        }
    }
    if !fits {
        hist = Vec::new();
    }
    (calls, max, hist)
}

/// The `calls` calls of `edges` (`max` their largest count), heaviest first, ties by position.
/// When the largest count is below the number of calls, a counting sort: the calls of each
/// count (`by_count`, from [`count_calls`], or counted here in a pass of their own when it is
/// empty), then one pass to place them, reading the edges in order, and the buckets no more
/// than the output; else a comparison sort of (count, position) pairs.
fn rank_calls(edges: &[EdgeCount], calls: usize, max: u64, by_count: Vec<usize>) -> Vec<Ranked> {
    let ranked = |i: usize, e: &EdgeCount| Ranked {
        src: e.src,
        dst: e.dst,
        at: i as u32,
    };
    if max >= calls as u64 {
        return rank_by_comparison(edges, calls);
    }
    // Bucket `max - count`: heaviest first; a bucket fills in input order.
    let mut next = vec![0usize; max as usize + 1];
    if by_count.len() == next.len() {
        for (b, &k) in next.iter_mut().zip(by_count.iter().rev()) {
            *b = k;
        }
    } else {
        for e in edges.iter().filter(|e| is_call(e)) {
            next[(max - e.count) as usize] += 1;
        }
    }
    let mut at = 0;
    for b in &mut next {
        (*b, at) = (at, at + *b);
    }
    let mut out = vec![Ranked::default(); calls];
    for (i, e) in edges.iter().enumerate().filter(|(_, e)| is_call(e)) {
        let b = &mut next[(max - e.count) as usize];
        out[*b] = ranked(i, e);
        *b += 1;
    }
    out
}

/// [`rank_calls`] by sorting (count, position) pairs: for counts too large to bucket.
fn rank_by_comparison(edges: &[EdgeCount], calls: usize) -> Vec<Ranked> {
    // (MAX - count, position): sorting the pairs themselves puts the heaviest first, ties by
    // position, without looking counts up at random while sorting.
    let mut order: Vec<(u64, u32)> = Vec::with_capacity(calls);
    order.extend(
        edges
            .iter()
            .enumerate()
            .filter(|(_, e)| is_call(e))
            .map(|(i, e)| (u64::MAX - e.count, i as u32)),
    );
    order.sort_unstable();
    order
        .into_iter()
        .map(|(_, i)| {
            let e = &edges[i as usize];
            Ranked {
                src: e.src,
                dst: e.dst,
                at: i,
            }
        })
        .collect()
}

/// Walks `ranked` (heaviest first) keeping each call that is among the `k` heaviest of either
/// end, i.e. that finds fewer than `k` earlier calls at one of its ends; sets the kept calls'
/// bits (by position) in `kept` and returns them in walk order. `C` is the counter type: a
/// byte when `k` fits, so that the counters of a million nodes stay in the cache.
fn take_heaviest<C>(n: usize, ranked: &[Ranked], k: C, kept: &mut [u64]) -> Vec<(u32, u32)>
where
    C: Copy + Ord + Default + std::ops::Add<Output = C> + From<u8>,
{
    let mut before = vec![C::default(); n];
    let mut heaviest = Vec::new();
    for r in ranked {
        let (s, d) = (before[r.src as usize], before[r.dst as usize]);
        if s < k || d < k {
            kept[r.at as usize / 64] |= 1 << (r.at % 64);
            heaviest.push((r.src, r.dst));
        }
        if s < k {
            before[r.src as usize] = s + C::from(1);
        }
        if d < k {
            before[r.dst as usize] = d + C::from(1);
        }
    }
    heaviest
}

/// Covers the nodes `0..n` with call paths, heaviest call first: visiting the calls
/// `heaviest` in order ([`Kept::heaviest`]: by count, descending, ties by position; a
/// recursive pair is skipped), a call `u -> v` links `u` to `v` when `u` ends its path,
/// `v` starts another one, and the joined path has at most `max_len` nodes. With `directed`
/// false a call joins any two path ends, either way round, as Pettis & Hansen's undirected
/// chaining does. This is the greedy matching of Pettis & Hansen and of ExtTSP's first merges
/// (the heaviest call as a fall-through) without re-evaluating anything: one pass.
///
/// Returns every path of two or more nodes, sorted by their smallest node; a directed path in
/// call order, an undirected one from its end with the smaller index.
pub(crate) fn call_paths(
    n: usize,
    heaviest: &[(u32, u32)],
    max_len: usize,
    directed: bool,
) -> Vec<Vec<u32>> {
    weighted_paths(heaviest, vec![1; n], max_len, directed)
}

/// The directed paths of [`call_paths`], each handed to `f` as it is found, in no particular
/// order and without allocating each: for callers to whom the order of disjoint paths does
/// not matter ([`crate::merge::Chains::pre_merge`]; at 1,000,000 functions, collecting and
/// sorting the paths took as long as linking them).
pub(crate) fn for_each_call_path(
    n: usize,
    heaviest: &[(u32, u32)],
    max_len: usize,
    f: impl FnMut(&[u32]),
) {
    let node = link_paths(heaviest, vec![1; n], max_len, true);
    walk_paths(&node, true, f);
}

/// Where a node is on its path: its two neighbours (directed, [previous, next]; undirected, in
/// the order they were linked; a node with a free slot ends its path) and, valid at either
/// end of a path, the other end and the path's length. One record, so that linking reads one
/// cache line per end.
#[derive(Clone, Copy)]
struct PathNode {
    link: [u32; 2],
    end: u32,
    len: u32,
}

/// [`call_paths`] visiting `pairs` in order (from [`Kept::heaviest`]; pairs that have become
/// recursive are skipped), where node `v` counts as `len[v]` nodes towards `max_len`.
fn weighted_paths(
    pairs: &[(u32, u32)],
    len: Vec<u32>,
    max_len: usize,
    directed: bool,
) -> Vec<Vec<u32>> {
    let node = link_paths(pairs, len, max_len, directed);
    let mut paths: Vec<Vec<u32>> = Vec::new();
    walk_paths(&node, directed, |p| paths.push(p.to_vec()));
    paths.sort_unstable_by_key(|p| p.iter().min().copied());
    paths
}

/// The linking of [`weighted_paths`]: each node's place on its path.
fn link_paths(
    pairs: &[(u32, u32)],
    len: Vec<u32>,
    max_len: usize,
    directed: bool,
) -> Vec<PathNode> {
    use crate::NONE;
    let n = len.len();
    let mut node: Vec<PathNode> = (0..n as u32)
        .zip(len)
        .map(|(v, len)| PathNode {
            link: [NONE; 2],
            end: v,
            len,
        })
        .collect();
    for &(u, v) in pairs {
        if u == v {
            continue;
        }
        let (ui, vi) = (u as usize, v as usize);
        let (nu, nv) = (node[ui], node[vi]);
        let slots = if directed {
            (nu.link[1] == NONE)
                .then_some(1)
                .zip((nv.link[0] == NONE).then_some(0))
        } else {
            let free = |l: &[u32; 2]| l.iter().position(|&w| w == NONE);
            free(&nu.link).zip(free(&nv.link))
        };
        // Both must end a path, and not the same one.
        let Some((su, sv)) = slots else { continue };
        if nu.end == v {
            continue;
        }
        let joined = nu.len as usize + nv.len as usize;
        if joined > max_len {
            continue;
        }
        let (a, b) = (nu.end, nv.end);
        node[ui].link[su] = v;
        node[vi].link[sv] = u;
        for (x, other) in [(a, b), (b, a)] {
            let x = &mut node[x as usize];
            x.end = other;
            x.len = joined as u32;
        }
    }
    node
}

/// Paths [`walk_paths`] follows at once.
const WALKS: usize = 16;

/// Hands every path of two or more nodes of `node` ([`link_paths`]) to `f`, by its first node:
/// a directed path in call order, an undirected one from its end with the smaller index.
///
/// Following a path is a chain of dependent reads, one cache miss per node at random (on the
/// scale benchmark's 1,000,000-function graph, 870,000 nodes on paths: about 0.1 s of wall
/// time walked one by one). So [`WALKS`] paths are followed together, a step of each in
/// turn, and their misses overlap; they are handed to `f` in the same order as before.
fn walk_paths(node: &[PathNode], directed: bool, mut f: impl FnMut(&[u32])) {
    use crate::NONE;
    let is_start = |h: u32| {
        let PathNode { link: l, end, .. } = node[h as usize];
        if directed {
            l[0] == NONE && l[1] != NONE
        } else {
            (l[0] == NONE) != (l[1] == NONE) && h < end
        }
    };
    let mut starts = (0..node.len() as u32).filter(|&h| is_start(h));
    let mut paths: Vec<Vec<u32>> = vec![Vec::new(); WALKS];
    // (previous, current) node of each walk; `current` NONE once the walk has ended.
    let mut at: Vec<(u32, u32)> = Vec::with_capacity(WALKS);
    loop {
        at.clear();
        at.extend(starts.by_ref().take(WALKS).map(|h| (NONE, h)));
        if at.is_empty() {
            return;
        }
        let mut walking = at.len();
        while walking > 0 {
            for (k, (prev, cur)) in at.iter_mut().enumerate() {
                if *cur == NONE {
                    continue;
                }
                paths[k].push(*cur);
                let [a, b] = node[*cur as usize].link;
                let next = if a != *prev && a != NONE {
                    a
                } else if b != *prev {
                    b
                } else {
                    NONE
                };
                (*prev, *cur) = (*cur, next);
                if next == NONE {
                    walking -= 1;
                }
            }
        }
        for path in &mut paths[..at.len()] {
            f(path);
            path.clear();
        }
    }
}

/// Groups the seen nodes for a partitioning run on a large graph: call paths of the calls
/// `heaviest` ([`Kept::heaviest`], [`call_paths`], directed), then, while there are more than `target` groups, paths of
/// groups joined by the calls between them (undirected: a group has no call order of its own),
/// each round stopping at groups of `max_len` nodes, until a round merges less than a tenth.
/// Returns the groups, each in layout order (a path of groups in path order), and each node's
/// group ([`crate::NONE`] for never-seen nodes); every seen node is in exactly one group.
pub(crate) fn group_nodes(
    seen: &[bool],
    heaviest: &[(u32, u32)],
    max_len: usize,
    target: usize,
) -> (Vec<Vec<u32>>, Vec<u32>) {
    use crate::NONE;
    let n = seen.len();
    // Mapping calls to groups changes no count and no position: one order serves every round.
    let order = heaviest;
    let mut groups = weighted_paths(order, vec![1; n], max_len, true);
    let mut group = vec![NONE; n];
    let assign = |groups: &[Vec<u32>], group: &mut [u32]| {
        for (g, p) in groups.iter().enumerate() {
            for &v in p {
                group[v as usize] = g as u32;
            }
        }
    };
    assign(&groups, &mut group);
    for v in 0..n as u32 {
        if seen[v as usize] && group[v as usize] == NONE {
            group[v as usize] = groups.len() as u32;
            groups.push(vec![v]);
        }
    }
    loop {
        let m = groups.len();
        if m <= target {
            return (groups, group);
        }
        let pairs: Vec<(u32, u32)> = order
            .iter()
            .map(|&(u, v)| (group[u as usize], group[v as usize]))
            .collect();
        let len = groups.iter().map(|g| g.len() as u32).collect();
        let paths = weighted_paths(&pairs, len, max_len, false);
        let merged: usize = paths.iter().map(|p| p.len() - 1).sum();
        if merged * 10 < m {
            return (groups, group);
        }
        let mut used = vec![false; m];
        let mut next: Vec<Vec<u32>> = Vec::with_capacity(m - merged);
        for p in &paths {
            let mut joined = Vec::new();
            for &g in p {
                used[g as usize] = true;
                joined.extend_from_slice(&groups[g as usize]);
            }
            next.push(joined);
        }
        for (g, members) in groups.into_iter().enumerate() {
            if !used[g] {
                next.push(members);
            }
        }
        groups = next;
        assign(&groups, &mut group);
    }
}

/// `calls` between the groups of their ends (`group[v]`: node `v`'s group), in the same
/// positions; calls inside a group become recursive.
pub(crate) fn group_calls(calls: &[EdgeCount], group: &[u32]) -> Vec<EdgeCount> {
    calls
        .iter()
        .map(|e| EdgeCount {
            src: group[e.src as usize],
            dst: group[e.dst as usize],
            count: e.count,
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::{check_layout, e, graph, unseen};
    use proptest::prelude::*;

    /// A gate that every graph passes, for the tests of the large-graph paths on tiny graphs.
    pub fn forced(keep: usize, path_len: usize) -> LargeGraph {
        LargeGraph {
            min_calls: 0,
            keep,
            path_len,
        }
    }

    // At or under the gate, nothing is sparsified; over it, each node keeps its heaviest call:
    // 0 keeps 0->2 (9), 1 keeps 0->1 (5), 2 keeps 0->2, 3 keeps 3->0; 1->2 (3) is nobody's
    // heaviest and goes, as do the recursive and the zero-count edges. Equal counts: the
    // earlier edge is the heavier.
    #[test]
    fn keeps_each_nodes_heaviest_calls() {
        let edges = [
            e(0, 1, 5),
            e(0, 2, 9),
            e(3, 0, 7),
            e(1, 1, 50),
            e(2, 3, 0),
            e(1, 2, 3),
        ];
        let gate = |min_calls| LargeGraph {
            min_calls,
            keep: 1,
            path_len: 64,
        };
        assert_eq!(gate(4).sparsify(4, &edges), None);
        assert_eq!(
            gate(3).sparsify(4, &edges),
            Some(Kept {
                calls: vec![e(0, 1, 5), e(0, 2, 9), e(3, 0, 7)],
                heaviest: vec![(0, 2), (3, 0), (0, 1)],
            })
        );
        let kept = |keep, n, edges: &[EdgeCount]| forced(keep, 64).sparsify(n, edges).unwrap();
        assert_eq!(
            kept(2, 4, &edges).calls,
            vec![e(0, 1, 5), e(0, 2, 9), e(3, 0, 7), e(1, 2, 3)]
        );
        let ties = [e(0, 1, 4), e(0, 2, 4), e(3, 4, 1)];
        assert_eq!(kept(1, 5, &ties).calls, ties);
        assert_eq!(kept(1, 5, &ties).heaviest, vec![(0, 1), (0, 2), (3, 4)]);
        let ties = [e(0, 1, 4), e(2, 0, 4), e(2, 1, 9)];
        assert_eq!(kept(1, 3, &ties).calls, vec![e(0, 1, 4), e(2, 1, 9)]);
        // Counts above the number of calls are sorted, not bucketed: the same calls kept.
        let big = [
            e(0, 1, 5 << 40),
            e(0, 2, 9 << 40),
            e(3, 0, 7 << 40),
            e(1, 2, 3 << 40),
        ];
        assert_eq!(kept(1, 4, &big).heaviest, vec![(0, 2), (3, 0), (0, 1)]);
    }

    /// The calls of `calls` as `(caller, callee)`, heaviest first, ties by position: the
    /// order of [`Kept::heaviest`], by a plain sort.
    pub fn heaviest_first(calls: &[EdgeCount]) -> Vec<(u32, u32)> {
        let mut order: Vec<(std::cmp::Reverse<u64>, usize)> = calls
            .iter()
            .enumerate()
            .filter(|(_, e)| is_call(e))
            .map(|(i, e)| (std::cmp::Reverse(e.count), i))
            .collect();
        order.sort();
        order
            .iter()
            .map(|&(_, i)| (calls[i].src, calls[i].dst))
            .collect()
    }

    /// Each node's `k` heaviest calls (by count, then position), by sorting each node's
    /// calls: the kept set of [`LargeGraph::sparsify`], computed the plain way.
    fn kept_by_sorting(n: usize, edges: &[EdgeCount], k: usize) -> Vec<EdgeCount> {
        let mut keep = vec![false; edges.len()];
        for v in 0..n as u32 {
            let mut mine: Vec<(std::cmp::Reverse<u64>, usize)> = edges
                .iter()
                .enumerate()
                .filter(|(_, e)| is_call(e) && (e.src == v || e.dst == v))
                .map(|(i, e)| (std::cmp::Reverse(e.count), i))
                .collect();
            mine.sort();
            for &(_, i) in mine.iter().take(k) {
                keep[i] = true;
            }
        }
        edges
            .iter()
            .zip(&keep)
            .filter(|(_, &k)| k)
            .map(|(e, _)| *e)
            .collect()
    }

    /// [`walk_paths`] one path at a time, as it was before it followed [`WALKS`] together.
    fn walk_one_by_one(node: &[PathNode], directed: bool) -> Vec<Vec<u32>> {
        use crate::NONE;
        let mut paths = Vec::new();
        for h in 0..node.len() as u32 {
            let PathNode { link: l, end, .. } = node[h as usize];
            let start = if directed {
                l[0] == NONE && l[1] != NONE
            } else {
                (l[0] == NONE) != (l[1] == NONE) && h < end
            };
            if !start {
                continue;
            }
            let (mut path, mut prev, mut cur) = (Vec::new(), NONE, h);
            while cur != NONE {
                path.push(cur);
                let [a, b] = node[cur as usize].link;
                let next = if a != prev && a != NONE {
                    a
                } else if b != prev {
                    b
                } else {
                    NONE
                };
                (prev, cur) = (cur, next);
            }
            paths.push(path);
        }
        paths
    }

    proptest! {
        // Following many paths together hands out the same paths, in the same order, as
        // following them one by one: directed and undirected, more paths than WALKS, of
        // lengths from two to `max_len`.
        #[test]
        fn walking_paths_together_walks_them_alike(
            pairs in proptest::collection::vec((0u32..200, 0u32..200), 0..400),
            max_len in 2usize..20,
            directed in any::<bool>(),
        ) {
            let node = link_paths(&pairs, vec![1; 200], max_len, directed);
            let mut together = Vec::new();
            walk_paths(&node, directed, |p| together.push(p.to_vec()));
            prop_assert_eq!(together, walk_one_by_one(&node, directed));
        }
    }

    proptest! {
        // The one sort and walk of `sparsify` keep what sorting each node's calls keeps, and
        // list them heaviest first; bucketing and comparison rank the calls alike. Counts
        // from a small range, so that both rankings run and ties are common.
        #[test]
        fn sparsify_keeps_each_nodes_heaviest(
            n in 1usize..30,
            raw in proptest::collection::vec((0u32..30, 0u32..30, 0u64..12), 0..120),
            keep in 1usize..5,
            scale in prop_oneof![Just(1u64), Just(1u64 << 40)],
        ) {
            let edges: Vec<EdgeCount> = raw
                .iter()
                .map(|&(s, d, c)| e(s % n as u32, d % n as u32, c * scale))
                .collect();
            let kept = forced(keep, 64).sparsify(n, &edges).unwrap_or_default();
            prop_assert_eq!(&kept.calls, &kept_by_sorting(n, &edges, keep));
            prop_assert_eq!(&kept.heaviest, &heaviest_first(&kept.calls));
            let (calls, max) = edges
                .iter()
                .filter(|e| is_call(e))
                .fold((0, 0), |(c, m), e| (c + 1, e.count.max(m)));
            let by_count = count_calls(&edges, true);
            prop_assert_eq!(by_count.0, calls);
            prop_assert_eq!(by_count.1, max);
            let sorted = rank_by_comparison(&edges, calls);
            prop_assert_eq!(&rank_calls(&edges, calls, max, by_count.2), &sorted);
            prop_assert_eq!(&rank_calls(&edges, calls, max, Vec::new()), &sorted);
        }
    }

    // Heaviest call first: 0->1 and 1->2 chain; 2->0 would close a cycle, 3->1 finds 1
    // already called, 4->3 starts a second path. Capped at two nodes, 1->2 no longer fits.
    // Then 2->1 finds 1 already called, and 2->0 puts 2 before 0; undirected, 2-1 joins the
    // ends 1 and 2 the other way round and 2-0 would close a cycle.
    #[test]
    fn paths_follow_the_heaviest_calls() {
        let calls = heaviest_first(&[e(0, 1, 10), e(1, 2, 9), e(2, 0, 8), e(3, 1, 7), e(4, 3, 6)]);
        assert_eq!(
            call_paths(5, &calls, 64, true),
            vec![vec![0, 1, 2], vec![4, 3]]
        );
        assert_eq!(call_paths(5, &calls, 2, true), vec![vec![0, 1], vec![4, 3]]);
        let calls = heaviest_first(&[e(0, 1, 10), e(2, 1, 9), e(2, 0, 8), e(5, 3, 1)]);
        assert_eq!(
            call_paths(6, &calls, 64, true),
            vec![vec![2, 0, 1], vec![5, 3]]
        );
        assert_eq!(
            call_paths(6, &calls, 64, false),
            vec![vec![0, 1, 2], vec![3, 5]]
        );
    }

    // Groups of a chain 0->1->2 and a pair 3->4, then (target 1) the undirected round joins
    // them along 2-3; node 5 is never seen and in no group.
    #[test]
    fn groups_paths_then_paths_of_groups() {
        let seen = [true, true, true, true, true, false];
        let calls = heaviest_first(&[e(0, 1, 9), e(1, 2, 8), e(3, 4, 7), e(2, 3, 1)]);
        // Without the weak call 2-3, no second round can join anything.
        let (groups, group) = group_nodes(&seen, &calls[..3], 64, 1);
        assert_eq!(groups, vec![vec![0, 1, 2], vec![3, 4]]);
        assert_eq!(group, vec![0, 0, 0, 1, 1, NONE_GROUP]);
        let (groups, _) = group_nodes(&seen, &calls, 64, 1);
        assert_eq!(groups, vec![vec![0, 1, 2, 3, 4]]);
        let (groups, _) = group_nodes(&seen, &calls, 4, 1);
        assert_eq!(groups, vec![vec![0, 1, 2], vec![3, 4]]);
    }

    const NONE_GROUP: u32 = crate::NONE;

    proptest! {
        // Every gated algorithm, the gate forced: a permutation, the same twice, unseen nodes
        // last in input order, a finite score.
        #[test]
        fn gated_layouts_have_the_properties(
            (sizes, counts, edges) in graph(),
            keep in 1usize..4,
            path_len in 1usize..6,
        ) {
            let large = forced(keep, path_len);
            let ext_tsp = crate::ExtTspLayoutParams { large: large.clone(), ..Default::default() };
            let cdsort = crate::CdSortParams { large: large.clone(), ..Default::default() };
            let tiered = crate::TieredParams { cdsort: cdsort.clone(), ..Default::default() };
            let bp = crate::BpParams { large: large.clone(), ..Default::default() };
            let none = vec![None; counts.len()];
            type Layout<'a> = &'a dyn Fn(&[u64], &[u64], &[EdgeCount]) -> Vec<u32>;
            let layouts: [Layout; 5] = [
                &|s, c, e| crate::ext_tsp_layout(s, c, e, &ext_tsp).unwrap(),
                &|s, c, e| crate::cdsort_layout(s, c, e, &cdsort).unwrap(),
                &|s, c, e| crate::tiered_layout(s, c, e, &tiered).unwrap(),
                &|s, c, e| crate::bp_layout(s, c, e, &none, &bp).unwrap(),
                &|s, c, e| {
                    crate::pettis_hansen::pettis_hansen_layout_gated(s, c, e, &large).unwrap()
                },
            ];
            for layout in layouts {
                check_layout(layout, &sizes, &counts, &edges)?;
            }
        }
    }

    proptest! {
        // Every seen node is in exactly one group, of at most `max_len` nodes; never-seen nodes
        // in none; every path is a path of calls, in call order, within `max_len`.
        #[test]
        fn groups_cover_the_seen_nodes(
            (_, counts, edges) in graph(),
            keep in 1usize..4,
            max_len in 2usize..6,
            target in 1usize..8,
        ) {
            let n = counts.len();
            let seen = crate::seen_nodes(&counts, &edges);
            let kept = forced(keep, max_len).sparsify(n, &edges);
            let Kept { calls, heaviest } = kept.unwrap_or_default();
            for p in call_paths(n, &heaviest, max_len, true) {
                prop_assert!(p.len() >= 2 && p.len() <= max_len);
                for w in p.windows(2) {
                    prop_assert!(calls.iter().any(|c| c.src == w[0] && c.dst == w[1]));
                }
            }
            let (groups, group) = group_nodes(&seen, &heaviest, max_len, target);
            let mut times = vec![0; n];
            for (g, members) in groups.iter().enumerate() {
                prop_assert!(!members.is_empty() && members.len() <= max_len);
                for &v in members {
                    times[v as usize] += 1;
                    prop_assert_eq!(group[v as usize], g as u32);
                }
            }
            for v in 0..n {
                prop_assert_eq!(times[v], usize::from(seen[v]));
            }
            prop_assert_eq!(unseen(&counts, &edges).len(), n - times.iter().sum::<usize>());
        }
    }
}
