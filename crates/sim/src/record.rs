//! A bounded in-memory record of one run's fetch ranges, with the main binary's code kept
//! relative to its functions, so that a search can replay the run under many candidate orders
//! without running the program again (the search of `sediment-tune` does).
//!
//! [`crate::Capture`] answers a fixed set of layouts chosen before the run; a search chooses
//! its next layout from the last one's result, so the run must be kept. A real run is tens of
//! millions of merged fetch ranges (SQLite's speedtest1 at `--size 2`: about 2.6e8
//! instructions), so the record is bounded:
//!
//! - **Function-relative events.** Every fetch range is split at function boundaries (and
//!   into pieces of at most [`MAX_RANGE_LEN`] bytes, a cap real runs never reach); a piece
//!   inside a function is kept as `(function, offset, length)`, any other piece (the dynamic
//!   loader, libc, PLT stubs) as its address. 16 bytes an event.
//! - **Sampled windows.** The stream is cut into windows of [`WINDOW`] events, and windows
//!   whose number is a multiple of the *period* are kept. The period starts at 1 and doubles,
//!   dropping every other kept window, whenever the kept events would exceed the cap. The
//!   result depends only on the stream and the cap. Replaying kept windows back to back
//!   carries each window's cache state into the next instead of the state the skipped part
//!   would have left; with windows of 65,536 fetches and caches of 512 lines the difference
//!   is a warm-up of a few hundred misses per window, the same for every layout compared.
//!   (Sampled simulation in this sense: Wunderlich et al., "SMARTS", ISCA 2003.) What the
//!   sample cannot keep is a miss count made in short stretches of the run that the dropped
//!   windows hold: on SQLite's `--size 2` run, one window in four ranked two orders' iTLB
//!   misses the other way round from the whole run (`docs/journal/tune.md`, "What the
//!   remaining losses are made of"); a larger cap keeps more, up to the whole run.
//! - **Exact counts beside the sample.** Per distinct function-relative range, how often it
//!   ran, over the whole run (bounded by the program's distinct straight-line runs, as
//!   [`crate::Capture`]'s footprint map): the footprint rows (pages and lines for 99%) are
//!   exact, only miss counts are sampled.
//!
//! Hostile input: unit arrays are validated (sorted, disjoint, non-empty); the cap bounds the
//! memory whatever the length of the run.

use std::collections::HashMap;

