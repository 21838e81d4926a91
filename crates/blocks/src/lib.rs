//! sediment-blocks: block-level hot/cold splitting without rewriting the binary.
//!
//! Function ordering packs hot *functions* together, but a hot function still carries its cold
//! blocks (error paths, rare cases) between its hot ones, so the lines and pages that hold the
//! hot code stay many. BOLT fixes that by rewriting the binary; Sediment asks the compiler to do
//! it. Clang's `-fbasic-block-sections=labels` build records where every machine basic block is
//! (`.llvm_bb_addr_map`, read by [`sediment_elf::bb_addr_map`]); a profile of that build says how
//! often each block ran; this crate turns both into
//!
//! 1. a **cluster list** for `-fbasic-block-sections=list=FILE` ([`list_file`]): for every
//!    function that ran, `!name` and one `!!` line per cluster, the entry block's first (entry
//!    block first in it). Clang keeps the first cluster in the function's own section
//!    (`.text.hot.name`, symbol `name`), gives every further cluster `k` a section of its own
//!    (also named `.text.hot.name`, symbol `name.__part.k`, [`part_name`]) and moves every
//!    unlisted block to `.text.split.name` (symbol `name.cold`);
//! 2. a **function order** (a Sediment order file, for `sediment link`): the hot parts in the
//!    order of a function-level algorithm (C3 by default) run on the profile with each split
//!    function's size replaced by its hot bytes, then the `.cold` parts in the same order, so
//!    all hot code comes before any cold part. Functions that never ran are not listed: the
//!    linker leaves them after the listed ones.
//!
//! Two hot tiers ([`Params::hot_coverage`]). One hot cluster per function keeps every block
//! that ran once between the loops that run a million times, so the lines holding 99% of the
//! executed code stay many. With a share `s`, [`hot_threshold`] finds the count `t` above which
//! the blocks hold `s` of the training's executed code bytes (count x size, densest first: the
//! greedy that minimizes lines for a coverage), and each function gets up to two clusters:
//! its *very hot* blocks (count >= `t`) and its *warm* ones. The entry block's cluster comes
//! first (it keeps the symbol); a function whose loop is very hot but whose entry runs rarely
//! gets the loop as `name.__part.1`. The order is then every very hot part (C3 with each
//! function's size replaced by its very hot bytes), every warm part (C3 again, warm bytes),
//! every cold part. Each extra cluster costs a jump in and a jump out, which is why there are
//! two tiers and not one cluster per block.
//!
//! Block counts. With callgrind `--dump-instr=yes` every executed instruction has its own count;
//! a block's count is the count of its first instruction (a block is entered only at its top).
//! A block is hot when its count reaches [`Params::min_count`]; the entry block is always hot in
//! a function that ran, since the function's symbol must stay on it.
//!
//! Block order inside the hot part: ExtTSP ([`sediment_order::ext_tsp_layout`], Newell &
//! Pupyrev, "Improved Basic Block Reordering", IEEE TC 2020) over the hot blocks. Edges are the
//! taken jumps callgrind records with `--collect-jumps=yes` (site in block `a`, target the start
//! of block `b`) plus the fall-throughs it does not record, estimated for a block that can fall
//! through as its count minus its taken jumps, to the next block in address order. Without
//! jump data only fall-throughs remain and ExtTSP keeps hot fall-through chains. ExtTSP may
//! place the entry block anywhere; it is then moved to the front (the list file requires it)
//! and the rest keep their relative order. With [`Params::keep_block_order`] each cluster keeps
//! the labels build's own block order instead: for a build whose compiler already placed
//! blocks from a profile (sample PGO), the split then only moves blocks between sections.
//!
//! Which functions are listed: only those whose symbol sits exactly at a block-map entry, whose
//! name is unique among the binary's function symbols (the list file names functions without
//! their file, so a `static` name defined in two files would split both by one profile), and
//! whose name passes [`sediment_link::safe::is_safe_symbol`] (the list file is compiler input;
//! a stranger's profile never writes text into it, only names read from the binary, and only
//! plain ones). Skipped functions are counted in [`Stats`].
//!
//! C++. A complete-object constructor or destructor (`C1`, `D1`) that is an alias of the
//! base-object one (`C2`, `D2`) is listed under the name the compiler compiled, with the
//! symbol's name as its alias (`!D2/D1`), and its parts are named after it ([`compiled_name`]).
//! The landing pads of a function stay in one cluster: clang would otherwise move them all to a
//! `.text.eh.` section of their own that no order names. COMDAT copies of a split function in
//! several objects need nothing here: every copy is split by the same list, and `sediment link`
//! places their same-named parts (docs/design/blocks.md, "C++").
//!
//! Without a block map (a GCC build with `-freorder-blocks-and-partition`, where GCC itself split
//! `name` from `name.cold`), the plan has no clusters and the order is the function order with
//! every `.cold` symbol moved after all others.
//!
//! After the second build, [`check::check`] says where the parts ended up: every hot part
//! should lie before every cold part.
//!
//! Determinism: the map is walked in address order, ExtTSP and C3 break ties by node index, and
//! no hash-map iteration reaches the output. Design constraint: no I/O; the caller reads files.
//!
//! Turned down: a global ExtTSP over the blocks of all functions (Propeller's whole-program
//! layout). It would need a cluster per chain, so many more sections and jumps, and the call
//! edges at block level, which the function-level profile does not give; the two tiers get most
//! of the density on SQLite (docs/journal/blocks.md).

pub mod check;

