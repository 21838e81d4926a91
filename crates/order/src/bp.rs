//! Balanced partitioning (BP): recursive graph bisection that puts functions used together on
//! the same pages, aimed at the page faults of program startup.
//!
//! Hoag, Lee, Stemmer, Lepp, Ren, "Optimizing Function Layout for Mobile Applications" (LCTES
//! 2023), as lld ships it (`BPSectionOrderer`, on LLVM's `BalancedPartitioning.cpp`), applies
//! Dhulipala et al.'s graph bisection ("Compressing Graphs and Indexes with Recursive Graph
//! Bisection", KDD 2016) to code layout. The input is a bipartite graph: *data* vertices
//! (functions) and *utility* vertices, each utility being a set of functions that should share a
//! page. Startup faults come from the first-execution order: if functions are ranked by when
//! they first ran, a utility per prefix of that order ("everything that ran before time `t`")
//! makes the early functions share many utilities, so they end up together at the front. The
//! algorithm:
//! 1. Sort the functions (startup rank, then hottest first, then index) and split them into two
//!    halves of equal count.
//! 2. For a fixed number of iterations: compute each function's *move gain*, the drop of the
//!    log-gap cost `Σ_u d1(u)·log2(n1 / (d1(u) + 1)) + d2(u)·log2(n2 / (d2(u) + 1))` (d1, d2:
//!    members of `u` in each half, n1, n2: sizes of the halves) if it alone moved to the other
//!    half; sort each half by gain, descending (ties by index), and swap pairs while the sum of
//!    their gains is positive. Stop early when nothing is swapped.
//! 3. Recurse into both halves down to [`BpParams::max_depth`] levels or single functions; the
//!    half holding the earliest-ranked function (else the hottest) is placed first.
//!
//! Utilities ([`bp_utilities`]): when a startup order is known, one per prefix of
//! [`STARTUP_PREFIX_STEP`]·2^k first-executed functions (geometric, so a function ranked `r`
//! is in `log2(N / r)` of them: about `N log N` memberships, not `N²`); always, for every
//! function, a set of it and its [`BpParams::neighbours`] heaviest call partners, so steady-state
//! callers and callees stay together too.
//!
//! Its score is [`startup_pages`]: the distinct 4 KiB pages touched by the first `k` functions
//! of the startup order, laid out back to back.
//!
//! Parameters: `max_depth` 16 and `iterations` 20 (lld's `BalancedPartitioningConfig`: split
//! depth 18, 40 iterations; halved here because a profile has fewer functions than the
//! multi-megabyte apps the paper measured, and the cost is linear in both); `neighbours` 4
//! (our choice: enough for the chain a call path forms, few enough that a hub's utility does
//! not drown the rest; tuned on nothing but the tests yet).
//!
//! Cost: every level of the recursion runs up to `iterations` rounds over all memberships, so
//! about `max_depth * iterations * memberships` reads of a utility's member counts, at random.
//! What keeps that down without changing the layout: the member counts are taken once per
//! bisection (the swaps keep them current), the two halves' counts of a utility sit side by
//! side (one cache line), gains are computed in node order (a node's memberships are read at
//! increasing addresses), `log2` comes from a table of its own values (lld does the same), and
//! the halves are sorted on gathered keys. The remaining time is the random reads of member
//! counts: 45 to 54 s of CPU at 1,000,000 functions.
//!
//! Graphs above the large-graph gate ([`crate::large`], 2,000,000 calls) are partitioned in
//! groups, the coarsening of multilevel partitioning: the paths of each function's 4 heaviest
//! calls, then paths of those paths, until at most [`LARGE_GRAPH_GROUPS`] groups are left; a
//! group weighs its members' sizes and counts, starts at its earliest startup rank, and is laid
//! out in path order where it lands. Unlike lld's and the paper's, nothing is refined at the
//! level of single functions afterwards. Below the gate the layout is unchanged.
//!
//! Deviations from lld: lld balances by count and so do we; lld lets a utility be dropped when
//! it holds too many functions, we keep all (prefix sets are few); lld moves functions in
//! random order within a tie and seeds it, we break every tie by node index.

