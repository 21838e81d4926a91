//! Layouts without relinking: where each function would start under a given order, and how a
//! function-relative trace maps onto those addresses.
//!
//! A trace recorded once as `(function index, offset within function, length)` triples can be
//! replayed under any number of candidate orders: [`layout_from_order`] places the functions
//! one after another the way a linker lays out `.text.<name>` input sections (each start
//! rounded up to the alignment, each function occupying its size), and [`Layout::remap`] adds
//! the start to the offset. This ignores what a real link also places between functions
//! (PLT stubs, padding of other sections, functions absent from the profile in their input
//! order); a later validation step compares against relinked binaries.
//!
//! Functions are identified by dense indices `0..n` into a `sizes` array, the same indices the
//! ordering algorithms use (`sediment-order` returns a permutation over them).

use crate::{Error, ExecProfile, ExecRange, Footprint};

/// A range of a trace expressed relative to a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FuncRange {
    /// Function index into the layout.
    pub func: u32,
    /// Offset of the first byte from the function's start.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Start address of every function when they are placed in `order` from `base`, each start
/// rounded up to a multiple of `align` (`0` and `1` mean no alignment; any other value,
/// power of two or not, is a multiple to round to).
///
/// Total for any input, so that it can serve hostile orders: indices `>= sizes.len()` are
/// skipped, a repeated index keeps its first position, and functions the order does not
/// mention are placed after the ordered ones in index order (the deterministic stand-in for
/// "the linker's input order"). Addresses saturate at `u64::MAX` instead of wrapping;
/// [`Layout::remap`] then reports ranges there as overflowing.
pub fn layout_from_order(order: &[u32], sizes: &[u64], align: u64, base: u64) -> Vec<u64> {
    let n = sizes.len();
    let mut start = vec![0u64; n];
    let mut placed = vec![false; n];
    let mut cursor = base;
    let listed = order.iter().map(|&f| f as usize);
    for f in listed.chain(0..n) {
        if f >= n || placed[f] {
            continue;
        }
        placed[f] = true;
        cursor = align_up(cursor, align);
        start[f] = cursor;
        cursor = cursor.saturating_add(sizes[f]);
    }
    start
}

/// `x` rounded up to a multiple of `align`, saturating.
fn align_up(x: u64, align: u64) -> u64 {
    if align <= 1 {
        return x;
    }
    match x % align {
        0 => x,
        r => x.saturating_add(align - r),
    }
}

/// Checks that `len` bytes at `offset` lie inside function `func` of `sizes` bytes each.
pub(crate) fn check_inside(sizes: &[u64], func: u32, offset: u64, len: u64) -> Result<(), Error> {
    let size = *sizes.get(func as usize).ok_or(Error::NoSuchFunction {
        func,
        count: sizes.len(),
    })?;
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::OutsideFunction {
            func,
            offset,
            len,
            size,
        }),
    }
}

/// Start and size of every function: the address map a function-relative trace is replayed
/// against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    start: Vec<u64>,
    size: Vec<u64>,
}

impl Layout {
    /// The layout [`layout_from_order`] computes.
    pub fn from_order(order: &[u32], sizes: &[u64], align: u64, base: u64) -> Self {
        Self {
            start: layout_from_order(order, sizes, align, base),
            size: sizes.to_vec(),
        }
    }

    /// A layout from known addresses (e.g. the symbol table of the binary the trace came
    /// from, to replay the trace under its original layout).
    pub fn from_starts(start: Vec<u64>, size: Vec<u64>) -> Result<Self, Error> {
        if start.len() != size.len() {
            return Err(Error::LengthMismatch {
                what: "function starts vs sizes",
                left: start.len(),
                right: size.len(),
            });
        }
        Ok(Self { start, size })
    }

    /// Start address of each function.
    pub fn starts(&self) -> &[u64] {
        &self.start
    }

    /// Size of each function.
    pub fn sizes(&self) -> &[u64] {
        &self.size
    }

    /// The absolute `(start, len)` of a function-relative range. The range must lie inside
    /// its function (`offset + len <= size`; a trace taken from a different build of the
    /// program fails here rather than producing plausible garbage) and inside the address
    /// space.
    pub fn remap(&self, r: FuncRange) -> Result<(u64, u64), Error> {
        check_inside(&self.size, r.func, r.offset, r.len)?;
        let start = self.start[r.func as usize];
        let addr = start.checked_add(r.offset).ok_or(Error::AddressOverflow {
            start,
            len: r.offset,
        })?;
        if addr.checked_add(r.len).is_none() {
            return Err(Error::AddressOverflow {
                start: addr,
                len: r.len,
            });
        }
        Ok((addr, r.len))
    }
}

