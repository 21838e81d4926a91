//! A set-associative array with true LRU replacement: the one model behind both the
//! instruction cache and the iTLB.
//!
//! An address is split into a *block number* (`addr >> log2(block size)`: a cache line or a
//! page) and the block number's low bits choose a *set* (`block & (sets - 1)`; sets are a power
//! of two, so this is a mask, not a modulo or a hash). Each set holds up to `ways` blocks. An
//! access hits when its block is in its set; otherwise it misses and the block replaces the
//! least recently used one of the set. With one set (`ways == entries`) the array is fully
//! associative. This is the classic model (Hennessy & Patterson, *Computer Architecture: A
//! Quantitative Approach*, appendix B.1) and the one valgrind's cachegrind simulates for I1/D1/LL
//! in `cg_sim.c`, minus cachegrind's handling of an access straddling two lines as one
//! reference (here each line is its own access; see `docs/design/simulator.md`).
//!
//! Representation: one flat `Vec<u64>` of `sets * ways` tags. The slice of a set is kept in
//! recency order, most recently used first; an empty way holds [`EMPTY`]. A hit at position
//! `i` rotates positions `0..=i` right by one (a `memmove` of `i` tags), a miss rotates the
//! whole set and writes the new tag at position 0, dropping the LRU tag at the end. The tag
//! stored is the full block number, so no set bits need to be stripped or restored. For the
//! small associativities of real L1i caches and iTLBs (4-16 ways) the linear scan touches one
//! or two host cache lines and beats any pointer-based list. Associativities 1, 2, 4, 8 and 16
//! are dispatched once per fetched range to a copy of the lookup with the way count fixed at
//! compile time, written without data-dependent branches (see `lookup_fixed`), which matters
//! when most accesses miss (`benches/throughput.rs`, `random` rows). Other associativities
//! take the general loop; a property test checks both against a naive timestamp LRU.
//!
//! Turned down: per-way age counters (the "LRU stack position" kept as a small integer per way).
//! They avoid the memmove but need a second pass over the set on every access to age the others,
//! while move-to-front does one scan plus a memmove of at most `ways - 1` tags, and a hit on the
//! MRU way (the common case for straight-line code) costs one compare. Also
//! turned down: a hash map + linked list for very large fully associative arrays. It would
//! make a 512-way array O(1) per access but brings hashing into the hot path of the common
//! small case; large fully associative arrays are only used in tests and are merely slower.
//!
//! Inputs are instruction fetches as ranges `(start, len)`: every block from the one holding
//! `start` to the one holding `start + len - 1` is accessed once, in address order. A range of
//! length 0 accesses nothing; a range running past `u64::MAX` is clipped at the top of the
//! address space (the caller validated addresses if it cares; [`crate::Layout::remap`] does).

use crate::Error;

/// Largest associativity accepted: bounds the cost of one access (a linear scan of the set).
pub const MAX_WAYS: u64 = 1 << 16;

/// Largest number of entries (cache lines or TLB entries) of one array: bounds the allocation
/// made from a user-supplied geometry (2^24 lines of 64 bytes is a 1 GiB cache, 128 MiB of tags).
pub const MAX_ENTRIES: u64 = 1 << 24;

/// Tag of an empty way. Block numbers are `addr >> shift` with `shift >= 1`, so a real block
/// number never reaches `u64::MAX`.
pub const EMPTY: u64 = u64::MAX;

/// Access and miss counts of one array since it was built or last [`SetAssocLru::reset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Block accesses (one per line or page a fetched range covers).
    pub accesses: u64,
    /// Accesses whose block was not present.
    pub misses: u64,
}

