//! Scores of a layout: numbers that say, without running the program, how well a permutation
//! keeps callers near their callees. Higher is better for both.
//!
//! Nodes are placed back to back from address 0 in layout order, each taking its size in bytes
//! (no alignment padding: the linker's padding is small next to a page and the same for every
//! layout). Recursive self-edges are left out of both scores, since every layout treats them
//! alike.
//!
//! - [`page_locality_score`]: the sum of the counts of edges whose caller and callee start in
//!   the same page. It is the quantity C3 is built to raise (Ottoni & Maher, CGO 2017, §3: a
//!   call that stays in its page cannot miss the iTLB). With 4 KiB pages it also tracks how many
//!   distinct pages the hot calls touch.
//! - [`ext_tsp_score`]: the Extended TSP objective of Newell & Pupyrev ("Improved Basic Block
//!   Reordering", IEEE Trans. Computers 2020), applied to functions as LLVM's
//!   `CodeLayout.cpp` does for its function-level users. An edge scores its full count when the
//!   callee starts exactly where the caller ends (a "fall-through"), a linearly decaying fraction
//!   of it for short forward and backward distances, and nothing beyond. It rewards adjacency
//!   far more sharply than the page score.
//!
//! Both are sums of finite terms: the page score saturates at `u64::MAX`, the ExtTSP score is an
//! `f64` sum of at most one `u64` count per edge.

use crate::{check_graph, check_permutation, EdgeCount, Error};

/// Page size of the locality score: 4 KiB, the base page of x86-64 and most AArch64 kernels.
pub const PAGE_SIZE: u64 = 4096;

/// Start address of every node when laid out back to back in `layout` order.
fn addresses(sizes: &[u64], layout: &[u32]) -> Vec<u64> {
    let mut addr = vec![0u64; sizes.len()];
    let mut at = 0u64;
    for &v in layout {
        addr[v as usize] = at;
        at = at.saturating_add(sizes[v as usize]);
    }
    addr
}

/// Sum of the counts of edges whose two endpoints start in the same `page_size`-aligned page.
///
/// `page_size` of zero is treated as one byte.
pub fn page_locality_score(
    sizes: &[u64],
    edges: &[EdgeCount],
    layout: &[u32],
    page_size: u64,
) -> Result<u64, Error> {
    check_graph(sizes, sizes, edges)?;
    check_permutation(layout, sizes.len())?;
    let page = page_size.max(1);
    let addr = addresses(sizes, layout);
    Ok(edges
        .iter()
        .filter(|e| e.src != e.dst)
        .filter(|e| addr[e.src as usize] / page == addr[e.dst as usize] / page)
        .fold(0u64, |acc, e| acc.saturating_add(e.count)))
}

/// Parameters of the ExtTSP score; the defaults are LLVM's (`CodeLayout.cpp`), which are the
/// values Newell & Pupyrev tuned on Facebook's data-center binaries.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtTspParams {
    /// Weight of an edge whose callee starts where its caller ends (1.0).
    pub fallthrough_weight: f64,
    /// Weight of a short forward edge at distance 0 (0.1), decaying linearly to 0.
    pub forward_weight: f64,
    /// Weight of a short backward edge at distance 0 (0.1), decaying linearly to 0.
    pub backward_weight: f64,
    /// Largest forward distance in bytes that still scores (1024).
    pub forward_distance: u64,
    /// Largest backward distance in bytes that still scores (640).
    pub backward_distance: u64,
}

impl Default for ExtTspParams {
    fn default() -> Self {
        ExtTspParams {
            fallthrough_weight: 1.0,
            forward_weight: 0.1,
            backward_weight: 0.1,
            forward_distance: 1024,
            backward_distance: 640,
        }
    }
}

