//! Simulation-guided search for a function order (`sediment tune`): starts from the orders of
//! the published algorithms, replays each layout on one recorded run ([`Recording`]) through
//! Sediment's simulator, and keeps a change only when the simulator says the layout got
//! cheaper.
//!
//! # The objective
//!
//! A layout is measured by twelve counts ([`LayoutMetrics`]), lower is better for each:
//!
//! - misses of a 32 KiB 8-way and a 16 KiB 4-way L1i, each the **mean** over every page phase
//!   (the layout shifted by [`Params::shifts`] and [`Params::tlb_shifts`], steps of
//!   [`sediment_sim::PAGE_SHIFT_STEP`]): the expected count when address randomisation draws
//!   where the program's code sits against the libraries' (which share the cache's sets and
//!   do not move with it);
//! - misses of a 64- and a 128-entry 8-way iTLB, each the **median** over the same phases;
//! - the 4 KiB pages and 64-byte lines holding 99% and 99.9% of the run's executed bytes, with
//!   the code where the layout places it (a link moves whole pages, never a boundary inside
//!   the code);
//! - the same four footprints with each item weighed as the profile weighs it
//!   ([`Params::item_weights`]), its weight spread over its bytes as the run executed them
//!   (all 0 when no weights are given).
//!
//! The *targets* are the best value of each count over the reference candidates (the
//! published algorithms). The search minimises one cost, compared lexicographically:
//!
//! 1. the number of the run's eight counts above their targets,
//! 2. the number of the profile-weighted four above theirs,
//! 3. the sum of the excess ratios (count / target - 1, over the counts above target),
//! 4. the sum of all twelve ratios (a target of 0 counts as 1).
//!
//! Ties are broken by keeping the earlier layout: the candidates in input order, then the
//! tiered layouts, then the climb's moves in their fixed sequence. The result is never
//! costlier than any candidate.
//!
//! # The search
//!
//! 1. Every candidate order is replayed; the targets are taken.
//! 2. The starting candidate ([`Params::start`], or every one) is also tried in density tiers
//!    ([`Params::tiers`]): the densest items (executed bytes per byte, weighed by the mean of
//!    the run's and the profile's share) holding 99% (99.5%, 99.9%) of the executed bytes
//!    moved before the rest, or three tiers cut at 99% and 99.9%; each tier in the
//!    candidate's order, and again with every tier after the first in the order the run first
//!    fetched its items ([`Recording::first_fetches`]), which keeps the code of one phase of
//!    the run on few pages.
//! 3. From the cheapest layout so far, hill climbing: the items of the hot prefix (99.9% of the
//!    executed bytes), heaviest first, are each tried 1, 4 and 16 positions earlier and later
//!    (from a tiered layout only inside the item's tier); the first move that lowers the cost
//!    is kept. Passes repeat until one changes nothing or [`Params::budget`] layouts have been
//!    replayed. If the climb stops with budget left and a count still above its target, a
//!    second climb starts from the cheapest layout of steps 1 and 2 that meets the count
//!    furthest above, and the cheaper end wins. If both end costlier than the cheapest layout
//!    of steps 1 and 2, that layout is the result.
//!
//! An *item* is a group of units (functions) placed together: one name of an order file, which
//! a linker applies to every section defining it. Items are laid out back to back from the
//! first unit's address, each unit aligned, and units in no item follow in address order, as
//! a linker places the sections an order file does not name.
//!
//! Design constraints: no I/O (the caller records or reads the run), no randomness, no clocks;
//! the same inputs give the same order whatever [`Params::threads`] is. Non-goals: choosing the
//! candidates (the caller orders the profile with `sediment-order`) and running the program.

use std::collections::HashSet;
use std::rc::Rc;

use sediment_sim::geometry::{Geometry, CACHEGRIND, GEOMETRIES};
use sediment_sim::{layout_from_order, ExecProfile, Recording, SetAssocLru};

/// Errors of [`search`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Inputs that do not make a search: no candidate or no shift, a start that is not a
    /// candidate, a candidate that is not a permutation of the items, a unit in two items.
    #[error("invalid search: {0}")]
    Invalid(String),
    /// Two parallel arrays of different lengths.
    #[error("{what}: {left} entries vs {right}")]
    LengthMismatch {
        /// Which arrays.
        what: &'static str,
        /// Length of the first.
        left: usize,
        /// Length of the second.
        right: usize,
    },
    /// The simulator refused a replay (a geometry, a range outside a function, ...).
    #[error(transparent)]
    Sim(#[from] sediment_sim::Error),
}

/// Parameters of [`search`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Shifts in bytes of the whole layout over which the I1 and iTLB misses are counted
    /// (the first is usually 0).
    pub shifts: Vec<u64>,
    /// More shifts over which they are counted too (those also in [`Params::shifts`] count
    /// once). The default, 8 steps of [`sediment_sim::PAGE_SHIFT_STEP`], puts the code at
    /// every one of the 8 page phases of an 8-set iTLB relative to the libraries, which do not
    /// move: see the module documentation.
    pub tlb_shifts: Vec<u64>,
    /// Alignment of every unit's start.
    pub align: u64,
    /// Most layouts replayed, candidates included.
    pub budget: usize,
    /// Tier cuts tried in step 2, each a list of increasing shares in thousandths of the
    /// executed bytes.
    pub tiers: Vec<Vec<u64>>,
    /// Each item's weight in the profile the candidates were ordered from (its length is the
    /// number of items), or `None` when there is no profile. When given, the pages and lines
    /// for 99% and 99.9% are also counted with the items weighed by it
    /// ([`LayoutMetrics::weighted`], four more targets): the recorded bytes of each item
    /// scaled so the items share the run's executed bytes as they share this weight (items
    /// the run never executed have no shape to scale and count nothing). The density tiers
    /// are cut by the blend of the two weights (each item's mean share); the hot prefix stays
    /// the run's. The cache and iTLB counts are always the replayed run's.
    pub item_weights: Option<Vec<u64>>,
    /// The candidate every climb starts from (its own order or one of its tiered layouts), or
    /// `None` for the cheapest of all. The targets are still the reference candidates' best
    /// values; only this candidate is tried in tiers, and the cheapest layout of all is the
    /// result when the climbs end costlier.
    pub start: Option<usize>,
    /// Threads replaying each layout, the shifts split among them
    /// ([`Recording::replay_parallel`]); the result does not depend on it.
    pub threads: usize,
}

/// Steps of [`sediment_sim::PAGE_SHIFT_STEP`] the I1 and iTLB counts are taken at, the first
/// [`Params::shifts`] of them shifting the whole layout.
const PHASES: u64 = 8;

