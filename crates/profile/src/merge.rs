//! Weighted merging of several profiles of one executable.
//!
//! Profiles of one program are recorded on different workloads, machines and profilers, and a
//! layout should serve their mix. Their raw numbers are not comparable: 100 `perf` samples and
//! 10^9 callgrind instructions can describe the same run. So each input is first *normalized*:
//! all its weights (self weights, call weights and `meta total`) are scaled by one factor that
//! makes its total self weight equal [`MERGE_SCALE`] (10^9), and then multiplied by the user's
//! weight for that input. An input of weight 2 therefore counts twice as much as one of weight
//! 1, whatever units and run lengths the two were recorded in. This is the convention of
//! `llvm-profdata merge --weighted-input=W,FILE` for sample profiles, with normalization added
//! because Sediment mixes sampling and exact profilers (hfsort, Ottoni & Maher, CGO 2017, also
//! orders on normalized sample counts). Call weights are scaled by the same factor as the self
//! weights of their input, so the ratio of call to self weight inside an input is kept.
//!
//! An input whose self weights are all zero (a callgrind run restricted to calls, say) is
//! normalized on its total call weight instead; an input with neither contributes only the
//! existence of its functions.
//!
//! **Exactness.** Each scaled value `v * factor` is computed once in `f64` and rounded to a
//! fixed-point number with [`FRACTION_BITS`] binary fraction digits (a `u128`); these terms
//! are summed exactly, and the sum is rounded to an integer once, at the end (half up,
//! saturating at `u64::MAX`). A term depends only on its own value and input, never on the
//! others, and integer addition is exact, so the flat merge of N inputs is exactly commutative
//! and associative: any order of [`Merger::add`] calls and any grouping of partial [`Merger`]s
//! joined with [`Merger::absorb`] gives the same bytes. Nesting *finished* merges is different:
//! `merge(merge(a, b), c)` renormalizes the inner result to [`MERGE_SCALE`] like any other input,
//! so with weights 1, 1 the inputs `a` and `b` each count a quarter and `c` half. Giving the
//! inner result the sum of its inputs' weights (`2` here) reproduces the flat merge, up to one
//! unit of rounding per value and stage.
//!
//! Edges whose merged weight rounds to zero are dropped (the profile model keeps only positive
//! call weights); functions are kept with zero self weight. A function's size is the largest
//! size any input reported, as in [`crate::ProfileBuilder::set_size`].
//!
//! **Metadata.** All inputs must describe one executable: every build-id present must be equal,
//! every architecture present must be equal, and, unless every input carries a build-id, the
//! binaries must have the same base name (a path differs between machines, the name does not).
//! [`MergeOptions::force`] skips these checks. The result's `binary` is the lexicographically
//! smallest of the inputs' (so it does not depend on their order); `build-id`, `arch` and
//! `event` are kept when all inputs agree and dropped otherwise; `source` is `merge`; the extra
//! keys `merge-inputs` (the number of direct inputs) and `merge-scale` record how it was made.
//! Other extra keys of the inputs describe one recording each and are not carried over.
//!
//! **Memory.** A [`Merger`] stores each distinct function key once, with a dense `u32` id, and
//! keys its sums by id (edges by the pair of ids); the canonical order is made once, in
//! [`Merger::finish`]. A call edge therefore costs a few dozen bytes however long its names are,
//! so that a profile of many calls between long names from a stranger cannot make the merge
//! take many times the memory of the profile itself (keying the sums by the keys, as before,
//! copied both names for every call).
//!
//! **Plain sum.** [`sum`] adds two parts of one recording of one binary as they are, without
//! normalization: their weights are already in the same units.
//!
//! Turned down: summing in `f64`. It is simpler, but floating-point addition is not
//! associative, so the same inputs in another order could print different bytes; and rationals,
//! which are exact but need unbounded integers for thousands of inputs with unrelated totals.

use crate::fleet::{parse_recorded_at, META_RECORDED_AT, META_SUBMITTER};
use crate::intern::Interner;
use crate::{base_name, Error, Meta, Profile, ProfileBuilder};
use std::collections::{BTreeMap, HashMap};

/// Every input's total self weight is scaled to this before its weight is applied. Large enough
/// that a function with one millionth of an input's weight still gets an integer weight of
/// 1000, small enough that sums of thousands of inputs stay far below `u64::MAX`.
pub const MERGE_SCALE: f64 = 1e9;

/// Binary fraction digits kept for each scaled term before the final rounding. 32 bits keep
/// sub-unit parts of up to 2^32 terms from adding up to a rounding difference; a term of at most
/// `u64::MAX` then needs 96 bits, leaving 32 bits of a `u128` for the sum of up to 2^32 terms.
pub const FRACTION_BITS: u32 = 32;

/// Options of [`merge_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeOptions {
    /// Merge even when the inputs name different binaries, build-ids or architectures.
    pub force: bool,
}

