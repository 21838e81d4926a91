//! Importer for valgrind callgrind output (`callgrind.out.PID`): one [`Profile`] per object.
//!
//! The format is specified in the Valgrind manual, chapter "Callgrind Format Specification"
//! (`docs/manual/cl-format.html`, format version 1). A file is a list of *parts* (one per
//! dump; `--combine-dumps=yes` or `--dump-every-bb` put several in one file, and
//! `--separate-threads=yes` writes one file per thread). Each part is a header of `key: value`
//! lines followed by a body:
//!
//! - `positions: instr line` names the *subposition* columns that open every cost line
//!   (default `line`; `--dump-instr=yes` gives `instr line`), and `events: Ir ...` names the
//!   counter columns after them. A missing trailing counter is zero.
//! - `ob=`, `fl=`, `fi=`/`fe=` and `fn=` set the object, source file, inlined-code file and
//!   function that the following cost lines belong to. `cob=`, `cfi=`/`cfl=` and `cfn=` name
//!   the target of the next `calls=` line.
//! - **Name compression**: `fn=(7) main` defines id 7 and a later `fn=(7)` or `cfn=(7)` refers
//!   to it. There are three id spaces, matching what callgrind writes and KCachegrind reads:
//!   objects (`ob`, `cob`), files (`fl`, `fi`, `fe`, `cfi`, `cfl`, `jfi`) and functions (`fn`,
//!   `cfn`, `jfn`, `frfn`). A definition holds to the end of the file (a later part may
//!   define the id again); ids never carry over to another file.
//! - A cost line is the subpositions, each an absolute number (decimal or `0x` hex), `+N` or
//!   `-N` relative to the previous cost line, or `*` (unchanged), then the counters.
//! - `calls=COUNT TARGET` is followed by exactly one cost line whose counters are the
//!   **inclusive** cost of those calls. That cost is already counted in the callee's own cost
//!   lines, so it must not be added to the caller (doing so would count every callee twice).
//! - `jump=` / `jcnd=` (with `--collect-jumps=yes`) carry no cost. Each is followed by a line
//!   holding only the jump's position (its site); [`instr_counts`] keeps (site, target, times
//!   taken) for block-level layout.
//! - `totals:` closes a part with the sum of its cost lines; callgrind always writes it.
//!
//! What the importer makes of it: a function is `(object, fn name, fl base name)`. Its self
//! weight is the sum of the first event (`Ir`, instructions executed) over its cost lines, and
//! an edge `caller -> callee` weighs the exact call count summed over call sites, parts and
//! input files. An edge is kept only when both ends are in the same object: a profile
//! describes one binary, and a call into `libc.so.6` cannot be laid out by the executable's
//! linker. The callee still appears (possibly with zero weight) in its own object's profile.
//! The `fl=` base name goes into [`FuncKey::file`] as a *hint*; `bind` later keeps it only for
//! static functions. `'N` suffixes that callgrind appends to recursive activations
//! (`fib'2`) are dropped, so all levels count for the one function.
//!
//! **Two ways to name a function.** By *name* ([`read`], [`read_all`]): the `fn=` name and the
//! `fl=` hint, later bound to symbols by [`crate::bind`]. That fails for static functions
//! defined in a header (`static inline` helpers, or the demo's `mix` in `unit.h`): every copy
//! has the same `fn=` *and* the same `fl=`, so callgrind itself merges them into one entry and
//! no binding can split them again. By *address* ([`import`]): when the file has instruction
//! positions (`positions: instr line`, from `valgrind --dump-instr=yes`) and the caller supplies
//! the object's binary, each cost line's first-event cost goes to the function symbol containing
//! its instruction address, and each `calls=` to (symbol containing the call's cost line) ->
//! (symbol containing the call target). The keys are then exact, as with perf: the `STT_FILE`
//! base name for locals, sizes from `st_size`. Addresses in no symbol (PLT stubs) are counted as
//! unattributed and stay in `meta total`. Objects without instruction positions or without a
//! binary take the name path, and so do binaries with only `.dynsym` (stripped system
//! libraries): their internal functions have no symbol to attribute to, whereas callgrind's
//! names, read from separate debug information, keep them apart.
//!
//! Decoding positions: a subposition `+N`, `-N` or `*` is relative to the same column of the
//! previous *cost line*. A `calls=` (or `jump=`/`jcnd=`) target is written relative to that
//! position too but does not move it; the cost line after `calls=` (the call site) does. That is
//! what callgrind's writer does (`fprint_apos`/`fprint_fcost` in `callgrind/dump.c`) and what
//! the fixture `calls.instr.out` shows (`0x11a0 ...`, `calls=1000 -32 ...`, `* * 5000`: the
//! target is `b` at 0x1180, the call site stays in `a` at 0x11a0). The previous position starts
//! at 0 in every part. Only the `instr` column is decoded; the others are checked for syntax.
//!
//! Load base: the addresses may be those of the running process. To look them up in the symbol
//! table, [`import`] needs the object's load base. An `ET_EXEC` file is loaded at its link-time
//! addresses (base 0). For anything else the base is voted on ([`find_load_base`]): every `fn=`
//! whose name is a unique global symbol of the binary proposes (lowest address of its cost
//! lines) - (symbol address), rounded down to the page; the most common proposal wins (ties: the
//! smallest), and it must be backed by [`MIN_BASE_VOTES`] functions (or by all, when fewer
//! propose). No base, no address attribution: the object falls back to the name path and is
//! counted in [`Stats::no_base`]. (Valgrind 3.19 prints link-time addresses for objects with a
//! symbol table: it subtracts the text bias, so the vote finds base 0 for the PIEs and shared
//! objects of that version; the vote keeps the importer right for writers that do not.)
//!
//! Names are kept as callgrind prints them. Valgrind demangles C++ and Rust names by default;
//! record with `--demangle=no` to get the symbol-table names the linker orders by.
//! `--separate-callers=N` context names (`a'main`) are not split and stay distinct functions.
//!
//! Hostile input: lines are capped at [`MAX_LINE_LEN`] bytes and compression ids at
//! [`MAX_ID`]; tables grow only with definitions actually present in the text, never from a
//! number read from it; counters add saturating. Every error names the file and line.
//! A file cut short is caught by the missing final newline, by a `calls=` line without its
//! cost line, by a missing `totals:` line in files whose `creator:` is callgrind, or by a
//! `totals:` that disagrees with the sum of the part's cost lines.
//!
//! Turned down: taking `meta total` from `summary:`/`totals:`. Those cover every object of the
//! run, while a profile describes one; each object's total is the sum of its own cost lines,
//! and the headers serve only as the consistency check above.

use crate::bind::{bind, BindReport};
use crate::perf::BinaryResolver;
use crate::Error;
use sediment_elf::Binary;
use sediment_profile::{base_name, quote, FuncKey, Meta, Profile, ProfileBuilder};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Longest accepted line in bytes (C++ template names run to a few KiB; 1 MiB is far beyond).
pub const MAX_LINE_LEN: usize = 1 << 20;
/// Largest accepted name-compression id. Callgrind numbers names densely from 0 or 1 (one id per
/// distinct object, file and function of the run), so real files stay far below this.
pub const MAX_ID: u64 = 10_000_000;

/// Object name callgrind uses for code it could not attribute; also ours when a file has no
/// `ob=` line and no `cmd:` header to name the program.
const UNKNOWN: &str = "???";

/// One callgrind output file held in memory.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Path (or other name) used in error messages.
    pub path: &'a str,
    /// The whole text of the file.
    pub text: &'a str,
}

/// Reads one callgrind output file. Returns one canonical profile per object with cost, sorted
/// by object path.
pub fn read(text: &str, path_for_errors: &str) -> Result<Vec<Profile>, Error> {
    read_all(&[Input {
        path: path_for_errors,
        text,
    }])
}

