//! Function-ordering algorithms: given how hot each function is, how big it is and how often it
//! calls each other function, choose the order in which the linker should place them.
//!
//! The goal is locality. A program spends most of its time in a small part of its code; when
//! that part is packed into few pages and cache lines, and callers sit next to their callees,
//! the instruction TLB and the instruction cache miss less (Pettis & Hansen, "Profile Guided
//! Code Positioning", PLDI 1990; Ottoni & Maher, "Optimizing Function Placement for Large-Scale
//! Data-Center Applications", CGO 2017).
//!
//! Design constraints:
//! - **Pure algorithms over indexed arrays.** Every layout function takes node sizes (bytes),
//!   node counts (self weight) and [`EdgeCount`]s `src -> dst`, and returns a permutation of
//!   `0..n`, first placed first, in the manner of LLVM's `CodeLayout.h`
//!   (`computeExtTspLayout(NodeSizes, NodeCounts, EdgeCounts)`). Nothing here reads a file or
//!   knows about symbols; [`adapter`] alone converts a [`sediment_profile::Profile`] into arrays
//!   and a permutation back into a [`sediment_profile::FunctionOrder`] (as BOLT's
//!   `ReorderFunctions.cpp` does around its `HFSort.cpp`).
//! - **A score beside every layout** ([`score`]): the page-locality and ExtTSP scores let a test
//!   or a user compare layouts without running the program.
//! - **Never-seen nodes last, in input order.** A node with zero count and no edge carries no
//!   information; every algorithm places all such nodes after the others, keeping their input
//!   order, so the linker's default placement is what decides where cold code goes.
//! - **Deterministic.** Same arrays in, same permutation out. Every sort has a total order, and
//!   each module says how ties are broken. No hash maps are iterated.
//! - **Hostile input.** Arrays of different lengths or edges naming nodes out of range are an
//!   [`Error`], never a panic; weights are summed saturating.
//!
//! Non-goals: basic-block layout inside functions (that needs a CFG, not a call graph), and
//! function splitting (hot/cold parts are whatever the compiler emitted as separate symbols).
//!
//! The algorithms, in the order they were written:
//! - [`hot`]: plain hotness order, the baseline every other algorithm must beat.
//! - [`c3`]: Call-Chain Clustering (hfsort), as used by HHVM, BOLT and lld.
//! - [`pettis_hansen`]: Pettis & Hansen's greedy heaviest-edge chaining (PLDI 1990).
//! - [`ext_tsp`]: greedy chain merging maximising the ExtTSP score (Newell & Pupyrev, as LLVM).
//! - [`cdsort`]: Cache-Directed Sort, the same merging under a cache model (as LLVM and BOLT).
//! - [`fill`]: not a layout of its own: extends a sampled order with the functions a static
//!   call graph reaches from it, after the hot ones.
//! - [`bp`]: balanced partitioning for startup page faults (Hoag et al., as lld).
//! - [`tiered`]: Sediment's own: CDSort inside heat tiers cut by density, so that lukewarm
//!   callees never enter the hot region.
//! - [`paged`]: Sediment's own: C3's call chains with their cold members moved out of the hot
//!   region and hot functions moved off needless page crossings.
//! - [`large`]: not a layout of its own: the size gate above which ExtTSP, CDSort, tiered,
//!   Pettis-Hansen and bp run on each function's heaviest calls and the paths they form.
//!
//! `docs/design/algorithms.md` compares them and records the scale benchmark.

pub mod adapter;
pub mod bp;
pub mod c3;
pub mod cdsort;
pub mod ext_tsp;
pub mod fill;
pub mod hot;
pub mod large;
pub(crate) mod merge;
pub mod paged;
pub mod pettis_hansen;
pub mod score;
pub mod tiered;

pub use adapter::{
    as_placed, fill_order, order_graph, order_profile, Algorithm, CallGraph, DEFAULT_FUNCTION_SIZE,
};
pub use bp::{bp_layout, bp_utilities, startup_pages, BpParams};
pub use c3::{c3_clusters, c3_layout, C3Params};
pub use cdsort::{cdsort_layout, CdSortParams};
pub use ext_tsp::{ext_tsp_layout, ExtTspLayoutParams};
pub use fill::{fill_layout, FillParams};
pub use hot::hot_layout;
pub use large::{LargeGraph, LARGE_GRAPH_KEEP, LARGE_GRAPH_MIN_CALLS};
pub use paged::{paged_layout, straddle_weight, PagedParams};
pub use pettis_hansen::{pettis_hansen_layout, pettis_hansen_layout_gated};
pub use score::{ext_tsp_score, page_locality_score, weight_footprint, ExtTspParams, PAGE_SIZE};
pub use tiered::{tiered_layout, tiers, TieredParams};

