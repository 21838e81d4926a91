//! How much of an intended order a linked output holds: the measures `sediment verify` reports
//! and gates on.
//!
//! [`crate::check_order`] answers the linker shim's question after an LTO link (how many of the
//! order's functions are there, how many in order). [`held`] answers a packager's or a CI's:
//! the same two counts, plus which entries are missing and how much of the profile's weight
//! they carry, how far the found entries are from the intended order, and how many were found
//! only under a name the compiler gave them.
//!
//! 1. **Finding** an entry, by the first rule that finds a function of the output (at the
//!    lowest address among several):
//!    - [`Found::Exact`]: for a static (an entry with a source file), the static of that name
//!      whose `STT_FILE` is that file, so that the same-named statics of several files (a
//!      `helper` in each) are each found where they are; else a function of the entry's name.
//!      After LTO the statics' file is no longer the source's (`ld-temp.o` for lld), and the
//!      name alone finds them.
//!    - [`Found::Lto`]: a function whose name is the entry's with the suffix LTO gives a static
//!      it renames ([`crate::verify::lto_base`]: `.lto_priv.N`, `.llvm.N`, plain `.N`).
//!    - [`Found::Clone`]: a function whose name equals the entry's once compiler clone and LTO
//!      suffixes are stripped from both ([`sediment_profile::normalize`]: `.constprop.N`,
//!      `.isra.N`, `.part.N`, `.cold`, `.localalias`, `.clone.N`, after the LTO suffixes):
//!      an order made from a profile of another build (`-O2` against `-O3`, or before LTO)
//!      names `f` where the output has only `f.constprop.0`. Among such candidates one that
//!      is not a split-off cold part (`.cold`) is taken first, then the lowest address; the
//!      cold part stands for the entry only when nothing else does.
//!
//!    The last two are counted by the outermost suffix of the output's name
//!    ([`Held::renamed`]). Entries that are the C runtime's start-up code
//!    ([`sediment_profile::C_RUNTIME`]: `_start`, `frame_dummy`, ...) are left out of every
//!    measure and counted apart: they live in the objects the compiler driver adds to every
//!    link, which no order places.
//! 2. **In order**: the longest non-decreasing subsequence of the found entries' addresses,
//!    taken in the order's order ([`sediment_elf::longest_in_address_order`]): one function
//!    left behind costs one, not every function after it.
//! 3. **Distance**: the normalised Kendall tau distance between the intended order and the
//!    output's, over the found entries: the share of their pairs that the output places the
//!    other way round (0 for the intended order, about 0.5 for an unrelated one, 1 for the
//!    reverse). Pairs at one address (aliases) count as agreeing. Counted by merge sort,
//!    O(n log n). It complements the in-order share: one hot function moved to the end costs
//!    that share one entry, and the distance 1/n of the pairs; a layout that keeps short
//!    runs of the order but shuffles the runs scores low on the first and moderately on the
//!    second.
//!
//! Pure: the caller reads the output's symbols and the order (and the profile's weights).

use std::collections::BTreeMap;
use std::collections::HashMap;

/// How an order entry was found in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Found {
    /// Under its own name.
    Exact,
    /// Under its name with an LTO rename suffix (`.lto_priv.N`, `.llvm.N`, `.N`).
    Lto,
    /// Under a compiler clone of its name (`.constprop.N`, `.isra.N`, `.part.N`, `.cold`, ...).
    Clone,
}

/// What [`held`] measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// Entries in the order, the C runtime's included.
    pub total: usize,
    /// Entries that are the C runtime's start-up code: in no measure.
    pub runtime: usize,
    /// Entries found in the output (the C runtime's not counted).
    pub found: usize,
    /// Found entries in the intended relative order (at most `found`).
    pub in_order: usize,
    /// Pairs of found entries the output places the other way round.
    pub discordant_pairs: u64,
    /// Pairs of found entries: `found * (found - 1) / 2`.
    pub pairs: u64,
    /// Entries found under another name ([`Found::Lto`], [`Found::Clone`]), by the outermost
    /// suffix of the output's name (`constprop`, `lto_priv`, `N` for a plain number, ...).
    pub renamed: BTreeMap<String, usize>,
    /// Indices into the order of the entries not found, in the order's order.
    pub missing: Vec<usize>,
    /// With weights: the weight of every entry, and that of the missing ones.
    pub weight: Option<(u64, u64)>,
}

