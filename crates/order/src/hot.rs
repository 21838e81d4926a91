//! The baseline: hottest function first.
//!
//! Sorting functions by their own sample count packs the hot code into as few pages as it can
//! without looking at who calls whom. It is what `perf`-driven "hot text" scripts do and what
//! every call-graph algorithm has to beat (Ottoni & Maher, CGO 2017, use it as the
//! "hot function ordering" baseline, §6). It ignores sizes: a huge warm function can push many
//! small hot ones onto the next page, which is exactly the weakness [`crate::c3`] addresses with
//! density.
//!
//! Order: count descending; then nodes with a zero count but an edge (they ran, called or were
//! called, but no sample landed in them); then never-seen nodes. Ties inside each group are
//! broken by node index ascending, so the input order decides and the result is deterministic.

use crate::{append_unseen, check_graph, seen_nodes, EdgeCount, Error};

/// Orders nodes by decreasing count (see the module docs for ties and unseen nodes).
///
/// `sizes` is only checked for length, so that every layout function has the same signature.
pub fn hot_layout(sizes: &[u64], counts: &[u64], edges: &[EdgeCount]) -> Result<Vec<u32>, Error> {
    let n = check_graph(sizes, counts, edges)?;
    let seen = seen_nodes(counts, edges);
    let mut layout: Vec<u32> = (0..n as u32).filter(|&i| seen[i as usize]).collect();
    // Stable sort on count descending: equal counts keep index order.
    layout.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]));
    append_unseen(&mut layout, &seen);
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{e, graph, is_permutation, unseen};
    use proptest::prelude::*;

    // Hottest first; equal counts keep index order; edge-only node 4 before never-seen 1 and 5.
    #[test]
    fn hottest_first_then_called_then_unseen() {
        let counts = [5, 0, 9, 5, 0, 0, 7];
        let sizes = [64; 7];
        let edges = [e(2, 4, 3)];
        assert_eq!(
            hot_layout(&sizes, &counts, &edges).unwrap(),
            vec![2, 6, 0, 3, 4, 1, 5]
        );
    }

    // An empty graph has an empty layout.
    #[test]
    fn empty_graph() {
        assert_eq!(hot_layout(&[], &[], &[]).unwrap(), Vec::<u32>::new());
    }

    proptest! {
        // Permutation, deterministic, never-seen nodes last in input order.
        #[test]
        fn hot_layout_properties((sizes, counts, edges) in graph()) {
            let a = hot_layout(&sizes, &counts, &edges).unwrap();
            prop_assert!(is_permutation(&a, counts.len()));
            prop_assert_eq!(&a, &hot_layout(&sizes, &counts, &edges).unwrap());
            let tail = unseen(&counts, &edges);
            prop_assert_eq!(&a[counts.len() - tail.len()..], &tail[..]);
            // Counts never increase along the layout.
            prop_assert!(a.windows(2).all(|w| counts[w[0] as usize] >= counts[w[1] as usize]));
        }
    }
}