use sediment_elf::{AliasSet, BbFunction, Binary};
use sediment_link::safe::is_safe_symbol;
use sediment_order::{ext_tsp_layout, order_profile, Algorithm, EdgeCount, ExtTspLayoutParams};
use sediment_profile::{FuncKey, FunctionOrder, Profile};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An ordering algorithm refused its input.
    #[error("ordering: {0}")]
    Order(#[from] sediment_order::Error),
}

/// The suffix clang (`.text.split.` sections) and GCC (`.text.unlikely.` sections) give the
/// symbol of a function's cold part.
pub const COLD_SUFFIX: &str = ".cold";

/// Tuning of [`plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Executions at which a block counts as hot. 1 (the default): every block that ran in
    /// training stays hot, as BOLT's default splitting keeps every block with a nonzero count;
    /// larger values trade rare slow paths for density.
    pub min_count: u64,
    /// The function-level algorithm that orders the hot parts.
    pub algorithm: Algorithm,
    /// Share of the training's executed code bytes, in 1/10000, that the *very hot* clusters
    /// hold ([`hot_threshold`]); 0 keeps one hot cluster per function. With a share, each
    /// function gets up to two listed clusters, the very hot blocks and the warm ones, and the
    /// order places every very hot part, then every warm part, then every cold part. Tuned on
    /// SQLite speedtest1 (docs/journal/blocks.md): 9900 and 9990 gave the fewest 64-byte lines for 99%
    /// of the executed code (665 and 668 against 726 with one cluster); 9999 makes 111 KB of
    /// blocks very hot, with more jumps between the parts, and was worse (690); `bench/run`
    /// uses 9990.
    pub hot_coverage: u32,
    /// Keep the compiler's block order inside each cluster (ascending block ids: in a version 1
    /// map they are the labels build's layout) instead of ExtTSP's. For a build that already
    /// had a profile (`-fprofile-sample-use`), whose block placement was made from the same
    /// counts: on SQLite such a build ran 8.4 M more instructions with ExtTSP's order than
    /// without a split (docs/design/blocks.md, "Sample PGO from a VM profile").
    pub keep_block_order: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            min_count: 1,
            algorithm: Algorithm::C3,
            hot_coverage: 0,
            keep_block_order: false,
        }
    }
}

/// One listed cluster of a function: the blocks clang keeps together in one section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// Block ids in layout order (the entry block first in a function's first cluster).
    pub ids: Vec<u32>,
    /// Bytes of those blocks.
    pub bytes: u64,
    /// 0: very hot (placed first), 1: warm (after every very hot part).
    pub tier: u8,
}

/// The plan for one function that ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionPlan {
    /// The function (name, and file for locals), as the binary's symbol table and the profile
    /// name it.
    pub key: FuncKey,
    /// The name the compiler gives the function, after which it names the parts (`.cold`,
    /// `.__part.N`): the key's name, or, when the key is a C++ complete-object constructor or
    /// destructor (`C1`, `D1`) that is an alias of the base-object one (`C2`, `D2`), that one
    /// ([`compiled_name`]).
    pub symbol: String,
    /// Its address in the labels build.
    pub address: u64,
    /// The listed clusters; the first holds the entry block and keeps the function's symbol,
    /// cluster `k > 0` becomes the section of symbol `name.__part.k` ([`part_name`]).
    pub clusters: Vec<Cluster>,
    /// Bytes of the listed blocks (all clusters).
    pub hot_bytes: u64,
    /// Number of blocks left out (they form the `.cold` part).
    pub cold_blocks: usize,
    /// Bytes of those blocks.
    pub cold_bytes: u64,
}

/// What [`plan`] did and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Functions in the block map.
    pub mapped: usize,
    /// Of those, functions that ran and are listed.
    pub listed: usize,
    /// Listed functions with a cold part.
    pub split: usize,
    /// Functions that ran but whose name is not unique in the binary.
    pub ambiguous: usize,
    /// Functions that ran but whose name has characters outside the safe set.
    pub unsafe_names: usize,
    /// Map entries with no function symbol at their address.
    pub unnamed: usize,
    /// The very hot threshold ([`hot_threshold`]) when [`Params::hot_coverage`] is set.
    pub very_hot_min: Option<u64>,
}

/// The result of [`plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Listed functions, by address.
    pub functions: Vec<FunctionPlan>,
    /// Hot parts, then cold parts (see the module docs).
    pub order: FunctionOrder,
    /// Counts of what was done and skipped.
    pub stats: Stats,
}

