//! Matching a profile's functions to the functions of another build.
//!
//! A profile is recorded on one build and applied to the next one, whose symbols differ a
//! little: GCC names the clones its interprocedural passes make after the original with a
//! suffix (`foo.constprop.0` for constant propagation, `foo.isra.0` for interprocedural scalar
//! replacement, `foo.part.0` for partial inlining, `foo.cold` for the split-off cold part,
//! `foo.localalias` for the local alias of a global, `foo.lto_priv.0` for statics renamed by
//! LTO), LLVM's ThinLTO promotes statics to `foo.llvm.1234567890`, and the numbers change from
//! build to build. Suffixes combine (`foo.isra.0.constprop.1`, `foo.part.0.cold`). The
//! [`normalize`] function strips such suffixes from the end, one at a time, and says which it
//! found; a name is never reduced to nothing. GCC documents the suffixes under
//! `-fipa-cp-clone`, `-fipa-sra`, `-fpartial-inlining` and `-freorder-blocks-and-partition`;
//! LLVM under `FunctionImportUtils` (promotion of locals).
//!
//! [`match_profile`] maps each profile function to one target function by the first rule that
//! finds a candidate:
//! 1. [`MatchRule::Exact`]: the same [`FuncKey`] (name and file).
//! 2. [`MatchRule::OtherFile`]: the same name with another file or none (a static that became
//!    global, or a target whose source file could not be told).
//! 3. [`MatchRule::Normalized`]: the same name after [`normalize`] on both sides.
//! 4. [`MatchRule::RustPath`]: the same Rust path once the build-specific hashes are removed
//!    ([`rust_path`]), on names [`normalize`]d first.
//!
//! Rust symbol names carry hashes that change whenever anything that goes into them changes: a
//! dependency's version or features, the compiler, the crate's own metadata. Legacy mangling
//! (`_ZN` path `17h` + 16 hex digits `E`, rustc's default) ends every name with a hash
//! element; v0 mangling (`_R...`, `-C symbol-mangling-version=v0`) carries a disambiguator per
//! crate root (`C s<base62>_ <crate>`) and an instantiating crate. [`rust_path`] keeps what
//! survives a rebuild: for legacy names the mangled name without its hash element, for v0 names
//! the demangled path without disambiguators (`rustc-demangle`'s alternate form). Legacy names
//! do not spell generic arguments, so one path can name several instances
//! (`RawVec<T,A>::grow_one` for each `T`); among several candidates the one whose symbol size
//! equals the profile function's recorded size wins when exactly one does, and otherwise the
//! function stays unmatched and is counted as ambiguous ([`MatchReport::rust_ambiguous`]), since
//! sending one instance's weight to another would place the wrong code.
//!
//! When a rule finds several candidates, the one with the same file as the profile function
//! wins, else the first in sorted key order (name, then file with "no file" first): the plain
//! `foo` sorts before `foo.cold` and `foo.constprop.0`, so an unsuffixed body is preferred. The
//! mapping is many-to-one: `foo.constprop.0` and `foo.constprop.1` of an old build may both
//! land on `foo` of the new one, and [`remap`] then sums them, as AutoFDO does when it matches
//! samples by the name with the clone suffix removed.
//!
//! Non-goals: matching by code similarity or source lines (BOLT's stale-profile matching uses
//! basic-block hashes), and demangling beyond Rust's v0 paths. Names are compared as bytes.

use crate::{FuncId, FuncKey, Profile, ProfileBuilder};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// How many names a [`MatchReport`] lists per side.
pub const REPORT_NAMES: usize = 5;

/// A compiler-generated suffix recognized by [`normalize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum SuffixKind {
    /// `.constprop.N`: GCC IPA constant-propagation clone.
    ConstProp,
    /// `.isra.N`: GCC interprocedural scalar replacement of aggregates.
    Isra,
    /// `.part.N`: GCC partial inlining (the outlined rest of a function).
    Part,
    /// `.lto_priv.N`: GCC LTO rename of a static.
    LtoPriv,
    /// `.llvm.N`: LLVM ThinLTO promotion of a local.
    Llvm,
    /// `.cold` or `.cold.N`: the cold part split off by hot/cold partitioning.
    Cold,
    /// `.localalias` or `.localalias.N`: GCC's local alias of a global function.
    LocalAlias,
    /// `.clone.N`: the older GCC clone suffix.
    Clone,
}