use crate::{append_unseen, check_graph, seen_nodes, EdgeCount, Error, LargeGraph, PAGE_SIZE};

/// The first prefix of the startup order that gets a utility, in functions; prefixes double
/// from it (8, 16, 32, ...). Smaller prefixes are below one page of functions.
pub const STARTUP_PREFIX_STEP: usize = 8;

/// On a graph above the large-graph gate, functions are grouped until at most this many groups
/// are left, and the groups are partitioned (see `large::group_nodes`). The scale
/// benchmark's 100,000-function graph, partitioned function by function, took 1.35 s of CPU;
/// its 1,000,000-function graph comes down to 87,000 groups.
pub const LARGE_GRAPH_GROUPS: usize = 100_000;

/// How many right-half candidates a left-half move may pair with (see `Bisection::recurse`).
const PAIR_WINDOW: usize = 4;

/// Parameters of [`bp_layout`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BpParams {
    /// Levels of bisection (16).
    pub max_depth: u32,
    /// Swap rounds per bisection (20).
    pub iterations: u32,
    /// Heaviest call partners in each function's call-graph utility (4).
    pub neighbours: usize,
    /// The size gate: on graphs above it, partition call paths instead of functions.
    pub large: LargeGraph,
}

impl Default for BpParams {
    fn default() -> Self {
        BpParams {
            max_depth: 16,
            iterations: 20,
            neighbours: 4,
            large: LargeGraph::default(),
        }
    }
}

impl BpParams {
    /// The parameters as `key=value` pairs separated by commas, for the order file's metadata.
    pub fn describe(&self) -> String {
        format!(
            "max-depth={},iterations={},neighbours={}",
            self.max_depth, self.iterations, self.neighbours
        )
    }
}

/// Builds the utility sets (see the module docs): prefixes of the startup order, where
/// `startup[v]` is node `v`'s first-execution rank (`None`: not seen at startup), and each
/// node with its heaviest call partners (ties by partner index).
pub fn bp_utilities(
    n: usize,
    edges: &[EdgeCount],
    startup: &[Option<u32>],
    params: &BpParams,
) -> Vec<Vec<u32>> {
    let mut utilities = Vec::new();
    let mut ranked: Vec<(u32, u32)> = startup
        .iter()
        .enumerate()
        .filter_map(|(v, r)| r.map(|r| (r, v as u32)))
        .collect();
    ranked.sort_unstable();
    let mut prefix = STARTUP_PREFIX_STEP;
    while prefix < ranked.len() {
        utilities.push(ranked[..prefix].iter().map(|&(_, v)| v).collect());
        prefix *= 2;
    }
    if params.neighbours > 0 {
        let mut partners: Vec<Vec<(u64, u32)>> = vec![Vec::new(); n];
        for e in edges.iter().filter(|e| e.src != e.dst && e.count > 0) {
            partners[e.src as usize].push((e.count, e.dst));
            partners[e.dst as usize].push((e.count, e.src));
        }
        for (v, p) in partners.iter_mut().enumerate() {
            if p.is_empty() {
                continue;
            }
            p.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut set: Vec<u32> = std::iter::once(v as u32)
                .chain(p.iter().map(|&(_, w)| w))
                .collect();
            set.truncate(params.neighbours + 1);
            set.sort_unstable();
            set.dedup();
            if set.len() > 1 {
                utilities.push(set);
            }
        }
    }
    utilities
}

