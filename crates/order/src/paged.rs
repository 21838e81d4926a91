//! Page-packed C3 (`paged`): Sediment's own ordering. C3 clusters no larger than a page, packed
//! into 4 KiB pages so that a cluster does not straddle a page boundary when a colder one can
//! fill the gap instead.
//!
//! Why: the iTLB caches pages, not functions. C3 ([`crate::c3`]) keeps a callee next to its
//! caller, but concatenating its clusters back to back lets roughly every other cluster cross
//! a page boundary, so a call path that fits in one page is spread over two, and a function
//! bigger than a page starts wherever the previous cluster ended and spans one page more than
//! it must. Both cost iTLB entries on every execution of the path. Packing clusters into pages
//! is the bin-packing step that hfsort's authors (Ottoni & Maher, CGO 2017) describe as the
//! point of clustering for the iTLB, done here explicitly.
//!
//! Algorithm:
//! 1. Run C3 with the lld/BOLT parameters, except that a cluster may not exceed
//!    [`PagedParams::page_size`] (one page), so that a cluster is a unit a page can hold.
//! 2. Take the clusters in C3's order (density, descending) and lay them out one after another,
//!    each function's start rounded up to [`PagedParams::align`] bytes. Before placing the next
//!    cluster `B`, if `B` would cross a page boundary it need not cross (it fits in a page, or
//!    it is bigger than a page and does not start at one), look at the next
//!    [`PagedParams::lookahead`] unplaced clusters in order and place the first one that fits
//!    in the rest of the current page instead; repeat. When none fits, `B` is placed where it is.
//! 3. Never-seen nodes last, in input order.
//!
//! The lookahead bounds how far from its density rank a cluster can move, so the hot region
//! stays about as dense as C3's. Its score is the ExtTSP and page-locality scores of
//! [`crate::score`] for the calls, and [`crate::score::weight_footprint`] for the pages, as for
//! every layout here; [`crossing_weight`] is the weight of the clusters it exists to keep inside a page.
//!
//! The model assumes the ordered code starts on a page boundary. lld puts the ordered sections
//! first in `.text`, which starts a few bytes into a page (16 for SQLite's speedtest1 linked
//! by LLD 14); GNU ld starts it after `.init` and the PLT. A base offset shifts every boundary
//! by the same amount, which the measurement in `docs/algorithms.md` includes.
//!
//! Ties: as in C3 (clusters of equal density by their first node), and the gap is filled by
//! the *first* fitting cluster in C3's order, never the best-fitting one, so that the result
//! only depends on that order.
//!
//! Turned down: best-fit filling (takes colder clusters into hot pages more often, measured
//! no better), and moving big clusters to page starts by leaving gaps (padding cannot be
//! expressed in an order file).

use crate::{append_unseen, c3_clusters, check_graph, seen_nodes, C3Params, EdgeCount, Error};

/// Parameters of [`paged_layout`].
#[derive(Debug, Clone, PartialEq)]
pub struct PagedParams {
    /// C3's parameters: lld's and BOLT's, except `max_cluster_size`, one page (4096).
    pub c3: C3Params,
    /// Page size in bytes (4096: the x86-64 and AArch64 base page).
    pub page_size: u64,
    /// Alignment of each function's start in bytes (16: GCC's and Clang's default function
    /// alignment on x86-64 at -O2).
    pub align: u64,
    /// How many unplaced clusters, in C3's order, may be looked at to fill the rest of a page.
    pub lookahead: usize,
    /// When no cluster fits in the rest of the page, let the lightest cluster of the lookahead
    /// cross the boundary instead of the next one.
    pub cross_with_filler: bool,
}

impl Default for PagedParams {
    fn default() -> Self {
        PagedParams {
            c3: C3Params {
                max_cluster_size: 4096,
                ..C3Params::default()
            },
            page_size: 4096,
            align: 16,
            lookahead: 64,
            cross_with_filler: true,
        }
    }
}

impl PagedParams {
    /// The parameters as `key=value` pairs separated by commas, for the order file's metadata.
    pub fn describe(&self) -> String {
        format!(
            "{},page-size={},align={},lookahead={}",
            self.c3.describe(),
            self.page_size,
            self.align,
            self.lookahead
        )
    }
}

