//! The Sediment profile model: functions, their self weight, and weighted call edges of one
//! executable, where known the weight at each instruction offset inside the functions
//! ([`Sample`], for BOLT's sample profile), plus the metadata that says where the numbers came
//! from.
//!
//! Every importer produces a [`Profile`], every ordering algorithm consumes one, and the text
//! form written by [`Profile::to_text`] is the one file a user keeps per executable (documented
//! in `docs/design/profile-format.md`).
//!
//! Design constraints:
//! - **No I/O.** This crate never opens a file or runs a program; it converts between the model
//!   and text held in memory. Callers read and write files (atomically) themselves.
//! - **Canonical form.** A [`Profile`] is always sorted: functions by [`FuncKey`], edges by
//!   (caller, callee), with duplicates summed. Two profiles with the same content therefore
//!   print byte-identically, which is what makes outputs reproducible and diffs readable.
//! - **Hostile input.** Profiles come from strangers. The parser never allocates from a length
//!   field, bounds-checks every index, and rejects names it could not write back. Names are kept
//!   as opaque strings: emitters, not this crate, decide what may reach a linker.
//!
//! Turned down: storing edges by name (`call main - work -`). It reads well but doubles the file
//! size of a large program and invites inconsistencies (an edge naming a function with no `fn`
//! line). Edges refer to the dense indices of the `fn` lines instead; indices are positions in
//! the sorted function list, so they carry no information of their own.

mod demangle;
mod fleet;
mod format;
mod intern;
mod key;
mod merge;
mod names;
mod order_file;
mod share;

pub use demangle::{demangle, demangle_label, demangle_text, MAX_DEMANGLED};
pub use fleet::{
    decay, parse_recorded_at, plan as fleet_plan, FleetOptions, FleetPlan, Submission,
    META_RECORDED_AT, META_SUBMITTER,
};
pub use format::{
    escape, quote, quote_whole, unescape, FORMAT_VERSION, FORMAT_VERSION_SAMPLES, MAGIC, QUOTE_MAX,
};
pub use key::{base_name, FuncKey};
pub use merge::{merge, merge_with, sum, MergeOptions, Merger, FRACTION_BITS, MERGE_SCALE};
pub use names::{
    match_profile, match_profile_sized, normalize, remap, retarget, rust_path, Mapping, Match,
    MatchReport, MatchRule, Normalized, SuffixKind, Target, REPORT_NAMES,
};
pub use order_file::{FunctionOrder, ORDER_MAGIC};
pub use share::{binary_share, generic_name, require_share, Share, C_RUNTIME, DEFAULT_MIN_SHARE};

use intern::Interner;
use std::collections::{BTreeMap, HashMap};

/// Errors of this crate. Parse errors carry the 1-based line number of the offending line.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// The text is not a Sediment profile at all (wrong or missing first line).
    #[error("not a sediment profile (first line must be `{MAGIC} {FORMAT_VERSION}`)")]
    NotAProfile,
    /// The file says it is a profile of a version this build cannot read.
    #[error("unsupported profile format version {0} (this build reads versions {FORMAT_VERSION} and {FORMAT_VERSION_SAMPLES})")]
    UnsupportedVersion(String),
    /// A line could not be parsed.
    #[error("line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong with it.
        message: String,
    },
    /// [`merge`] was given no profiles.
    #[error("nothing to merge: no input profiles")]
    NoInputs,
    /// A merge weight is negative, NaN or infinite; `input` is the 0-based input position.
    #[error("input {input}: weight {weight} is not a finite number >= 0")]
    BadWeight {
        /// 0-based position of the input.
        input: usize,
        /// The weight as given.
        weight: String,
    },
    /// Two merge inputs describe different executables (`what` is `binary`, `build-id` or
    /// `arch`); `first` and `other` are 0-based input positions.
    #[error("inputs {first} and {other} have different {what} (`{a}` vs `{b}`)")]
    Mismatch {
        /// Which metadata differs.
        what: &'static str,
        /// Position of the earlier input.
        first: usize,
        /// Position of the later input.
        other: usize,
        /// The earlier input's value.
        a: String,
        /// The later input's value.
        b: String,
    },
    /// A `meta` value of a merge input has the wrong form.
    #[error("meta {key} `{value}` is not {expected}")]
    BadMeta {
        /// The key.
        key: &'static str,
        /// The value, quoted for a message.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A fleet weighting option is out of range ([`FleetOptions`]).
    #[error("{0}")]
    BadFleetOption(String),
    /// Too little of a profile's weight lands on functions of the binary it is used with
    /// ([`require_share`]): a profile of another program.
    #[error(
        "only {:.1}% of the profile's weight{} is in functions {binaries} defines, {:.0}% needed (a profile of another program?)",
        .share.fraction() * 100.0,
        share::generic_note(.share),
        .min * 100.0
    )]
    ForeignProfile {
        /// The share found.
        share: Share,
        /// The least share needed, from 0 to 1.
        min: f64,
        /// The binary or binaries the share was measured on.
        binaries: String,
    },
}

