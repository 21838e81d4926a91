//! The `tune` stage: profile + binary + workload -> a function order chosen by the simulator.
//!
//! Every ordering algorithm of `sediment-order` orders the profile; the binary runs once under
//! valgrind (Sediment's trace tool, lackey where it cannot be built) with the workload (or a run kept in a file is read back) and the run is
//! recorded relative to the binary's functions; the search of `sediment-tune` replays the
//! candidates and its own layouts on that run and returns the cheapest (the objective is
//! documented there). The targets are the published algorithms' best values; Sediment's own
//! algorithms (`tiered`, `paged`) are candidates but set no target. The profile's weight of
//! each function weighs the footprint counts beside the run's, and the climbs start from
//! [`Start`] (`c3` by default).
//!
//! The binary is best linked by the linker that will link the order: the tuned layout starts
//! where the binary's code starts, and pages and cache sets depend on it.

use crate::fsio;
use crate::pipeline::timings;
use anyhow::{anyhow, bail, Context, Result};
use sediment_order::{order_graph, Algorithm, CallGraph};
use sediment_profile::{FuncKey, FunctionOrder, Profile};
use sediment_sim::{Recording, Saved};
use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

/// Algorithms that are Sediment's own, not published: the search takes its targets from the
/// others.
const OWN_ALGORITHMS: [&str; 2] = ["tiered", "paged"];

/// Where the climbs start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The candidate closest to every target on the recorded run.
    Cheapest,
    /// One algorithm's order or its density tiers.
    From(Algorithm),
}

impl Start {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Start::Cheapest => "cheapest",
            Start::From(a) => a.name(),
        }
    }
}

impl Default for Start {
    /// C3's order: the start whose tuned order held up best on workloads the recorded run did
    /// not cover (the design notes on the search say where this was measured).
    fn default() -> Self {
        Start::From(Algorithm::C3)
    }
}

impl std::str::FromStr for Start {
    type Err = String;

    /// `cheapest` or an algorithm's name.
    fn from_str(name: &str) -> Result<Self, String> {
        if name == "cheapest" {
            return Ok(Start::Cheapest);
        }
        Algorithm::from_name(name)
            .map(Start::From)
            .map_err(|e| format!("{e}, or cheapest"))
    }
}

/// What to tune and how long to search.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The profile to order.
    pub profile: &'a Profile,
    /// Where the profile was read from (named in errors).
    pub profile_path: &'a Path,
    /// The binary to run (the one the profile was recorded on, built with
    /// `-ffunction-sections`).
    pub binary: &'a Path,
    /// The workload's arguments.
    pub workload: &'a [OsString],
    /// A file holding the recorded run: read when it holds a run of the same binary bytes,
    /// arguments and event cap (anything else is an error), written after recording when it
    /// does not exist.
    pub recording: Option<&'a Path>,
    /// Most layouts replayed.
    pub budget: usize,
    /// Most fetches of the run kept for replay (16 bytes each); longer runs are sampled in
    /// whole windows.
    pub events: usize,
    /// Where the climbs start.
    pub start: Start,
    /// Threads replaying each layout (neither the order nor the table depends on it).
    pub threads: usize,
}

/// Default of [`Request::budget`].
pub const DEFAULT_BUDGET: usize = 300;

/// Default of [`Request::events`].
pub const DEFAULT_EVENTS: usize = sediment_sim::record::DEFAULT_MAX_EVENTS;

/// What the stage found.
#[derive(Debug, Clone)]
pub struct Tuned {
    /// The tuned order (`meta algorithm refine`, the search's parameters in `meta parameters`).
    pub order: FunctionOrder,
    /// The search's table: every candidate's and the tuned layout's counts with their ratios
    /// to the targets, and where the search started.
    pub table: String,
    /// Notes for the user (a kept run read back).
    pub notes: Vec<String>,
}