/// Errors of this crate: malformed input arrays, or an algorithm name nobody knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `sizes` and `counts` must have one entry per node.
    #[error("node arrays differ in length: {sizes} sizes but {counts} counts")]
    LengthMismatch {
        /// Length of the sizes array.
        sizes: usize,
        /// Length of the counts array.
        counts: usize,
    },
    /// Node ids are `u32`; a graph cannot have more nodes than that indexes.
    #[error("{0} nodes is more than a u32 node id can index")]
    TooManyNodes(usize),
    /// An edge names a node that does not exist.
    #[error("edge {index} ({src} -> {dst}) refers to a node outside 0..{nodes}")]
    EdgeOutOfRange {
        /// Position of the edge in the edge array.
        index: usize,
        /// Its source node.
        src: u32,
        /// Its destination node.
        dst: u32,
        /// Number of nodes.
        nodes: usize,
    },
    /// A layout handed to a score function is not a permutation of `0..nodes`.
    #[error("layout is not a permutation of 0..{nodes}: {problem}")]
    NotAPermutation {
        /// Number of nodes.
        nodes: usize,
        /// What is wrong (a repeated or out-of-range node, or the wrong length).
        problem: String,
    },
    /// `--algorithm` named something this crate does not implement.
    #[error("unknown ordering algorithm `{0}` (known: {known})", known = Algorithm::NAMES.join(", "))]
    UnknownAlgorithm(String),
}

/// A weighted directed edge `src -> dst` (a call from `src` to `dst`, `count` times).
///
/// Edges are expected to be unique per `(src, dst)`, as in a canonical profile; duplicates are
/// accepted and treated as separate arcs (their counts add up in totals, but the "most likely
/// caller" compares them one by one). Edges with a zero count are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EdgeCount {
    /// Calling node.
    pub src: u32,
    /// Called node.
    pub dst: u32,
    /// How often the call happened (or was sampled).
    pub count: u64,
}

/// Marker for "no node" in `u32` node-id arrays.
pub(crate) const NONE: u32 = u32::MAX;

/// Checks that the arrays describe one graph and returns its node count.
pub(crate) fn check_graph(
    sizes: &[u64],
    counts: &[u64],
    edges: &[EdgeCount],
) -> Result<usize, Error> {
    let n = counts.len();
    if sizes.len() != n {
        return Err(Error::LengthMismatch {
            sizes: sizes.len(),
            counts: n,
        });
    }
    // `NONE` (u32::MAX) is reserved as a marker, so the largest id is u32::MAX - 1.
    if n >= NONE as usize {
        return Err(Error::TooManyNodes(n));
    }
    check_edges(n, edges)?;
    Ok(n)
}

/// Checks that every edge joins two of the nodes `0..n`.
pub(crate) fn check_edges(n: usize, edges: &[EdgeCount]) -> Result<(), Error> {
    for (index, e) in edges.iter().enumerate() {
        if e.src as usize >= n || e.dst as usize >= n {
            return Err(Error::EdgeOutOfRange {
                index,
                src: e.src,
                dst: e.dst,
                nodes: n,
            });
        }
    }
    Ok(())
}

/// Which nodes carry information: a positive count, or an edge with a positive count.
pub(crate) fn seen_nodes(counts: &[u64], edges: &[EdgeCount]) -> Vec<bool> {
    let mut seen: Vec<bool> = counts.iter().map(|&c| c > 0).collect();
    for e in edges.iter().filter(|e| e.count > 0) {
        seen[e.src as usize] = true;
        seen[e.dst as usize] = true;
    }
    seen
}

/// The nodes with a positive count, densest first (count / size, compared exactly in `u128`,
/// a zero size counting as one byte); equal densities by index.
pub(crate) fn by_density(sizes: &[u64], counts: &[u64]) -> Vec<u32> {
    let mut nodes: Vec<u32> = (0..counts.len() as u32)
        .filter(|&v| counts[v as usize] > 0)
        .collect();
    let size = |v: u32| u128::from(sizes[v as usize].max(1));
    // The order is total (ties by index), so an unstable sort gives the same order, faster.
    nodes.sort_unstable_by(|&a, &b| {
        let (wa, wb) = (
            u128::from(counts[a as usize]),
            u128::from(counts[b as usize]),
        );
        (wb * size(a)).cmp(&(wa * size(b))).then(a.cmp(&b))
    });
    nodes
}

