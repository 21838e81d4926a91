//! Function alignment without relinking: where every function of a linked binary would start
//! if the same link order were kept and each function's start were rounded up to another
//! alignment, and the table of an alignment sweep.
//!
//! A compiler's `-falign-functions=A` (with `-ffunction-sections`, the input section's
//! alignment) makes the linker round every function's start up to a multiple of `A`; the
//! order of the functions does not change. So a trace recorded once can predict a sweep over
//! alignments 1, 2, 4, ..., 512: the binary's function symbols, in address order, are placed
//! again back to back from the first one's start, each rounded up to its alignment
//! ([`place_aligned`]), and the trace is replayed under that placement (a
//! [`crate::TextMap::Relayout`] view). The code of each function is kept as compiled; what the
//! prediction leaves out is what the compiler would also change (the padding inside a function
//! in front of aligned loops, a different inlining decision), and the bytes between functions
//! that are not alignment padding (they are dropped).
//!
//! Selective alignment is the same placement with one alignment per function: the chosen ones
//! start on a line (64) or a line pair (128), the others keep a small default. Capsules
//! ([`capsules`]) are functions started on a 4 KiB boundary, chosen so that growth earlier in
//! the code moves as little executed code against the rest as a padding budget allows.
//!
//! **Noise.** An I1 miss count moves by several percent when the code moves by a few bytes
//! (`docs/design/statistics.md`). Each layout is therefore also placed from starts moved by
//! `shift` bytes, as a pad of that size before the first function would move it: the
//! placement is recomputed from the moved start, so under a 64-byte alignment an 80-byte pad
//! moves every function by 128 bytes, not by 80 (what a relink with the pad does, and the
//! reason large alignments are more stable). A row is better than the binary as linked only
//! when its median lies outside the range the as-linked layout spans over the same shifts
//! ([`Sweep::best`]).

use std::fmt::Write as _;

use crate::Metrics;

/// The alignments of a sweep: 1, 2, 4, ..., 512 bytes.
pub const SWEEP: [u64; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// Start of every function when functions `0..n` are placed in index order from `base`, each
/// start rounded up to a multiple of `align[i]` (0 and 1: no rounding). Addresses saturate
/// instead of wrapping. `align` shorter than `sizes` counts its missing entries as 1.
pub fn place_aligned(sizes: &[u64], align: &[u64], base: u64) -> Vec<u64> {
    place_grown(sizes, align, base, usize::MAX, 0)
}

/// [`place_aligned`] with function `after` grown by `bytes` at its end: the functions before
/// it and itself keep their starts, the ones after it are placed from its grown end (an
/// unrelated change inside an early object, as opposed to a pad before everything).
pub fn place_grown(sizes: &[u64], align: &[u64], base: u64, after: usize, bytes: u64) -> Vec<u64> {
    let mut cursor = base;
    sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            let a = align.get(i).copied().unwrap_or(1);
            cursor = align_up(cursor, a);
            let start = cursor;
            cursor = cursor.saturating_add(size);
            if i == after {
                cursor = cursor.saturating_add(bytes);
            }
            start
        })
        .collect()
}

/// `x` rounded up to a multiple of `align` (0 and 1: `x`), saturating.
pub fn align_up(x: u64, align: u64) -> u64 {
    if align <= 1 {
        return x;
    }
    match x % align {
        0 => x,
        r => x.saturating_add(align - r),
    }
}

/// The functions of a linked binary (`starts`, `sizes`, in address order, disjoint) with the
/// code between them that no sized symbol covers (the C runtime's `deregister_tm_clones` and
/// friends have no size) made into fillers of its own: a gap wider than the padding to the
/// next multiple of `align` becomes a unit from that multiple to the next function. Returns
/// the units' starts and sizes and, per unit, whether it is one of the functions; a filler
/// keeps the alignment of code nobody recompiles. Without fillers a re-placed layout would
/// move functions over that code, which stays where it is.
pub fn with_fillers(starts: &[u64], sizes: &[u64], align: u64) -> (Vec<u64>, Vec<u64>, Vec<bool>) {
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    let mut end: Option<u64> = None;
    for (&s, &z) in starts.iter().zip(sizes) {
        if let Some(e) = end {
            let from = align_up(e, align);
            if from < s {
                out.0.push(from);
                out.1.push(s - from);
                out.2.push(false);
            }
        }
        out.0.push(s);
        out.1.push(z);
        out.2.push(true);
        end = Some(s.saturating_add(z));
    }
    out
}

/// Bytes from the first function's start to the end of the function that ends last (0 for
/// none): the code size a placement gives.
pub fn code_bytes(starts: &[u64], sizes: &[u64]) -> u64 {
    let first = starts.iter().copied().min();
    let end = starts
        .iter()
        .zip(sizes)
        .map(|(&s, &z)| s.saturating_add(z))
        .max();
    match (first, end) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    }
}

/// Blocks of `block` bytes that `len` bytes at `at` cover (0 for an empty range).
fn blocks(at: u64, len: u64, block: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let last = at.saturating_add(len - 1);
    last / block - at / block + 1
}