impl SuffixKind {
    /// The suffix word as it appears in a symbol name.
    pub fn word(self) -> &'static str {
        match self {
            SuffixKind::ConstProp => "constprop",
            SuffixKind::Isra => "isra",
            SuffixKind::Part => "part",
            SuffixKind::LtoPriv => "lto_priv",
            SuffixKind::Llvm => "llvm",
            SuffixKind::Cold => "cold",
            SuffixKind::LocalAlias => "localalias",
            SuffixKind::Clone => "clone",
        }
    }

    fn from_word(w: &str) -> Option<SuffixKind> {
        Some(match w {
            "constprop" => SuffixKind::ConstProp,
            "isra" => SuffixKind::Isra,
            "part" => SuffixKind::Part,
            "lto_priv" => SuffixKind::LtoPriv,
            "llvm" => SuffixKind::Llvm,
            "cold" => SuffixKind::Cold,
            "localalias" => SuffixKind::LocalAlias,
            "clone" => SuffixKind::Clone,
            _ => return None,
        })
    }

    /// True when the word may stand without a number (`.cold`, `.localalias`).
    fn number_optional(self) -> bool {
        matches!(self, SuffixKind::Cold | SuffixKind::LocalAlias)
    }
}

/// A name split into its base and the compiler suffixes that followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized<'a> {
    /// The name without any recognized suffix.
    pub base: &'a str,
    /// The suffixes found, in the order they appear in the name (left to right).
    pub suffixes: Vec<SuffixKind>,
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Strips compiler clone and LTO suffixes from the end of `name` (see the module docs).
///
/// `foo.isra.0.constprop.1` gives base `foo` and suffixes `[Isra, ConstProp]`; `foo.part.0.cold`
/// gives `foo` and `[Part, Cold]`; `foo.bar` and `.cold` are returned unchanged.
pub fn normalize(name: &str) -> Normalized<'_> {
    let mut base = name;
    let mut found = Vec::new();
    while let Some((rest, last)) = base.rsplit_once('.') {
        // `.word.N`
        if is_number(last) {
            if let Some((before, word)) = rest.rsplit_once('.') {
                if let Some(kind) = SuffixKind::from_word(word) {
                    if !before.is_empty() {
                        found.push(kind);
                        base = before;
                        continue;
                    }
                }
            }
            break;
        }
        // `.word` alone, for the words that allow it.
        match SuffixKind::from_word(last) {
            Some(kind) if kind.number_optional() && !rest.is_empty() => {
                found.push(kind);
                base = rest;
            }
            _ => break,
        }
    }
    found.reverse();
    Normalized {
        base,
        suffixes: found,
    }
}

/// Length of the hash element of a legacy Rust symbol: `17h` and 16 hex digits.
const LEGACY_HASH_LEN: usize = 19;

/// The part of a Rust symbol name that stays the same across rebuilds, or `None` when `name`
/// (after [`normalize`]) is not a Rust symbol with a build hash (see the module docs).
///
/// `_ZN4core3ptr13drop_in_place17h0123456789abcdefE` gives `_ZN4core3ptr13drop_in_placeE`;
/// `_RNvCs1234_5mycrate4main` gives `mycrate::main`. C++ names (`_ZN3foo3barEv`) and legacy
/// names without a hash give `None`.
pub fn rust_path(name: &str) -> Option<Cow<'_, str>> {
    let base = normalize(name).base;
    if let Some(body) = base.strip_prefix("_ZN").and_then(|b| b.strip_suffix('E')) {
        let cut = body.len().checked_sub(LEGACY_HASH_LEN)?;
        let (path, hash) = body.split_at_checked(cut)?;
        let digits = hash.strip_prefix("17h")?;
        if path.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return Some(Cow::Owned(format!("_ZN{path}E")));
    }
    if base.starts_with("_R") {
        let d = rustc_demangle::try_demangle(base).ok()?;
        return Some(Cow::Owned(format!("{d:#}")));
    }
    None
}

