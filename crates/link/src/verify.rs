//! After the link: how much of an order the linked output follows.
//!
//! Before an ordinary link, [`crate::resolve()`] checks the order against the functions of the
//! objects. With LTO that check cannot see the functions in bitcode: they only exist once the
//! linker has run code generation, which may also inline them away or rename them. So the
//! wrapper checks the output instead, with [`check_order`]:
//!
//! 1. **Finding.** An order entry is found at the lowest address of the output functions that
//!    carry its name: the name itself, else the name with one of the suffixes LTO gives a
//!    `static` function it renames ([`lto_base`]). Source files are not compared: after LTO
//!    every function of the bitcode is a local of one pseudo-file (`ld-temp.o` for lld, an
//!    empty name for GCC), whatever file it came from.
//! 2. **In order.** The number of found entries in the intended relative order is the length
//!    of the longest non-decreasing subsequence of their addresses, taken in order: one
//!    function left behind costs one, not every function after it (the measure `sediment diff`
//!    uses for reordering). Same-named statics share one address and count as in order.
//!
//! Pure: the caller reads the output's symbols.

use std::collections::HashMap;

/// How far a linked output follows an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderCheck {
    /// Entries in the order.
    pub total: usize,
    /// Entries with a function of their name in the output.
    pub found: usize,
    /// Found entries in the intended relative order (at most `found`).
    pub in_order: usize,
}

/// Checks `order` (function names, hottest first) against `functions` (the output's function
/// names and addresses, in any order).
pub fn check_order(order: &[&str], functions: &[(&str, u64)]) -> OrderCheck {
    let mut exact: HashMap<&str, u64> = HashMap::new();
    let mut renamed: HashMap<&str, u64> = HashMap::new();
    for &(name, address) in functions {
        let lowest = |a: &mut u64| *a = (*a).min(address);
        exact.entry(name).and_modify(lowest).or_insert(address);
        let base = lto_base(name);
        if base != name {
            renamed.entry(base).and_modify(lowest).or_insert(address);
        }
    }
    let addresses: Vec<u64> = order
        .iter()
        .filter_map(|name| exact.get(name).or_else(|| renamed.get(name)).copied())
        .collect();
    OrderCheck {
        total: order.len(),
        found: addresses.len(),
        in_order: sediment_elf::longest_in_address_order(addresses),
    }
}

/// `name` without the suffix LTO gives a `static` function it renames, when it has one:
/// GCC's `.lto_priv.N` (a static made global across partitions, or clashing), ThinLTO's
/// `.llvm.N` (a static imported into another module) and full LTO's plain `.N` (a static
/// clashing with another of its name), `N` decimal digits. Only that last suffix goes, so a
/// renamed clone keeps its clone suffix (`f.isra.0.lto_priv.1` is `f.isra.0`): unlike
/// [`sediment_profile::normalize`], which strips clone suffixes too for matching across builds,
/// this must not take `f.constprop.0` for `f`. The dotted rest a clone leaves (`f.constprop`
/// from `f.constprop.0`) is no function's name.
pub fn lto_base(name: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    for suffix in [".lto_priv.", ".llvm.", "."] {
        if let Some((base, n)) = name.rsplit_once(suffix) {
            if !base.is_empty() && digits(n) {
                return base;
            }
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    // All found in order; one left behind costs one; an entry inlined away is not found.
    #[test]
    fn found_and_in_order() {
        let out = [("main", 0x100), ("f2", 0x200), ("f5", 0x300), ("f6", 0x400)];
        let all = check_order(&["main", "f2", "f5", "f6"], &out);
        assert_eq!(
            all,
            OrderCheck {
                total: 4,
                found: 4,
                in_order: 4
            }
        );
        let one_behind = check_order(&["f6", "main", "f2", "f5"], &out);
        assert_eq!((one_behind.found, one_behind.in_order), (4, 3));
        let inlined = check_order(&["main", "gone", "f5"], &out);
        assert_eq!((inlined.total, inlined.found, inlined.in_order), (3, 2, 2));
        let wrong = check_order(&["x", "y"], &out);
        assert_eq!((wrong.found, wrong.in_order), (0, 0));
    }

    // A static renamed by LTO is found under its new name, at its lowest address; an exact
    // name wins over a renamed one.
    #[test]
    fn renamed_statics() {
        let out = [
            ("helper.lto_priv.1", 0x40),
            ("helper.lto_priv.0", 0x30),
            ("s.llvm.1002628665616604530", 0x50),
            ("t.1", 0x60),
            ("t", 0x70),
            ("f.constprop.0", 0x80),
        ];
        let c = check_order(&["helper", "s", "t", "f"], &out);
        assert_eq!((c.found, c.in_order), (3, 3));
        let c = check_order(&["t", "helper"], &out);
        assert_eq!((c.found, c.in_order), (2, 1), "t at 0x70, after helper");
    }

    #[test]
    fn lto_suffixes() {
        assert_eq!(lto_base("a.lto_priv.0"), "a");
        assert_eq!(lto_base("a.llvm.123"), "a");
        assert_eq!(lto_base("a.2"), "a");
        assert_eq!(lto_base("a.b.2"), "a.b");
        assert_eq!(lto_base("a.constprop.0"), "a.constprop");
        assert_eq!(lto_base("a.isra.0.lto_priv.1"), "a.isra.0");
        for same in ["a", "a.cold", ".1", "a.llvm.x", "a.", "a.lto_priv."] {
            assert_eq!(lto_base(same), same);
        }
    }
}
