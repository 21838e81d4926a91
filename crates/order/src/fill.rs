//! Filling a sampled order from a static call graph: place the functions a sampling profiler
//! missed next to the sampled functions they call or are called by, at low confidence.
//!
//! Why: a sampling profile (perf, cpu-clock at 4 kHz) sees only the functions where samples
//! happened to land, plus their direct callers. On SQLite's speedtest1 it names about 120 of the
//! some 600 functions that run; the rest stay wherever the linker's default order puts them,
//! scattered over the binary, and every call into them costs a page and a cache line of its own.
//! A static call graph (GCC `-fcallgraph-info`, see `sediment_import::gcc_callgraph`) knows who
//! can call whom but not how often. Together: the sampled functions say *where* the program
//! runs, the static edges say what else is *probably* running around them.
//!
//! The algorithm is a breadth-first search from the sampled order:
//! 1. The sampled order (`placed`) is kept exactly as the ordering algorithm made it. Static
//!    edges never move a sampled function: they carry no counts, and a guess must not displace
//!    a measurement. This prefix is the hot region, and it stays as dense as it was.
//! 2. Level 0 is the placed functions, in their order. Level `d + 1` is made by walking level
//!    `d` in order and, for each function, appending its static callees (in node-index order),
//!    then, only with [`FillParams::callers`], its static callers (in node-index order), that
//!    are not placed yet. Callers are off by default: a static caller of a hot function is
//!    often one of many call sites that never ran, whereas a callee of code that ran is more
//!    likely to have run too (see [`FillParams`] for the measurement).
//! 3. After `max_depth` levels the search stops; everything else keeps the linker's default,
//!    unless [`FillParams::rest`] is set: then every other function of the static graph
//!    follows, in call-tree clusters. Entry points first (functions no unplaced function
//!    calls, such as library functions reached only through pointers), in node-index order,
//!    each followed depth first by the unplaced functions it calls; then whatever is left
//!    (cycles), the same way. Code that training never ran but a later run does (a feature the
//!    training workload did not use) then sits together with its callees instead of in source
//!    file order, one file per page.
//!
//! The filled functions follow the hot region, in discovery order: callees of the hottest
//! function first, so that a lukewarm helper ends up on the page after the hot code that calls
//! it, not somewhere in the middle of the cold text. Deterministic: the only inputs to the
//! order are the placed order and node indices.
//!
//! Turned down: inserting each filled function right after its sampled neighbour, inside the
//! hot region. It keeps caller and callee on one cache line, but every guessed function then
//! spreads the measured hot code over more pages, and most static neighbours of a hot function
//! (error paths, rarely taken branches) do not run at all. Also turned down: merging the static
//! edges into the profile (`sediment merge`) with a small weight. The ordering algorithms would
//! then weigh guesses against measurements, and any weight small enough to never outvote a
//! sample is too small to matter in C3's density sort; the fill keeps the two apart by
//! construction.
//!
//! The score of the result is that of the layout it extends ([`crate::score`]); filling adds no
//! measured weight, so it is judged by measurement (`docs/journal/merge.md` has the SQLite numbers).

use crate::{EdgeCount, Error};

/// How far [`fill_layout`] walks the static graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillParams {
    /// Levels of static edges to follow from the placed functions (1: direct neighbours only).
    pub max_depth: u32,
    /// Follow static edges backwards too (callers of placed functions), not only to callees.
    pub callers: bool,
    /// After the levels, append every other function of the graph in call-tree clusters.
    pub rest: bool,
}

/// The defaults, tuned on SQLite 3.40 speedtest1 (`bench/fill`, `docs/journal/merge.md`): callees only,
/// two levels. Depth 2 reaches 346 more of the 589 executed functions than the sampled profile
/// alone, depth 3 only 42 more again; following callers as well reaches 441, but adds 1123
/// functions of which only 39% ever run (callees only: 628, 55%), and spread the 99.9% tail over
/// more pages (84 against 78).
impl Default for FillParams {
    fn default() -> Self {
        FillParams {
            max_depth: 2,
            callers: false,
            rest: false,
        }
    }
}