/// The length of the header of a profile's text: the offset of its first line that starts
/// with `fn ` or `call `, or the whole length when there is none.
pub fn header_end(text: &str) -> usize {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("fn ") || line.starts_with("call ") {
            return at;
        }
        at += line.len();
    }
    text.len()
}

/// Index of a function inside one [`Profile`]: a position in [`Profile::functions`].
pub type FuncId = u32;

/// One function of the profiled executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Which function this is (name, and the source file for local symbols).
    pub key: FuncKey,
    /// Samples (or instructions, for exact profilers) attributed to this function's own code.
    pub self_weight: u64,
    /// Size of the function's code in bytes, where the importer knew it.
    pub size: Option<u64>,
}

/// A weighted call edge `caller -> callee`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Edge {
    /// The calling function.
    pub caller: FuncId,
    /// The called function.
    pub callee: FuncId,
    /// How often the call was observed (calls for exact profilers, samples for sampling ones).
    pub weight: u64,
}

/// Weight observed at one instruction offset of a function: executions of that instruction
/// (callgrind `Ir`) or samples whose instruction pointer was there (perf). Offsets count from
/// the function symbol's address, so they stay valid wherever the binary is loaded, and only
/// for the build they were recorded on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sample {
    /// The function.
    pub func: FuncId,
    /// Bytes from the function's start.
    pub offset: u64,
    /// Instructions executed or samples taken there.
    pub weight: u64,
}

/// The [`Meta::extra`] key counting the recordings merged into one profile-directory file
/// (`sediment record --prof-dir`): its weight when the next recording is merged in
/// (docs/design/profile-format.md).
pub const META_RECORDINGS: &str = "recordings";

/// Where a profile came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// Path or name of the executable or shared library the profile describes.
    pub binary: String,
    /// GNU build-id of that binary as lowercase hex, when known.
    pub build_id: Option<String>,
    /// Architecture name (`x86_64`, `aarch64`, ...), when known.
    pub arch: Option<String>,
    /// Which importer made it (`perf`, `callgrind`, ...).
    pub source: String,
    /// The event that was counted (`cpu-clock`, `Ir`, ...), when known.
    pub event: Option<String>,
    /// Total weight the recording saw in this binary, including weight that could not be
    /// attributed to a function (so it can exceed the sum of self weights).
    pub total: u64,
    /// Further `meta` keys, kept and written back in key order.
    pub extra: BTreeMap<String, String>,
}