/// Which rule of [`match_profile`] matched a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchRule {
    /// Same name and file.
    Exact,
    /// Same name, another file or none.
    OtherFile,
    /// Same name after stripping compiler suffixes.
    Normalized,
    /// Same Rust path once the build hashes are removed ([`rust_path`]).
    RustPath,
}

/// The target function a profile function was matched to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    /// Index into the `target_functions` slice given to [`match_profile`].
    pub target: usize,
    /// The rule that matched.
    pub rule: MatchRule,
}

/// For each profile function (by [`FuncId`]), its match in the target, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// `matches[id]` is the match of `profile.functions[id]`.
    pub matches: Vec<Option<Match>>,
}

impl Mapping {
    /// The match of one profile function.
    pub fn get(&self, id: FuncId) -> Option<Match> {
        self.matches.get(id as usize).copied().flatten()
    }
}

/// How well a profile matched a target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MatchReport {
    /// Sum of the profile's self weights.
    pub profile_weight: u64,
    /// Sum of the self weights of matched profile functions.
    pub matched_weight: u64,
    /// Functions matched by [`MatchRule::Exact`].
    pub exact: usize,
    /// Functions matched by [`MatchRule::OtherFile`].
    pub other_file: usize,
    /// Functions matched by [`MatchRule::Normalized`].
    pub normalized: usize,
    /// Functions matched by [`MatchRule::RustPath`].
    pub rust_path: usize,
    /// Profile functions whose Rust path names several target functions, none told apart by
    /// size: left unmatched (and counted in `missing_in_target` too).
    pub rust_ambiguous: usize,
    /// Profile functions with no match.
    pub missing_in_target: usize,
    /// The heaviest of those (at most [`REPORT_NAMES`], heaviest first, ties by key), with
    /// their self weight.
    pub heaviest_missing_in_target: Vec<(FuncKey, u64)>,
    /// Target functions no profile function was matched to.
    pub missing_in_profile: usize,
    /// The first of those in sorted key order (at most [`REPORT_NAMES`]); the target side has
    /// no weights, so "heaviest" cannot apply.
    pub first_missing_in_profile: Vec<FuncKey>,
}

impl MatchReport {
    /// Matched share of the profile's self weight, from 0 to 1 (1 for a weightless profile).
    pub fn matched_share(&self) -> f64 {
        if self.profile_weight == 0 {
            1.0
        } else {
            self.matched_weight as f64 / self.profile_weight as f64
        }
    }
}

/// The alternate form (`{:#}`) shows function names demangled.
impl fmt::Display for MatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "matched {:.1}% of the profile weight ({} of {})",
            self.matched_share() * 100.0,
            self.matched_weight,
            self.profile_weight
        )?;
        write!(
            f,
            "functions matched: {} exact, {} by name with another file, {} by normalized name",
            self.exact, self.other_file, self.normalized
        )?;
        // Shown only when the rule found something, so reports on C programs keep their shape.
        if self.rust_path > 0 || self.rust_ambiguous > 0 {
            write!(
                f,
                ", {} by Rust path without hash ({} ambiguous, left out)",
                self.rust_path, self.rust_ambiguous
            )?;
        }
        writeln!(f)?;
        write!(
            f,
            "profile functions not in the target: {}",
            self.missing_in_target
        )?;
        let alt = f.alternate();
        for (k, w) in &self.heaviest_missing_in_target {
            if alt {
                write!(f, "\n  {k:#} ({w})")?;
            } else {
                write!(f, "\n  {k} ({w})")?;
            }
        }
        write!(
            f,
            "\ntarget functions not in the profile: {}",
            self.missing_in_profile
        )?;
        for k in &self.first_missing_in_profile {
            if alt {
                write!(f, "\n  {k:#}")?;
            } else {
                write!(f, "\n  {k}")?;
            }
        }
        writeln!(f)
    }
}

/// Picks among candidate target indices (already in sorted key order): the same file as
/// `key` if one has it, else the first.
fn pick(candidates: &[usize], targets: &[FuncKey], key: &FuncKey) -> Option<usize> {
    candidates
        .iter()
        .copied()
        .find(|&t| targets[t].file == key.file)
        .or_else(|| candidates.first().copied())
}

