//! Importer for `perf.data` files written by `perf record -e cpu-clock -g`, or with LBR
//! branch stacks by `perf record -e branches:u -j any_call`.
//!
//! The file is read with the `linux-perf-data` crate (format: `tools/perf/Documentation/
//! perf.data-file-format.txt` in the Linux tree), never by running `perf script`. Records come
//! out sorted by time, and are replayed like a tiny `perf report`:
//!
//! 1. `MMAP`/`MMAP2` records of executable user-space file mappings are kept per process. A
//!    `COMM` record flagged as an exec empties the process's map (the new image maps itself
//!    afterwards); a `FORK` of a new process copies the parent's map. The copy is shared with
//!    the parent until either changes it, and the mappings held by all processes together are
//!    capped at [`MAX_MAPPINGS`], so that forks of a process with many mappings cannot multiply
//!    a small file into gigabytes.
//! 2. A `SAMPLE` whose IP is in user space contributes its user call chain. The chain holds
//!    `PERF_CONTEXT_*` marker entries (values at or above `PERF_CONTEXT_MAX`) saying whether the
//!    frames after them are kernel, user or guest frames; only user frames are kept. The first
//!    user frame is the sampled IP itself; every further frame is a *return address*, which points
//!    after the call instruction and may already belong to the next function (when the call is the
//!    caller's last instruction), so it is decremented by one before lookup, as `perf report` does.
//! 3. Each frame is mapped to (binary, file offset) through the process's map:
//!    `offset = address - start + pgoff`.
//! 4. Once all records are read, every binary that got samples is obtained from the caller's
//!    [`BinaryResolver`], checked against the build-id perf recorded (the `HEADER_BUILD_ID`
//!    feature, or a build-id carried by the `MMAP2` record), and its offsets are turned into
//!    link-time addresses through the `PT_LOAD` segments and then into functions
//!    ([`sediment_elf::Binary`]).
//!
//! Weights, per [`Mode`]: the sampled function gets one unit of self weight per sample (the
//! period is ignored: with `cpu-clock` every sample stands for the same time). In
//! [`Mode::Leaf`], the hfsort convention (Ottoni & Maher, *Optimizing Function Placement for
//! Large-Scale Data-Center Applications*, CGO 2017), the sample also adds one to the edge from
//! its first caller to the sampled function. In [`Mode::Chain`] every adjacent pair of the chain
//! adds one, which sees calls further up the stack at the price of counting long-running outer
//! frames many times. Recursion (a function calling itself) is kept as a self edge; the ordering
//! algorithms ignore those. Edges between two binaries (the main program calling into `libc`)
//! belong to neither profile: a linker orders one binary at a time.
//!
//! Branch stacks (LBR). When the event records `PERF_SAMPLE_BRANCH_STACK`, each sample's stack is
//! decoded from the raw record by `perf_branch.rs` (the parser crate discards it), and its
//! entries, mapped like frames through the process's map, give the sample's call edges instead
//! of its call chain: one unit per entry whose two ends are in one binary and whose target is
//! the first byte of a function (a call or a tail call; a loop's backward jump lands inside its
//! own function). When the recording holds only calls (`-j any_call`, `call`, `ind_call`,
//! `stack`), an entry is a call wherever in a function it lands, provided the function's symbol
//! gives its size: a target in a size-less symbol's shadow is a PLT stub after `_init`, not a
//! function. The sampled IP keeps its unit of self weight. Turned down: adding the call chain's
//! edges as well (a sample would count its calls twice, on two scales) and weighting by the
//! entries' cycle counts or `-j ...,counter` counters (they time branches, not call frequency).
//!
//! Kernel-mode samples are not attributed to the user code that made the system call: they do
//! not execute that code, and code layout is about what executes. They are counted in the
//! [`Stats`] (those of the idle task apart). So are user samples outside every file on disk:
//! executable mappings of no file (`[vdso]`, `//anon` and `memfd:` JIT code, deleted files) are
//! kept in the process maps under their kind, so that a sample landing there is counted by
//! kind and never falls through to a binary mapped elsewhere; the call chain stops there.
//!
//! Samples in a binary's PLT stubs (`.plt`, `.plt.sec`, `.plt.got`: a call on its way into
//! another binary) are counted ([`Stats::plt_samples`]) and attributed to no function: no
//! symbol covers the PLT, and the size-less `_init` that precedes it must not inherit them
//! (`sediment_elf::Binary::lookup` finds nothing there).
//!
//! Each profile comes with its first half's self weights (the attributed samples in time
//! order, [`PerfImport::first_half`]), for the caller to judge whether the recording was long
//! enough.
//!
//! Robustness: `linux-perf-data` sizes some allocations from header fields and asserts on one
//! `MMAP2` field, so before handing it the bytes this module checks the header, the feature
//! section table and the event descriptions against the file size, and checks each `MMAP2`
//! build-id length; a parser panic that slips through anyway is caught and reported as a
//! damaged file rather than taking the process down. Branch stacks are checked in file order
//! before that parser runs (`perf_branch.rs`), so a crafted branch count is reported at
//! its byte offset.

use crate::perf_branch::{self, AttrSource, Attrs, RawAttr};
use crate::Error;
use linux_perf_data::linux_perf_event_reader::constants::{
    PERF_CONTEXT_MAX, PERF_CONTEXT_USER, PERF_RECORD_MISC_MMAP_BUILD_ID, PERF_RECORD_MMAP2,
};
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord, Mmap2FileId, RecordType};
use linux_perf_data::{DsoKey, PerfFileReader, PerfFileRecord};
use sediment_elf::symbols::hex;
use sediment_elf::Binary;
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Most executable file mappings held for all processes together (2M, some 100 MB). A
/// whole-system recording has a few hundred processes with a few hundred mappings each.
pub const MAX_MAPPINGS: usize = 1 << 21;

/// How samples become call-edge weight (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// One edge per sample: first caller -> sampled function (hfsort).
    #[default]
    Leaf,
    /// One edge per adjacent pair of the whole user call chain.
    Chain,
}