/// Merges weighted profiles (see the module documentation), checking that they describe one
/// executable. Weights must be finite and `>= 0`.
pub fn merge(inputs: &[(f64, &Profile)]) -> Result<Profile, Error> {
    merge_with(inputs, MergeOptions::default())
}

/// [`merge`] with options.
pub fn merge_with(inputs: &[(f64, &Profile)], options: MergeOptions) -> Result<Profile, Error> {
    let mut m = Merger::new();
    for &(w, p) in inputs {
        m.add(w, p)?;
    }
    m.finish(options)
}

/// The running state of a merge: exact fixed-point sums keyed by function.
///
/// [`merge`] is `add` over the inputs followed by `finish`; the pieces are public so that a
/// caller can merge partial groups (in parallel, or as files arrive) and join them with
/// [`Merger::absorb`] without any change in the result.
#[derive(Debug, Clone, Default)]
pub struct Merger {
    /// Number of inputs added (including absorbed ones).
    inputs: usize,
    /// What the inputs' metadata agree on, folded as they come.
    meta: MetaSummary,
    /// Id of every function key met so far; ids are positions in `functions`.
    ids: Interner,
    /// Fixed-point self weight sum and largest size, by id.
    functions: Vec<(u128, Option<u64>)>,
    /// Fixed-point call weight sums by (caller, callee) id.
    edges: HashMap<(u32, u32), u128>,
    /// Fixed-point sample weight sums by (function id, offset), scaled like self weights.
    samples: HashMap<(u32, u64), u128>,
    total: u128,
}

/// `v * factor` as a fixed-point number with [`FRACTION_BITS`] fraction bits. The product is
/// rounded once by `f64` and once to the nearest fixed-point unit; `as` saturates on overflow.
fn term(v: u64, factor: f64) -> u128 {
    let x = (v as f64) * factor * (1u64 << FRACTION_BITS) as f64;
    x.round() as u128
}

/// Rounds a fixed-point sum to the nearest integer, halves up, saturating at `u64::MAX`.
fn round_fixed(sum: u128) -> u64 {
    let whole = sum.saturating_add(1u128 << (FRACTION_BITS - 1)) >> FRACTION_BITS;
    u64::try_from(whole).unwrap_or(u64::MAX)
}

impl Merger {
    /// An empty merge.
    pub fn new() -> Self {
        Merger::default()
    }

    /// Number of inputs added so far (including those of absorbed mergers).
    pub fn len(&self) -> usize {
        self.inputs
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.inputs == 0
    }

    /// Adds one input with its weight. Fails, adding nothing, on a negative, NaN or infinite
    /// weight. `profile` must be canonical (as every parsed or built profile is).
    pub fn add(&mut self, weight: f64, profile: &Profile) -> Result<(), Error> {
        if !weight.is_finite() || weight < 0.0 {
            return Err(Error::BadWeight {
                input: self.inputs,
                weight: weight.to_string(),
            });
        }
        // Sums in u128 cannot overflow: at most 2^32 functions of at most 2^64 each.
        let self_total: u128 = profile
            .functions
            .iter()
            .map(|f| u128::from(f.self_weight))
            .sum();
        let edge_total: u128 = profile.edges.iter().map(|e| u128::from(e.weight)).sum();
        let norm = if self_total > 0 {
            self_total
        } else {
            edge_total
        };
        let factor = if norm > 0 {
            weight * MERGE_SCALE / norm as f64
        } else {
            0.0
        };

        let mut ids = Vec::with_capacity(profile.functions.len());
        for f in &profile.functions {
            let (id, new) = self.ids.id(&f.key);
            if new {
                self.functions.push((0, None));
            }
            self.add_function(id, term(f.self_weight, factor), f.size);
            ids.push(id);
        }
        for e in &profile.edges {
            // Out-of-range indices only occur in non-canonical profiles; skip rather than panic.
            let (Some(&a), Some(&b)) = (ids.get(e.caller as usize), ids.get(e.callee as usize))
            else {
                continue;
            };
            self.add_edge(a, b, term(e.weight, factor));
        }
        for s in &profile.samples {
            if let Some(&f) = ids.get(s.func as usize) {
                self.add_sample(f, s.offset, term(s.weight, factor));
            }
        }
        self.total = self.total.saturating_add(term(profile.meta.total, factor));
        self.meta.see(self.inputs, &profile.meta);
        self.inputs += 1;
        Ok(())
    }

