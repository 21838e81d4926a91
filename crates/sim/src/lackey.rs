//! One live lackey run replayed under many layouts at once, and the metrics of each.
//!
//! (The same for Sediment's own tool's binary trace: [`crate::bintrace::replay_run`].)
//!
//! The trace arrives on a pipe (`sediment_valgrind::lackey`). [`replay_run`] reads it up to the
//! first instruction line (the dynamic loader's, before any of the program's): at that point
//! the binary is mapped and the caller's `code_range` tells where its code is at run time (from
//! `/proc/PID/maps`; the process blocks on the pipe until we read, so it cannot have exited).
//! The difference from the link-time start of the code is the load bias (a PIE's base; 0
//! otherwise), which moves the caller's link-time placements to run-time addresses. Then every
//! other layout becomes a [`Capture`] view and the rest of the stream is replayed once.
//!
//! Views are added layout-major, shift-minor, skipping (as linked, shift 0), which the base
//! arrays are: view `v` is layout `(v + 1) / shifts`, shift `(v + 1) % shifts`. [`metrics`]
//! reads them back in that order.

use std::io::{BufRead, BufReader, Read};

use crate::{geometry, Capture, Error, FootprintWeight, Metrics, Recording, Relayout, TextMap};

/// The layouts one run is replayed under, besides the binary as linked.
#[derive(Debug, Clone, Copy)]
pub struct RunLayouts<'a> {
    /// Shifts in bytes, the first 0.
    pub shifts: &'a [u64],
    /// Threads feeding the views ([`Capture::set_threads`]).
    pub threads: usize,
    /// Link-time start of the binary's code (the lowest executable segment's address).
    pub link_start: u64,
    /// Proposed placements of the binary's functions in link-time addresses: (old starts,
    /// sizes, new starts).
    pub relayouts: &'a [(&'a [u64], &'a [u64], &'a [u64])],
    /// Also keep the run for later replays: (link-time unit starts, sizes, event cap).
    pub record: Option<(&'a [u64], &'a [u64], usize)>,
}

/// Reads a lackey trace from `pipe` under every layout of `layouts`. `code_range` is called once,
/// when the first instruction line arrives, and returns the run-time `[start, end)` of the
/// binary's code.
pub fn replay_run(
    pipe: impl Read,
    code_range: impl FnOnce() -> Result<(u64, u64), Box<dyn std::error::Error + Send + Sync>>,
    layouts: &RunLayouts<'_>,
) -> Result<Capture, Error> {
    let shifts = layouts.shifts;
    let mut capture = Capture::new(geometry::arrays()?);
    capture.set_threads(layouts.threads);
    let mut reader = BufReader::with_capacity(1 << 20, pipe);
    // Valgrind messages before the first instruction (none with -q, unless it warns): bounded
    // by the line count so that a stream with no instruction cannot grow this buffer forever.
    let mut head = Vec::new();
    let mut first_insn = false;
    for line in 1..=10_000 {
        let start = head.len();
        let n = (&mut reader)
            .take(crate::capture::MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut head)
            .map_err(|source| Error::Io { line, source })?;
        if n == 0 {
            break;
        }
        if head[start] == b'I' {
            first_insn = true;
            break;
        }
    }
    if first_insn {
        let range = code_range().map_err(Error::CodeRange)?;
        set_up(&mut capture, range, layouts)?;
    } else if shifts.len() > 1 || !layouts.relayouts.is_empty() {
        return Err(Error::NoInstruction);
    }
    capture.replay(head.as_slice().chain(reader))?;
    capture.finish();
    Ok(capture)
}

/// Sets the binary's run-time code range `[s, e)` on `capture`, and from it (through the load
/// bias) the recording and one view per other layout of `layouts`. Called once the code range
/// is known and before the first instruction is replayed; shared with
/// [`crate::bintrace::replay_run`].
pub(crate) fn set_up(
    capture: &mut Capture,
    (s, e): (u64, u64),
    layouts: &RunLayouts<'_>,
) -> Result<(), Error> {
    let shifts = layouts.shifts;
    capture.set_text(s, e)?;
    // Run-time minus link-time address of the code (the PIE load bias; 0 otherwise).
    let bias = s.wrapping_sub(layouts.link_start);
    if let Some((starts, sizes, max)) = layouts.record {
        let run: Vec<u64> = starts.iter().map(|a| a.wrapping_add(bias)).collect();
        capture.set_recording(Recording::new(run, sizes.to_vec(), max)?);
    }
    for &d in shifts.iter().skip(1) {
        capture.add_view(TextMap::Shift(d), geometry::arrays()?);
    }
    for (old, size, new) in layouts.relayouts {
        let old: Vec<u64> = old.iter().map(|a| a.wrapping_add(bias)).collect();
        for &d in shifts {
            let new: Vec<u64> = new
                .iter()
                .map(|a| a.wrapping_add(bias).saturating_add(d))
                .collect();
            let r = Relayout::new(&old, size, &new)?;
            capture.add_view(TextMap::Relayout(r), geometry::arrays()?);
        }
    }
    Ok(())
}

/// The metrics of every layout of a finished [`replay_run`]: per layout (as linked, then each
/// relayout), per shift. `stdout_fnv1a` is the program's output hash.
pub fn metrics(
    capture: &Capture,
    layouts: &RunLayouts<'_>,
    stdout_fnv1a: &str,
) -> Result<Vec<Vec<Metrics>>, Error> {
    let k = layouts.shifts.len();
    let one = |arrays: &[crate::SetAssocLru], profile: crate::ExecProfile| {
        let mut m = Metrics {
            instructions: capture.instructions(),
            object_instructions: capture.text_instructions(),
            fetches: Some(capture.fetches()),
            stdout_fnv1a: stdout_fnv1a.to_string(),
            weighed_by: FootprintWeight::ExecutedBytes,
            ..Metrics::default()
        };
        let misses: Vec<u64> = arrays.iter().map(|a| a.stats().misses).collect();
        m.set_misses(&misses);
        m.set_footprints(&profile.footprint(4096)?, &profile.footprint(64)?);
        Ok::<_, Error>(m)
    };
    let mut out = Vec::with_capacity(1 + layouts.relayouts.len());
    for layout in 0..=layouts.relayouts.len() {
        let mut per_shift = Vec::with_capacity(k);
        for shift in 0..k {
            per_shift.push(match (layout * k + shift).checked_sub(1) {
                None => one(capture.arrays(), capture.exec_profile()?)?,
                Some(v) => one(capture.view_arrays(v), capture.view_profile(v)?)?,
            });
        }
        out.push(per_shift);
    }
    Ok(out)
}