/// Picks one instance of a Rust path: the only candidate, else the only one whose size is
/// `size`; `None` when that leaves several or none.
fn pick_instance(candidates: &[usize], sizes: &[u64], size: Option<u64>) -> Option<usize> {
    if let [only] = candidates {
        return Some(*only);
    }
    let size = size.filter(|&s| s > 0)?;
    let mut same = candidates
        .iter()
        .copied()
        .filter(|&t| sizes.get(t) == Some(&size));
    match (same.next(), same.next()) {
        (Some(t), None) => Some(t),
        _ => None,
    }
}

/// Matches each function of `profile` to one of `target_functions` (see the module docs for
/// the rules and tie-breaking) and reports how much of the profile found a home.
///
/// `target_functions` need not be sorted or unique; for duplicate keys the lowest index wins.
/// Without the targets' sizes, several Rust instances of one path are never told apart; see
/// [`match_profile_sized`].
pub fn match_profile(profile: &Profile, target_functions: &[FuncKey]) -> (Mapping, MatchReport) {
    match_profile_sized(profile, target_functions, &[])
}

/// [`match_profile`] with each target function's symbol size (`target_sizes[i]` of
/// `target_functions[i]`; 0 or a shorter slice: unknown), which tells apart the instances of one
/// Rust path by the profile functions' recorded sizes.
pub fn match_profile_sized(
    profile: &Profile,
    target_functions: &[FuncKey],
    target_sizes: &[u64],
) -> (Mapping, MatchReport) {
    // Target indices in sorted key order, ties by index: this is "sorted order" for picking.
    let mut order: Vec<usize> = (0..target_functions.len()).collect();
    order.sort_by(|&a, &b| {
        target_functions[a]
            .cmp(&target_functions[b])
            .then(a.cmp(&b))
    });
    let mut exact: BTreeMap<&FuncKey, usize> = BTreeMap::new();
    let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut by_base: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut by_rust: BTreeMap<Cow<'_, str>, Vec<usize>> = BTreeMap::new();
    for &t in &order {
        let k = &target_functions[t];
        exact.entry(k).or_insert(t);
        by_name.entry(k.name.as_str()).or_default().push(t);
        by_base.entry(normalize(&k.name).base).or_default().push(t);
        if let Some(p) = rust_path(&k.name) {
            by_rust.entry(p).or_default().push(t);
        }
    }

    let mut report = MatchReport::default();
    let mut used = vec![false; target_functions.len()];
    let mut missing: Vec<(FuncKey, u64)> = Vec::new();
    let mut matches = Vec::with_capacity(profile.functions.len());
    for f in &profile.functions {
        let key = &f.key;
        report.profile_weight = report.profile_weight.saturating_add(f.self_weight);
        let m = if let Some(&t) = exact.get(key) {
            Some(Match {
                target: t,
                rule: MatchRule::Exact,
            })
        } else if let Some(t) = by_name
            .get(key.name.as_str())
            .and_then(|c| pick(c, target_functions, key))
        {
            Some(Match {
                target: t,
                rule: MatchRule::OtherFile,
            })
        } else if let Some(t) = by_base
            .get(normalize(&key.name).base)
            .and_then(|c| pick(c, target_functions, key))
        {
            Some(Match {
                target: t,
                rule: MatchRule::Normalized,
            })
        } else {
            let candidates = rust_path(&key.name).and_then(|p| by_rust.get(&p));
            match candidates.map(|c| pick_instance(c, target_sizes, f.size)) {
                Some(Some(t)) => Some(Match {
                    target: t,
                    rule: MatchRule::RustPath,
                }),
                Some(None) => {
                    report.rust_ambiguous += 1;
                    None
                }
                None => None,
            }
        };
        match m {
            Some(m) => {
                used[m.target] = true;
                report.matched_weight = report.matched_weight.saturating_add(f.self_weight);
                match m.rule {
                    MatchRule::Exact => report.exact += 1,
                    MatchRule::OtherFile => report.other_file += 1,
                    MatchRule::Normalized => report.normalized += 1,
                    MatchRule::RustPath => report.rust_path += 1,
                }
            }
            None => missing.push((key.clone(), f.self_weight)),
        }
        matches.push(m);
    }

    report.missing_in_target = missing.len();
    // Heaviest first; equal weights in key order (the profile's order, already sorted).
    missing.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    missing.truncate(REPORT_NAMES);
    report.heaviest_missing_in_target = missing;
    let unused: Vec<usize> = order.iter().copied().filter(|&t| !used[t]).collect();
    report.missing_in_profile = unused.len();
    report.first_missing_in_profile = unused
        .iter()
        .take(REPORT_NAMES)
        .map(|&t| target_functions[t].clone())
        .collect();
    (Mapping { matches }, report)
}