/// Computes the clusters and the order. `map` is the labels build's block map (empty for a
/// GCC build), `aliases` the binary's function names that share an address
/// ([`sediment_elf::compiled_aliases`], by address), `executed` its (address, count)
/// pairs sorted by address, `jumps` its (site, target, taken) triples sorted, `profile` its
/// function-level profile (for the function order).
pub fn plan(
    binary: &Binary,
    map: &[BbFunction],
    aliases: &[AliasSet],
    executed: &[(u64, u64)],
    jumps: &[(u64, u64, u64)],
    profile: &Profile,
    params: &Params,
) -> Result<Plan, Error> {
    let mut name_count: HashMap<&str, usize> = HashMap::new();
    for f in &binary.functions {
        *name_count.entry(f.key.name.as_str()).or_insert(0) += 1;
    }
    let mut stats = Stats {
        mapped: map.len(),
        ..Stats::default()
    };
    // (function, its symbol, block counts) of every function that may be listed.
    let mut candidates = Vec::new();
    for f in map {
        let Some(symbol) = binary
            .function_at(f.address)
            .filter(|s| s.address == f.address)
        else {
            stats.unnamed += 1;
            continue;
        };
        let counts: Vec<u64> = f
            .blocks
            .iter()
            .map(|b| count_at(executed, f.address.saturating_add(b.offset)))
            .collect();
        if counts.iter().all(|&c| c < params.min_count) {
            continue;
        }
        let name = symbol.key.name.as_str();
        if !is_safe_symbol(name) {
            stats.unsafe_names += 1;
            continue;
        }
        if name_count.get(name).copied().unwrap_or(0) > 1 {
            stats.ambiguous += 1;
            continue;
        }
        let set = aliases
            .binary_search_by_key(&f.address, |a| a.address)
            .ok()
            .map(|i| &aliases[i]);
        let compiled = compiled_name(name, set);
        if !is_safe_symbol(compiled) {
            stats.unsafe_names += 1;
            continue;
        }
        let compiled = compiled.to_string();
        candidates.push((f, symbol, compiled, counts));
    }
    // The very hot threshold, over the blocks of every listed function.
    let very_hot = (params.hot_coverage > 0).then(|| {
        let weights: Vec<(u64, u64)> = candidates
            .iter()
            .flat_map(|(f, _, _, counts)| {
                f.blocks
                    .iter()
                    .zip(counts)
                    .filter(|(_, &c)| c >= params.min_count)
                    .map(|(b, &c)| (c, b.size))
            })
            .collect();
        hot_threshold(&weights, params.hot_coverage)
    });
    stats.very_hot_min = very_hot;
    let mut functions = Vec::new();
    for (f, symbol, compiled, counts) in candidates {
        let mut tiers: Vec<Option<u8>> = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| match very_hot {
                _ if c < params.min_count && i > 0 => None,
                Some(t) if c >= t => Some(0),
                Some(_) => Some(1),
                None => Some(0),
            })
            .collect();
        same_section_for_landing_pads(f, &counts, &mut tiers);
        let (clusters, cold_blocks, cold_bytes) =
            plan_function(f, &counts, &tiers, jumps, params.keep_block_order)?;
        stats.listed += 1;
        if cold_blocks > 0 {
            stats.split += 1;
        }
        functions.push(FunctionPlan {
            key: symbol.key.clone(),
            symbol: compiled,
            address: f.address,
            hot_bytes: clusters.iter().map(|c| c.bytes).sum(),
            clusters,
            cold_blocks,
            cold_bytes,
        });
    }
    let order = function_order(profile, &functions, params)?;
    Ok(Plan {
        functions,
        order,
        stats,
    })
}

/// The name the compiler gave the function a symbol table names `name`, given the names at
/// its address (`aliases`; `None` when `name` is the only one). The binary's DWARF names it
/// when it has DWARF ([`AliasSet::compiled`]): clang compiles a derived class's destructor
/// whose body is empty as an alias of its base class's (`_ZN7DerivedD2Ev` at the address of
/// `_ZN4BaseD2Ev`, the function compiled). Otherwise the names decide: C++ compilers define
/// a complete-object constructor or destructor (`C1`, `D1` in the Itanium mangling) that does
/// the same as the base-object one (`C2`, `D2`; a class without virtual bases) as an alias of
/// it: clang's `-mconstructor-aliases` (its default on Linux) and GCC alike compile the
/// base-object one and name its split parts after it (`_ZN1SD2Ev.cold`), while a symbol table
/// that keeps one name per address may keep `D1`. So when `name` has a `C1` or `D1` whose
/// `C2`/`D2` spelling is among the aliases, that spelling; otherwise `name`. Only names present
/// at the address are returned, so a `D1` that is a function of its own (a class with virtual
/// bases) keeps its name.
pub fn compiled_name<'a>(name: &'a str, aliases: Option<&'a AliasSet>) -> &'a str {
    let Some(set) = aliases else {
        return name;
    };
    if let Some(compiled) = &set.compiled {
        return compiled;
    }
    if !name.starts_with("_Z") {
        return name;
    }
    for (i, _) in name.match_indices(['C', 'D']) {
        if name.as_bytes().get(i + 1) != Some(&b'1') {
            continue;
        }
        let base = format!("{}{}2{}", &name[..i], &name[i..=i], &name[i + 2..]);
        if let Ok(k) = set.names.binary_search(&base) {
            return &set.names[k];
        }
    }
    name
}

/// The smallest block count `t` such that the blocks run at least `t` times hold `coverage`
/// (in 1/10000) of the executed code bytes, sum of count x size over `weights` (count, size).
/// Greedy by count: the densest code first, which is what minimizes the lines holding a share
/// of the executed code. Ties do not matter: the result is a count, not a set. 0 for no weight.
pub fn hot_threshold(weights: &[(u64, u64)], coverage: u32) -> u64 {
    let mut w: Vec<(u64, u64)> = weights.to_vec();
    w.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
    let total: u128 = w.iter().map(|&(c, s)| u128::from(c) * u128::from(s)).sum();
    let want = total * u128::from(coverage.min(10_000)) / 10_000;
    let mut sum = 0u128;
    for &(c, s) in &w {
        sum += u128::from(c) * u128::from(s);
        if sum >= want {
            return c;
        }
    }
    w.last().map_or(0, |l| l.0)
}