/// The ExtTSP score of `layout`: for each edge, the distance runs from the end of the caller to
/// the start of the callee (see the module docs).
pub fn ext_tsp_score(
    sizes: &[u64],
    edges: &[EdgeCount],
    layout: &[u32],
    params: &ExtTspParams,
) -> Result<f64, Error> {
    check_graph(sizes, sizes, edges)?;
    check_permutation(layout, sizes.len())?;
    let addr = addresses(sizes, layout);
    let mut score = 0.0f64;
    for e in edges.iter().filter(|e| e.src != e.dst) {
        let from = addr[e.src as usize].saturating_add(sizes[e.src as usize]);
        let to = addr[e.dst as usize];
        score += edge_score(from, to, e.count, params);
    }
    Ok(score)
}

/// The ExtTSP value of one edge whose caller ends at `from` and whose callee starts at `to`:
/// the term [`ext_tsp_score`] sums for it, and the one the merging gains are made of.
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

/// Blocks of `block` bytes that hold `share = (num, den)` of the self weight when `layout`
/// places nodes back to back: the block weights, heaviest first, are summed until they reach
/// `num / den` of the total. A node's weight is spread evenly over its bytes (a zero size counts
/// as one byte), since a profile says how often a function ran, not which of its bytes did.
/// It is the profile's prediction of the "pages (lines) holding 99% of executed bytes" that
/// `sediment sim` measures, counted by the one footprint rule
/// ([`sediment_sim::blocks_for_target`]); a figure from it is labelled "predicted from the
/// profile's weights". Lower is better.
///
/// Blocks fully inside one node are kept as one run `(weight, how many)`, so a huge size cannot
/// make this allocate per block. `block` of zero is treated as one byte; `den` of zero as one.
pub fn weight_footprint(
    sizes: &[u64],
    counts: &[u64],
    layout: &[u32],
    block: u64,
    share: (u64, u64),
) -> Result<u64, Error> {
    check_graph(sizes, counts, &[])?;
    check_permutation(layout, sizes.len())?;
    let block = block.max(1);
    let mut runs: Vec<(f64, u64)> = Vec::new();
    // The block being filled: (index, weight so far).
    let mut cur: Option<(u64, f64)> = None;
    let mut add = |runs: &mut Vec<(f64, u64)>, b: u64, w: f64| match &mut cur {
        Some((cb, cw)) if *cb == b => *cw += w,
        _ => {
            if let Some((_, cw)) = cur.take() {
                runs.push((cw, 1));
            }
            cur = Some((b, w));
        }
    };
    let mut at = 0u64;
    for &v in layout {
        let (size, w) = (sizes[v as usize].max(1), counts[v as usize]);
        let (start, end) = (at, at.saturating_add(size));
        at = end;
        if w == 0 || end <= start {
            continue;
        }
        let per_byte = w as f64 / (end - start) as f64;
        let (first, last) = (start / block, (end - 1) / block);
        if first == last {
            add(&mut runs, first, per_byte * (end - start) as f64);
            continue;
        }
        add(
            &mut runs,
            first,
            per_byte * ((first + 1) * block - start) as f64,
        );
        if last - first > 1 {
            runs.push((per_byte * block as f64, last - first - 1));
        }
        add(&mut runs, last, per_byte * (end - last * block) as f64);
    }
    if let Some((_, cw)) = cur {
        runs.push((cw, 1));
    }
    runs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    let target = total * share.0 as f64 / share.1.max(1) as f64;
    Ok(sediment_sim::blocks_for_target(&runs, target))
}

