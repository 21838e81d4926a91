//! Pettis-Hansen function ordering: greedy merging along the heaviest call edge.
//!
//! Pettis & Hansen, "Profile Guided Code Positioning", PLDI 1990, §4.1 (the procedure-ordering
//! half of the paper), as BOLT's `-reorder-functions=pettis-hansen` implements it. The call
//! graph is made undirected (`a -> b` and `b -> a` weights add up) and recursion is dropped.
//! Every seen node starts as its own chain. Repeatedly:
//! 1. take the heaviest edge between two different chains `A` and `B` (ties: the pair of chain
//!    ids, smallest first, where a chain's id is its smallest node index);
//! 2. join them into one chain in the orientation, among `A+B`, `A+rev(B)`, `rev(A)+B` and
//!    `rev(A)+rev(B)` (preferred in that order on ties), whose two nodes that end up adjacent
//!    have the heaviest direct edge; `A` is the chain with the smaller id;
//! 3. the edges of `A` and `B` to every other chain are summed into the new chain's edges.
//!
//! When no edge is left, chains are sorted by density (self weight / size, descending; ties by
//! chain id) and concatenated; never-seen nodes follow in input order.
//!
//! Unlike C3 there is no size limit and no probability threshold: PH joins everything that is
//! connected, and only the junction orientation looks at individual functions. It is a good
//! layout for small programs and the historical reference point; C3 was designed because PH
//! ignores call direction and lets giant chains form.
//!
//! Implementation: a binary heap of (weight, chain pair) with lazy deletion (an entry is stale
//! when either chain has been merged away or the pair's weight has grown since), per-chain
//! adjacency in `BTreeMap`s, and chains in `VecDeque`s with a "reversed" flag so that a merge
//! copies only the shorter chain. Moving the absorbed chain's edges is not bounded
//! small-into-large (the surviving id must stay the smaller one, for the documented tie rules),
//! so a hub absorbed again and again costs its degree each time: fine for real profiles (tens of
//! thousands of functions), but 91 s of CPU and 1.3 GiB on the 1,000,000-function benchmark.
//!
//! Graphs above the large-graph gate ([`crate::large`], 2,000,000 calls) therefore take a path
//! of their own ([`pettis_hansen_layout_gated`]): each function's 4 heaviest calls, joined
//! heaviest first wherever they meet two chain *ends* (either orientation, undirected as the
//! paper), chains of at most 64 functions, no summing of the calls between chains; then the
//! chains by density as above. It keeps the paper's heaviest-edge-first chaining but not its
//! chain-to-chain edges. Below the gate the layout is unchanged.

use crate::{append_unseen, check_graph, seen_nodes, EdgeCount, Error, LargeGraph};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// A chain of nodes: the logical order is `nodes` front to back, or back to front if `reversed`.
#[derive(Default)]
struct Chain {
    nodes: VecDeque<u32>,
    reversed: bool,
    weight: u64,
    size: u64,
}

impl Chain {
    fn first(&self) -> u32 {
        let n = if self.reversed {
            self.nodes.back()
        } else {
            self.nodes.front()
        };
        *n.expect("chains are never empty")
    }

    fn last(&self) -> u32 {
        let n = if self.reversed {
            self.nodes.front()
        } else {
            self.nodes.back()
        };
        *n.expect("chains are never empty")
    }

    fn in_order(&self) -> Vec<u32> {
        if self.reversed {
            self.nodes.iter().rev().copied().collect()
        } else {
            self.nodes.iter().copied().collect()
        }
    }

    /// Appends `items` (in logical order) after the logical end.
    fn push_back_all(&mut self, items: &[u32]) {
        for &v in items {
            if self.reversed {
                self.nodes.push_front(v);
            } else {
                self.nodes.push_back(v);
            }
        }
    }

    /// Puts `items` (in logical order) before the logical start.
    fn push_front_all(&mut self, items: &[u32]) {
        for &v in items.iter().rev() {
            if self.reversed {
                self.nodes.push_back(v);
            } else {
                self.nodes.push_front(v);
            }
        }
    }
}

/// Undirected weight between two nodes, from the deduplicated `(min, max, weight)` list.
fn pair_weight(pairs: &[(u32, u32, u64)], a: u32, b: u32) -> u64 {
    let key = (a.min(b), a.max(b));
    pairs
        .binary_search_by(|p| (p.0, p.1).cmp(&key))
        .map_or(0, |i| pairs[i].2)
}

/// Runs Pettis-Hansen and returns the full layout (see the module docs); graphs above
/// [`LargeGraph::default`]'s gate are sparsified first.
pub fn pettis_hansen_layout(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
) -> Result<Vec<u32>, Error> {
    pettis_hansen_layout_gated(sizes, counts, edges, &LargeGraph::default())
}

