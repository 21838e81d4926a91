//! The one place that knows about profiles: converts a [`Profile`] into the plain arrays the
//! algorithms take, and their permutation back into a [`FunctionOrder`].
//!
//! Node `i` is function `i` of the profile (its [`sediment_profile::FuncId`]); a node's count is
//! the function's self weight, its size the function's code size, and every profile edge becomes
//! an [`EdgeCount`]. A function whose size the importer did not learn (or learned as zero, as for
//! assembler symbols without `.size`) gets [`DEFAULT_FUNCTION_SIZE`].
//!
//! The order file lists only functions the profile saw (a self weight or a call edge). Functions
//! never seen are left out: the linker places them after the listed ones in its default order,
//! which is also where every algorithm here would have put them.

use crate::{
    bp_layout, c3_layout, cdsort_layout, ext_tsp_layout, hot_layout, paged_layout,
    pettis_hansen_layout, seen_nodes, tiered_layout, BpParams, C3Params, CdSortParams, EdgeCount,
    Error, ExtTspLayoutParams, PagedParams, TieredParams,
};
use sediment_profile::{FuncKey, FunctionOrder, Profile};
use std::collections::HashMap;

/// Size assumed for a function whose size is unknown: 64 bytes, one cache line, about the
/// median size of a hot function in optimised C. A guess that is too small only makes density
/// look better than it is; it never stops a merge that the real size would allow by much.
pub const DEFAULT_FUNCTION_SIZE: u64 = 64;

/// A profile as indexed arrays: the input every layout function takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallGraph {
    /// Code size of each node in bytes.
    pub sizes: Vec<u64>,
    /// Self weight of each node.
    pub counts: Vec<u64>,
    /// Call edges with their weights.
    pub edges: Vec<EdgeCount>,
    /// First-execution rank of each node (0 ran first), `None` when not known; empty when the
    /// profile has no startup order at all. Only [`Algorithm::Bp`] uses it.
    pub startup: Vec<Option<u32>>,
}

impl CallGraph {
    /// Converts a profile (see the module docs for unknown sizes).
    pub fn from_profile(p: &Profile) -> CallGraph {
        CallGraph {
            sizes: p
                .functions
                .iter()
                .map(|f| match f.size {
                    Some(s) if s > 0 => s,
                    _ => DEFAULT_FUNCTION_SIZE,
                })
                .collect(),
            counts: p.functions.iter().map(|f| f.self_weight).collect(),
            edges: p
                .edges
                .iter()
                .map(|e| EdgeCount {
                    src: e.caller,
                    dst: e.callee,
                    count: e.weight,
                })
                .collect(),
            startup: Vec::new(),
        }
    }

    /// Sets the first-execution order from a list of functions, first executed first (an
    /// order file's `functions`). Names the profile does not have are skipped and counted: the
    /// count is returned, for one warning.
    pub fn set_startup(&mut self, p: &Profile, first_executed: &[FuncKey]) -> usize {
        let index: HashMap<&FuncKey, usize> = p
            .functions
            .iter()
            .enumerate()
            .map(|(i, f)| (&f.key, i))
            .collect();
        self.startup = vec![None; p.functions.len()];
        let mut rank = 0u32;
        let mut unknown = 0;
        for key in first_executed {
            match index.get(key) {
                Some(&i) if self.startup[i].is_none() => {
                    self.startup[i] = Some(rank);
                    rank += 1;
                }
                Some(_) => {}
                None => unknown += 1,
            }
        }
        unknown
    }
}

/// The ordering algorithms `sediment order --algorithm` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// [`crate::hot`]: hottest function first.
    Hot,
    /// [`crate::c3`]: Call-Chain Clustering with the lld/BOLT parameters.
    C3,
    /// [`crate::pettis_hansen`]: greedy heaviest-edge chaining.
    PettisHansen,
    /// [`crate::ext_tsp`]: greedy ExtTSP chain merging with LLVM's parameters.
    ExtTsp,
    /// [`crate::cdsort`]: Cache-Directed Sort with LLVM's parameters.
    CdSort,
    /// [`crate::bp`]: balanced partitioning for startup (Hoag et al.), lld's parameters halved.
    Bp,
    /// [`crate::tiered`]: Sediment's own, CDSort inside density tiers.
    Tiered,
    /// [`crate::paged`]: Sediment's own, C3 without its cold members, hot functions page-aligned.
    Paged,
}