/// Reads several callgrind output files of one run (for example the per-thread files of
/// `--separate-threads=yes`) and sums them. All files must count the same first event.
/// Returns one canonical profile per object with cost, sorted by object path.
pub fn read_all(inputs: &[Input<'_>]) -> Result<Vec<Profile>, Error> {
    let mut acc = Acc::default();
    for input in inputs {
        FileParser::new(input.path, &mut acc).parse(input.text)?;
    }
    Ok(acc.into_profiles())
}

/// Page size the load base is rounded to. Loaders map objects at page boundaries, and every
/// larger page size (16 KiB, 64 KiB) is a multiple of this one.
pub const PAGE_SIZE: u64 = 4096;

/// Functions that must agree on a load base before it is used (all of them when fewer
/// propose one). Three: one function could be a mismatched name (a symbol of the same name
/// elsewhere), two agreeing by chance is already unlikely, three is the small "a few" that even
/// a tiny program (`main` and two helpers) can supply.
pub const MIN_BASE_VOTES: usize = 3;

/// What [`import`] could and could not do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Objects attributed by instruction address, sorted by path.
    pub by_address: Vec<String>,
    /// Objects bound to their binary by name (no instruction positions, only `.dynsym`, or no
    /// load base).
    pub by_name: Vec<String>,
    /// Objects with instruction positions whose load base could not be established (also in
    /// `by_name`).
    pub no_base: Vec<String>,
    /// Objects with cost whose binary the resolver did not provide (left as read, unbound).
    pub missing_binaries: Vec<String>,
    /// First-event cost at addresses inside no function symbol (PLT stubs, padding), in
    /// objects attributed by address. It stays in their `meta total`.
    pub unattributed_cost: u64,
    /// Calls (counted) whose site or target is inside no function symbol.
    pub unattributed_calls: u64,
    /// Summed over the objects bound by name.
    pub bind: BindReport,
}

/// The result of [`import`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallgrindImport {
    /// One canonical profile per object with cost, sorted by object path. Objects whose binary
    /// was provided carry its build-id and architecture.
    pub profiles: Vec<Profile>,
    /// How each object was attributed, and what was lost.
    pub stats: Stats,
}