/// [`pettis_hansen_layout`] with an explicit size gate.
pub fn pettis_hansen_layout_gated(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    large: &LargeGraph,
) -> Result<Vec<u32>, Error> {
    let n = check_graph(sizes, counts, edges)?;
    let seen = seen_nodes(counts, edges);
    if let Some(kept) = large.sparsify(n, edges) {
        return Ok(large_layout(sizes, counts, &seen, &kept.heaviest, large));
    }

    // Undirected node-pair weights, summed over both directions and duplicates.
    let mut pairs: Vec<(u32, u32, u64)> = edges
        .iter()
        .filter(|e| e.count > 0 && e.src != e.dst)
        .map(|e| (e.src.min(e.dst), e.src.max(e.dst), e.count))
        .collect();
    pairs.sort_unstable();
    pairs.dedup_by(|later, kept| {
        let same = (later.0, later.1) == (kept.0, kept.1);
        if same {
            kept.2 = kept.2.saturating_add(later.2);
        }
        same
    });

    // Chain `i` starts as node `i`; `owner[v]` is the id of the chain holding node v.
    let mut chains: Vec<Chain> = (0..n)
        .map(|i| Chain {
            nodes: VecDeque::from([i as u32]),
            reversed: false,
            weight: counts[i],
            size: sizes[i].max(1),
        })
        .collect();
    let mut owner: Vec<u32> = (0..n as u32).collect();
    let mut adj: Vec<BTreeMap<u32, u64>> = vec![BTreeMap::new(); n];
    let mut heap = BinaryHeap::new();
    for &(a, b, w) in &pairs {
        adj[a as usize].insert(b, w);
        adj[b as usize].insert(a, w);
        // Max-heap on weight; among equal weights the smallest (a, b) pops first.
        heap.push((w, Reverse((a, b))));
    }

    while let Some((w, Reverse((a, b)))) = heap.pop() {
        // Stale entries: a chain was merged away (its adjacency emptied) or the weight changed.
        if adj[a as usize].get(&b) != Some(&w) {
            continue;
        }
        // a < b always: the merged chain keeps the smaller id `a`.
        let (ca, cb) = (&chains[a as usize], &chains[b as usize]);
        let (h1, t1, h2, t2) = (ca.first(), ca.last(), cb.first(), cb.last());
        let options = [
            (pair_weight(&pairs, t1, h2), false, false),
            (pair_weight(&pairs, t1, t2), false, true),
            (pair_weight(&pairs, h1, h2), true, false),
            (pair_weight(&pairs, h1, t2), true, true),
        ];
        // First strictly heaviest option wins, so ties prefer the earlier orientation.
        let (_, rev_a, rev_b) = options
            .iter()
            .copied()
            .reduce(|best, o| if o.0 > best.0 { o } else { best })
            .expect("four options");

        let mut chain_a = std::mem::take(&mut chains[a as usize]);
        let mut chain_b = std::mem::take(&mut chains[b as usize]);
        chain_a.reversed ^= rev_a;
        chain_b.reversed ^= rev_b;
        for &v in &chain_b.nodes {
            owner[v as usize] = a;
        }
        let weight = chain_a.weight.saturating_add(chain_b.weight);
        let size = chain_a.size.saturating_add(chain_b.size);
        // The result is A + B; copy the shorter chain into the longer one.
        let mut merged = if chain_a.nodes.len() >= chain_b.nodes.len() {
            chain_a.push_back_all(&chain_b.in_order());
            chain_a
        } else {
            chain_b.push_front_all(&chain_a.in_order());
            chain_b
        };
        merged.weight = weight;
        merged.size = size;
        chains[a as usize] = merged;

        // Move B's edges to A: every neighbour of B now neighbours A, with summed weights.
        let adj_b = std::mem::take(&mut adj[b as usize]);
        adj[a as usize].remove(&b);
        for (c, wc) in adj_b {
            if c == a {
                continue;
            }
            adj[c as usize].remove(&b);
            let slot = adj[a as usize].entry(c).or_insert(0);
            *slot = slot.saturating_add(wc);
            let total = *slot;
            adj[c as usize].insert(a, total);
            heap.push((total, Reverse((a.min(c), a.max(c)))));
        }
    }

    // Live chains of seen nodes, by density descending, ties by id.
    let mut ids: Vec<u32> = (0..n as u32)
        .filter(|&i| seen[i as usize] && owner[i as usize] == i)
        .collect();
    ids.sort_by(|&x, &y| {
        let (cx, cy) = (&chains[x as usize], &chains[y as usize]);
        let lhs = u128::from(cy.weight) * u128::from(cx.size);
        let rhs = u128::from(cx.weight) * u128::from(cy.size);
        lhs.cmp(&rhs).then(x.cmp(&y))
    });
    let mut layout: Vec<u32> = Vec::with_capacity(n);
    for id in ids {
        layout.extend(chains[id as usize].in_order());
    }
    append_unseen(&mut layout, &seen);
    Ok(layout)
}