/// A set-associative LRU array over blocks of a power-of-two size.
#[derive(Debug, Clone)]
pub struct SetAssocLru {
    /// log2 of the block size.
    shift: u32,
    /// `sets - 1`.
    set_mask: u64,
    /// Associativity.
    ways: usize,
    /// `sets * ways` tags, each set's slice most recently used first.
    tags: Vec<u64>,
    /// The block accessed last ([`EMPTY`] for none): the most recently used of its set, so
    /// accessing it again hits and changes nothing. Consecutive fetches in one block (most
    /// of an iTLB's, whose blocks are pages) skip the set lookup.
    last: u64,
    stats: Stats,
}

impl SetAssocLru {
    /// An empty array of `entries` blocks of `block` bytes, `ways` per set.
    ///
    /// Requirements: `block` a power of two >= 2; `1 <= ways <= MAX_WAYS`;
    /// `1 <= entries <= MAX_ENTRIES`; `entries` a multiple of `ways`; `entries / ways` (the
    /// number of sets) a power of two. `ways == entries` gives a fully associative array.
    pub fn new(block: u64, entries: u64, ways: u64) -> Result<Self, Error> {
        let bad = |m: String| Err(Error::Geometry(m));
        if block < 2 || !block.is_power_of_two() {
            return bad(format!("block size {block} is not a power of two >= 2"));
        }
        if ways == 0 || ways > MAX_WAYS {
            return bad(format!(
                "associativity {ways} is not between 1 and {MAX_WAYS}"
            ));
        }
        if entries == 0 || entries > MAX_ENTRIES {
            return bad(format!(
                "{entries} entries is not between 1 and {MAX_ENTRIES}"
            ));
        }
        if entries % ways != 0 {
            return bad(format!(
                "{entries} entries is not a multiple of {ways} ways"
            ));
        }
        let sets = entries / ways;
        if !sets.is_power_of_two() {
            return bad(format!(
                "{entries} entries / {ways} ways = {sets} sets, not a power of two"
            ));
        }
        Ok(Self {
            shift: block.trailing_zeros(),
            set_mask: sets - 1,
            ways: ways as usize,
            tags: vec![EMPTY; entries as usize],
            last: EMPTY,
            stats: Stats::default(),
        })
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u64 {
        1 << self.shift
    }

    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.set_mask + 1
    }

    /// Associativity.
    pub fn ways(&self) -> u64 {
        self.ways as u64
    }

    /// Counts so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Empties every set and zeroes the counts.
    pub fn reset(&mut self) {
        self.tags.fill(EMPTY);
        self.last = EMPTY;
        self.stats = Stats::default();
    }

    /// Looks `block` up in its set and makes it the most recently used, inserting it in
    /// place of the LRU way on a miss. Returns whether it hit. Counts nothing. Any
    /// associativity; [`lookup_fixed`] is the same for the common ones.
    #[inline(always)]
    fn lookup(&mut self, block: u64) -> bool {
        let w = self.ways;
        let base = (block & self.set_mask) as usize * w;
        let set = &mut self.tags[base..base + w];
        if set[0] == block {
            return true;
        }
        // Position of the block in recency order, or the LRU position on a miss (the tag
        // there falls off the end of the rotation either way).
        let mut pos = 1;
        while pos < w && set[pos] != block {
            pos += 1;
        }
        let hit = pos < w;
        set.copy_within(0..pos.min(w - 1), 1);
        set[0] = block;
        hit
    }

    /// Fetches blocks `first..end` with the associativity known at compile time.
    #[inline(always)]
    fn fetch_blocks<const W: usize>(&mut self, first: u64, end: u64) -> u64 {
        let mut misses = 0;
        for b in first..end {
            let base = (b & self.set_mask) as usize * W;
            misses += u64::from(!lookup_fixed::<W>(&mut self.tags[base..], b));
        }
        misses
    }

    /// Accesses block number `block` (an address already shifted by the block size). Returns
    /// whether it hit.
    #[inline]
    pub fn access_block(&mut self, block: u64) -> bool {
        let misses = self.fetch_range(block, block + 1);
        self.stats.accesses += 1;
        self.stats.misses += misses;
        misses == 0
    }