/// Reads callgrind output files of one run like [`read_all`], then attributes each object with
/// cost against its binary, which `resolver` provides (asked once per object, in path order,
/// with no build-id: callgrind records none). By instruction address when the object's cost
/// lines have instruction positions and a load base is found, else by name with
/// [`crate::bind::bind`]; objects the resolver does not provide stay as read.
pub fn import(
    inputs: &[Input<'_>],
    resolver: &mut dyn BinaryResolver,
) -> Result<CallgrindImport, Error> {
    import_with_names(inputs, resolver, &mut |name: &str| name.to_string())
}

/// [`import`], with every object name (`ob=`, `cob=`) passed through `object_names` as it is
/// read: names it maps to one string are one object, read and attributed once. The caller
/// maps the spellings of one file (`./lib.so`, `././lib.so`, a symbolic link to it) to one
/// name, so that a stranger's file cannot make the resolver read one binary once per
/// spelling; it is called once per literal name or name definition in the text.
pub fn import_with_names(
    inputs: &[Input<'_>],
    resolver: &mut dyn BinaryResolver,
    object_names: &mut dyn FnMut(&str) -> String,
) -> Result<CallgrindImport, Error> {
    let mut acc = Acc::default();
    for input in inputs {
        let mut parser = FileParser::new(input.path, &mut acc);
        parser.object_names = Some(&mut *object_names);
        parser.parse(input.text)?;
    }
    let mut stats = Stats::default();
    let mut profiles = Vec::new();
    for (object, profile) in acc.name_profiles() {
        let path = profile.meta.binary.clone();
        let bytes = resolver
            .resolve(&path, None)
            .map_err(|message| Error::Resolve {
                binary: quote(&path),
                message,
            })?;
        let Some(bytes) = bytes else {
            stats.missing_binaries.push(path);
            profiles.push(profile);
            continue;
        };
        let elf = Binary::parse(&path, &bytes)?;
        let has_instr = !acc.no_instr.contains(&object) && acc.addr_cost.contains_key(&object);
        // A binary with only `.dynsym` lacks its internal functions: by address their cost
        // would be lost, while callgrind's names (from debug information) at least keep them.
        let base = if has_instr && !elf.from_dynsym {
            acc.load_base(object, &elf, &bytes)
        } else {
            None
        };
        let mut p = match base {
            Some(base) => {
                stats.by_address.push(path);
                acc.address_profile(object, profile.meta, &elf, base, &mut stats)
            }
            None => {
                if has_instr && !elf.from_dynsym {
                    stats.no_base.push(path.clone());
                }
                stats.by_name.push(path);
                let (q, r) = bind(&profile, &elf);
                stats.bind.matched += r.matched;
                stats.bind.unmatched += r.unmatched;
                stats.bind.ambiguous += r.ambiguous;
                stats.bind.unmatched_weight = stats
                    .bind
                    .unmatched_weight
                    .saturating_add(r.unmatched_weight);
                q
            }
        };
        p.meta.build_id = elf.build_id.clone();
        p.meta.arch = Some(elf.arch.clone());
        profiles.push(p);
    }
    Ok(CallgrindImport { profiles, stats })
}

/// Instruction-level counts of one object, at link-time addresses: what block-level layout
/// needs (see [`instr_counts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstrCounts {
    /// The object's path as callgrind names it.
    pub object: String,
    /// (instruction address, times executed), sorted by address. With `--dump-instr=yes` each
    /// cost line is one instruction, so its first event (`Ir`) is its execution count.
    pub executed: Vec<(u64, u64)>,
    /// (site, target, times taken) of jumps and taken conditional branches recorded with
    /// `--collect-jumps=yes`, sorted. Fall-throughs are not recorded by callgrind.
    pub jumps: Vec<(u64, u64, u64)>,
    /// (call instruction, callee address, times called) of calls that stay in the object,
    /// sorted (`calls=` lines with instruction positions; returns are not recorded).
    pub calls: Vec<(u64, u64, u64)>,
}

/// Reads callgrind output files of one run (recorded with `--dump-instr=yes`, ideally with
/// `--collect-jumps=yes`) and returns the instruction-level counts of the object that is
/// `binary` (matched by its path, else by a unique base name), moved to link-time addresses
/// with the load base of [`import`]. `elf` and `bytes` are that binary's.
pub fn instr_counts(
    inputs: &[Input<'_>],
    binary: &str,
    elf: &Binary,
    bytes: &[u8],
) -> Result<InstrCounts, Error> {
    let mut acc = Acc::default();
    for input in inputs {
        FileParser::new(input.path, &mut acc).parse(input.text)?;
    }
    let first = inputs.first().map_or("callgrind input", |i| i.path);
    let fail = |message: String| Error::Format {
        path: first.to_string(),
        message,
    };
    let objects: Vec<u32> = acc.addr_cost.keys().copied().collect();
    let name = |o: u32| acc.strings.names[o as usize].as_str();
    let mut found: Vec<u32> = objects
        .iter()
        .copied()
        .filter(|&o| name(o) == binary)
        .collect();
    if found.is_empty() {
        found = objects
            .iter()
            .copied()
            .filter(|&o| base_name(name(o)) == base_name(binary))
            .collect();
    }
    let object = match found.as_slice() {
        [o] => *o,
        [] => {
            return Err(fail(format!(
                "no instruction-level costs for `{}` (record with valgrind --tool=callgrind --dump-instr=yes)",
                quote(binary)
            )))
        }
        _ => return Err(fail(format!("several objects are named like `{}`", quote(binary)))),
    };
    let base = acc.load_base(object, elf, bytes).ok_or_else(|| {
        fail(format!(
            "cannot establish the load base of `{}`",
            quote(binary)
        ))
    })?;
    let mut executed: Vec<(u64, u64)> = acc.addr_cost[&object]
        .iter()
        .filter_map(|(&a, &c)| Some((a.checked_sub(base)?, c)))
        .collect();
    executed.sort_unstable();
    let mut jumps: Vec<(u64, u64, u64)> = acc
        .addr_jumps
        .get(&object)
        .into_iter()
        .flatten()
        .filter_map(|(&(s, t), &c)| Some((s.checked_sub(base)?, t.checked_sub(base)?, c)))
        .collect();
    jumps.sort_unstable();
    let mut calls: Vec<(u64, u64, u64)> = acc
        .addr_calls
        .get(&object)
        .into_iter()
        .flatten()
        .filter_map(|(&(s, t), &c)| Some((s.checked_sub(base)?, t.checked_sub(base)?, c)))
        .collect();
    calls.sort_unstable();
    Ok(InstrCounts {
        object: name(object).to_string(),
        executed,
        jumps,
        calls,
    })
}

/// Per-instruction counts of the first event (`Ir`) of every object in callgrind output files
/// of one run recorded with `--dump-instr=yes`, at the addresses callgrind wrote (no load base
/// removed), keyed by object name as written in `ob=` lines. Objects without instruction-level
/// costs are absent. `sediment-measure` takes its page and line footprints from these.
pub fn object_instr_costs(
    inputs: &[Input<'_>],
) -> Result<BTreeMap<String, BTreeMap<u64, u64>>, Error> {
    let mut acc = Acc::default();
    for input in inputs {
        FileParser::new(input.path, &mut acc).parse(input.text)?;
    }
    Ok(acc
        .addr_cost
        .iter()
        .map(|(&o, costs)| {
            let counts = costs.iter().map(|(&a, &c)| (a, c)).collect();
            (acc.strings.names[o as usize].clone(), counts)
        })
        .collect())
}

/// The load base voted by functions whose symbol address is known: each candidate is (lowest
/// address of the function's cost lines, link-time address of its symbol). See the module docs
/// for the rule; `None` when no base is backed by [`MIN_BASE_VOTES`] candidates (or by all of
/// them, when fewer).
pub fn find_load_base(candidates: &[(u64, u64)]) -> Option<u64> {
    // BTreeMap: proposals in ascending order, so the first of the most voted is the smallest.
    let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
    for &(lowest, symbol) in candidates {
        if let Some(delta) = lowest.checked_sub(symbol) {
            *votes.entry(delta & !(PAGE_SIZE - 1)).or_insert(0) += 1;
        }
    }
    let mut best: Option<(u64, usize)> = None;
    for (&base, &n) in &votes {
        if best.map_or(true, |(_, m)| n > m) {
            best = Some((base, n));
        }
    }
    let (base, n) = best?;
    (n >= MIN_BASE_VOTES.min(candidates.len())).then_some(base)
}

/// `e_type` of an ELF file (`ET_EXEC` = 2, `ET_DYN` = 3), in the file's byte order.
fn elf_type(bytes: &[u8]) -> Option<u16> {
    let raw: [u8; 2] = bytes.get(16..18)?.try_into().ok()?;
    match (bytes.get(..4)?, bytes.get(5)?) {
        (b"\x7fELF", 1) => Some(u16::from_le_bytes(raw)),
        (b"\x7fELF", 2) => Some(u16::from_be_bytes(raw)),
        _ => None,
    }
}

/// `e_type` of a fixed-address executable.
const ET_EXEC: u16 = 2;

/// Interned strings, so that the hot path (one cost line) works on small integers.
#[derive(Default)]
struct Interner {
    map: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.map.insert(s.to_string(), id);
        id
    }
}

/// A function as the importer keys it: interned object, name and `fl=` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FnRef {
    object: u32,
    name: u32,
    file: u32,
}

/// What all input files add up to.
#[derive(Default)]
struct Acc {
    strings: Interner,
    funcs: HashMap<FnRef, u32>,
    func_list: Vec<FnRef>,
    self_cost: Vec<u64>,
    edges: HashMap<(u32, u32), u64>,
    object_total: HashMap<u32, u64>,
    /// Lowest instruction address of each function's cost lines (`u64::MAX`: none), by the
    /// index of `func_list`; the load-base vote uses it.
    lowest: Vec<u64>,
    /// Per object: instruction address -> first-event cost (cost lines with an address).
    addr_cost: HashMap<u32, HashMap<u64, u64>>,
    /// Per object: (call site, target) -> call count, for calls that stay in the object.
    addr_calls: HashMap<u32, HashMap<(u64, u64), u64>>,
    /// Per object: (jump site, target) -> times taken (`jump=`, and `jcnd=`'s first count).
    addr_jumps: HashMap<u32, HashMap<(u64, u64), u64>>,
    /// Objects with a cost line or call without an instruction position: name path only.
    no_instr: HashSet<u32>,
    /// First event name of the first part read; every later part must agree.
    event: Option<String>,
    /// `cmd:` of the first file that has one.
    cmd: Option<String>,
}

impl Acc {
    fn func(&mut self, f: FnRef) -> u32 {
        if let Some(&i) = self.funcs.get(&f) {
            return i;
        }
        let i = self.func_list.len() as u32;
        self.func_list.push(f);
        self.self_cost.push(0);
        self.lowest.push(u64::MAX);
        self.funcs.insert(f, i);
        i
    }

    fn key(&self, f: FnRef) -> FuncKey {
        let file = &self.strings.names[f.file as usize];
        FuncKey {
            name: self.strings.names[f.name as usize].clone(),
            file: if file.is_empty() || file == UNKNOWN {
                None
            } else {
                Some(base_name(file).to_string())
            },
        }
    }

    fn into_profiles(self) -> Vec<Profile> {
        self.name_profiles().into_iter().map(|(_, p)| p).collect()
    }

    /// The load base of `object` in `elf` (see the module docs); `bytes` are the file's, for
    /// its ELF type.
    fn load_base(&self, object: u32, elf: &Binary, bytes: &[u8]) -> Option<u64> {
        if elf_type(bytes) == Some(ET_EXEC) {
            return Some(0);
        }
        // name -> (number of function symbols of that name, address of the global one).
        let mut symbols: HashMap<&str, (usize, Option<u64>)> = HashMap::new();
        for s in &elf.functions {
            let e = symbols.entry(s.key.name.as_str()).or_insert((0, None));
            e.0 += 1;
            if s.key.file.is_none() {
                e.1 = Some(s.address);
            }
        }
        // One candidate per name (the lowest address over its `fl=` variants); BTreeMap so
        // the candidate list does not depend on hash order.
        let mut lowest: BTreeMap<&str, u64> = BTreeMap::new();
        for (i, f) in self.func_list.iter().enumerate() {
            if f.object != object || self.lowest[i] == u64::MAX {
                continue;
            }
            let name = self.strings.names[f.name as usize].as_str();
            let slot = lowest.entry(name).or_insert(u64::MAX);
            *slot = (*slot).min(self.lowest[i]);
        }
        let candidates: Vec<(u64, u64)> = lowest
            .into_iter()
            .filter_map(|(name, low)| match symbols.get(name) {
                Some(&(1, Some(address))) => Some((low, address)),
                _ => None,
            })
            .collect();
        find_load_base(&candidates)
    }

    /// `object`'s profile attributed by instruction address against `elf` loaded at `base`.
    /// The hash maps' iteration order does not reach the output: the builder sorts, and the
    /// sums commute.
    fn address_profile(
        &self,
        object: u32,
        meta: Meta,
        elf: &Binary,
        base: u64,
        stats: &mut Stats,
    ) -> Profile {
        let mut b = ProfileBuilder::new(meta);
        let symbol = |address: u64| {
            address
                .checked_sub(base)
                .and_then(|a| elf.lookup(a))
                .map(|i| &elf.functions[i])
        };
        let add = |b: &mut ProfileBuilder, s: &sediment_elf::Symbol| {
            b.touch(&s.key);
            if s.size > 0 {
                b.set_size(&s.key, s.size);
            }
        };
        if let Some(costs) = self.addr_cost.get(&object) {
            for (&address, &cost) in costs {
                match symbol(address) {
                    Some(s) => {
                        add(&mut b, s);
                        b.add_self(&s.key, cost);
                        // `symbol` found it, so the address is at or past base + s.address.
                        b.add_sample(&s.key, address - base - s.address, cost);
                    }
                    None => stats.unattributed_cost = stats.unattributed_cost.saturating_add(cost),
                }
            }
        }
        if let Some(calls) = self.addr_calls.get(&object) {
            for (&(site, target), &count) in calls {
                match (symbol(site), symbol(target)) {
                    (Some(caller), Some(callee)) => {
                        add(&mut b, caller);
                        add(&mut b, callee);
                        b.add_call(&caller.key, &callee.key, count);
                    }
                    _ => stats.unattributed_calls = stats.unattributed_calls.saturating_add(count),
                }
            }
        }
        b.build()
    }

    /// Groups functions and edges by object, keyed by name (the `fn=`/`fl=` path). Returns
    /// each object's interned id and profile, sorted by object path. The hash maps' iteration
    /// order does not reach the output: every [`ProfileBuilder`] sorts.
    fn name_profiles(&self) -> Vec<(u32, Profile)> {
        // BTreeMap by object path: the returned list is sorted, whatever the input order.
        let mut builders: BTreeMap<&str, (u32, ProfileBuilder)> = BTreeMap::new();
        for (&object, &total) in &self.object_total {
            if total == 0 {
                continue;
            }
            let mut meta = Meta {
                binary: self.strings.names[object as usize].clone(),
                source: "callgrind".to_string(),
                event: self.event.clone(),
                total,
                ..Meta::default()
            };
            if let Some(cmd) = &self.cmd {
                meta.extra.insert("cmd".to_string(), cmd.clone());
            }
            builders.insert(
                &self.strings.names[object as usize],
                (object, ProfileBuilder::new(meta)),
            );
        }
        for (i, f) in self.func_list.iter().enumerate() {
            let object = self.strings.names[f.object as usize].as_str();
            if let Some((_, b)) = builders.get_mut(object) {
                b.add_self(&self.key(*f), self.self_cost[i]);
            }
        }
        for (&(caller, callee), &count) in &self.edges {
            let (a, c) = (
                self.func_list[caller as usize],
                self.func_list[callee as usize],
            );
            if a.object != c.object {
                continue;
            }
            let object = self.strings.names[a.object as usize].as_str();
            if let Some((_, b)) = builders.get_mut(object) {
                b.add_call(&self.key(a), &self.key(c), count);
            }
        }
        builders
            .into_values()
            .map(|(object, b)| (object, b.build()))
            .collect()
    }
}

/// The three name-compression id spaces.
#[derive(Debug, Clone, Copy)]
enum Space {
    Object = 0,
    File = 1,
    Func = 2,
}

impl Space {
    fn label(self) -> &'static str {
        match self {
            Space::Object => "object",
            Space::File => "file",
            Space::Func => "function",
        }
    }
}