/// How much two samples of one program's weights (`a` and `b`, per node, e.g. the two time
/// halves of a recording) disagree on its hot code, as the room an order made from one needs
/// for the other's hot code. Each sample's order places nodes by weight per byte, heaviest
/// first (ties by index), nodes it never saw last; `fp(x, y)` is the number of bytes from the
/// start of `x`'s order that hold `share = (num, den)` of `y`'s weight. The result is
/// `max(fp(a, b) / fp(b, b), fp(b, a) / fp(a, a)) - 1`: 0 when either half's order serves the
/// other as well as its own, 0.25 when one needs a quarter more bytes kept hot. A profile whose
/// halves disagree much is too short (or its workload changed half-way) to predict the next
/// run: an order made from it fits the recording, not the program.
pub fn half_disagreement(
    sizes: &[u64],
    a: &[u64],
    b: &[u64],
    share: (u64, u64),
) -> Result<f64, Error> {
    check_graph(sizes, a, &[])?;
    check_graph(sizes, b, &[])?;
    let size = |v: u32| sizes[v as usize].max(1);
    let by_density = |w: &[u64]| {
        let mut layout: Vec<u32> = (0..sizes.len() as u32).collect();
        let density = |v: u32| w[v as usize] as f64 / size(v) as f64;
        layout.sort_by(|&x, &y| density(y).total_cmp(&density(x)).then(x.cmp(&y)));
        layout
    };
    let prefix = |layout: &[u32], w: &[u64]| -> u64 {
        let total: f64 = w.iter().map(|&c| c as f64).sum();
        let target = total * share.0 as f64 / share.1.max(1) as f64;
        let (mut bytes, mut got) = (0u64, 0f64);
        for &v in layout {
            if got >= target && got > 0.0 {
                break;
            }
            bytes = bytes.saturating_add(size(v));
            got += w[v as usize] as f64;
        }
        bytes.max(1)
    };
    let (la, lb) = (by_density(a), by_density(b));
    let ab = prefix(&la, b) as f64 / prefix(&lb, b) as f64;
    let ba = prefix(&lb, a) as f64 / prefix(&la, a) as f64;
    Ok((ab.max(ba) - 1.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph};
    use crate::{c3_layout, hot_layout, C3Params};
    use proptest::prelude::*;

    // Pages are 4 KiB: 0 and 1 share page 0; 2 starts at 4000 (page 0); 3 at 8000 (page 1).
    // 99% of 1000 units: node 0 (990 over 8 KiB) fills two pages, node 1 (10 in 64 bytes)
    // a third: the two pages of 0 hold 99%; 100% needs all three. Lines: 0 spreads 990 over
    // 128 lines of 7.7 each, so 99% takes every one of them and a bit of the hot line of 1.
    #[test]
    fn weight_footprint_counts_blocks() {
        let sizes = [8192, 64];
        let counts = [990, 10];
        let l = [0, 1];
        assert_eq!(
            weight_footprint(&sizes, &counts, &l, PAGE_SIZE, (99, 100)).unwrap(),
            2
        );
        assert_eq!(
            weight_footprint(&sizes, &counts, &l, PAGE_SIZE, (1, 1)).unwrap(),
            3
        );
        assert_eq!(
            weight_footprint(&sizes, &counts, &l, 64, (99, 100)).unwrap(),
            128
        );
        // A size near u64::MAX is one run, not billions of blocks.
        let huge = [u64::MAX / 2, 64];
        assert_eq!(
            weight_footprint(&huge, &counts, &[1, 0], PAGE_SIZE, (1, 100)).unwrap(),
            1
        );
        assert!(weight_footprint(&sizes, &counts, &[0], PAGE_SIZE, (99, 100)).is_err());
    }

    #[test]
    fn page_score_counts_same_page_edges() {
        let sizes = [1000, 3000, 4000, 100];
        let edges = [e(0, 1, 5), e(1, 2, 7), e(2, 3, 11), e(3, 3, 100)];
        assert_eq!(
            page_locality_score(&sizes, &edges, &[0, 1, 2, 3], PAGE_SIZE).unwrap(),
            12
        );
        // Reversed: 3 at 0, 2 at 100, 1 at 4100 (page 1), 0 at 7100 (page 1).
        assert_eq!(
            page_locality_score(&sizes, &edges, &[3, 2, 1, 0], PAGE_SIZE).unwrap(),
            16
        );
    }

    // Fall-through scores the full count; forward 512 bytes half of 0.1; backward past 640 zero.
    #[test]
    fn ext_tsp_by_distance() {
        let sizes = [100, 512, 100, 1000];
        let p = ExtTspParams::default();
        // 0 ends at 100 where 1 starts: 10 * 1.0.
        assert_eq!(
            ext_tsp_score(&sizes, &[e(0, 1, 10)], &[0, 1, 2, 3], &p).unwrap(),
            10.0
        );
        // 0 ends at 100, 2 starts at 612: forward 512 -> 0.1 * 0.5 * 10 = 0.5.
        assert_eq!(
            ext_tsp_score(&sizes, &[e(0, 2, 10)], &[0, 1, 2, 3], &p).unwrap(),
            0.5
        );
        // 3 ends at 1712, 0 starts at 0: backward 1712 > 640 -> 0.
        assert_eq!(
            ext_tsp_score(&sizes, &[e(3, 0, 10)], &[0, 1, 2, 3], &p).unwrap(),
            0.0
        );
        // 2 ends at 712, 1 starts at 100: backward 612 -> 0.1 * (1 - 612/640) * 64 = 0.28.
        let s = ext_tsp_score(&sizes, &[e(2, 1, 64)], &[0, 1, 2, 3], &p).unwrap();
        assert!((s - 0.28).abs() < 1e-12, "{s}");
    }

    // A layout that is not a permutation is an error.
    #[test]
    fn scores_reject_bad_layouts() {
        let sizes = [1, 1];
        assert!(page_locality_score(&sizes, &[], &[0, 0], PAGE_SIZE).is_err());
        assert!(ext_tsp_score(&sizes, &[], &[0], &ExtTspParams::default()).is_err());
    }

    // On the hot chain C3 beats hotness order on both scores.
    #[test]
    fn c3_beats_hot_on_a_chain() {
        // Hot but unrelated 5000-byte function 5 pushes the chain away from node 2 in hotness order.
        let sizes = [64, 64, 64, 64, 64, 5000];
        let counts = [10, 1, 40, 30, 20, 35];
        let edges = [e(0, 3, 100), e(3, 4, 100), e(4, 2, 100)];
        let hot = hot_layout(&sizes, &counts, &edges).unwrap();
        let c3 = c3_layout(&sizes, &counts, &edges, &C3Params::default()).unwrap();
        assert_eq!(hot, vec![2, 5, 3, 4, 0, 1]);
        assert_eq!(c3, vec![0, 3, 4, 2, 1, 5]);
        let page = |l: &[u32]| page_locality_score(&sizes, &edges, l, PAGE_SIZE).unwrap();
        let tsp = |l: &[u32]| ext_tsp_score(&sizes, &edges, l, &ExtTspParams::default()).unwrap();
        assert_eq!((page(&hot), page(&c3)), (200, 300));
        assert_eq!(tsp(&c3), 300.0);
        // Hot: 3 falls through to 4 (100), 0 -> 3 is 192 bytes backward (0.1 * 0.7 * 100).
        assert!((tsp(&hot) - 107.0).abs() < 1e-9, "{}", tsp(&hot));
    }

    proptest! {
        // Scores of any valid layout are finite and the page score never exceeds the edge total.
        #[test]
        fn scores_are_finite((sizes, counts, edges) in graph()) {
            let layout = c3_layout(&sizes, &counts, &edges, &C3Params::default()).unwrap();
            let tsp = ext_tsp_score(&sizes, &edges, &layout, &ExtTspParams::default()).unwrap();
            prop_assert!(tsp.is_finite() && tsp >= 0.0);
            let page = page_locality_score(&sizes, &edges, &layout, PAGE_SIZE).unwrap();
            let total = edges.iter().filter(|e| e.src != e.dst)
                .fold(0u64, |a, e| a.saturating_add(e.count));
            prop_assert!(page <= total);
        }
    }

    // Halves that agree on the hot nodes score 0; halves whose hot nodes differ need the other's
    // blocks too.
    #[test]
    fn halves_agree_or_not() {
        let sizes = [64, 64, 64, 64];
        let same = half_disagreement(&sizes, &[100, 50, 0, 0], &[90, 60, 1, 0], (9, 10)).unwrap();
        assert_eq!(same, 0.0);
        // a is hot in nodes 0, 1; b in nodes 2, 3: a's order puts b's hot code two blocks later.
        let apart = half_disagreement(&sizes, &[100, 90, 0, 0], &[0, 0, 100, 90], (9, 10)).unwrap();
        assert!(apart >= 1.0, "{apart}");
    }
}