/// Functions worth starting on a `boundary` (a 64-byte line, or a 128-byte line pair), chosen
/// under a size budget; returns their indices, most useful first.
///
/// `ranges` are the executed function-relative ranges of a run, `(function, offset, len,
/// count)` ([`crate::Recording::unit_ranges`]); functions are compiled to start on a multiple
/// of `rest` (16 for gcc `-O2` on x86-64). Where a function starts modulo `boundary` is layout
/// luck: any code that grows before it moves it by some multiple of `rest`. So the gain of
/// aligning it is the number of `boundary`-sized blocks its executed ranges cover, weighted by
/// their counts, averaged over the `boundary / rest` possible starts, minus the blocks they
/// cover from a boundary. Functions with a positive gain are taken in decreasing order of gain
/// (ties: lower index first) while their worst-case padding, `boundary - rest` bytes each,
/// fits in `budget` bytes.
///
/// The gain counts block accesses, not misses: a function whose hot loop straddles two lines
/// fetches both on every iteration, and whether the second one misses depends on the rest of
/// the cache. The caller checks the choice with the simulator over shifted layouts.
pub fn choose(
    ranges: &[(u32, u64, u64, u64)],
    boundary: u64,
    rest: u64,
    budget: u64,
) -> Vec<usize> {
    if boundary <= rest || rest == 0 {
        return Vec::new();
    }
    let phases = boundary / rest;
    let mut gain: std::collections::BTreeMap<u32, f64> = std::collections::BTreeMap::new();
    for &(f, offset, len, count) in ranges {
        let mut luck = 0u64;
        for p in 0..phases {
            luck = luck.saturating_add(blocks(p * rest + offset, len, boundary));
        }
        let aligned = blocks(offset, len, boundary);
        let g = (luck as f64 / phases as f64 - aligned as f64) * count as f64;
        *gain.entry(f).or_insert(0.0) += g;
    }
    let mut ranked: Vec<(u32, f64)> = gain.into_iter().filter(|&(_, g)| g > 0.0).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let cost = boundary - rest;
    ranked
        .into_iter()
        .take((budget / cost) as usize)
        .map(|(f, _)| f as usize)
        .collect()
}

/// Boundary of a capsule: 4 KiB, the span of one way of the simulated L1 I-caches (64 sets of
/// 64-byte lines, 32K/8-way and 16K/4-way alike) and a page. Code that moves by a multiple of
/// it keeps every line in its cache set and every line offset.
pub const CAPSULE_BOUNDARY: u64 = 4096;

/// Smallest share of the damage as linked one capsule must remove to be chosen.
pub const MIN_CAPSULE_GAIN: f64 = 0.001;

/// Most capsules [`capsules`] chooses.
pub const MAX_CAPSULES: usize = 64;

/// What [`capsules`] chooses from: the units (functions, and code between them) of a linked
/// binary in address order, what ran, where code may grow, and the budget.
#[derive(Debug, Clone, Copy)]
pub struct CapsuleProblem<'a> {
    /// Start of every unit as linked, increasing.
    pub starts: &'a [u64],
    /// Start of the output section holding the units (`.text`): a capsule gives that section
    /// its alignment, so the linker starts it on a boundary and the capsules' padding counts
    /// from it. Only its remainder modulo the boundary matters (a load bias that is a multiple
    /// of the boundary changes nothing).
    pub origin: u64,
    /// Executed weight of every unit (bytes fetched, count x length, or any measure of how
    /// much the unit's place matters to the cache).
    pub hot: &'a [f64],
    /// Executed weight outside the units (shared libraries, the loader), on the same scale:
    /// code that never moves with the binary's.
    pub outside: f64,
    /// Whether a capsule may start at each unit (it can be aligned on its own).
    pub candidate: &'a [bool],
    /// Where code grows: `(unit, weight)`, the unit whose end grows and how likely a change
    /// lands there (e.g. the bytes of code it stands for).
    pub growth: &'a [(usize, f64)],
    /// The capsule boundary ([`CAPSULE_BOUNDARY`]).
    pub boundary: u64,
    /// Most bytes of padding the capsules may add to the binary as linked.
    pub budget: u64,
}

/// What [`capsules`] chose.
#[derive(Debug, Clone, PartialEq)]
pub struct CapsuleChoice {
    /// Units starting a capsule, in address order.
    pub units: Vec<usize>,
    /// Bytes of padding they add to the binary as linked.
    pub padding: u64,
    /// Expected movement of the hot code under the growth, as linked and with the capsules
    /// ([`capsule_damage`], 0 to 0.25).
    pub damage: (f64, f64),
}

