//! After the second (split) build: where the hot and cold parts an order names ended up
//! ([`check`]), the check of `sediment blocks check`.
//!
//! Every hot part should lie before every cold part. The parts checked are the entries of the
//! order: all the `.cold` parts, and the hot parts of the split functions: with a cluster list
//! ([`listed_functions`]) the listed functions' parts; without one (the GCC route) every hot
//! entry. The C runtime's start-up code ([`sediment_profile::C_RUNTIME`]) is in the order but
//! not in the user's objects, so the linker places it where it likes: it is not checked.
//!
//! With a cluster list, a function the split build did not emit at all (no part of it and no
//! symbol of its name in a binary where other parts are found: the compiler inlined it
//! everywhere or removed it in that build) is counted apart as dropped, not missing: nothing
//! of it is left to misplace. A part missing while its
//! function is there means another binary, or a build without the plan's list file.
//!
//! Pure: the caller reads the order, the list and the binary.

use crate::{part_parent, COLD_SUFFIX};
use sediment_elf::{AliasSet, Binary};
use sediment_profile::{FunctionOrder, C_RUNTIME};
use std::collections::HashSet;

/// The function a part belongs to: its name without `.cold` or `.__part.N`.
fn owner(part: &str) -> &str {
    part_parent(part.strip_suffix(COLD_SUFFIX).unwrap_or(part))
}

/// Where the hot and cold parts named by an order ended up in a binary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// Hot parts checked.
    pub hot_listed: usize,
    /// Hot parts found (defined once in the binary).
    pub hot_found: usize,
    /// Lowest address of a hot part found (0 when none was found).
    pub hot_start: u64,
    /// End (address + size) of the highest hot part found.
    pub hot_end: u64,
    /// Cold parts checked.
    pub cold_listed: usize,
    /// Cold parts found.
    pub cold_found: usize,
    /// Lowest address of a cold part found (`u64::MAX` when none was found).
    pub cold_start: u64,
    /// The first part of the order (checked, not found) the binary does not define once.
    pub first_missing: Option<String>,
    /// Parts (checked, not found) of functions the binary has nothing of: no part and no symbol
    /// of the function's name (the split build did not emit them).
    pub dropped_parts: usize,
    /// The functions of [`CheckReport::dropped_parts`].
    pub dropped_functions: usize,
    /// The first of [`CheckReport::dropped_parts`] in the order.
    pub first_dropped: Option<String>,
    /// Parts found at a lower address than the part before them in the order.
    pub inversions: usize,
    /// Address of the last part found (for `inversions`).
    pub last: u64,
}

/// The functions a cluster list (`-fbasic-block-sections=list=` file, [`crate::list_file`])
/// splits: the names of its `!name` lines, every alias of a `!name/alias` line too.
pub fn listed_functions(list: &str) -> HashSet<String> {
    list.lines()
        .filter_map(|l| l.strip_prefix('!'))
        .filter(|l| !l.starts_with('!'))
        .flat_map(|l| l.split('/'))
        .map(str::to_string)
        .collect()
}