    /// Adds everything `other` accumulated, as if its inputs had been added here one by one
    /// (its inputs count after this merger's own for the positions in error messages).
    pub fn absorb(&mut self, other: Merger) {
        // Other's ids, renumbered into this merger's.
        let mut ids = vec![0u32; other.functions.len()];
        for (key, theirs) in other.ids.into_pairs() {
            let (ours, new) = self.ids.id_owned(key);
            if new {
                self.functions.push((0, None));
            }
            ids[theirs as usize] = ours;
        }
        for (theirs, (w, size)) in other.functions.into_iter().enumerate() {
            self.add_function(ids[theirs], w, size);
        }
        for ((a, b), w) in other.edges {
            self.add_edge(ids[a as usize], ids[b as usize], w);
        }
        for ((f, offset), w) in other.samples {
            self.add_sample(ids[f as usize], offset, w);
        }
        self.total = self.total.saturating_add(other.total);
        let mut meta = other.meta;
        meta.shift(self.inputs);
        self.meta.join(meta);
        self.inputs += other.inputs;
    }

    /// Adds a fixed-point self weight and a size to the function of id `id`.
    fn add_function(&mut self, id: u32, w: u128, size: Option<u64>) {
        let slot = &mut self.functions[id as usize];
        slot.0 = slot.0.saturating_add(w);
        if let Some(s) = size {
            slot.1 = Some(slot.1.map_or(s, |old| old.max(s)));
        }
    }

    /// Adds a fixed-point weight to the call between the functions of ids `a` and `b`.
    fn add_edge(&mut self, a: u32, b: u32, w: u128) {
        let slot = self.edges.entry((a, b)).or_insert(0);
        *slot = slot.saturating_add(w);
    }

    /// Adds a fixed-point weight to the sample at `offset` of the function of id `f`.
    fn add_sample(&mut self, f: u32, offset: u64, w: u128) {
        let slot = self.samples.entry((f, offset)).or_insert(0);
        *slot = slot.saturating_add(w);
    }

    /// Checks the metadata and rounds the sums into a canonical profile.
    pub fn finish(self, options: MergeOptions) -> Result<Profile, Error> {
        let meta = merged_meta(self.inputs, &self.meta, options)?;
        // Each sum rounded once; an edge whose weight rounds to zero is dropped.
        let functions = self.functions;
        let mut p = self.ids.into_profile(
            meta,
            |id| {
                let (w, size) = functions[id as usize];
                (round_fixed(w), size)
            },
            self.edges.into_iter().map(|(ids, w)| (ids, round_fixed(w))),
            self.samples.into_iter().map(|(at, w)| (at, round_fixed(w))),
        );
        // Rounding each function separately can make the self weights add up to slightly more
        // than the once-rounded total; keep the documented `total >= sum of self weights`.
        let self_sum = p
            .functions
            .iter()
            .fold(0u64, |acc, f| acc.saturating_add(f.self_weight));
        p.meta.total = round_fixed(self.total).max(self_sum);
        Ok(p)
    }
}

/// A value the inputs that have one must agree on, folded input by input: the earliest input
/// with a value, and the earliest input whose value differs from that one. Joining two folds
/// gives the fold of all their inputs whatever the order, so a merge keeps this in constant
/// space instead of every input's metadata.
#[derive(Debug, Clone, Default)]
struct Agreement {
    first: Option<(usize, String)>,
    conflict: Option<(usize, String)>,
}

/// The one of two optional positioned values with the smaller position.
fn earlier(a: Option<(usize, String)>, b: Option<(usize, String)>) -> Option<(usize, String)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

impl Agreement {
    /// Input `pos` has value `v`.
    fn see(&mut self, pos: usize, v: &str) {
        match &self.first {
            Some((i, u)) if *i < pos && u == v => {}
            Some((i, _)) if *i < pos => {
                if self.conflict.as_ref().map_or(true, |(j, _)| pos < *j) {
                    self.conflict = Some((pos, v.to_string()));
                }
            }
            _ => self.join(Agreement {
                first: Some((pos, v.to_string())),
                conflict: None,
            }),
        }
    }

    /// Folds in the inputs `other` saw (positions distinct from this fold's).
    fn join(&mut self, other: Agreement) {
        let mine = std::mem::take(self);
        let (lo, hi) = match (&mine.first, &other.first) {
            (None, _) => {
                *self = other;
                return;
            }
            (_, None) => {
                *self = mine;
                return;
            }
            (Some(a), Some(b)) if a.0 <= b.0 => (mine, other),
            _ => (other, mine),
        };
        let (lo_first, hi_first) = (lo.first.unwrap(), hi.first.unwrap());
        // Every input of `hi` with a value comes after `lo`'s first; the earliest of them that
        // differs from it is `hi`'s own first when their values differ, else `hi`'s conflict.
        let conflict = if lo_first.1 == hi_first.1 {
            earlier(lo.conflict, hi.conflict)
        } else {
            earlier(lo.conflict, Some(hi_first))
        };
        *self = Agreement {
            first: Some(lo_first),
            conflict,
        };
    }

    fn shift(&mut self, by: usize) {
        for (i, _) in self.first.iter_mut().chain(self.conflict.iter_mut()) {
            *i += by;
        }
    }

