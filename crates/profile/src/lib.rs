//! The Sediment profile model: functions, their self weight, and weighted call edges of one
//! executable, plus the metadata that says where the numbers came from.
//!
//! Every importer produces a [`Profile`], every ordering algorithm consumes one, and the text
//! form written by [`Profile::to_text`] is the one file a user keeps per executable (documented
//! in `docs/profile-format.md`).
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

mod format;
mod key;
mod merge;
mod names;
mod order_file;

pub use format::{escape, quote, quote_whole, unescape, FORMAT_VERSION, MAGIC, QUOTE_MAX};
pub use key::{base_name, FuncKey};
pub use merge::{merge, merge_with, MergeOptions, Merger, FRACTION_BITS, MERGE_SCALE};
pub use names::{
    match_profile, normalize, remap, Mapping, Match, MatchReport, MatchRule, Normalized,
    SuffixKind, REPORT_NAMES,
};
pub use order_file::{FunctionOrder, ORDER_MAGIC};

use std::collections::BTreeMap;

/// Errors of this crate. Parse errors carry the 1-based line number of the offending line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The text is not a Sediment profile at all (wrong or missing first line).
    #[error("not a sediment profile (first line must be `{MAGIC} {FORMAT_VERSION}`)")]
    NotAProfile,
    /// The file says it is a profile of a version this build cannot read.
    #[error("unsupported profile format version {0} (this build reads version {FORMAT_VERSION})")]
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

/// The [`Meta::extra`] key counting the recordings merged into one profile-directory file
/// (`sediment record --prof-dir`): its weight when the next recording is merged in
/// (docs/profile-format.md).
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
}

impl Profile {
    /// Parses the text form (see `docs/profile-format.md`).
    pub fn from_text(text: &str) -> Result<Profile, Error> {
        format::parse(text)
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

    /// True when functions are strictly sorted by key, edges strictly sorted by (caller,
    /// callee), every edge index is in range and every edge weight is positive.
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
    }
}

/// Accumulates functions and edges by key, in any order, and produces a canonical [`Profile`].
///
/// Importers call [`ProfileBuilder::add_self`] and [`ProfileBuilder::add_call`] as they meet
/// samples; weights of repeated keys are summed (saturating, so a crafted input cannot wrap).
#[derive(Debug, Default, Clone)]
pub struct ProfileBuilder {
    meta: Meta,
    functions: BTreeMap<FuncKey, (u64, Option<u64>)>,
    edges: BTreeMap<(FuncKey, FuncKey), u64>,
}

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

    /// Makes sure the function exists (with zero weight if it is new).
    pub fn touch(&mut self, key: &FuncKey) {
        if !self.functions.contains_key(key) {
            self.functions.insert(key.clone(), (0, None));
        }
    }

    /// Adds `weight` to the function's self weight, creating it if needed.
    pub fn add_self(&mut self, key: &FuncKey, weight: u64) {
        self.touch(key);
        let entry = self.functions.get_mut(key).expect("just touched");
        entry.0 = entry.0.saturating_add(weight);
    }

    /// Records the function's code size (the largest size seen wins, so that a `.cold` part
    /// reported separately cannot shrink it).
    pub fn set_size(&mut self, key: &FuncKey, size: u64) {
        self.touch(key);
        let entry = self.functions.get_mut(key).expect("just touched");
        entry.1 = Some(entry.1.map_or(size, |s| s.max(size)));
    }

    /// Adds `weight` to the edge `caller -> callee`, creating both functions if needed.
    /// Zero weights only create the functions.
    pub fn add_call(&mut self, caller: &FuncKey, callee: &FuncKey, weight: u64) {
        self.touch(caller);
        self.touch(callee);
        if weight == 0 {
            return;
        }
        let slot = self
            .edges
            .entry((caller.clone(), callee.clone()))
            .or_insert(0);
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

    /// The canonical profile.
    pub fn build(self) -> Profile {
        let index: BTreeMap<&FuncKey, FuncId> = self
            .functions
            .keys()
            .enumerate()
            .map(|(i, k)| (k, i as FuncId))
            .collect();
        let edges = self
            .edges
            .iter()
            .map(|((a, b), &w)| Edge {
                caller: index[a],
                callee: index[b],
                weight: w,
            })
            .collect();
        let functions = self
            .functions
            .iter()
            .map(|(k, &(w, size))| Function {
                key: k.clone(),
                self_weight: w,
                size,
            })
            .collect();
        Profile {
            meta: self.meta,
            functions,
            edges,
        }
    }
}

impl From<Profile> for ProfileBuilder {
    fn from(p: Profile) -> Self {
        let mut b = ProfileBuilder::new(p.meta.clone());
        for f in &p.functions {
            b.functions.insert(f.key.clone(), (f.self_weight, f.size));
        }
        for e in &p.edges {
            let a = p.functions[e.caller as usize].key.clone();
            let c = p.functions[e.callee as usize].key.clone();
            b.edges.insert((a, c), e.weight);
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
