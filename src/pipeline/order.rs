//! The `order` stage: profile -> function order, optionally extended from a static call graph.
//!
//! [`order`] runs one ordering algorithm of `sediment-order` on the profile's call graph. Only
//! functions the profile saw are listed; the linker places all others after them in its
//! default order.
//!
//! [`fill`] extends an order (any algorithm's, or the tune stage's) with functions a static
//! call graph (GCC `-fcallgraph-info`, or the objects' relocations, imported as a profile)
//! reaches from the ordered ones, placed after them (`sediment_order::fill`); with
//! [`FillParams::rest`], then every other function of that graph in call-tree clusters. The
//! static edges only decide where functions the profile never saw go, never the order of the
//! ones it did, which is why the fill follows the order rather than merging into the profile.

use crate::pipeline::timings;
use anyhow::{Context, Result};
use sediment_order::{fill_order, order_graph, Algorithm, CallGraph, FillParams};
use sediment_profile::{FuncKey, FunctionOrder, Profile};
use std::path::Path;

/// Orders `profile` (whose call graph is `graph`, startup order included when set) with
/// `algorithm`; `profile_path` names it in errors.
pub fn order(
    profile: &Profile,
    profile_path: &Path,
    graph: &CallGraph,
    algorithm: Algorithm,
) -> Result<FunctionOrder> {
    let _t = timings::stage("order");
    order_graph(profile, graph, algorithm)
        .with_context(|| format!("{}: cannot order", profile_path.display()))
}

/// A static call graph to extend an order from.
#[derive(Debug, Clone)]
pub struct Fill<'a> {
    /// The graph, read as a profile (its edges; its weights are not used).
    pub graph: &'a Profile,
    /// Where it was read from (named in errors and notes).
    pub path: &'a Path,
    /// How far to follow its edges.
    pub params: FillParams,
}

/// An order extended by [`fill`].
#[derive(Debug, Clone)]
pub struct Filled {
    /// The order followed by the functions the static graph added.
    pub order: FunctionOrder,
    /// How many functions the order listed before.
    pub sampled: usize,
    /// How many the static graph added.
    pub added: usize,
}

/// Extends `order` with the functions the static graph of `with` reaches from it. The graph
/// must describe the profiled program: as for a binary a profile is bound to, enough of the
/// profile's weight must be in functions the graph names. Not its `meta binary`: a static
/// graph read from the objects is often named after another link of them (the bench's
/// `v01-s0` for a profile of `prog`).
pub fn fill(
    order: &FunctionOrder,
    profile: &Profile,
    profile_path: &Path,
    with: &Fill<'_>,
) -> Result<Filled> {
    let _t = timings::stage("fill");
    let named: Vec<FuncKey> = with.graph.functions.iter().map(|f| f.key.clone()).collect();
    crate::pipeline::require_share(
        profile_path,
        &with.path.display().to_string(),
        sediment_profile::binary_share(profile, &named),
    )?;
    let (filled, added) = fill_order(order, with.graph, &with.params)
        .with_context(|| format!("{}: cannot fill the order", with.path.display()))?;
    Ok(Filled {
        order: filled,
        sampled: order.functions.len(),
        added,
    })
}
