//! The one table of simulated instruction-side arrays: every L1i and iTLB geometry Sediment
//! reports, with the name it has in tables and JSON. `sediment sim`, `sediment compare` (which
//! hands the first four to cachegrind) and the search all build their arrays from here.
//!
//! An iTLB is a cache of page translations, so an LRU cache whose "lines" are 4 KiB pages, with
//! the TLB's entry count and associativity, misses exactly when the TLB would (for 4 KiB pages,
//! ignoring huge pages and the second-level TLB). That is how cachegrind measures one: its "I1"
//! with 4 KiB lines, e.g. `--I1=262144,8,4096` = 64 entries, 8-way.

use crate::{Error, SetAssocLru};

/// One simulated array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// JSON key of its misses (and the metric's one name).
    pub key: &'static str,
    /// Table label.
    pub label: &'static str,
    /// Bytes per block: a cache line, or a page for an iTLB.
    pub block: u64,
    /// Blocks held.
    pub entries: u64,
    /// Associativity (`entries` for fully associative).
    pub ways: u64,
}

impl Geometry {
    /// An empty LRU array of this geometry.
    pub fn array(&self) -> Result<SetAssocLru, Error> {
        SetAssocLru::new(self.block, self.entries, self.ways)
    }

    /// Cachegrind's `--I1=size,assoc,line_size` for this geometry.
    pub fn cachegrind_i1(&self) -> String {
        format!("{},{},{}", self.block * self.entries, self.ways, self.block)
    }
}

/// Every array, in report order: two L1i with 64-byte lines, two 8-way iTLBs (the geometries
/// cachegrind also measures, [`CACHEGRIND`] of them), then two fully associative iTLBs, which
/// cachegrind cannot model.
pub const GEOMETRIES: [Geometry; 6] = [
    L1I_32K_8WAY,
    L1I_16K_4WAY,
    ITLB_64_8WAY,
    ITLB_128_8WAY,
    Geometry {
        key: "itlb_misses_64_full",
        label: "iTLB misses 64 entries full",
        block: 4096,
        entries: 64,
        ways: 64,
    },
    Geometry {
        key: "itlb_misses_128_full",
        label: "iTLB misses 128 entries full",
        block: 4096,
        entries: 128,
        ways: 128,
    },
];

/// The first `CACHEGRIND` entries of [`GEOMETRIES`] are the ones cachegrind runs measure.
pub const CACHEGRIND: usize = 4;

/// 32 KiB, 8-way L1i with 64-byte lines.
pub const L1I_32K_8WAY: Geometry = Geometry {
    key: "i1_misses_32k_8way",
    label: "I1 misses 32K/8-way",
    block: 64,
    entries: 512,
    ways: 8,
};

/// 16 KiB, 4-way L1i with 64-byte lines.
pub const L1I_16K_4WAY: Geometry = Geometry {
    key: "i1_misses_16k_4way",
    label: "I1 misses 16K/4-way",
    block: 64,
    entries: 256,
    ways: 4,
};

/// 64-entry, 8-way iTLB of 4 KiB pages.
pub const ITLB_64_8WAY: Geometry = Geometry {
    key: "itlb_misses_64",
    label: "iTLB misses 64 entries 8-way",
    block: 4096,
    entries: 64,
    ways: 8,
};

/// 128-entry, 8-way iTLB of 4 KiB pages.
pub const ITLB_128_8WAY: Geometry = Geometry {
    key: "itlb_misses_128",
    label: "iTLB misses 128 entries 8-way",
    block: 4096,
    entries: 128,
    ways: 8,
};

/// One empty array per entry of [`GEOMETRIES`].
pub fn arrays() -> Result<Vec<SetAssocLru>, Error> {
    GEOMETRIES.iter().map(Geometry::array).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The cachegrind spelling of the first four geometries is what `sediment compare` has
    // always passed as `--I1`.
    #[test]
    fn cachegrind_spelling() {
        let got: Vec<String> = GEOMETRIES[..CACHEGRIND]
            .iter()
            .map(Geometry::cachegrind_i1)
            .collect();
        assert_eq!(
            got,
            ["32768,8,64", "16384,4,64", "262144,8,4096", "524288,8,4096"]
        );
        assert!(arrays().is_ok());
    }
}