/// A fixed bijection of node ids (SplitMix64's finaliser) that breaks ties between equal gains:
/// by index, the two halves of a symmetric graph would pair members of the same community and
/// every swap would undo itself; lld shuffles with a seeded generator for the same reason.
fn scramble(v: u32) -> u64 {
    let mut z = u64::from(v).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `log2` of a count, with `log2(0)` taken as 0 (a term multiplied by a zero degree).
fn log2(x: u32) -> f64 {
    if x == 0 {
        0.0
    } else {
        f64::from(x).log2()
    }
}

/// [`log2`] of every count up to `n`, so that the move gains, which need eight of them per
/// membership, look them up (lld keeps the same table); the values are [`log2`]'s own, so the
/// layout is the same as computing them each time.
fn log2_table(n: usize) -> Vec<f64> {
    (0..=n as u32 + 1).map(log2).collect()
}

/// Log-gap cost of a utility with `d` members in a half of `n` functions, with `log` from
/// [`log2_table`].
fn cost(log: &[f64], d: u32, n: u32) -> f64 {
    f64::from(d) * (log[n as usize] - log[d as usize + 1])
}

/// Orders nodes by recursive balanced partitioning over `utilities` (see the module docs).
/// `startup[v]` is node `v`'s first-execution rank, if any; it also decides which half goes
/// first. Returns a permutation of `0..n`, never-seen nodes last in input order (a node with a
/// startup rank counts as seen).
pub fn bp_layout(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    startup: &[Option<u32>],
    params: &BpParams,
) -> Result<Vec<u32>, Error> {
    let n = check_graph(sizes, counts, edges)?;
    if startup.len() != n {
        return Err(Error::LengthMismatch {
            sizes: n,
            counts: startup.len(),
        });
    }
    let mut seen = seen_nodes(counts, edges);
    for (s, r) in seen.iter_mut().zip(startup) {
        *s |= r.is_some();
    }
    if let Some(kept) = params.large.sparsify(n, edges) {
        return large_layout(sizes, counts, &seen, &kept, startup, params);
    }
    let utilities = bp_utilities(n, edges, startup, params);
    // Node -> the utilities it belongs to (CSR).
    let mut start = vec![0usize; n + 1];
    for u in &utilities {
        for &v in u {
            start[v as usize + 1] += 1;
        }
    }
    for v in 0..n {
        start[v + 1] += start[v];
    }
    let mut fill = start.clone();
    let mut member = vec![0u32; start[n]];
    for (i, u) in utilities.iter().enumerate() {
        for &v in u {
            member[fill[v as usize]] = i as u32;
            fill[v as usize] += 1;
        }
    }
    // Initial order: startup rank, then hottest, then index.
    let key = |v: u32| {
        (
            startup[v as usize].unwrap_or(u32::MAX),
            std::cmp::Reverse(counts[v as usize]),
            v,
        )
    };
    let mut nodes: Vec<u32> = (0..n as u32).filter(|&v| seen[v as usize]).collect();
    nodes.sort_unstable_by_key(|&v| key(v));
    let mut bp = Bisection {
        start: &start,
        member: &member,
        d: vec![[0; 2]; utilities.len()],
        side: vec![false; n],
        gain: vec![0.0; n],
        iterations: params.iterations,
        log: log2_table(n),
        by_gain: Vec::new(),
    };
    bp.recurse(&mut nodes, params.max_depth, &key);
    append_unseen(&mut nodes, &seen);
    Ok(nodes)
}

/// The large-graph path ([`crate::large`]): the groups of `large::group_nodes` become single
/// nodes (sizes and counts summed, the earliest startup rank), joined by the kept calls
/// between them; that graph is partitioned, under the gate, and each group laid out in its
/// own order where its node landed.
fn large_layout(
    sizes: &[u64],
    counts: &[u64],
    seen: &[bool],
    kept: &crate::large::Kept,
    startup: &[Option<u32>],
    params: &BpParams,
) -> Result<Vec<u32>, Error> {
    let n = counts.len();
    let (members, group) = crate::large::group_nodes(
        seen,
        &kept.heaviest,
        params.large.path_len,
        LARGE_GRAPH_GROUPS,
    );
    let m = members.len();
    let (mut gsize, mut gcount) = (vec![0u64; m], vec![0u64; m]);
    let mut gstart: Vec<Option<u32>> = vec![None; m];
    for (g, p) in members.iter().enumerate() {
        for &v in p {
            let v = v as usize;
            gsize[g] = gsize[g].saturating_add(sizes[v]);
            gcount[g] = gcount[g].saturating_add(counts[v]);
            gstart[g] = match (gstart[g], startup[v]) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
    let mut gcalls = crate::large::group_calls(&kept.calls, &group);
    gcalls.retain(|e| e.src != e.dst);
    let inner = BpParams {
        large: LargeGraph {
            min_calls: usize::MAX,
            ..params.large.clone()
        },
        ..params.clone()
    };
    let order = bp_layout(&gsize, &gcount, &gcalls, &gstart, &inner)?;
    let mut layout: Vec<u32> = Vec::with_capacity(n);
    for g in order {
        layout.extend_from_slice(&members[g as usize]);
    }
    append_unseen(&mut layout, seen);
    Ok(layout)
}

/// Scratch state of the bisection: per-utility member counts in each half, per-node side.
struct Bisection<'a> {
    start: &'a [usize],
    member: &'a [u32],
    /// Members of each utility in the first and in the second half, side by side: a gain
    /// reads both, and together they are one cache miss, not two.
    d: Vec<[u32; 2]>,
    /// `true`: the node is in the second half.
    side: Vec<bool>,
    gain: Vec<f64>,
    iterations: u32,
    /// `log2` of every count up to the number of nodes ([`log2_table`]).
    log: Vec<f64>,
    /// Scratch for sorting a half by gain: (gain, tie-break, node).
    by_gain: Vec<(f64, u64, u32)>,
}

impl Bisection<'_> {
    fn utilities(&self, v: u32) -> &[u32] {
        &self.member[self.start[v as usize]..self.start[v as usize + 1]]
    }

    /// Splits `nodes` into two halves by swapping, recurses, and leaves `nodes` in layout order.
    fn recurse<K: Ord>(&mut self, nodes: &mut [u32], depth: u32, key: &impl Fn(u32) -> K) {
        if depth == 0 || nodes.len() < 2 {
            return;
        }
        let mid = nodes.len() / 2;
        for (i, &v) in nodes.iter().enumerate() {
            self.side[v as usize] = i >= mid;
        }
        let (n1, n2) = (mid as u32, (nodes.len() - mid) as u32);
        // The member counts are taken once: every swap below keeps them current (`shift`).
        self.count(nodes, true);
        // Gains are computed in node order, whatever order the swaps left `nodes` in: each
        // node's memberships are then read at increasing addresses instead of at random.
        let mut in_order = nodes.to_vec();
        in_order.sort_unstable();
        for _ in 0..self.iterations {
            for &v in &in_order {
                let g = self.move_gain(v, n1, n2);
                self.gain[v as usize] = g;
            }
            let (left, right) = nodes.split_at_mut(mid);
            self.sort_by_gain(left);
            self.sort_by_gain(right);
            // Swap pairs in gain order. Each pair's gain is re-evaluated against the counts the
            // earlier swaps left: `a` from the left is moved, then the first of the next
            // `PAIR_WINDOW` right candidates whose move still lowers the cost joins it; if none
            // does, `a` goes back. (Pairing the i-th of each side blindly, as lld does, can pair
            // two members of one community, whose moves cancel.)
            let mut swapped = 0;
            let mut j = 0;
            for a in left.iter_mut() {
                if j >= right.len() || self.gain[*a as usize] + self.gain[right[j] as usize] <= 0.0
                {
                    break;
                }
                let ga = self.move_gain(*a, n1, n2);
                self.shift(*a);
                let end = (j + PAIR_WINDOW).min(right.len());
                let partner = (j..end).find(|&k| ga + self.move_gain(right[k], n1, n2) > 1e-9);
                match partner {
                    Some(k) => {
                        self.shift(right[k]);
                        right.swap(j, k);
                        std::mem::swap(a, &mut right[j]);
                        j += 1;
                        swapped += 1;
                    }
                    None => self.shift(*a),
                }
            }
            if swapped == 0 {
                break;
            }
        }
        self.count(nodes, false);
        // Members of each half in a canonical order before recursing, so the result does not
        // depend on the swap history.
        let (left, right) = nodes.split_at_mut(mid);
        left.sort_unstable_by_key(|&v| key(v));
        right.sort_unstable_by_key(|&v| key(v));
        self.recurse(left, depth - 1, key);
        self.recurse(right, depth - 1, key);
        // The half holding the earliest (startup rank, then hottest) node goes first.
        let first_left = left.iter().map(|&v| key(v)).min() <= right.iter().map(|&v| key(v)).min();
        if !first_left {
            nodes.rotate_left(mid);
        }
    }

    /// Sorts `half` by gain, descending, ties by [`scramble`] (a bijection, so no two keys are
    /// equal and the order is fully determined). The keys are gathered first so that the sort
    /// compares values in hand, not gains looked up at random.
    fn sort_by_gain(&mut self, half: &mut [u32]) {
        let mut keyed = std::mem::take(&mut self.by_gain);
        keyed.clear();
        keyed.extend(
            half.iter()
                .map(|&v| (self.gain[v as usize], scramble(v), v)),
        );
        keyed.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (slot, &(_, _, v)) in half.iter_mut().zip(&keyed) {
            *slot = v;
        }
        self.by_gain = keyed;
    }

    /// Moves `v` to the other half, updating the member counts of its utilities.
    fn shift(&mut self, v: u32) {
        let to_second = !self.side[v as usize];
        self.side[v as usize] = to_second;
        for i in self.start[v as usize]..self.start[v as usize + 1] {
            let u = self.member[i] as usize;
            if to_second {
                self.d[u][0] -= 1;
                self.d[u][1] += 1;
            } else {
                self.d[u][1] -= 1;
                self.d[u][0] += 1;
            }
        }
    }

    /// Adds (`add`) or clears the per-utility member counts of the halves for `nodes`.
    fn count(&mut self, nodes: &[u32], add: bool) {
        for &v in nodes {
            for i in self.start[v as usize]..self.start[v as usize + 1] {
                let u = self.member[i] as usize;
                if !add {
                    self.d[u] = [0; 2];
                } else if self.side[v as usize] {
                    self.d[u][1] += 1;
                } else {
                    self.d[u][0] += 1;
                }
            }
        }
    }

    /// Drop of the log-gap cost if `v` alone moved to the other half.
    fn move_gain(&self, v: u32, n1: u32, n2: u32) -> f64 {
        let in_second = self.side[v as usize];
        self.utilities(v)
            .iter()
            .map(|&u| {
                let [d1, d2] = self.d[u as usize];
                let (from, to, nf, nt) = if in_second {
                    (d2, d1, n2, n1)
                } else {
                    (d1, d2, n1, n2)
                };
                let log = &self.log;
                (cost(log, from, nf) + cost(log, to, nt))
                    - (cost(log, from - 1, nf) + cost(log, to + 1, nt))
            })
            .sum()
    }
}

/// Distinct `PAGE_SIZE` pages touched by the first `prefix` functions of the startup order
/// (`startup[v]`: node `v`'s rank) when `layout` places nodes back to back. Lower is better.
pub fn startup_pages(
    sizes: &[u64],
    layout: &[u32],
    startup: &[Option<u32>],
    prefix: usize,
) -> Result<u64, Error> {
    crate::check_permutation(layout, sizes.len())?;
    if startup.len() != sizes.len() {
        return Err(Error::LengthMismatch {
            sizes: sizes.len(),
            counts: startup.len(),
        });
    }
    let mut ranked: Vec<(u32, u32)> = startup
        .iter()
        .enumerate()
        .filter_map(|(v, r)| r.map(|r| (r, v as u32)))
        .collect();
    ranked.sort_unstable();
    let mut addr = vec![0u64; sizes.len()];
    let mut at = 0u64;
    for &v in layout {
        addr[v as usize] = at;
        at = at.saturating_add(sizes[v as usize]);
    }
    let mut pages: Vec<u64> = Vec::new();
    for &(_, v) in ranked.iter().take(prefix) {
        let (s, len) = (addr[v as usize], sizes[v as usize].max(1));
        let last = s.saturating_add(len - 1) / PAGE_SIZE;
        pages.extend(s / PAGE_SIZE..=last);
    }
    pages.sort_unstable();
    pages.dedup();
    Ok(pages.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use proptest::prelude::*;

    fn layout(counts: &[u64], edges: &[EdgeCount], startup: &[Option<u32>]) -> Vec<u32> {
        let sizes = vec![1024u64; counts.len()];
        bp_layout(&sizes, counts, edges, startup, &BpParams::default()).unwrap()
    }

    // Two call cliques {0, 2, 4, 6} and {1, 3, 5, 7} interleaved in the input: bisection
    // separates them, and the half with the hottest function (1, count 9) goes first.
    #[test]
    fn separates_call_communities() {
        let counts = [1, 9, 1, 1, 1, 1, 1, 1];
        let mut edges = Vec::new();
        for c in [[0, 2, 4, 6], [1, 3, 5, 7]] {
            for &a in &c {
                for &b in &c {
                    if a < b {
                        edges.push(e(a, b, 10));
                    }
                }
            }
        }
        let l = layout(&counts, &edges, &[None; 8]);
        assert_eq!(l, vec![1, 3, 5, 7, 0, 2, 4, 6]);
    }

    // Startup order 7, 6, ..., 0 (each 1 KiB, 4 to a page): the first 8 functions to run share
    // 2 pages, against 4 in an order that interleaves them with 8 functions that never ran at
    // startup.
    #[test]
    fn startup_prefix_first() {
        let n = 16;
        let counts = vec![1u64; n];
        let startup: Vec<Option<u32>> = (0..n as u32).map(|v| (v < 8).then(|| 7 - v)).collect();
        let l = layout(&counts, &[], &startup);
        assert_eq!(&l[..8], &[7, 6, 5, 4, 3, 2, 1, 0]);
        let sizes = vec![1024u64; n];
        assert_eq!(startup_pages(&sizes, &l, &startup, 8).unwrap(), 2);
        let interleaved: Vec<u32> = (0..8).flat_map(|i| [i, i + 8]).collect();
        assert_eq!(startup_pages(&sizes, &interleaved, &startup, 8).unwrap(), 4);
    }

    // Bad input is an error, not a panic.
    #[test]
    fn rejects_bad_input() {
        let p = BpParams::default();
        assert!(bp_layout(&[1], &[1], &[], &[None, None], &p).is_err());
        assert!(startup_pages(&[1, 1], &[0], &[None, None], 1).is_err());
    }

    proptest! {
        // A permutation, the same twice, unseen nodes last in input order.
        #[test]
        fn properties((sizes, counts, edges) in graph(), ranks in proptest::collection::vec(proptest::option::of(0u32..50), 40)) {
            let startup = &ranks[..sizes.len()];
            let p = BpParams::default();
            let l = bp_layout(&sizes, &counts, &edges, startup, &p).unwrap();
            prop_assert!(is_permutation(&l, sizes.len()));
            prop_assert_eq!(&l, &bp_layout(&sizes, &counts, &edges, startup, &p).unwrap());
            let un: Vec<u32> = unseen(&counts, &edges).into_iter()
                .filter(|&v| startup[v as usize].is_none()).collect();
            prop_assert_eq!(&l[l.len() - un.len()..], &un[..]);
            let pages = startup_pages(&sizes, &l, startup, 8).unwrap();
            prop_assert!(pages <= sizes.iter().map(|s| s / PAGE_SIZE + 2).sum::<u64>());
        }
    }
}

#[cfg(test)]
mod large_tests {
    use super::*;
    use crate::large::tests::forced;
    use crate::testutil::e;

    fn gated(keep: usize, path_len: usize) -> BpParams {
        BpParams {
            large: forced(keep, path_len),
            ..Default::default()
        }
    }

    // Forced gate: the call path 4 -> 1 -> 6 is partitioned as one node and laid out in call
    // order, wherever it lands; so is 0 -> 5.
    #[test]
    fn gated_keeps_call_paths_whole() {
        let counts = [1, 1, 1, 1, 1, 1, 1, 9];
        let edges = [
            e(4, 1, 50),
            e(1, 6, 40),
            e(0, 5, 30),
            e(2, 3, 1),
            e(7, 2, 1),
        ];
        let sizes = vec![1024; 8];
        let l = bp_layout(&sizes, &counts, &edges, &[None; 8], &gated(1, 64)).unwrap();
        let at = |v: u32| l.iter().position(|&w| w == v).unwrap();
        assert_eq!((at(1), at(6)), (at(4) + 1, at(4) + 2));
        assert_eq!(at(5), at(0) + 1);
    }
}