/// Parser state for one input file.
struct FileParser<'p> {
    path: &'p str,
    acc: &'p mut Acc,
    /// Rewrites each object name as it is read ([`import_with_names`]); `None`: kept as written.
    object_names: Option<&'p mut dyn FnMut(&str) -> String>,
    /// Compression id -> interned string, per [`Space`].
    names: [HashMap<u32, u32>; 3],
    line: usize,
    /// Subposition columns per cost line; `None` until the `events:` header of the first part.
    npos: usize,
    nevents: Option<usize>,
    /// True once the current part has a body line (a header line after it opens a new part).
    in_body: bool,
    /// Sum of the first event over the current part's cost lines, for the `totals:` check.
    part_cost: u64,
    part_has_totals: bool,
    /// The creator is callgrind, which always ends a part with `totals:`.
    expect_totals: bool,
    object: Option<u32>,
    fn_file: Option<u32>,
    pos_file: Option<u32>,
    func: Option<u32>,
    /// Index of the current function in [`Acc`], resolved lazily after a context change.
    cur: Option<u32>,
    call_object: Option<u32>,
    call_file: Option<u32>,
    call_func: Option<u32>,
    /// Line of a `calls=` whose inclusive cost line must come next.
    pending_call: Option<usize>,
    /// Column of the `instr` subposition, when `positions:` has one.
    instr_col: Option<usize>,
    /// Instruction address of the previous cost line (relative positions count from it).
    last_instr: u64,
    /// The pending `calls=`, when it stays in its object and has a target address:
    /// (object, target address, count); its site is the next cost line's address.
    pending_target: Option<(u32, u64, u64)>,
    /// The pending `jump=`/`jcnd=` with a target address: (object, target, times taken); its
    /// site is the next cost line's address.
    pending_jump: Option<(u32, u64, u64)>,
}

impl<'p> FileParser<'p> {
    fn new(path: &'p str, acc: &'p mut Acc) -> Self {
        FileParser {
            path,
            acc,
            object_names: None,
            names: Default::default(),
            line: 0,
            npos: 1,
            nevents: None,
            in_body: false,
            part_cost: 0,
            part_has_totals: false,
            expect_totals: false,
            object: None,
            fn_file: None,
            pos_file: None,
            func: None,
            cur: None,
            call_object: None,
            call_file: None,
            call_func: None,
            pending_call: None,
            instr_col: None,
            last_instr: 0,
            pending_target: None,
            pending_jump: None,
        }
    }

    fn err(&self, message: impl Into<String>) -> Error {
        Error::Syntax {
            path: self.path.to_string(),
            line: self.line,
            message: message.into(),
        }
    }

    fn parse(mut self, text: &str) -> Result<(), Error> {
        if text.is_empty() {
            return Err(Error::Format {
                path: self.path.to_string(),
                message: "empty file, not callgrind output".to_string(),
            });
        }
        let complete = text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(text);
        let mut lines = body.split('\n').peekable();
        while let Some(raw) = lines.next() {
            self.line += 1;
            if !complete && lines.peek().is_none() {
                // Checked before parsing: a cut line would otherwise read as a bad token.
                return Err(self.err("file ends in the middle of a line (truncated?)"));
            }
            if raw.len() > MAX_LINE_LEN {
                return Err(self.err(format!("line longer than {MAX_LINE_LEN} bytes")));
            }
            if let Some(call_line) = self.pending_call.take() {
                let line = raw.strip_suffix('\r').unwrap_or(raw);
                if !is_cost_line(line) {
                    return Err(self.err(format!(
                        "expected the inclusive cost line of the `calls=` on line {call_line}"
                    )));
                }
                self.cost_line(line, true)?;
                continue;
            }
            self.parse_line(raw.strip_suffix('\r').unwrap_or(raw))?;
        }
        if let Some(call_line) = self.pending_call {
            return Err(self.err(format!(
                "file ends after the `calls=` on line {call_line} without its cost line (truncated?)"
            )));
        }
        if self.nevents.is_none() {
            return Err(Error::Format {
                path: self.path.to_string(),
                message: "no `events:` header (not callgrind output, or truncated)".to_string(),
            });
        }
        self.end_part()
    }

    /// Checks that a part that had to end with `totals:` did.
    fn end_part(&self) -> Result<(), Error> {
        if self.in_body && self.expect_totals && !self.part_has_totals {
            return Err(
                self.err("part has no `totals:` line, which callgrind always writes (truncated?)")
            );
        }
        Ok(())
    }