    /// Accesses the block holding byte address `addr`. Returns whether it hit.
    #[inline]
    pub fn access(&mut self, addr: u64) -> bool {
        self.access_block(addr >> self.shift)
    }

    /// Blocks `first..end` in order, dispatched once per range on the associativity. Returns
    /// the misses; counts nothing. `first < end`.
    #[inline]
    fn fetch_range(&mut self, first: u64, end: u64) -> u64 {
        // The last block accessed is its set's most recently used: a hit that moves nothing.
        let first = first + u64::from(first == self.last);
        self.last = end - 1;
        match self.ways {
            1 => self.fetch_blocks::<1>(first, end),
            2 => self.fetch_blocks::<2>(first, end),
            4 => self.fetch_blocks::<4>(first, end),
            8 => self.fetch_blocks::<8>(first, end),
            16 => self.fetch_blocks::<16>(first, end),
            _ => (first..end).map(|b| u64::from(!self.lookup(b))).sum(),
        }
    }

    /// Fetches the byte range `[start, start + len)`: one access per block it covers, in
    /// address order. Returns the number of misses of this fetch. `len == 0` accesses nothing;
    /// a range past `u64::MAX` is clipped there.
    #[inline]
    pub fn fetch(&mut self, start: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let first = start >> self.shift;
        // `last + 1` cannot overflow: shift >= 1, so `last <= u64::MAX / 2`. An exclusive range
        // iterates faster than `first..=last`.
        let end = (start.saturating_add(len - 1) >> self.shift) + 1;
        let misses = self.fetch_range(first, end);
        self.stats.accesses += end - first;
        self.stats.misses += misses;
        misses
    }
}

/// [`SetAssocLru::lookup`] for a set of `W` ways starting at `tags[0]`, written so that the
/// compiler unrolls both loops and turns them into compares and conditional moves: the search
/// keeps the first match without an early exit, and the rotation rewrites every way `j`
/// with way `j - 1` when `j <= pos` and with itself otherwise. This removes the unpredictable branches of the general version, which is what
/// dominates when most accesses miss.
#[inline(always)]
fn lookup_fixed<const W: usize>(tags: &mut [u64], block: u64) -> bool {
    // The caller passes the slice from the set's first way; a set always has W ways.
    let Some(set) = tags.first_chunk_mut::<W>() else {
        return false;
    };
    if set[0] == block {
        return true;
    }
    let mut pos = W - 1;
    let mut hit = false;
    // Tags within a set are distinct, so at most one way matches.
    for (i, &t) in set.iter().enumerate().skip(1) {
        if t == block {
            pos = i;
            hit = true;
        }
    }
    // Unconditional stores of a selected value: a conditional store would stay a branch.
    for j in (1..W).rev() {
        set[j] = if j <= pos { set[j - 1] } else { set[j] };
    }
    set[0] = block;
    hit
}

/// Geometry of an instruction cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Capacity in bytes.
    pub size: u64,
    /// Associativity; `size / line` makes it fully associative.
    pub ways: u64,
    /// Line size in bytes (a power of two).
    pub line: u64,
}

impl CacheConfig {
    /// 32 KiB, 8-way, 64-byte lines: the L1 instruction cache of Intel cores from Sandy Bridge
    /// through Skylake and of AMD Zen 2-4 (Intel 64 and IA-32 Architectures Optimization
    /// Reference Manual, cache parameter tables; AMD Software Optimization Guides). Also what
    /// cachegrind picks on most x86 hosts, which is what we validate against.
    pub const TYPICAL_L1I: Self = Self {
        size: 32 << 10,
        ways: 8,
        line: 64,
    };