impl Held {
    /// Share of the found entries in the intended order (1 when nothing was found).
    pub fn in_order_share(&self) -> f64 {
        ratio(self.in_order as u64, self.found as u64)
    }

    /// Share of the entries found: of the weight when weights were given, else of the entries
    /// the C runtime's left out (1 for an order with nothing to find).
    pub fn found_share(&self) -> f64 {
        match self.weight {
            Some((total, missing)) if total > 0 => 1.0 - ratio(missing, total),
            _ => ratio(self.found as u64, (self.total - self.runtime) as u64),
        }
    }

    /// Share of the weight the missing entries carry, when weights were given.
    pub fn missing_weight_share(&self) -> Option<f64> {
        self.weight.map(|(total, missing)| {
            if total == 0 {
                0.0
            } else {
                ratio(missing, total)
            }
        })
    }

    /// The normalised Kendall tau distance of the found entries (0: the intended order).
    pub fn distance(&self) -> f64 {
        if self.pairs == 0 {
            0.0
        } else {
            ratio(self.discordant_pairs, self.pairs)
        }
    }

    /// Entries found under another name, all suffixes together.
    pub fn renamed_total(&self) -> usize {
        self.renamed.values().sum()
    }

    /// Whether the output holds the order well enough: something of it found, at least
    /// `min_in_order` of the found entries in order and at least `min_found` found
    /// ([`Held::found_share`]). An order of nothing but C runtime entries passes.
    pub fn passes(&self, min_in_order: f64, min_found: f64) -> bool {
        if self.total == self.runtime {
            return true;
        }
        self.found > 0 && self.in_order_share() >= min_in_order && self.found_share() >= min_found
    }
}

/// `a / b`, 1 when `b` is 0.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// A function's name and, for a static, the base name of its source file (`None` for a
/// global, or where the file is not known).
pub type Named<'a> = (&'a str, Option<&'a str>);

/// Measures how much of `order` (functions, first placed first) the output whose functions
/// are `functions` (each with its address, in any order) holds. `weights`, when given, is each
/// entry's weight (the profile's self weight), parallel to `order`.
pub fn held(order: &[Named<'_>], weights: Option<&[u64]>, functions: &[(Named<'_>, u64)]) -> Held {
    let finder = Finder::new(functions);
    let mut addresses = Vec::new();
    let mut renamed: BTreeMap<String, usize> = BTreeMap::new();
    let mut missing = Vec::new();
    let mut runtime = 0;
    for (i, &(name, file)) in order.iter().enumerate() {
        if sediment_profile::C_RUNTIME.contains(&name) {
            runtime += 1;
            continue;
        }
        match finder.find(name, file) {
            Some((address, how, symbol)) => {
                addresses.push(address);
                if how != Found::Exact {
                    *renamed.entry(outer_suffix(symbol)).or_default() += 1;
                }
            }
            None => missing.push(i),
        }
    }
    let weight = weights.map(|w| {
        let total = w.iter().fold(0u64, |a, &b| a.saturating_add(b));
        let lost = missing
            .iter()
            .filter_map(|&i| w.get(i))
            .fold(0u64, |a, &b| a.saturating_add(b));
        (total, lost)
    });
    let n = addresses.len() as u64;
    Held {
        total: order.len(),
        runtime,
        found: addresses.len(),
        in_order: sediment_elf::longest_in_address_order(addresses.iter().copied()),
        discordant_pairs: discordant_pairs(&addresses),
        pairs: n * n.saturating_sub(1) / 2,
        renamed,
        missing,
        weight,
    }
}

/// The output's functions indexed three ways, one per [`Found`] rule.
struct Finder<'a> {
    /// By (name, file) of the statics.
    keyed: HashMap<(&'a str, &'a str), u64>,
    exact: HashMap<&'a str, (u64, &'a str)>,
    lto: HashMap<&'a str, (u64, &'a str)>,
    /// By base with every suffix stripped: (is a cold part, address, name), least first.
    clone: HashMap<&'a str, (bool, u64, &'a str)>,
}

