//! A bounded in-memory record of one run's fetch ranges, with the main binary's code kept
//! relative to its functions, so that a search can replay the run under many candidate orders
//! without running the program again (see [`mod@crate::refine`]).
//!
//! [`crate::Capture`] answers a fixed set of layouts chosen before the run; a search chooses
//! its next layout from the last one's result, so the run must be kept. A real run is tens of
//! millions of merged fetch ranges (SQLite's speedtest1 at `--size 2`: about 2.6e8
//! instructions), so the record is bounded:
//!
//! - **Function-relative events.** Every fetch range is split at function boundaries; a piece
//!   inside a function is kept as `(function, offset, length)`, any other piece (the dynamic
//!   loader, libc, PLT stubs) as its address. 16 bytes an event.
//! - **Sampled windows.** The stream is cut into windows of [`WINDOW`] events, and windows
//!   whose number is a multiple of the *period* are kept. The period starts at 1 and doubles,
//!   dropping every other kept window, whenever the kept events would exceed the cap. The
//!   result depends only on the stream and the cap. Replaying kept windows back to back
//!   carries each window's cache state into the next instead of the state the skipped part
//!   would have left; with windows of 65,536 fetches and caches of 512 lines the difference
//!   is a warm-up of a few hundred misses per window, the same for every layout compared.
//!   (Sampled simulation in this sense: Wunderlich et al., "SMARTS", ISCA 2003.)
//! - **Exact counts beside the sample.** Per distinct function-relative range, how often it
//!   ran, over the whole run (bounded by the program's distinct straight-line runs, as
//!   [`crate::Capture`]'s footprint map): the footprint rows (pages and lines for 99%) are
//!   exact, only miss counts are sampled.
//!
//! Hostile input: unit arrays are validated (sorted, disjoint, non-empty); the cap bounds the
//! memory whatever the length of the run.

use std::collections::HashMap;

use crate::{Error, ExecProfile, ExecRange, SetAssocLru};

/// Events per sampling window.
pub const WINDOW: u64 = 1 << 16;

/// Default cap on kept events (16 bytes each: 128 MiB).
pub const DEFAULT_MAX_EVENTS: usize = 8 << 20;

/// The unit number marking an absolute (not function-relative) event.
const ABSOLUTE: u32 = u32::MAX;

/// One kept fetch: `len` bytes at `at` (an address, or an offset into `unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Event {
    at: u64,
    unit: u32,
    len: u32,
}

/// The record; see the module documentation.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Run-time start and size of every unit (function), sorted by start, disjoint.
    starts: Vec<u64>,
    sizes: Vec<u64>,
    events: Vec<Event>,
    /// `(window number, index of its first event)` of every kept window, in stream order.
    windows: Vec<(u64, usize)>,
    period: u64,
    /// Events offered so far (kept or not).
    offered: u64,
    max_events: usize,
    /// Executions of each distinct `(unit, offset, len)`, over the whole run.
    counts: HashMap<(u32, u64, u64), u64>,
}

impl Recording {
    /// An empty record for functions at run-time `starts` of `sizes` bytes (sorted by start,
    /// disjoint; a zero-sized function, an alias, never holds a byte), keeping at most
    /// `max_events` events (at least one window).
    pub fn new(starts: Vec<u64>, sizes: Vec<u64>, max_events: usize) -> Result<Self, Error> {
        if starts.len() != sizes.len() {
            return Err(Error::LengthMismatch {
                what: "unit starts and sizes",
                left: starts.len(),
                right: sizes.len(),
            });
        }
        if u32::try_from(starts.len()).map_or(true, |n| n == ABSOLUTE) {
            return Err(Error::Geometry(format!("{} functions", starts.len())));
        }
        let mut end = 0u64;
        for (i, (&s, &z)) in starts.iter().zip(&sizes).enumerate() {
            let e = s
                .checked_add(z)
                .ok_or(Error::AddressOverflow { start: s, len: z })?;
            if i > 0 && s < end {
                return Err(Error::Geometry(format!(
                    "function {i} at {s:#x} of {z} bytes overlaps the previous one"
                )));
            }
            end = e;
        }
        Ok(Self {
            starts,
            sizes,
            events: Vec::new(),
            windows: Vec::new(),
            period: 1,
            offered: 0,
            max_events: max_events.max(WINDOW as usize),
            counts: HashMap::new(),
        })
    }