impl Default for Params {
    fn default() -> Self {
        let step = sediment_sim::PAGE_SHIFT_STEP;
        Self {
            shifts: vec![0, step, 2 * step],
            tlb_shifts: (0..PHASES).map(|k| k * step).collect(),
            align: 16,
            budget: 300,
            tiers: vec![vec![990], vec![995], vec![999], vec![990, 999]],
            item_weights: None,
            start: None,
            threads: 1,
        }
    }
}

/// How many metrics a [`LayoutMetrics`] holds.
pub const METRICS: usize = 12;

/// The simulated metrics of one layout; lower is better for every one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayoutMetrics {
    /// I1 32 KiB 8-way misses, the mean over the shifts and the iTLB shifts.
    pub i1_32k: u64,
    /// I1 16 KiB 4-way misses, as `i1_32k`.
    pub i1_16k: u64,
    /// 64-entry 8-way iTLB misses, the median over the shifts and the iTLB shifts.
    pub itlb_64: u64,
    /// 128-entry 8-way iTLB misses, as `itlb_64`.
    pub itlb_128: u64,
    /// 4 KiB pages holding 99% of the executed bytes, where the layout places the code; so
    /// are the rest.
    pub pages_99: u64,
    /// 4 KiB pages holding 99.9%.
    pub pages_999: u64,
    /// 64-byte lines holding 99%.
    pub lines_99: u64,
    /// 64-byte lines holding 99.9%.
    pub lines_999: u64,
    /// Pages for 99% and 99.9% and lines for 99% and 99.9% with the items weighed by
    /// [`Params::item_weights`]; all 0 without them.
    pub weighted: [u64; 4],
}

impl LayoutMetrics {
    /// Column names, in the order of [`LayoutMetrics::values`].
    pub const NAMES: [&'static str; METRICS] = [
        "I1 32K",
        "I1 16K",
        "iTLB 64",
        "iTLB 128",
        "pages 99%",
        "pages 99.9%",
        "lines 99%",
        "lines 99.9%",
        "pages 99% (profile)",
        "pages 99.9% (profile)",
        "lines 99% (profile)",
        "lines 99.9% (profile)",
    ];

    /// The metrics from an array in the order of [`LayoutMetrics::values`].
    fn from_values(v: [u64; METRICS]) -> Self {
        Self {
            i1_32k: v[0],
            i1_16k: v[1],
            itlb_64: v[2],
            itlb_128: v[3],
            pages_99: v[4],
            pages_999: v[5],
            lines_99: v[6],
            lines_999: v[7],
            weighted: [v[8], v[9], v[10], v[11]],
        }
    }

    /// The metrics as an array.
    pub fn values(&self) -> [u64; METRICS] {
        let w = self.weighted;
        [
            self.i1_32k,
            self.i1_16k,
            self.itlb_64,
            self.itlb_128,
            self.pages_99,
            self.pages_999,
            self.lines_99,
            self.lines_999,
            w[0],
            w[1],
            w[2],
            w[3],
        ]
    }
}

/// What [`search`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuned {
    /// The chosen order of the items.
    pub order: Vec<u32>,
    /// Its metrics.
    pub metrics: LayoutMetrics,
    /// The metrics of every candidate, in input order.
    pub candidates: Vec<LayoutMetrics>,
    /// The best value of each metric over the reference candidates.
    pub targets: LayoutMetrics,
    /// The candidate the chosen layout started from.
    pub start: usize,
    /// The tier cuts (thousandths) applied to that candidate; empty for none.
    pub tiers: Vec<u64>,
    /// Whether the tiers after the first were in first-fetch order
    /// ([`Recording::first_fetches`]) rather than the candidate's.
    pub phased: bool,
    /// Every kept move: (item, from position, to position).
    pub moves: Vec<(u32, usize, usize)>,
    /// Layouts replayed.
    pub evaluations: usize,
}

/// Each metric's ratio to its target (a target of 0 counts as 1).
fn ratios(m: &LayoutMetrics, targets: &LayoutMetrics) -> [f64; METRICS] {
    let (v, t) = (m.values(), targets.values());
    std::array::from_fn(|k| v[k] as f64 / t[k].max(1) as f64)
}

/// The cost of a layout against the targets; see the module documentation.
fn cost(m: &LayoutMetrics, targets: &LayoutMetrics) -> Cost {
    let mut c = Cost::default();
    for (k, r) in ratios(m, targets).into_iter().enumerate() {
        if r > 1.0 {
            if k < RUN_METRICS {
                c.above += 1;
            } else {
                c.above_weighted += 1;
            }
            c.excess += r - 1.0;
        }
        c.sum += r;
    }
    c
}

/// How many of a [`LayoutMetrics`]' values are the recorded run's: the profile-weighted ones
/// follow.
pub const RUN_METRICS: usize = 8;

/// A layout's cost: the run's metrics above their targets, the profile-weighted ones above
/// theirs, the sum of the excess ratios, the sum of all ratios; compared in that order (the
/// recorded run's metrics first: the profile's weights only choose among layouts that hold
/// as many of those).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cost {
    above: u32,
    above_weighted: u32,
    excess: f64,
    sum: f64,
}

fn cheaper(a: Cost, b: Cost) -> bool {
    (a.above, a.above_weighted, a.excess, a.sum) < (b.above, b.above_weighted, b.excess, b.sum)
}

/// Replays layouts of items on a recording.
struct Evaluator<'a> {
    rec: &'a Recording,
    items: &'a [Vec<u32>],
    params: &'a Params,
    /// `params.shifts`, then the iTLB shifts not among them.
    shifts: Vec<u64>,
    /// Each unit's count multiplier for the footprint metrics ([`unit_scales`]).
    scale: Option<Vec<f64>>,
    count: usize,
}