impl Mode {
    /// The name used on the command line and in the profile's `meta mode`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Leaf => "leaf",
            Mode::Chain => "chain",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "leaf" => Ok(Mode::Leaf),
            "chain" => Ok(Mode::Chain),
            _ => Err(format!("unknown mode `{s}` (expected leaf or chain)")),
        }
    }
}

/// Gives the importer the bytes of a binary the recording saw.
///
/// `path` is the path perf recorded; `build_id` the build-id it recorded for it (lowercase hex),
/// if any. Return `Ok(None)` when the binary is not available: its samples are then counted as
/// unresolved rather than failing the import. The importer checks the build-id itself.
pub trait BinaryResolver {
    /// The bytes of the binary, `Ok(None)` when unavailable, `Err` for a real failure.
    fn resolve(&mut self, path: &str, build_id: Option<&str>) -> Result<Option<Vec<u8>>, String>;
}

impl<F> BinaryResolver for F
where
    F: FnMut(&str, Option<&str>) -> Result<Option<Vec<u8>>, String>,
{
    fn resolve(&mut self, path: &str, build_id: Option<&str>) -> Result<Option<Vec<u8>>, String> {
        self(path, build_id)
    }
}

/// Counts of what the importer saw and could not attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// All sample records.
    pub samples: u64,
    /// Samples whose IP was in the kernel (or hypervisor, or a guest).
    pub kernel_samples: u64,
    /// Kernel samples of the idle task (pid 0): a whole-machine recording's idle CPUs.
    pub idle_samples: u64,
    /// Samples of the processes the caller excluded ([`read_excluding`]), user or kernel.
    pub excluded_samples: u64,
    /// User samples whose IP was in no known file mapping (JIT code, `[vdso]`, anonymous memory).
    pub unmapped_samples: u64,
    /// `unmapped_samples` by kind of mapping (the labels of the report: `[vdso]`, `anonymous
    /// memory (JIT)`, `memfd (JIT)`, `deleted files`, `other mappings`, `no mapping`).
    pub unmapped_kinds: BTreeMap<&'static str, u64>,
    /// Binaries that got samples but that the resolver could not provide, with their sample
    /// counts, sorted by path.
    pub missing_binaries: Vec<(String, u64)>,
    /// Samples in a resolved binary's PLT stubs (`.plt`, `.plt.sec`, `.plt.got`): calls on
    /// their way to another binary's function, counted here and attributed to no function
    /// (never to `_init`, the size-less symbol before the PLT).
    pub plt_samples: u64,
    /// Samples in a resolved binary whose address matched no function symbol (PLT stubs apart).
    pub unsymbolized_samples: u64,
    /// Those samples by binary: `(path, samples)`, most samples first (ties by path).
    pub unsymbolized_by_binary: Vec<(String, u64)>,
    /// Branch-stack (LBR) entries of all samples.
    pub branches: u64,
    /// Branch-stack entries that became a call edge (see the module docs for which do).
    pub branch_calls: u64,
}

/// The result of [`read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfImport {
    /// One profile per binary whose samples matched at least one function, sorted by path.
    pub profiles: Vec<Profile>,
    /// Path of the main executable: the first executable file mapped after an exec (or, when
    /// the recording has no exec, the first executable file mapping).
    pub main_binary: Option<String>,
    /// What could not be attributed.
    pub stats: Stats,
    /// For each profile of `profiles`, the self weight of each of its functions (by index)
    /// from the first half of the attributed samples, in time order: the second half's is the
    /// rest. How much the halves agree says whether the recording was long enough.
    pub first_half: Vec<Vec<u64>>,
}

/// One executable file mapping of a process.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    end: u64,
    pgoff: u64,
    binary: u32,
}

/// One process's mappings by start address.
type ProcessMap = BTreeMap<u64, Mapping>;

/// The mappings of every process. A forked child shares its parent's table until either of them
/// maps something (copy on write), and `held` counts the mappings of all distinct tables, so
/// that the total can be capped.
#[derive(Default)]
struct ProcessMaps {
    maps: HashMap<i32, Rc<ProcessMap>>,
    held: usize,
}

impl ProcessMaps {
    /// The mappings of `pid`, if it mapped (or inherited) any.
    fn get(&self, pid: i32) -> Option<&ProcessMap> {
        self.maps.get(&pid).map(|m| &**m)
    }

    /// Forgets a table that `pid` no longer uses; its mappings stop counting when no other
    /// process shares it.
    fn release(&mut self, old: Option<Rc<ProcessMap>>) {
        if let Some(old) = old {
            if Rc::strong_count(&old) == 1 {
                self.held -= old.len();
            }
        }
    }

    /// An exec: `pid` starts with no mappings.
    fn exec(&mut self, pid: i32) {
        let old = self.maps.remove(&pid);
        self.release(old);
    }

    /// A fork: `pid` shares the table of `ppid`.
    fn fork(&mut self, pid: i32, ppid: i32) {
        if let Some(parent) = self.maps.get(&ppid).cloned() {
            let old = self.maps.insert(pid, parent);
            self.release(old);
        }
    }

    /// Adds a mapping to `pid`, replacing what it overlaps; `Err` with the count when the
    /// processes would hold more than `cap` mappings.
    fn map(&mut self, pid: i32, start: u64, m: Mapping, cap: usize) -> Result<(), usize> {
        let table = self.maps.entry(pid).or_default();
        let mut held = self.held;
        if Rc::strong_count(table) > 1 {
            // The shared table is about to be copied.
            held += table.len();
        }
        // A new mapping replaces whatever overlapped it.
        let overlapping: Vec<u64> = table
            .range(..m.end)
            .filter(|(_, o)| o.end > start)
            .map(|(&s, _)| s)
            .collect();
        held = held + 1 - overlapping.len();
        if held > cap {
            return Err(held);
        }
        let table = Rc::make_mut(table);
        for s in overlapping {
            table.remove(&s);
        }
        table.insert(start, m);
        self.held = held;
        Ok(())
    }
}

/// Per-binary facts gathered while reading records.
#[derive(Debug, Default)]
struct BinaryInfo {
    path: String,
    mmap_build_id: Option<String>,
    /// Not a binary on disk: the kind of mapping ([`outside_kind`]) whose samples are counted,
    /// never attributed.
    outside: Option<&'static str>,
}