/// Rounds `x` up to a multiple of `a` (`a` of 0 or 1: unchanged), saturating.
fn round_up(x: u64, a: u64) -> u64 {
    if a <= 1 {
        x
    } else {
        x.div_ceil(a).saturating_mul(a)
    }
}

/// End offset of `nodes` laid out from `pos`, each start aligned.
fn end_of(nodes: &[u32], sizes: &[u64], pos: u64, align: u64) -> u64 {
    nodes.iter().fold(pos, |p, &v| {
        round_up(p, align).saturating_add(sizes[v as usize])
    })
}

/// Whether `nodes` placed at `pos` would cross a page boundary it need not cross: it fits in
/// one page but not in the rest of this one, or it is bigger than a page and does not start
/// on a page boundary.
fn needless_crossing(nodes: &[u32], sizes: &[u64], pos: u64, p: &PagedParams) -> bool {
    let page = p.page_size.max(1);
    let start = round_up(pos, p.align);
    let into = start % page;
    let len = end_of(nodes, sizes, start, p.align) - start;
    if len > page {
        into != 0
    } else {
        into + len > page
    }
}

/// Packs clusters (already in priority order) into pages as the module docs say; returns the
/// concatenated nodes.
pub fn pack_clusters(
    clusters: &[Vec<u32>],
    sizes: &[u64],
    counts: &[u64],
    p: &PagedParams,
) -> Vec<u32> {
    let weight_of = |c: usize| {
        clusters[c]
            .iter()
            .fold(0u64, |a, &v| a.saturating_add(counts[v as usize]))
    };
    let page = p.page_size.max(1);
    let mut placed = vec![false; clusters.len()];
    let mut layout = Vec::with_capacity(clusters.iter().map(Vec::len).sum());
    let mut pos = 0u64;
    let mut first = 0usize;
    loop {
        while first < clusters.len() && placed[first] {
            first += 1;
        }
        if first == clusters.len() {
            break;
        }
        let mut pick = first;
        if needless_crossing(&clusters[first], sizes, pos, p) {
            let start = round_up(pos, p.align);
            let room = page - start % page;
            let window: Vec<usize> = (first + 1..clusters.len())
                .filter(|&c| !placed[c])
                .take(p.lookahead)
                .collect();
            let len = |c: usize| end_of(&clusters[c], sizes, start, p.align) - start;
            // The hottest cluster that fits fills the gap; when none fits, the lightest one
            // crosses the boundary in place of `first` (ties: the earlier in C3's order).
            if let Some(&c) = window.iter().find(|&&c| len(c) <= room) {
                pick = c;
            } else if p.cross_with_filler {
                if let Some(&c) = window.iter().min_by_key(|&&c| (weight_of(c), c)) {
                    if weight_of(c) < weight_of(first) {
                        pick = c;
                    }
                }
            }
        }
        placed[pick] = true;
        pos = end_of(&clusters[pick], sizes, pos, p.align);
        layout.extend_from_slice(&clusters[pick]);
    }
    layout
}

/// Orders nodes by page-packed C3 (see the module docs); returns a permutation of `0..n`,
/// never-seen nodes last in input order.
pub fn paged_layout(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
    params: &PagedParams,
) -> Result<Vec<u32>, Error> {
    check_graph(sizes, counts, edges)?;
    let clusters = c3_clusters(sizes, counts, edges, &params.c3)?;
    let mut layout = pack_clusters(&clusters, sizes, counts, params);
    append_unseen(&mut layout, &seen_nodes(counts, edges));
    Ok(layout)
}