impl Evaluator<'_> {
    fn starts(&self, order: &[u32]) -> Vec<u64> {
        let seq: Vec<u32> = order
            .iter()
            .flat_map(|&i| self.items[i as usize].iter().copied())
            .collect();
        let base = self.rec.starts().first().copied().unwrap_or(0);
        layout_from_order(&seq, self.rec.sizes(), self.params.align, base)
    }

    fn metrics(&mut self, order: &[u32]) -> Result<LayoutMetrics, Error> {
        self.count += 1;
        let starts = self.starts(order);
        // The four set-associative arrays of the geometry table (I1 32K, I1 16K, iTLB 64,
        // iTLB 128) at every shift and iTLB shift.
        let mut arrays = Vec::with_capacity(self.shifts.len());
        for _ in 0..self.shifts.len() {
            arrays.push(
                GEOMETRIES[..CACHEGRIND]
                    .iter()
                    .map(Geometry::array)
                    .collect::<Result<Vec<SetAssocLru>, _>>()?,
            );
        }
        self.rec
            .replay_parallel(&starts, &self.shifts, &mut arrays, self.params.threads)?;
        let misses =
            |a: usize| -> Vec<u64> { arrays.iter().map(|s| s[a].stats().misses).collect() };
        let tlb = |a: usize| median(misses(a));
        let i1 = |a: usize| mean(&misses(a));
        // Pages and lines for 99% and 99.9%, the run's then the profile's, where the layout
        // places the code.
        let mut fp = [0; 8];
        fp[..4].copy_from_slice(&footprints(&self.rec.exec_profile(&starts)?)?);
        if let Some(scale) = &self.scale {
            let weighted = self.rec.exec_profile_scaled(&starts, Some(scale))?;
            fp[4..].copy_from_slice(&footprints(&weighted)?);
        }
        let fp = |k: usize| fp[k];
        Ok(LayoutMetrics {
            i1_32k: i1(0),
            i1_16k: i1(1),
            itlb_64: tlb(2),
            itlb_128: tlb(3),
            pages_99: fp(0),
            pages_999: fp(1),
            lines_99: fp(2),
            lines_999: fp(3),
            weighted: [fp(4), fp(5), fp(6), fp(7)],
        })
    }
}

/// The middle of `v` (the upper one of an even count); 0 for none.
fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The mean of `v`, rounded to the nearest; 0 for none.
fn mean(v: &[u64]) -> u64 {
    let n = v.len() as u64;
    if n == 0 {
        return 0;
    }
    (v.iter().sum::<u64>() + n / 2) / n
}

/// Pages for 99% and 99.9% of a profile's executed bytes, then lines.
fn footprints(profile: &ExecProfile) -> Result<[u64; 4], Error> {
    let (p, l) = (profile.footprint(4096)?, profile.footprint(64)?);
    Ok([p.p99, p.p999, l.p99, l.p999])
}

/// One layout of the search with what the simulator said of it.
#[derive(Debug, Clone)]
struct Layout {
    order: Vec<u32>,
    metrics: LayoutMetrics,
    cost: Cost,
    /// The candidate it came from and the tier cuts applied to it.
    start: usize,
    tiers: Vec<u64>,
    /// Whether the tiers after the first are in first-fetch order.
    phased: bool,
    /// The tier of every item when `tiers` is not empty (shared by the plain and the phased
    /// start of one cut): the climb moves an item only inside its tier's block.
    tier: Option<Rc<[usize]>>,
    /// Moves kept since then: (item, from position, to position).
    moves: Vec<(u32, usize, usize)>,
}

/// Refines the best of `candidates` (each a permutation of `0..items.len()`), with the targets
/// taken from the candidates whose `reference` flag is set (all of them if none is). See the
/// module documentation.
pub fn search(
    rec: &Recording,
    items: &[Vec<u32>],
    candidates: &[Vec<u32>],
    reference: &[bool],
    params: &Params,
) -> Result<Tuned, Error> {
    check(rec, items, candidates, reference, params)?;
    let mut shifts = params.shifts.clone();
    for d in &params.tlb_shifts {
        if !shifts.contains(d) {
            shifts.push(*d);
        }
    }
    // The items' executed bytes in the run: for the scales here, the tiers and the climb.
    let weights = item_weights(rec, items);
    let scale = params
        .item_weights
        .as_deref()
        .map(|w| unit_scales(rec, items, &weights, w));
    let mut ev = Evaluator {
        rec,
        items,
        params,
        shifts,
        scale,
        count: 0,
    };
    let measured: Vec<LayoutMetrics> = candidates
        .iter()
        .map(|c| ev.metrics(c))
        .collect::<Result<_, _>>()?;
    let any_reference = reference.iter().any(|&r| r);
    let mut best_of = [u64::MAX; METRICS];
    for (m, &r) in measured.iter().zip(reference) {
        if r || !any_reference {
            for (b, v) in best_of.iter_mut().zip(m.values()) {
                *b = (*b).min(v);
            }
        }
    }
    let targets = LayoutMetrics::from_values(best_of);
    let mut seen: HashSet<Vec<u32>> = candidates.iter().cloned().collect();
    let mut starts: Vec<Layout> = candidates
        .iter()
        .zip(&measured)
        .enumerate()
        .map(|(i, (c, m))| Layout {
            order: c.clone(),
            metrics: *m,
            cost: cost(m, &targets),
            start: i,
            tiers: Vec::new(),
            phased: false,
            tier: None,
            moves: Vec::new(),
        })
        .collect();

    // Step 2: every candidate in density tiers, each tier in the candidate's order or, after
    // the first, in first-fetch order.
    let total: u128 = weights.iter().sum();
    let tier_weights = match params.item_weights.as_deref() {
        Some(w) => blend(&weights, w),
        None => weights.clone(),
    };
    let tier_total: u128 = tier_weights.iter().sum();
    let density_rank = density_order(rec, items, &tier_weights);
    let first = item_first_fetches(rec, items);
    let startable = |ci: usize| params.start.map_or(true, |s| s == ci);
    for (ci, c) in candidates.iter().enumerate() {
        if !startable(ci) {
            continue;
        }
        for cuts in &params.tiers {
            if ev.count >= params.budget {
                break;
            }
            let tier: Rc<[usize]> = tier_of(&density_rank, &tier_weights, tier_total, cuts).into();
            let mut plain = c.clone();
            // Stable: each tier keeps the candidate's order.
            plain.sort_by_key(|&i| tier[i as usize]);
            let mut phased = plain.clone();
            phased.sort_by_key(|&i| {
                let t = tier[i as usize];
                (t, if t == 0 { 0 } else { first[i as usize] })
            });
            for (variant, is_phased) in [(plain, false), (phased, true)] {
                if ev.count >= params.budget {
                    break;
                }
                if !seen.insert(variant.clone()) {
                    continue;
                }
                let m = ev.metrics(&variant)?;
                starts.push(Layout {
                    order: variant,
                    metrics: m,
                    cost: cost(&m, &targets),
                    start: ci,
                    tiers: cuts.clone(),
                    phased: is_phased,
                    tier: Some(Rc::clone(&tier)),
                    moves: Vec::new(),
                });
            }
        }
    }

    // Step 3: hill climbing from the cheapest start.
    let startable_layout = |l: &Layout| startable(l.start);
    let first = cheapest(&starts, startable_layout).expect("at least one candidate");
    let mut climb = Climb {
        ev: &mut ev,
        seen: &mut seen,
        weights: &weights,
        total,
        targets: &targets,
    };
    let mut best = starts[first].clone();
    climb.run(&mut best)?;
    // A climb that converged with budget left and a metric still above its target: climb
    // again from the cheapest start that meets that metric.
    if climb.ev.count < params.budget {
        if let Some(second) =
            second_start(&starts, first, &best.metrics, &targets, startable_layout)
        {
            let mut other = starts[second].clone();
            climb.run(&mut other)?;
            if cheaper(other.cost, best.cost) {
                best = other;
            }
        }
    }
    // A forced start's climbs can end costlier than a layout they could not start from: the
    // refined layout is never costlier than the cheapest of steps 1 and 2.
    let fallback = cheapest(&starts, |_| true).expect("at least one candidate");
    if cheaper(starts[fallback].cost, best.cost) {
        best = starts[fallback].clone();
    }
    Ok(Tuned {
        order: best.order,
        metrics: best.metrics,
        candidates: measured,
        targets,
        start: best.start,
        tiers: best.tiers,
        phased: best.phased,
        moves: best.moves,
        evaluations: ev.count,
    })
}