/// What kind of executable mapping a path that is no file on disk names, as the one-line
/// report spells it: JIT compilers put their code in anonymous memory (`//anon`; `perf report`
/// names it after `/tmp/perf-PID.map` when the JIT writes one) or in `memfd:` files; the
/// kernel maps `[vdso]`; a binary replaced or removed since it started is `(deleted)`.
fn outside_kind(path: &[u8]) -> &'static str {
    if path.starts_with(b"//anon") || path.is_empty() {
        "anonymous memory (JIT)"
    } else if path.starts_with(b"memfd:") || path.starts_with(b"/memfd:") {
        "memfd (JIT)"
    } else if path.ends_with(b" (deleted)") {
        "deleted files"
    } else if path.starts_with(b"[vdso]") || path.starts_with(b"[vsyscall]") {
        "[vdso]"
    } else {
        "other mappings"
    }
}

/// A user frame resolved to a binary: (binary index, file offset).
type Frame = (u32, u64);

/// A branch-stack entry whose two ends are in file mappings of one binary.
#[derive(Debug, Clone, Copy)]
struct BranchFrames {
    from: Frame,
    to: Frame,
    /// The event records only calls (`-j any_call`): the entry is a call wherever in a sized
    /// function it lands, not only at the function's first byte.
    call: bool,
}

/// Size of `struct perf_file_header`.
const HEADER_SIZE: u64 = 104;
/// Size of `struct perf_file_section`.
const SECTION_SIZE: u64 = 16;
/// Smallest `perf_event_attr` (`PERF_ATTR_SIZE_VER0`).
const ATTR_SIZE_VER0: u64 = 64;
/// Feature bit of the event descriptions (`HEADER_EVENT_DESC`).
const FEATURE_EVENT_DESC: u32 = 12;
/// Byte offset of the build-id length inside an `MMAP2` body (pid, tid, addr, len, pgoff).
const MMAP2_BUILD_ID_LEN_AT: usize = 32;

/// Reads a `perf.data` file held in `data`. `path` names it in errors.
pub fn read(
    path: &str,
    data: &[u8],
    mode: Mode,
    resolver: &mut dyn BinaryResolver,
) -> Result<PerfImport, Error> {
    read_limited(path, data, mode, resolver, MAX_MAPPINGS, &[])
}

/// [`read`], leaving out the samples of the processes `exclude_pids` (a whole-machine recording's
/// own profiler, which is no target): they are counted in [`Stats::excluded_samples`] and
/// attributed to no binary.
pub fn read_excluding(
    path: &str,
    data: &[u8],
    mode: Mode,
    resolver: &mut dyn BinaryResolver,
    exclude_pids: &[i32],
) -> Result<PerfImport, Error> {
    read_limited(path, data, mode, resolver, MAX_MAPPINGS, exclude_pids)
}

/// [`read_excluding`] with the cap on mappings held as a parameter (tests use a small one).
fn read_limited(
    path: &str,
    data: &[u8],
    mode: Mode,
    resolver: &mut dyn BinaryResolver,
    max_mappings: usize,
    exclude_pids: &[i32],
) -> Result<PerfImport, Error> {
    let layout = check_layout(path, data)?;
    let corrupt = |(offset, message)| Error::Corrupt {
        path: path.to_string(),
        offset,
        message,
    };
    let section = (layout.data_offset, layout.data_end);
    perf_branch::records(data, section, layout.big)
        .try_for_each(|r| r.map(drop).map_err(corrupt))?;
    let attrs = perf_branch::attrs(data, &layout.attrs, layout.big);
    if let Some(attrs) = &attrs {
        perf_branch::check_samples(data, section, attrs, layout.big).map_err(corrupt)?;
    }
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        collect(path, data, &layout, attrs, max_mappings, exclude_pids)
    }))
    .map_err(|_| Error::Corrupt {
        path: path.to_string(),
        offset: layout.data_offset,
        message: "records could not be parsed (the perf.data parser failed)".into(),
    })??;
    attribute(parsed, mode, resolver)
}

/// Where the records and the event attributes are, checked against the file size.
struct Layout {
    data_offset: u64,
    data_end: u64,
    big: bool,
    attrs: AttrSource,
}

/// The `u64` at byte `at`, in the file's byte order; `None` past the end.
pub(crate) fn u64_at(data: &[u8], at: u64, big: bool) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    let b: [u8; 8] = data.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(if big {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    })
}