    /// The agreed value (`None` when no input had one), or the first disagreement as input
    /// positions and values.
    fn result(&self) -> Result<Option<&str>, (usize, usize, &str, &str)> {
        match (&self.first, &self.conflict) {
            (Some((i, u)), Some((j, v))) => Err((*i, *j, u, v)),
            (first, None) => Ok(first.as_ref().map(|(_, u)| u.as_str())),
            (None, Some(_)) => unreachable!("a conflict needs a first value"),
        }
    }
}

/// The metadata of a merge's inputs, folded: what [`merged_meta`] needs, in constant space.
#[derive(Debug, Clone, Default)]
struct MetaSummary {
    build_id: Agreement,
    arch: Agreement,
    /// Over every input: base name of the binary.
    base_name: Agreement,
    /// Over every input: the event, empty when absent.
    event: Agreement,
    /// Some input has no build-id.
    missing_build_id: bool,
    /// The lexicographically smallest binary.
    binary: Option<String>,
    submitter: Agreement,
    missing_submitter: bool,
    /// The newest valid `recorded-at`, and whether some input lacked a valid one.
    recorded_at: Option<i64>,
    missing_recorded_at: bool,
}

impl MetaSummary {
    fn see(&mut self, pos: usize, m: &Meta) {
        let mut one = MetaSummary::default();
        if let Some(b) = &m.build_id {
            one.build_id.see(pos, b);
        }
        if let Some(a) = &m.arch {
            one.arch.see(pos, a);
        }
        one.base_name.see(pos, base_name(&m.binary));
        one.event.see(pos, m.event.as_deref().unwrap_or(""));
        one.missing_build_id = m.build_id.is_none();
        one.binary = Some(m.binary.clone());
        match m.extra.get(META_SUBMITTER) {
            Some(s) => one.submitter.see(pos, s),
            None => one.missing_submitter = true,
        }
        match m
            .extra
            .get(META_RECORDED_AT)
            .and_then(|t| parse_recorded_at(t).ok())
        {
            Some(t) => one.recorded_at = Some(t),
            None => one.missing_recorded_at = true,
        }
        self.join(one);
    }

    fn join(&mut self, o: MetaSummary) {
        self.build_id.join(o.build_id);
        self.arch.join(o.arch);
        self.base_name.join(o.base_name);
        self.event.join(o.event);
        self.missing_build_id |= o.missing_build_id;
        self.binary = match (self.binary.take(), o.binary) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.submitter.join(o.submitter);
        self.missing_submitter |= o.missing_submitter;
        self.recorded_at = self.recorded_at.max(o.recorded_at);
        self.missing_recorded_at |= o.missing_recorded_at;
    }

    fn shift(&mut self, by: usize) {
        for a in [
            &mut self.build_id,
            &mut self.arch,
            &mut self.base_name,
            &mut self.event,
            &mut self.submitter,
        ] {
            a.shift(by);
        }
    }
}

fn mismatch(what: &'static str, (first, other, a, b): (usize, usize, &str, &str)) -> Error {
    Error::Mismatch {
        what,
        first,
        other,
        a: a.to_string(),
        b: b.to_string(),
    }
}

fn merged_meta(inputs: usize, s: &MetaSummary, options: MergeOptions) -> Result<Meta, Error> {
    if inputs == 0 {
        return Err(Error::NoInputs);
    }
    let build_id = s.build_id.result();
    let arch = s.arch.result();
    if !options.force {
        build_id.map_err(|e| mismatch("build-id", e))?;
        arch.map_err(|e| mismatch("arch", e))?;
        if s.missing_build_id {
            s.base_name.result().map_err(|e| mismatch("binary", e))?;
        }
    }
    // An event is kept only when every input names the same one.
    let event = match s.event.result() {
        Ok(Some(e)) if !e.is_empty() => Some(e.to_string()),
        _ => None,
    };
    let mut extra = BTreeMap::new();
    extra.insert("merge-inputs".to_string(), inputs.to_string());
    extra.insert("merge-scale".to_string(), format!("{MERGE_SCALE}"));
    // A submission's identity is kept when every input shares it: one submitter, and the
    // newest time when every input has one (so a merged result decays as its newest part).
    if let (Ok(Some(who)), false) = (s.submitter.result(), s.missing_submitter) {
        extra.insert(META_SUBMITTER.to_string(), who.to_string());
    }
    if let (Some(t), false) = (s.recorded_at, s.missing_recorded_at) {
        extra.insert(META_RECORDED_AT.to_string(), t.to_string());
    }
    Ok(Meta {
        binary: s.binary.clone().unwrap_or_default(),
        build_id: build_id.ok().flatten().map(str::to_string),
        arch: arch.ok().flatten().map(str::to_string),
        source: "merge".to_string(),
        event,
        total: 0,
        extra,
    })
}

