//! [`Metrics`]: the one set of layout metrics of one run of one binary, whoever measured it:
//! `sediment compare` and `sediment noise` (cachegrind and callgrind runs, `sediment-measure`)
//! and `sediment sim` (this crate's replay of a lackey run). A metric has one name everywhere:
//! the field name is its JSON key and its row key in every table; miss counts are named by
//! their [`crate::GEOMETRIES`] entry.
//!
//! What the footprint fields weigh depends on who measured them, and [`Metrics::weighed_by`]
//! says which ([`FootprintWeight`]); table labels print it. Both use the one footprint rule of
//! [`crate::footprint`].

/// What a footprint's weight counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FootprintWeight {
    /// Per-instruction execution counts (callgrind, which gives no instruction lengths): each
    /// instruction weighs its count, in the block of its first byte.
    #[default]
    ExecutedInstructions,
    /// Per-byte execution counts (a simulated trace): every fetched byte weighs its count.
    ExecutedBytes,
}

impl FootprintWeight {
    /// How a table label says it: `(executed instructions)` or `(executed bytes)`.
    pub fn label(self) -> &'static str {
        match self {
            FootprintWeight::ExecutedInstructions => "(executed instructions)",
            FootprintWeight::ExecutedBytes => "(executed bytes)",
        }
    }
}

/// Layout metrics of one binary run with one set of arguments. Counts are whole-run totals.
/// Fields only a simulated run has are `None` otherwise and then left out of JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Metrics {
    /// The binary, as given (empty when the caller labels columns itself).
    #[serde(default)]
    pub binary: String,
    /// Instructions executed by the whole process (cachegrind's `Ir`, including ld.so and
    /// libc).
    pub instructions: u64,
    /// I1 misses, 32 KiB, 8-way, 64-byte lines.
    pub i1_misses_32k_8way: u64,
    /// I1 misses, 16 KiB, 4-way, 64-byte lines.
    pub i1_misses_16k_4way: u64,
    /// Instruction-TLB misses, 64 entries, 8-way, 4 KiB pages.
    pub itlb_misses_64: u64,
    /// Instruction-TLB misses, 128 entries, 8-way, 4 KiB pages.
    pub itlb_misses_128: u64,
    /// Instruction-TLB misses, 64 entries, fully associative (simulated runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itlb_misses_64_full: Option<u64>,
    /// Instruction-TLB misses, 128 entries, fully associative (simulated runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itlb_misses_128_full: Option<u64>,
    /// Instructions executed inside the binary's own code.
    pub object_instructions: u64,
    /// 4 KiB pages of the binary holding 99% of the weight ([`Metrics::weighed_by`]).
    pub pages_99: u64,
    /// 4 KiB pages holding 99.9%.
    pub pages_99_9: u64,
    /// 64-byte lines holding 99%.
    pub lines_99: u64,
    /// 64-byte lines holding 99.9%.
    pub lines_99_9: u64,
    /// Distinct 4 KiB pages of the binary with weight.
    pub pages_touched: u64,
    /// Distinct 64-byte lines of the binary with weight.
    pub lines_touched: u64,
    /// Lower bounds over all layouts of the six footprints above (simulated runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Bounds>,
    /// Merged fetch ranges replayed (simulated runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetches: Option<u64>,
    /// FNV-1a 64 hash (hex) of the program's standard output: two layouts of one program must
    /// print the same thing.
    pub stdout_fnv1a: String,
    /// What the footprint fields weigh (not serialised: the producer decides it).
    #[serde(skip)]
    pub weighed_by: FootprintWeight,
}

/// Lower bounds of the footprints over every layout of the same executed bytes
/// ([`crate::Footprint`]'s `bound_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Bounds {
    /// Bound of [`Metrics::pages_99`].
    pub pages_99: u64,
    /// Bound of [`Metrics::pages_99_9`].
    pub pages_99_9: u64,
    /// Bound of [`Metrics::pages_touched`].
    pub pages_touched: u64,
    /// Bound of [`Metrics::lines_99`].
    pub lines_99: u64,
    /// Bound of [`Metrics::lines_99_9`].
    pub lines_99_9: u64,
    /// Bound of [`Metrics::lines_touched`].
    pub lines_touched: u64,
}

impl Metrics {
    /// Misses of each [`crate::GEOMETRIES`] entry, in its order (0 for one not measured).
    pub fn misses(&self) -> Vec<u64> {
        vec![
            self.i1_misses_32k_8way,
            self.i1_misses_16k_4way,
            self.itlb_misses_64,
            self.itlb_misses_128,
            self.itlb_misses_64_full.unwrap_or(0),
            self.itlb_misses_128_full.unwrap_or(0),
        ]
    }

    /// Sets the misses of the [`crate::GEOMETRIES`] entries from `misses`, in their order.
    pub fn set_misses(&mut self, misses: &[u64]) {
        let at = |i: usize| misses.get(i).copied();
        self.i1_misses_32k_8way = at(0).unwrap_or(0);
        self.i1_misses_16k_4way = at(1).unwrap_or(0);
        self.itlb_misses_64 = at(2).unwrap_or(0);
        self.itlb_misses_128 = at(3).unwrap_or(0);
        self.itlb_misses_64_full = at(4);
        self.itlb_misses_128_full = at(5);
    }

    /// Sets the six footprints (and, from the same [`crate::Footprint`]s, their bounds).
    pub fn set_footprints(&mut self, pages: &crate::Footprint, lines: &crate::Footprint) {
        self.pages_99 = pages.p99;
        self.pages_99_9 = pages.p999;
        self.pages_touched = pages.touched;
        self.lines_99 = lines.p99;
        self.lines_99_9 = lines.p999;
        self.lines_touched = lines.touched;
        self.bounds = Some(Bounds {
            pages_99: pages.bound_p99,
            pages_99_9: pages.bound_p999,
            pages_touched: pages.bound_touched,
            lines_99: lines.bound_p99,
            lines_99_9: lines.bound_p999,
            lines_touched: lines.bound_touched,
        });
    }
}