impl Algorithm {
    /// Names accepted by [`Algorithm::from_name`], in the order they are listed to users.
    pub const NAMES: &'static [&'static str] = &[
        "bp",
        "c3",
        "cdsort",
        "ext-tsp",
        "hot",
        "paged",
        "pettis-hansen",
        "tiered",
    ];

    /// Looks an algorithm up by its command-line name.
    pub fn from_name(name: &str) -> Result<Algorithm, Error> {
        match name {
            "hot" => Ok(Algorithm::Hot),
            "c3" => Ok(Algorithm::C3),
            "pettis-hansen" => Ok(Algorithm::PettisHansen),
            "ext-tsp" => Ok(Algorithm::ExtTsp),
            "cdsort" => Ok(Algorithm::CdSort),
            "bp" => Ok(Algorithm::Bp),
            "tiered" => Ok(Algorithm::Tiered),
            "paged" => Ok(Algorithm::Paged),
            other => Err(Error::UnknownAlgorithm(other.to_string())),
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Hot => "hot",
            Algorithm::C3 => "c3",
            Algorithm::PettisHansen => "pettis-hansen",
            Algorithm::ExtTsp => "ext-tsp",
            Algorithm::CdSort => "cdsort",
            Algorithm::Bp => "bp",
            Algorithm::Tiered => "tiered",
            Algorithm::Paged => "paged",
        }
    }

    /// The parameters this algorithm runs with, as `key=value` pairs separated by commas.
    pub fn parameters(self) -> String {
        let default_size = format!("default-size={DEFAULT_FUNCTION_SIZE}");
        match self {
            Algorithm::Hot | Algorithm::PettisHansen => default_size,
            Algorithm::C3 => format!("{},{default_size}", C3Params::default().describe()),
            Algorithm::ExtTsp => {
                format!(
                    "{},{default_size}",
                    ExtTspLayoutParams::default().describe()
                )
            }
            Algorithm::CdSort => format!("{},{default_size}", CdSortParams::default().describe()),
            Algorithm::Bp => format!("{},{default_size}", BpParams::default().describe()),
            Algorithm::Tiered => format!("{},{default_size}", TieredParams::default().describe()),
            Algorithm::Paged => format!("{},{default_size}", PagedParams::default().describe()),
        }
    }

    /// Runs the algorithm on a call graph and returns the full permutation of its nodes.
    pub fn layout(self, g: &CallGraph) -> Result<Vec<u32>, Error> {
        match self {
            Algorithm::Hot => hot_layout(&g.sizes, &g.counts, &g.edges),
            Algorithm::C3 => c3_layout(&g.sizes, &g.counts, &g.edges, &C3Params::default()),
            Algorithm::PettisHansen => pettis_hansen_layout(&g.sizes, &g.counts, &g.edges),
            Algorithm::ExtTsp => ext_tsp_layout(
                &g.sizes,
                &g.counts,
                &g.edges,
                &ExtTspLayoutParams::default(),
            ),
            Algorithm::CdSort => {
                cdsort_layout(&g.sizes, &g.counts, &g.edges, &CdSortParams::default())
            }
            Algorithm::Bp => {
                let none;
                let startup = if g.startup.is_empty() {
                    none = vec![None; g.counts.len()];
                    &none
                } else {
                    &g.startup
                };
                bp_layout(&g.sizes, &g.counts, &g.edges, startup, &BpParams::default())
            }
            Algorithm::Tiered => {
                tiered_layout(&g.sizes, &g.counts, &g.edges, &TieredParams::default())
            }
            Algorithm::Paged => {
                paged_layout(&g.sizes, &g.counts, &g.edges, &PagedParams::default())
            }
        }
    }
}

/// Orders the functions of `profile` with `algorithm`, keeping only functions the profile saw.
///
/// The order's metadata records the profile's `binary`, the `algorithm` and its `parameters`.
pub fn order_profile(profile: &Profile, algorithm: Algorithm) -> Result<FunctionOrder, Error> {
    order_graph(profile, &CallGraph::from_profile(profile), algorithm)
}