/// The cheapest of `starts` that `keep` accepts, the earlier of equals.
fn cheapest(starts: &[Layout], keep: impl Fn(&Layout) -> bool) -> Option<usize> {
    (0..starts.len())
        .filter(|&i| keep(&starts[i]))
        .reduce(|b, i| {
            if cheaper(starts[i].cost, starts[b].cost) {
                i
            } else {
                b
            }
        })
}

/// Where a second climb starts when the first, from `starts[first]`, ended at `reached` with a
/// metric above its target: the cheapest start that meets the worst such metric, if it is not
/// the first one.
fn second_start(
    starts: &[Layout],
    first: usize,
    reached: &LayoutMetrics,
    targets: &LayoutMetrics,
    allowed: impl Fn(&Layout) -> bool,
) -> Option<usize> {
    let worst = worst_metric(reached, targets)?;
    let meets = |l: &Layout| allowed(l) && l.metrics.values()[worst] <= targets.values()[worst];
    cheapest(starts, meets).filter(|&i| i != first)
}

/// The metric with the largest ratio to its target when that ratio is above 1 (the first
/// such, in [`LayoutMetrics::NAMES`] order), else `None`.
fn worst_metric(m: &LayoutMetrics, targets: &LayoutMetrics) -> Option<usize> {
    let r = ratios(m, targets);
    let k = (0..METRICS).fold(0, |b, k| if r[k] > r[b] { k } else { b });
    (r[k] > 1.0).then_some(k)
}

/// Step 3 of the search: moves of single items inside a layout's hot prefix.
struct Climb<'a, 'b> {
    ev: &'a mut Evaluator<'b>,
    seen: &'a mut HashSet<Vec<u32>>,
    weights: &'a [u128],
    total: u128,
    targets: &'a LayoutMetrics,
}

impl Climb<'_, '_> {
    /// Hill climbing from `at` until a pass changes nothing or the budget of layouts has been
    /// replayed in all: the items of the hot prefix (99.9% of the executed bytes), heaviest
    /// first, each tried 1, 4 and 16 positions earlier and later, keeping the first move that
    /// lowers the cost.
    fn run(&mut self, at: &mut Layout) -> Result<(), Error> {
        let prefix = hot_prefix(&at.order, self.weights, self.total);
        // Each item's range of positions: the hot prefix, and inside it its tier's block
        // (the blocks are contiguous in a tiered start, and moves inside them keep them so).
        let mut range = vec![(0, prefix.saturating_sub(1)); at.order.len()];
        if let Some(tier) = &at.tier {
            let mut block: Vec<(usize, usize)> = Vec::new();
            for (pos, &i) in at.order.iter().enumerate() {
                let t = tier[i as usize];
                if block.len() <= t {
                    block.resize(t + 1, (pos, pos));
                }
                block[t].1 = pos;
            }
            for &i in &at.order {
                let (lo, hi) = block[tier[i as usize]];
                let r = &mut range[i as usize];
                *r = (lo.max(r.0), hi.min(r.1));
            }
        }
        let mut movers: Vec<u32> = at.order[..prefix].to_vec();
        movers.sort_by_key(|&i| (std::cmp::Reverse(self.weights[i as usize]), i));
        loop {
            let mut changed = false;
            for &item in &movers {
                for d in [1i64, -1, 4, -4, 16, -16] {
                    if self.ev.count >= self.ev.params.budget {
                        return Ok(());
                    }
                    let Some(from) = at.order.iter().position(|&x| x == item) else {
                        continue;
                    };
                    let (lo, hi) = range[item as usize];
                    if lo > hi {
                        continue;
                    }
                    let to = (from as i64 + d).clamp(lo as i64, hi as i64) as usize;
                    if to == from {
                        continue;
                    }
                    let mut next = at.order.clone();
                    let moved = next.remove(from);
                    next.insert(to, moved);
                    if !self.seen.insert(next.clone()) {
                        continue;
                    }
                    let m = self.ev.metrics(&next)?;
                    let k = cost(&m, self.targets);
                    if cheaper(k, at.cost) {
                        at.moves.push((item, from, to));
                        (at.order, at.metrics, at.cost) = (next, m, k);
                        changed = true;
                        break;
                    }
                }
            }
            if !changed {
                return Ok(());
            }
        }
    }
}

fn check(
    rec: &Recording,
    items: &[Vec<u32>],
    candidates: &[Vec<u32>],
    reference: &[bool],
    params: &Params,
) -> Result<(), Error> {
    if candidates.is_empty() || params.shifts.is_empty() {
        return Err(Error::Invalid("no candidate order or no shift".into()));
    }
    if params.start.is_some_and(|s| s >= candidates.len()) {
        return Err(Error::Invalid("the start is not a candidate".into()));
    }
    if reference.len() != candidates.len() {
        return Err(Error::LengthMismatch {
            what: "reference flags and candidates",
            left: reference.len(),
            right: candidates.len(),
        });
    }
    if let Some(w) = params
        .item_weights
        .as_ref()
        .filter(|w| w.len() != items.len())
    {
        return Err(Error::LengthMismatch {
            what: "item weights and items",
            left: w.len(),
            right: items.len(),
        });
    }
    let mut owner = vec![false; rec.units()];
    for item in items {
        for &u in item {
            match owner.get_mut(u as usize) {
                Some(o) if !*o => *o = true,
                _ => {
                    return Err(Error::Invalid(format!(
                        "unit {u} is out of range or in two items"
                    )))
                }
            }
        }
    }
    for (k, c) in candidates.iter().enumerate() {
        let mut seen = vec![false; items.len()];
        let ok = c.len() == items.len()
            && c.iter().all(|&i| {
                seen.get_mut(i as usize)
                    .is_some_and(|s| !std::mem::replace(s, true))
            });
        if !ok {
            return Err(Error::Invalid(format!(
                "candidate {k} is not a permutation of the {} items",
                items.len()
            )));
        }
    }
    Ok(())
}