/// Appends the never-seen nodes, in input order, to a layout of the seen ones.
pub(crate) fn append_unseen(layout: &mut Vec<u32>, seen: &[bool]) {
    layout.extend(
        seen.iter()
            .enumerate()
            .filter(|(_, &s)| !s)
            .map(|(i, _)| i as u32),
    );
}

/// Checks that `order` is a permutation of `0..n`.
pub(crate) fn check_permutation(order: &[u32], n: usize) -> Result<(), Error> {
    let bad = |problem: String| Error::NotAPermutation { nodes: n, problem };
    if order.len() != n {
        return Err(bad(format!("it has {} entries", order.len())));
    }
    let mut placed = vec![false; n];
    for &v in order {
        match placed.get_mut(v as usize) {
            None => return Err(bad(format!("node {v} is out of range"))),
            Some(true) => return Err(bad(format!("node {v} appears twice"))),
            Some(p) => *p = true,
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::EdgeCount;
    use proptest::prelude::*;

    /// Shorthand for an edge in hand-made test graphs.
    pub fn e(src: u32, dst: u32, count: u64) -> EdgeCount {
        EdgeCount { src, dst, count }
    }

    /// A random graph: (sizes, counts, edges). About half the nodes have a zero count, and
    /// sizes include zero and huge values, so that every branch of the algorithms is hit.
    pub fn graph() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, Vec<EdgeCount>)> {
        (1usize..40).prop_flat_map(|n| {
            let sizes =
                proptest::collection::vec(prop_oneof![Just(0u64), 1u64..5000, Just(900_000u64)], n);
            let counts =
                proptest::collection::vec(prop_oneof![Just(0u64), 1u64..1000, Just(u64::MAX)], n);
            let edges = proptest::collection::vec(
                (
                    0..n as u32,
                    0..n as u32,
                    prop_oneof![Just(0u64), 1u64..500, Just(u64::MAX)],
                )
                    .prop_map(|(s, d, c)| e(s, d, c)),
                0..(3 * n),
            );
            (sizes, counts, edges)
        })
    }

    /// True when `order` is a permutation of `0..n`.
    pub fn is_permutation(order: &[u32], n: usize) -> bool {
        super::check_permutation(order, n).is_ok()
    }

    /// The properties every layout has: a permutation, the same on a second run, never-seen
    /// nodes last in input order, a finite ExtTSP score. Returns the layout for more checks.
    pub fn check_layout(
        layout: impl Fn(&[u64], &[u64], &[EdgeCount]) -> Vec<u32>,
        sizes: &[u64],
        counts: &[u64],
        edges: &[EdgeCount],
    ) -> Result<Vec<u32>, TestCaseError> {
        let l = layout(sizes, counts, edges);
        prop_assert!(is_permutation(&l, sizes.len()));
        prop_assert_eq!(&l, &layout(sizes, counts, edges));
        let un = unseen(counts, edges);
        prop_assert_eq!(&l[l.len() - un.len()..], &un[..]);
        let s = crate::ext_tsp_score(sizes, edges, &l, &crate::ExtTspParams::default()).unwrap();
        prop_assert!(s.is_finite());
        Ok(l)
    }

    /// The never-seen nodes (zero count, no positive edge) in input order.
    pub fn unseen(counts: &[u64], edges: &[EdgeCount]) -> Vec<u32> {
        let seen = super::seen_nodes(counts, edges);
        (0..counts.len() as u32)
            .filter(|&i| !seen[i as usize])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::e;
    use super::*;

    // Mismatched arrays and dangling edges are errors, not panics.
    #[test]
    fn rejects_malformed_graphs() {
        assert_eq!(
            check_graph(&[1, 2], &[1], &[]),
            Err(Error::LengthMismatch {
                sizes: 2,
                counts: 1
            })
        );
        assert_eq!(
            check_graph(&[1, 2], &[1, 1], &[e(0, 1, 1), e(1, 2, 1)]),
            Err(Error::EdgeOutOfRange {
                index: 1,
                src: 1,
                dst: 2,
                nodes: 2
            })
        );
        assert_eq!(check_graph(&[], &[], &[]), Ok(0));
    }

    // A repeated node and a short layout are both reported.
    #[test]
    fn permutation_check_names_the_problem() {
        assert_eq!(
            check_permutation(&[0, 0], 2).unwrap_err().to_string(),
            "layout is not a permutation of 0..2: node 0 appears twice"
        );
        assert_eq!(
            check_permutation(&[0], 2).unwrap_err().to_string(),
            "layout is not a permutation of 0..2: it has 1 entries"
        );
        assert!(check_permutation(&[1, 0], 2).is_ok());
    }
}