    /// Number of units (functions).
    pub fn units(&self) -> usize {
        self.starts.len()
    }

    /// Run-time starts of the units as recorded.
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// Sizes of the units.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// Events kept for replay.
    pub fn kept(&self) -> usize {
        self.events.len()
    }

    /// Events offered over the whole run.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// One window in how many was kept.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Adds the fetch of `[start, end)`, split at function boundaries.
    pub fn push(&mut self, start: u64, end: u64) {
        let mut at = start;
        while at < end {
            // The last unit starting at or before `at`.
            let i = self.starts.partition_point(|&s| s <= at);
            let inside = i
                .checked_sub(1)
                .filter(|&u| at - self.starts[u] < self.sizes[u]);
            let (piece_end, unit, offset) = match inside {
                Some(u) => {
                    let e = end.min(self.starts[u] + self.sizes[u]);
                    (e, u as u32, at - self.starts[u])
                }
                None => {
                    let next = self.starts.get(i).copied().unwrap_or(u64::MAX);
                    (end.min(next), ABSOLUTE, at)
                }
            };
            let len = piece_end - at;
            if unit != ABSOLUTE {
                *self.counts.entry((unit, offset, len)).or_insert(0) += 1;
            }
            // `len` fits: a fetch range is at most a few megabytes (the reader's caps).
            let len = u32::try_from(len).unwrap_or(u32::MAX);
            self.keep(Event {
                at: offset,
                unit,
                len,
            });
            at = piece_end;
        }
    }

    fn keep(&mut self, e: Event) {
        let window = self.offered / WINDOW;
        self.offered += 1;
        if window % self.period != 0 {
            return;
        }
        if self.windows.last().map(|w| w.0) != Some(window) {
            self.windows.push((window, self.events.len()));
        }
        self.events.push(e);
        if self.events.len() > self.max_events {
            self.thin();
        }
    }

    /// Doubles the period, keeping the windows whose number is a multiple of it.
    fn thin(&mut self) {
        self.period *= 2;
        let mut events = Vec::with_capacity(self.events.len() / 2 + 1);
        let mut windows = Vec::with_capacity(self.windows.len() / 2 + 1);
        for (k, &(w, first)) in self.windows.iter().enumerate() {
            if w % self.period != 0 {
                continue;
            }
            let last = self.windows.get(k + 1).map_or(self.events.len(), |n| n.1);
            windows.push((w, events.len()));
            events.extend_from_slice(&self.events[first..last]);
        }
        self.events = events;
        self.windows = windows;
    }

    /// Replays the kept events with the units at `starts` (one per unit), feeding each fetch
    /// to every array of `arrays[k]` with the units moved by `shifts[k]` more bytes
    /// (addresses outside every unit are not moved). `arrays.len()` must equal
    /// `shifts.len()`.
    pub fn replay(
        &self,
        starts: &[u64],
        shifts: &[u64],
        arrays: &mut [Vec<SetAssocLru>],
    ) -> Result<(), Error> {
        if starts.len() != self.starts.len() {
            return Err(Error::LengthMismatch {
                what: "layout starts and recorded functions",
                left: starts.len(),
                right: self.starts.len(),
            });
        }
        if shifts.len() != arrays.len() {
            return Err(Error::LengthMismatch {
                what: "shifts and array sets",
                left: shifts.len(),
                right: arrays.len(),
            });
        }
        for e in &self.events {
            let len = u64::from(e.len);
            if e.unit == ABSOLUTE {
                for set in arrays.iter_mut() {
                    for a in set.iter_mut() {
                        a.fetch(e.at, len);
                    }
                }
                continue;
            }
            let base = starts[e.unit as usize].saturating_add(e.at);
            for (set, &d) in arrays.iter_mut().zip(shifts) {
                let addr = base.saturating_add(d);
                for a in set.iter_mut() {
                    a.fetch(addr, len);
                }
            }
        }
        Ok(())
    }

    /// Per-byte execution counts of the units' code over the whole run, with the units at
    /// `starts`.
    pub fn exec_profile(&self, starts: &[u64]) -> Result<ExecProfile, Error> {
        if starts.len() != self.starts.len() {
            return Err(Error::LengthMismatch {
                what: "layout starts and recorded functions",
                left: starts.len(),
                right: self.starts.len(),
            });
        }
        let records: Vec<ExecRange> = self
            .counts
            .iter()
            .map(|(&(u, offset, len), &count)| ExecRange {
                start: starts[u as usize].saturating_add(offset),
                len,
                count,
            })
            .collect();
        // As in `Capture::exec_profile`, the result does not depend on the map's order.
        ExecProfile::new(&records)
    }