/// Capsule boundaries chosen for stability: units to start on a `boundary` (4 KiB: one way of
/// the L1 I-caches and a page) so that code growing before one of them moves the code after
/// it by whole multiples of the boundary, which changes no cache set and no line offset.
///
/// Growth at the end of unit `p` moves the code from `p + 1` to the first capsule after `p`
/// (the end of the code when there is none) against everything else: the code before `p`, the
/// code after that capsule, and the code outside the binary. What makes miss counts jump is
/// hot code that moves against hot code that stays, so the damage of the growth is the pairs
/// it separates, `M * (T - M)`, with `M` the hot weight that moves and `T` all the hot weight,
/// outside included (both as shares of `T`); [`capsule_damage`] sums it over the growth sites
/// by their weights. The chooser is greedy: each step adds the candidate that lowers the damage
/// most among those whose padding still fits the budget (ties: less padding, then the earlier
/// unit), until no candidate lowers it. Among candidates that protect the same hot code (the
/// cold starts between a growth site and the next hot unit) the one needing the least padding
/// wins.
///
/// The padding of a capsule is what it needs in the binary as linked (with the capsules
/// already chosen in place), `0` to `boundary - 1` bytes; a capsule whose padding fits in the
/// gap before the next capsule adds nothing to the code's end. Later growth before a capsule
/// eats into its gap; once the gap is used up the capsule moves by a whole boundary (still
/// protecting what follows, at up to `boundary` more bytes).
pub fn capsules(p: &CapsuleProblem<'_>) -> CapsuleChoice {
    let n = p.starts.len().min(p.hot.len());
    let hot_in: f64 = p.hot[..n].iter().map(|h| h.max(0.0)).sum();
    let total = hot_in + p.outside.max(0.0);
    let mut chosen: Vec<usize> = Vec::new();
    if n == 0 || total <= 0.0 || p.boundary <= 1 {
        return CapsuleChoice {
            units: chosen,
            padding: 0,
            damage: (0.0, 0.0),
        };
    }
    // Prefix sums over units: hot share before unit i, and per growth site (by unit) the sums
    // of w, w*x and w*x^2 with x the hot share before the site's next unit.
    let mut pre = vec![0.0f64; n + 1];
    for i in 0..n {
        pre[i + 1] = pre[i] + p.hot[i].max(0.0) / total;
    }
    let mut site = vec![(0.0f64, 0.0f64, 0.0f64); n + 1];
    for &(u, w) in p.growth {
        if u < n && w > 0.0 {
            let x = pre[u + 1];
            site[u + 1].0 += w;
            site[u + 1].1 += w * x;
            site[u + 1].2 += w * x * x;
        }
    }
    let wsum: f64 = site.iter().map(|s| s.0).sum();
    if wsum <= 0.0 {
        return CapsuleChoice {
            units: chosen,
            padding: 0,
            damage: (0.0, 0.0),
        };
    }
    for i in 0..n {
        site[i + 1].0 = site[i].0 + site[i + 1].0 / wsum;
        site[i + 1].1 = site[i].1 + site[i + 1].1 / wsum;
        site[i + 1].2 = site[i].2 + site[i + 1].2 / wsum;
    }
    // Damage of the sites at units lo..hi whose moved code ends at the hot share `a`:
    // sum of w * (a - x) * (1 - a + x) = a(1-a) W0 + (2a-1) W1 - W2.
    let span = |lo: usize, hi: usize, a: f64| -> f64 {
        let w0 = site[hi].0 - site[lo].0;
        let w1 = site[hi].1 - site[lo].1;
        let w2 = site[hi].2 - site[lo].2;
        a * (1.0 - a) * w0 + (2.0 * a - 1.0) * w1 - w2
    };
    let damage_of = |caps: &[usize]| -> f64 {
        let mut d = 0.0;
        let mut lo = 0;
        for &c in caps.iter().chain(std::iter::once(&n)) {
            d += span(lo, c, pre[c]);
            lo = c;
        }
        d.max(0.0)
    };
    let before = damage_of(&[]);
    let eps = before * 1e-9;
    // A capsule must remove at least this much of the damage as linked: each one may cost a
    // whole boundary in a later build, so a negligible gain does not pay.
    let worth = before * MIN_CAPSULE_GAIN;
    let starts = &p.starts[..n];
    let b = p.boundary;
    let pad_at = |s: u64| pad_from(p.origin, s, b);
    let mut spent = 0u64;
    loop {
        // Padding of every chosen capsule, each with the ones before it in place.
        let mut pads: Vec<u64> = Vec::with_capacity(chosen.len());
        let mut s = 0u64;
        for &c in &chosen {
            let pd = pad_at(starts[c].saturating_add(s));
            pads.push(pd);
            s = s.saturating_add(pd);
        }
        let mut best: Option<(f64, u64, usize)> = None;
        let mut k = 0; // chosen[..k] are before u
        let mut shift = 0u64; // their padding: how far u has moved
        for u in 0..n {
            while k < chosen.len() && chosen[k] < u {
                shift = shift.saturating_add(pads[k]);
                k += 1;
            }
            if !p.candidate.get(u).copied().unwrap_or(false) || chosen.get(k) == Some(&u) {
                continue;
            }
            let lo = if k > 0 { chosen[k - 1] } else { 0 };
            let next = chosen.get(k).copied().unwrap_or(n);
            // Sites lo..u moved the code up to `next`; with u they move it up to u.
            let gain = span(lo, u, pre[next]) - span(lo, u, pre[u]);
            if gain <= worth.max(eps) {
                continue;
            }
            let pad = pad_at(starts[u].saturating_add(shift));
            let cost = match pads.get(k) {
                None => pad,
                Some(&gap) if pad <= gap => 0,
                Some(_) => b,
            };
            if spent.saturating_add(cost) > p.budget {
                continue;
            }
            let better = match best {
                None => true,
                Some((g, c, _)) => gain > g + eps || (gain >= g - eps && cost < c),
            };
            if better {
                best = Some((gain, cost, u));
            }
        }
        let Some((_, cost, u)) = best else { break };
        if chosen.len() >= MAX_CAPSULES {
            break;
        }
        spent = spent.saturating_add(cost);
        let at = chosen.partition_point(|&c| c < u);
        chosen.insert(at, u);
    }
    let padding = capsule_padding(p.origin, starts, &chosen, b);
    CapsuleChoice {
        damage: (before, damage_of(&chosen)),
        units: chosen,
        padding,
    }
}