/// `a` with the weights of `b` added, unscaled: self weights, call weights and `meta total`
/// summed, a function's size the largest either reported, `a`'s other metadata kept. For two
/// parts of one recording of one binary (copies of one build at two paths, which
/// `sediment record --prof-dir` sums before merging), where the weights are in the same units;
/// profiles of different recordings are combined with the normalizing [`merge`] instead.
pub fn sum(a: Profile, b: &Profile) -> Profile {
    let total = a.meta.total.saturating_add(b.meta.total);
    let mut builder = ProfileBuilder::from(a);
    builder.meta_mut().total = total;
    for f in &b.functions {
        builder.add_self(&f.key, f.self_weight);
        if let Some(size) = f.size {
            builder.set_size(&f.key, size);
        }
    }
    for e in &b.edges {
        let (caller, callee) = (
            &b.functions[e.caller as usize],
            &b.functions[e.callee as usize],
        );
        builder.add_call(&caller.key, &callee.key, e.weight);
    }
    for s in &b.samples {
        builder.add_sample(&b.functions[s.func as usize].key, s.offset, s.weight);
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FuncKey, ProfileBuilder};
    use proptest::prelude::*;

    fn meta(binary: &str) -> Meta {
        Meta {
            binary: binary.to_string(),
            source: "perf".to_string(),
            ..Meta::default()
        }
    }

    fn key(n: &str) -> FuncKey {
        FuncKey::global(n)
    }

    /// `main -> work` with the given self weights and call weight, plus a total.
    fn small(main: u64, work: u64, call: u64, total: u64) -> Profile {
        let mut b = ProfileBuilder::new(meta("/bin/demo"));
        b.add_self(&key("main"), main);
        b.add_self(&key("work"), work);
        b.add_call(&key("main"), &key("work"), call);
        b.meta_mut().total = total;
        b.build()
    }

    // Two parts of one recording add up as they are: self, call and total weights summed,
    // the larger size kept, no normalization.
    #[test]
    fn sum_adds_unscaled() {
        let mut a = small(25, 75, 10, 100);
        let mut b = ProfileBuilder::new(meta("/other/demo"));
        b.add_self(&key("work"), 5);
        b.add_self(&key("helper"), 7);
        b.set_size(&key("work"), 64);
        b.add_call(&key("main"), &key("work"), 3);
        b.meta_mut().total = 20;
        let b = b.build();
        a.functions[1].size = Some(32);
        let s = sum(a, &b);
        let weights: Vec<(&str, u64, Option<u64>)> = s
            .functions
            .iter()
            .map(|f| (f.key.name.as_str(), f.self_weight, f.size))
            .collect();
        assert_eq!(
            weights,
            [
                ("helper", 7, None),
                ("main", 25, None),
                ("work", 80, Some(64))
            ]
        );
        assert_eq!(s.edges.len(), 1);
        assert_eq!(s.edges[0].weight, 13);
        assert_eq!(s.meta.total, 120);
        assert_eq!(s.meta.binary, "/bin/demo");
    }

    // 100 samples and 10^9 instructions with the same shape count equally at weight 1.
    #[test]
    fn units_are_normalized_away() {
        let perf = small(25, 75, 10, 100);
        let cg = small(250_000_000, 750_000_000, 100_000_000, 1_000_000_000);
        let m = merge(&[(1.0, &perf), (1.0, &cg)]).unwrap();
        assert_eq!(m.functions[0].self_weight, 500_000_000);
        assert_eq!(m.functions[1].self_weight, 1_500_000_000);
        assert_eq!(m.edges[0].weight, 200_000_000);
        assert_eq!(m.meta.total, 2_000_000_000);
        assert_eq!(m.meta.source, "merge");
        assert_eq!(m.meta.extra["merge-inputs"], "2");
        assert_eq!(m.meta.extra["merge-scale"], "1000000000");
    }

    // Weights multiply after normalization: weight 3 against weight 1 gives a 3:1 mix.
    #[test]
    fn weights_apply_after_normalization() {
        let a = small(1, 0, 0, 1); // all in main
        let b = small(0, 7, 0, 7); // all in work
        let m = merge(&[(3.0, &a), (1.0, &b)]).unwrap();
        assert_eq!(m.functions[0].self_weight, 3_000_000_000);
        assert_eq!(m.functions[1].self_weight, 1_000_000_000);
        assert!(m.edges.is_empty());
    }

    // One third of 10^9 rounds to nearest once, at the end; a tiny edge rounds away.
    #[test]
    fn rounding_is_once_at_the_end() {
        let mut b = ProfileBuilder::new(meta("demo"));
        b.add_self(&key("a"), 1);
        b.add_self(&key("b"), 2);
        b.add_self(&key("c"), 2_999_999_997);
        b.add_call(&key("a"), &key("b"), 1);
        let p = b.build();
        // Terms: a = 1/3, b = 2/3, c = 999999999; a + b twice each = 2.
        let m = merge(&[(1.0, &p), (1.0, &p)]).unwrap();
        assert_eq!(m.functions[0].self_weight, 1); // 2/3 -> 1
        assert_eq!(m.functions[1].self_weight, 1); // 4/3 -> 1
        assert_eq!(m.functions[2].self_weight, 1_999_999_998);
        assert_eq!(m.edges.len(), 1);
        assert_eq!(m.edges[0].weight, 1);
        let single = merge(&[(1.0, &p)]).unwrap();
        assert_eq!(single.functions[0].self_weight, 0);
        assert!(single.edges.is_empty(), "1/3 of a call rounds to nothing");
        assert_eq!(
            single.functions.len(),
            3,
            "functions stay even at zero weight"
        );
    }

    // A profile with calls but no self weight is normalized on its calls.
    #[test]
    fn calls_only_profile_normalizes_on_calls() {
        let p = small(0, 0, 4, 0);
        let m = merge(&[(1.0, &p)]).unwrap();
        assert_eq!(m.edges[0].weight, 1_000_000_000);
        assert_eq!(m.meta.total, 0);
        let empty = ProfileBuilder::new(meta("demo")).build();
        let m = merge(&[(1.0, &empty), (1.0, &p)]).unwrap();
        assert_eq!(m.edges[0].weight, 1_000_000_000);
    }

    // Bad weights and empty input lists are errors naming the input.
    #[test]
    fn bad_weights_rejected() {
        let p = small(1, 1, 1, 2);
        for w in [-1.0, f64::NAN, f64::INFINITY] {
            let e = merge(&[(1.0, &p), (w, &p)]).unwrap_err();
            assert!(matches!(e, Error::BadWeight { input: 1, .. }), "{e}");
        }
        assert_eq!(merge(&[]).unwrap_err(), Error::NoInputs);
        assert!(merge(&[(0.0, &p)]).is_ok());
    }

    // Different binaries, build-ids or archs refuse to merge unless forced.
    #[test]
    fn metadata_must_agree() {
        let a = small(1, 1, 1, 2);
        let mut b = a.clone();
        b.meta.binary = "/other/demo".into(); // same base name: fine
        assert_eq!(
            merge(&[(1.0, &a), (1.0, &b)]).unwrap().meta.binary,
            "/bin/demo"
        );
        b.meta.binary = "/bin/other".into();
        let e = merge(&[(1.0, &a), (1.0, &b)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "inputs 0 and 1 have different binary (`demo` vs `other`)"
        );
        let forced = merge_with(&[(1.0, &b), (1.0, &a)], MergeOptions { force: true }).unwrap();
        assert_eq!(forced.meta.binary, "/bin/demo");

        // Equal build-ids make differing names acceptable; differing ones are refused.
        let mut c = a.clone();
        c.meta.build_id = Some("ab".into());
        let mut d = b.clone();
        d.meta.build_id = Some("ab".into());
        let m = merge(&[(1.0, &c), (1.0, &d)]).unwrap();
        assert_eq!(m.meta.build_id.as_deref(), Some("ab"));
        d.meta.build_id = Some("cd".into());
        let e = merge(&[(1.0, &c), (1.0, &d)]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Mismatch {
                    what: "build-id",
                    ..
                }
            ),
            "{e}"
        );
        let forced = merge_with(&[(1.0, &c), (1.0, &d)], MergeOptions { force: true }).unwrap();
        assert_eq!(forced.meta.build_id, None);

        let mut x = a.clone();
        x.meta.arch = Some("x86_64".into());
        x.meta.event = Some("cpu-clock".into());
        let mut y = a.clone();
        y.meta.arch = Some("aarch64".into());
        let e = merge(&[(1.0, &x), (1.0, &y)]).unwrap_err();
        assert!(matches!(e, Error::Mismatch { what: "arch", .. }), "{e}");
        // Event kept only when all agree.
        let m = merge(&[(1.0, &x), (1.0, &a)]).unwrap();
        assert_eq!(m.meta.arch.as_deref(), Some("x86_64"));
        assert_eq!(m.meta.event, None);
        assert_eq!(
            merge(&[(1.0, &x), (2.0, &x)])
                .unwrap()
                .meta
                .event
                .as_deref(),
            Some("cpu-clock")
        );
    }

    // Sizes: the largest reported wins.
    #[test]
    fn sizes_take_the_maximum() {
        let mut a = small(1, 1, 0, 2);
        a.functions[1].size = Some(40);
        let mut b = small(1, 1, 0, 2);
        b.functions[1].size = Some(64);
        b.functions[0].size = Some(8);
        let m = merge(&[(1.0, &a), (1.0, &b)]).unwrap();
        assert_eq!(m.functions[0].size, Some(8));
        assert_eq!(m.functions[1].size, Some(64));
    }

    // Nesting renormalizes: merge(merge(a, b), c) at 1, 1 gives c half the weight;
    // giving the inner merge weight 2 reproduces the flat merge.
    #[test]
    fn nesting_renormalizes() {
        let a = small(1, 0, 0, 1);
        let b = small(1, 0, 0, 1);
        let c = small(0, 1, 0, 1);
        let inner = merge(&[(1.0, &a), (1.0, &b)]).unwrap();
        let nested = merge(&[(1.0, &inner), (1.0, &c)]).unwrap();
        assert_eq!(nested.functions[0].self_weight, 1_000_000_000);
        assert_eq!(nested.functions[1].self_weight, 1_000_000_000);
        let nested2 = merge(&[(2.0, &inner), (1.0, &c)]).unwrap();
        let flat = merge(&[(1.0, &a), (1.0, &b), (1.0, &c)]).unwrap();
        assert_eq!(nested2.functions, flat.functions);
        assert_eq!(nested2.meta.extra["merge-inputs"], "2");
        assert_eq!(flat.meta.extra["merge-inputs"], "3");
    }

    // The first disagreement found by a merge split into partial mergers and joined in any
    // grouping names the same inputs as the flat merge; a shared submitter and the newest
    // time of inputs that all have one are kept.
    #[test]
    fn folded_metadata_matches_flat() {
        let with = |bid: Option<&str>, who: Option<&str>, t: Option<&str>| {
            let mut p = small(1, 1, 1, 2);
            p.meta.build_id = bid.map(str::to_string);
            if let Some(w) = who {
                p.meta.extra.insert(META_SUBMITTER.into(), w.into());
            }
            if let Some(t) = t {
                p.meta.extra.insert(META_RECORDED_AT.into(), t.into());
            }
            p
        };
        let inputs = [
            with(None, Some("h"), Some("5")),
            with(Some("aa"), Some("h"), Some("9")),
            with(None, Some("h"), Some("7")),
            with(Some("bb"), Some("h"), Some("1")),
            with(Some("aa"), Some("h"), Some("3")),
            with(Some("cc"), Some("h"), Some("2")),
        ];
        let flat = {
            let refs: Vec<(f64, &Profile)> = inputs.iter().map(|p| (1.0, p)).collect();
            merge(&refs).unwrap_err()
        };
        assert_eq!(
            flat,
            Error::Mismatch {
                what: "build-id",
                first: 1,
                other: 3,
                a: "aa".into(),
                b: "bb".into()
            }
        );
        for split in 0..=inputs.len() {
            for inner in 0..=split {
                let mut parts = [Merger::new(), Merger::new(), Merger::new()];
                for (i, p) in inputs.iter().enumerate() {
                    let k = usize::from(i >= inner) + usize::from(i >= split);
                    parts[k].add(1.0, p).unwrap();
                }
                let [a, mut b, c] = parts;
                b.absorb(c);
                let mut m = a;
                m.absorb(b);
                assert_eq!(m.finish(MergeOptions::default()).unwrap_err(), flat);
            }
        }
        let m = merge(&[(1.0, &inputs[0]), (1.0, &inputs[2])]).unwrap();
        assert_eq!(m.meta.extra[META_SUBMITTER], "h");
        assert_eq!(m.meta.extra[META_RECORDED_AT], "7");
        let other = with(None, Some("g"), None);
        let m = merge(&[(1.0, &inputs[0]), (1.0, &other)]).unwrap();
        assert!(!m.meta.extra.contains_key(META_SUBMITTER));
        assert!(!m.meta.extra.contains_key(META_RECORDED_AT));
    }

    fn arb_profile() -> impl Strategy<Value = Profile> {
        let names = prop::sample::select(vec!["a", "b", "c", "d", "e"]);
        let files = prop::option::of(prop::sample::select(vec!["x.c", "y.c"]));
        let func = (names, files, 0u64..1_000_000, prop::option::of(1u64..500));
        (
            prop::collection::vec(func, 0..6),
            prop::collection::vec((0usize..6, 0usize..6, 1u64..100_000), 0..8),
            0u64..10_000_000,
        )
            .prop_map(|(fs, es, total)| {
                let mut b = ProfileBuilder::new(meta("/bin/demo"));
                let keys: Vec<FuncKey> = fs
                    .iter()
                    .map(|(n, f, _, _)| FuncKey {
                        name: n.to_string(),
                        file: f.map(str::to_string),
                    })
                    .collect();
                for (k, (_, _, w, s)) in keys.iter().zip(&fs) {
                    b.add_self(k, *w);
                    if let Some(s) = s {
                        b.set_size(k, *s);
                    }
                }
                if !keys.is_empty() {
                    for (x, y, w) in es {
                        b.add_call(&keys[x % keys.len()], &keys[y % keys.len()], w);
                    }
                }
                b.meta_mut().total = total;
                b.build()
            })
    }

    fn arb_weight() -> impl Strategy<Value = f64> {
        prop_oneof![Just(1.0), Just(0.0), 0.0f64..100.0]
    }

    proptest! {
        // Any order of the same weighted inputs gives the identical profile.
        #[test]
        fn commutative(
            inputs in prop::collection::vec((arb_weight(), arb_profile()), 1..5),
            seed in any::<u64>(),
        ) {
            let fwd: Vec<(f64, &Profile)> = inputs.iter().map(|(w, p)| (*w, p)).collect();
            let mut perm = fwd.clone();
            perm.reverse();
            let n = perm.len();
            perm.rotate_left((seed as usize) % n);
            let a = merge(&fwd).unwrap();
            let b = merge(&perm).unwrap();
            prop_assert_eq!(a.to_text(), b.to_text());
            prop_assert!(a.is_canonical());
        }

        // Grouping partial merges any way ((a b) c versus a (b c)) gives the identical profile.
        #[test]
        fn associative_flat(
            a in (arb_weight(), arb_profile()),
            b in (arb_weight(), arb_profile()),
            c in (arb_weight(), arb_profile()),
        ) {
            let mut ab = Merger::new();
            ab.add(a.0, &a.1).unwrap();
            ab.add(b.0, &b.1).unwrap();
            let mut c_only = Merger::new();
            c_only.add(c.0, &c.1).unwrap();
            ab.absorb(c_only);

            let mut bc = Merger::new();
            bc.add(b.0, &b.1).unwrap();
            bc.add(c.0, &c.1).unwrap();
            let mut a_then_bc = Merger::new();
            a_then_bc.add(a.0, &a.1).unwrap();
            a_then_bc.absorb(bc);

            let left = ab.finish(MergeOptions::default()).unwrap();
            let right = a_then_bc.finish(MergeOptions::default()).unwrap();
            let flat = merge(&[(a.0, &a.1), (b.0, &b.1), (c.0, &c.1)]).unwrap();
            prop_assert_eq!(&left, &right);
            prop_assert_eq!(&left, &flat);
        }

        // A profile merged with itself at weight 1 is the profile scaled to 2 * 10^9 in total
        // (each value within one unit of v * 2e9 / self_total), keeping every function.
        #[test]
        fn self_merge_is_proportional(p in arb_profile()) {
            let m = merge(&[(1.0, &p), (1.0, &p)]).unwrap();
            let one = merge(&[(1.0, &p)]).unwrap();
            let keys = |q: &Profile| q.functions.iter().map(|f| f.key.clone()).collect::<Vec<_>>();
            prop_assert_eq!(keys(&m), keys(&p));
            let t = p.self_total();
            if t > 0 {
                for (f, g) in p.functions.iter().zip(&m.functions) {
                    let want = f.self_weight as f64 * 2e9 / t as f64;
                    prop_assert!((g.self_weight as f64 - want).abs() <= 1.0, "{} vs {}", g.self_weight, want);
                    prop_assert_eq!(g.size, f.size);
                }
                for (f, g) in one.functions.iter().zip(&m.functions) {
                    prop_assert!(g.self_weight.abs_diff(2 * f.self_weight) <= 1);
                }
                for e in &m.edges {
                    let orig = p.edges.iter().find(|x| (x.caller, x.callee) == (e.caller, e.callee));
                    let want = orig.map_or(0.0, |x| x.weight as f64 * 2e9 / t as f64);
                    prop_assert!((e.weight as f64 - want).abs() <= 1.0);
                }
            }
        }

        // The same inputs always give the same bytes.
        #[test]
        fn deterministic(inputs in prop::collection::vec((arb_weight(), arb_profile()), 1..4)) {
            let refs: Vec<(f64, &Profile)> = inputs.iter().map(|(w, p)| (*w, p)).collect();
            prop_assert_eq!(merge(&refs).unwrap().to_text(), merge(&refs).unwrap().to_text());
        }
    }

    #[test]
    fn samples_are_scaled_and_summed_like_self_weights() {
        // Each input is scaled to MERGE_SCALE per unit of weight, its samples by the factor of
        // its self weights, and a sample both inputs have is their sum; `sum` adds unscaled.
        let one = |offset: u64, w: u64| {
            let mut b = ProfileBuilder::new(meta("app"));
            b.add_self(&FuncKey::global("f"), 100);
            b.add_sample(&FuncKey::global("f"), 0, 100 - w);
            b.add_sample(&FuncKey::global("f"), offset, w);
            b.build()
        };
        let (a, b) = (one(8, 40), one(16, 40));
        let m = merge(&[(1.0, &a), (1.0, &b)]).unwrap();
        let scale = MERGE_SCALE as u64;
        let got: Vec<(u64, u64)> = m.samples.iter().map(|s| (s.offset, s.weight)).collect();
        assert_eq!(
            got,
            vec![
                (0, scale * 120 / 100),
                (8, scale * 40 / 100),
                (16, scale * 40 / 100)
            ]
        );
        assert!(m.is_canonical());
        let s = sum(a, &b);
        let got: Vec<(u64, u64)> = s.samples.iter().map(|s| (s.offset, s.weight)).collect();
        assert_eq!(got, vec![(0, 120), (8, 40), (16, 40)]);
    }
}
