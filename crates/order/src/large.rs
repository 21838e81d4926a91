//! The size gate for very large call graphs: each function's few heaviest calls, and the
//! paths they form, before the published algorithm runs.
//!
//! The chain-merging and partitioning algorithms cost a random memory access per call per step
//! ([`crate::ext_tsp`], [`crate::cdsort`], [`crate::pettis_hansen`], [`crate::bp`]; see "The
//! merging engine" in `docs/algorithms.md`), which made them 3.5 to 45 times slower than the
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
//! (`docs/algorithms.md`, "Scale"). Below the gate nothing changes: the algorithms see every
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
/// 1,000,000-function, 10,000,000-call graph (seed 42; `docs/algorithms.md`, "Scale"): with
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
    /// edge), else the kept calls, in input order (recursive and zero-count edges dropped: no
    /// algorithm uses them, and which nodes count as seen is decided on the full graph).
    pub(crate) fn sparsify(&self, n: usize, edges: &[EdgeCount]) -> Option<Vec<EdgeCount>> {
        let is_call = |e: &EdgeCount| e.src != e.dst && e.count > 0;
        let calls = edges.iter().filter(|e| is_call(e)).count();
        if calls <= self.min_calls {
            return None;
        }
        let k = self.keep.max(1);
        // best[v * k..][..k]: node v's heaviest calls so far, heaviest first, as (count, edge);
        // an empty slot is (0, MAX). One pass, each call offered to both of its ends; `least`
        // holds each node's k-th count (saturated to 32 bits), a quarter of the bytes, so most
        // calls that do not make a node's list are turned away without reading it.
        let mut best = vec![(0u64, usize::MAX); n * k];
        let mut least = vec![0u32; n];
        let heavier = |a: (u64, usize), b: (u64, usize)| a.0 > b.0 || (a.0 == b.0 && a.1 < b.1);
        for (i, e) in edges.iter().enumerate().filter(|(_, e)| is_call(e)) {
            let cand = (e.count, i);
            for v in [e.src, e.dst] {
                if e.count < u64::from(least[v as usize]) {
                    continue;
                }
                let slots = &mut best[v as usize * k..][..k];
                if !heavier(cand, slots[k - 1]) {
                    continue;
                }
                let mut j = k - 1;
                while j > 0 && heavier(cand, slots[j - 1]) {
                    slots[j] = slots[j - 1];
                    j -= 1;
                }
                slots[j] = cand;
                least[v as usize] = u32::try_from(slots[k - 1].0).unwrap_or(u32::MAX);
            }
        }
        drop(least);
        let mut keep = vec![false; edges.len()];
        for &(_, i) in &best {
            if i != usize::MAX {
                keep[i] = true;
            }
        }
        Some(
            edges
                .iter()
                .zip(&keep)
                .filter(|(_, &k)| k)
                .map(|(e, _)| *e)
                .collect(),
        )
    }
}

/// Covers the nodes `0..n` with call paths, heaviest call first: visiting `calls` by count
/// (descending, ties by position), a call `u -> v` links `u` to `v` when `u` ends its path,
/// `v` starts another one, and the joined path has at most `max_len` nodes. With `directed`
/// false a call joins any two path ends, either way round, as Pettis & Hansen's undirected
/// chaining does. This is the greedy matching of Pettis & Hansen and of ExtTSP's first merges
/// (the heaviest call as a fall-through) without re-evaluating anything: a sort and one pass.
///
/// Returns every path of two or more nodes, sorted by their smallest node; a directed path in
/// call order, an undirected one from its end with the smaller index.
pub(crate) fn call_paths(
    n: usize,
    calls: &[EdgeCount],
    max_len: usize,
    directed: bool,
) -> Vec<Vec<u32>> {
    weighted_paths(&heaviest_first(calls), vec![1; n], max_len, directed)
}