/// Rewrites `profile` onto the target's keys using `mapping` (from [`match_profile`] with the
/// same `target_functions`). Weights of functions mapped to one target are summed, sizes are
/// dropped (they described the old build), unmatched functions and their edges are dropped,
/// and so are edges that became self-calls only because both ends collapsed onto one target
/// (a call from `foo` to its own `foo.part.0` is not a call in the new build). Metadata is kept.
pub fn remap(profile: &Profile, mapping: &Mapping, target_functions: &[FuncKey]) -> Profile {
    let target = |id: FuncId| mapping.get(id).and_then(|m| target_functions.get(m.target));
    let mut b = ProfileBuilder::new(profile.meta.clone());
    for (i, f) in profile.functions.iter().enumerate() {
        if let Some(k) = target(i as FuncId) {
            b.add_self(k, f.self_weight);
        }
    }
    for e in &profile.edges {
        if let (Some(a), Some(c)) = (target(e.caller), target(e.callee)) {
            if a != c || e.caller == e.callee {
                b.add_call(a, c, e.weight);
            }
        }
    }
    b.build()
}

/// The build a profile is carried over to ([`retarget`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target<'a> {
    /// `meta binary` of the result: the build as the user named it.
    pub binary: String,
    /// The build's build-id (`None` removes the old build's).
    pub build_id: Option<String>,
    /// The build's architecture.
    pub arch: Option<String>,
    /// The build's function keys (the `target_functions` of [`match_profile`]).
    pub functions: &'a [FuncKey],
    /// The symbol size of each of `functions`, in the same order; 0 when the symbol did not
    /// say (hand-written assembly).
    pub sizes: &'a [u64],
}