impl<'a> Finder<'a> {
    fn new(functions: &[(Named<'a>, u64)]) -> Finder<'a> {
        let mut keyed: HashMap<(&str, &str), u64> = HashMap::new();
        let mut exact: HashMap<&str, (u64, &str)> = HashMap::new();
        let mut lto: HashMap<&str, (u64, &str)> = HashMap::new();
        let mut clone: HashMap<&str, (bool, u64, &str)> = HashMap::new();
        // Ties (two names at one address) go to the name that sorts first, so the result does
        // not depend on the symbol table's order.
        for &((name, file), address) in functions {
            if let Some(file) = file {
                let e = keyed.entry((name, file)).or_insert(address);
                *e = (*e).min(address);
            }
            let e = exact.entry(name).or_insert((address, name));
            *e = (*e).min((address, name));
            let base = crate::verify::lto_base(name);
            if base != name {
                let e = lto.entry(base).or_insert((address, name));
                *e = (*e).min((address, name));
            }
            let stripped = strip_all(name);
            let cold = sediment_profile::normalize(name)
                .suffixes
                .last()
                .is_some_and(|s| *s == sediment_profile::SuffixKind::Cold);
            if stripped != name {
                let v = (cold, address, name);
                let e = clone.entry(stripped).or_insert(v);
                *e = (*e).min(v);
            }
        }
        Finder {
            keyed,
            exact,
            lto,
            clone,
        }
    }

    /// Where `name` is, how it was found and under which name of the output.
    fn find(&self, name: &str, file: Option<&str>) -> Option<(u64, Found, &'a str)> {
        if let Some(&a) = file.and_then(|f| self.keyed.get(&(name, f))) {
            return Some((a, Found::Exact, ""));
        }
        if let Some(&(a, s)) = self.exact.get(name) {
            return Some((a, Found::Exact, s));
        }
        if let Some(&(a, s)) = self.lto.get(name) {
            return Some((a, Found::Lto, s));
        }
        let base = strip_all(name);
        self.clone
            .get(base)
            .map(|&(_, a, s)| (a, Found::Clone, s))
            .or_else(|| {
                // An entry that is itself a clone (`f.constprop.0` from an older build) whose
                // plain body the output has.
                (base != name)
                    .then(|| self.exact.get(base))
                    .flatten()
                    .map(|&(a, s)| (a, Found::Clone, s))
            })
    }
}

/// The outermost suffix of `symbol` (`f.isra.0.lto_priv.1` -> `lto_priv`; `t.2` -> `N`).
fn outer_suffix(symbol: &str) -> String {
    match sediment_profile::normalize(symbol).suffixes.last() {
        Some(kind) => kind.word().to_string(),
        None if crate::verify::lto_base(symbol) != symbol => "N".to_string(),
        None => "other".to_string(),
    }
}

/// `name` without any compiler clone or LTO suffix: [`sediment_profile::normalize`] and
/// [`crate::verify::lto_base`] (which alone strips a plain `.N`) taken in turn until neither
/// strips more (`f.constprop.0.2` -> `f`).
fn strip_all(name: &str) -> &str {
    let mut s = name;
    loop {
        let next = crate::verify::lto_base(sediment_profile::normalize(s).base);
        if next == s {
            return s;
        }
        s = next;
    }
}

/// Pairs `i < j` with `values[i] > values[j]` (strictly; equal values agree), by merge sort.
pub fn discordant_pairs(values: &[u64]) -> u64 {
    fn sort(v: &mut [u64], buf: &mut Vec<u64>) -> u64 {
        let n = v.len();
        if n < 2 {
            return 0;
        }
        let mid = n / 2;
        let mut count = sort(&mut v[..mid], buf) + sort(&mut v[mid..], buf);
        buf.clear();
        let (mut i, mut j) = (0, mid);
        while i < mid && j < n {
            if v[i] <= v[j] {
                buf.push(v[i]);
                i += 1;
            } else {
                // v[j] is less than every one of v[i..mid].
                count += (mid - i) as u64;
                buf.push(v[j]);
                j += 1;
            }
        }
        buf.extend_from_slice(&v[i..mid]);
        buf.extend_from_slice(&v[j..n]);
        v.copy_from_slice(buf);
        count
    }
    let mut v = values.to_vec();
    sort(&mut v, &mut Vec::with_capacity(values.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`held`] with every entry and function a global.
    fn held_names(order: &[&str], weights: Option<&[u64]>, out: &[(&str, u64)]) -> Held {
        let order: Vec<Named<'_>> = order.iter().map(|&n| (n, None)).collect();
        let out: Vec<(Named<'_>, u64)> = out.iter().map(|&(n, a)| ((n, None), a)).collect();
        held(&order, weights, &out)
    }

    // Same-named statics of several files are each found at their own address, so a link that
    // places them apart, as the order says, holds the order; by name alone they would all
    // sit at the lowest one. An entry without a file, or a file the output lacks (after LTO),
    // falls back to the name.
    #[test]
    fn same_named_statics_by_file() {
        let out = [
            (("mix", Some("u1.c")), 0x100),
            (("a", None), 0x200),
            (("mix", Some("u2.c")), 0x300),
            (("b", None), 0x400),
        ];
        let order = [
            ("mix", Some("u1.c")),
            ("a", None),
            ("mix", Some("u2.c")),
            ("b", None),
        ];
        let h = held(&order, None, &out);
        assert_eq!((h.found, h.in_order, h.discordant_pairs), (4, 4, 0));
        let order = [
            ("a", None),
            ("mix", Some("u2.c")),
            ("b", None),
            ("mix", Some("ld-temp.o")),
        ];
        let h = held(&order, None, &out);
        assert_eq!(
            (h.found, h.in_order),
            (4, 3),
            "the last mix falls back to 0x100"
        );
        assert_eq!(h.renamed_total(), 0);
    }

    /// Pairs out of order, counted the slow way.
    fn naive(v: &[u64]) -> u64 {
        let mut c = 0;
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                c += u64::from(v[i] > v[j]);
            }
        }
        c
    }

    // The merge-sort count equals the quadratic one, on sorted, reversed, tied and mixed lists.
    #[test]
    fn discordant_pairs_by_merge_sort() {
        let cases: [&[u64]; 6] = [
            &[],
            &[1, 2, 3, 4],
            &[4, 3, 2, 1],
            &[2, 2, 2],
            &[3, 1, 2, 2, 5, 0, 4],
            &[10, 9, 1, 8, 1, 7, 7, 2, 6],
        ];
        for v in cases {
            assert_eq!(discordant_pairs(v), naive(v), "{v:?}");
        }
        // A pseudo-random permutation of 200, against the slow count.
        let v: Vec<u64> = (0..200u64).map(|i| (i * 7919 + 13) % 211).collect();
        assert_eq!(discordant_pairs(&v), naive(&v));
    }

    fn out() -> Vec<(&'static str, u64)> {
        vec![
            ("main", 0x100),
            ("a", 0x200),
            ("b", 0x300),
            ("c", 0x400),
            ("_start", 0x50),
        ]
    }

    // The intended order: everything found, in order, distance 0; its reverse: one in order,
    // distance 1.
    #[test]
    fn in_order_and_reversed() {
        let h = held_names(&["main", "a", "b", "c"], None, &out());
        assert_eq!(
            (h.found, h.in_order, h.discordant_pairs, h.pairs),
            (4, 4, 0, 6)
        );
        assert_eq!(h.distance(), 0.0);
        assert!(h.passes(0.9, 1.0));
        let h = held_names(&["c", "b", "a", "main"], None, &out());
        assert_eq!((h.found, h.in_order), (4, 1));
        assert_eq!(h.distance(), 1.0);
        assert!(!h.passes(0.9, 0.0));
    }

    // One hot function left behind costs one entry of the in-order share and 3 of 6 pairs.
    #[test]
    fn one_left_behind() {
        let h = held_names(&["c", "main", "a", "b"], None, &out());
        assert_eq!((h.in_order, h.discordant_pairs), (3, 3));
        assert_eq!(h.in_order_share(), 0.75);
        assert_eq!(h.distance(), 0.5);
    }

    // Missing entries: listed by index, their weight's share; the C runtime left out of all.
    #[test]
    fn missing_weight() {
        let order = ["main", "gone", "_start", "a", "lost"];
        let h = held_names(&order, Some(&[50, 30, 5, 10, 5]), &out());
        assert_eq!((h.total, h.runtime, h.found), (5, 1, 2));
        assert_eq!(h.missing, vec![1, 4]);
        assert_eq!(h.weight, Some((100, 35)));
        assert_eq!(h.missing_weight_share(), Some(0.35));
        assert!((h.found_share() - 0.65).abs() < 1e-12);
        assert!(h.passes(0.9, 0.6));
        assert!(!h.passes(0.9, 0.7));
        // Without weights, the found share counts entries.
        let h = held_names(&order, None, &out());
        assert_eq!(h.found_share(), 0.5);
    }

    // Nothing found fails whatever the thresholds; only C runtime entries pass.
    #[test]
    fn nothing_found() {
        let h = held_names(&["x", "y"], None, &out());
        assert_eq!((h.found, h.in_order), (0, 0));
        assert!(!h.passes(0.0, 0.0));
        assert!(held_names(&["_start"], None, &out()).passes(0.9, 0.9));
    }

    // LTO and clone renames are found and counted by their outermost suffix; an exact name
    // wins; a cold part stands in only when nothing else does.
    #[test]
    fn renames() {
        let out = [
            ("s.lto_priv.0", 0x10),
            ("t.llvm.123456", 0x20),
            ("f.constprop.0", 0x30),
            ("g.isra.0", 0x40),
            ("h.part.0", 0x50),
            ("h.cold", 0x08),
            ("k.cold", 0x60),
            ("u.2", 0x70),
            ("e", 0x80),
            ("e.constprop.0", 0x05),
            ("v.isra.0.lto_priv.1", 0x90),
        ];
        let order = ["s", "t", "f", "g", "h", "k", "u", "e", "v", "w"];
        let h = held_names(&order, None, &out);
        assert_eq!(h.found, 9);
        assert_eq!(h.missing, vec![9]);
        let want: BTreeMap<String, usize> = [
            ("N", 1),
            ("cold", 1),
            ("constprop", 1),
            ("isra", 1),
            ("llvm", 1),
            ("lto_priv", 2),
            ("part", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(h.renamed, want);
        assert_eq!(h.renamed_total(), 8);
        // h found at its body (0x50), not its cold part (0x08): in order with the rest.
        assert_eq!(h.in_order, 9);
        // An entry that is a clone of an older build finds the plain body, or another clone.
        let h = held_names(&["f.constprop.3", "e.isra.1"], None, &out);
        assert_eq!((h.found, h.renamed_total()), (2, 2));
    }

    proptest::proptest! {
        // Any layout of distinct functions: the order of their addresses is held whole
        // (distance 0), its reverse keeps one (distance 1, with two or more), and any order's
        // measures stay in range, with the merge-sort count equal to the quadratic one.
        #[test]
        fn measures_stay_in_range(addrs in proptest::collection::btree_set(0u64..10_000, 0..60),
                                  seed in 0u64..1000) {
            let names: Vec<String> = (0..addrs.len()).map(|i| format!("f{i}")).collect();
            let out: Vec<(&str, u64)> = names.iter().map(String::as_str).zip(addrs.iter().copied()).collect();
            let layout: Vec<&str> = names.iter().map(String::as_str).collect();
            let h = held_names(&layout, None, &out);
            proptest::prop_assert_eq!((h.found, h.in_order, h.discordant_pairs), (names.len(), names.len(), 0));
            let reversed: Vec<&str> = layout.iter().rev().copied().collect();
            let h = held_names(&reversed, None, &out);
            proptest::prop_assert_eq!(h.in_order, names.len().min(1));
            if names.len() >= 2 {
                proptest::prop_assert_eq!(h.distance(), 1.0);
            }
            // Some other order: swaps driven by the seed.
            let mut shuffled = layout.clone();
            let n = shuffled.len();
            for i in 0..n {
                let j = ((i as u64 * 7919 + seed) % n as u64) as usize;
                shuffled.swap(i, j);
            }
            let h = held_names(&shuffled, None, &out);
            proptest::prop_assert!(h.in_order <= h.found && h.found == n);
            proptest::prop_assert!((0.0..=1.0).contains(&h.distance()));
            let at: Vec<u64> = shuffled.iter().map(|s| out.iter().find(|(m, _)| m == s).unwrap().1).collect();
            proptest::prop_assert_eq!(h.discordant_pairs, naive(&at));
        }
    }

    #[test]
    fn stripping() {
        assert_eq!(strip_all("f.constprop.0.2"), "f");
        assert_eq!(strip_all("f.isra.0.lto_priv.1"), "f");
        assert_eq!(strip_all("u.2"), "u");
        assert_eq!(strip_all("f.bar"), "f.bar");
    }

    #[test]
    fn outer_suffixes() {
        assert_eq!(outer_suffix("f.isra.0.lto_priv.1"), "lto_priv");
        assert_eq!(outer_suffix("f.part.0.cold"), "cold");
        assert_eq!(outer_suffix("t.2"), "N");
        assert_eq!(outer_suffix("t.llvm.99"), "llvm");
        assert_eq!(outer_suffix("f.constprop.0"), "constprop");
    }
}