/// [`order_profile`] on a graph already converted from `profile` (and perhaps given a startup
/// order with [`CallGraph::set_startup`]); functions with a startup rank count as seen.
pub fn order_graph(
    profile: &Profile,
    g: &CallGraph,
    algorithm: Algorithm,
) -> Result<FunctionOrder, Error> {
    let layout = algorithm.layout(g)?;
    let mut seen = seen_nodes(&g.counts, &g.edges);
    for (s, r) in seen.iter_mut().zip(&g.startup) {
        *s |= r.is_some();
    }
    let mut order = FunctionOrder::default();
    order
        .meta
        .insert("binary".into(), profile.meta.binary.clone());
    order
        .meta
        .insert("algorithm".into(), algorithm.name().into());
    order
        .meta
        .insert("parameters".into(), algorithm.parameters());
    order.functions = layout
        .into_iter()
        .filter(|&v| seen[v as usize])
        .map(|v| profile.functions[v as usize].key.clone())
        .collect();
    Ok(order)
}

/// Extends `order` (from a sampled profile) with functions of the static call graph `graph`
/// that [`crate::fill::fill_layout`] reaches from it; returns the new order and how many
/// functions were added.
///
/// Keys are matched exactly; a static function whose key is not in the order but whose *name*
/// is the name of exactly one ordered function and of exactly one static function is taken to
/// be that function (a static whose source file one side could not tell). The order's metadata
/// gains `fill-from` (the graph's `binary`) and `fill-depth`.
pub fn fill_order(
    order: &FunctionOrder,
    graph: &Profile,
    params: &crate::fill::FillParams,
) -> Result<(FunctionOrder, usize), Error> {
    use std::collections::BTreeMap;
    // Node ids: the ordered functions first (0..placed), then the graph's other functions.
    let mut ids: BTreeMap<&sediment_profile::FuncKey, u32> = BTreeMap::new();
    let mut keys: Vec<&sediment_profile::FuncKey> = Vec::new();
    for k in &order.functions {
        ids.entry(k).or_insert_with(|| {
            keys.push(k);
            (keys.len() - 1) as u32
        });
    }
    let placed: Vec<u32> = (0..keys.len() as u32).collect();
    let count_names = |it: &mut dyn Iterator<Item = &str>| {
        let mut m: BTreeMap<String, usize> = BTreeMap::new();
        for n in it {
            *m.entry(n.to_string()).or_default() += 1;
        }
        m
    };
    let ordered_names = count_names(&mut order.functions.iter().map(|k| k.name.as_str()));
    let graph_names = count_names(&mut graph.functions.iter().map(|f| f.key.name.as_str()));
    let by_name: BTreeMap<&str, u32> = order
        .functions
        .iter()
        .filter(|k| ordered_names[&k.name] == 1)
        .map(|k| (k.name.as_str(), ids[k]))
        .collect();
    let mut node_of = Vec::with_capacity(graph.functions.len());
    for f in &graph.functions {
        let id = match ids.get(&f.key) {
            Some(&id) => id,
            None => match by_name.get(f.key.name.as_str()) {
                Some(&id) if graph_names[&f.key.name] == 1 => id,
                _ => {
                    keys.push(&f.key);
                    (keys.len() - 1) as u32
                }
            },
        };
        node_of.push(id);
    }
    let edges: Vec<EdgeCount> = graph
        .edges
        .iter()
        .map(|e| EdgeCount {
            src: node_of[e.caller as usize],
            dst: node_of[e.callee as usize],
            count: e.weight,
        })
        .collect();
    let layout = crate::fill::fill_layout(keys.len(), &placed, &edges, params)?;
    let added = layout.len() - placed.len();
    let mut filled = order.clone();
    filled.functions = layout.iter().map(|&v| keys[v as usize].clone()).collect();
    filled
        .meta
        .insert("fill-from".into(), graph.meta.binary.clone());
    filled
        .meta
        .insert("fill-depth".into(), params.max_depth.to_string());
    if params.callers {
        filled.meta.insert("fill-callers".into(), "yes".into());
    }
    if params.rest {
        filled.meta.insert("fill-rest".into(), "yes".into());
    }
    Ok((filled, added))
}