/// A profile of one executable in canonical (sorted, deduplicated) form.
///
/// Build one with [`ProfileBuilder`] or [`Profile::from_text`]; the fields are public for reading,
/// and code that edits them must leave them canonical (see [`Profile::is_canonical`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Metadata.
    pub meta: Meta,
    /// Functions sorted by key; a function's index is its [`FuncId`].
    pub functions: Vec<Function>,
    /// Edges sorted by (caller, callee), at most one per pair, weight > 0.
    pub edges: Vec<Edge>,
    /// Per-instruction weights, sorted by (function, offset), at most one per pair, weight >
    /// 0; empty when the importer had no instruction addresses (or they were not kept). They
    /// describe where inside each function its self weight fell, which BOLT's sample profile
    /// needs to count blocks (`sediment export --format fdata`).
    pub samples: Vec<Sample>,
}

impl Profile {
    /// Parses the text form (see `docs/design/profile-format.md`).
    pub fn from_text(text: &str) -> Result<Profile, Error> {
        format::parse(text, format::Extent::Whole)
    }

    /// Parses only the metadata of a profile's text: `text` is the file's beginning up to its
    /// first `fn` or `call` line ([`header_end`] finds it), or more (what follows that line is
    /// not read). Errors are those [`Profile::from_text`] gives for the same lines.
    pub fn meta_from_text(text: &str) -> Result<Meta, Error> {
        format::parse(&text[..header_end(text)], format::Extent::Header).map(|p| p.meta)
    }

    /// Writes the canonical text form. Equal profiles give identical bytes.
    pub fn to_text(&self) -> String {
        format::write(self)
    }

    /// The index of the function with this key, if the profile has it.
    pub fn find(&self, key: &FuncKey) -> Option<FuncId> {
        self.functions
            .binary_search_by(|f| f.key.cmp(key))
            .ok()
            .map(|i| i as FuncId)
    }

    /// The call edges spelled out as `(caller, callee, weight)` with each key's display form
    /// (`name` or `name (file)`), in canonical edge order: for reports and tests.
    pub fn named_edges(&self) -> Vec<(String, String, u64)> {
        self.edges
            .iter()
            .map(|e| {
                (
                    self.functions[e.caller as usize].key.to_string(),
                    self.functions[e.callee as usize].key.to_string(),
                    e.weight,
                )
            })
            .collect()
    }

    /// Sum of all functions' self weights.
    pub fn self_total(&self) -> u64 {
        self.functions.iter().map(|f| f.self_weight).sum()
    }

    /// The samples of function `f`, by offset (a slice of [`Profile::samples`]).
    pub fn samples_of(&self, f: FuncId) -> &[Sample] {
        let start = self.samples.partition_point(|s| s.func < f);
        let end = self.samples.partition_point(|s| s.func <= f);
        &self.samples[start..end]
    }

    /// True when functions are strictly sorted by key, edges strictly sorted by (caller,
    /// callee), every edge index is in range and every edge weight is positive, and likewise
    /// samples by (function, offset).
    pub fn is_canonical(&self) -> bool {
        let n = self.functions.len() as u64;
        self.functions.windows(2).all(|w| w[0].key < w[1].key)
            && self
                .edges
                .windows(2)
                .all(|w| (w[0].caller, w[0].callee) < (w[1].caller, w[1].callee))
            && self
                .edges
                .iter()
                .all(|e| u64::from(e.caller) < n && u64::from(e.callee) < n && e.weight > 0)
            && self
                .samples
                .windows(2)
                .all(|w| (w[0].func, w[0].offset) < (w[1].func, w[1].offset))
            && self
                .samples
                .iter()
                .all(|s| u64::from(s.func) < n && s.weight > 0)
    }
}