/// Executed bytes of every item over the whole run.
fn item_weights(rec: &Recording, items: &[Vec<u32>]) -> Vec<u128> {
    let unit = rec.unit_weights();
    items
        .iter()
        .map(|i| i.iter().map(|&u| unit[u as usize]).sum())
        .collect()
}

/// How much [`Params::item_weights`] scales each unit's recorded counts: the units of
/// item `i` by `R * w[i] / W / r[i]`, where `r[i]` is the item's executed bytes in the run
/// ([`item_weights`]), `R` their sum over the items and `W` the sum of `w` over the items the
/// run executed; so the items keep the run's total and share it as `w` does. Units in no item keep their
/// counts (scale 1), as do all units when `W` or `R` is 0. Every scale is then multiplied by
/// 16 so the rounding of small scaled counts loses little (the footprints compare shares).
fn unit_scales(rec: &Recording, items: &[Vec<u32>], r: &[u128], w: &[u64]) -> Vec<f64> {
    let ran = |i: usize| r[i] > 0;
    let big_r: u128 = r.iter().sum();
    let big_w: u128 = (0..items.len())
        .filter(|&i| ran(i))
        .map(|i| u128::from(w[i]))
        .sum();
    let mut scale = vec![16.0; rec.units()];
    if big_r == 0 || big_w == 0 {
        return scale;
    }
    for (i, item) in items.iter().enumerate() {
        let s = if ran(i) {
            16.0 * big_r as f64 * w[i] as f64 / big_w as f64 / r[i] as f64
        } else {
            0.0
        };
        for &u in item {
            scale[u as usize] = s;
        }
    }
    scale
}

/// The first fetch of every item ([`Recording::first_fetches`] of its units, the earliest).
fn item_first_fetches(rec: &Recording, items: &[Vec<u32>]) -> Vec<u64> {
    let unit = rec.first_fetches();
    items
        .iter()
        .map(|i| {
            i.iter()
                .map(|&u| unit[u as usize])
                .min()
                .unwrap_or(u64::MAX)
        })
        .collect()
}

/// Each item's weight as the mean of its share of the run's executed bytes (`run`) and of
/// the profile's weight (`profile`), in units of 2^-60 of the whole (each sum of shares is 1,
/// so the blend sums to about 2^60). A share of 0 in both stays 0.
fn blend(run: &[u128], profile: &[u64]) -> Vec<u128> {
    let r: u128 = run.iter().sum();
    let p: u128 = profile.iter().map(|&w| u128::from(w)).sum();
    let share = |w: u128, of: u128| if of == 0 { 0.0 } else { w as f64 / of as f64 };
    run.iter()
        .zip(profile)
        .map(|(&a, &b)| {
            let mean = (share(a, r) + share(u128::from(b), p)) / 2.0;
            (mean * (1u64 << 60) as f64) as u128
        })
        .collect()
}

/// Items by executed bytes per byte, densest first (ties by index).
fn density_order(rec: &Recording, items: &[Vec<u32>], weights: &[u128]) -> Vec<u32> {
    let size: Vec<u128> = items
        .iter()
        .map(|i| i.iter().map(|&u| u128::from(rec.sizes()[u as usize])).sum())
        .collect();
    let mut idx: Vec<u32> = (0..items.len() as u32).collect();
    // a/sa > b/sb  <=>  a*sb > b*sa (sizes are non-zero; saturating keeps it total).
    idx.sort_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        let l = weights[a].saturating_mul(size[b].max(1));
        let r = weights[b].saturating_mul(size[a].max(1));
        r.cmp(&l).then(a.cmp(&b))
    });
    idx
}

/// The tier of every item: walking `rank` (densest first), tier `k` holds the items taken
/// while the executed bytes before them are below `cuts[k]` thousandths of `total`; items
/// past the last cut, and items that never ran, are in tier `cuts.len()`.
fn tier_of(rank: &[u32], weights: &[u128], total: u128, cuts: &[u64]) -> Vec<usize> {
    let target =
        |share: u64| total / 1000 * u128::from(share) + total % 1000 * u128::from(share) / 1000;
    let mut tier = vec![cuts.len(); weights.len()];
    let (mut sum, mut k) = (0u128, 0usize);
    for &i in rank {
        while k < cuts.len() && sum >= target(cuts[k]) {
            k += 1;
        }
        if k == cuts.len() || weights[i as usize] == 0 {
            break;
        }
        tier[i as usize] = k;
        sum += weights[i as usize];
    }
    tier
}