/// The score of this module: the summed self weight of the clusters that, laid out as `layout`
/// says (each function's start aligned, from offset 0), cross a page boundary they need not
/// cross (see [`pack_clusters`]). Lower is better. Every cluster must be contiguous in `layout`.
pub fn crossing_weight(
    sizes: &[u64],
    counts: &[u64],
    clusters: &[Vec<u32>],
    layout: &[u32],
    p: &PagedParams,
) -> Result<u64, Error> {
    check_graph(sizes, counts, &[])?;
    crate::check_permutation(layout, sizes.len())?;
    let mut start = vec![0u64; sizes.len()];
    let mut pos = 0u64;
    for &v in layout {
        pos = round_up(pos, p.align);
        start[v as usize] = pos;
        pos = pos.saturating_add(sizes[v as usize]);
    }
    Ok(clusters
        .iter()
        .filter(|c| !c.is_empty() && needless_crossing(c, sizes, start[c[0] as usize], p))
        .map(|c| {
            c.iter()
                .fold(0u64, |a, &v| a.saturating_add(counts[v as usize]))
        })
        .fold(0u64, u64::saturating_add))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use crate::{c3_layout, ext_tsp_score, ExtTspParams};
    use proptest::prelude::*;

    fn layout(sizes: &[u64], counts: &[u64], edges: &[EdgeCount]) -> Vec<u32> {
        paged_layout(sizes, counts, edges, &PagedParams::default()).unwrap()
    }

    // C3 puts 1 (2000 bytes, weight 1000) right after 0, across the first page boundary; here
    // the light 2 crosses it instead, and 1 sits whole in the second page.
    #[test]
    fn light_cluster_crosses_the_boundary() {
        let sizes = [3000, 2000, 1500];
        let counts = [3000, 1000, 10];
        let l = layout(&sizes, &counts, &[]);
        assert_eq!(l, vec![0, 2, 1]);
        let c3 = c3_layout(&sizes, &counts, &[], &C3Params::default()).unwrap();
        assert_eq!(c3, vec![0, 1, 2]);
        let clusters = [vec![0], vec![1], vec![2]];
        let p = PagedParams::default();
        let w = |l: &[u32]| crossing_weight(&sizes, &counts, &clusters, l, &p).unwrap();
        assert_eq!((w(&c3), w(&l)), (1000, 10));
    }

    // A cluster that fits in the rest of the page fills it: 2 (1000 bytes) after 0 leaves 1 to
    // start the second page; callee 3 stays right after its caller 0 (C3's cluster [0, 3]).
    #[test]
    fn gap_is_filled_by_a_fitting_cluster() {
        let sizes = [2000, 3000, 1000, 500];
        let counts = [2000, 1500, 100, 200];
        let edges = [e(0, 3, 1000)];
        let l = layout(&sizes, &counts, &edges);
        assert_eq!(l, vec![0, 3, 2, 1]);
    }

    // A function bigger than a page, started mid-page, spans one page more than it must: the
    // colder 2 fills the rest of the first page exactly, so 1 starts the second page.
    #[test]
    fn big_function_starts_a_page() {
        let sizes = [1000, 9000, 3088];
        let counts = [1000, 8000, 100];
        let l = layout(&sizes, &counts, &[]);
        assert_eq!(l, vec![0, 2, 1]);
        let clusters = [vec![0], vec![1], vec![2]];
        let p = PagedParams::default();
        assert_eq!(crossing_weight(&sizes, &counts, &clusters, &l, &p).unwrap(), 0);
        let c3 = [0, 1, 2];
        assert_eq!(crossing_weight(&sizes, &counts, &clusters, &c3, &p).unwrap(), 8100);
    }

    proptest! {
        // A permutation, the same twice, unseen nodes last in input order, finite score.
        #[test]
        fn properties((sizes, counts, edges) in graph()) {
            let l = layout(&sizes, &counts, &edges);
            prop_assert!(is_permutation(&l, sizes.len()));
            prop_assert_eq!(&l, &layout(&sizes, &counts, &edges));
            let un = unseen(&counts, &edges);
            prop_assert_eq!(&l[l.len() - un.len()..], &un[..]);
            let s = ext_tsp_score(&sizes, &edges, &l, &ExtTspParams::default()).unwrap();
            prop_assert!(s.is_finite());
        }

        // Packing only moves whole clusters: every C3 cluster is contiguous in the layout.
        #[test]
        fn clusters_stay_whole((sizes, counts, edges) in graph()) {
            let p = PagedParams::default();
            let l = layout(&sizes, &counts, &edges);
            let mut at = vec![0usize; sizes.len()];
            for (i, &v) in l.iter().enumerate() {
                at[v as usize] = i;
            }
            for c in c3_clusters(&sizes, &counts, &edges, &p.c3).unwrap() {
                let first = at[c[0] as usize];
                for (k, &v) in c.iter().enumerate() {
                    prop_assert_eq!(at[v as usize], first + k);
                }
            }
        }
    }
}