/// Runs the `tune` stage; see the module documentation.
pub fn tune(req: &Request<'_>) -> Result<Tuned> {
    let _t = timings::stage("tune");
    let profile = req.profile;
    let graph = CallGraph::from_profile(profile);
    // A profile of another program would leave the search only the names every program has
    // (`main`, `_start`): refused before the (slow) recording, naming both files. Profiles of
    // another build of this program (another linker, other flags) keep their names and pass.
    let simulated = fsio::read_binary(req.binary)?;
    let defined: Vec<FuncKey> = simulated.functions.iter().map(|s| s.key.clone()).collect();
    crate::pipeline::require_share(
        req.profile_path,
        &req.binary.display().to_string(),
        sediment_profile::binary_share(profile, &defined),
    )?;
    let mut orders = Vec::new();
    for name in Algorithm::NAMES {
        let order = order_graph(profile, &graph, Algorithm::from_name(name)?)
            .with_context(|| format!("{}: cannot order", req.profile_path.display()))?;
        orders.push((*name, order));
    }
    let mut notes = Vec::new();
    let (linked, saved) = recorded_run(req, &mut notes)?;
    let rec = &saved.recording;
    let mut units_of: HashMap<&str, Vec<u32>> = HashMap::new();
    for (u, name) in saved.names.iter().enumerate() {
        units_of
            .entry(name.as_str())
            .or_default()
            .push(u32::try_from(u)?);
    }
    // Items: the names the orders list that the binary defines, first listed first.
    let mut item_of: HashMap<&str, u32> = HashMap::new();
    let mut items: Vec<Vec<u32>> = Vec::new();
    let mut keys = Vec::new();
    for (_, order) in &orders {
        for key in &order.functions {
            let name = key.name.as_str();
            if item_of.contains_key(name) {
                continue;
            }
            if let Some(units) = units_of.get(name) {
                item_of.insert(name, u32::try_from(items.len())?);
                items.push(units.clone());
                keys.push(key.clone());
            }
        }
    }
    if items.is_empty() {
        bail!(
            "{}: none of the profile's functions is in {} (profile of another program?)",
            req.profile_path.display(),
            req.binary.display()
        );
    }
    let candidates: Vec<Vec<u32>> = orders
        .iter()
        .map(|(_, order)| {
            let mut listed = vec![false; items.len()];
            let mut perm = Vec::with_capacity(items.len());
            for key in &order.functions {
                if let Some(&i) = item_of.get(key.name.as_str()) {
                    if !std::mem::replace(&mut listed[i as usize], true) {
                        perm.push(i);
                    }
                }
            }
            perm.extend((0..items.len() as u32).filter(|&i| !listed[i as usize]));
            perm
        })
        .collect();
    let reference: Vec<bool> = orders
        .iter()
        .map(|(name, _)| !OWN_ALGORITHMS.contains(name))
        .collect();
    let mut by_name: HashMap<&str, u64> = HashMap::new();
    for f in &profile.functions {
        let w = by_name.entry(f.key.name.as_str()).or_default();
        *w = w.saturating_add(f.self_weight);
    }
    let item_weights = keys
        .iter()
        .map(|k| by_name.get(k.name.as_str()).copied().unwrap_or(0))
        .collect();
    let params = sediment_tune::Params {
        budget: req.budget,
        item_weights: Some(item_weights),
        start: match req.start {
            Start::Cheapest => None,
            Start::From(a) => Some(
                Algorithm::NAMES
                    .iter()
                    .position(|n| *n == a.name())
                    .expect("every algorithm is among the candidates"),
            ),
        },
        threads: req.threads.max(1),
        ..Default::default()
    };
    let r = sediment_tune::search(rec, &items, &candidates, &reference, &params)
        .with_context(|| format!("tuning on {}", req.binary.display()))?;
    let table = table(rec, &r, &params, &orders, linked, items.len());
    let mut order = FunctionOrder {
        functions: r.order.iter().map(|&i| keys[i as usize].clone()).collect(),
        ..Default::default()
    };
    order
        .meta
        .insert("binary".into(), profile.meta.binary.clone());
    order.meta.insert("algorithm".into(), "refine".into());
    // The objective's fixed choices are spelled out so an order file says how it was made.
    order.meta.insert(
        "parameters".into(),
        format!(
            "budget={} events={} shifts={:?} tlb-shifts={:?} align={} weights=profile itlb=median footprint=placed i1=mean start={}",
            params.budget,
            req.events,
            params.shifts,
            params.tlb_shifts,
            params.align,
            req.start.name(),
        ),
    );
    Ok(Tuned {
        order,
        table,
        notes,
    })
}