/// Bytes of padding that starting `units` (sorted) on `boundary` adds to code whose units
/// start at `starts` in a section starting at `origin` (see [`CapsuleProblem::origin`]): the
/// end of the code moves by the sum of the capsules' paddings, each computed with the
/// capsules before it in place.
pub fn capsule_padding(origin: u64, starts: &[u64], units: &[usize], boundary: u64) -> u64 {
    let mut shift = 0u64;
    for &u in units {
        let Some(&s) = starts.get(u) else { continue };
        shift = shift.saturating_add(pad_from(origin, s.saturating_add(shift), boundary));
    }
    shift
}

/// Padding before `at` to the next multiple of `boundary` counted from `origin` (0 for a
/// boundary of 0 or 1).
fn pad_from(origin: u64, at: u64, boundary: u64) -> u64 {
    if boundary <= 1 {
        return 0;
    }
    let r = at.wrapping_sub(origin) % boundary;
    (boundary - r) % boundary
}

/// The damage [`capsules`] minimises for a set of capsule units (sorted): over the growth
/// sites (weights normalised to 1), the share of hot weight moved `M` times the share left in
/// place `1 - M`. 0: no growth moves hot code against other hot code; 0.25 at most.
pub fn capsule_damage(p: &CapsuleProblem<'_>, units: &[usize]) -> f64 {
    let n = p.starts.len().min(p.hot.len());
    let hot_in: f64 = p.hot[..n].iter().map(|h| h.max(0.0)).sum();
    let total = hot_in + p.outside.max(0.0);
    let wsum: f64 = p
        .growth
        .iter()
        .filter(|g| g.0 < n)
        .map(|g| g.1.max(0.0))
        .sum();
    if total <= 0.0 || wsum <= 0.0 {
        return 0.0;
    }
    let mut pre = vec![0.0f64; n + 1];
    for i in 0..n {
        pre[i + 1] = pre[i] + p.hot[i].max(0.0) / total;
    }
    p.growth
        .iter()
        .filter(|g| g.0 < n && g.1 > 0.0)
        .map(|&(s, w)| {
            let next = units.iter().copied().find(|&c| c > s).unwrap_or(n);
            let m = pre[next] - pre[s + 1];
            w / wsum * m * (1.0 - m)
        })
        .sum()
}

/// One row of a sweep: a layout, the code size it gives, and its metrics over the shifts.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Row label: `as linked`, or the alignment in bytes.
    pub label: String,
    /// [`code_bytes`] of the layout (unshifted).
    pub code_bytes: u64,
    /// Metrics per shift (the first unshifted).
    pub shifts: Vec<Metrics>,
}

/// The columns of a sweep table: (JSON key, header, value of one run).
type Column = (&'static str, &'static str, fn(&Metrics) -> u64);

/// The metrics a sweep shows, in column order.
const COLUMNS: [Column; 5] = [
    ("i1_misses_32k_8way", "I1 32K", |m| m.i1_misses_32k_8way),
    ("i1_misses_16k_4way", "I1 16K", |m| m.i1_misses_16k_4way),
    ("itlb_misses_64", "iTLB 64", |m| m.itlb_misses_64),
    ("lines_99", "lines 99%", |m| m.lines_99),
    ("pages_99", "pages 99%", |m| m.pages_99),
];

/// Median, minimum and maximum of `v` (the median of an even count is the mean of the two
/// middle values); `None` for no value.
pub fn summary(v: &[u64]) -> Option<(f64, u64, u64)> {
    let mut v = v.to_vec();
    v.sort_unstable();
    let n = v.len();
    let med = match n {
        0 => return None,
        _ if n % 2 == 1 => v[n / 2] as f64,
        _ => v[n / 2 - 1] as f64 / 2.0 + v[n / 2] as f64 / 2.0,
    };
    Some((med, v[0], v[n - 1]))
}

