//! Regression: `ProfileBuilder` kept its edges in a `BTreeMap<(FuncKey, FuncKey), u64>`, so every
//! distinct call held its own copy of both names, and `build` copied every key once more. A BOLT
//! fdata file of a million calls between a million functions (42 MB) took 580 MB to import, and
//! one of short distinct names 36 times its size. The builder now stores each key once. The
//! same for `Merger`, which kept its sums in the same kind of maps: a call between two names
//! cost a copy of both for every call of every input.
//!
//! The test counts the heap bytes the builder holds, with a global allocator that keeps a
//! per-thread tally (the test harness runs tests on their own threads, so nothing else counts).
//! This file is its own test binary so that the allocator is used by no other test.
//!
//! Turned down: measuring the process's resident memory, which depends on the allocator's
//! caching and on the other tests running in parallel.

use sediment_profile::{FuncKey, MergeOptions, Merger, Meta, Profile, ProfileBuilder};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, with a per-thread count of live and peak bytes.
struct Counting;

thread_local! {
    // Const-initialised `Cell`s: no allocation and no destructor, so the allocator may use them.
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// Adds `grow` bytes to this thread's live count (and raises its peak), then takes `shrink`.
/// Frees on a thread of memory allocated on another wrap around harmlessly: no test does it.
fn tally(grow: usize, shrink: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().wrapping_add(grow).wrapping_sub(shrink);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded unchanged to `System`; the tally only reads the layout.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            tally(layout.size(), 0);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        System.dealloc(p, layout);
        tally(0, layout.size());
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes allocated by this thread and not yet freed; resets the peak to it.
fn live_reset_peak() -> usize {
    let now = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(now));
    now
}

#[test]
fn builder_stores_each_name_once() {
    // 200 functions with 1000-byte names, each the caller of three calls and the callee of
    // three: the old builder held 1 + 6 copies of every name, then one more in the profile.
    // Interned, the names are held once and the profile takes them over.
    const N: usize = 200;
    let keys: Vec<FuncKey> = (0..N)
        .map(|i| FuncKey::local(format!("{i:0>1000}"), "unit.c"))
        .collect();
    let names: usize = keys.iter().map(|k| k.name.len() + 6).sum();
    let base = live_reset_peak();
    let mut b = ProfileBuilder::new(Meta::default());
    for i in 0..N {
        for step in [1, 7, 31] {
            b.add_call(&keys[i], &keys[(i + step) % N], 1);
        }
    }
    let held = LIVE.with(Cell::get) - base;
    let p = b.build();
    let peak = PEAK.with(Cell::get) - base;
    assert_eq!((p.functions.len(), p.edges.len()), (N, 3 * N));
    // The bookkeeping besides the names is a few hundred bytes per function and call.
    assert!(
        held < names * 3 / 2,
        "builder holds {held} bytes for {names} of names"
    );
    assert!(peak < names * 2, "peak {peak} bytes for {names} of names");
}

/// 200 functions with 1000-byte names, each the caller of three calls and the callee of
/// three, self weights from `seed` (so that two inputs differ).
fn long_named(seed: u64) -> Profile {
    const N: usize = 200;
    let keys: Vec<FuncKey> = (0..N)
        .map(|i| FuncKey::local(format!("{i:0>1000}"), "unit.c"))
        .collect();
    let mut b = ProfileBuilder::new(Meta {
        binary: "app".into(),
        ..Meta::default()
    });
    for i in 0..N {
        b.add_self(&keys[i], seed + i as u64);
        for step in [1, 7, 31] {
            b.add_call(&keys[i], &keys[(i + step) % N], seed * step as u64);
        }
    }
    b.build()
}

#[test]
fn merger_stores_each_name_once() {
    // Two inputs of the same 200 long names and 600 calls: the old merger held a copy of both
    // names of every call (1 + 6 copies of each name) however many inputs shared them; now one.
    let (a, b) = (long_named(1), long_named(2));
    let names: usize = a.functions.iter().map(|f| f.key.name.len() + 6).sum();
    let base = live_reset_peak();
    let mut m = Merger::new();
    m.add(1.0, &a).unwrap();
    m.add(3.0, &b).unwrap();
    let held = LIVE.with(Cell::get) - base;
    assert!(
        held < names * 3 / 2,
        "merger holds {held} bytes for {names} of names"
    );
    // Joining a partial merge of the same names keeps no second copy (the partial merge
    // holds its own while it lives).
    let mut other = Merger::new();
    other.add(2.0, &a).unwrap();
    m.absorb(other);
    let held = live_reset_peak() - base;
    assert!(held < names * 3 / 2, "after absorb: {held} bytes");
    let p = m.finish(MergeOptions::default()).unwrap();
    let peak = PEAK.with(Cell::get) - base;
    assert_eq!((p.functions.len(), p.edges.len()), (200, 600));
    assert!(peak < names * 2, "peak {peak} bytes for {names} of names");
}