/// Puts every exception landing pad of a function in the cluster of its most executed pad,
/// when its pads would otherwise land in different sections. Clang needs a function's landing
/// pads in one section (the call-site table is relative to one landing-pad base): when a list
/// puts them in two (a pad that ran in training beside one that never ran), it moves them all
/// to a section of their own (`.text.eh.name`, symbol `name.eh`), which no order names, so a
/// pad that ran would end up after the cold parts. A function whose pads all stay cold, or
/// all share one cluster, is left alone.
fn same_section_for_landing_pads(f: &BbFunction, counts: &[u64], tiers: &mut [Option<u8>]) {
    let pads: Vec<usize> = (0..f.blocks.len())
        .filter(|&i| f.blocks[i].is_eh_pad())
        .collect();
    let Some(&first) = pads.first() else { return };
    if pads.iter().all(|&i| tiers[i] == tiers[first]) {
        return;
    }
    // The most executed pad (the first of equals): it ran, since the tiers differ.
    let hottest = pads.iter().copied().fold(
        first,
        |best, i| if counts[i] > counts[best] { i } else { best },
    );
    let tier = tiers[hottest];
    for &i in &pads {
        tiers[i] = tier;
    }
}

/// Execution count of the instruction at `address` (0 when it never ran).
fn count_at(executed: &[(u64, u64)], address: u64) -> u64 {
    executed
        .binary_search_by_key(&address, |e| e.0)
        .map_or(0, |i| executed[i].1)
}

/// The listed clusters (the entry block's tier first), the cold block count and cold bytes of
/// one function. `tiers[i]` is block i's tier, `None` for a cold block; block 0 must be listed.
fn plan_function(
    f: &BbFunction,
    counts: &[u64],
    tiers: &[Option<u8>],
    jumps: &[(u64, u64, u64)],
    keep_order: bool,
) -> Result<(Vec<Cluster>, usize, u64), Error> {
    let n = f.blocks.len();
    let edges = block_edges(f, counts, jumps);
    let entry_tier = tiers[0].unwrap_or(0);
    let mut clusters = Vec::new();
    for tier in std::iter::once(entry_tier).chain((0..2).filter(|&t| t != entry_tier)) {
        let members: Vec<usize> = (0..n)
            .filter(|&i| tiers[i] == Some(tier) || (i == 0 && tier == entry_tier))
            .collect();
        if members.is_empty() {
            continue;
        }
        // Members ascend, so the entry block (0) is first when it is in this cluster.
        let order = if keep_order {
            members.clone()
        } else {
            layout_cluster(&members, f, counts, &edges, clusters.is_empty())?
        };
        clusters.push(Cluster {
            ids: order.iter().map(|&i| f.blocks[i].id).collect(),
            bytes: members.iter().map(|&i| f.blocks[i].size).sum(),
            tier,
        });
    }
    let listed: usize = clusters.iter().map(|c| c.ids.len()).sum();
    let all: u64 = f.blocks.iter().map(|b| b.size).sum();
    let hot: u64 = clusters.iter().map(|c| c.bytes).sum();
    Ok((clusters, n - listed, all - hot))
}

/// The block graph of one function as (from, to, count) over map indices: callgrind's taken
/// jumps (site in block a, target the start of block b), plus the estimated fall-throughs (a
/// block's count minus its taken jumps, to the next block, when it can fall through).
fn block_edges(
    f: &BbFunction,
    counts: &[u64],
    jumps: &[(u64, u64, u64)],
) -> Vec<(usize, usize, u64)> {
    let n = f.blocks.len();
    let start = |i: usize| f.address.saturating_add(f.blocks[i].offset);
    let end = |i: usize| start(i).saturating_add(f.blocks[i].size);
    // Blocks are in address order (zero-size blocks share the next one's start), so both
    // lookups are binary searches. The block holding an address: the last one starting at or
    // below it, if it covers it.
    let block_at = |a: u64| {
        let i = f
            .blocks
            .partition_point(|b| f.address.saturating_add(b.offset) <= a);
        let i = i.checked_sub(1)?;
        (a < end(i)).then_some(i)
    };
    // The non-empty block starting at an address.
    let block_starting = |a: u64| {
        let i = f
            .blocks
            .partition_point(|b| f.address.saturating_add(b.offset) < a);
        (i..n)
            .take_while(|&i| start(i) == a)
            .find(|&i| f.blocks[i].size > 0)
    };
    let mut taken = vec![0u64; n];
    let mut edges = Vec::new();
    let (lo, hi) = (start(0), end(n - 1));
    let first = jumps.partition_point(|j| j.0 < lo);
    for &(site, target, count) in jumps[first..].iter().take_while(|j| j.0 < hi) {
        let Some(a) = block_at(site) else { continue };
        taken[a] = taken[a].saturating_add(count);
        if let Some(b) = block_starting(target) {
            edges.push((a, b, count));
        }
    }
    for i in 0..n.saturating_sub(1) {
        let through = counts[i].saturating_sub(taken[i]);
        if f.blocks[i].can_fall_through() && through > 0 {
            edges.push((i, i + 1, through));
        }
    }
    edges
}