/// The calls (non-recursive, positive count) of `calls` as `(caller, callee)`, heaviest first,
/// ties by position.
fn heaviest_first(calls: &[EdgeCount]) -> Vec<(u32, u32)> {
    // (MAX - count, position): sorting the pairs themselves puts the heaviest first, ties by
    // position, without looking counts up at random while sorting.
    let mut order: Vec<(u64, u32)> = calls
        .iter()
        .enumerate()
        .filter(|(_, e)| e.src != e.dst && e.count > 0)
        .map(|(i, e)| (u64::MAX - e.count, i as u32))
        .collect();
    order.sort_unstable();
    order
        .into_iter()
        .map(|(_, i)| (calls[i as usize].src, calls[i as usize].dst))
        .collect()
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

/// [`call_paths`] visiting `pairs` in order (from [`heaviest_first`]; pairs that have become
/// recursive are skipped), where node `v` counts as `len[v]` nodes towards `max_len`.
fn weighted_paths(
    pairs: &[(u32, u32)],
    len: Vec<u32>,
    max_len: usize,
    directed: bool,
) -> Vec<Vec<u32>> {
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
    let mut paths: Vec<Vec<u32>> = Vec::new();
    for h in 0..n as u32 {
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
    paths.sort_unstable_by_key(|p| p.iter().min().copied());
    paths
}

/// Groups the seen nodes for a partitioning run on a large graph: call paths of `calls`
/// ([`call_paths`], directed), then, while there are more than `target` groups, paths of
/// groups joined by the calls between them (undirected: a group has no call order of its own),
/// each round stopping at groups of `max_len` nodes, until a round merges less than a tenth.
/// Returns the groups, each in layout order (a path of groups in path order), and each node's
/// group ([`crate::NONE`] for never-seen nodes); every seen node is in exactly one group.
pub(crate) fn group_nodes(
    seen: &[bool],
    calls: &[EdgeCount],
    max_len: usize,
    target: usize,
) -> (Vec<Vec<u32>>, Vec<u32>) {
    use crate::NONE;
    let n = seen.len();
    // Mapping calls to groups changes no count and no position: one order serves every round.
    let order = heaviest_first(calls);
    let mut groups = weighted_paths(&order, vec![1; n], max_len, true);
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
            Some(vec![e(0, 1, 5), e(0, 2, 9), e(3, 0, 7)])
        );
        assert_eq!(
            forced(2, 64).sparsify(4, &edges),
            Some(vec![e(0, 1, 5), e(0, 2, 9), e(3, 0, 7), e(1, 2, 3)])
        );
        let ties = [e(0, 1, 4), e(0, 2, 4), e(3, 4, 1)];
        assert_eq!(
            forced(1, 64).sparsify(5, &ties),
            Some(vec![e(0, 1, 4), e(0, 2, 4), e(3, 4, 1)])
        );
        let ties = [e(0, 1, 4), e(2, 0, 4), e(2, 1, 9)];
        assert_eq!(
            forced(1, 64).sparsify(3, &ties),
            Some(vec![e(0, 1, 4), e(2, 1, 9)])
        );
    }

    // Heaviest call first: 0->1 and 1->2 chain; 2->0 would close a cycle, 3->1 finds 1
    // already called, 4->3 starts a second path. Capped at two nodes, 1->2 no longer fits.
    // Then 2->1 finds 1 already called, and 2->0 puts 2 before 0; undirected, 2-1 joins the
    // ends 1 and 2 the other way round and 2-0 would close a cycle.
    #[test]
    fn paths_follow_the_heaviest_calls() {
        let calls = [e(0, 1, 10), e(1, 2, 9), e(2, 0, 8), e(3, 1, 7), e(4, 3, 6)];
        assert_eq!(
            call_paths(5, &calls, 64, true),
            vec![vec![0, 1, 2], vec![4, 3]]
        );
        assert_eq!(call_paths(5, &calls, 2, true), vec![vec![0, 1], vec![4, 3]]);
        let calls = [e(0, 1, 10), e(2, 1, 9), e(2, 0, 8), e(5, 3, 1)];
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
        let calls = [e(0, 1, 9), e(1, 2, 8), e(3, 4, 7), e(2, 3, 1)];
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
            let calls = forced(keep, max_len).sparsify(n, &edges).unwrap_or_default();
            for p in call_paths(n, &calls, max_len, true) {
                prop_assert!(p.len() >= 2 && p.len() <= max_len);
                for w in p.windows(2) {
                    prop_assert!(calls.iter().any(|c| c.src == w[0] && c.dst == w[1]));
                }
            }
            let (groups, group) = group_nodes(&seen, &calls, max_len, target);
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