/// Length of the shortest prefix of `order` holding 99.9% of the executed bytes.
fn hot_prefix(order: &[u32], weights: &[u128], total: u128) -> usize {
    let target = total - total / 1000;
    let mut sum = 0u128;
    for (k, &i) in order.iter().enumerate() {
        sum += weights[i as usize];
        if sum >= target {
            return k + 1;
        }
    }
    order.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Three 2 KiB functions; the trace alternates between 0 and 2 (hot) and runs 1 once.
    // Laid out 0, 1, 2 the hot pair spans two pages and conflicts nowhere in a 32K cache but
    // needs 2 pages for 99%; candidate 1 (0, 2, 1) packs the hot pair into one page.
    fn recording() -> Recording {
        let mut r = Recording::new(
            vec![0x10000, 0x10800, 0x11000],
            vec![0x800, 0x800, 0x800],
            1 << 20,
        )
        .unwrap();
        r.push(0x10800, 0x10a00);
        for _ in 0..200 {
            r.push(0x10000, 0x10400);
            r.push(0x11000, 0x11400);
        }
        r
    }

    fn items() -> Vec<Vec<u32>> {
        vec![vec![0], vec![1], vec![2]]
    }

    /// Whether the refined layout is at or below the target of every metric.
    fn meets_targets(r: &Tuned) -> bool {
        let t = r.targets.values();
        r.metrics.values().iter().zip(t).all(|(m, t)| *m <= t)
    }

    #[test]
    fn profile_weights_add_footprint_targets() {
        let rec = recording();
        // The run executes 1 once; the profile says 0 and 1 are the hot pair, 2 nearly cold.
        let weighted = Params {
            budget: 40,
            item_weights: Some(vec![1000, 1000, 1]),
            ..Params::default()
        };
        let cands = vec![vec![0, 2, 1], vec![1, 2, 0]];
        let r = search(&rec, &items(), &cands, &[true, true], &weighted).unwrap();
        // [0, 2, 1]: the run's pair 0, 2 shares a page, the profile's pair 0, 1 does not.
        assert_eq!(r.candidates[0].pages_99, 1);
        assert_eq!(r.candidates[0].weighted[0], 2);
        // [1, 2, 0]: 1 and 0 are a page apart, so are 2 and 0.
        assert_eq!(
            (r.candidates[1].pages_99, r.candidates[1].weighted[0]),
            (2, 2)
        );
        assert!(meets_targets(&r), "{r:?}");
        // Without weights those columns are 0.
        let run = Params {
            item_weights: None,
            ..weighted.clone()
        };
        let r = search(&rec, &items(), &cands, &[true, true], &run).unwrap();
        assert_eq!(r.candidates[0].weighted, [0; 4]);
        // The scaled items share the run's executed bytes (times 16) as the weights do.
        let run_w = item_weights(&rec, &items());
        let scale = unit_scales(&rec, &items(), &run_w, &[1000, 1000, 1]);
        let w: Vec<u128> = (0..3)
            .map(|i| (run_w[i] as f64 * scale[i]).round() as u128)
            .collect();
        let total: u128 = w.iter().sum();
        assert!(
            total.abs_diff(16 * run_w.iter().sum::<u128>()) <= 3,
            "{w:?}"
        );
        assert!(w[0].abs_diff(w[1]) <= 1 && w[0] > 900 * w[2], "{w:?}");
        // One weight per item, or an error.
        let bad = Params {
            item_weights: Some(vec![1, 1]),
            ..weighted
        };
        assert!(matches!(
            search(&rec, &items(), &cands, &[true, true], &bad),
            Err(Error::LengthMismatch { .. })
        ));
    }

    #[test]
    fn picks_the_candidate_that_beats_the_targets() {
        let rec = recording();
        let params = Params {
            budget: 40,
            ..Params::default()
        };
        let cands = vec![vec![0, 1, 2], vec![1, 2, 0]];
        let r = search(&rec, &items(), &cands, &[true, true], &params).unwrap();
        // The hot pair ends up adjacent, in one page, whatever the start.
        let pos = |x: u32| r.order.iter().position(|&i| i == x).unwrap() as i64;
        assert_eq!((pos(0) - pos(2)).abs(), 1, "{:?}", r.order);
        assert_eq!(r.metrics.pages_99, 1);
        assert_eq!(r.candidates[0].pages_99, 2);
        // Never worse than the best candidate on its own cost.
        assert!(meets_targets(&r), "{r:?}");
        assert!(r.evaluations <= 40);
        // Deterministic.
        assert_eq!(
            search(&rec, &items(), &cands, &[true, true], &params).unwrap(),
            r
        );
    }

    // A forced start: (1, 2, 0) spreads the hot pair over two pages, (0, 2, 1) packs it into
    // one and is the search's own choice; forced, the climb starts from the first.
    #[test]
    fn a_forced_start_is_the_only_one_climbed_from() {
        let rec = recording();
        let cands = vec![vec![1, 2, 0], vec![0, 2, 1]];
        let run = |start| {
            let params = Params {
                budget: 40,
                start,
                ..Params::default()
            };
            search(&rec, &items(), &cands, &[true, true], &params)
        };
        let free = run(None).unwrap();
        assert_eq!((free.start, free.metrics.pages_99), (1, 1));
        let forced = run(Some(0)).unwrap();
        // From the worse start, the tiers or the climb still gather the pair on one page.
        assert_eq!(
            (forced.start, forced.metrics.pages_99),
            (0, 1),
            "{forced:?}"
        );
        // The targets are still every candidate's best.
        assert_eq!(forced.targets, free.targets);
        assert!(matches!(run(Some(2)), Err(Error::Invalid(_))));
        // With no budget left to tier or climb, the forced start is costlier than the other
        // candidate: that one is the result.
        let params = Params {
            budget: 2,
            start: Some(0),
            ..Params::default()
        };
        let spent = search(&rec, &items(), &cands, &[true, true], &params).unwrap();
        assert_eq!(
            (spent.start, spent.metrics.pages_99, spent.evaluations),
            (1, 1, 2),
            "{spent:?}"
        );
        assert_eq!(spent.order, cands[1]);
    }

    // Tiers: candidate (0, 1, 2) puts the cold item 1 between the hot ones (two pages for
    // 99%); the 99% hot set {0, 2} put first gives one page.
    #[test]
    fn hot_set_first_is_tried() {
        let rec = recording();
        let params = Params {
            budget: 10,
            ..Params::default()
        };
        let r = search(&rec, &items(), &[vec![0, 1, 2]], &[true], &params).unwrap();
        assert_eq!(r.metrics.pages_99, 1);
        assert_eq!((r.start, r.tiers.as_slice()), (0, &[990][..]));
    }

    // Tiers by density: with cuts at 50% and 90% of 100 bytes executed as 60, 30, 9, 1 (items
    // 3, 1, 0, 2 by density), the first item alone reaches 50%, the next reaches 90%.
    #[test]
    fn tiers_cut_by_executed_bytes() {
        let weights = [9u128, 30, 1, 60, 0];
        let rank = [3u32, 1, 0, 2, 4];
        assert_eq!(
            tier_of(&rank, &weights, 100, &[500, 900]),
            vec![2, 1, 2, 0, 2]
        );
        assert_eq!(tier_of(&rank, &weights, 100, &[990]), vec![0, 0, 1, 0, 1]);
    }

    // The blend is the mean of the two shares: the run 3:1, the profile 1:1 over items 1 and
    // 2, so 3/8, 3/8, 1/4 and nothing for an item neither has.
    #[test]
    fn blend_is_the_mean_of_the_shares() {
        let b = blend(&[3, 1, 0, 0], &[0, 5, 5, 0]);
        let unit = (1u64 << 60) as f64;
        let share: Vec<f64> = b.iter().map(|&w| w as f64 / unit).collect();
        assert_eq!(share, vec![0.375, 0.375, 0.25, 0.0]);
        // A side with no weight at all contributes nothing.
        assert_eq!(blend(&[0, 0], &[0, 0]), vec![0, 0]);
    }

    // Hill climbing: nine 4 KiB functions whose hot first line all map to set 0 of the 32 KiB
    // 8-way cache, plus a 64-byte one, run round robin: ten lines in one set of eight ways
    // miss every time. No tier helps (the small one is densest and goes first, moving all the
    // others alike); moving it one place later puts the other eight lines in set 1.
    #[test]
    fn hill_climbing_breaks_a_set_conflict() {
        let starts: Vec<u64> = (0..10).map(|i| 0x10_0000 + i * 4096).collect();
        let mut sizes = vec![4096; 10];
        sizes[9] = 64;
        let mut rec = Recording::new(starts.clone(), sizes, 1 << 20).unwrap();
        for _ in 0..200 {
            for &s in &starts {
                rec.push(s, s + 16);
            }
        }
        let items: Vec<Vec<u32>> = (0..10).map(|i| vec![i]).collect();
        let params = Params {
            budget: 100,
            ..Params::default()
        };
        let r = search(&rec, &items, &[(0..10).collect()], &[true], &params).unwrap();
        assert_eq!(r.candidates[0].i1_32k, 2000);
        assert!(!r.moves.is_empty());
        assert!(r.metrics.i1_32k <= 10, "{:?} {:?}", r.metrics, r.order);
    }

    // Phased tiers: 72 one-page functions run in eight phases of nine, the phases interleaved
    // in the candidate order (function i in phase i % 8), so each phase's nine pages share
    // one set of the 8-set, 8-way iTLB and every fetch misses. A hot function (item 72, most
    // of the executed bytes) makes the first tier alone; the rest in first-fetch order puts
    // each phase on nine consecutive pages, which no set holds more than two of. The
    // candidate's order inside the tiers does not help, and with a budget of only the starts
    // the phased one is chosen.
    #[test]
    fn later_tiers_in_first_fetch_order_follow_the_phases() {
        let starts: Vec<u64> = (0..73).map(|i| 0x40_0000 + i * 4096).collect();
        let mut rec = Recording::new(starts.clone(), vec![4096; 73], 1 << 20).unwrap();
        for _ in 0..100 {
            rec.push(starts[72], starts[72] + 4096);
        }
        for phase in 0..8 {
            for _ in 0..50 {
                for i in (phase..72).step_by(8) {
                    rec.push(starts[i], starts[i] + 16);
                }
            }
        }
        let items: Vec<Vec<u32>> = (0..73).map(|i| vec![i]).collect();
        let params = Params {
            budget: 3,
            tiers: vec![vec![800]],
            ..Params::default()
        };
        let r = search(&rec, &items, &[(0..73).collect()], &[true], &params).unwrap();
        // Every phase fetch misses, 8 x 50 x 9; the hot function's first fetch covers two
        // pages at most shifts (a shift is a page and 80 bytes).
        assert_eq!(r.candidates[0].itlb_64, 8 * 50 * 9 + 2);
        assert_eq!((r.tiers.as_slice(), r.phased), (&[800][..], true));
        let expected: Vec<u32> = std::iter::once(72)
            .chain((0..8).flat_map(|p| (p..72).step_by(8)))
            .collect();
        assert_eq!(r.order, expected);
        // Each page's first fetch only.
        assert!(r.metrics.itlb_64 <= 72 + 2, "{:?}", r.metrics);
        assert_eq!(r.evaluations, 3);
    }

    // The climb moves an item only inside its tier's block: from a tiered start, every kept
    // move stays between the first and last position of the moved item's tier.
    #[test]
    fn the_climb_keeps_items_in_their_tiers() {
        let starts: Vec<u64> = (0..10).map(|i| 0x10_0000 + i * 4096).collect();
        let mut sizes = vec![4096; 10];
        sizes[9] = 64;
        let mut rec = Recording::new(starts.clone(), sizes, 1 << 20).unwrap();
        for round in 0..200u64 {
            for (k, &s) in starts.iter().enumerate() {
                // Items 0..5 hot, 5..9 warm (every fourth round), 9 hot and small.
                if k < 5 || k == 9 || round % 4 == 0 {
                    rec.push(s, s + 16);
                }
            }
        }
        let items: Vec<Vec<u32>> = (0..10).map(|i| vec![i]).collect();
        let params = Params {
            budget: 200,
            tiers: vec![vec![900]],
            ..Params::default()
        };
        let r = search(&rec, &items, &[(0..10).collect()], &[true], &params).unwrap();
        assert!(!r.tiers.is_empty(), "premise: a tiered start, {r:?}");
        assert!(!r.moves.is_empty(), "premise: moves were kept, {r:?}");
        let weights = item_weights(&rec, &items);
        let total = weights.iter().sum();
        let tier = tier_of(
            &density_order(&rec, &items, &weights),
            &weights,
            total,
            &r.tiers,
        );
        let hot = tier.iter().filter(|&&t| t == 0).count();
        for &(item, from, to) in &r.moves {
            let block = if tier[item as usize] == 0 {
                0..hot
            } else {
                hot..10
            };
            assert!(block.contains(&from) && block.contains(&to), "{r:?}");
        }
    }

    // The iTLB medians cover every page phase: one hot 4 KiB function and sixteen hot library
    // pages, eight in each of sets 0 and 1 of the 8-set iTLB, run round robin. The function in
    // set 0 or 1 makes nine pages of one 8-way set, and every fetch of them misses (909 in
    // all); anywhere else only the first fetch of each page does (18, counting one run of a
    // cold 8 KiB function). Placed first, the function thrashes at two of the three default
    // shifts (a page each) and the median says 909; after the cold one, at none. Over all
    // eight page phases each order thrashes at two, and the medians agree.
    #[test]
    fn itlb_medians_cover_every_page_phase() {
        let mut rec =
            Recording::new(vec![0x20_0000, 0x20_1000], vec![4096, 8192], 1 << 20).unwrap();
        for _ in 0..100 {
            rec.push(0x20_0000, 0x20_0010);
            for k in 0..16 {
                let lib = 0x4000_0000 + (k / 2 * 8 + k % 2) * 4096;
                rec.push(lib, lib + 16);
            }
        }
        rec.push(0x20_1000, 0x20_1010);
        let cands = [vec![0, 1], vec![1, 0]];
        let itlb = |params: Params| -> Vec<u64> {
            let params = Params {
                budget: 2,
                ..params
            };
            let r = search(&rec, &[vec![0], vec![1]], &cands, &[true, true], &params).unwrap();
            r.candidates.iter().map(|m| m.itlb_64).collect()
        };
        let three = Params {
            tlb_shifts: vec![],
            ..Params::default()
        };
        assert_eq!(itlb(three), vec![909, 18]);
        assert_eq!(itlb(Params::default()), vec![18, 18]);
    }

    // The I1 counts are the mean over every page phase: one hot 16-byte function and 32 hot
    // library lines, eight in each of L1i sets 3, 5, 6 and 7 of the 32 KiB cache, run round
    // robin. Shifted by k pages and 80 bytes, the function sits in set 0, 1, 2, 3, 5, 6, 7, 8
    // for k = 0..8: a ninth line of a full 8-way set at k = 3 to 6, where every fetch of that
    // set misses (900, and 24 first fetches of the other sets' lines), and only the 33 first
    // fetches elsewhere. The mean is halfway.
    #[test]
    fn i1_counts_are_the_mean_over_the_page_phases() {
        let mut rec = Recording::new(vec![0x20_0000], vec![16], 1 << 20).unwrap();
        for _ in 0..100 {
            rec.push(0x20_0000, 0x20_0010);
            for set in [3, 5, 6, 7] {
                for way in 0..8 {
                    let lib = 0x4000_0000 + way * 4096 + set * 64;
                    rec.push(lib, lib + 16);
                }
            }
        }
        let params = Params {
            budget: 1,
            ..Params::default()
        };
        let i1 = search(&rec, &[vec![0]], &[vec![0]], &[true], &params)
            .unwrap()
            .metrics
            .i1_32k;
        // (4 x 924 + 4 x 33) / 8 = 478.5, rounded up.
        assert_eq!(i1, 479);
    }

    // Footprints where the code is placed: a 64-byte function run whole, placed at a line's
    // start, fills one line (shifted by a page and 80 bytes it would straddle two).
    #[test]
    fn footprints_count_where_the_code_is_placed() {
        let mut rec = Recording::new(vec![0x10_0000], vec![64], 1 << 20).unwrap();
        rec.push(0x10_0000, 0x10_0040);
        let params = Params {
            budget: 1,
            ..Params::default()
        };
        let r = search(&rec, &[vec![0]], &[vec![0]], &[true], &params).unwrap();
        assert_eq!((r.metrics.lines_99, r.metrics.pages_99), (1, 1));
    }

    // The cost counts the metrics above their targets first: one metric 50% above beats two
    // each 1% above, and a layout equal to the targets costs nothing above.
    #[test]
    fn cost_counts_the_metrics_above_target_first() {
        let targets = LayoutMetrics::from_values([100, 100, 10, 10, 20, 20, 500, 500, 0, 0, 0, 0]);
        let one_far = LayoutMetrics {
            i1_32k: 150,
            ..targets
        };
        let two_near = LayoutMetrics {
            pages_99: 21,
            lines_99: 505,
            ..targets
        };
        let (a, b) = (cost(&one_far, &targets), cost(&two_near, &targets));
        assert_eq!((a.above, b.above), (1, 2));
        assert!(cheaper(a, b) && !cheaper(b, a));
        assert_eq!(cost(&targets, &targets).above, 0);
        assert!(cheaper(cost(&targets, &targets), a));
        // Below target on one metric, equal elsewhere: cheaper than equal everywhere.
        let better = LayoutMetrics {
            itlb_64: 9,
            ..targets
        };
        assert!(cheaper(cost(&better, &targets), cost(&targets, &targets)));
        // The metric a second climb must meet: the one furthest above its target.
        assert_eq!(worst_metric(&one_far, &targets), Some(0));
        assert_eq!(worst_metric(&two_near, &targets), Some(4));
        assert_eq!(worst_metric(&better, &targets), None);
        // The profile-weighted footprints count after the run's metrics: two of them far above
        // their targets cost less than one of the run's just above its own.
        let targets =
            LayoutMetrics::from_values([100, 100, 10, 10, 20, 20, 500, 500, 20, 20, 500, 500]);
        let weighted_far = LayoutMetrics {
            weighted: [40, 20, 900, 500],
            ..targets
        };
        let run_near = LayoutMetrics {
            lines_99: 501,
            ..targets
        };
        let (w, r) = (cost(&weighted_far, &targets), cost(&run_near, &targets));
        assert_eq!(
            (w.above, w.above_weighted, r.above, r.above_weighted),
            (0, 2, 1, 0)
        );
        assert!(cheaper(w, r) && !cheaper(r, w));
        assert!(cheaper(cost(&targets, &targets), w));
    }

    // The second climb's start: the first climb from start 0 ended with pages above target
    // (and lines, less far); start 1 is cheaper than 2 but misses the pages target too, so the
    // second climb starts from 2, the cheapest that meets it. A first climb that met every
    // target, or pages met only by the first start, gives no second climb.
    #[test]
    fn second_climb_starts_where_the_worst_metric_is_met() {
        let targets = LayoutMetrics::from_values([100, 100, 10, 10, 20, 20, 500, 500, 0, 0, 0, 0]);
        let layout = |i: usize, m: LayoutMetrics| Layout {
            order: vec![i as u32],
            metrics: m,
            cost: cost(&m, &targets),
            start: i,
            tiers: Vec::new(),
            phased: false,
            tier: None,
            moves: Vec::new(),
        };
        let starts = [
            layout(
                0,
                LayoutMetrics {
                    pages_99: 22,
                    ..targets
                },
            ),
            layout(
                1,
                LayoutMetrics {
                    pages_99: 21,
                    ..targets
                },
            ),
            layout(
                2,
                LayoutMetrics {
                    i1_32k: 130,
                    i1_16k: 120,
                    ..targets
                },
            ),
        ];
        assert_eq!(cheapest(&starts, |_| true), Some(1));
        let reached = LayoutMetrics {
            pages_99: 24,
            lines_99: 510,
            ..targets
        };
        assert_eq!(
            second_start(&starts, 0, &reached, &targets, |_| true),
            Some(2)
        );
        assert_eq!(second_start(&starts, 2, &reached, &targets, |_| true), None);
        // Only the starts `allowed` accepts (a forced start's own layouts) are climbed from.
        assert_eq!(
            second_start(&starts, 0, &reached, &targets, |l| l.start != 2),
            None
        );
        assert_eq!(second_start(&starts, 0, &targets, &targets, |_| true), None);
        // Lines furthest above: start 1 is the cheapest meeting them.
        let lines = LayoutMetrics {
            lines_99: 650,
            ..reached
        };
        assert_eq!(
            second_start(&starts, 0, &lines, &targets, |_| true),
            Some(1)
        );
    }

    #[test]
    fn rejects_bad_candidates() {
        let rec = recording();
        let p = Params::default();
        assert!(search(&rec, &items(), &[vec![0, 1]], &[true], &p).is_err());
        assert!(search(&rec, &items(), &[vec![0, 0, 1]], &[true], &p).is_err());
        assert!(search(&rec, &items(), &[], &[], &p).is_err());
        assert!(search(&rec, &[vec![0], vec![0]], &[vec![0, 1]], &[true], &p).is_err());
        assert!(search(&rec, &items(), &[vec![0, 1, 2]], &[], &p).is_err());
    }
}