/// The graph `g` as a binary already places it, for scoring the current layout beside the
/// algorithms' (`sediment order --compare --simulate BIN`): `placed[i]` is node `i`'s
/// `(address, size)` in the binary, or `None` when the binary has no such function. Returns a
/// graph with *gap nodes* appended (zero weight, no edges, the bytes between two placed nodes
/// and the offset of the first from its page start) and the layout visiting placed nodes and
/// gaps in address order, then the unplaced nodes packed after them, in index order. A placed
/// node takes the binary's size when it gives one. Scored with [`crate::weight_footprint`],
/// [`crate::page_locality_score`] or [`crate::ext_tsp_score`], the layout counts the code the
/// profile never saw that sits between hot functions, as the binary does.
pub fn as_placed(g: &CallGraph, placed: &[Option<(u64, u64)>], page: u64) -> (CallGraph, Vec<u32>) {
    let mut out = g.clone();
    let mut at: Vec<(u64, u32)> = placed
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|(a, _)| (a, i as u32)))
        .collect();
    at.sort_unstable();
    for (i, p) in placed.iter().enumerate() {
        if let Some((_, size)) = p.filter(|&(_, s)| s > 0) {
            if let Some(s) = out.sizes.get_mut(i) {
                *s = size;
            }
        }
    }
    let gap = |out: &mut CallGraph, bytes: u64, layout: &mut Vec<u32>| {
        if bytes > 0 {
            layout.push(out.sizes.len() as u32);
            out.sizes.push(bytes);
            out.counts.push(0);
            if !out.startup.is_empty() {
                out.startup.push(None);
            }
        }
    };
    let mut layout = Vec::with_capacity(g.sizes.len() * 2);
    let mut end = None;
    for &(addr, i) in &at {
        match end {
            None => gap(&mut out, addr % page.max(1), &mut layout),
            Some(e) if addr > e => gap(&mut out, addr - e, &mut layout),
            _ => {}
        }
        layout.push(i);
        let size = out.sizes[i as usize];
        end = Some(end.map_or(addr + size, |e: u64| e.max(addr + size)));
    }
    layout.extend((0..g.sizes.len() as u32).filter(|&i| placed[i as usize].is_none()));
    (out, layout)
}

#[cfg(test)]
mod tests {

    // Gaps between placed functions (and before the first, from its page start) become
    // weightless nodes; unplaced nodes come last; the binary's sizes replace the profile's.
    #[test]
    fn as_placed_keeps_the_gaps() {
        let g = CallGraph {
            sizes: vec![10, 10, 10],
            counts: vec![5, 7, 1],
            edges: vec![EdgeCount {
                src: 0,
                dst: 1,
                count: 3,
            }],
            startup: Vec::new(),
        };
        let placed = [Some((0x1010, 16)), Some((0x1000, 0)), None];
        let (p, layout) = as_placed(&g, &placed, 4096);
        // node 1 at 0x1000 (size 10 kept), gap 6, node 0 at 0x1010 (size 16), then node 2.
        assert_eq!(layout, vec![1, 3, 0, 2]);
        assert_eq!(p.sizes, vec![16, 10, 10, 6]);
        assert_eq!(p.counts, vec![5, 7, 1, 0]);
        let (q, l2) = as_placed(&g, &[Some((0x2100, 10)), None, None], 4096);
        assert_eq!(l2, vec![3, 0, 1, 2]);
        assert_eq!(q.sizes[3], 0x100);
    }
    use super::*;
    use sediment_profile::{FuncKey, Meta, ProfileBuilder};

    fn profile() -> Profile {
        let mut b = ProfileBuilder::new(Meta {
            binary: "demo".into(),
            ..Default::default()
        });
        b.add_self(&FuncKey::global("main"), 10);
        b.add_self(&FuncKey::global("work"), 40);
        b.add_self(&FuncKey::local("helper", "a.c"), 30);
        b.touch(&FuncKey::global("cold"));
        b.set_size(&FuncKey::global("work"), 200);
        b.add_call(&FuncKey::global("main"), &FuncKey::global("work"), 5);
        b.add_call(
            &FuncKey::global("work"),
            &FuncKey::local("helper", "a.c"),
            50,
        );
        b.build()
    }