    fn parse_line(&mut self, line: &str) -> Result<(), Error> {
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(());
        }
        if is_cost_line(line) {
            return self.cost_line(line, false);
        }
        let key_len = line
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let (key, rest) = line.split_at(key_len);
        if key_len > 0 && rest.starts_with(':') {
            return self.header(key, rest[1..].trim_matches([' ', '\t']));
        }
        if key_len > 0 && rest.starts_with('=') {
            return self.body_spec(key, &rest[1..]);
        }
        Err(self.err(format!("not a callgrind line: `{}`", quote(line))))
    }

    fn header(&mut self, key: &str, value: &str) -> Result<(), Error> {
        if key == "totals" {
            return self.totals(value);
        }
        if self.in_body {
            // A header line after a body opens the next part (`--combine-dumps=yes`).
            self.end_part()?;
            self.in_body = false;
            self.part_cost = 0;
            self.part_has_totals = false;
            self.object = None;
            self.fn_file = None;
            self.pos_file = None;
            self.func = None;
            self.cur = None;
            self.last_instr = 0;
        }
        match key {
            "version" if value != "1" && value != "0" => {
                return Err(self.err(format!(
                    "unsupported callgrind format version `{}` (this reader knows 1)",
                    quote(value)
                )));
            }
            "creator" => self.expect_totals = value.starts_with("callgrind"),
            "cmd" if self.acc.cmd.is_none() && !value.is_empty() => {
                self.acc.cmd = Some(value.to_string());
            }
            "positions" => {
                let mut n = 0;
                let mut instr = None;
                for tok in value.split_ascii_whitespace() {
                    if !matches!(tok, "instr" | "bb" | "line") {
                        return Err(self.err(format!("unknown position kind `{}`", quote(tok))));
                    }
                    if tok == "instr" && instr.is_none() {
                        instr = Some(n);
                    }
                    n += 1;
                }
                if n == 0 {
                    return Err(self.err("`positions:` names no position kind"));
                }
                self.npos = n;
                self.instr_col = instr;
            }
            "events" => {
                let mut names = value.split_ascii_whitespace();
                let first = names
                    .next()
                    .ok_or_else(|| self.err("`events:` names no event"))?;
                match &self.acc.event {
                    Some(e) if e != first => {
                        return Err(self.err(format!(
                            "first event is `{}`, but earlier input counted `{}`",
                            quote(first),
                            quote(e)
                        )))
                    }
                    Some(_) => {}
                    None => self.acc.event = Some(first.to_string()),
                }
                self.nevents = Some(1 + names.count());
            }
            // pid, thread, part, desc, summary, event and unknown keys carry nothing we use;
            // the spec says unknown header keys are to be ignored.
            _ => {}
        }
        Ok(())
    }

    fn totals(&mut self, value: &str) -> Result<(), Error> {
        let first = value.split_ascii_whitespace().next().unwrap_or("0");
        let total = parse_number(first)
            .ok_or_else(|| self.err(format!("bad `totals:` value `{}`", quote(first))))?;
        if total != self.part_cost {
            return Err(self.err(format!(
                "`totals:` says {total} but the part's cost lines sum to {} (truncated or corrupt?)",
                self.part_cost
            )));
        }
        self.part_has_totals = true;
        self.in_body = true;
        Ok(())
    }

    fn require_events(&self) -> Result<usize, Error> {
        self.nevents
            .ok_or_else(|| self.err("body line before the `events:` header"))
    }

    fn body_spec(&mut self, key: &str, value: &str) -> Result<(), Error> {
        self.require_events()?;
        self.in_body = true;
        match key {
            "ob" => {
                self.object = Some(self.name(Space::Object, value)?);
                self.cur = None;
            }
            "fl" => {
                let f = self.name(Space::File, value)?;
                self.fn_file = Some(f);
                self.pos_file = Some(f);
                self.cur = None;
            }
            "fi" | "fe" => self.pos_file = Some(self.name(Space::File, value)?),
            "fn" => {
                self.func = Some(self.name(Space::Func, value)?);
                // Callgrind writes `fl=` before `fn=` when the file changes, so the
                // position file is the function's own file again.
                self.pos_file = self.fn_file;
                self.cur = None;
            }
            "cob" => self.call_object = Some(self.name(Space::Object, value)?),
            "cfi" | "cfl" => self.call_file = Some(self.name(Space::File, value)?),
            "cfn" => self.call_func = Some(self.name(Space::Func, value)?),
            // Jump targets and the caller of a context: only their name definitions matter.
            "jfi" => {
                self.name(Space::File, value)?;
            }
            "jfn" | "frfn" => {
                self.name(Space::Func, value)?;
            }
            "calls" => self.calls(value)?,
            "jump" => {
                let (count, target) = split_first(value);
                let count = self.number(count, "jump count")?;
                self.subpositions(target, "jump target")?;
                self.jump(target, count)?;
            }
            "jcnd" => {
                // Callgrind writes `jcnd=JUMPS/EXE TARGET`: times taken, then times the jump
                // ran (`fprint_jcc` in callgrind/dump.c; on real output the first is the target
                // block's count, the second the site's). The format description names them
                // the other way round and puts a space there.
                let (counts, mut target) = split_first(value);
                let (jumps, exe) = match counts.split_once('/') {
                    Some(pair) => pair,
                    None => {
                        let (exe, t) = split_first(target);
                        target = t;
                        (counts, exe)
                    }
                };
                let jumps = self.number(jumps, "jcnd jump count")?;
                self.number(exe, "jcnd execution count")?;
                self.subpositions(target, "jcnd target")?;
                self.jump(target, jumps)?;
            }
            // `ln=` (with --dump-bbs) and `rec=` (recursion level) carry no cost.
            "ln" | "rec" => {}
            _ => return Err(self.err(format!("unknown body line `{}=`", quote(key)))),
        }
        Ok(())
    }

    /// `calls=COUNT TARGET`: records the edge; the next line is its inclusive cost.
    fn calls(&mut self, value: &str) -> Result<(), Error> {
        let (count, target) = split_first(value);
        let count = self.number(count, "call count")?;
        self.subpositions(target, "call target")?;
        // The target's address, relative to the previous cost line (it does not move it).
        let target_address = match self.instr_col {
            Some(col) => {
                let tok = target.split_ascii_whitespace().nth(col).ok_or_else(|| {
                    self.err(format!("call target has fewer than {} positions", col + 1))
                })?;
                Some(self.position(tok)?)
            }
            None => None,
        };
        let caller = self.current()?;
        let callee_name = self
            .call_func
            .take()
            .ok_or_else(|| self.err("`calls=` without a `cfn=` naming the callee"))?;
        let object = self.call_object.take().or(self.object);
        let file = self.call_file.take().or(self.pos_file);
        let callee = FnRef {
            object: self.object_or_default(object),
            name: callee_name,
            file: self.file_or_empty(file),
        };
        let callee_object = callee.object;
        let callee = self.acc.func(callee);
        let slot = self.acc.edges.entry((caller, callee)).or_insert(0);
        *slot = slot.saturating_add(count);
        self.pending_call = Some(self.line);
        let caller_object = self.acc.func_list[caller as usize].object;
        match target_address {
            Some(t) if caller_object == callee_object => {
                self.pending_target = Some((caller_object, t, count));
            }
            Some(_) => {}
            None => {
                self.acc.no_instr.insert(caller_object);
            }
        }
        Ok(())
    }

    /// Remembers a jump's target address (relative to the previous cost line, which it does
    /// not move); the next cost line is the jump's site.
    fn jump(&mut self, target: &str, count: u64) -> Result<(), Error> {
        let Some(col) = self.instr_col else {
            return Ok(());
        };
        let tok = target
            .split_ascii_whitespace()
            .nth(col)
            .ok_or_else(|| self.err(format!("jump target has fewer than {} positions", col + 1)))?;
        let address = self.position(tok)?;
        let f = self.current()?;
        let object = self.acc.func_list[f as usize].object;
        self.pending_jump = (count > 0).then_some((object, address, count));
        Ok(())
    }

    /// A cost line; `inclusive` is true for the line after `calls=`, whose cost is skipped.
    fn cost_line(&mut self, line: &str, inclusive: bool) -> Result<(), Error> {
        let nevents = self.require_events()?;
        self.in_body = true;
        let mut toks = line.split_ascii_whitespace();
        let mut instr = None;
        for col in 0..self.npos {
            let tok = toks.next().ok_or_else(|| {
                self.err(format!("cost line has fewer than {} positions", self.npos))
            })?;
            if self.instr_col == Some(col) {
                instr = Some(self.position(tok)?);
            } else if !is_subposition(tok) {
                return Err(self.err(format!("bad position `{}`", quote(tok))));
            }
        }
        let mut first = 0;
        let mut n = 0;
        for tok in toks {
            let v = self.number(tok, "cost")?;
            if n == 0 {
                first = v;
            }
            n += 1;
            if n > nevents {
                return Err(self.err(format!(
                    "cost line has more counters than the {nevents} events"
                )));
            }
        }
        if let Some(address) = instr {
            self.last_instr = address;
        }
        if let (Some(site), Some((object, target, count))) = (instr, self.pending_jump.take()) {
            let jumps = self.acc.addr_jumps.entry(object).or_default();
            let slot = jumps.entry((site, target)).or_insert(0);
            *slot = slot.saturating_add(count);
        }
        if inclusive {
            if let (Some(site), Some((object, target, count))) = (instr, self.pending_target.take())
            {
                let calls = self.acc.addr_calls.entry(object).or_default();
                let slot = calls.entry((site, target)).or_insert(0);
                *slot = slot.saturating_add(count);
            }
            return Ok(());
        }
        let f = self.current()?;
        let slot = &mut self.acc.self_cost[f as usize];
        *slot = slot.saturating_add(first);
        let object = self.acc.func_list[f as usize].object;
        let total = self.acc.object_total.entry(object).or_insert(0);
        *total = total.saturating_add(first);
        self.part_cost = self.part_cost.saturating_add(first);
        match instr {
            Some(address) => {
                let lowest = &mut self.acc.lowest[f as usize];
                *lowest = (*lowest).min(address);
                let costs = self.acc.addr_cost.entry(object).or_default();
                let slot = costs.entry(address).or_insert(0);
                *slot = slot.saturating_add(first);
            }
            None => {
                self.acc.no_instr.insert(object);
            }
        }
        Ok(())
    }

    /// Decodes an instruction subposition: absolute, `+N`/`-N` from the previous cost line's
    /// address, or `*` for the same address.
    fn position(&self, tok: &str) -> Result<u64, Error> {
        let last = self.last_instr;
        let value = if tok == "*" {
            Some(Some(last))
        } else if let Some(n) = tok.strip_prefix('+') {
            parse_number(n).map(|n| last.checked_add(n))
        } else if let Some(n) = tok.strip_prefix('-') {
            parse_number(n).map(|n| last.checked_sub(n))
        } else {
            parse_number(tok).map(Some)
        };
        match value {
            Some(Some(address)) => Ok(address),
            Some(None) => Err(self.err(format!(
                "position `{}` leaves the address range from {last:#x}",
                quote(tok)
            ))),
            None => Err(self.err(format!("bad position `{}`", quote(tok)))),
        }
    }

    /// The function the current context (`ob=`, `fl=`, `fn=`) names.
    fn current(&mut self) -> Result<u32, Error> {
        if let Some(c) = self.cur {
            return Ok(c);
        }
        let name = self
            .func
            .ok_or_else(|| self.err("cost or call before any `fn=` line"))?;
        let f = FnRef {
            object: self.object_or_default(self.object),
            name,
            file: self.file_or_empty(self.fn_file),
        };
        let c = self.acc.func(f);
        self.cur = Some(c);
        Ok(c)
    }

    fn object_or_default(&mut self, object: Option<u32>) -> u32 {
        match object {
            Some(o) => o,
            None => {
                // No `ob=` (cachegrind-style input): the program of `cmd:` is the object.
                let program = self
                    .acc
                    .cmd
                    .as_deref()
                    .and_then(|c| c.split_ascii_whitespace().next())
                    .unwrap_or(UNKNOWN)
                    .to_string();
                self.acc.strings.intern(&program)
            }
        }
    }

    fn file_or_empty(&mut self, file: Option<u32>) -> u32 {
        match file {
            Some(f) => f,
            None => self.acc.strings.intern(""),
        }
    }

    /// Resolves a position name: `(ID) name` defines, `(ID)` refers, anything else is literal.
    fn name(&mut self, space: Space, value: &str) -> Result<u32, Error> {
        let value = value.trim_start_matches([' ', '\t']);
        let compressed =
            value.starts_with('(') && value[1..].starts_with(|c: char| c.is_ascii_digit());
        if !compressed {
            return self.define_literal(space, value);
        }
        let close = value
            .find(')')
            .ok_or_else(|| self.err(format!("unclosed `(` in {} name", space.label())))?;
        let digits = &value[1..close];
        let id = digits
            .parse::<u64>()
            .ok()
            .filter(|&id| id <= MAX_ID)
            .ok_or_else(|| {
                self.err(format!(
                    "bad {} id `({})` (ids are decimal, at most {MAX_ID})",
                    space.label(),
                    quote(digits)
                ))
            })? as u32;
        let rest = value[close + 1..].trim_matches([' ', '\t']);
        if rest.is_empty() {
            return self.names[space as usize].get(&id).copied().ok_or_else(|| {
                self.err(format!(
                    "unknown {} id ({id}) (used before its definition)",
                    space.label()
                ))
            });
        }
        let interned = self.define_literal(space, rest)?;
        self.names[space as usize].insert(id, interned);
        Ok(interned)
    }

    fn define_literal(&mut self, space: Space, name: &str) -> Result<u32, Error> {
        let name = name.trim_end_matches([' ', '\t']);
        if name.is_empty() {
            return Err(self.err(format!("empty {} name", space.label())));
        }
        let name = match space {
            Space::Func => strip_recursion_suffix(name),
            _ => name,
        };
        if let (Space::Object, Some(rewrite)) = (space, self.object_names.as_mut()) {
            let name = rewrite(name);
            return Ok(self.acc.strings.intern(&name));
        }
        Ok(self.acc.strings.intern(name))
    }

    fn number(&self, tok: &str, what: &str) -> Result<u64, Error> {
        parse_number(tok).ok_or_else(|| self.err(format!("bad {what} `{}`", quote(tok))))
    }

    fn subpositions(&self, list: &str, what: &str) -> Result<(), Error> {
        let mut any = false;
        for tok in list.split_ascii_whitespace() {
            if !is_subposition(tok) {
                return Err(self.err(format!("bad {what} position `{}`", quote(tok))));
            }
            any = true;
        }
        if !any {
            return Err(self.err(format!("missing {what} position")));
        }
        Ok(())
    }
}

