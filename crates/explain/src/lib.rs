//! Explains code layouts, so that a change in a benchmark can be traced to where code moved.
//!
//! - [`mod@diff`]: what moved between two builds of a program, by how much, and why (a function
//!   that grew, functions that arrived or left, padding, reordering), and the hot code's lines
//!   and pages in each.
//! - [`heatmap`]: a picture of where the executed code sits in a binary: one row per 4 KiB
//!   page, one cell per 64-byte line, coloured by profile weight; several builds side by side.
//! - [`structs`]: data layout of structures from DWARF: holes, padding, members straddling a
//!   cache line, and atomics or locks sharing a line with other members (false sharing).
//!
//! Pure: the caller reads ELF files and profiles and passes [`Placed`] functions (or
//! `sediment_elf` structure layouts); this crate returns data and SVG text. Deterministic: the same inputs give the same bytes.

pub mod diff;
pub mod heatmap;
pub mod structs;

pub use diff::{
    diff, footprint, lines_spanned, pair, Cause, Footprint, HotFootprint, LayoutDiff, Placed,
    Segment, SizeChange, SpanChange, LINE, PAGE,
};