/// [`remap`] onto `target`, and the result takes the target's identity: its `binary`,
/// `build-id` and `arch`, and the target's symbol sizes (of the lowest-indexed function of a
/// key, the one [`match_profile`] maps duplicates to; size 0 is "unknown", not an empty
/// function); `meta matched-from` records the old `binary`. `total` is kept, so the weight that
/// did not match still counts as unattributed.
pub fn retarget(profile: &Profile, mapping: &Mapping, target: Target<'_>) -> Profile {
    let mut moved = remap(profile, mapping, target.functions);
    let mut sizes: std::collections::BTreeMap<&FuncKey, u64> = std::collections::BTreeMap::new();
    for (key, &size) in target.functions.iter().zip(target.sizes) {
        sizes.entry(key).or_insert(size);
    }
    for f in &mut moved.functions {
        f.size = sizes.get(&f.key).copied().filter(|&s| s > 0);
    }
    let old_binary = std::mem::take(&mut moved.meta.binary);
    let meta = &mut moved.meta;
    meta.binary = target.binary;
    meta.build_id = target.build_id;
    meta.arch = target.arch;
    meta.extra.insert("matched-from".to_string(), old_binary);
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Meta;
    use SuffixKind::*;

    fn norm(name: &str) -> (&str, Vec<SuffixKind>) {
        let n = normalize(name);
        (n.base, n.suffixes)
    }

    // Every documented suffix, alone and combined, reduces to the base name.
    #[test]
    fn strips_suffixes() {
        assert_eq!(norm("foo"), ("foo", vec![]));
        assert_eq!(norm("foo.constprop.0"), ("foo", vec![ConstProp]));
        assert_eq!(norm("foo.isra.12"), ("foo", vec![Isra]));
        assert_eq!(norm("foo.part.0"), ("foo", vec![Part]));
        assert_eq!(norm("foo.lto_priv.3"), ("foo", vec![LtoPriv]));
        assert_eq!(norm("foo.llvm.8374629182736"), ("foo", vec![Llvm]));
        assert_eq!(norm("foo.cold"), ("foo", vec![Cold]));
        assert_eq!(norm("foo.cold.7"), ("foo", vec![Cold]));
        assert_eq!(norm("foo.localalias"), ("foo", vec![LocalAlias]));
        assert_eq!(norm("foo.clone.2"), ("foo", vec![Clone]));
        assert_eq!(
            norm("foo.isra.0.constprop.1"),
            ("foo", vec![Isra, ConstProp])
        );
        assert_eq!(norm("foo.part.0.cold"), ("foo", vec![Part, Cold]));
        assert_eq!(
            norm("_ZN3foo3barEv.constprop.0.isra.0"),
            ("_ZN3foo3barEv", vec![ConstProp, Isra])
        );
    }

    // Lookalikes are left alone: unknown words, missing numbers, nothing left of the name.
    #[test]
    fn keeps_non_suffixes() {
        assert_eq!(norm("foo.bar"), ("foo.bar", vec![]));
        assert_eq!(norm("foo.constprop"), ("foo.constprop", vec![]));
        assert_eq!(norm("foo.isra.x"), ("foo.isra.x", vec![]));
        assert_eq!(norm("foo.llvm.12a"), ("foo.llvm.12a", vec![]));
        assert_eq!(norm("foo.1"), ("foo.1", vec![]));
        assert_eq!(norm(".cold"), (".cold", vec![]));
        assert_eq!(norm("cold"), ("cold", vec![]));
        assert_eq!(norm(".part.0"), (".part.0", vec![]));
        assert_eq!(norm("foo.bar.cold"), ("foo.bar", vec![Cold]));
        assert_eq!(norm(""), ("", vec![]));
    }

    fn profile(fns: &[(&str, Option<&str>, u64)], calls: &[(usize, usize, u64)]) -> Profile {
        let keys: Vec<FuncKey> = fns
            .iter()
            .map(|(n, f, _)| FuncKey {
                name: n.to_string(),
                file: f.map(str::to_string),
            })
            .collect();
        let mut b = ProfileBuilder::new(Meta::default());
        for (k, (_, _, w)) in keys.iter().zip(fns) {
            b.add_self(k, *w);
        }
        for &(a, c, w) in calls {
            b.add_call(&keys[a], &keys[c], w);
        }
        b.build()
    }

    fn g(n: &str) -> FuncKey {
        FuncKey::global(n)
    }

    fn l(n: &str, f: &str) -> FuncKey {
        FuncKey::local(n, f)
    }

    // The three rules in order, with the documented tie-breaking and an exact report.
    #[test]
    fn matches_by_rule() {
        let p = profile(
            &[
                ("main", None, 10),               // exact
                ("helper", Some("a.c"), 20),      // exact (local of a.c)
                ("util", Some("b.c"), 30),        // other file: became global
                ("work.constprop.0", None, 40),   // normalized -> work
                ("parse.isra.0", Some("p.c"), 5), // normalized, same file preferred
                ("gone", None, 50),               // missing
                ("lost.cold", None, 7),           // missing
            ],
            &[],
        );
        let targets = vec![
            g("work.part.1"),
            g("main"),
            l("helper", "a.c"),
            g("util"),
            g("work"),
            l("parse", "q.c"),
            l("parse.constprop.2", "p.c"),
            g("unused_b"),
            g("unused_a"),
        ];
        let (m, r) = match_profile(&p, &targets);
        // Profile order: gone, helper, lost.cold, main, parse.isra.0, util, work.constprop.0.
        let got: Vec<Option<(usize, MatchRule)>> = m
            .matches
            .iter()
            .map(|x| x.map(|x| (x.target, x.rule)))
            .collect();
        assert_eq!(
            got,
            vec![
                None,
                Some((2, MatchRule::Exact)),
                None,
                Some((1, MatchRule::Exact)),
                Some((6, MatchRule::Normalized)),
                Some((3, MatchRule::OtherFile)),
                Some((4, MatchRule::Normalized)),
            ]
        );
        assert_eq!(r.profile_weight, 162);
        assert_eq!(r.matched_weight, 105);
        assert_eq!((r.exact, r.other_file, r.normalized), (2, 1, 2));
        assert_eq!(r.missing_in_target, 2);
        assert_eq!(
            r.heaviest_missing_in_target,
            vec![(g("gone"), 50), (g("lost.cold"), 7)]
        );
        assert_eq!(r.missing_in_profile, 4);
        assert_eq!(
            r.first_missing_in_profile,
            vec![
                l("parse", "q.c"),
                g("unused_a"),
                g("unused_b"),
                g("work.part.1")
            ]
        );
        assert_eq!(
            r.to_string(),
            "matched 64.8% of the profile weight (105 of 162)\n\
             functions matched: 2 exact, 1 by name with another file, 2 by normalized name\n\
             profile functions not in the target: 2\n  gone (50)\n  lost.cold (7)\n\
             target functions not in the profile: 4\n  parse (q.c)\n  unused_a\n  unused_b\n  work.part.1\n"
        );
    }

    // Without a same-file candidate the first in sorted order wins: the unsuffixed body.
    #[test]
    fn ties_take_first_sorted() {
        let p = profile(&[("f.constprop.3", None, 1), ("h", Some("x.c"), 1)], &[]);
        let targets = vec![
            g("f.isra.0"),
            g("f.cold"),
            g("f"),
            l("h", "z.c"),
            l("h", "y.c"),
        ];
        let (m, r) = match_profile(&p, &targets);
        assert_eq!(m.get(0).map(|x| x.target), Some(2));
        assert_eq!(
            m.get(1).map(|x| (x.target, x.rule)),
            Some((4, MatchRule::OtherFile))
        );
        assert_eq!(r.normalized, 1);
        // Duplicate target keys: the lowest index wins.
        let (m, _) = match_profile(&p, &[g("f"), g("f")]);
        assert_eq!(m.get(0).map(|x| x.target), Some(0));
    }

    // Remapping sums clones onto their base, drops unmatched functions and collapsed calls.
    #[test]
    fn remap_sums_clones() {
        let p = profile(
            &[
                ("main", None, 1),
                ("work.constprop.0", None, 10),
                ("work.constprop.1", None, 5),
                ("work.part.0", None, 2),
                ("gone", None, 100),
            ],
            // main -> both clones, clone 0 -> its own part and itself, main -> gone.
            &[(0, 1, 7), (0, 2, 3), (1, 3, 9), (0, 4, 4), (1, 1, 1)],
        );
        let targets = vec![g("work"), g("main")];
        let (m, r) = match_profile(&p, &targets);
        assert_eq!(r.matched_weight, 18);
        let q = remap(&p, &m, &targets);
        let text = q.to_text();
        assert!(
            text.ends_with(
                "fn 0 1 - main -\nfn 1 17 - work -\n# call CALLER CALLEE WEIGHT\ncall 0 1 10\ncall 1 1 1\n"
            ),
            "{text}"
        );
    }

    // A carried-over profile takes the target's names, identity and sizes (0: unknown), and
    // remembers the build it came from.
    #[test]
    fn retarget_takes_the_targets_identity() {
        let p = profile(
            &[("foo.constprop.0", None, 5), ("bar", None, 2)],
            &[(1, 0, 3)],
        );
        let targets = [FuncKey::global("bar"), FuncKey::global("foo")];
        let (mapping, _) = match_profile(&p, &targets);
        let target = Target {
            binary: "new/prog".to_string(),
            build_id: None,
            arch: Some("x86_64".to_string()),
            functions: &targets,
            sizes: &[0, 48],
        };
        let moved = retarget(&p, &mapping, target);
        let fns: Vec<(&str, u64, Option<u64>)> = moved
            .functions
            .iter()
            .map(|f| (f.key.name.as_str(), f.self_weight, f.size))
            .collect();
        assert_eq!(fns, [("bar", 2, None), ("foo", 5, Some(48))]);
        assert_eq!(moved.meta.binary, "new/prog");
        assert_eq!(moved.meta.arch.as_deref(), Some("x86_64"));
        assert_eq!(moved.meta.extra["matched-from"], p.meta.binary);
        assert_eq!(moved.edges.len(), 1);
    }

    // Legacy names lose their hash element, v0 names their crate disambiguators; C++ names,
    // hashless legacy names and lookalikes are not Rust paths.
    #[test]
    fn rust_paths() {
        let rp = |n: &str| rust_path(n).map(|c| c.into_owned());
        assert_eq!(
            rp("_ZN4core3ptr13drop_in_place17h0123456789abcdefE").as_deref(),
            Some("_ZN4core3ptr13drop_in_placeE")
        );
        // Clone suffixes go first.
        assert_eq!(
            rp("_ZN3foo3bar17hfedcba9876543210E.llvm.1234").as_deref(),
            Some("_ZN3foo3barE")
        );
        assert_eq!(
            rp("_RNvCs1234_7mycrate4main").as_deref(),
            Some("mycrate::main")
        );
        assert_eq!(
            rp("_RNvCs1234_7mycrate4main"),
            rp("_RNvCsabcd_7mycrate4main")
        );
        assert_eq!(rp("_ZN3foo3barEv"), None);
        assert_eq!(rp("_ZN3foo3barE"), None);
        assert_eq!(rp("_ZN17h0123456789abcdefE"), None);
        assert_eq!(rp("_ZN3foo17h0123456789abcdegE"), None);
        assert_eq!(rp("_ZN3foo16h0123456789abcdefE"), None);
        assert_eq!(rp("main"), None);
        assert_eq!(rp("_Rgarbage"), None);
    }

    // A rebuild changes every hash: only the Rust rule finds the functions again, sizes tell
    // instances of one legacy path apart, and a tie is counted as ambiguous and left out.
    #[test]
    fn matches_rust_rebuild() {
        let old = |p: &str| format!("_ZN{p}17h00000000000000{}E", "aa");
        let new = |p: &str, h: &str| format!("_ZN{p}17h{h}E");
        let mut b = ProfileBuilder::new(Meta::default());
        let keys = [
            g(&old("3app4main")),
            g("_ZN5alloc7raw_vec8grow_one17h1111111111111111E"),
            g("_ZN5alloc7raw_vec8grow_one17h2222222222222222E"),
            g("_ZN4core3fmt5write17h3333333333333333E"),
            g("_RNvCs1234_3app5parse"),
            g("memcpy"),
        ];
        for (k, (w, size)) in
            keys.iter()
                .zip([(10, 40), (20, 100), (30, 200), (5, 64), (7, 8), (3, 16)])
        {
            b.add_self(k, w);
            b.set_size(k, size);
        }
        let p = b.build();
        let targets = vec![
            g(&new("3app4main", "0123456789abcdef")),
            g("_ZN5alloc7raw_vec8grow_one17haaaaaaaaaaaaaaaaE"),
            g("_ZN5alloc7raw_vec8grow_one17hbbbbbbbbbbbbbbbbE"),
            g("_ZN4core3fmt5write17h4444444444444444E"),
            g("_ZN4core3fmt5write17h5555555555555555E"),
            g("_RNvCsZZ_3app5parse"),
            g("memcpy"),
        ];
        let sizes = [40, 200, 100, 64, 64, 8, 16];
        let (m, r) = match_profile_sized(&p, &targets, &sizes);
        let at = |k: &FuncKey| {
            let id = p.functions.iter().position(|f| &f.key == k).unwrap();
            m.get(id as FuncId).map(|x| (x.target, x.rule))
        };
        assert_eq!(at(&keys[0]), Some((0, MatchRule::RustPath)));
        assert_eq!(at(&keys[1]), Some((2, MatchRule::RustPath)));
        assert_eq!(at(&keys[2]), Some((1, MatchRule::RustPath)));
        assert_eq!(at(&keys[3]), None);
        assert_eq!(at(&keys[4]), Some((5, MatchRule::RustPath)));
        assert_eq!(at(&keys[5]), Some((6, MatchRule::Exact)));
        assert_eq!((r.exact, r.rust_path, r.rust_ambiguous), (1, 4, 1));
        assert_eq!(r.matched_weight, 70);
        assert!(r
            .to_string()
            .contains(", 4 by Rust path without hash (1 ambiguous, left out)\n"));
        // Without sizes the two grow_one instances are ambiguous too.
        let (_, r) = match_profile(&p, &targets);
        assert_eq!((r.rust_path, r.rust_ambiguous), (2, 3));
    }
}
