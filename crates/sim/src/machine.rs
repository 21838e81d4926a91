//! The instruction side of one core: an L1 instruction cache and an iTLB, fed the same fetches.
//!
//! The two arrays are independent (no inclusion, no page walk cost): a fetch range is split
//! into lines for the cache and into pages for the TLB, each in address order. To model both
//! 4 KiB and 2 MiB iTLBs, run two machines or keep a second [`SetAssocLru`] beside this one;
//! a real core looks a fetch up in the TLB of the page size it is mapped with, which is a
//! property of the run, not of the layout.

use std::io::BufRead;

use crate::{CacheConfig, Error, Layout, SetAssocLru, Stats, TlbConfig, TraceEvent, TraceReader};

/// An L1i and an iTLB.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The instruction cache (blocks are lines).
    pub icache: SetAssocLru,
    /// The instruction TLB (blocks are pages).
    pub itlb: SetAssocLru,
}

impl Machine {
    /// An empty machine of the given geometries.
    pub fn new(cache: CacheConfig, tlb: TlbConfig) -> Result<Self, Error> {
        Ok(Self {
            icache: cache.build()?,
            itlb: tlb.build()?,
        })
    }

    /// [`CacheConfig::TYPICAL_L1I`] and [`TlbConfig::TYPICAL_ITLB_4K`].
    pub fn typical() -> Self {
        // Both constants are valid geometries (the unit tests build them), so this cannot fail.
        Self {
            icache: CacheConfig::TYPICAL_L1I
                .build()
                .expect("TYPICAL_L1I is a valid geometry"),
            itlb: TlbConfig::TYPICAL_ITLB_4K
                .build()
                .expect("TYPICAL_ITLB_4K is a valid geometry"),
        }
    }

    /// Fetches `[start, start + len)` through both arrays.
    #[inline]
    pub fn fetch(&mut self, start: u64, len: u64) {
        self.icache.fetch(start, len);
        self.itlb.fetch(start, len);
    }

    /// Cache and TLB counts.
    pub fn stats(&self) -> (Stats, Stats) {
        (self.icache.stats(), self.itlb.stats())
    }

    /// Replays a whole trace. Function-relative events are placed with `layout`; absolute
    /// events are fetched as they are. Returns the number of events replayed. Errors name the
    /// trace line; the counts of the lines before it stay in the machine.
    pub fn run<R: BufRead>(
        &mut self,
        trace: TraceReader<R>,
        layout: Option<&Layout>,
    ) -> Result<u64, Error> {
        let mut trace = trace;
        let mut events = 0;
        while let Some(event) = trace.next() {
            let (start, len) = match event? {
                TraceEvent::Abs { start, len } => (start, len),
                TraceEvent::Func(r) => {
                    let line = trace.line();
                    let layout = layout.ok_or_else(|| Error::Trace {
                        line,
                        message: "function-relative range but no layout given".to_string(),
                    })?;
                    layout.remap(r).map_err(|e| Error::Trace {
                        line,
                        message: e.to_string(),
                    })?
                }
            };
            self.fetch(start, len);
            events += 1;
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One trace, two layouts: functions 0 and 1 call each other in a loop. Placed 4 KiB apart
    // by a cold function 2 between them they need 2 pages; adjacent, 1 page.
    #[test]
    fn same_trace_two_layouts() {
        let sizes = [64, 64, 8192];
        let trace = "sediment-trace 1\n".to_string() + &"f 0 0x0 64\nf 1 0x0 64\n".repeat(100);
        let run = |order: &[u32]| {
            let layout = Layout::from_order(order, &sizes, 16, 0x400000);
            let mut m = Machine::typical();
            let n = m
                .run(TraceReader::new(trace.as_bytes()), Some(&layout))
                .unwrap();
            assert_eq!(n, 200);
            m.stats()
        };
        let (c_far, t_far) = run(&[0, 2, 1]);
        let (c_near, t_near) = run(&[0, 1, 2]);
        assert_eq!((c_far.accesses, c_far.misses), (200, 2));
        assert_eq!((c_near.accesses, c_near.misses), (200, 2));
        assert_eq!((t_far.accesses, t_far.misses), (200, 2));
        assert_eq!((t_near.accesses, t_near.misses), (200, 1));
    }

    // Replay errors carry the trace line; a function range without a layout is an error.
    #[test]
    fn replay_errors_name_the_line() {
        let t = "sediment-trace 1\na 0x0 4\nf 0 0x0 4\n";
        let mut m = Machine::typical();
        let e = m.run(TraceReader::new(t.as_bytes()), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3: function-relative range but no layout given"
        );
        assert_eq!(m.icache.stats().accesses, 1);
        let l = Layout::from_order(&[], &[2], 1, 0);
        let e = Machine::typical()
            .run(TraceReader::new(t.as_bytes()), Some(&l))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3: range at offset 0x0 of 4 bytes lies outside function 0 of 2 bytes"
        );
    }
}