use crate::trace::MAX_RANGE_LEN;
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
            // Pieces of at most MAX_RANGE_LEN bytes (a longer straight run is a few pieces),
            // so that a saved recording can be checked against that cap.
            let piece_end = piece_end.min(at.saturating_add(MAX_RANGE_LEN));
            let len = piece_end - at;
            if unit != ABSOLUTE {
                *self.counts.entry((unit, offset, len)).or_insert(0) += 1;
            }
            let len = len as u32; // at most MAX_RANGE_LEN
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

    /// As [`Recording::replay`], with the shifts split into up to `threads` contiguous groups
    /// of about as many arrays each, every group replayed by a thread of its own. Each array
    /// sees the same fetches in the same order as in [`Recording::replay`], so the result is
    /// the same whatever `threads` (0 counts as 1).
    pub fn replay_parallel(
        &self,
        starts: &[u64],
        shifts: &[u64],
        arrays: &mut [Vec<SetAssocLru>],
        threads: usize,
    ) -> Result<(), Error> {
        let groups = split_by_arrays(arrays, threads.max(1));
        // One group, or lengths that do not match: `replay` itself (and its error).
        if groups.len() <= 1 || shifts.len() != arrays.len() {
            return self.replay(starts, shifts, arrays);
        }
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(groups.len());
            let (mut rest, mut from) = (arrays, 0);
            for &end in &groups {
                let (group, tail) = rest.split_at_mut(end - from);
                let shifts = &shifts[from..end];
                handles.push(scope.spawn(move || self.replay(starts, shifts, group)));
                (rest, from) = (tail, end);
            }
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("a replay thread panicked"))
        })
    }

    /// Per-byte execution counts of the units' code over the whole run, with the units at
    /// `starts`.
    pub fn exec_profile(&self, starts: &[u64]) -> Result<ExecProfile, Error> {
        self.exec_profile_scaled(starts, None)
    }

    /// As [`Recording::exec_profile`], with every count of unit `u` multiplied by `scale[u]`
    /// (rounded and saturated; NaN and negative products count 0), where `scale` is given:
    /// another workload's weights put on this run's shape of each function.
    pub fn exec_profile_scaled(
        &self,
        starts: &[u64],
        scale: Option<&[f64]>,
    ) -> Result<ExecProfile, Error> {
        if let Some(scale) = scale.filter(|s| s.len() != self.starts.len()) {
            return Err(Error::LengthMismatch {
                what: "unit scales and recorded functions",
                left: scale.len(),
                right: self.starts.len(),
            });
        }
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
                // `as` saturates: NaN and negative products become 0, huge ones u64::MAX.
                count: scale.map_or(count, |s| (count as f64 * s[u as usize]).round() as u64),
            })
            .collect();
        // As in `Capture::exec_profile`, the result does not depend on the map's order.
        ExecProfile::new(&records)
    }

    /// Where each unit is first fetched: the index of its first kept event (`u64::MAX` for a
    /// unit no kept window fetches). The order in which the run first reached its functions,
    /// to the resolution of the kept windows (a unit first run in a dropped window counts
    /// from its next fetch in a kept one).
    pub fn first_fetches(&self) -> Vec<u64> {
        let mut first = vec![u64::MAX; self.starts.len()];
        for (k, e) in self.events.iter().enumerate() {
            if let Some(f) = first.get_mut(e.unit as usize).filter(|f| **f == u64::MAX) {
                *f = k as u64;
            }
        }
        first
    }

    /// Every distinct function-relative range executed over the whole run, with its count:
    /// `(unit, offset, len, count)`, sorted.
    pub fn unit_ranges(&self) -> Vec<(u32, u64, u64, u64)> {
        let mut v: Vec<_> = self
            .counts
            .iter()
            .map(|(&(u, offset, len), &count)| (u, offset, len, count))
            .collect();
        v.sort_unstable();
        v
    }

    /// Share of the kept fetched bytes that fell outside every unit (shared libraries, the
    /// loader, code without a symbol): 0 to 1, 0 when nothing was kept.
    pub fn outside_share(&self) -> f64 {
        let (mut out, mut all) = (0u64, 0u64);
        for e in &self.events {
            all = all.saturating_add(u64::from(e.len));
            if e.unit == ABSOLUTE {
                out = out.saturating_add(u64::from(e.len));
            }
        }
        if all == 0 {
            0.0
        } else {
            out as f64 / all as f64
        }
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

/// Where `threads` contiguous groups of `arrays` end (exclusive indices, increasing, the last
/// `arrays.len()`), cut so each group holds about as many arrays plus one per shift (the work
/// of a shift: its own pass over the fetches and a fetch per array). Fewer groups than
/// `threads` when there are fewer shifts; none when there are no shifts.
fn split_by_arrays(arrays: &[Vec<SetAssocLru>], threads: usize) -> Vec<usize> {
    let cost: Vec<usize> = arrays.iter().map(|set| set.len() + 1).collect();
    let total: usize = cost.iter().sum();
    let groups = threads.min(arrays.len());
    let mut ends = Vec::with_capacity(groups);
    let mut sum = 0;
    for (k, c) in cost.iter().enumerate() {
        sum += c;
        // Close group g once its share of the total is reached, leaving a shift for each
        // group still to come.
        let g = ends.len() + 1;
        if g < groups && sum * groups >= total * g && arrays.len() - (k + 1) >= groups - g {
            ends.push(k + 1);
        }
    }
    if !arrays.is_empty() {
        ends.push(arrays.len());
    }
    ends
}

/// First bytes of [`Saved::to_bytes`]: the format's name and version.
const MAGIC: &[u8; 16] = b"sediment-rec 1\n\0";

/// A recording kept in a file between runs, so that a search can be repeated without running
/// the program again: the [`Recording`], the symbol name of each unit, what the caller keyed
/// it by (e.g. a hash of the binary and its arguments) and a few numbers measured with it.
///
/// [`Saved::to_bytes`] writes magic, then little-endian 64-bit fields: the key, the numbers,
/// the units (start, size, name), the sampling state, the kept windows and events and the
/// exact counts (sorted, so the same recording gives the same bytes). [`Saved::from_bytes`]
/// checks every count against the bytes left before allocating and every event and count
/// against its unit and against the recorder's piece length ([`MAX_RANGE_LEN`]), so a
/// truncated or corrupt file is an error, never a panic, an allocation larger than the file or
/// a replay longer than a few thousand block accesses per byte of it.
#[derive(Debug, Clone)]
pub struct Saved {
    /// The caller's key.
    pub key: u64,
    /// The caller's numbers.
    pub numbers: Vec<u64>,
    /// Symbol name of each unit.
    pub names: Vec<String>,
    /// The run.
    pub recording: Recording,
}

impl Saved {
    /// The bytes of the file; see the type's documentation.
    pub fn to_bytes(&self) -> Vec<u8> {
        let r = &self.recording;
        let mut o = MAGIC.to_vec();
        let mut put = |x: u64| o.extend_from_slice(&x.to_le_bytes());
        put(self.key);
        put(self.numbers.len() as u64);
        self.numbers.iter().for_each(|&n| put(n));
        put(r.starts.len() as u64);
        for (&s, &z) in r.starts.iter().zip(&r.sizes) {
            put(s);
            put(z);
        }
        put(r.period);
        put(r.offered);
        put(r.max_events as u64);
        put(r.windows.len() as u64);
        for &(w, first) in &r.windows {
            put(w);
            put(first as u64);
        }
        put(r.events.len() as u64);
        for e in &r.events {
            put(e.at);
            put(u64::from(e.unit) | u64::from(e.len) << 32);
        }
        let mut counts: Vec<_> = r.counts.iter().collect();
        counts.sort_unstable();
        put(counts.len() as u64);
        for (&(u, offset, len), &n) in counts {
            put(u64::from(u));
            put(offset);
            put(len);
            put(n);
        }
        for name in &self.names {
            o.extend_from_slice(&(name.len() as u64).to_le_bytes());
            o.extend_from_slice(name.as_bytes());
        }
        o
    }

    /// Reads [`Saved::to_bytes`]'s bytes back, validating them.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let corrupt = |what: &str| Error::Corrupt(what.to_string());
        let rest = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or_else(|| corrupt("not a sediment recording (or another version)"))?;
        let mut rd = Fields { rest };
        let key = rd.u64()?;
        let n = rd.count(8)?;
        let numbers = (0..n).map(|_| rd.u64()).collect::<Result<_, _>>()?;
        let units = rd.count(16)?;
        let (mut starts, mut sizes) = (Vec::with_capacity(units), Vec::with_capacity(units));
        for _ in 0..units {
            starts.push(rd.u64()?);
            sizes.push(rd.u64()?);
        }
        let period = rd.u64()?;
        let offered = rd.u64()?;
        let max_events = usize::try_from(rd.u64()?)
            .ok()
            .filter(|&m| m >= WINDOW as usize)
            .ok_or_else(|| corrupt("event cap below one window"))?;
        let mut r = Recording::new(starts, sizes, max_events)?;
        if !period.is_power_of_two() {
            return Err(corrupt("sampling period not a power of two"));
        }
        let n = rd.count(16)?;
        let mut windows = Vec::with_capacity(n);
        for _ in 0..n {
            let w = rd.u64()?;
            let first = usize::try_from(rd.u64()?).map_err(|_| corrupt("window start"))?;
            windows.push((w, first));
        }
        let n = rd.count(16)?;
        let mut events = Vec::with_capacity(n);
        for _ in 0..n {
            let at = rd.u64()?;
            let packed = rd.u64()?;
            let e = Event {
                at,
                unit: packed as u32,
                len: (packed >> 32) as u32,
            };
            r.check_piece(e.unit, e.at, u64::from(e.len))?;
            events.push(e);
        }
        // Windows: increasing numbers, multiples of the period, each starting after the last
        // and the first at the first event.
        let ordered = windows
            .windows(2)
            .all(|p| p[0].0 < p[1].0 && p[0].1 < p[1].1);
        let placed = match (windows.first(), windows.last()) {
            (Some(f), Some(l)) => f.1 == 0 && l.1 < events.len(),
            _ => events.is_empty(),
        };
        if !ordered || !placed || windows.iter().any(|w| w.0 % period != 0) {
            return Err(corrupt("kept windows out of order"));
        }
        if events.len() > r.max_events || (events.len() as u64) > offered {
            return Err(corrupt("more events kept than the cap or the run allow"));
        }
        let n = rd.count(32)?;
        let mut counts = HashMap::with_capacity(n);
        let mut last = None;
        for _ in 0..n {
            // Counts are of pieces inside functions only.
            let unit = u32::try_from(rd.u64()?)
                .ok()
                .filter(|&u| u != ABSOLUTE)
                .ok_or_else(|| corrupt("unit of a count"))?;
            let (offset, len) = (rd.u64()?, rd.u64()?);
            r.check_piece(unit, offset, len)?;
            // Strictly increasing, as written: no range twice, one file per recording.
            let range = (unit, offset, len);
            if last.is_some_and(|l| l >= range) {
                return Err(corrupt("counted ranges out of order"));
            }
            last = Some(range);
            counts.insert(range, rd.u64()?);
        }
        let mut names = Vec::with_capacity(units);
        for _ in 0..units {
            let len = rd.count(1)?;
            let (name, rest) = rd.rest.split_at(len);
            rd.rest = rest;
            names.push(String::from_utf8(name.to_vec()).map_err(|_| corrupt("a name not UTF-8"))?);
        }
        if !rd.rest.is_empty() {
            return Err(corrupt("bytes after the end"));
        }
        r.period = period;
        r.offered = offered;
        r.windows = windows;
        r.events = events;
        r.counts = counts;
        Ok(Self {
            key,
            numbers,
            names,
            recording: r,
        })
    }
}