/// Accumulates functions and edges by key, in any order, and produces a canonical [`Profile`].
///
/// Importers call [`ProfileBuilder::add_self`] and [`ProfileBuilder::add_call`] as they meet
/// samples; weights of repeated keys are summed (saturating, so a crafted input cannot wrap).
///
/// **Memory.** Each distinct key is stored once: the first time it is seen it gets a dense
/// builder id (the order of first sight, `u32` like [`FuncId`]), and edges are keyed by the pair
/// of ids. [`ProfileBuilder::build`] then sorts the keys once, turns every builder id into its
/// rank in that order (its [`FuncId`]) and sorts the edges by the pair of ranks, which is the
/// order of (caller key, callee key) since ranks follow key order. The keys are moved, never
/// copied, into the profile. The maps are hash maps, whose iteration order is random; `build`
/// sorts everything it takes from them, so equal inputs still give equal profiles. A function
/// costs its key and a few hundred bytes, a call well under a hundred, whatever the names'
/// length ([`FUNCTION_COST`], [`CALL_COST`]); importers that must bound the memory a stranger's
/// file may take check [`ProfileBuilder::estimated_bytes`].
///
/// Turned down: ordered maps keyed by the keys themselves (`BTreeMap<(FuncKey, FuncKey), u64>`
/// for the edges), which this replaced. They kept the canonical order at every step, where only
/// `build` needs it, and stored a copy of both names for every call: a 42 MB BOLT fdata file of a
/// million calls between a million functions took 580 MB and 8.3 s to import (now 335 MB and
/// 2.7 s), one of calls between ever new short names 36 times its size.
#[derive(Debug, Default, Clone)]
pub struct ProfileBuilder {
    meta: Meta,
    /// Builder id of every key seen so far; ids are positions in `functions`.
    ids: Interner,
    /// Self weight and size, by builder id.
    functions: Vec<(u64, Option<u64>)>,
    /// Edge weights by (caller, callee) builder ids; never holds a zero weight added through
    /// [`ProfileBuilder::add_call`].
    edges: HashMap<(u32, u32), u64>,
    /// Sample weights by (function builder id, offset).
    samples: HashMap<(u32, u64), u64>,
}

/// Estimated bytes one distinct function costs a [`ProfileBuilder`] and the [`Profile`] it
/// builds, besides the bytes of its name and file: its hash-table entry (57 bytes, up to 16/7
/// times over for the table's free slots), its weights (24 bytes, twice over for the vector's
/// doubling), the sort buffer and the [`Function`] of the result (56 and 64 bytes, alive while
/// [`ProfileBuilder::build`] runs) and the allocator's overhead on the key's strings. Measured
/// at the peak of an fdata import of a million (and of two million) functions with short names,
/// beside as many calls: about 240 bytes each.
pub const FUNCTION_COST: u64 = 320;

/// Estimated bytes one distinct call edge costs a [`ProfileBuilder`] and the [`Profile`] it
/// builds: its hash-table entry (17 bytes, up to 16/7 times over) and the [`Edge`] of the result
/// (16 bytes). Measured at the peak of an fdata import of a million calls between a thousand
/// functions: about 55 bytes each.
pub const CALL_COST: u64 = 80;

/// Estimated bytes one distinct sample (function, offset) costs a [`ProfileBuilder`] and the
/// [`Profile`] it builds: its hash-table entry (25 bytes, up to 16/7 times over) and the
/// [`Sample`] of the result (24 bytes).
pub const SAMPLE_COST: u64 = 90;

impl ProfileBuilder {
    /// A builder with the given metadata.
    pub fn new(meta: Meta) -> Self {
        ProfileBuilder {
            meta,
            ..Default::default()
        }
    }