/// ExtTSP's order of the blocks `members` (map indices, ascending) over the edges between
/// them, as map indices. With `entry_first` the first member (the entry block) starts the
/// order, and ExtTSP lays the others out around that ([`ExtTspLayoutParams::entry_first`]: no
/// chain goes before the entry's, so the entry keeps the fall-through it was chosen for).
fn layout_cluster(
    members: &[usize],
    f: &BbFunction,
    counts: &[u64],
    edges: &[(usize, usize, u64)],
    entry_first: bool,
) -> Result<Vec<usize>, Error> {
    let node_of = |i: usize| members.binary_search(&i).ok().map(|v| v as u32);
    let edges: Vec<EdgeCount> = edges
        .iter()
        .filter_map(|&(a, b, count)| {
            Some(EdgeCount {
                src: node_of(a)?,
                dst: node_of(b)?,
                count,
            })
        })
        .collect();
    let sizes: Vec<u64> = members.iter().map(|&i| f.blocks[i].size.max(1)).collect();
    let node_counts: Vec<u64> = members.iter().map(|&i| counts[i]).collect();
    let params = ExtTspLayoutParams {
        entry_first,
        ..ExtTspLayoutParams::default()
    };
    let mut layout = ext_tsp_layout(&sizes, &node_counts, &edges, &params)?;
    if entry_first && layout.first() != Some(&0) {
        // An entry block ExtTSP never saw (no count, no edge) is laid out last: move it up.
        layout.retain(|&v| v != 0);
        layout.insert(0, 0);
    }
    Ok(layout.iter().map(|&v| members[v as usize]).collect())
}

/// The symbol clang 16 gives cluster `k` of function `name`: the function itself for the first
/// cluster, `name.__part.k` for the others.
pub fn part_name(name: &str, k: usize) -> String {
    if k == 0 {
        name.to_string()
    } else {
        format!("{name}{PART_INFIX}{k}")
    }
}

/// The function a part symbol belongs to: `f` for `f.__part.N`, the name itself otherwise.
pub fn part_parent(name: &str) -> &str {
    match name.rsplit_once(PART_INFIX) {
        Some((f, n)) if !f.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            f
        }
        _ => name,
    }
}

/// What clang 16 puts between a function's name and the number of its extra clusters' symbols.
pub const PART_INFIX: &str = ".__part.";

/// Very hot parts, warm parts (each in the function-level algorithm's order, run on the
/// profile with every split function's size replaced by that tier's bytes), then cold parts.
fn function_order(
    profile: &Profile,
    functions: &[FunctionPlan],
    params: &Params,
) -> Result<FunctionOrder, Error> {
    let split: HashMap<&FuncKey, &FunctionPlan> = functions.iter().map(|f| (&f.key, f)).collect();
    let tier_order = |tier: u8| -> Result<FunctionOrder, Error> {
        let mut p = profile.clone();
        for f in &mut p.functions {
            if let Some(plan) = split.get(&f.key) {
                let bytes: u64 = plan
                    .clusters
                    .iter()
                    .filter(|c| c.tier == tier)
                    .map(|c| c.bytes)
                    .sum();
                f.size = Some(bytes.max(1));
            }
        }
        Ok(order_profile(&p, params.algorithm)?)
    };
    let mut order = tier_order(0)?;
    let (first, mut cold): (Vec<FuncKey>, Vec<FuncKey>) = order
        .functions
        .into_iter()
        .partition(|k| !k.name.ends_with(COLD_SUFFIX));
    // The parts of one tier, in the order `keys` gives their functions. Functions Sediment
    // did not plan (no block map, or skipped) stay whole in tier 0.
    let parts = |keys: &[FuncKey], tier: u8| -> Vec<FuncKey> {
        let mut out = Vec::new();
        for k in keys {
            let Some(plan) = split.get(k) else {
                if tier == 0 && !k.name.ends_with(COLD_SUFFIX) {
                    out.push(k.clone());
                }
                continue;
            };
            for (i, c) in plan.clusters.iter().enumerate() {
                if c.tier == tier {
                    // The first cluster keeps the function's symbol: the profile's name for
                    // it (an alias of the compiled name finds the same section).
                    let name = if i == 0 {
                        k.name.clone()
                    } else {
                        part_name(&plan.symbol, i)
                    };
                    out.push(FuncKey {
                        name,
                        file: k.file.clone(),
                    });
                }
            }
        }
        out
    };
    let mut placed = parts(&first, 0);
    if functions
        .iter()
        .any(|f| f.clusters.iter().any(|c| c.tier == 1))
    {
        placed.extend(parts(&tier_order(1)?.functions, 1));
    }
    let mut split_cold = Vec::new();
    for k in &first {
        if let Some(f) = split.get(k).filter(|f| f.cold_blocks > 0) {
            split_cold.push(FuncKey {
                name: format!("{}{COLD_SUFFIX}", f.symbol),
                file: k.file.clone(),
            });
        }
    }
    // A name can be both (GCC's own `.cold` and a planned split): keep its first place.
    split_cold.retain(|k| !cold.contains(k));
    cold.splice(0..0, split_cold);
    placed.extend(cold);
    order.functions = placed;
    order.meta.insert(
        "blocks".into(),
        format!(
            "split={},min-count={},hot-coverage={}",
            functions.iter().filter(|f| f.cold_blocks > 0).count(),
            params.min_count,
            params.hot_coverage
        ),
    );
    Ok(order)
}

