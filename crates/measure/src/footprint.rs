//! Code footprint: how many 4 KiB pages and 64-byte cache lines hold a given fraction of the
//! executed instructions.
//!
//! Input is a list of (instruction address, execution count) pairs. Addresses are grouped into
//! units of `1 << shift` bytes (12 for pages, 6 for lines); the units are sorted by count,
//! largest first, and the answer is the smallest number of units whose counts reach the
//! fraction of the total. This is the "hot working set" measure used in code-layout papers
//! (e.g. Ottoni & Maher, "Optimizing Function Placement for Large-Scale Data-Center
//! Applications", CGO 2017, which reports I-TLB and page footprint of HHVM's hot text): a layout
//! that packs hot code needs fewer units to cover 99% of execution, whatever the cache or TLB
//! geometry of the machine.
//!
//! An instruction is attributed to the unit holding its first byte; one that straddles a
//! boundary is not split. Fractions are exact rationals (`num / den`), compared in integer
//! arithmetic (u128), so 99.9% never suffers a floating-point rounding at the boundary.

use std::collections::BTreeMap;

/// Footprint of executed code at one granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Units needed to cover 99% of the executed instructions.
    pub for_99: u64,
    /// Units needed to cover 99.9% of the executed instructions.
    pub for_99_9: u64,
    /// Distinct units holding at least one executed instruction.
    pub touched: u64,
}

/// Sums execution counts per unit of `1 << shift` bytes. Zero counts are dropped, so a unit is
/// "touched" only if something in it ran.
pub fn unit_counts(counts: &BTreeMap<u64, u64>, shift: u32) -> Vec<u64> {
    let mut units: BTreeMap<u64, u64> = BTreeMap::new();
    for (&addr, &n) in counts {
        if n > 0 {
            let e = units.entry(addr >> shift).or_insert(0);
            *e = e.saturating_add(n);
        }
    }
    units.into_values().collect()
}

/// Smallest number of units whose counts, largest first, sum to at least `num / den` of the
/// total. Zero when there is nothing to cover (an empty list or an all-zero total).
/// Ties between equal counts do not matter: only the count of units is returned.
pub fn units_covering(unit_counts: &[u64], num: u64, den: u64) -> u64 {
    let mut sorted = unit_counts.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let total: u128 = sorted.iter().map(|&c| u128::from(c)).sum();
    if total == 0 || den == 0 {
        return 0;
    }
    // covered / total >= num / den  <=>  covered * den >= total * num
    let need = total * u128::from(num);
    let mut covered: u128 = 0;
    for (i, &c) in sorted.iter().enumerate() {
        covered += u128::from(c);
        if covered * u128::from(den) >= need {
            return i as u64 + 1;
        }
    }
    sorted.len() as u64
}

/// Footprint of `counts` (address -> executions) in units of `1 << shift` bytes.
pub fn footprint(counts: &BTreeMap<u64, u64>, shift: u32) -> Footprint {
    let units = unit_counts(counts, shift);
    Footprint {
        for_99: units_covering(&units, 990, 1000),
        for_99_9: units_covering(&units, 999, 1000),
        touched: units.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_counts_largest_first() {
        // 90 + 9 = 99 of 100: two units reach 99%, the third is needed for 99.9%.
        assert_eq!(units_covering(&[1, 90, 9], 990, 1000), 2);
        assert_eq!(units_covering(&[1, 90, 9], 999, 1000), 3);
    }

    #[test]
    fn covering_exact_boundary_is_enough() {
        // 999 of 1000 is exactly 99.9%: one unit suffices, no rounding.
        assert_eq!(units_covering(&[999, 1], 999, 1000), 1);
    }

    #[test]
    fn covering_nothing_is_zero() {
        // No executed instructions: no unit is needed.
        assert_eq!(units_covering(&[], 990, 1000), 0);
        assert_eq!(units_covering(&[0, 0], 990, 1000), 0);
    }

    #[test]
    fn pages_group_addresses() {
        // 0x1000 and 0x1ff0 share a page, 0x3000 is another; lines split all three.
        let counts: BTreeMap<u64, u64> =
            [(0x1000, 500), (0x1ff0, 499), (0x3000, 1), (0x5000, 0)].into();
        assert_eq!(
            footprint(&counts, 12),
            Footprint {
                for_99: 1,
                for_99_9: 1,
                touched: 2
            }
        );
        assert_eq!(
            footprint(&counts, 6),
            Footprint {
                for_99: 2,
                for_99_9: 2,
                touched: 3
            }
        );
    }
}