impl Row {
    /// The stability of this layout: the largest I1 (32K) count over its shifts divided by the
    /// smallest (1.0: the shifts change nothing; `None` without shifts or with a 0 count).
    pub fn spread(&self) -> Option<f64> {
        let v: Vec<u64> = self.shifts.iter().map(|m| m.i1_misses_32k_8way).collect();
        match summary(&v) {
            Some((_, lo, hi)) if lo > 0 && v.len() > 1 => Some(hi as f64 / lo as f64),
            _ => None,
        }
    }
}

/// A sweep: the binary as linked (row 0), then one row per alignment.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// The rows, as linked first.
    pub rows: Vec<Row>,
}

/// What [`Sweep::best`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Best {
    /// Index of the row with the fewest I1 misses (32K, median over shifts); ties: the row
    /// with less code, then the earlier row.
    pub row: usize,
    /// True when that median is below the smallest count the as-linked layout gave over the
    /// shifts (at least two): outside the noise range, a win.
    pub outside_noise: bool,
}

impl Sweep {
    /// The I1 (32K) median of row `i`.
    fn i1_median(&self, i: usize) -> f64 {
        let v: Vec<u64> = self.rows[i]
            .shifts
            .iter()
            .map(|m| m.i1_misses_32k_8way)
            .collect();
        summary(&v).map_or(f64::INFINITY, |s| s.0)
    }

    /// The as-linked layout's I1 (32K) range over the shifts: the noise range.
    pub fn noise_range(&self) -> Option<(u64, u64)> {
        let v: Vec<u64> = self
            .rows
            .first()?
            .shifts
            .iter()
            .map(|m| m.i1_misses_32k_8way)
            .collect();
        summary(&v).map(|s| (s.1, s.2))
    }

    /// The row with the fewest I1 misses, and whether it beats the noise range.
    pub fn best(&self) -> Option<Best> {
        let row = (0..self.rows.len()).min_by(|&a, &b| {
            self.i1_median(a)
                .total_cmp(&self.i1_median(b))
                .then(self.rows[a].code_bytes.cmp(&self.rows[b].code_bytes))
                .then(a.cmp(&b))
        })?;
        let (lo, _) = self.noise_range()?;
        let ranged = self.rows[0].shifts.len() > 1;
        Some(Best {
            row,
            outside_noise: ranged && row != 0 && self.i1_median(row) < lo as f64,
        })
    }