    /// Executed bytes (count x length, summed) of every unit over the whole run.
    pub fn unit_weights(&self) -> Vec<u128> {
        let mut w = vec![0u128; self.starts.len()];
        for (&(u, _, len), &count) in &self.counts {
            w[u as usize] += u128::from(count) * u128::from(len);
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lru(block: u64, entries: u64, ways: u64) -> SetAssocLru {
        SetAssocLru::new(block, entries, ways).unwrap()
    }

    // Two functions at 0x1000 (0x40 bytes) and 0x2000 (0x20 bytes). A fetch crossing from the
    // first into the gap and on into the second is split into three events: function 0, the
    // gap as an address, function 1.
    #[test]
    fn splits_at_function_boundaries() {
        let mut r = Recording::new(vec![0x1000, 0x2000], vec![0x40, 0x20], 1 << 20).unwrap();
        r.push(0x1030, 0x2010);
        r.push(0x500, 0x510);
        assert_eq!(
            r.events,
            vec![
                Event {
                    at: 0x30,
                    unit: 0,
                    len: 0x10
                },
                Event {
                    at: 0x1040,
                    unit: ABSOLUTE,
                    len: 0x2000 - 0x1040
                },
                Event {
                    at: 0,
                    unit: 1,
                    len: 0x10
                },
                Event {
                    at: 0x500,
                    unit: ABSOLUTE,
                    len: 0x10
                },
            ]
        );
        assert_eq!(r.unit_weights(), vec![0x10, 0x10]);
    }

    // Replayed with the functions swapped, the misses follow the new addresses: two
    // functions 4 KiB apart on a direct-mapped 64-line cache collide; placed next to each
    // other they do not.
    #[test]
    fn replays_under_another_layout() {
        let mut r = Recording::new(vec![0x10000, 0x11000], vec![64, 64], 1 << 20).unwrap();
        for _ in 0..10 {
            r.push(0x10000, 0x10040);
            r.push(0x11000, 0x11040);
        }
        let run = |starts: &[u64]| {
            let mut arrays = vec![vec![lru(64, 64, 1)]];
            r.replay(starts, &[0], &mut arrays).unwrap();
            arrays[0][0].stats().misses
        };
        assert_eq!(run(&[0x10000, 0x11000]), 20);
        assert_eq!(run(&[0x10000, 0x10040]), 2);
        let fp = r.exec_profile(&[0x10000, 0x10040]).unwrap().footprint(4096);
        assert_eq!(fp.unwrap().touched, 1);
        assert!(r.replay(&[0], &[0], &mut [vec![]]).is_err());
    }

    // Past the cap, whole windows are dropped, every other one each time, and what is kept
    // depends only on the stream.
    #[test]
    fn sampling_keeps_whole_windows_and_is_bounded() {
        let cap = 3 * WINDOW as usize;
        let mut r = Recording::new(vec![0x1000], vec![0x100], cap).unwrap();
        let n = 10 * WINDOW;
        for i in 0..n {
            let off = (i % 16) * 16;
            r.push(0x1000 + off, 0x1000 + off + 4);
        }
        assert!(r.kept() <= cap);
        assert_eq!(r.offered(), n);
        // Period 4: windows 0, 4, 8 kept.
        assert_eq!(r.period(), 4);
        assert_eq!(
            r.windows.iter().map(|w| w.0).collect::<Vec<_>>(),
            vec![0, 4, 8]
        );
        assert_eq!(r.kept(), 3 * WINDOW as usize);
        // Counts are exact, not sampled.
        assert_eq!(r.unit_weights(), vec![u128::from(n) * 4]);
    }

    #[test]
    fn rejects_bad_units() {
        assert!(Recording::new(vec![0x10, 0x18], vec![16, 4], 1).is_err());
        // An alias of size 0 at the next function's start owns nothing.
        let mut r = Recording::new(vec![0x10, 0x10], vec![0, 8], 1).unwrap();
        r.push(0x10, 0x14);
        assert_eq!(r.unit_weights(), vec![0, 4]);
        assert!(Recording::new(vec![0x10], vec![], 1).is_err());
        assert!(Recording::new(vec![u64::MAX], vec![2], 1).is_err());
    }
}