/// Where the parts of `order` (hot parts of the functions in `listed`, when given; every cold
/// part) are in `binary`. A key without a file matches a unique symbol of that name (the cold
/// parts are locals); with a file, the symbol of that file.
///
/// `aliases` are the names [`Binary`] folds into one per address ([`sediment_elf::aliases`]):
/// a function is in the binary under any of them.
pub fn check(
    order: &FunctionOrder,
    listed: Option<&HashSet<String>>,
    binary: &Binary,
    aliases: &[AliasSet],
) -> CheckReport {
    let mut r = CheckReport {
        hot_start: u64::MAX,
        cold_start: u64::MAX,
        ..CheckReport::default()
    };
    let mut not_found = Vec::new();
    let mut owners_found: HashSet<&str> = HashSet::new();
    for key in &order.functions {
        let cold = key.name.ends_with(COLD_SUFFIX);
        if !cold
            && (listed.is_some_and(|l| !l.contains(part_parent(&key.name)))
                || C_RUNTIME.contains(&key.name.as_str()))
        {
            continue;
        }
        if cold {
            r.cold_listed += 1;
        } else {
            r.hot_listed += 1;
        }
        // A key without a file matches a unique symbol of that name (the cold parts are
        // locals); with a file, the symbol of that file.
        let found: Vec<_> = binary
            .functions
            .iter()
            .filter(|s| s.key.name == key.name && (key.file.is_none() || s.key.file == key.file))
            .collect();
        let [s] = found.as_slice() else {
            not_found.push(key);
            continue;
        };
        owners_found.insert(owner(&key.name));
        if s.address < r.last {
            r.inversions += 1;
        }
        r.last = s.address;
        if cold {
            r.cold_found += 1;
            r.cold_start = r.cold_start.min(s.address);
        } else {
            r.hot_found += 1;
            r.hot_start = r.hot_start.min(s.address);
            r.hot_end = r.hot_end.max(s.address.saturating_add(s.size));
        }
    }
    if r.hot_found == 0 {
        r.hot_start = 0;
    }
    let in_binary: HashSet<&str> = binary
        .functions
        .iter()
        .map(|s| s.key.name.as_str())
        .chain(
            aliases
                .iter()
                .flat_map(|a| a.names.iter().map(String::as_str)),
        )
        .collect();
    let mut dropped: HashSet<&str> = HashSet::new();
    // Only a binary with the parts of a list file is known to be a split build; one without
    // (or with none of the order's parts) may be another program.
    let split_build = listed.is_some() && r.hot_found + r.cold_found > 0;
    for key in not_found {
        let f = owner(&key.name);
        if !split_build || owners_found.contains(f) || in_binary.contains(f) {
            r.first_missing.get_or_insert_with(|| key.to_string());
        } else {
            r.dropped_parts += 1;
            dropped.insert(f);
            r.first_dropped.get_or_insert_with(|| key.to_string());
        }
    }
    r.dropped_functions = dropped.len();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use sediment_elf::Symbol;
    use sediment_profile::FuncKey;

    fn binary(names: &[(&str, u64)]) -> Binary {
        Binary {
            build_id: None,
            arch: "x86_64".into(),
            segments: Vec::new(),
            functions: names
                .iter()
                .map(|&(n, address)| Symbol {
                    key: FuncKey::global(n),
                    address,
                    size: 16,
                })
                .collect(),
            from_dynsym: false,
            plt: Vec::new(),
        }
    }

    fn order(names: &[&str]) -> FunctionOrder {
        FunctionOrder {
            meta: Default::default(),
            functions: names.iter().map(|n| FuncKey::global(*n)).collect(),
        }
    }

    // A function of the plan the split build did not emit at all is dropped, not missing; a
    // part missing beside its function (or beside another part of it) is missing.
    #[test]
    fn functions_the_split_build_left_out_are_dropped_not_missing() {
        let listed: HashSet<String> = ["f", "g", "h"].iter().map(|s| s.to_string()).collect();
        let o = order(&[
            "f",
            "g",
            "g.__part.1",
            "h.__part.1",
            "f.cold",
            "g.cold",
            "h.cold",
        ]);
        // `g` is gone entirely; `h` kept its entry but lost its hot part.
        let b = binary(&[
            ("f", 0x100),
            ("h", 0x120),
            ("f.cold", 0x200),
            ("h.cold", 0x220),
        ]);
        let r = check(&o, Some(&listed), &b, &[]);
        assert_eq!((r.hot_listed, r.hot_found), (4, 1));
        assert_eq!((r.cold_listed, r.cold_found), (3, 2));
        assert_eq!((r.dropped_parts, r.dropped_functions), (3, 1));
        assert_eq!(r.first_dropped.as_deref(), Some("g"));
        assert_eq!(r.first_missing.as_deref(), Some("h.__part.1"));
        // With `h`'s part there, nothing is missing and `g` stays dropped.
        let b = binary(&[
            ("f", 0x100),
            ("h.__part.1", 0x110),
            ("f.cold", 0x200),
            ("h.cold", 0x220),
        ]);
        let r = check(&o, Some(&listed), &b, &[]);
        assert_eq!(r.first_missing, None);
        assert_eq!((r.dropped_parts, r.dropped_functions), (3, 1));
        // `g` under a name the binary folded into another one at its address: missing.
        let r = check(
            &o,
            Some(&listed),
            &b,
            &[AliasSet {
                address: 0x100,
                names: vec!["f".into(), "g".into()],
                compiled: None,
            }],
        );
        assert_eq!(r.dropped_parts, 0);
        assert_eq!(r.first_missing.as_deref(), Some("g"));
        // Without a list file (the GCC route) the binary may be another program: missing.
        let r = check(&o, None, &b, &[]);
        assert_eq!(r.dropped_parts, 0);
        assert_eq!(r.first_missing.as_deref(), Some("g"));
    }

    // `!name` lines are the split functions; `!!` cluster lines are not.
    #[test]
    fn listed_functions_are_the_bang_lines() {
        let l = listed_functions("!main\n!!0 1\n!work\n!!0\n!!2 3\n!_ZN1SD2Ev/_ZN1SD1Ev\n!!0\n");
        let mut v: Vec<&str> = l.iter().map(String::as_str).collect();
        v.sort_unstable();
        assert_eq!(v, ["_ZN1SD1Ev", "_ZN1SD2Ev", "main", "work"]);
    }
}
