//! After the second (split) build: where the hot and cold parts an order names ended up
//! ([`check`]), the check of `sediment blocks check`.
//!
//! Every hot part should lie before every cold part. The parts checked are the entries of the
//! order: all the `.cold` parts, and the hot parts of the split functions: with a cluster list
//! ([`listed_functions`]) the listed functions' parts; without one (the GCC route) every hot
//! entry. The C runtime's start-up code ([`sediment_profile::C_RUNTIME`]) is in the order but
//! not in the user's objects, so the linker places it where it likes: it is not checked.
//!
//! Pure: the caller reads the order, the list and the binary.

use crate::{part_parent, COLD_SUFFIX};
use sediment_elf::Binary;
use sediment_profile::{FunctionOrder, C_RUNTIME};
use std::collections::HashSet;

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
pub fn check(
    order: &FunctionOrder,
    listed: Option<&HashSet<String>>,
    binary: &Binary,
) -> CheckReport {
    let mut r = CheckReport {
        hot_start: u64::MAX,
        cold_start: u64::MAX,
        ..CheckReport::default()
    };
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
            r.first_missing.get_or_insert_with(|| key.to_string());
            continue;
        };
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
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    // `!name` lines are the split functions; `!!` cluster lines are not.
    #[test]
    fn listed_functions_are_the_bang_lines() {
        let l = listed_functions("!main\n!!0 1\n!work\n!!0\n!!2 3\n!_ZN1SD2Ev/_ZN1SD1Ev\n!!0\n");
        let mut v: Vec<&str> = l.iter().map(String::as_str).collect();
        v.sort_unstable();
        assert_eq!(v, ["_ZN1SD1Ev", "_ZN1SD2Ev", "main", "work"]);
    }
}