/// The large-graph path ([`crate::large`]): Pettis & Hansen's chaining restricted to calls
/// that join two chain ends (undirected, heaviest first, as [`crate::large::call_paths`]), with
/// no summing of the calls between chains and no size limit but [`LargeGraph::path_len`]; the
/// chains are then sorted by density as in the full algorithm.
fn large_layout(
    sizes: &[u64],
    counts: &[u64],
    seen: &[bool],
    heaviest: &[(u32, u32)],
    large: &LargeGraph,
) -> Vec<u32> {
    let n = counts.len();
    let paths = crate::large::call_paths(n, heaviest, large.path_len, false);
    let mut in_path = vec![false; n];
    // (weight, size, id, path index or NONE for a single node); id = smallest node.
    let mut chains: Vec<(u64, u64, u32, u32)> = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let (mut w, mut s) = (0u64, 0u64);
        for &v in p {
            in_path[v as usize] = true;
            w = w.saturating_add(counts[v as usize]);
            s = s.saturating_add(sizes[v as usize].max(1));
        }
        chains.push((w, s, p.iter().copied().min().unwrap_or(0), i as u32));
    }
    for v in 0..n {
        if seen[v] && !in_path[v] {
            chains.push((counts[v], sizes[v].max(1), v as u32, crate::NONE));
        }
    }
    chains.sort_unstable_by(|x, y| {
        let lhs = u128::from(y.0) * u128::from(x.1);
        let rhs = u128::from(x.0) * u128::from(y.1);
        lhs.cmp(&rhs).then(x.2.cmp(&y.2))
    });
    let mut layout: Vec<u32> = Vec::with_capacity(n);
    for &(_, _, id, path) in &chains {
        match path {
            crate::NONE => layout.push(id),
            p => layout.extend_from_slice(&paths[p as usize]),
        }
    }
    append_unseen(&mut layout, seen);
    layout
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use proptest::prelude::*;

    // Heaviest edge first: (1,2) joins, then 3 attaches next to 2, then 0 next to 1.
    #[test]
    fn merges_heaviest_first_and_orients_junction() {
        let sizes = [64; 5];
        let counts = [1, 1, 1, 1, 0];
        let edges = [e(1, 2, 100), e(3, 2, 50), e(0, 1, 10)];
        assert_eq!(
            pettis_hansen_layout(&sizes, &counts, &edges).unwrap(),
            vec![0, 1, 2, 3, 4]
        );
    }

    // Chains [0,1] and [2,3] join reversed, rev(A)+rev(B), so the heavy pair 0-3 is adjacent.
    #[test]
    fn reverses_chains_to_make_heavy_pairs_adjacent() {
        let sizes = [64; 4];
        let counts = [1; 4];
        let edges = [e(0, 1, 100), e(2, 3, 90), e(0, 3, 50), e(1, 2, 1)];
        // Undirected: 0-1 100, 2-3 90, 0-3 50, 1-2 1. After the first two merges the 0-3 and
        // 1-2 edges sum to 51 between chains [0,1] and [2,3]; the junction options are
        // 1-2 (1), 1-3 (0), 0-2 (0), 0-3 (50): rev(A)+rev(B) = [1,0,3,2].
        assert_eq!(
            pettis_hansen_layout(&sizes, &counts, &edges).unwrap(),
            vec![1, 0, 3, 2]
        );
    }

    // Disconnected chains are ordered by density; unseen nodes go last.
    #[test]
    fn chains_by_density() {
        let sizes = [64, 64, 64, 64, 64];
        let counts = [1, 1, 0, 50, 50];
        let edges = [e(0, 1, 5), e(3, 4, 5)];
        assert_eq!(
            pettis_hansen_layout(&sizes, &counts, &edges).unwrap(),
            vec![3, 4, 0, 1, 2]
        );
    }

    proptest! {
        // Permutation, deterministic, never-seen nodes last in input order.
        #[test]
        fn pettis_hansen_properties((sizes, counts, edges) in graph()) {
            let a = pettis_hansen_layout(&sizes, &counts, &edges).unwrap();
            prop_assert!(is_permutation(&a, counts.len()));
            prop_assert_eq!(&a, &pettis_hansen_layout(&sizes, &counts, &edges).unwrap());
            let tail = unseen(&counts, &edges);
            prop_assert_eq!(&a[counts.len() - tail.len()..], &tail[..]);
        }
    }
}

#[cfg(test)]
mod large_tests {
    use super::*;
    use crate::large::tests::forced;
    use crate::testutil::e;

    // Forced gate: 1-2 (100), then 3 joins the end 2 (50), then 0 the end 1: one chain from
    // its smaller end. With paths of two nodes only [1, 2] forms; the dense 3 goes first,
    // then 0 and [1, 2] (equal densities, by id), and the unseen 4 last.
    #[test]
    fn gated_chains_along_heaviest_calls() {
        let sizes = [64; 5];
        let edges = [e(1, 2, 100), e(3, 2, 50), e(0, 1, 10)];
        let l = pettis_hansen_layout_gated(&sizes, &[1, 1, 1, 1, 0], &edges, &forced(4, 64));
        assert_eq!(l.unwrap(), vec![0, 1, 2, 3, 4]);
        let l = pettis_hansen_layout_gated(&sizes, &[1, 1, 1, 5, 0], &edges, &forced(4, 2));
        assert_eq!(l.unwrap(), vec![3, 0, 1, 2, 4]);
    }
}