/// The `-fbasic-block-sections=list=FILE` text (version 0 format, read by clang 14 to 17): per
/// listed function, `!name` and one `!!` line of block ids per cluster, the entry's first. A
/// function whose compiled name differs from its symbol's ([`FunctionPlan::symbol`]) is
/// `!compiled/symbol`: clang takes the names after the first as aliases of it.
pub fn list_file(plan: &Plan) -> String {
    let mut out = String::new();
    for f in &plan.functions {
        if f.symbol == f.key.name {
            let _ = writeln!(out, "!{}", f.key.name);
        } else {
            let _ = writeln!(out, "!{}/{}", f.symbol, f.key.name);
        }
        for c in &f.clusters {
            out.push_str("!!");
            for (i, id) in c.ids.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{id}");
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sediment_elf::{BbEntry, Segment, Symbol};
    use sediment_profile::{Meta, ProfileBuilder};

    fn binary(names: &[(&str, u64, u64)]) -> Binary {
        Binary {
            build_id: None,
            arch: "x86_64".into(),
            segments: vec![Segment {
                vaddr: 0x1000,
                offset: 0x1000,
                file_size: 0x1000,
                mem_size: 0x1000,
                flags: 5,
            }],
            functions: names
                .iter()
                .map(|&(n, address, size)| Symbol {
                    key: FuncKey::global(n),
                    address,
                    size,
                })
                .collect(),
            from_dynsym: false,
            plt: Vec::new(),
        }
    }

    fn block(id: u32, offset: u64, size: u64, falls: bool) -> BbEntry {
        BbEntry {
            id,
            offset,
            size,
            metadata: if falls { 8 } else { 1 },
        }
    }

    fn profile(names: &[(&str, u64)], calls: &[(&str, &str, u64)]) -> Profile {
        let mut b = ProfileBuilder::new(Meta {
            binary: "app".into(),
            ..Meta::default()
        });
        for &(n, w) in names {
            b.add_self(&FuncKey::global(n), w);
        }
        for &(a, c, w) in calls {
            b.add_call(&FuncKey::global(a), &FuncKey::global(c), w);
        }
        b.build()
    }

    /// A binary, its block map, executed instructions and jumps.
    type Fixture = (
        Binary,
        Vec<BbFunction>,
        Vec<(u64, u64)>,
        Vec<(u64, u64, u64)>,
    );

    // A loop: entry 0 falls into 1, 1 jumps to 3 (hot), 2 is the never-run error path, 3 jumps
    // back to 1. Hot blocks 0, 1, 3 in one cluster; 3 follows 1 (its jump target); 2 is cold.
    fn looping() -> Fixture {
        let b = binary(&[("work", 0x1100, 0x40), ("main", 0x1200, 0x10)]);
        let map = vec![
            BbFunction {
                address: 0x1100,
                blocks: vec![
                    block(0, 0, 4, true),
                    block(1, 4, 8, true),
                    block(2, 12, 16, false),
                    block(3, 28, 8, true),
                    block(4, 36, 4, false),
                ],
            },
            BbFunction {
                address: 0x1200,
                blocks: vec![block(0, 0, 16, false)],
            },
        ];
        let executed = vec![
            (0x1100, 1),
            (0x1104, 100),
            (0x110a, 100),
            (0x111c, 100),
            (0x1120, 100),
            (0x1124, 1),
            (0x1200, 1),
        ];
        let jumps = vec![(0x110a, 0x111c, 100), (0x1120, 0x1104, 99)];
        (b, map, executed, jumps)
    }

    #[test]
    fn hot_loop_blocks_stay_cold_path_leaves() {
        let (b, map, executed, jumps) = looping();
        let prof = profile(&[("work", 400), ("main", 1)], &[("main", "work", 1)]);
        let p = plan(&b, &map, &[], &executed, &jumps, &prof, &Params::default()).unwrap();
        assert_eq!(p.functions.len(), 2);
        assert_eq!(p.functions[0].clusters[0].ids, vec![0, 1, 3, 4]);
        assert_eq!(p.functions[0].cold_blocks, 1);
        assert_eq!(p.functions[0].cold_bytes, 16);
        assert_eq!(p.functions[1].cold_blocks, 0);
        assert_eq!(list_file(&p), "!work\n!!0 1 3 4\n!main\n!!0\n");
        // Hot parts first (C3: the caller before its callee), then the one cold part.
        let names: Vec<&str> = p.order.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec!["main", "work", "work.cold"]);
        assert_eq!(p.stats.split, 1);
    }

    // An entry block that usually jumps over a rarely run block (which returns): ExtTSP puts
    // the jump's target right after the entry; keep_block_order keeps the compiler's order (ids ascend).
    #[test]
    fn keep_block_order_keeps_the_compilers_layout() {
        let b = binary(&[("work", 0x1100, 0x14)]);
        let map = vec![BbFunction {
            address: 0x1100,
            blocks: vec![
                block(0, 0, 4, true),
                block(1, 4, 8, false),
                block(2, 12, 8, false),
            ],
        }];
        let executed = vec![(0x1100, 101), (0x1102, 101), (0x1104, 1), (0x110c, 100)];
        let jumps = vec![(0x1102, 0x110c, 100)];
        let prof = profile(&[("work", 400)], &[]);
        let p = plan(&b, &map, &[], &executed, &jumps, &prof, &Params::default()).unwrap();
        assert_eq!(list_file(&p), "!work\n!!0 2 1\n");
        let keep = Params {
            keep_block_order: true,
            ..Params::default()
        };
        let p = plan(&b, &map, &[], &executed, &jumps, &prof, &keep).unwrap();
        assert_eq!(list_file(&p), "!work\n!!0 1 2\n");
    }

    // A destructor whose symbol is the complete-object `D1`, an alias of the base-object `D2`
    // the compiler compiled: the list names `D2` with `D1` as its alias, the order keeps the
    // profile's `D1` for the first cluster and names the parts after `D2`.
    #[test]
    fn complete_object_destructor_alias_names_the_base_object_parts() {
        let (mut b, map, executed, jumps) = looping();
        b.functions[0].key.name = "_ZN1SD1Ev".into();
        let aliases = vec![AliasSet {
            address: 0x1100,
            names: vec!["_ZN1SD1Ev".to_string(), "_ZN1SD2Ev".to_string()],
            compiled: None,
        }];
        let prof = profile(
            &[("_ZN1SD1Ev", 400), ("main", 1)],
            &[("main", "_ZN1SD1Ev", 1)],
        );
        let params = Params {
            hot_coverage: 9_000,
            ..Params::default()
        };
        let p = plan(&b, &map, &aliases, &executed, &jumps, &prof, &params).unwrap();
        assert_eq!(p.functions[0].symbol, "_ZN1SD2Ev");
        assert_eq!(
            list_file(&p),
            "!_ZN1SD2Ev/_ZN1SD1Ev\n!!0 4\n!!1 3\n!main\n!!0\n"
        );
        let names: Vec<&str> = p.order.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["_ZN1SD2Ev.__part.1", "main", "_ZN1SD1Ev", "_ZN1SD2Ev.cold"]
        );
        // Without the alias in the table the name stays.
        let p = plan(&b, &map, &[], &executed, &jumps, &prof, &params).unwrap();
        assert_eq!(p.functions[0].symbol, "_ZN1SD1Ev");
    }

    // Only a C1/D1 whose C2/D2 spelling is at the same address is renamed, unless the DWARF
    // names the compiled function.
    #[test]
    fn compiled_name_needs_the_base_object_alias() {
        let set = |v: &[&str], compiled: Option<&str>| AliasSet {
            address: 0x1000,
            names: v.iter().map(|s| s.to_string()).collect(),
            compiled: compiled.map(str::to_string),
        };
        let a = set(&["_ZN3FooC1Ei", "_ZN3FooC2Ei"], None);
        assert_eq!(compiled_name("_ZN3FooC1Ei", Some(&a)), "_ZN3FooC2Ei");
        let a = set(&["_ZN5ArD1D1Ev", "_ZN5ArD1D2Ev"], None);
        assert_eq!(compiled_name("_ZN5ArD1D1Ev", Some(&a)), "_ZN5ArD1D2Ev");
        let a = set(&["_ZN3FooD0Ev", "_ZN3FooD1Ev"], None);
        assert_eq!(compiled_name("_ZN3FooD1Ev", Some(&a)), "_ZN3FooD1Ev");
        let a = set(&["__libc_malloc", "malloc"], None);
        assert_eq!(compiled_name("malloc", Some(&a)), "malloc");
        assert_eq!(compiled_name("_ZN3FooD1Ev", None), "_ZN3FooD1Ev");
        // A derived class's destructor that is an alias of its base class's: the names alone
        // point at the derived D2, the DWARF at the base D2 clang compiled.
        let names = ["_ZN2CmD1Ev", "_ZN2CmD2Ev", "_ZN4NodeD1Ev", "_ZN4NodeD2Ev"];
        assert_eq!(
            compiled_name("_ZN2CmD1Ev", Some(&set(&names, None))),
            "_ZN2CmD2Ev"
        );
        let a = set(&names, Some("_ZN4NodeD2Ev"));
        assert_eq!(compiled_name("_ZN2CmD1Ev", Some(&a)), "_ZN4NodeD2Ev");
    }

    // Landing pads stay in one section: a pad that ran takes the one that never ran into its
    // cluster (clang would otherwise move both to a `.eh` section no order names); pads that
    // all never ran stay cold together.
    #[test]
    fn landing_pads_share_a_cluster() {
        let b = binary(&[("f", 0x1100, 0x20)]);
        let pad = |id: u32, offset: u64| BbEntry {
            id,
            offset,
            size: 8,
            metadata: 4,
        };
        let map = vec![BbFunction {
            address: 0x1100,
            blocks: vec![
                block(0, 0, 8, false),
                pad(1, 8),
                pad(2, 16),
                block(3, 24, 8, false),
            ],
        }];
        let prof = profile(&[("f", 10)], &[]);
        let executed = vec![(0x1100, 10), (0x1108, 3)];
        let p = plan(&b, &map, &[], &executed, &[], &prof, &Params::default()).unwrap();
        assert_eq!(list_file(&p), "!f\n!!0 1 2\n");
        assert_eq!(p.functions[0].cold_blocks, 1);
        let executed = vec![(0x1100, 10), (0x1118, 3)];
        let p = plan(&b, &map, &[], &executed, &[], &prof, &Params::default()).unwrap();
        assert_eq!(list_file(&p), "!f\n!!0 3\n");
    }

    // A higher threshold makes a rarely run block cold too.
    #[test]
    fn min_count_moves_rare_blocks_out() {
        let (b, map, executed, jumps) = looping();
        let prof = profile(&[("work", 400)], &[]);
        let params = Params {
            min_count: 2,
            ..Params::default()
        };
        let p = plan(&b, &map, &[], &executed, &jumps, &prof, &params).unwrap();
        // main ran once: below the threshold, not listed; block 4 ran once: cold.
        assert_eq!(list_file(&p), "!work\n!!0 1 3\n");
    }

    // Names outside the safe set and names defined twice are never listed.
    #[test]
    fn unsafe_and_ambiguous_names_are_skipped() {
        let (mut b, map, executed, jumps) = looping();
        b.functions[0].key.name = "work\n!evil".into();
        b.functions.push(Symbol {
            key: FuncKey::local("main", "other.c"),
            address: 0x1300,
            size: 4,
        });
        let prof = profile(&[("main", 1)], &[]);
        let p = plan(&b, &map, &[], &executed, &jumps, &prof, &Params::default()).unwrap();
        assert_eq!(list_file(&p), "");
        assert_eq!((p.stats.unsafe_names, p.stats.ambiguous), (1, 1));
    }

    // Without a block map (GCC), GCC's own `.cold` parts go after every hot function.
    #[test]
    fn gcc_cold_parts_go_last() {
        let b = binary(&[("a", 0x1100, 4)]);
        let prof = profile(
            &[("a", 10), ("a.cold", 5), ("b", 8)],
            &[("a", "a.cold", 5), ("a", "b", 8)],
        );
        let p = plan(&b, &[], &[], &[], &[], &prof, &Params::default()).unwrap();
        let names: Vec<&str> = p.order.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names.last(), Some(&"a.cold"));
        assert_eq!(names.len(), 3);
    }

    // With a very hot share, the loop (blocks 1 and 3, run 100 times) becomes its own part,
    // placed before every warm part; the entry and exit blocks (run once) stay with the symbol.
    #[test]
    fn very_hot_blocks_get_their_own_part() {
        let (b, map, executed, jumps) = looping();
        let prof = profile(&[("work", 400), ("main", 1)], &[("main", "work", 1)]);
        let params = Params {
            hot_coverage: 9_000,
            ..Params::default()
        };
        let p = plan(&b, &map, &[], &executed, &jumps, &prof, &params).unwrap();
        assert_eq!(list_file(&p), "!work\n!!0 4\n!!1 3\n!main\n!!0\n");
        let tiers: Vec<u8> = p.functions[0].clusters.iter().map(|c| c.tier).collect();
        assert_eq!(tiers, vec![1, 0]);
        let names: Vec<&str> = p.order.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec!["work.__part.1", "main", "work", "work.cold"]);
        assert_eq!(p.functions[0].hot_bytes, 24);
    }

    // The threshold is the count of the last block needed, densest first, to reach the share.
    #[test]
    fn threshold_takes_the_densest_blocks_first() {
        // count x size, densest first: 1000, 500, 400, 100 of 2000 in all.
        let w = [(10, 40), (100, 10), (50, 10), (1, 100)];
        assert_eq!(hot_threshold(&w, 5_000), 100);
        assert_eq!(hot_threshold(&w, 7_500), 50);
        assert_eq!(hot_threshold(&w, 9_500), 10);
        assert_eq!(hot_threshold(&w, 9_600), 1);
        assert_eq!(hot_threshold(&w, 10_000), 1);
        assert_eq!(hot_threshold(&[], 9_900), 0);
    }

    #[test]
    fn part_names_round_trip() {
        assert_eq!(part_name("f", 0), "f");
        assert_eq!(part_name("f", 2), "f.__part.2");
        assert_eq!(part_parent("f.__part.2"), "f");
        assert_eq!(part_parent("f.__part.x"), "f.__part.x");
        assert_eq!(part_parent(".__part.1"), ".__part.1");
        assert_eq!(part_parent("f.cold"), "f.cold");
    }

    proptest::proptest! {
        // Any counts, any share: the clusters partition the listed blocks, the entry block
        // leads the first cluster, every hot part is ordered before every cold part, and the
        // same input gives the same plan.
        #[test]
        fn clusters_partition_the_listed_blocks(
            counts in proptest::collection::vec(0u64..50, 1..12),
            coverage in 0u32..=10_000,
            min_count in 1u64..4,
        ) {
            let n = counts.len() as u64;
            let b = binary(&[("f", 0x1100, 8 * n)]);
            let map = vec![BbFunction {
                address: 0x1100,
                blocks: (0..n).map(|i| block(i as u32, 8 * i, 8, true)).collect(),
            }];
            let executed: Vec<(u64, u64)> = counts
                .iter()
                .enumerate()
                .map(|(i, &c)| (0x1100 + 8 * i as u64, c))
                .filter(|e| e.1 > 0)
                .collect();
            let prof = profile(&[("f", 10)], &[]);
            let params = Params { min_count, hot_coverage: coverage, ..Params::default() };
            let p = plan(&b, &map, &[], &executed, &[], &prof, &params).unwrap();
            proptest::prop_assert_eq!(&p, &plan(&b, &map, &[], &executed, &[], &prof, &params).unwrap());
            let Some(f) = p.functions.first() else {
                proptest::prop_assert!(counts.iter().all(|&c| c < min_count));
                return Ok(());
            };
            proptest::prop_assert_eq!(f.clusters[0].ids[0], 0);
            proptest::prop_assert!(f.clusters.len() <= 2);
            let mut ids: Vec<u32> = f.clusters.iter().flat_map(|c| c.ids.clone()).collect();
            ids.sort_unstable();
            let want: Vec<u32> = (0..n as u32)
                .filter(|&i| i == 0 || counts[i as usize] >= min_count)
                .collect();
            proptest::prop_assert_eq!(ids, want);
            let names: Vec<&str> = p.order.functions.iter().map(|k| k.name.as_str()).collect();
            let cold = names.iter().position(|n| n.ends_with(".cold")).unwrap_or(names.len());
            proptest::prop_assert_eq!(names.len(), f.clusters.len() + usize::from(f.cold_blocks > 0));
            proptest::prop_assert!(names[..cold].iter().all(|n| part_parent(n) == "f"));
        }
    }

    // Same inputs, same plan.
    #[test]
    fn deterministic() {
        let (b, map, executed, jumps) = looping();
        let prof = profile(&[("work", 400), ("main", 1)], &[("main", "work", 1)]);
        let a = plan(&b, &map, &[], &executed, &jumps, &prof, &Params::default()).unwrap();
        let c = plan(&b, &map, &[], &executed, &jumps, &prof, &Params::default()).unwrap();
        assert_eq!(a, c);
    }
}