    /// Builds the empty cache.
    pub fn build(self) -> Result<SetAssocLru, Error> {
        if self.line < 2 || !self.line.is_power_of_two() {
            return Err(Error::Geometry(format!(
                "cache line of {} bytes is not a power of two >= 2",
                self.line
            )));
        }
        if self.size % self.line != 0 {
            return Err(Error::Geometry(format!(
                "cache of {} bytes is not a whole number of {}-byte lines",
                self.size, self.line
            )));
        }
        SetAssocLru::new(self.line, self.size / self.line, self.ways)
    }
}

/// Page sizes an iTLB can translate (x86-64 4 KiB and 2 MiB pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageSize {
    /// 4 KiB base pages.
    Small4K,
    /// 2 MiB huge pages (code mapped with `-Wl,-zcommon-page-size=2097152` plus THP, or
    /// remapped at startup).
    Huge2M,
}

impl PageSize {
    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            Self::Small4K => 4 << 10,
            Self::Huge2M => 2 << 20,
        }
    }
}

/// Geometry of an instruction TLB for one page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlbConfig {
    /// Page size translated.
    pub page: PageSize,
    /// Number of entries.
    pub entries: u64,
    /// Associativity; `entries` makes it fully associative.
    pub ways: u64,
}

impl TlbConfig {
    /// 128 entries, 8-way, 4 KiB pages: the first-level iTLB of Intel Skylake (Optimization
    /// Reference Manual, Skylake TLB parameters).
    pub const TYPICAL_ITLB_4K: Self = Self {
        page: PageSize::Small4K,
        entries: 128,
        ways: 8,
    };

    /// 8 entries, fully associative, 2 MiB pages: Skylake's iTLB for large pages (same table).
    pub const TYPICAL_ITLB_2M: Self = Self {
        page: PageSize::Huge2M,
        entries: 8,
        ways: 8,
    };