    /// The text table: one row per layout; columns code bytes, growth over the as-linked code
    /// in percent, then each metric as `median [min-max]` over the shifts (the value alone
    /// when they agree), then the stability [`Row::spread`]. The best row is marked `*` when it is outside the noise range and
    /// `~` when it is not; a footer says which and gives the range.
    pub fn format_table(&self) -> String {
        let base = self.rows.first().map_or(0, |r| r.code_bytes);
        let best = self.best();
        let mut table: Vec<Vec<String>> = vec![{
            let mut h = vec!["align".to_string(), "code bytes".into(), "growth".into()];
            h.extend(COLUMNS.iter().map(|c| c.1.to_string()));
            h.push("I1 32K max/min".into());
            h
        }];
        for (i, r) in self.rows.iter().enumerate() {
            let mark = match best {
                Some(b) if b.row == i && b.outside_noise => " *",
                Some(b) if b.row == i => " ~",
                _ => "",
            };
            let mut line = vec![format!("{}{mark}", r.label), r.code_bytes.to_string()];
            line.push(growth(r.code_bytes, base));
            for (_, _, get) in COLUMNS {
                let v: Vec<u64> = r.shifts.iter().map(get).collect();
                line.push(match summary(&v) {
                    None => "-".into(),
                    Some((m, lo, hi)) if lo == hi => num(m),
                    Some((m, lo, hi)) => format!("{} [{lo}-{hi}]", num(m)),
                });
            }
            line.push(r.spread().map_or_else(|| "-".into(), |x| format!("{x:.3}")));
            table.push(line);
        }
        let widths: Vec<usize> = (0..table[0].len())
            .map(|c| table.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in &table {
            let mut line = format!("{:<w$}", r[0], w = widths[0]);
            for (c, cell) in r.iter().enumerate().skip(1) {
                let _ = write!(line, "  {:>w$}", cell, w = widths[c]);
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if let (Some(b), Some((lo, hi))) = (best, self.noise_range()) {
            let label = &self.rows[b.row].label;
            let _ = if self.rows[0].shifts.len() < 2 {
                writeln!(
                    out,
                    "best: ~ {label} (one layout per row, no noise range: give --shifts to call a win)"
                )
            } else if b.row == 0 {
                writeln!(out, "best: as linked (no alignment has fewer I1 misses)")
            } else if b.outside_noise {
                writeln!(
                    out,
                    "best: * {label} (I1 32K median below the as-linked range {lo}-{hi} over the shifts)"
                )
            } else {
                writeln!(
                    out,
                    "best: ~ {label}, within the as-linked range {lo}-{hi} over the shifts: not a win"
                )
            };
        }
        out
    }

    /// The JSON form: `{"noise_range": [min, max], "best": label, "best_outside_noise": bool,
    /// "rows": [{"align", "code_bytes", "i1_spread", "shifts": [Metrics...]}]}`.
    pub fn format_json(&self) -> String {
        let best = self.best();
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "align": r.label,
                    "code_bytes": r.code_bytes,
                    "i1_spread": r.spread().map(|x| (x * 1000.0).round() / 1000.0),
                    "shifts": r.shifts,
                })
            })
            .collect();
        let v = serde_json::json!({
            "noise_range": self.noise_range().map(|(a, b)| [a, b]),
            "best": best.map(|b| self.rows[b.row].label.clone()),
            "best_outside_noise": best.is_some_and(|b| b.outside_noise),
            "rows": rows,
        });
        let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// `new` over `base` as a signed percentage with one decimal (`-` for a base of 0).
fn growth(new: u64, base: u64) -> String {
    if base == 0 {
        return "-".into();
    }
    format!("{:+.1}%", (new as f64 - base as f64) * 100.0 / base as f64)
}

/// A count, or a median with one decimal when it is not whole.
fn num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ten units of 0x100 bytes from 0xfd00; units 5 and 6 ran (weight 1 each), the shared
    // libraries as much as both (2): growth at the end of unit 1 moves half the hot weight
    // against the other half, damage 0.5 * 0.5 = 0.25. Units 2 to 5 protect all of it; unit 3
    // sits at 0x10000 (no padding), so it is chosen even at a budget of 0. Moved to 0x10000,
    // unit 3 needs 3328 bytes and unit 5, the cheapest of the four, 2816: chosen at 3000, and
    // at 2600 only unit 6 fits (2560 bytes), protecting unit 6 alone: damage 0.25 * 0.75.
    #[test]
    fn capsules_protect_the_hot_code_at_the_least_padding() {
        let hot = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0];
        let cand = [true; 10];
        let growth = [(1usize, 1.0)];
        let at = |base: u64, budget: u64| {
            let starts: Vec<u64> = (0..10).map(|i| base + i * 0x100).collect();
            capsules(&CapsuleProblem {
                starts: &starts,
                origin: 0,
                hot: &hot,
                outside: 2.0,
                candidate: &cand,
                growth: &growth,
                boundary: 4096,
                budget,
            })
        };
        let c = at(0xfd00, 0);
        assert_eq!(c.units, [3]);
        assert_eq!(c.padding, 0);
        assert_eq!(c.damage, (0.25, 0.0));
        let c = at(0x10000, 3000);
        assert_eq!((c.units.as_slice(), c.padding), (&[5][..], 2816));
        let c = at(0x10000, 2600);
        assert_eq!((c.units.as_slice(), c.padding), (&[6][..], 2560));
        assert!((c.damage.1 - 0.1875).abs() < 1e-12);
        assert!(at(0x10000, 2000).units.is_empty());
        // A unit that may not be aligned is never chosen.
        let only = [
            false, false, false, false, false, true, false, false, false, false,
        ];
        let starts: Vec<u64> = (0..10).map(|i| 0xfd00 + i * 0x100).collect();
        let c = capsules(&CapsuleProblem {
            starts: &starts,
            origin: 0,
            hot: &hot,
            outside: 2.0,
            candidate: &only,
            growth: &growth,
            boundary: 4096,
            budget: 4096,
        });
        assert_eq!((c.units.as_slice(), c.padding), (&[5][..], 3584));
    }

    // Growth everywhere (every unit's end, weight 1): two hot units, 2 and 7, nothing
    // outside; unit i at 0x10000 + i * 0xff0, so a capsule at unit i alone needs 16 * i
    // bytes. Growth at units 2 to 6 moves unit 7 against unit 2: damage 5/10 * 0.25. A capsule
    // at 7 ends that but makes growth at units 0 and 1 move unit 2 against unit 7 (0.05 left);
    // a second one at 2 then costs nothing (its 32 bytes fit in the 112 before unit 7): both,
    // damage 0, 112 bytes. At 100 bytes unit 7 does not fit; unit 6 (96 bytes) leaves growth
    // at unit 6 moving unit 7 (0.025), and unit 2 again comes free.
    #[test]
    fn capsules_against_growth_anywhere() {
        let mut hot = [0.0; 10];
        hot[2] = 1.0;
        hot[7] = 1.0;
        let starts: Vec<u64> = (0..10).map(|i| 0x10000 + i * 0xff0).collect();
        let growth: Vec<(usize, f64)> = (0..10).map(|i| (i, 1.0)).collect();
        let p = |budget| CapsuleProblem {
            starts: &starts,
            origin: 0,
            hot: &hot,
            outside: 0.0,
            candidate: &[true; 10],
            growth: &growth,
            boundary: 4096,
            budget,
        };
        assert!((capsule_damage(&p(0), &[]) - 0.125).abs() < 1e-12);
        assert!((capsule_damage(&p(0), &[3]) - 0.15).abs() < 1e-12);
        let c = capsules(&p(112));
        assert_eq!((c.units.as_slice(), c.padding), (&[2, 7][..], 112));
        assert!((c.damage.0 - 0.125).abs() < 1e-12);
        assert!(c.damage.1.abs() < 1e-12);
        let c = capsules(&p(100));
        assert_eq!((c.units.as_slice(), c.padding), (&[2, 6][..], 96));
        assert!((c.damage.1 - 0.025).abs() < 1e-12);
        assert!((capsule_damage(&p(0), &c.units) - 0.025).abs() < 1e-12);
        // At 95 bytes the best single capsule is unit 5 (80 bytes): growth at 5 and 6 still
        // moves unit 7 (0.05 left), and unit 2 comes free again.
        let c = capsules(&p(95));
        assert_eq!((c.units.as_slice(), c.padding), (&[2, 5][..], 80));
        assert!((c.damage.1 - 0.05).abs() < 1e-12);
        // Padding with the capsules before in place: unit 3 needs 48 bytes, then unit 5
        // (0x14fb0 + 48 = 0x14fe0) 32 more.
        assert_eq!(capsule_padding(0, &starts, &[3, 5], 4096), 80);
        assert_eq!(capsule_padding(0, &starts, &[], 4096), 0);
        // Counted from a section at 0x10f00 instead: unit 3 (0x12fd0) needs 0xf30 bytes.
        assert_eq!(capsule_padding(0x10f00, &starts, &[3], 4096), 0xf30);
    }

    // Functions of 10, 40 and 7 bytes from 0x1000: packed at alignment 1, rounded at 16
    // (0x1000, 0x1010, 0x1040) and 64 (0x1000, 0x1040, 0x1080), so the code grows from 57 to
    // 71 and 135 bytes.
    #[test]
    fn exact_code_bytes_per_alignment() {
        let sizes = [10, 40, 7];
        let at = |a: u64| place_aligned(&sizes, &[a; 3], 0x1000);
        assert_eq!(at(1), [0x1000, 0x100a, 0x1032]);
        assert_eq!(at(16), [0x1000, 0x1010, 0x1040]);
        assert_eq!(at(64), [0x1000, 0x1040, 0x1080]);
        let bytes: Vec<u64> = SWEEP.iter().map(|&a| code_bytes(&at(a), &sizes)).collect();
        assert_eq!(bytes, [57, 57, 59, 63, 71, 103, 135, 263, 519, 1031]);
        // A base that is not aligned: the first start is rounded too, and counted from there.
        assert_eq!(place_aligned(&sizes, &[64; 3], 0x1010)[0], 0x1040);
        assert_eq!(code_bytes(&[], &[]), 0);
    }

    // Function 0 grown by 20 bytes: function 1 moves from 0x1010 to 0x1020 under 16-byte
    // alignment and stays at 0x1040 under 64 (the padding absorbs the growth); grown after
    // function 1, only function 2 moves.
    #[test]
    fn growth_inside_moves_what_follows() {
        assert_eq!(
            place_grown(&[10, 40, 7], &[16; 3], 0x1000, 0, 20),
            [0x1000, 0x1020, 0x1050]
        );
        assert_eq!(
            place_grown(&[10, 40, 7], &[64; 3], 0x1000, 0, 20),
            [0x1000, 0x1040, 0x1080]
        );
        assert_eq!(
            place_grown(&[10, 40, 7], &[16; 3], 0x1000, 1, 20),
            [0x1000, 0x1010, 0x1050]
        );
    }

    // A 34-byte function at 0x10c0, sizeless code at 0x10f0..0x11b0, then f1 at 0x11b0: the
    // padding to 0x10f0 is not a filler, the sizeless code is; placed again at 16 bytes the
    // layout is the one linked.
    #[test]
    fn fillers_keep_unsized_code() {
        let (s, z, f) = with_fillers(&[0x10c0, 0x11b0, 0x11e0], &[0x22, 0x25, 0x30], 16);
        assert_eq!(s, [0x10c0, 0x10f0, 0x11b0, 0x11e0]);
        assert_eq!(z, [0x22, 0xc0, 0x25, 0x30]);
        assert_eq!(f, [true, false, true, true]);
        assert_eq!(place_aligned(&z, &[16; 4], 0x10c0), s);
    }

    // Per-function alignment: only function 1 goes to a line; a missing entry counts as 1.
    #[test]
    fn selective_alignment_moves_only_what_follows() {
        assert_eq!(
            place_aligned(&[10, 40, 7], &[1, 64], 0x1000),
            [0x1000, 0x1040, 0x1068]
        );
        assert_eq!(align_up(u64::MAX - 1, 64), u64::MAX);
        assert_eq!(align_up(65, 0), 65);
    }

    // The trace replayed under aligned placements, through a direct-mapped cache of two
    // 64-byte lines (sets 0 and 1). f0 and f1 (48 bytes each) as linked at 0x1000 and 0x1030,
    // ten times: f0, f1, then libc at 0x9000 (set 0, never moved). As linked (= alignment 16)
    // f0 and libc evict each other in set 0 and f1's second line sits alone in set 1: 3 misses
    // the first time, 2 after, 21. At 128 bytes f1 moves to 0x1080, also set 0: f0, f1 and
    // libc evict each other, 3 misses each time, 30.
    #[test]
    fn replayed_misses_per_alignment() {
        use crate::{CacheConfig, Capture, Relayout, TextMap};
        let cfg = CacheConfig {
            size: 128,
            ways: 1,
            line: 64,
        };
        let (old, sizes) = ([0x1000, 0x1030], [48, 48]);
        let mut c = Capture::new(vec![cfg.build().unwrap()]);
        c.set_text(0x1000, 0x2000).unwrap();
        let views: Vec<usize> = [16, 128, 1]
            .iter()
            .map(|&a| {
                let new = place_aligned(&sizes, &[a; 2], 0x1000);
                let r = Relayout::new(&old, &sizes, &new).unwrap();
                c.add_view(TextMap::Relayout(r), vec![cfg.build().unwrap()])
            })
            .collect();
        let trace = "I  00001000,48\nI  00001030,48\nI  00009000,4\n".repeat(10);
        c.replay(trace.as_bytes()).unwrap();
        c.finish();
        let misses = |v: usize| c.view_arrays(v)[0].stats().misses;
        assert_eq!(c.arrays()[0].stats().misses, 21);
        assert_eq!(misses(views[0]), 21);
        assert_eq!(misses(views[1]), 30);
        // Packed (alignment 1): f1 at 0x1030 as linked, the same 21.
        assert_eq!(misses(views[2]), 21);
    }

    // Function 0 runs 60 bytes from offset 0, a thousand times: from a line start it covers
    // one line, from 16, 32 or 48 two (mean 1.75): gain 750. Function 1 runs 8 bytes at offset
    // 8 a thousand times: one line from every 16-byte start, no gain. Function 2 runs 40 bytes
    // twice: from 32 or 48 two lines (mean 1.5), gain 1. A budget of 48 bytes takes one
    // function (0); 96 takes 0 and 2; at a 128-byte pair function 0's 60 bytes straddle from
    // 80, 96 and 112 (mean 1.375, gain 375).
    #[test]
    fn chooses_by_gain_under_the_budget() {
        let ranges = [(0, 0, 60, 1000), (1, 8, 8, 1000), (2, 0, 40, 2)];
        assert_eq!(choose(&ranges, 64, 16, 48), [0]);
        assert_eq!(choose(&ranges, 64, 16, 96), [0, 2]);
        assert_eq!(choose(&ranges, 64, 16, 47), Vec::<usize>::new());
        assert_eq!(choose(&ranges, 128, 16, 1000), [0, 2]);
        assert_eq!(choose(&ranges, 16, 16, 1000), Vec::<usize>::new());
        assert_eq!(blocks(60, 8, 64), 2);
        assert_eq!(blocks(0, 0, 64), 0);
    }

    fn row(label: &str, bytes: u64, i1: &[u64]) -> Row {
        Row {
            label: label.into(),
            code_bytes: bytes,
            shifts: i1
                .iter()
                .map(|&n| Metrics {
                    i1_misses_32k_8way: n,
                    lines_99: 3,
                    ..Metrics::default()
                })
                .collect(),
        }
    }

    // The best row is a win only when its median is below the as-linked minimum.
    #[test]
    fn best_row_against_the_noise_range() {
        let win = Sweep {
            rows: vec![
                row("as linked", 100, &[100, 120, 110]),
                row("1", 90, &[105, 105, 105]),
                row("64", 130, &[95, 99, 90]),
            ],
        };
        assert_eq!(
            win.best(),
            Some(Best {
                row: 2,
                outside_noise: true
            })
        );
        assert_eq!(win.noise_range(), Some((100, 120)));
        let t = win.format_table();
        assert_eq!(
            t,
            "align      code bytes  growth         I1 32K  I1 16K  iTLB 64  lines 99%  pages 99%  I1 32K max/min\n\
             as linked         100   +0.0%  110 [100-120]       0        0          3          0           1.200\n\
             1                  90  -10.0%            105       0        0          3          0           1.000\n\
             64 *              130  +30.0%     95 [90-99]       0        0          3          0           1.100\n\
             best: * 64 (I1 32K median below the as-linked range 100-120 over the shifts)\n"
        );
        let one = Sweep {
            rows: vec![row("as linked", 100, &[100]), row("2", 90, &[10])],
        };
        assert!(!one.best().unwrap().outside_noise);
        assert!(one
            .format_table()
            .ends_with("give --shifts to call a win)\n"));
        let within = Sweep {
            rows: vec![
                row("as linked", 100, &[100, 120]),
                row("2", 90, &[101, 101]),
            ],
        };
        assert!(within.format_table().ends_with(
            "best: ~ 2, within the as-linked range 100-120 over the shifts: not a win\n"
        ));
        let json: serde_json::Value = serde_json::from_str(&win.format_json()).unwrap();
        assert_eq!(json["best"], "64");
        assert_eq!(json["best_outside_noise"], true);
        assert_eq!(json["rows"][2]["code_bytes"], 130);
    }
}