/// Returns `placed` followed by the functions the static `edges` reach from it within
/// `params.max_depth` levels (see the module docs). Nodes are `0..nodes`; edge counts are
/// ignored (a static edge says only "may call").
pub fn fill_layout(
    nodes: usize,
    placed: &[u32],
    edges: &[EdgeCount],
    params: &FillParams,
) -> Result<Vec<u32>, Error> {
    if u32::try_from(nodes).is_err() {
        return Err(Error::TooManyNodes(nodes));
    }
    crate::check_edges(nodes, edges)?;
    let mut done = vec![false; nodes];
    for &v in placed {
        let slot = done
            .get_mut(v as usize)
            .ok_or_else(|| Error::NotAPermutation {
                nodes,
                problem: format!("placed node {v} is out of range"),
            })?;
        if *slot {
            return Err(Error::NotAPermutation {
                nodes,
                problem: format!("node {v} is placed twice"),
            });
        }
        *slot = true;
    }
    // Adjacency lists sorted by node index: callees and callers apart.
    let mut callees: Vec<Vec<u32>> = vec![Vec::new(); nodes];
    let mut callers: Vec<Vec<u32>> = vec![Vec::new(); nodes];
    for e in edges {
        callees[e.src as usize].push(e.dst);
        callers[e.dst as usize].push(e.src);
    }
    for list in callees.iter_mut().chain(callers.iter_mut()) {
        list.sort_unstable();
        list.dedup();
    }
    let mut layout = placed.to_vec();
    let mut level: Vec<u32> = placed.to_vec();
    for _ in 0..params.max_depth {
        let mut next = Vec::new();
        for &v in &level {
            let up: &[u32] = if params.callers {
                &callers[v as usize]
            } else {
                &[]
            };
            for &w in callees[v as usize].iter().chain(up) {
                if !done[w as usize] {
                    done[w as usize] = true;
                    next.push(w);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        layout.extend_from_slice(&next);
        level = next;
    }
    if params.rest {
        append_clusters(&mut layout, &mut done, &callees, &callers);
    }
    Ok(layout)
}

/// Appends every node not `done` in call-tree clusters: first each entry point (no caller
/// left undone but itself) in index order, then any node left (cycles) in index order, each
/// followed depth first by its undone callees in index order.
fn append_clusters(
    layout: &mut Vec<u32>,
    done: &mut [bool],
    callees: &[Vec<u32>],
    callers: &[Vec<u32>],
) {
    let entry: Vec<bool> = (0..done.len())
        .map(|v| {
            callers[v]
                .iter()
                .all(|&c| c as usize == v || done[c as usize])
        })
        .collect();
    let mut stack = Vec::new();
    for pass_entries in [true, false] {
        for root in 0..done.len() {
            if done[root] || (pass_entries && !entry[root]) {
                continue;
            }
            stack.push(root as u32);
            while let Some(v) = stack.pop() {
                if std::mem::replace(&mut done[v as usize], true) {
                    continue;
                }
                layout.push(v);
                // Reversed, so that the lowest-index callee is visited first.
                stack.extend(
                    callees[v as usize]
                        .iter()
                        .rev()
                        .filter(|&&w| !done[w as usize]),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(src: u32, dst: u32) -> EdgeCount {
        EdgeCount { src, dst, count: 1 }
    }

    // Sampled order 3, 0 stays first; 3's callee 5 and caller 1 come next (callees first), then
    // 0's callee 2; at depth 2, 5's callee 4. Node 6 is reachable only at depth 3.
    #[test]
    fn fills_by_level_after_the_sampled_order() {
        let edges = [e(3, 5), e(1, 3), e(0, 2), e(5, 4), e(4, 6), e(0, 3)];
        let depth = |max_depth| FillParams {
            max_depth,
            callers: true,
            rest: false,
        };
        let fill = |p: &FillParams| fill_layout(7, &[3, 0], &edges, p).unwrap();
        assert_eq!(fill(&depth(2)), [3, 0, 5, 1, 2, 4]);
        assert_eq!(fill(&depth(1)), [3, 0, 5, 1, 2]);
        assert_eq!(fill(&depth(0)), [3, 0]);
        // Callees only: 1 (a caller of 3) is never reached.
        let down = FillParams {
            callers: false,
            ..depth(2)
        };
        assert_eq!(fill(&down), [3, 0, 5, 2, 4]);
    }

    // The rest in clusters: after the fill (3, 0, then 0's callee 2), the entry points with
    // no undone caller are 1 and 6 (4 is called by 5, 5 by 1, 7 by 8 and 8 by 7); 1 pulls its
    // call tree 5, 4 (depth first: 5's callee 4 before 1's next callee 9), then 9; 6 stands
    // alone (calling itself does not stop it being an entry); the cycle 7 <-> 8 comes last,
    // from its lowest index.
    #[test]
    fn rest_follows_in_call_tree_clusters() {
        let edges = [
            e(3, 0),
            e(0, 2),
            e(1, 5),
            e(1, 9),
            e(5, 4),
            e(7, 8),
            e(8, 7),
            e(4, 3),
            e(6, 6),
        ];
        let p = FillParams {
            max_depth: 1,
            callers: false,
            rest: true,
        };
        assert_eq!(
            fill_layout(10, &[3, 0], &edges, &p).unwrap(),
            [3, 0, 2, 1, 5, 4, 9, 6, 7, 8]
        );
        let no_rest = FillParams { rest: false, ..p };
        assert_eq!(
            fill_layout(10, &[3, 0], &edges, &no_rest).unwrap(),
            [3, 0, 2]
        );
    }

    // Static edges between sampled functions never reorder them.
    #[test]
    fn never_moves_placed_functions() {
        let edges = [e(0, 1), e(1, 2), e(2, 0)];
        let p = FillParams::default();
        assert_eq!(fill_layout(3, &[2, 0, 1], &edges, &p).unwrap(), [2, 0, 1]);
    }

    #[test]
    fn bad_input_is_an_error() {
        let p = FillParams::default();
        assert!(matches!(
            fill_layout(2, &[0], &[e(0, 2)], &p),
            Err(Error::EdgeOutOfRange { .. })
        ));
        assert!(fill_layout(2, &[0, 0], &[], &p).is_err());
        assert!(fill_layout(2, &[5], &[], &p).is_err());
    }

    // Output is duplicate-free and deterministic on a denser graph.
    #[test]
    fn output_has_no_duplicates() {
        let edges: Vec<EdgeCount> = (0..50u32)
            .flat_map(|i| [e(i, (i * 7 + 3) % 50), e((i * 11) % 50, i)])
            .collect();
        let p = FillParams {
            max_depth: 4,
            callers: true,
            rest: true,
        };
        let a = fill_layout(50, &[10, 20], &edges, &p).unwrap();
        assert_eq!(a.len(), 50, "with `rest` every node is placed");
        let mut s = a.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), a.len());
        assert_eq!(a, fill_layout(50, &[10, 20], &edges, &p).unwrap());
    }
}