/// The footprint a proposed order would have, from function-relative execution counts and
/// no trace in time: each `(range, count)` is placed with [`layout_from_order`]`(order,
/// sizes, align, base)` and measured at `block` bytes (a line or a page). This is the part of
/// a prediction that needs only counts (a profile's per-function byte counts are enough);
/// miss counts need the order in time, see [`crate::Capture::add_view`]. Ranges outside
/// their function are errors, as in [`Layout::remap`].
pub fn order_footprint(
    exec: &[(FuncRange, u64)],
    sizes: &[u64],
    order: &[u32],
    align: u64,
    base: u64,
    block: u64,
) -> Result<Footprint, Error> {
    let layout = Layout::from_order(order, sizes, align, base);
    let records = exec
        .iter()
        .map(|&(r, count)| {
            layout
                .remap(r)
                .map(|(start, len)| ExecRange { start, len, count })
        })
        .collect::<Result<Vec<_>, _>>()?;
    ExecProfile::new(&records)?.footprint(block)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Order 2,0,1 from 0x1000 with 16-byte alignment: f2 (10 B) at 0x1000, f0 (40 B) at 0x1010,
    // f1 (7 B) at 0x1040 (0x1010 + 40 = 0x1038 rounds up to 0x1040).
    #[test]
    fn places_in_order_with_alignment() {
        assert_eq!(
            layout_from_order(&[2, 0, 1], &[40, 7, 10], 16, 0x1000),
            vec![0x1010, 0x1040, 0x1000]
        );
        // No alignment: packed back to back.
        assert_eq!(
            layout_from_order(&[2, 0, 1], &[40, 7, 10], 1, 0),
            vec![10, 50, 0]
        );
    }

    // Unknown indices are skipped, duplicates keep the first position, unlisted functions
    // follow in index order: order [9, 3, 1, 3] over 4 functions of 8 bytes places 3, 1, 0, 2.
    #[test]
    fn hostile_orders_are_total() {
        assert_eq!(
            layout_from_order(&[9, 3, 1, 3], &[8, 8, 8, 8], 0, 0),
            vec![16, 8, 24, 0]
        );
        assert_eq!(layout_from_order(&[5], &[], 16, 0), Vec::<u64>::new());
        // Saturates instead of wrapping.
        assert_eq!(
            layout_from_order(&[], &[u64::MAX, 4], 16, 16),
            vec![16, u64::MAX]
        );
    }

    // Remapping adds the function start and checks the range against the function.
    #[test]
    fn remap_checks_bounds() {
        let l = Layout::from_order(&[1, 0], &[100, 50], 64, 0x400000);
        assert_eq!(l.starts(), &[0x400040, 0x400000]);
        let fr = |func, offset, len| FuncRange { func, offset, len };
        assert_eq!(l.remap(fr(0, 10, 20)).unwrap(), (0x40004a, 20));
        assert_eq!(l.remap(fr(1, 0, 50)).unwrap(), (0x400000, 50));
        assert_eq!(
            l.remap(fr(1, 40, 11)).unwrap_err().to_string(),
            "range at offset 0x28 of 11 bytes lies outside function 1 of 50 bytes"
        );
        assert_eq!(
            l.remap(fr(2, 0, 1)).unwrap_err().to_string(),
            "function index 2 out of range (layout has 2 functions)"
        );
        assert!(l.remap(fr(0, u64::MAX, 2)).is_err());
        let top = Layout::from_starts(vec![u64::MAX - 4], vec![100]).unwrap();
        assert!(matches!(
            top.remap(fr(0, 0, 10)),
            Err(Error::AddressOverflow { .. })
        ));
        assert!(Layout::from_starts(vec![0], vec![]).is_err());
    }

    // Two hot 64-byte functions (0 and 2) split by a cold 8 KiB one need 2 pages for 99% and
    // touch 2; placed together they need 1 and touch 1 (the cold one's 8 executed bytes follow
    // them on the same page), which is also the bound.
    #[test]
    fn order_footprint_packs_hot_code() {
        let fr = |func, offset, len| FuncRange { func, offset, len };
        let exec = [(fr(0, 0, 64), 1000), (fr(2, 0, 64), 1000), (fr(1, 0, 8), 1)];
        let sizes = [64, 8192, 64];
        let far = order_footprint(&exec, &sizes, &[0, 1, 2], 16, 0x400000, 4096).unwrap();
        let near = order_footprint(&exec, &sizes, &[0, 2, 1], 16, 0x400000, 4096).unwrap();
        assert_eq!((far.p99, far.touched, far.bound_p99), (2, 2, 1));
        assert_eq!((near.p99, near.touched, near.bound_p99), (1, 1, 1));
        assert!(order_footprint(&[(fr(0, 60, 8), 1)], &sizes, &[], 16, 0, 64).is_err());
    }

    proptest! {
        // Every function gets an aligned start, and no two functions overlap.
        #[test]
        fn layout_is_aligned_and_disjoint(sizes in proptest::collection::vec(0u64..500, 0..40),
                                          order in proptest::collection::vec(0u32..50, 0..60),
                                          align_log in 0u32..7, base in 0u64..10_000) {
            let align = 1u64 << align_log;
            let start = layout_from_order(&order, &sizes, align, base);
            prop_assert_eq!(start.len(), sizes.len());
            let mut spans: Vec<(u64, u64)> =
                start.iter().zip(&sizes).map(|(&s, &z)| (s, s + z)).collect();
            for &(s, _) in &spans {
                prop_assert!(s >= base);
                prop_assert_eq!(s % align, 0);
            }
            spans.sort_unstable();
            for w in spans.windows(2) {
                prop_assert!(w[0].1 <= w[1].0);
            }
        }
    }
}