/// True for lines that start like a cost line: a subposition (digit, `+`, `-` or `*`).
fn is_cost_line(line: &str) -> bool {
    line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*'))
}

/// `Number | +Number | -Number | *`.
fn is_subposition(tok: &str) -> bool {
    if tok == "*" {
        return true;
    }
    let digits = tok
        .strip_prefix('+')
        .or_else(|| tok.strip_prefix('-'))
        .unwrap_or(tok);
    parse_number(digits).is_some()
}

/// Decimal digits or `0x` followed by hex digits, fitting in a u64.
fn parse_number(tok: &str) -> Option<u64> {
    if let Some(hex) = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    tok.parse().ok()
}

/// Splits off the first whitespace-separated token.
fn split_first(s: &str) -> (&str, &str) {
    let s = s.trim_start_matches([' ', '\t']);
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// `fib'2` -> `fib`: callgrind's marker for a recursion level (with `--separate-recs`).
fn strip_recursion_suffix(name: &str) -> &str {
    match name.rsplit_once('\'') {
        Some((base, level))
            if !base.is_empty()
                && !level.is_empty()
                && level.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Jump sites are the position line after `jump=`/`jcnd=`, targets are relative to the
    // previous cost line and do not move it; `jcnd=` keeps its taken count; an `ET_EXEC`
    // binary has load base 0.
    #[test]
    fn instr_counts_decode_jumps() {
        let text = "events: Ir\npositions: instr line\nob=/bin/app\nfl=a.c\nfn=f\n\
                    0x1000 1 10\n+4 1 10\njcnd=7/10 +12 1\n* 1\n+2 1 3\njump=3 -6 1\n+1 1\n\
                    0x1010 1 7\n";
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[4] = 2;
        header[5] = 1;
        header[16] = 2;
        let elf = Binary {
            build_id: None,
            arch: "x86_64".into(),
            segments: Vec::new(),
            functions: Vec::new(),
            from_dynsym: false,
            plt: Vec::new(),
        };
        let input = Input {
            path: "t.out",
            text,
        };
        let c = instr_counts(&[input], "/bin/app", &elf, &header).unwrap();
        assert_eq!(c.object, "/bin/app");
        assert_eq!(
            c.executed,
            vec![
                (0x1000, 10),
                (0x1004, 10),
                (0x1006, 3),
                (0x1007, 0),
                (0x1010, 7)
            ]
        );
        assert_eq!(c.jumps, vec![(0x1004, 0x1010, 7), (0x1007, 0x1000, 3)]);
        let e = instr_counts(&[input], "/bin/other", &elf, &header).unwrap_err();
        assert!(e.to_string().contains("no instruction-level costs"), "{e}");
    }

    /// Reads `text` (named `t.out`) and returns the profiles' text forms by object.
    fn profiles(text: &str) -> BTreeMap<String, Profile> {
        read(text, "t.out")
            .unwrap()
            .into_iter()
            .map(|p| (p.meta.binary.clone(), p))
            .collect()
    }

    fn weight(p: &Profile, name: &str) -> u64 {
        let f = p.functions.iter().find(|f| f.key.name == name).unwrap();
        f.self_weight
    }

    fn call(p: &Profile, caller: &str, callee: &str) -> Option<u64> {
        let index = |n: &str| p.functions.iter().position(|f| f.key.name == n).unwrap() as u32;
        let (a, c) = (index(caller), index(callee));
        p.edges
            .iter()
            .find(|e| e.caller == a && e.callee == c)
            .map(|e| e.weight)
    }

    fn err(text: &str) -> String {
        read(text, "t.out").unwrap_err().to_string()
    }

    // The spec's compressed example: `(id)` refers back, file and function ids are separate
    // spaces (file 2 and function 2 differ), and inclusive costs stay out of self weights.
    #[test]
    fn name_compression_and_inclusive_cost() {
        let text = "events: Instructions\nob=/bin/x\nfl=(1) file1.c\nfn=(1) main\n16 20\n\
                    cfn=(2) func1\ncalls=1 50\n16 400\ncfi=(2) file2.c\ncfn=(3) func2\n\
                    calls=3 20\n16 400\nfn=(2)\n51 100\ncfi=(2)\ncfn=(3)\ncalls=2 20\n51 300\n\
                    fl=(2)\nfn=(3)\n20 700\n";
        let ps = profiles(text);
        let p = &ps["/bin/x"];
        assert_eq!(weight(p, "main"), 20);
        assert_eq!(weight(p, "func1"), 100);
        assert_eq!(weight(p, "func2"), 700);
        assert_eq!(p.meta.total, 820);
        assert_eq!(p.meta.event.as_deref(), Some("Instructions"));
        assert_eq!(call(p, "main", "func1"), Some(1));
        assert_eq!(call(p, "main", "func2"), Some(3));
        assert_eq!(call(p, "func1", "func2"), Some(2));
        let func2 = &p.functions[p
            .functions
            .iter()
            .position(|f| f.key.name == "func2")
            .unwrap()];
        assert_eq!(func2.key.file.as_deref(), Some("file2.c"));
        // func1 had no cfi=, so it lives in the caller's file.
        let func1 = &p.functions[p
            .functions
            .iter()
            .position(|f| f.key.name == "func1")
            .unwrap()];
        assert_eq!(func1.key.file.as_deref(), Some("file1.c"));
        assert_eq!(p.functions.len(), 3);
    }

    // Relative and `*` subpositions with two position columns: the cost is the third token.
    #[test]
    fn relative_positions_with_instr_and_line() {
        let text = "positions: instr line\nevents: ticks Dr\nob=/bin/x\nfl=a.c\nfn=func\n\
                    0x80001234 90 1 7\n+3 * 5\n-1 +1 6 2\n* -2\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(weight(p, "func"), 12);
        assert_eq!(p.meta.total, 12);
    }

    // A call's inclusive cost line is skipped even when it is the only cost of the caller.
    #[test]
    fn inclusive_cost_after_calls_is_not_self_cost() {
        let text = "events: Ir\nob=/bin/x\nfl=a.c\nfn=caller\ncfn=callee\ncalls=5 3\n1 1000\n\
                    fn=callee\n3 10\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(weight(p, "caller"), 0);
        assert_eq!(weight(p, "callee"), 10);
        assert_eq!(p.meta.total, 10);
        assert_eq!(call(p, "caller", "callee"), Some(5));
    }

    // A call into another object is not an edge of either profile, but the callee shows up in
    // its own object; an object without cost has no profile.
    #[test]
    fn cross_object_calls_are_dropped() {
        let text = "events: Ir\nob=(1) /bin/x\nfl=a.c\nfn=main\n1 5\ncob=(2) /lib/libc.so\n\
                    cfi=p.c\ncfn=printf\ncalls=2 0\n1 50\ncob=(3) /lib/empty.so\ncfn=nothing\n\
                    calls=1 0\n1 0\nob=(2)\nfl=p.c\nfn=printf\n0 50\n";
        let ps = profiles(text);
        assert_eq!(ps.keys().collect::<Vec<_>>(), ["/bin/x", "/lib/libc.so"]);
        assert!(ps["/bin/x"].edges.is_empty());
        assert_eq!(ps["/bin/x"].functions.len(), 1);
        assert_eq!(weight(&ps["/lib/libc.so"], "printf"), 50);
    }

    // Recursion levels (`fib'2`) fold into one function; a call between levels is a self call.
    #[test]
    fn recursion_suffix_is_dropped() {
        let text = "events: Ir\nob=/bin/x\nfl=a.c\nfn=(1) fib\n1 3\ncfn=(2) fib'2\ncalls=1 1\n\
                    1 9\nfn=(2)\n1 9\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(p.functions.len(), 1);
        assert_eq!(weight(p, "fib"), 12);
        assert_eq!(call(p, "fib", "fib"), Some(1));
    }

    // Unknown source files (`???`) give no file hint; names keep inner spaces.
    #[test]
    fn unknown_file_gives_no_hint() {
        let text = "events: Ir\nob=/bin/x\nfl=(1) ???\nfn=(1) operator new(unsigned long)\n0 4\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(
            p.functions[0].key,
            FuncKey::global("operator new(unsigned long)")
        );
    }

    // Several parts in one file, each checked against its `totals:`, sum up.
    #[test]
    fn parts_sum_and_totals_are_checked() {
        let part = "events: Ir\nob=(1) /bin/x\nfl=(1) a.c\nfn=(1) f\n1 7\ntotals: 7\n";
        let text = format!("creator: callgrind-3.19.0\npart: 1\n{part}part: 2\n{part}");
        assert_eq!(weight(&profiles(&text)["/bin/x"], "f"), 14);
        let bad = "creator: callgrind-3.19.0\nevents: Ir\nob=/bin/x\nfn=f\n1 7\ntotals: 8\n";
        assert_eq!(
            err(bad),
            "t.out: line 6: `totals:` says 8 but the part's cost lines sum to 7 (truncated or corrupt?)"
        );
    }

    // A file written by callgrind and cut at a line boundary lacks its `totals:`.
    #[test]
    fn missing_totals_from_callgrind_is_truncation() {
        let text = "creator: callgrind-3.19.0\nevents: Ir\nob=/bin/x\nfn=f\n1 7\n";
        assert!(
            err(text).starts_with("t.out: line 5: part has no `totals:`"),
            "{}",
            err(text)
        );
    }

    // Regression: a function id or token quoted in an error reached the terminal raw
    // (terminal escape sequences, a vertical tab breaking the line) and unbounded.
    #[test]
    fn errors_quote_input_escaped() {
        assert_eq!(
            err("events: Ir\nfn=(1\x1b[2J\x0b) f\n"),
            "t.out: line 2: bad function id `(1%1B[2J%0B)` (ids are decimal, at most 10000000)"
        );
        let long = err(&format!("events: Ir\nfn=({}\x1b) f\n", "9".repeat(500)));
        assert!(
            long.contains(&format!("`({}...)`", "9".repeat(60))),
            "{long}"
        );
        let msg = err("events: Ir\n\x1b]0;pwned\x07\n");
        assert!(msg.contains("%1B]0;pwned%07"), "{msg}");
        assert!(!msg.chars().any(char::is_control), "{msg:?}");
    }

    // Every malformed input names the file and line.
    #[test]
    fn errors_name_file_and_line() {
        assert_eq!(err(""), "t.out: empty file, not callgrind output");
        assert_eq!(
            err("ob=/bin/x\n"),
            "t.out: line 1: body line before the `events:` header"
        );
        assert_eq!(
            err("events: Ir\nob=/bin/x\nfn=f\n1 2"),
            "t.out: line 4: file ends in the middle of a line (truncated?)"
        );
        assert_eq!(
            err("events: Ir\nfn=(4)\n"),
            "t.out: line 2: unknown function id (4) (used before its definition)"
        );
        assert_eq!(
            err("events: Ir\nfn=(99999999999) f\n"),
            "t.out: line 2: bad function id `(99999999999)` (ids are decimal, at most 10000000)"
        );
        assert_eq!(
            err("events: Ir\nfn=f\ncfn=g\ncalls=1 2\nfn=g\n"),
            "t.out: line 5: expected the inclusive cost line of the `calls=` on line 4"
        );
        assert_eq!(
            err("events: Ir\nfn=f\ncfn=g\ncalls=1 2\n"),
            "t.out: line 4: file ends after the `calls=` on line 4 without its cost line (truncated?)"
        );
        assert_eq!(
            err("events: Ir\nfn=f\n1 2 3\n"),
            "t.out: line 3: cost line has more counters than the 1 events"
        );
        assert_eq!(
            err("events: Ir\nfn=f\n1 x\n"),
            "t.out: line 3: bad cost `x`"
        );
        assert_eq!(
            err("events: Ir\n1 5\n"),
            "t.out: line 2: cost or call before any `fn=` line"
        );
        assert_eq!(
            err("hello world\n"),
            "t.out: line 1: not a callgrind line: `hello world`"
        );
        assert_eq!(
            err("# only a comment\n"),
            "t.out: no `events:` header (not callgrind output, or truncated)"
        );
    }

    // Files of one run must agree on the event they count.
    #[test]
    fn inputs_must_count_the_same_event() {
        let a = Input {
            path: "a.out",
            text: "events: Ir\nfn=f\n1 1\n",
        };
        let b = Input {
            path: "b.out",
            text: "events: Dr\nfn=f\n1 1\n",
        };
        assert_eq!(
            read_all(&[a, b]).unwrap_err().to_string(),
            "b.out: line 1: first event is `Dr`, but earlier input counted `Ir`"
        );
    }

    // Hex counters, tabs and CRLF line ends are accepted.
    #[test]
    fn hex_tabs_and_crlf() {
        let text = "events: Ir\r\nob=/bin/x\r\nfn=f\r\n0x10\t0x20\r\n";
        assert_eq!(weight(&profiles(text)["/bin/x"], "f"), 32);
    }

    // The vote: the most common page-rounded (lowest address - symbol address) wins, ties go
    // to the smallest, and it needs MIN_BASE_VOTES backers (or all candidates, when fewer).
    #[test]
    fn load_base_vote() {
        // main, hot_a, hot_b entered at their first byte; cold entered 0x20 bytes in.
        let pie = [
            (0x109040, 0x1040),
            (0x109170, 0x1170),
            (0x1091b0, 0x11b0),
            (0x109ff0, 0x1fd0),
        ];
        assert_eq!(find_load_base(&pie), Some(0x108000));
        // Link-time addresses (what valgrind 3.19 prints): base 0.
        assert_eq!(
            find_load_base(&[(0x1040, 0x1040), (0x1170, 0x1170)]),
            Some(0)
        );
        // Two proposals with three votes each: the smaller base.
        let tie = [
            (0x9000, 0x1000),
            (0x9100, 0x1100),
            (0x9200, 0x1200),
            (0x5000, 0x1000),
            (0x5100, 0x1100),
            (0x5200, 0x1200),
        ];
        assert_eq!(find_load_base(&tie), Some(0x4000));
        // Fewer than three candidates must all agree; more need three backers.
        assert_eq!(find_load_base(&[(0x5000, 0x1000), (0x1100, 0x1100)]), None);
        assert_eq!(find_load_base(&tie[..2]), Some(0x8000));
        assert_eq!(find_load_base(&tie[1..5]), None);
        // A candidate below its symbol proposes nothing but still counts.
        assert_eq!(find_load_base(&[(0x5000, 0x1000), (0x10, 0x1100)]), None);
        assert_eq!(find_load_base(&[]), None);
    }

    // ELF type from the header, in the file's byte order; anything else is no type.
    #[test]
    fn elf_type_reads_e_type() {
        let mut h = [0u8; 20];
        h[..4].copy_from_slice(b"\x7fELF");
        h[5] = 1;
        h[16] = 2;
        assert_eq!(elf_type(&h), Some(ET_EXEC));
        h[5] = 2;
        h[17] = 3;
        assert_eq!(elf_type(&h), Some(0x0203));
        assert_eq!(elf_type(&h[..17]), None);
        h[0] = 0;
        assert_eq!(elf_type(&h), None);
    }

    /// Parses `text` into an accumulator, as [`import`] does.
    fn acc(text: &str) -> Acc {
        let mut acc = Acc::default();
        FileParser::new("t.out", &mut acc).parse(text).unwrap();
        acc
    }

    /// A PIE's symbols: two statics `mix` of one header, compiled into u1.c and u2.c.
    fn pie() -> Binary {
        let sym =
            |key: FuncKey, address: u64, size: u64| sediment_elf::Symbol { key, address, size };
        Binary {
            build_id: None,
            arch: "x86_64".into(),
            segments: Vec::new(),
            functions: vec![
                sym(FuncKey::global("main"), 0x1040, 0x20),
                sym(FuncKey::local("mix", "u1.c"), 0x1100, 0x10),
                sym(FuncKey::global("hot_a"), 0x1110, 0x20),
                sym(FuncKey::local("mix", "u2.c"), 0x1200, 0x18),
                sym(FuncKey::global("hot_b"), 0x1220, 0x20),
            ],
            from_dynsym: false,
            plt: Vec::new(),
        }
    }

    // Same-named statics of one header, merged by callgrind into one `fn=mix` (same `fl=`),
    // are split again by address; relative targets do not move the previous position, call
    // sites do; addresses in no symbol are unattributed but stay in the total.
    #[test]
    fn address_attribution_splits_header_statics() {
        let text = "positions: instr line\nevents: Ir\nob=/bin/pie\nfl=u.h\nfn=main\n\
                    0x109040 1 2\ncfn=hot_a\ncalls=1 +208 9\n+4 * 50\ncfn=hot_b\n\
                    calls=1 0x109220 9\n+5 * 70\n+5 * 1\n\
                    fn=hot_a\n0x109110 3 4\ncfn=mix\ncalls=3 -16 2\n+8 * 30\n\
                    fn=hot_b\n0x109220 3 5\ncfn=mix\ncalls=7 -32 2\n+8 * 50\n\
                    fn=mix\n0x109100 2 10\n+256 * 20\n0x109300 9 6\n";
        let acc = acc(text);
        let object = acc.strings.map["/bin/pie"];
        let elf = pie();
        assert_eq!(acc.load_base(object, &elf, &[]), Some(0x108000));
        let meta = Meta {
            binary: "/bin/pie".into(),
            total: 48,
            ..Meta::default()
        };
        let mut stats = Stats::default();
        let p = acc.address_profile(object, meta, &elf, 0x108000, &mut stats);
        let got: Vec<(String, u64, Option<u64>)> = p
            .functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight, f.size))
            .collect();
        assert_eq!(
            got,
            vec![
                ("hot_a".to_string(), 4, Some(0x20)),
                ("hot_b".to_string(), 5, Some(0x20)),
                ("main".to_string(), 3, Some(0x20)),
                ("mix (u1.c)".to_string(), 10, Some(0x10)),
                ("mix (u2.c)".to_string(), 20, Some(0x18)),
            ]
        );
        let edges: Vec<(String, String, u64)> = p
            .edges
            .iter()
            .map(|e| {
                let k = |i: u32| p.functions[i as usize].key.to_string();
                (k(e.caller), k(e.callee), e.weight)
            })
            .collect();
        assert_eq!(
            edges,
            vec![
                ("hot_a".to_string(), "mix (u1.c)".to_string(), 3),
                ("hot_b".to_string(), "mix (u2.c)".to_string(), 7),
                ("main".to_string(), "hot_a".to_string(), 1),
                ("main".to_string(), "hot_b".to_string(), 1),
            ]
        );
        assert_eq!(p.meta.total, 48);
        assert_eq!(stats.unattributed_cost, 6);
        assert_eq!(stats.unattributed_calls, 0);
    }

    // Without instruction positions the object is marked for the name path.
    #[test]
    fn line_positions_only_mark_the_object() {
        let acc = acc("events: Ir\nob=/bin/x\nfn=f\n1 5\n");
        let object = acc.strings.map["/bin/x"];
        assert!(acc.no_instr.contains(&object));
        assert!(acc.addr_cost.is_empty());
    }

    // A relative instruction position below address 0 is an error naming the line.
    #[test]
    fn position_below_zero_is_an_error() {
        assert_eq!(
            err("positions: instr\nevents: Ir\nfn=f\n0x10 1\n-17 1\n"),
            "t.out: line 5: position `-17` leaves the address range from 0x10"
        );
        assert_eq!(
            err("positions: instr line\nevents: Ir\nfn=f\n0x10 1 1\ncfn=g\ncalls=1\n"),
            "t.out: line 6: missing call target position"
        );
    }

    const FIXTURE: &str = include_str!("../../../tests/fixtures/callgrind/threads.out-02");
    const TWINS: &str = include_str!("../../../tests/fixtures/callgrind/twins.out");
    const TWINS_BIN: &[u8] = include_bytes!("../../../tests/fixtures/callgrind/twins/twins");

    // The unmutated capture imports by address (the proptest below starts from it).
    #[test]
    fn twins_fixture_imports_by_address() {
        let mut resolver = |path: &str, _: Option<&str>| -> Result<Option<Vec<u8>>, String> {
            Ok(path.ends_with("/twins").then(|| TWINS_BIN.to_vec()))
        };
        let r = import(
            &[Input {
                path: "twins.out",
                text: TWINS,
            }],
            &mut resolver,
        )
        .unwrap();
        assert_eq!(r.stats.by_address, ["/tmp/sediment-fixture/twins"]);
        let p = &r.profiles[0];
        let twin = |file: &str| p.find(&FuncKey::local("twin", file)).unwrap() as usize;
        assert_eq!(p.functions[twin("a.c")].self_weight, 1500);
        assert_eq!(p.functions[twin("b.c")].self_weight, 3500);
    }

    // The small real capture reads as expected before it is mutated below.
    #[test]
    fn fixture_reads() {
        let ps = read(FIXTURE, "threads.out-02").unwrap();
        let p = ps
            .iter()
            .find(|p| p.meta.binary.ends_with("/threads"))
            .unwrap();
        assert_eq!(call(p, "worker", "work"), Some(500));
        assert_eq!(call(p, "work", "leaf"), Some(1500));
    }

    /// Applies byte edits (`kind` 0 replace, 1 insert, 2 delete at `pos`), then cuts the
    /// result to `cut` bytes (at least one): the mutation model of the never-panic tests.
    fn mutate(input: &[u8], edits: &[(usize, u8, u8)], cut: usize) -> Vec<u8> {
        let mut bytes = input.to_vec();
        for &(pos, byte, kind) in edits {
            let pos = pos % (bytes.len() + 1);
            match kind {
                0 if pos < bytes.len() => bytes[pos] = byte,
                1 => bytes.insert(pos, byte),
                _ if pos < bytes.len() => {
                    bytes.remove(pos);
                }
                _ => {}
            }
        }
        bytes.truncate(cut.max(1));
        bytes
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        // Random byte edits of a real capture never panic: they parse or fail with an error.
        #[test]
        fn mutations_never_panic(
            edits in proptest::collection::vec((0usize..4096, 0u8..=255, 0u8..3), 1..8),
            cut in 0usize..4200,
        ) {
            let bytes = mutate(FIXTURE.as_bytes(), &edits, cut);
            let text = String::from_utf8_lossy(&bytes);
            let _ = read(&text, "fuzz.out");
        }

        // Random byte edits of an instruction-position capture, imported by address against
        // its real binary, never panic either.
        #[test]
        fn address_mutations_never_panic(
            edits in proptest::collection::vec((0usize..1800, 0u8..=255, 0u8..3), 1..8),
            cut in 0usize..1800,
        ) {
            let bytes = mutate(TWINS.as_bytes(), &edits, cut);
            let text = String::from_utf8_lossy(&bytes);
            let mut resolver = |_: &str, _: Option<&str>| -> Result<Option<Vec<u8>>, String> {
                Ok(Some(TWINS_BIN.to_vec()))
            };
            let _ = import(&[Input { path: "fuzz.out", text: &text }], &mut resolver);
        }
    }
}