/// The valgrind run of the binary, with the as-linked I1 32K and iTLB 64 misses: recorded, or
/// read from [`Request::recording`] when that holds a run of the same binary, arguments and
/// event cap (and written there after recording when it does not exist).
fn recorded_run(req: &Request<'_>, notes: &mut Vec<String>) -> Result<([u64; 2], Saved)> {
    let file = req.recording;
    let key = match file {
        Some(_) => recording_key(req)?,
        None => 0,
    };
    let saved = match file.filter(|p| p.exists()) {
        Some(path) => {
            let saved = Saved::from_bytes(&fsio::read_bytes(path)?)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            if saved.key != key || saved.numbers.len() != 2 {
                bail!(
                    "{}: recorded from another binary, arguments or event cap than {} (delete it to record again)",
                    path.display(),
                    req.binary.display()
                );
            }
            notes.push(format!("the run recorded in {}", path.display()));
            saved
        }
        None => {
            let plan = crate::pipeline::measure::Plan {
                record: Some(req.events),
                ..crate::pipeline::measure::Plan::as_linked()
            };
            let (layouts, recorded) = crate::pipeline::measure::record(
                req.binary,
                req.workload,
                &"valgrind".into(),
                &plan,
                None,
            )?;
            let m = &layouts.layouts[0][0].misses();
            let saved = Saved {
                key,
                numbers: vec![m[0], m[2]],
                names: recorded.names,
                recording: recorded.recording,
            };
            if let Some(path) = file {
                fsio::write_atomic(path, &saved.to_bytes())?;
            }
            saved
        }
    };
    Ok(([saved.numbers[0], saved.numbers[1]], saved))
}

/// What a kept run is keyed by: a hash of the binary's bytes, the event cap and the arguments.
fn recording_key(req: &Request<'_>) -> Result<u64> {
    use std::hash::Hasher as _;
    use std::os::unix::ffi::OsStrExt as _;
    let mut h = twox_hash::XxHash3_64::new();
    let mut field = |b: &[u8]| {
        h.write_u64(b.len() as u64);
        h.write(b);
    };
    field(&fsio::read_bytes(req.binary)?);
    field(&(req.events as u64).to_le_bytes());
    req.workload.iter().for_each(|a| field(a.as_bytes()));
    Ok(h.finish())
}

/// The search's table: every candidate's and the tuned layout's counts with their ratios to
/// the targets, and where the search started.
fn table(
    rec: &Recording,
    r: &sediment_tune::Tuned,
    params: &sediment_tune::Params,
    orders: &[(&str, FunctionOrder)],
    linked: [u64; 2],
    functions: usize,
) -> String {
    let columns = sediment_tune::METRICS;
    let mut table = format!(
        "sediment tune: {} functions, {} of {} fetches kept (1 window in {}), {} layouts replayed; I1 means over shifts {:?} and the iTLB's, iTLB medians over them and {:?}; pages and lines where placed\n| layout | {} |\n|---|{}\n",
        functions,
        rec.kept(),
        rec.offered(),
        rec.period(),
        r.evaluations,
        params.shifts,
        params.tlb_shifts,
        sediment_tune::LayoutMetrics::NAMES[..columns].join(" | "),
        "---:|".repeat(columns)
    );
    let row = |t: &mut String, label: &str, m: &sediment_tune::LayoutMetrics| {
        let cells: Vec<String> = m.values()[..columns]
            .iter()
            .zip(r.targets.values())
            .map(|(v, b)| format!("{v} ({:.3})", *v as f64 / b.max(1) as f64))
            .collect();
        let _ = writeln!(t, "| {label} | {} |", cells.join(" | "));
    };
    for ((name, _), m) in orders.iter().zip(&r.candidates) {
        let own = if OWN_ALGORITHMS.contains(name) {
            " (own)"
        } else {
            ""
        };
        row(&mut table, &format!("{name}{own}"), m);
    }
    row(&mut table, "refined", &r.metrics);
    let _ = writeln!(
        table,
        "(ratios to the best published value of each metric; as linked: I1 32K {}, iTLB 64 {})",
        linked[0], linked[1]
    );
    let cuts: Vec<String> = r
        .tiers
        .iter()
        .map(|t| format!("{}.{}%", t / 10, t % 10))
        .collect();
    let hot = if cuts.is_empty() {
        String::new()
    } else {
        let phased = if r.phased {
            ", the later tiers in first-fetch order"
        } else {
            ""
        };
        format!(" in density tiers cut at {}{phased}", cuts.join(" and "))
    };
    let name = orders[r.start].0;
    let _ = match params.start.filter(|&s| s != r.start) {
        Some(s) => writeln!(
            table,
            "the climbs from {} ended costlier than {name}{hot}: kept that",
            orders[s].0
        ),
        None => writeln!(
            table,
            "started from {name}{hot}; {} moves kept",
            r.moves.len()
        ),
    };
    table
}