    /// Builds the empty TLB.
    pub fn build(self) -> Result<SetAssocLru, Error> {
        SetAssocLru::new(self.page.bytes(), self.entries, self.ways)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reference LRU: a list of (block, last use time), searched and aged naively.
    fn reference_misses(blocks: &[u64], sets: u64, ways: usize) -> u64 {
        let mut content: Vec<Vec<(u64, usize)>> = vec![Vec::new(); sets as usize];
        let mut misses = 0;
        for (t, &b) in blocks.iter().enumerate() {
            let set = &mut content[(b % sets) as usize];
            if let Some(e) = set.iter_mut().find(|e| e.0 == b) {
                e.1 = t;
                continue;
            }
            misses += 1;
            if set.len() == ways {
                let lru = (0..set.len()).min_by_key(|&i| set[i].1).unwrap();
                set.remove(lru);
            }
            set.push((b, t));
        }
        misses
    }

    fn run_lines(c: &mut SetAssocLru, lines: &[u64]) -> Vec<bool> {
        lines.iter().map(|&l| c.access(l * 64 + 5)).collect()
    }

    // 4 sets x 2 ways x 64 B. Line n maps to set n % 4. Worked by hand (set content MRU first):
    //  0 miss s0=[0]     4 miss s0=[4,0]   0 hit  s0=[0,4]   8 miss s0=[8,0] (4 evicted)
    //  4 miss s0=[4,8]   1 miss s1=[1]     8 hit  s0=[8,4]   0 miss s0=[0,8] (4 evicted)
    //  1 hit  s1=[1]     4 miss s0=[4,0] (8 evicted)
    // -> 10 accesses, 7 misses.
    #[test]
    fn two_way_cache_hand_sequence() {
        let mut c = CacheConfig {
            size: 512,
            ways: 2,
            line: 64,
        }
        .build()
        .unwrap();
        assert_eq!((c.sets(), c.ways(), c.block_size()), (4, 2, 64));
        let hits = run_lines(&mut c, &[0, 4, 0, 8, 4, 1, 8, 0, 1, 4]);
        assert_eq!(
            hits,
            [false, false, true, false, false, false, true, false, true, false]
        );
        assert_eq!(
            c.stats(),
            Stats {
                accesses: 10,
                misses: 7
            }
        );
    }

    // Cyclic access to 5 pages through a 4-entry fully associative LRU TLB: every access
    // evicts exactly the page needed next, so all 15 accesses of 3 rounds miss.
    #[test]
    fn fully_associative_tlb_cyclic_five_pages_always_miss() {
        let mut t = TlbConfig {
            page: PageSize::Small4K,
            entries: 4,
            ways: 4,
        }
        .build()
        .unwrap();
        for _ in 0..3 {
            for p in 0..5u64 {
                t.access(p * 4096 + 100);
            }
        }
        assert_eq!(
            t.stats(),
            Stats {
                accesses: 15,
                misses: 15
            }
        );
    }

    // Four pages fit the 4-entry TLB: only the 4 compulsory misses of the first round.
    #[test]
    fn fully_associative_tlb_cyclic_four_pages_compulsory_only() {
        let mut t = TlbConfig {
            page: PageSize::Small4K,
            entries: 4,
            ways: 4,
        }
        .build()
        .unwrap();
        for _ in 0..3 {
            for p in 0..4u64 {
                t.access(p * 4096);
            }
        }
        assert_eq!(
            t.stats(),
            Stats {
                accesses: 12,
                misses: 4
            }
        );
    }

    // A range crossing a line boundary is one access per line; crossing a page boundary is
    // one TLB access per page; a range inside one line is one access; empty is none.
    #[test]
    fn ranges_spanning_boundaries() {
        let mut c = CacheConfig::TYPICAL_L1I.build().unwrap();
        assert_eq!(c.fetch(60, 8), 2); // bytes 60..=67: lines 0 and 1, both cold
        assert_eq!(c.fetch(64, 64), 0); // exactly line 1
        assert_eq!(c.fetch(0, 0), 0);
        assert_eq!(c.fetch(100, 200), 3); // bytes 100..=299: lines 1..=4 accessed, 2, 3, 4 miss
        assert_eq!(
            c.stats(),
            Stats {
                accesses: 7,
                misses: 5
            }
        );
        let mut t = TlbConfig::TYPICAL_ITLB_4K.build().unwrap();
        assert_eq!(t.fetch(0xfff, 2), 2); // last byte of page 0, first of page 1
        assert_eq!(t.fetch(0x1000, 4096), 0); // exactly page 1
        assert_eq!(
            t.stats(),
            Stats {
                accesses: 3,
                misses: 2
            }
        );
        let mut h = TlbConfig::TYPICAL_ITLB_2M.build().unwrap();
        assert_eq!(h.fetch(0xfff, 2), 1); // same 2 MiB page
        assert_eq!(h.fetch(0x1f_ffff, 2), 1); // crosses into the second 2 MiB page
        assert_eq!(h.stats().accesses, 3);
    }

    // A range ending at the top of the address space is clipped, not wrapped around.
    #[test]
    fn range_at_top_of_address_space_is_clipped() {
        let mut c = CacheConfig::TYPICAL_L1I.build().unwrap();
        assert_eq!(c.fetch(u64::MAX - 10, 100), 1);
        assert_eq!(c.stats().accesses, 1);
    }

    // Geometries that cannot be built are errors naming the problem, not panics.
    #[test]
    fn bad_geometries_are_errors() {
        let msg = |r: Result<SetAssocLru, Error>| r.unwrap_err().to_string();
        let cfg = |size, ways, line| CacheConfig { size, ways, line }.build();
        assert_eq!(
            msg(cfg(32768, 8, 48)),
            "invalid geometry: cache line of 48 bytes is not a power of two >= 2"
        );
        assert_eq!(
            msg(cfg(1000, 2, 64)),
            "invalid geometry: cache of 1000 bytes is not a whole number of 64-byte lines"
        );
        assert_eq!(
            msg(cfg(64 * 12, 4, 64)),
            "invalid geometry: 12 entries / 4 ways = 3 sets, not a power of two"
        );
        assert_eq!(
            msg(cfg(512, 0, 64)),
            "invalid geometry: associativity 0 is not between 1 and 65536"
        );
        assert_eq!(
            msg(cfg(0, 1, 64)),
            "invalid geometry: 0 entries is not between 1 and 16777216"
        );
        assert!(cfg(1 << 40, 8, 64).is_err()); // 2^34 lines: refused before allocating
        assert!(SetAssocLru::new(64, 12, 8).is_err()); // not a multiple of the ways
                                                       // Non-power-of-two associativity is fine when the set count is a power of two.
        assert!(cfg(64 * 12 * 4, 12, 64).is_ok());
    }

    // reset() forgets content and counts.
    #[test]
    fn reset_empties() {
        let mut c = CacheConfig::TYPICAL_L1I.build().unwrap();
        c.fetch(0, 4096);
        c.reset();
        assert_eq!(c.stats(), Stats::default());
        assert_eq!(c.fetch(0, 64), 1);
    }

    fn geometry() -> impl Strategy<Value = (u64, u64)> {
        // (sets, ways)
        // Covers the generic path (3, 5, 6, 7 ways) and every fixed-width one (1, 2, 4, 8, 16).
        (0u32..4, prop_oneof![1u64..8, Just(8u64), Just(16u64)]).prop_map(|(s, w)| (1u64 << s, w))
    }

    proptest! {
        // The move-to-front array agrees exactly with a naive timestamp LRU.
        #[test]
        fn matches_reference_lru((sets, ways) in geometry(),
                                 blocks in proptest::collection::vec(0u64..160, 0..600)) {
            let mut c = SetAssocLru::new(64, sets * ways, ways).unwrap();
            for &b in &blocks { c.access_block(b); }
            prop_assert_eq!(c.stats().misses, reference_misses(&blocks, sets, ways as usize));
            prop_assert_eq!(c.stats().accesses, blocks.len() as u64);
        }

        // Misses never exceed accesses, and are at least the distinct lines touched
        // (every line's first access is a compulsory miss).
        #[test]
        fn misses_between_compulsory_and_accesses((sets, ways) in geometry(),
                ranges in proptest::collection::vec((0u64..8192, 0u64..300), 0..200)) {
            let mut c = SetAssocLru::new(64, sets * ways, ways).unwrap();
            let mut lines = std::collections::BTreeSet::new();
            for &(s, l) in &ranges {
                c.fetch(s, l);
                if l > 0 { lines.extend((s / 64)..=((s + l - 1) / 64)); }
            }
            let st = c.stats();
            prop_assert!(st.misses <= st.accesses);
            prop_assert!(st.misses >= lines.len() as u64);
        }

        // LRU inclusion: a fully associative LRU with more entries never misses more than
        // one with fewer on the same trace (Mattson et al. 1970, stack algorithms).
        #[test]
        fn bigger_fully_associative_never_misses_more(small in 1u64..16, extra in 0u64..16,
                blocks in proptest::collection::vec(0u64..48, 0..400)) {
            let big = small + extra;
            let mut a = SetAssocLru::new(4096, small, small).unwrap();
            let mut b = SetAssocLru::new(4096, big, big).unwrap();
            for &x in &blocks { a.access_block(x); b.access_block(x); }
            prop_assert!(b.stats().misses <= a.stats().misses);
        }

        // Same trace twice, same counts (no hidden state, no randomness).
        #[test]
        fn deterministic(ranges in proptest::collection::vec((0u64..1 << 20, 0u64..256), 0..200)) {
            let run = || {
                let mut c = CacheConfig::TYPICAL_L1I.build().unwrap();
                let per: Vec<u64> = ranges.iter().map(|&(s, l)| c.fetch(s, l)).collect();
                (per, c.stats())
            };
            prop_assert_eq!(run(), run());
        }
    }
}