    // Functions are nodes in key order; unknown sizes become the default.
    #[test]
    fn converts_profile_to_arrays() {
        // Keys sorted: cold, helper(a.c), main, work.
        let g = CallGraph::from_profile(&profile());
        assert_eq!(g.sizes, vec![64, 64, 64, 200]);
        assert_eq!(g.counts, vec![0, 30, 10, 40]);
        assert_eq!(
            g.edges,
            vec![
                EdgeCount {
                    src: 2,
                    dst: 3,
                    count: 5
                },
                EdgeCount {
                    src: 3,
                    dst: 1,
                    count: 50
                }
            ]
        );
        assert!(g.startup.is_empty());
    }

    // A startup order puts `cold` (never sampled, but first to run) into the BP order, first;
    // an unknown name is counted, a repeated one keeps its first rank.
    #[test]
    fn startup_order_feeds_bp() {
        let p = profile();
        let mut g = CallGraph::from_profile(&p);
        let first = [
            FuncKey::global("cold"),
            FuncKey::global("nope"),
            FuncKey::global("main"),
            FuncKey::global("cold"),
        ];
        assert_eq!(g.set_startup(&p, &first), 1);
        assert_eq!(g.startup, vec![Some(0), None, Some(1), None]);
        let o = order_graph(&p, &g, Algorithm::Bp).unwrap();
        let names: Vec<&str> = o.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["cold", "main", "work", "helper"]);
    }

    // C3 chains main -> work -> helper; the never-seen `cold` is left out of the order.
    #[test]
    fn orders_a_profile() {
        let o = order_profile(&profile(), Algorithm::C3).unwrap();
        assert_eq!(
            o.to_text(),
            "sediment-order 1\n\
             meta algorithm c3\n\
             meta binary demo\n\
             meta parameters max-cluster-size=1048576,caller-degrade-factor=8,min-arc-probability=0.1,default-size=64\n\
             main -\n\
             work -\n\
             helper a.c\n"
        );
        let h = order_profile(&profile(), Algorithm::Hot).unwrap();
        let names: Vec<&str> = h.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["work", "helper", "main"]);
        // Pettis-Hansen: helper-work (50) joins first (helper has the smaller id, so it leads),
        // then main (5) next to `work`; call direction plays no part.
        let ph = order_profile(&profile(), Algorithm::PettisHansen).unwrap();
        let names: Vec<&str> = ph.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["helper", "work", "main"]);
    }

    // The sampled order main, work, helper(a.c) keeps its place; the static graph adds `parse`
    // (called by work) and `init` (calls main). `helper` without a file in the graph is the
    // ordered `helper (a.c)`, so its callee `log` is reached at depth 1 too.
    #[test]
    fn fills_an_order_from_a_static_graph() {
        let o = order_profile(&profile(), Algorithm::C3).unwrap();
        let mut b = ProfileBuilder::new(Meta {
            binary: "demo".into(),
            ..Default::default()
        });
        let g = FuncKey::global;
        b.add_call(&g("work"), &g("parse"), 1);
        b.add_call(&g("init"), &g("main"), 1);
        b.add_call(&g("helper"), &g("log"), 1);
        b.add_call(&g("log"), &g("deep"), 1);
        let graph = b.build();
        let p = crate::fill::FillParams {
            max_depth: 1,
            callers: true,
            rest: false,
        };
        let (f, added) = fill_order(&o, &graph, &p).unwrap();
        let names: Vec<String> = f.functions.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            names,
            ["main", "work", "helper (a.c)", "init", "parse", "log"]
        );
        assert_eq!(added, 3);
        assert_eq!(f.meta["fill-depth"], "1");
    }

    // Names round-trip and unknown ones list the known.
    #[test]
    fn algorithm_names() {
        for &n in Algorithm::NAMES {
            assert_eq!(Algorithm::from_name(n).unwrap().name(), n);
        }
        assert_eq!(
            Algorithm::from_name("tsp").unwrap_err().to_string(),
            "unknown ordering algorithm `tsp` (known: bp, c3, cdsort, ext-tsp, hot, paged, pettis-hansen, tiered)"
        );
    }
}