    /// Mutable access to the metadata (for example to add to `total` while importing).
    pub fn meta_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }

    /// The builder id of `key`, giving it the next one (with zero weight) if it is new.
    fn intern(&mut self, key: &FuncKey) -> u32 {
        let (id, new) = self.ids.id(key);
        if new {
            self.functions.push((0, None));
        }
        id
    }

    /// Makes sure the function exists (with zero weight if it is new).
    pub fn touch(&mut self, key: &FuncKey) {
        self.intern(key);
    }

    /// Adds `weight` to the function's self weight, creating it if needed.
    pub fn add_self(&mut self, key: &FuncKey, weight: u64) {
        let id = self.intern(key) as usize;
        let entry = &mut self.functions[id];
        entry.0 = entry.0.saturating_add(weight);
    }

    /// Records the function's code size (the largest size seen wins, so that a `.cold` part
    /// reported separately cannot shrink it).
    pub fn set_size(&mut self, key: &FuncKey, size: u64) {
        let id = self.intern(key) as usize;
        let entry = &mut self.functions[id];
        entry.1 = Some(entry.1.map_or(size, |s| s.max(size)));
    }

    /// Adds `weight` to the edge `caller -> callee`, creating both functions if needed.
    /// Zero weights only create the functions.
    pub fn add_call(&mut self, caller: &FuncKey, callee: &FuncKey, weight: u64) {
        let a = self.intern(caller);
        let c = self.intern(callee);
        if weight == 0 {
            return;
        }
        let slot = self.edges.entry((a, c)).or_insert(0);
        *slot = slot.saturating_add(weight);
    }

    /// Adds `weight` to the sample at `offset` bytes into the function, creating the function
    /// if needed (its self weight is not changed: callers add that with
    /// [`ProfileBuilder::add_self`]). Zero weights only create the function.
    pub fn add_sample(&mut self, key: &FuncKey, offset: u64, weight: u64) {
        let f = self.intern(key);
        if weight == 0 {
            return;
        }
        let slot = self.samples.entry((f, offset)).or_insert(0);
        *slot = slot.saturating_add(weight);
    }

    /// Number of distinct functions so far.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// True when no function was added.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// Number of distinct call edges so far.
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// Estimated peak memory, in bytes, of this builder and of the [`Profile`] that
    /// [`ProfileBuilder::build`] makes of it: [`FUNCTION_COST`] per function plus its name and
    /// file, [`CALL_COST`] per edge. An upper bound for the layout described on the type, meant
    /// for caps on hostile input, not for accounting.
    pub fn estimated_bytes(&self) -> u64 {
        (self.functions.len() as u64)
            .saturating_mul(FUNCTION_COST)
            .saturating_add(self.ids.key_bytes())
            .saturating_add((self.edges.len() as u64).saturating_mul(CALL_COST))
            .saturating_add((self.samples.len() as u64).saturating_mul(SAMPLE_COST))
    }

    /// The canonical profile.
    pub fn build(self) -> Profile {
        let functions = self.functions;
        self.ids.into_profile(
            self.meta,
            |id| functions[id as usize],
            self.edges.into_iter(),
            self.samples.into_iter(),
        )
    }
}