/// The `u32` at byte `at`, in the file's byte order; `None` past the end.
pub(crate) fn u32_at(data: &[u8], at: u64, big: bool) -> Option<u32> {
    let at = usize::try_from(at).ok()?;
    let b: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if big {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

/// Checks the header, the sections it points to and the feature table against the file size.
fn check_layout(path: &str, data: &[u8]) -> Result<Layout, Error> {
    let len = data.len() as u64;
    let corrupt = |offset: u64, message: String| Error::Corrupt {
        path: path.to_string(),
        offset,
        message,
    };
    let big = match data.get(..8) {
        Some(b"PERFILE2") => false,
        Some(b"2ELIFREP") => true,
        Some(_) if data.starts_with(b"PERFILE") || data.starts_with(b"PERFFILE") => {
            return Err(Error::Format {
                path: path.to_string(),
                message: "unsupported perf.data version (only PERFILE2 files are read)".into(),
            })
        }
        _ => {
            return Err(Error::Format {
                path: path.to_string(),
                message: "not a perf.data file (no PERFILE2 magic)".into(),
            })
        }
    };
    if len < HEADER_SIZE {
        return Err(corrupt(
            0,
            format!("perf file header needs {HEADER_SIZE} bytes, the file has {len} (truncated?)"),
        ));
    }
    let rd = |at: u64| u64_at(data, at, big).unwrap_or(0);
    let header_size = rd(8);
    if header_size < HEADER_SIZE || header_size > len {
        return Err(corrupt(
            8,
            format!("perf file header: bad header size {header_size}"),
        ));
    }
    let attr_size = rd(16);
    if attr_size < ATTR_SIZE_VER0 {
        return Err(corrupt(
            16,
            format!("perf file header: bad attr size {attr_size}"),
        ));
    }
    let section = |at: u64, what: &str| -> Result<(u64, u64), Error> {
        let (off, size) = (rd(at), rd(at + 8));
        match off.checked_add(size) {
            Some(end) if end <= len => Ok((off, end)),
            _ => Err(corrupt(
                at,
                format!(
                    "{what} section ({size} bytes at offset {off}) extends past the end of the \
                     file ({len} bytes): truncated?"
                ),
            )),
        }
    };
    let attr_section = section(24, "attribute")?;
    let (data_offset, data_end) = section(40, "data")?;
    section(56, "event types")?;
    // The feature table follows the data section: one perf_file_section per feature bit set.
    let mut table = data_end;
    let mut event_desc = None;
    for word in 0..4u64 {
        let bits = rd(72 + 8 * word);
        for bit in 0..64u32 {
            if bits & (1 << bit) == 0 {
                continue;
            }
            if !table.checked_add(SECTION_SIZE).is_some_and(|e| e <= len) {
                return Err(corrupt(
                    table,
                    "feature section table extends past the end of the file: truncated?".into(),
                ));
            }
            let feature = word as u32 * 64 + bit;
            let (off, end) = section(table, &format!("feature {feature}"))?;
            if feature == FEATURE_EVENT_DESC {
                check_event_desc(data, off, end, big).map_err(|at| {
                    corrupt(
                        at,
                        "event description (HEADER_EVENT_DESC) is damaged".into(),
                    )
                })?;
                event_desc = Some((off, end));
            }
            table += SECTION_SIZE;
        }
    }
    Ok(Layout {
        data_offset,
        data_end,
        big,
        attrs: AttrSource {
            event_desc,
            attr_section,
            attr_entry_size: attr_size,
        },
    })
}

/// Sizes of `perf_event_attr` versions 0 to 7 (`PERF_ATTR_SIZE_VER*`); the reader also takes any
/// size above the last one, skipping the fields it does not know.
const ATTR_VERSION_SIZES: [u64; 8] = [64, 72, 80, 96, 104, 112, 120, 128];

fn is_whole_attr_size(size: u64) -> bool {
    ATTR_VERSION_SIZES.contains(&size) || size > ATTR_VERSION_SIZES[7]
}

/// Walks `HEADER_EVENT_DESC` (`u32 nr, u32 attr_size`, then per event: attr, `u32 nr_ids`, a
/// string `u32 len` + bytes, `u64 ids[nr_ids]`) so that every count in it is backed by bytes.
/// Returns the offset of the first bad field.
fn check_event_desc(data: &[u8], start: u64, end: u64, big: bool) -> Result<(), u64> {
    let nr = u32_at(data, start, big)
        .filter(|_| start + 8 <= end)
        .ok_or(start)?;
    let attr_size = u64::from(u32_at(data, start + 4, big).ok_or(start + 4)?);
    if attr_size < ATTR_SIZE_VER0 {
        return Err(start + 4);
    }
    let mut at = start + 8;
    for _ in 0..nr {
        let ids_at = at
            .checked_add(attr_size)
            .filter(|&p| p + 4 <= end)
            .ok_or(at)?;
        // The attribute's own size must be one `linux-perf-event-reader` reads whole: it reads
        // the fields of the largest version not above that size, so a size between two versions
        // would leave it mid-attribute, reading the id count from the wrong bytes (and
        // allocating by it). Found by fuzzing: tests/fixtures/perf/regress-attr-size-between-versions.bin.
        let own_size = u64::from(u32_at(data, at + 4, big).ok_or(at + 4)?);
        if own_size > attr_size || !is_whole_attr_size(own_size) {
            return Err(at + 4);
        }
        let nr_ids = u64::from(u32_at(data, ids_at, big).ok_or(ids_at)?);
        let str_at = ids_at + 4;
        let str_len = u64::from(
            u32_at(data, str_at, big)
                .filter(|_| str_at + 4 <= end)
                .ok_or(str_at)?,
        );
        at = (str_at + 4)
            .checked_add(str_len)
            .and_then(|p| p.checked_add(nr_ids.checked_mul(8)?))
            .filter(|&p| p <= end)
            .ok_or(str_at)?;
    }
    Ok(())
}

/// Everything read from the records, before any binary is opened.
struct Collected {
    binaries: Vec<BinaryInfo>,
    /// Frames of all attributable samples, flattened; `sample_ends[i]` is the end of sample `i`.
    frames: Vec<Frame>,
    sample_ends: Vec<usize>,
    /// Branch-stack entries of all samples whose ends map to one binary.
    branches: Vec<BranchFrames>,
    recorded_build_ids: HashMap<Vec<u8>, String>,
    main_binary: Option<u32>,
    event: Option<String>,
    stats: Stats,
}

/// Is this a path of a file on disk (not `[vdso]`, `//anon`, `[heap]`, a deleted file...)?
fn is_file_path(path: &[u8]) -> bool {
    path.starts_with(b"/") && !path.ends_with(b" (deleted)") && !path.starts_with(b"//anon")
}

fn collect(
    path: &str,
    data: &[u8],
    layout: &Layout,
    attrs: Option<Attrs>,
    max_mappings: usize,
    exclude_pids: &[i32],
) -> Result<Collected, Error> {
    let corrupt = |message: String| Error::Corrupt {
        path: path.to_string(),
        offset: layout.data_offset,
        message,
    };
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(std::io::Cursor::new(data)).map_err(|e| Error::Corrupt {
        path: path.to_string(),
        offset: 0,
        message: format!("perf file header or attributes: {e}"),
    })?;

    // The raw attributes read by `perf_branch`, unless they disagree with the crate's count;
    // then the crate's parsed values (which lack only `PERF_SAMPLE_BRANCH_COUNTERS`).
    let parsed_attrs = perf_file.event_attributes();
    let attrs: Vec<RawAttr> = match attrs {
        Some(a) if a.attrs.len() == parsed_attrs.len() => a.attrs,
        _ => parsed_attrs
            .iter()
            .map(|d| RawAttr {
                sample_type: d.attr.sample_format.bits(),
                read_format: d.attr.read_format.bits(),
                branch_sample_type: d.attr.branch_sample_format.bits(),
            })
            .collect(),
    };
    let mut event_names: Vec<&str> = perf_file
        .event_attributes()
        .iter()
        .filter_map(|a| a.name())
        // perf adds a `dummy` event of its own to system-wide and attached recordings (it
        // carries side-band records); it is no sampled event.
        .filter(|n| !n.starts_with("dummy"))
        .collect();
    event_names.dedup();
    let event = (!event_names.is_empty()).then(|| event_names.join(","));

    let mut recorded_build_ids = HashMap::new();
    for (key, info) in perf_file.build_ids().unwrap_or_default() {
        if let DsoKey::User { full_path, .. } = key {
            if !info.build_id.is_empty() {
                recorded_build_ids.insert(full_path, hex(&info.build_id));
            }
        }
    }

    let mut out = Collected {
        binaries: Vec::new(),
        frames: Vec::new(),
        sample_ends: Vec::new(),
        branches: Vec::new(),
        recorded_build_ids,
        main_binary: None,
        event,
        stats: Stats::default(),
    };
    let mut binary_ids: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut maps = ProcessMaps::default();
    let mut first_mapped: Option<u32> = None;
    let mut after_exec = false;

    while let Some(record) = record_iter.next_record(&mut perf_file).map_err(|e| {
        corrupt(format!(
            "data section ({} bytes): {e}",
            layout.data_end - layout.data_offset
        ))
    })? {
        let PerfFileRecord::EventRecord { record, attr_index } = record else {
            continue;
        };
        if record.record_type == RecordType(PERF_RECORD_MMAP2)
            && record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0
        {
            let body = record.data.as_slice();
            if !body.get(MMAP2_BUILD_ID_LEN_AT).is_some_and(|&n| n <= 20) {
                return Err(corrupt(
                    "MMAP2 record: build-id longer than 20 bytes".into(),
                ));
            }
        }
        let parsed = record
            .parse()
            .map_err(|e| corrupt(format!("{:?} record: {e}", record.record_type)))?;
        // (pid, start, len, pgoff, path, build-id) of an executable user file mapping.
        let mapping = match &parsed {
            EventRecord::Mmap(m) if m.is_executable && m.cpu_mode == CpuMode::User => Some((
                m.pid,
                m.address,
                m.length,
                m.page_offset,
                m.path.as_slice(),
                None,
            )),
            EventRecord::Mmap2(m) if m.protection & 4 != 0 && m.cpu_mode == CpuMode::User => {
                let bid = match &m.file_id {
                    Mmap2FileId::BuildId(b) if !b.is_empty() => Some(hex(b)),
                    _ => None,
                };
                Some((
                    m.pid,
                    m.address,
                    m.length,
                    m.page_offset,
                    m.path.as_slice(),
                    bid,
                ))
            }
            EventRecord::Comm(c) if c.is_execve => {
                maps.exec(c.pid);
                after_exec = true;
                None
            }
            EventRecord::Fork(f) if f.pid != f.ppid => {
                maps.fork(f.pid, f.ppid);
                None
            }
            EventRecord::Sample(s) => {
                out.stats.samples += 1;
                let pid = s.pid.unwrap_or(-1);
                if exclude_pids.contains(&pid) {
                    out.stats.excluded_samples += 1;
                    continue;
                }
                let attr = attrs.get(attr_index).copied().unwrap_or_default();
                let stack = perf_branch::branch_stack(&record.data.as_slice(), &attr, layout.big)
                    .map_err(|(_, m)| corrupt(m))?;
                if let Some(stack) = &stack {
                    out.stats.branches += stack.len() as u64;
                    let call = perf_branch::is_call_filter(attr.branch_sample_type);
                    let map = maps.get(pid);
                    let binaries = &out.binaries;
                    let frame = |addr| {
                        let (s0, m) = find_mapping(map?, addr)?;
                        binaries[m.binary as usize]
                            .outside
                            .is_none()
                            .then(|| (m.binary, (addr - s0).wrapping_add(m.pgoff)))
                    };
                    let found: Vec<BranchFrames> = stack
                        .iter()
                        .filter_map(|b| match (frame(b.from), frame(b.to)) {
                            (Some(from), Some(to)) if from.0 == to.0 => {
                                Some(BranchFrames { from, to, call })
                            }
                            _ => None,
                        })
                        .collect();
                    out.branches.extend(found);
                }
                let mut frames = user_frames(s.ip, s.callchain.as_ref(), s.cpu_mode);
                // With a branch stack, calls come from it alone: keep only the sampled IP.
                if let (Some(f), Some(_)) = (frames.as_mut(), &stack) {
                    f.truncate(1);
                }
                let Some(frames) = frames else {
                    out.stats.kernel_samples += 1;
                    if pid == 0 {
                        out.stats.idle_samples += 1;
                    }
                    continue;
                };
                let map = maps.get(pid);
                let start = out.frames.len();
                for (i, addr) in frames.into_iter().enumerate() {
                    let found = map.and_then(|m| find_mapping(m, addr));
                    let outside = match found {
                        Some((_, m)) => out.binaries[m.binary as usize].outside,
                        None => Some("no mapping"),
                    };
                    match (found, outside) {
                        (Some((s0, m)), None) => out
                            .frames
                            .push((m.binary, (addr - s0).wrapping_add(m.pgoff))),
                        // The chain stops being attributable at the first frame outside a
                        // binary.
                        (_, kind) => {
                            if i == 0 {
                                out.stats.unmapped_samples += 1;
                                *out.stats
                                    .unmapped_kinds
                                    .entry(kind.unwrap_or("no mapping"))
                                    .or_default() += 1;
                            }
                            break;
                        }
                    }
                }
                if out.frames.len() > start {
                    out.sample_ends.push(out.frames.len());
                }
                None
            }
            _ => None,
        };
        let Some((pid, start, len, pgoff, path_bytes, bid)) = mapping else {
            continue;
        };
        if len == 0 {
            continue;
        }
        // A mapping of no file on disk is kept under its kind (one entry per kind, keyed by a
        // NUL-led name no path has), so that its samples are counted by kind.
        let outside = (!is_file_path(&path_bytes)).then(|| outside_kind(&path_bytes));
        let key = match outside {
            Some(kind) => [b"\0".as_slice(), kind.as_bytes()].concat(),
            None => path_bytes.to_vec(),
        };
        let next_id = out.binaries.len() as u32;
        let id = *binary_ids.entry(key).or_insert_with(|| {
            out.binaries.push(BinaryInfo {
                path: String::from_utf8_lossy(&path_bytes).into_owned(),
                mmap_build_id: None,
                outside,
            });
            next_id
        });
        if outside.is_none() {
            if bid.is_some() {
                out.binaries[id as usize].mmap_build_id = bid;
            }
            if first_mapped.is_none() {
                first_mapped = Some(id);
            }
            if after_exec && out.main_binary.is_none() {
                out.main_binary = Some(id);
            }
        }
        let end = start.saturating_add(len);
        let mapping = Mapping {
            end,
            pgoff,
            binary: id,
        };
        maps.map(pid, start, mapping, max_mappings)
            .map_err(|held| {
                corrupt(format!(
                    "the processes would hold {held} file mappings, more than the limit of \
                 {max_mappings} (FORK records copy a process's mappings)"
                ))
            })?;
    }
    if out.main_binary.is_none() {
        out.main_binary = first_mapped;
    }
    Ok(out)
}

fn find_mapping(map: &BTreeMap<u64, Mapping>, addr: u64) -> Option<(u64, &Mapping)> {
    let (&start, m) = map.range(..=addr).next_back()?;
    (addr < m.end).then_some((start, m))
}

/// The user frames of a sample, leaf first, return addresses already decremented; `None` when
/// the sample was not taken in user mode.
fn user_frames(
    ip: Option<u64>,
    callchain: Option<&linux_perf_data::linux_perf_event_reader::RawDataU64<'_>>,
    cpu_mode: CpuMode,
) -> Option<Vec<u64>> {
    if cpu_mode != CpuMode::User {
        return None;
    }
    let Some(chain) = callchain else {
        return ip.map(|ip| vec![ip]);
    };
    // Without markers the chain is all user frames (the sample was taken in user mode).
    let mut in_user = true;
    let mut frames = Vec::new();
    for i in 0..chain.len() {
        let Some(addr) = chain.get(i) else { break };
        if addr >= PERF_CONTEXT_MAX {
            in_user = addr == PERF_CONTEXT_USER;
            continue;
        }
        if in_user {
            // Every frame after the first is a return address: step back into the call.
            frames.push(if frames.is_empty() {
                addr
            } else {
                addr.wrapping_sub(1)
            });
        }
    }
    if frames.is_empty() {
        frames.extend(ip);
    }
    (!frames.is_empty()).then_some(frames)
}

/// A binary that was resolved: its ELF facts, its profile so far and its sample count.
struct Resolved {
    elf: Binary,
    builder: ProfileBuilder,
    samples: u64,
    /// Self weight per function index of the ELF from the first half of the samples.
    first_half: HashMap<usize, u64>,
    /// Samples whose address matched no function symbol.
    unsymbolized: u64,
}

fn attribute(
    c: Collected,
    mode: Mode,
    resolver: &mut dyn BinaryResolver,
) -> Result<PerfImport, Error> {
    // Samples per binary (by leaf frame), to know which binaries to resolve.
    let mut leaf_samples = vec![0u64; c.binaries.len()];
    let mut has_edges = vec![false; c.binaries.len()];
    let mut start = 0;
    for &end in &c.sample_ends {
        let s = &c.frames[start..end];
        leaf_samples[s[0].0 as usize] += 1;
        for w in s.windows(2) {
            if w[0].0 == w[1].0 {
                has_edges[w[0].0 as usize] = true;
            }
        }
        start = end;
    }
    for b in &c.branches {
        has_edges[b.from.0 as usize] = true;
    }
    let mut stats = c.stats;
    let mut resolved: Vec<Option<Resolved>> = Vec::with_capacity(c.binaries.len());
    // Binaries are resolved in path order so that resolver calls (and their errors) are
    // deterministic; `order` maps that back to binary ids.
    let mut order: Vec<usize> = (0..c.binaries.len()).collect();
    order.sort_by(|&a, &b| c.binaries[a].path.cmp(&c.binaries[b].path));
    resolved.resize_with(c.binaries.len(), || None);
    let has_branches = !c.branches.is_empty();
    for id in order {
        let info = &c.binaries[id];
        let wanted =
            leaf_samples[id] > 0 || ((mode == Mode::Chain || has_branches) && has_edges[id]);
        if !wanted {
            continue;
        }
        let recorded = info
            .mmap_build_id
            .clone()
            .or_else(|| c.recorded_build_ids.get(info.path.as_bytes()).cloned());
        let bytes = resolver
            .resolve(&info.path, recorded.as_deref())
            .map_err(|message| Error::Resolve {
                binary: info.path.clone(),
                message,
            })?;
        let Some(bytes) = bytes else {
            stats
                .missing_binaries
                .push((info.path.clone(), leaf_samples[id]));
            continue;
        };
        let elf = Binary::parse(&info.path, &bytes)?;
        if let Some(rec) = &recorded {
            let found = elf.build_id.clone().unwrap_or_else(|| "none".into());
            if *rec != found {
                return Err(Error::BuildIdMismatch {
                    binary: info.path.clone(),
                    recorded: rec.clone(),
                    found,
                });
            }
        }
        let mut meta = Meta {
            binary: info.path.clone(),
            build_id: elf.build_id.clone().or(recorded),
            arch: Some(elf.arch.clone()),
            source: "perf".into(),
            event: c.event.clone(),
            ..Meta::default()
        };
        meta.extra.insert("mode".into(), mode.name().into());
        resolved[id] = Some(Resolved {
            elf,
            builder: ProfileBuilder::new(meta),
            samples: 0,
            first_half: HashMap::new(),
            unsymbolized: 0,
        });
    }

    // Function index of each frame, or None when the frame's binary is unresolved or the
    // address is in no symbol.
    let lookup = |resolved: &[Option<Resolved>], (bin, off): Frame| -> Option<usize> {
        let r = resolved[bin as usize].as_ref()?;
        r.elf.lookup(r.elf.offset_to_vaddr(off)?)
    };
    let mut start = 0;
    let half = c.sample_ends.len() / 2;
    for (k, &end) in c.sample_ends.iter().enumerate() {
        let s = &c.frames[start..end];
        start = end;
        let leaf_bin = s[0].0 as usize;
        let funcs: Vec<Option<usize>> = s.iter().map(|&f| lookup(&resolved, f)).collect();
        if let Some(r) = resolved[leaf_bin].as_mut() {
            r.samples += 1;
            match funcs[0] {
                Some(f) => {
                    if k < half {
                        *r.first_half.entry(f).or_default() += 1;
                    }
                    let sym = &r.elf.functions[f];
                    r.builder.add_self(&sym.key, 1);
                    set_size(&mut r.builder, &sym.key, sym.size);
                    // `lookup` found `f` at this address, so it maps and lies in the symbol.
                    if let Some(at) = r.elf.offset_to_vaddr(s[0].1) {
                        r.builder
                            .add_sample(&sym.key, at.saturating_sub(sym.address), 1);
                    }
                }
                None => {
                    let (_, off) = s[0];
                    if r.elf.offset_to_vaddr(off).is_some_and(|a| r.elf.in_plt(a)) {
                        stats.plt_samples += 1;
                    } else {
                        stats.unsymbolized_samples += 1;
                        r.unsymbolized += 1;
                    }
                }
            }
        }
        let pairs = match mode {
            Mode::Leaf => s.len().min(2).saturating_sub(1),
            Mode::Chain => s.len() - 1,
        };
        for i in 0..pairs {
            // Frame i+1 called frame i.
            let (callee_bin, caller_bin) = (s[i].0, s[i + 1].0);
            if callee_bin != caller_bin {
                continue;
            }
            let (Some(callee), Some(caller)) = (funcs[i], funcs[i + 1]) else {
                continue;
            };
            if let Some(r) = resolved[caller_bin as usize].as_mut() {
                let (a, b) = (&r.elf.functions[caller], &r.elf.functions[callee]);
                let (ak, asz, bk, bsz) = (a.key.clone(), a.size, b.key.clone(), b.size);
                r.builder.add_call(&ak, &bk, 1);
                set_size(&mut r.builder, &ak, asz);
                set_size(&mut r.builder, &bk, bsz);
            }
        }
    }

    // Branch-stack entries (see the module docs): a call edge when the target is the first byte
    // of a function, or, when the event records only calls, anywhere inside a function whose
    // symbol gives its size. One unit per entry.
    for b in &c.branches {
        let Some(r) = resolved[b.from.0 as usize].as_mut() else {
            continue;
        };
        let vaddr = |off| r.elf.offset_to_vaddr(off);
        let (Some(from), Some(to)) = (vaddr(b.from.1), vaddr(b.to.1)) else {
            continue;
        };
        let (Some(caller), Some(callee)) = (r.elf.lookup(from), r.elf.lookup(to)) else {
            continue;
        };
        let (a, t) = (&r.elf.functions[caller], &r.elf.functions[callee]);
        if t.address != to && !(b.call && t.size > 0) {
            continue;
        }
        let (ak, asz, tk, tsz) = (a.key.clone(), a.size, t.key.clone(), t.size);
        r.builder.add_call(&ak, &tk, 1);
        set_size(&mut r.builder, &ak, asz);
        set_size(&mut r.builder, &tk, tsz);
        stats.branch_calls += 1;
    }

    stats.unsymbolized_by_binary = resolved
        .iter()
        .enumerate()
        .filter_map(|(id, r)| {
            let r = r.as_ref()?;
            (r.unsymbolized > 0).then(|| (c.binaries[id].path.clone(), r.unsymbolized))
        })
        .collect();
    stats
        .unsymbolized_by_binary
        .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut built: Vec<(Profile, Vec<u64>)> = resolved
        .into_iter()
        .flatten()
        // A binary none of whose samples matched a symbol (a stripped library's internals)
        // has nothing to order: no profile, its samples are in `unsymbolized_samples`.
        .filter(|r| !r.builder.is_empty())
        .map(|mut r| {
            r.builder.meta_mut().total = r.samples;
            let p = r.builder.build();
            let mut first = vec![0u64; p.functions.len()];
            for (f, w) in &r.first_half {
                if let Some(i) = p.find(&r.elf.functions[*f].key) {
                    first[i as usize] += w;
                }
            }
            (p, first)
        })
        .collect();
    built.sort_by(|a, b| a.0.meta.binary.cmp(&b.0.meta.binary));
    let (profiles, first_half) = built.into_iter().unzip();
    stats.missing_binaries.sort();
    Ok(PerfImport {
        profiles,
        main_binary: c.main_binary.map(|id| c.binaries[id as usize].path.clone()),
        stats,
        first_half,
    })
}

/// Records a known size (0 means the symbol did not say).
fn set_size(b: &mut ProfileBuilder, key: &FuncKey, size: u64) {
    if size > 0 {
        b.set_size(key, size);
    } else {
        b.touch(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linux_perf_data::linux_perf_event_reader::constants::PERF_CONTEXT_KERNEL;
    use linux_perf_data::linux_perf_event_reader::RawDataU64;

    fn chain(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    // Kernel frames are dropped, the first user frame is kept as is, return addresses step back.
    #[test]
    fn user_frames_skip_markers_and_decrement_returns() {
        let bytes = chain(&[PERF_CONTEXT_USER, 0x1010, 0x2020, 0x3030]);
        let raw = RawDataU64::from_raw_data::<byteorder::NativeEndian>((&bytes[..]).into());
        assert_eq!(
            user_frames(Some(0x1010), Some(&raw), CpuMode::User),
            Some(vec![0x1010, 0x201f, 0x302f])
        );
        let bytes = chain(&[
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0000,
            PERF_CONTEXT_USER,
            0x10,
        ]);
        let raw = RawDataU64::from_raw_data::<byteorder::NativeEndian>((&bytes[..]).into());
        assert_eq!(user_frames(Some(0x10), Some(&raw), CpuMode::Kernel), None);
        assert_eq!(
            user_frames(Some(0x10), None, CpuMode::User),
            Some(vec![0x10])
        );
    }

    // Fuzz find (fuzz/README.md): a sample whose callchain length times 8 overflows makes
    // linux-perf-event-reader panic (debug builds); it must come back as a corrupt-file error.
    #[test]
    fn regress_callchain_length_overflow_is_corrupt_not_panic() {
        let data = include_bytes!("../../../tests/fixtures/perf/regress-callchain-overflow.bin");
        let mut none = |_: &str, _: Option<&str>| -> Result<Option<Vec<u8>>, String> { Ok(None) };
        let e = read("r.data", data, Mode::Leaf, &mut none)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("r.data: offset "), "{e}");
    }

    /// `hot.perf.data` with, after its records, `n` more executable mappings of `hot` in its
    /// process, `forks` FORK records of that process, and, with `child_maps`, one more mapping
    /// in each child. Feature sections are dropped (they followed the data section).
    fn forked(n: u64, forks: u32, child_maps: bool) -> Vec<u8> {
        let d: &[u8] = include_bytes!("../../../tests/fixtures/perf/hot.perf.data");
        let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let (doff, dsz) = (u64_at(d, 40) as usize, u64_at(d, 48) as usize);
        let mut out = d[..doff + dsz].to_vec();
        // The first MMAP2 record (type 10) maps `hot` in the recorded process.
        let mut at = doff;
        while u32::from_le_bytes(d[at..at + 4].try_into().unwrap()) != 10 {
            at += u16::from_le_bytes(d[at + 6..at + 8].try_into().unwrap()) as usize;
        }
        let mmap = &d[at..at + u16::from_le_bytes(d[at + 6..at + 8].try_into().unwrap()) as usize];
        let ppid = u32::from_le_bytes(mmap[8..12].try_into().unwrap());
        // Each record's sample_id trailer is (pid, tid, time): times keep the order written.
        let mut time = 1u64 << 60;
        let push_mmap = |out: &mut Vec<u8>, pid: u32, addr: u64, time: u64| {
            let mut r = mmap.to_vec();
            let len = r.len();
            for at in [8, 12, len - 16, len - 12] {
                r[at..at + 4].copy_from_slice(&pid.to_le_bytes());
            }
            r[16..24].copy_from_slice(&addr.to_le_bytes());
            r[24..32].copy_from_slice(&0x1000u64.to_le_bytes());
            r[len - 8..].copy_from_slice(&time.to_le_bytes());
            out.extend(r);
        };
        for i in 0..n {
            time += 1;
            push_mmap(&mut out, ppid, 0x1_0000_0000 + i * 0x10000, time);
        }
        for j in 0..forks {
            let pid = 100_000 + j;
            time += 1;
            // perf_event_header (FORK = 7, size 48), pid, ppid, tid, ptid, time, trailer.
            out.extend(7u32.to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(48u16.to_le_bytes());
            for v in [pid, ppid, pid, ppid] {
                out.extend(v.to_le_bytes());
            }
            out.extend(time.to_le_bytes());
            out.extend(pid.to_le_bytes());
            out.extend(pid.to_le_bytes());
            out.extend(time.to_le_bytes());
            if child_maps {
                time += 1;
                push_mmap(&mut out, pid, 0x2_0000_0000, time);
            }
        }
        // FINISHED_ROUND.
        out.extend([68, 0, 0, 0, 0, 0, 8, 0]);
        let size = (out.len() - doff) as u64;
        out[48..56].copy_from_slice(&size.to_le_bytes());
        out[56..104].fill(0);
        out
    }

    // Audit find: every FORK copied the parent's mapping table, so 2000 mappings and 10000
    // forks (a 692 KB file) held 20M mappings, 1.3 GB. Forked tables are shared until written,
    // and the mappings held are capped.
    #[test]
    fn regress_fork_amplification_is_shared_then_capped() {
        let mut none = |_: &str, _: Option<&str>| -> Result<Option<Vec<u8>>, String> { Ok(None) };
        // 200 forks of a process with 104 mappings share one table: within a cap of 1000.
        let data = forked(100, 200, false);
        let r = read_limited("f.data", &data, Mode::Leaf, &mut none, 1000, &[]).unwrap();
        assert_eq!(r.stats.samples, 41);
        // A mapping in each child copies the table: over the cap, a one-line error.
        let data = forked(100, 200, true);
        let e = read_limited("f.data", &data, Mode::Leaf, &mut none, 1000, &[])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("f.data: offset 264: the processes would hold 1"),
            "{e}"
        );
        assert!(e.ends_with("more than the limit of 1000 (FORK records copy a process's mappings)"));
        // The default cap lets that recording through.
        assert!(read("f.data", &data, Mode::Leaf, &mut none).is_ok());
    }

    // Fuzzing find: an AUXTRACE record claiming 94 TB of trace data made the perf.data parser
    // allocate it (abort). It is now a one-line error at the record, before the parser runs.
    #[test]
    fn regress_auxtrace_claiming_too_much_is_refused() {
        let mut none = |_: &str, _: Option<&str>| -> Result<Option<Vec<u8>>, String> { Ok(None) };
        let data: &[u8] = include_bytes!("../../../fuzz/corpus/perf_data/auxtrace-huge.perf.data");
        let e = read("c.data", data, Mode::Leaf, &mut none)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("c.data: offset "), "{e}");
        assert!(e.contains("AUXTRACE record claims"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    // A header pointing past the end of the file is reported with the offset of the field.
    #[test]
    fn layout_errors_name_offsets() {
        let mut h = vec![0u8; 104];
        h[..8].copy_from_slice(b"PERFILE2");
        h[8..16].copy_from_slice(&104u64.to_le_bytes());
        h[16..24].copy_from_slice(&128u64.to_le_bytes());
        h[40..48].copy_from_slice(&104u64.to_le_bytes());
        h[48..56].copy_from_slice(&4096u64.to_le_bytes());
        let e = check_layout("p.data", &h).err().unwrap().to_string();
        assert!(
            e.starts_with("p.data: offset 40: data section (4096 bytes at offset 104)"),
            "{e}"
        );
        let e = check_layout("p.data", b"hello").err().unwrap().to_string();
        assert_eq!(e, "p.data: not a perf.data file (no PERFILE2 magic)");
    }
}