impl Recording {
    /// Checks a kept piece: at most [`MAX_RANGE_LEN`] bytes, as [`Recording::push`] cuts them,
    /// and, unless absolute, inside its unit.
    fn check_piece(&self, unit: u32, at: u64, len: u64) -> Result<(), Error> {
        if len > MAX_RANGE_LEN {
            return Err(Error::Corrupt("a piece longer than the recorder's".into()));
        }
        if unit == ABSOLUTE {
            return Ok(());
        }
        crate::layout::check_inside(&self.sizes, unit, at, len)
    }
}

/// Little-endian fields read from the front of a byte slice.
struct Fields<'a> {
    rest: &'a [u8],
}

impl Fields<'_> {
    fn u64(&mut self) -> Result<u64, Error> {
        let (field, rest) = self
            .rest
            .split_first_chunk::<8>()
            .ok_or_else(|| Error::Corrupt("truncated".into()))?;
        self.rest = rest;
        Ok(u64::from_le_bytes(*field))
    }

    /// A count of items of `size` bytes each, no more than the bytes left can hold.
    fn count(&mut self, size: usize) -> Result<usize, Error> {
        let n = self.u64()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.rest.len() / size)
            .ok_or_else(|| Error::Corrupt("truncated".into()))
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
        // 0xfc0 + 0x10 of 0xfe0 fetched bytes fell outside the functions.
        assert!((r.outside_share() - 0xfd0 as f64 / 0xff0 as f64).abs() < 1e-12);
        // A straight run longer than the cap is cut into pieces of the cap.
        let mut r = Recording::new(vec![0], vec![3 * MAX_RANGE_LEN], 1 << 20).unwrap();
        r.push(0, 2 * MAX_RANGE_LEN + 1);
        let lens: Vec<u64> = r.events.iter().map(|e| u64::from(e.len)).collect();
        assert_eq!(lens, vec![MAX_RANGE_LEN, MAX_RANGE_LEN, 1]);
    }

    // Units in the order the run first reached them; a unit never fetched, or fetched only in
    // a dropped window, has none (or a later one).
    #[test]
    fn first_fetches_follow_the_kept_stream() {
        let cap = 2 * WINDOW as usize;
        let mut r = Recording::new(vec![0x1000, 0x2000, 0x3000], vec![0x40; 3], cap).unwrap();
        r.push(0x500, 0x510);
        r.push(0x2000, 0x2010);
        r.push(0x1000, 0x1010);
        r.push(0x2000, 0x2010);
        assert_eq!(r.first_fetches(), vec![2, 1, u64::MAX]);
        // Unit 2 first runs at the start of the second window...
        for _ in 4..WINDOW {
            r.push(0x1000, 0x1010);
        }
        r.push(0x3000, 0x3010);
        assert_eq!(r.first_fetches()[2], WINDOW);
        // ... which is dropped when the third window passes the cap: unit 2 then counts from
        // its fetch in the third, after one of unit 0.
        for _ in 1..WINDOW {
            r.push(0x1000, 0x1010);
        }
        r.push(0x1000, 0x1010);
        r.push(0x3000, 0x3010);
        assert_eq!(r.period(), 2);
        assert_eq!(r.first_fetches(), vec![2, 1, WINDOW + 1]);
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
        // Scaled: unit 0 counts three times over, unit 1 not at all; one scale per unit.
        let starts = [0x10000, 0x11000];
        let scaled = r.exec_profile_scaled(&starts, Some(&[3.0, 0.0])).unwrap();
        let plain = r.exec_profile(&starts).unwrap();
        assert_eq!(
            (scaled.weight(), plain.weight()),
            (3 * 10 * 0x40, 2 * 10 * 0x40)
        );
        assert_eq!(scaled.footprint(4096).unwrap().touched, 1);
        assert!(r.exec_profile_scaled(&starts, Some(&[1.0])).is_err());
        assert!(r.replay(&[0], &[0], &mut [vec![]]).is_err());
    }

    // Split over threads, every array counts what the one-thread replay counts: three units
    // run in a pattern with conflicts, eight shifts with 4, 2 and 1 arrays each.
    #[test]
    fn parallel_replay_counts_the_same() {
        let mut r =
            Recording::new(vec![0x10000, 0x12000, 0x15000], vec![0x2000; 3], 1 << 20).unwrap();
        for i in 0..3000u64 {
            let u = [0x10000, 0x12000, 0x15000][(i * 7 % 3) as usize];
            let off = (i * 193) % 0x1f00;
            r.push(u + off, u + off + 40 + i % 64);
            r.push(
                0x7000_0000 + (i % 5) * 4096,
                0x7000_0000 + (i % 5) * 4096 + 16,
            );
        }
        let starts = [0x40_0000, 0x40_3040, 0x40_5000];
        let shifts: Vec<u64> = (0..8).map(|k| k * 4176).collect();
        let arrays = || -> Vec<Vec<SetAssocLru>> {
            (0..8)
                .map(|k| {
                    let mut set = vec![lru(4096, 64, 8), lru(4096, 16, 4)];
                    if k < 3 {
                        set.extend([lru(64, 64, 2), lru(64, 32, 4)]);
                    }
                    if k == 7 {
                        set.truncate(1);
                    }
                    set
                })
                .collect()
        };
        let counts = |threads: usize| {
            let mut a = arrays();
            r.replay_parallel(&starts, &shifts, &mut a, threads)
                .unwrap();
            let c: Vec<Vec<u64>> = a
                .iter()
                .map(|s| s.iter().map(|x| x.stats().misses).collect())
                .collect();
            c
        };
        let one = counts(1);
        assert!(one.iter().flatten().any(|&m| m > 100), "{one:?}");
        for threads in [0, 2, 3, 8, 20] {
            assert_eq!(counts(threads), one, "{threads} threads");
        }
        assert!(r
            .replay_parallel(&starts, &shifts[..7], &mut arrays(), 2)
            .is_err());
        // The groups: about as many arrays (plus one per shift) each, a shift at least.
        let a = arrays(); // costs 5, 5, 5, 3, 3, 3, 3, 2 (total 29)
        assert_eq!(split_by_arrays(&a, 1), [8]);
        assert_eq!(split_by_arrays(&a, 2), [3, 8]);
        assert_eq!(split_by_arrays(&a, 3), [2, 5, 8]);
        assert_eq!(split_by_arrays(&a, 20), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(split_by_arrays(&[], 2).is_empty());
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

    // A saved recording reads back to the same bytes and the same replay; every truncation
    // and a few corruptions are errors, not panics.
    #[test]
    fn saved_round_trip_and_corruption() {
        let mut r = Recording::new(vec![0x1000, 0x2000], vec![0x40, 0x20], 1 << 20).unwrap();
        for _ in 0..5 {
            r.push(0x1030, 0x2010);
            r.push(0x500, 0x510);
        }
        let saved = Saved {
            key: 7,
            numbers: vec![1, 2],
            names: vec!["f".into(), "g".into()],
            recording: r,
        };
        let bytes = saved.to_bytes();
        let back = Saved::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes(), bytes);
        assert_eq!(
            (back.key, &back.numbers, &back.names),
            (7, &vec![1, 2], &saved.names)
        );
        let misses = |r: &Recording| {
            let mut arrays = vec![vec![lru(64, 64, 1)]];
            r.replay(&[0x1000, 0x1040], &[0], &mut arrays).unwrap();
            (arrays[0][0].stats(), r.unit_weights())
        };
        assert_eq!(misses(&back.recording), misses(&saved.recording));
        for n in 0..bytes.len() {
            assert!(
                Saved::from_bytes(&bytes[..n]).is_err(),
                "prefix of {n} bytes"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Saved::from_bytes(&longer).is_err());
        // The first event's length (bits 32.. of its second field) past its function's end.
        let first_event = MAGIC.len() + 8 * (1 + 1 + 2 + 1 + 4 + 3 + 1 + 2 + 1);
        let mut bad = bytes.clone();
        bad[first_event + 12] = 0x7f;
        assert!(matches!(
            Saved::from_bytes(&bad),
            Err(Error::OutsideFunction { .. })
        ));
        // An absolute fetch (the second event) longer than the recorder's pieces.
        let mut bad = bytes.clone();
        bad[first_event + 16 + 12..first_event + 32].copy_from_slice(&[0xff; 4]);
        assert!(matches!(Saved::from_bytes(&bad), Err(Error::Corrupt(_))));
        // The counts (two, the last fields before the names) swapped: out of order.
        let names = 2 * (8 + 1);
        let second = bytes.len() - names - 32;
        let mut bad = bytes.clone();
        bad[second - 32..second + 32].rotate_left(32);
        assert!(matches!(Saved::from_bytes(&bad), Err(Error::Corrupt(_))));
        // A huge count is refused before anything is allocated for it.
        let mut bad = bytes;
        bad[MAGIC.len() + 8..MAGIC.len() + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(Saved::from_bytes(&bad), Err(Error::Corrupt(_))));
    }
}