impl From<Profile> for ProfileBuilder {
    fn from(p: Profile) -> Self {
        let mut b = ProfileBuilder::new(p.meta.clone());
        // A canonical profile's keys are distinct, so builder ids are FuncIds; a non-canonical
        // one's later duplicate replaces the earlier entry's weights, as a map insert would.
        let mut ids = Vec::with_capacity(p.functions.len());
        for f in &p.functions {
            let id = b.intern(&f.key);
            b.functions[id as usize] = (f.self_weight, f.size);
            ids.push(id);
        }
        for e in &p.edges {
            // Out-of-range indices only occur in non-canonical profiles; skip rather than panic.
            let (Some(&a), Some(&c)) = (ids.get(e.caller as usize), ids.get(e.callee as usize))
            else {
                continue;
            };
            b.edges.insert((a, c), e.weight);
        }
        for s in &p.samples {
            if let Some(&f) = ids.get(s.func as usize) {
                b.samples.insert((f, s.offset), s.weight);
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> FuncKey {
        FuncKey::global(n)
    }

    #[test]
    fn builder_sums_and_sorts() {
        let mut b = ProfileBuilder::new(Meta::default());
        b.add_self(&key("zeta"), 5);
        b.add_self(&key("alpha"), 2);
        b.add_self(&key("zeta"), 1);
        b.add_call(&key("zeta"), &key("alpha"), 3);
        b.add_call(&key("zeta"), &key("alpha"), 4);
        let p = b.build();
        assert!(p.is_canonical());
        assert_eq!(p.functions[0].key.name, "alpha");
        assert_eq!(p.functions[1].self_weight, 6);
        assert_eq!(
            p.edges,
            vec![Edge {
                caller: 1,
                callee: 0,
                weight: 7
            }]
        );
        assert_eq!(p.find(&key("zeta")), Some(1));
        assert_eq!(p.find(&key("nope")), None);
    }

    #[test]
    fn same_named_statics_stay_apart() {
        let mut b = ProfileBuilder::new(Meta::default());
        b.add_self(&FuncKey::local("helper", "a.c"), 1);
        b.add_self(&FuncKey::local("helper", "b.c"), 2);
        b.add_self(&key("helper"), 3);
        let p = b.build();
        assert_eq!(p.functions.len(), 3);
        assert_eq!(p.self_total(), 6);
    }

    #[test]
    fn builder_weights_saturate() {
        let mut b = ProfileBuilder::new(Meta::default());
        b.add_self(&key("f"), u64::MAX);
        b.add_self(&key("f"), 10);
        assert_eq!(b.build().functions[0].self_weight, u64::MAX);
    }

    /// The builder this one replaced, kept as the reference for the canonical order: maps
    /// keyed by the keys themselves, iterated in key order.
    #[derive(Default)]
    struct OldBuilder {
        functions: BTreeMap<FuncKey, (u64, Option<u64>)>,
        edges: BTreeMap<(FuncKey, FuncKey), u64>,
    }

    impl OldBuilder {
        fn touch(&mut self, k: &FuncKey) -> &mut (u64, Option<u64>) {
            self.functions.entry(k.clone()).or_insert((0, None))
        }

        fn build(self, meta: Meta) -> Profile {
            let index: BTreeMap<&FuncKey, FuncId> = (self.functions.keys())
                .enumerate()
                .map(|(i, k)| (k, i as FuncId))
                .collect();
            let edges = (self.edges.iter())
                .map(|((a, b), &weight)| Edge {
                    caller: index[a],
                    callee: index[b],
                    weight,
                })
                .collect();
            let functions = (self.functions.iter())
                .map(|(k, &(self_weight, size))| Function {
                    key: k.clone(),
                    self_weight,
                    size,
                })
                .collect();
            Profile {
                meta,
                functions,
                edges,
                samples: Vec::new(),
            }
        }
    }

    /// One builder call: 0 add_self, 1 set_size, 2 touch, 3 add_call (with the second key).
    type Op = (u8, usize, usize, u64);

    /// Keys whose first-sight order differs from their sorted order: same-named statics of two
    /// files and a global of that name, names that are prefixes of others, a non-ASCII name.
    fn universe() -> Vec<FuncKey> {
        vec![
            key("zeta"),
            FuncKey::local("helper", "b.c"),
            key("main"),
            key("helper"),
            FuncKey::local("helper", "a.c"),
            key("ma"),
            key("\u{e9}t\u{e9}"),
            key("Main"),
            key("work"),
            FuncKey::local("work", "w.c"),
            key(""),
        ]
    }

    fn apply(ops: &[Op]) -> (Profile, Profile) {
        let keys = universe();
        let meta = Meta {
            binary: "b".into(),
            ..Meta::default()
        };
        let mut new = ProfileBuilder::new(meta.clone());
        let mut old = OldBuilder::default();
        for &(op, a, c, w) in ops {
            let (a, c) = (&keys[a % keys.len()], &keys[c % keys.len()]);
            match op % 4 {
                0 => {
                    new.add_self(a, w);
                    let f = old.touch(a);
                    f.0 = f.0.saturating_add(w);
                }
                1 => {
                    new.set_size(a, w);
                    let f = old.touch(a);
                    f.1 = Some(f.1.map_or(w, |s| s.max(w)));
                }
                2 => {
                    new.touch(a);
                    old.touch(a);
                }
                _ => {
                    new.add_call(a, c, w);
                    old.touch(a);
                    old.touch(c);
                    if w > 0 {
                        let e = old.edges.entry((a.clone(), c.clone())).or_insert(0);
                        *e = e.saturating_add(w);
                    }
                }
            }
        }
        (new.build(), old.build(meta))
    }

    #[test]
    fn interning_keeps_the_old_canonical_order() {
        // Keys first seen in reverse of their sorted order still come out sorted, with edges
        // sorted by (caller key, callee key), and print byte-identically to the old builder.
        let ops: Vec<Op> = (0..60u64)
            .map(|i| {
                (
                    (i % 4) as u8,
                    (i * 7 % 11) as usize,
                    (i * 5 % 11) as usize,
                    i % 3,
                )
            })
            .collect();
        let (new, old) = apply(&ops);
        assert!(new.is_canonical());
        assert_eq!(new.functions.len(), universe().len());
        assert!(!new.edges.is_empty());
        assert_eq!(new, old);
        assert_eq!(new.to_text(), old.to_text());
    }

    #[test]
    fn estimate_counts_each_key_and_call_once() {
        // A thousand records between two functions cost two functions and one call.
        let mut b = ProfileBuilder::new(Meta::default());
        for _ in 0..1000 {
            b.add_call(&key("main"), &FuncKey::local("work", "w.c"), 1);
            b.add_self(&key("main"), 1);
        }
        assert_eq!((b.len(), b.edge_count()), (2, 1));
        let names = ("main".len() + "work".len() + "w.c".len()) as u64;
        assert_eq!(b.estimated_bytes(), 2 * FUNCTION_COST + names + CALL_COST);
    }

    proptest::proptest! {
        #[test]
        fn builder_matches_the_old_builder(
            ops in proptest::collection::vec(
                (0u8..4, 0usize..11, 0usize..11, proptest::prop_oneof![0u64..4, proptest::prelude::Just(u64::MAX)]),
                0..80,
            ),
        ) {
            // Any sequence of calls gives the profile (and the bytes) the old builder gave.
            let (new, old) = apply(&ops);
            proptest::prop_assert!(new.is_canonical());
            proptest::prop_assert_eq!(new.to_text(), old.to_text());
            proptest::prop_assert_eq!(&new, &old);
            proptest::prop_assert_eq!(ProfileBuilder::from(new.clone()).build(), new);
        }
    }

    // The header alone parses to the same meta as the whole text; header errors are the same.
    #[test]
    fn meta_from_header() {
        let text = "sediment-profile 1\nmeta binary demo\nmeta submitter h\n# c\nfn 0 1 - f -\nfn 1 1 - g -\ncall 0 1 1\n";
        let end = header_end(text);
        assert_eq!(&text[end..end + 3], "fn ");
        let whole = Profile::from_text(text).unwrap().meta;
        assert_eq!(Profile::meta_from_text(&text[..end]).unwrap(), whole);
        assert_eq!(Profile::meta_from_text(text).unwrap(), whole);
        let bad = "sediment-profile 1\nmeta binary demo\nmeta binary x\nfn 0 1 - f -\n";
        assert_eq!(
            Profile::meta_from_text(bad).unwrap_err(),
            Profile::from_text(bad).unwrap_err()
        );
        assert_eq!(header_end("sediment-profile 1\nmeta binary d\n"), 33);
        // A version-2 header: its `at` lines come after the header, and are not required of it
        // (`merge` with a fleet option reads the headers first).
        let text = "sediment-profile 2\nmeta binary demo\nfn 0 1 - f -\nat 0 4 1\n";
        let end = header_end(text);
        let whole = Profile::from_text(text).unwrap().meta;
        assert_eq!(Profile::meta_from_text(&text[..end]).unwrap(), whole);
        assert_eq!(Profile::meta_from_text(text).unwrap(), whole);
    }

    #[test]
    fn round_trip_through_builder() {
        let mut b = ProfileBuilder::new(Meta::default());
        b.add_call(&key("a"), &key("b"), 3);
        b.set_size(&key("b"), 40);
        let p = b.build();
        let q = ProfileBuilder::from(p.clone()).build();
        assert_eq!(p, q);
    }
}
