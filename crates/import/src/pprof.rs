//! Importer for pprof's `profile.proto`, the format written by Go's `runtime/pprof` and read by
//! `go tool pprof`, and exported by Parca, Pyroscope and Google Cloud Profiler.
//!
//! The schema is `proto/profile.proto` in github.com/google/pprof (package
//! `perftools.profiles`). A file is one `Profile` message, gzip-compressed as Go writes it or raw
//! (both are accepted; gzip is recognised by its magic `1f 8b`). The messages are decoded with
//! `prost` through hand-written structs that declare only the fields this importer needs
//! (module `pb` below, field numbers from the schema); protobuf skips the others. Every string
//! is an index into `string_table`, whose entry 0 must be the empty string, and objects refer
//! to each other by nonzero ids:
//!
//! ```text
//! Profile  { sample_type: [ValueType{type, unit}], sample: [Sample], mapping: [Mapping],
//!            location: [Location], function: [Function], string_table, default_sample_type }
//! Sample   { location_id: [u64]  (location_id[0] is the leaf, the last is the root),
//!            value: [i64]        (one per sample_type) }
//! Mapping  { id, memory_start, memory_limit, file_offset, filename, build_id }
//! Location { id, mapping_id (0: unknown), address, line: [Line{function_id, line}] }
//! Function { id, name, system_name (the mangled name), filename }
//! ```
//!
//! **Inlining.** A location with several `line`s is one machine address where inlined calls were
//! expanded; the schema says the *last* line is the caller into which the preceding ones were
//! inlined, i.e. the physical function whose code holds the address (pprof's own `Aggregate`
//! keeps the last line when it drops inline frames). Sediment orders physical functions, so each
//! location stands for its last line's function and inlined frames are dropped.
//!
//! **Weights**, as the [`perf`](crate::perf) importer does it with [`Mode`], except that a sample
//! counts its chosen value instead of 1: the value goes to the leaf's self weight, and to the
//! edge from its first caller ([`Mode::Leaf`], hfsort's convention) or to every adjacent pair of
//! the stack ([`Mode::Chain`]). Only pairs within one binary count, recursion is kept as a self
//! edge, and a location without lines (not symbolized) breaks the pairs it is in. Negative values
//! (difference profiles) and zeros add nothing. A binary's `meta total` is the sum of the values
//! of the samples whose leaf is in it, symbolized or not.
//!
//! **Which value.** A sample carries one value per `sample_type` (Go CPU profiles have
//! `samples/count` and `cpu/nanoseconds`). The caller may choose an index; otherwise the
//! profile's `default_sample_type` if it names one, else the first type named `samples` or
//! `cpu`, else index 0. The chosen type becomes `meta event`, its unit `meta unit`.
//!
//! **Binaries.** One [`Profile`] per mapping file name. The first mapping is the main binary, as
//! pprof takes it, and its profile always comes first in the result (even if it got no weight);
//! the other binaries that got weight follow, sorted by name. Locations without a mapping go to a
//! binary named [`UNKNOWN_BINARY`] (for a profile with no mappings at all, that is the main one).
//! Function keys are `system_name` when present, else `name`, always global: pprof does not say
//! which functions are file-local ([`crate::bind`] can settle that against the binary).
//!
//! **Hostile input.** The decompressed size is capped at [`MAX_DECOMPRESSED`] (the gzip stream is
//! read through `take`, so a gzip bomb is an error, not an exhausted memory), every id and string
//! index is checked, and every error is one line naming the file and the object that failed.
//! Decoding allocates only for elements actually present in the (capped) input, but a 2-byte empty
//! `Sample` decodes to some 100 bytes: before decoding, the protobuf's elements are counted by
//! walking its wire format (`estimate`) and the memory they would take is checked against
//! [`MAX_DECODED`]. The same budget then covers the conversion, where one function name is
//! copied into every binary profile (and every call) it appears in.
//!
//! Turned down: symbolizing locations that have an address but no lines through the binary's
//! ELF symbols. Go, Parca and Pyroscope profiles arrive symbolized; raw-address profiles are
//! better served by `perf record`, whose importer already resolves addresses.

use crate::perf::Mode;
use crate::Error;
use flate2::read::MultiGzDecoder;
use prost::Message;
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;

/// Value of `meta source` in profiles read from pprof.
pub const SOURCE: &str = "pprof";

/// Largest accepted protobuf, after decompression (512 MiB). Production pprof files are a few
/// megabytes; the cap only stops a gzip bomb or a wrong file from taking all memory.
pub const MAX_DECOMPRESSED: u64 = 512 << 20;

/// Largest memory, estimated, that decoding and converting one profile may take (1 GiB): the
/// decoded elements at their in-memory sizes (see `estimate`), then each function and call
/// entry of the result with its names. A Go CPU profile of a busy minute takes a few megabytes.
pub const MAX_DECODED: u64 = 1 << 30;

/// Bytes one heap allocation costs in the estimate beyond twice its contents (`Vec` doubles):
/// malloc's header and rounding, and the smallest capacity a `Vec` takes.
const ALLOC_COST: u64 = 64;

/// Bytes one function or call entry of the result costs in the estimate besides its names: the
/// accumulation map's slot and the profile builder's tree node.
const ENTRY_COST: u64 = 256;

/// Binary name of the profile that receives locations without a mapping.
pub const UNKNOWN_BINARY: &str = "[unknown]";

/// The subset of `perftools.profiles` messages that the importer reads (field numbers from
/// `profile.proto`). Strings are kept as bytes so that a table entry in bad UTF-8 that is never
/// used cannot fail the whole file. Public so that generators of test and benchmark inputs
/// (`bench/fleet`) write exactly what the importer reads (`prost::Message::encode_to_vec`).
pub mod pb {
    /// `perftools.profiles.Profile`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        /// What each sample value measures.
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        /// The samples.
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        /// Memory mappings (binaries); the first is the main binary.
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        /// Locations (addresses with their symbolized lines).
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        /// Functions.
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        /// All strings; entry 0 is "".
        #[prost(bytes = "vec", repeated, tag = "6")]
        pub string_table: Vec<Vec<u8>>,
        /// String index of the preferred sample type's `type` (0: unset).
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    /// `ValueType`: string indices of a value's type and unit.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        /// Type name, e.g. `cpu`.
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        /// Unit, e.g. `nanoseconds`.
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    /// `Sample`: a stack (leaf first) and its values.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        /// Location ids, leaf first.
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        /// One value per sample type.
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
    }

    /// `Mapping`: one mapped file.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        /// Nonzero id.
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// Start address of the mapping.
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        /// End address (exclusive).
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        /// File offset of `memory_start`.
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        /// String index of the file name.
        #[prost(int64, tag = "5")]
        pub filename: i64,
        /// String index of the build id.
        #[prost(int64, tag = "6")]
        pub build_id: i64,
    }

    /// `Location`: an address and the functions (innermost first) that it is in.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        /// Nonzero id.
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// Mapping id, 0 when unknown.
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        /// Instruction address.
        #[prost(uint64, tag = "3")]
        pub address: u64,
        /// Lines; the last is the physical (outermost) function.
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }

    /// `Line`: a function and source line.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        /// Function id.
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        /// Source line number.
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    /// `Function`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        /// Nonzero id.
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// String index of the readable name.
        #[prost(int64, tag = "2")]
        pub name: i64,
        /// String index of the linker (mangled) name.
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        /// String index of the source file.
        #[prost(int64, tag = "4")]
        pub filename: i64,
    }
}

/// Reads a pprof profile held in `bytes` (gzip-compressed or raw protobuf); `path` names it in
/// errors. `value_index` chooses the sample value (module docs for the default), `mode` how
/// stacks become edges. Returns the main binary's profile first, then the other binaries that
/// got weight, sorted by name.
pub fn read(
    path: &str,
    bytes: &[u8],
    value_index: Option<usize>,
    mode: Mode,
) -> Result<Vec<Profile>, Error> {
    read_capped(
        path,
        bytes,
        value_index,
        mode,
        MAX_DECOMPRESSED,
        MAX_DECODED,
    )
}

/// [`read`] with the decompressed-size cap and the memory budget as parameters (tests use
/// small ones).
fn read_capped(
    path: &str,
    bytes: &[u8],
    value_index: Option<usize>,
    mode: Mode,
    cap: u64,
    budget: u64,
) -> Result<Vec<Profile>, Error> {
    let raw = decompress(path, bytes, cap)?;
    let counts = estimate(&raw);
    if counts.bytes > budget {
        return Err(format_err(
            path,
            format!(
                "too large to import: its {} samples, {} locations, {} functions and {} strings \
                 would take more than the {budget}-byte memory limit",
                counts.samples, counts.locations, counts.functions, counts.strings
            ),
        ));
    }
    let msg = pb::Profile::decode(raw.as_ref())
        .map_err(|e| format_err(path, format!("not a pprof profile: {e}")))?;
    drop(raw);
    convert(path, &msg, value_index, mode, budget - counts.bytes)
}

/// Element counts of an encoded `Profile`, and the memory its decoding and conversion would
/// take, from [`estimate`].
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    samples: u64,
    locations: u64,
    functions: u64,
    strings: u64,
    /// Estimated bytes: every element at twice its size (a `Vec` doubles as it grows), every
    /// non-empty nested vector or string one [`ALLOC_COST`] more, string contents twice (the
    /// table and a function key), and the id maps of the conversion.
    bytes: u64,
}

/// One protobuf field's value: a length-delimited field's bytes, or a scalar (whose value the
/// estimate does not need).
enum Field<'a> {
    Bytes(&'a [u8]),
    Scalar,
}

/// The fields of an encoded message, in order; stops at the first malformed field (the decoder
/// then reports it).
fn fields(mut buf: &[u8]) -> impl Iterator<Item = (u64, Field<'_>)> {
    std::iter::from_fn(move || {
        let key = prost::encoding::decode_varint(&mut buf).ok()?;
        let field = match key & 7 {
            0 => {
                prost::encoding::decode_varint(&mut buf).ok()?;
                Field::Scalar
            }
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                buf = buf.get(n..)?;
                Field::Scalar
            }
            2 => {
                let len = usize::try_from(prost::encoding::decode_varint(&mut buf).ok()?).ok()?;
                let (body, rest) = (buf.get(..len)?, buf.get(len..)?);
                buf = rest;
                Field::Bytes(body)
            }
            // Group markers: their fields are walked as if they were the message's own, which
            // can only overcount.
            3 | 4 => Field::Scalar,
            _ => return None,
        };
        Some((key >> 3, field))
    })
}

/// How many values a `repeated` scalar field occurrence holds: one unpacked, or one per varint
/// (bytes without the continuation bit) packed.
fn repeated_len(f: &Field<'_>) -> u64 {
    match f {
        Field::Bytes(b) => b.iter().filter(|&&x| x < 0x80).count() as u64,
        _ => 1,
    }
}

/// Counts the elements of the encoded `Profile` in `raw`, and estimates the memory that
/// decoding and converting them takes, without allocating (see [`Counts::bytes`]).
fn estimate(raw: &[u8]) -> Counts {
    use std::mem::size_of;
    let twice = |n: usize| 2 * n as u64;
    // Conversion: an id map slot (hash tables keep some slots free).
    let map_slot = |n: usize| 3 * n as u64;
    let mut c = Counts::default();
    for (tag, field) in fields(raw) {
        let body = match &field {
            Field::Bytes(b) => *b,
            _ => &[],
        };
        c.bytes += match tag {
            1 => twice(size_of::<pb::ValueType>()),
            2 => {
                c.samples += 1;
                // location_id (1) and value (2): two vectors of 8-byte values.
                let mut n = [0u64; 2];
                for (t, f) in fields(body) {
                    if let 1 | 2 = t {
                        n[t as usize - 1] += repeated_len(&f);
                    }
                }
                let vecs: u64 = n
                    .iter()
                    .map(|&k| k * 16 + ALLOC_COST * u64::from(k > 0))
                    .sum();
                twice(size_of::<pb::Sample>()) + vecs
            }
            3 => twice(size_of::<pb::Mapping>()) + map_slot(16),
            4 => {
                c.locations += 1;
                let lines = fields(body).filter(|(t, _)| *t == 4).count() as u64;
                twice(size_of::<pb::Location>())
                    + lines * twice(size_of::<pb::Line>())
                    + ALLOC_COST * u64::from(lines > 0)
                    + map_slot(size_of::<(u64, Loc)>())
            }
            5 => {
                c.functions += 1;
                twice(size_of::<pb::Function>()) + map_slot(16) + map_slot(16)
            }
            6 => {
                c.strings += 1;
                let len = body.len() as u64;
                twice(size_of::<Vec<u8>>())
                    + (ALLOC_COST + 2 * len) * u64::from(len > 0)
                    + twice(size_of::<FuncKey>())
            }
            _ => 0,
        };
    }
    c
}

fn format_err(path: &str, message: String) -> Error {
    Error::Format {
        path: path.to_string(),
        message,
    }
}

/// The protobuf bytes: gunzipped (at most `cap` bytes) when `bytes` starts with the gzip magic.
fn decompress<'a>(path: &str, bytes: &'a [u8], cap: u64) -> Result<Cow<'a, [u8]>, Error> {
    let too_big = || {
        format_err(
            path,
            format!(
                "the protobuf is larger than the {cap}-byte limit (a gzip bomb, or not a profile)"
            ),
        )
    };
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        if bytes.len() as u64 > cap {
            return Err(too_big());
        }
        return Ok(Cow::Borrowed(bytes));
    }
    let mut out = Vec::new();
    MultiGzDecoder::new(bytes)
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| format_err(path, format!("bad gzip data: {e}")))?;
    if out.len() as u64 > cap {
        return Err(too_big());
    }
    Ok(Cow::Owned(out))
}

/// A location reduced to what the weights need.
struct Loc {
    /// Index into the binary names.
    binary: usize,
    /// The physical function (last line) as an index into the function keys, None when the
    /// location has no lines.
    func: Option<usize>,
}

/// Weights accumulated by index (binary, function key), so that a function name is copied into
/// a binary's profile once, and only while the memory budget lasts.
struct Weights<'a> {
    /// Function keys, one per string index used as a name.
    keys: &'a [FuncKey],
    /// (binary, function) -> self weight, for every function a profile will list.
    functions: HashMap<(usize, usize), u64>,
    /// (binary, caller, callee) -> weight.
    calls: HashMap<(usize, usize, usize), u64>,
    /// Estimated bytes still available for new entries.
    budget: u64,
}

impl Weights<'_> {
    /// Takes `bytes` from the budget, or fails with the message for an exhausted one.
    fn spend(&mut self, bytes: u64) -> Result<(), String> {
        self.budget = self.budget.checked_sub(bytes).ok_or_else(|| {
            "too large to import: its function names, copied into the profile of every binary \
             and every call they appear in, exceed the memory limit"
                .to_string()
        })?;
        Ok(())
    }

    /// Lists function `f` in binary `b`'s profile, adding `w` to its self weight.
    fn add_self(&mut self, b: usize, f: usize, w: u64) -> Result<(), String> {
        if !self.functions.contains_key(&(b, f)) {
            self.spend(ENTRY_COST + self.keys[f].name.len() as u64)?;
        }
        let slot = self.functions.entry((b, f)).or_insert(0);
        *slot = slot.saturating_add(w);
        Ok(())
    }

    /// Adds `w` to the call `caller -> callee` of binary `b` (listing both functions).
    fn add_call(&mut self, b: usize, caller: usize, callee: usize, w: u64) -> Result<(), String> {
        self.add_self(b, caller, 0)?;
        self.add_self(b, callee, 0)?;
        if !self.calls.contains_key(&(b, caller, callee)) {
            let names = self.keys[caller].name.len() + self.keys[callee].name.len();
            self.spend(ENTRY_COST + names as u64)?;
        }
        let slot = self.calls.entry((b, caller, callee)).or_insert(0);
        *slot = slot.saturating_add(w);
        Ok(())
    }
}

/// Converts the decoded message; `budget` is the estimated memory left for the result's
/// function and call entries (see [`MAX_DECODED`]).
fn convert(
    path: &str,
    p: &pb::Profile,
    value_index: Option<usize>,
    mode: Mode,
    budget: u64,
) -> Result<Vec<Profile>, Error> {
    let err = |m: String| format_err(path, m);
    if p.string_table.first().map(Vec::as_slice) != Some(b"".as_slice()) {
        return Err(err(
            "not a pprof profile (string table missing, or its entry 0 is not empty)".into(),
        ));
    }
    let entry = |i: i64, what: &dyn Fn() -> String| -> Result<&[u8], Error> {
        usize::try_from(i)
            .ok()
            .and_then(|i| p.string_table.get(i))
            .map(Vec::as_slice)
            .ok_or_else(|| {
                err(format!(
                    "{}: string index {i} out of range (the table has {} entries)",
                    what(),
                    p.string_table.len()
                ))
            })
    };
    let string = |i: i64, what: &dyn Fn() -> String| -> Result<String, Error> {
        entry(i, what).map(|s| String::from_utf8_lossy(s).into_owned())
    };

    // Sample types and the chosen value.
    if p.sample_type.is_empty() {
        return Err(err("not a pprof profile (no sample types)".into()));
    }
    let mut types = Vec::with_capacity(p.sample_type.len());
    for (i, t) in p.sample_type.iter().enumerate() {
        let name = string(t.r#type, &|| format!("sample type {i}"))?;
        let unit = string(t.unit, &|| format!("sample type {i} unit"))?;
        types.push((name, unit));
    }
    let chosen = match value_index {
        Some(i) if i < types.len() => i,
        Some(i) => {
            let list: Vec<String> = types.iter().map(|(n, u)| format!("{n}/{u}")).collect();
            return Err(err(format!(
                "sample value index {i} out of range: the profile has {} sample types ({})",
                types.len(),
                list.join(", ")
            )));
        }
        None => {
            let default = string(p.default_sample_type, &|| "default sample type".into())?;
            let by_name = |n: &str| types.iter().position(|(t, _)| t == n);
            (!default.is_empty())
                .then(|| by_name(&default))
                .flatten()
                .or_else(|| types.iter().position(|(t, _)| t == "samples" || t == "cpu"))
                .unwrap_or(0)
        }
    };

    // Binaries: the first mapping's file is the main one.
    let mut binaries: Vec<String> = Vec::new();
    let mut build_ids: Vec<Option<String>> = Vec::new();
    let mut binary_index: HashMap<String, usize> = HashMap::new();
    let mut intern = |name: String, build_id: Option<String>| -> usize {
        let i = *binary_index.entry(name.clone()).or_insert_with(|| {
            binaries.push(name);
            build_ids.push(None);
            binaries.len() - 1
        });
        if build_ids[i].is_none() {
            build_ids[i] = build_id;
        }
        i
    };
    let mut mappings: HashMap<u64, usize> = HashMap::with_capacity(p.mapping.len());
    for (i, m) in p.mapping.iter().enumerate() {
        let what = || format!("mapping {i} (id {})", m.id);
        if m.id == 0 {
            return Err(err(format!("{}: id 0 is reserved", what())));
        }
        let mut name = string(m.filename, &what)?;
        if name.is_empty() {
            name = UNKNOWN_BINARY.to_string();
        }
        let build_id = string(m.build_id, &what)?;
        let b = intern(name, (!build_id.is_empty()).then_some(build_id));
        if mappings.insert(m.id, b).is_some() {
            return Err(err(format!("{}: duplicate mapping id", what())));
        }
    }
    if p.mapping.is_empty() {
        intern(UNKNOWN_BINARY.to_string(), None);
    }

    // Functions: id -> key (system_name when present, else name), one key per string index.
    let mut keys: Vec<FuncKey> = Vec::new();
    let mut key_of_string: HashMap<i64, usize> = HashMap::new();
    let mut functions: HashMap<u64, usize> = HashMap::with_capacity(p.function.len());
    for (i, f) in p.function.iter().enumerate() {
        let what = || format!("function {i} (id {})", f.id);
        if f.id == 0 {
            return Err(err(format!("{}: id 0 is reserved", what())));
        }
        let index = if entry(f.system_name, &what)?.is_empty() {
            f.name
        } else {
            f.system_name
        };
        let key = match key_of_string.get(&index) {
            Some(&k) => k,
            None => {
                keys.push(FuncKey::global(string(index, &what)?));
                key_of_string.insert(index, keys.len() - 1);
                keys.len() - 1
            }
        };
        if functions.insert(f.id, key).is_some() {
            return Err(err(format!("{}: duplicate function id", what())));
        }
    }

    // Locations: id -> (binary, physical function).
    let mut locations: HashMap<u64, Loc> = HashMap::with_capacity(p.location.len());
    for (i, l) in p.location.iter().enumerate() {
        let what = || format!("location {i} (id {})", l.id);
        if l.id == 0 {
            return Err(err(format!("{}: id 0 is reserved", what())));
        }
        let binary = match l.mapping_id {
            0 => intern(UNKNOWN_BINARY.to_string(), None),
            m => *mappings
                .get(&m)
                .ok_or_else(|| err(format!("{}: mapping id {m} is not defined", what())))?,
        };
        for line in &l.line {
            if line.function_id != 0 && !functions.contains_key(&line.function_id) {
                return Err(err(format!(
                    "{}: function id {} is not defined",
                    what(),
                    line.function_id
                )));
            }
        }
        // The last line is the physical function; function id 0 means "not symbolized".
        let func = l
            .line
            .last()
            .and_then(|line| functions.get(&line.function_id))
            .copied();
        if locations.insert(l.id, Loc { binary, func }).is_some() {
            return Err(err(format!("{}: duplicate location id", what())));
        }
    }

    // Samples.
    let mut totals: Vec<u64> = vec![0; binaries.len()];
    let mut weights = Weights {
        keys: &keys,
        functions: HashMap::new(),
        calls: HashMap::new(),
        budget,
    };
    let mut stack: Vec<&Loc> = Vec::new();
    for (i, s) in p.sample.iter().enumerate() {
        if s.value.len() != types.len() {
            return Err(err(format!(
                "sample {i}: {} values for {} sample types",
                s.value.len(),
                types.len()
            )));
        }
        stack.clear();
        for id in &s.location_id {
            stack.push(
                locations
                    .get(id)
                    .ok_or_else(|| err(format!("sample {i}: location id {id} is not defined")))?,
            );
        }
        let v = s.value[chosen];
        let Some(leaf) = stack.first() else {
            continue;
        };
        if v <= 0 {
            continue;
        }
        let v = v as u64;
        totals[leaf.binary] = totals[leaf.binary].saturating_add(v);
        if let Some(f) = leaf.func {
            weights.add_self(leaf.binary, f, v).map_err(err)?;
        }
        let pairs = match mode {
            Mode::Leaf => stack.len().min(2).saturating_sub(1),
            Mode::Chain => stack.len() - 1,
        };
        for j in 0..pairs {
            // Frame j+1 called frame j.
            let (callee, caller) = (stack[j], stack[j + 1]);
            if callee.binary != caller.binary {
                continue;
            }
            if let (Some(a), Some(b)) = (caller.func, callee.func) {
                weights.add_call(caller.binary, a, b, v).map_err(err)?;
            }
        }
    }

    // Into one builder per binary (within the budget just checked: each entry once).
    let mut builders: Vec<ProfileBuilder> = (0..binaries.len())
        .map(|_| ProfileBuilder::default())
        .collect();
    for (&(b, f), &w) in &weights.functions {
        builders[b].add_self(&keys[f], w);
    }
    for (&(b, caller, callee), &w) in &weights.calls {
        builders[b].add_call(&keys[caller], &keys[callee], w);
    }
    drop(weights);

    // Main binary first, then the others that got weight, by name (names are unique).
    let (event, unit) = types[chosen].clone();
    let mut rest: BTreeMap<&str, usize> = BTreeMap::new();
    for (b, name) in binaries.iter().enumerate().skip(1) {
        if totals[b] > 0 || !builders[b].is_empty() {
            rest.insert(name, b);
        }
    }
    let order: Vec<usize> = std::iter::once(0).chain(rest.into_values()).collect();
    let mut slots: Vec<Option<ProfileBuilder>> = builders.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(order.len());
    for b in order {
        let Some(mut builder) = slots[b].take() else {
            continue;
        };
        let mut meta = Meta {
            binary: binaries[b].clone(),
            build_id: build_ids[b].clone(),
            source: SOURCE.to_string(),
            event: Some(event.clone()),
            total: totals[b],
            ..Meta::default()
        };
        meta.extra.insert("mode".into(), mode.name().into());
        if !unit.is_empty() {
            meta.extra.insert("unit".into(), unit.clone());
        }
        *builder.meta_mut() = meta;
        out.push(builder.build());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use std::io::Write;

    /// Go 1.26 CPU profile of `burn.go` (see tests/fixtures/pprof/README.md).
    const FIXTURE: &[u8] = include_bytes!("../../../tests/fixtures/pprof/burn.pb.gz");

    fn weights(p: &Profile) -> Vec<(String, u64)> {
        p.functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight))
            .collect()
    }

    fn s(x: &str) -> String {
        x.to_string()
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        decompress("t", bytes, MAX_DECOMPRESSED)
            .unwrap()
            .into_owned()
    }

    #[test]
    fn go_cpu_profile_leaf() {
        // burnA does twice burnB's work and gets twice the samples; main.main calls both.
        let ps = read("burn.pb.gz", FIXTURE, None, Mode::Leaf).unwrap();
        // [vdso] and [vsyscall] are mapped but got no samples.
        assert_eq!(ps.len(), 1);
        let p = &ps[0];
        assert_eq!(p.meta.binary, "/tmp/pprofbuild/burn");
        assert_eq!(
            p.meta.build_id.as_deref(),
            Some("d535b6dfb58659463c3b7b21b94d16aefbcb52e5")
        );
        assert_eq!(p.meta.source, "pprof");
        assert_eq!(p.meta.event.as_deref(), Some("samples"));
        assert_eq!(p.meta.extra.get("unit").map(String::as_str), Some("count"));
        assert_eq!(p.meta.total, 68 + 27 + 4 + 2 + 1);
        // main.step was inlined into burnB: its 2 samples count for burnB.
        assert_eq!(
            weights(p),
            vec![
                (s("main.burnA"), 68),
                (s("main.burnB"), 27 + 4 + 2 + 1),
                (s("main.main"), 0),
            ]
        );
        assert_eq!(
            p.named_edges(),
            vec![
                (s("main.main"), s("main.burnA"), 68),
                (s("main.main"), s("main.burnB"), 34),
            ]
        );
    }

    #[test]
    fn go_cpu_profile_chain_and_value_index() {
        // Chain mode adds runtime.main -> main.main; index 1 weighs by CPU nanoseconds.
        let ps = read("burn.pb.gz", FIXTURE, Some(1), Mode::Chain).unwrap();
        let p = &ps[0];
        assert_eq!(p.meta.event.as_deref(), Some("cpu"));
        assert_eq!(
            p.meta.extra.get("unit").map(String::as_str),
            Some("nanoseconds")
        );
        assert_eq!(p.meta.extra.get("mode").map(String::as_str), Some("chain"));
        assert_eq!(p.meta.total, 1_020_000_000);
        assert_eq!(
            p.named_edges(),
            vec![
                (s("main.main"), s("main.burnA"), 680_000_000),
                (s("main.main"), s("main.burnB"), 340_000_000),
                (s("runtime.main"), s("main.main"), 1_020_000_000),
            ]
        );
        // The raw (gunzipped) protobuf reads the same.
        let raw = gunzip(FIXTURE);
        assert_eq!(read("raw.pb", &raw, Some(1), Mode::Chain).unwrap(), ps);
    }

    /// A two-binary profile: app (main -> work, with helper inlined into work, and an
    /// unsymbolized address) calling memcpy in libc.
    fn tiny() -> pb::Profile {
        let strings = [
            "",
            "samples",
            "count",
            "/bin/app",
            "/lib/libc.so.6",
            "main",
            "work()",
            "_Z4workv",
            "helper",
            "memcpy",
            "abc123",
        ];
        let line = |function_id| pb::Line {
            function_id,
            line: 1,
        };
        let func = |id, name, system_name| pb::Function {
            id,
            name,
            system_name,
            filename: 0,
        };
        let loc = |id, mapping_id, line: Vec<pb::Line>| pb::Location {
            id,
            mapping_id,
            address: 0x1000 + id,
            line,
        };
        let sample = |location_id: Vec<u64>, v| pb::Sample {
            location_id,
            value: vec![v],
        };
        pb::Profile {
            sample_type: vec![pb::ValueType { r#type: 1, unit: 2 }],
            sample: vec![
                sample(vec![10, 11], 5),
                sample(vec![12, 13, 11], 3),
                sample(vec![14, 11], 2),
                sample(vec![13, 11], -7),
            ],
            mapping: vec![
                pb::Mapping {
                    id: 1,
                    filename: 3,
                    build_id: 10,
                    ..Default::default()
                },
                pb::Mapping {
                    id: 2,
                    filename: 4,
                    ..Default::default()
                },
            ],
            location: vec![
                // helper inlined into work: the last line is the physical function.
                loc(10, 1, vec![line(4), line(2)]),
                loc(11, 1, vec![line(1)]),
                loc(12, 2, vec![line(3)]),
                loc(13, 1, vec![line(2)]),
                loc(14, 1, vec![]),
            ],
            function: vec![func(1, 5, 0), func(2, 6, 7), func(3, 9, 9), func(4, 8, 0)],
            string_table: strings.iter().map(|s| s.as_bytes().to_vec()).collect(),
            default_sample_type: 0,
        }
    }

    #[test]
    fn tiny_profile_exact_weights() {
        // Self weight to the physical leaf (system name), edges within one binary only.
        let bytes = tiny().encode_to_vec();
        let ps = read("tiny.pb", &bytes, None, Mode::Leaf).unwrap();
        assert_eq!(ps.len(), 2);
        let (app, libc) = (&ps[0], &ps[1]);
        assert_eq!(app.meta.binary, "/bin/app");
        assert_eq!(app.meta.build_id.as_deref(), Some("abc123"));
        // 5 (work) + 2 (unsymbolized); the negative sample adds nothing.
        assert_eq!(app.meta.total, 7);
        assert_eq!(weights(app), vec![(s("_Z4workv"), 5), (s("main"), 0)]);
        assert_eq!(app.named_edges(), vec![(s("main"), s("_Z4workv"), 5)]);
        assert_eq!(libc.meta.binary, "/lib/libc.so.6");
        assert_eq!(libc.meta.total, 3);
        assert_eq!(weights(libc), vec![(s("memcpy"), 3)]);
        assert!(libc.edges.is_empty());

        // Chain mode adds main -> work from the memcpy sample; gzip reads the same.
        let ps = read("tiny.pb.gz", &gzip(&bytes), None, Mode::Chain).unwrap();
        assert_eq!(ps[0].named_edges(), vec![(s("main"), s("_Z4workv"), 8)]);
    }

    #[test]
    fn main_binary_comes_first_even_without_weight() {
        // The first mapping is the main binary; its profile leads even when empty.
        let mut p = tiny();
        p.sample.truncate(1);
        p.sample[0].location_id = vec![12];
        let ps = read("t.pb", &p.encode_to_vec(), None, Mode::Leaf).unwrap();
        let names: Vec<&str> = ps.iter().map(|p| p.meta.binary.as_str()).collect();
        assert_eq!(names, vec!["/bin/app", "/lib/libc.so.6"]);
        assert_eq!(ps[0].meta.total, 0);
        assert!(ps[0].functions.is_empty());
        assert_eq!(weights(&ps[1]), vec![(s("memcpy"), 5)]);
        // With the mappings swapped, libc is the main binary and app (no weight) is left out.
        p.mapping.swap(0, 1);
        let ps = read("t.pb", &p.encode_to_vec(), None, Mode::Leaf).unwrap();
        let names: Vec<&str> = ps.iter().map(|p| p.meta.binary.as_str()).collect();
        assert_eq!(names, vec!["/lib/libc.so.6"]);
    }

    #[test]
    fn default_sample_type_is_honoured() {
        // default_sample_type names the second type, so its values are used.
        let mut p = tiny();
        p.string_table.push(b"bytes".to_vec());
        p.sample_type.push(pb::ValueType {
            r#type: 11,
            unit: 11,
        });
        p.default_sample_type = 11;
        for (i, smp) in p.sample.iter_mut().enumerate() {
            smp.value.push(100 * (i as i64 + 1));
        }
        let ps = read("t.pb", &p.encode_to_vec(), None, Mode::Leaf).unwrap();
        assert_eq!(ps[0].meta.event.as_deref(), Some("bytes"));
        // App leaves: samples 0, 2 and 3 (negative in the first type, 400 in this one).
        assert_eq!(ps[0].meta.total, 100 + 300 + 400);
    }

    #[test]
    fn damaged_profiles_name_file_and_object() {
        // Each inconsistency is a one-line error naming the file and what failed.
        // How to damage the tiny profile, and the message that must result.
        type Case = (fn(&mut pb::Profile), &'static str);
        let cases: Vec<Case> = vec![
            (
                |p| p.sample[1].location_id[0] = 99,
                "sample 1: location id 99 is not defined",
            ),
            (
                |p| p.location[0].line[0].function_id = 42,
                "location 0 (id 10): function id 42 is not defined",
            ),
            (
                |p| p.location[1].mapping_id = 7,
                "location 1 (id 11): mapping id 7 is not defined",
            ),
            (
                |p| p.function[0].name = 500,
                "function 0 (id 1): string index 500 out of range (the table has 11 entries)",
            ),
            (
                |p| p.mapping[1].filename = -1,
                "mapping 1 (id 2): string index -1 out of range",
            ),
            (
                |p| p.sample[0].value.push(1),
                "sample 0: 2 values for 1 sample types",
            ),
            (
                |p| p.location[2].id = 10,
                "location 2 (id 10): duplicate location id",
            ),
            (
                |p| p.function[3].id = 0,
                "function 3 (id 0): id 0 is reserved",
            ),
            (|p| p.sample_type.clear(), "no sample types"),
            (|p| p.string_table[0] = b"x".to_vec(), "string table"),
        ];
        for (damage, what) in cases {
            let mut p = tiny();
            damage(&mut p);
            let e = read("bad.pb", &p.encode_to_vec(), None, Mode::Leaf)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("bad.pb: "), "{e}");
            assert!(e.contains(what), "{e} <> {what}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = read("v.pb", &tiny().encode_to_vec(), Some(3), Mode::Leaf).unwrap_err();
        assert_eq!(
            e.to_string(),
            "v.pb: sample value index 3 out of range: the profile has 1 sample types (samples/count)"
        );
    }

    #[test]
    fn truncated_and_garbage_inputs_are_errors() {
        // Empty, garbage, truncated gzip and truncated protobuf all fail with the file name.
        let raw = gunzip(FIXTURE);
        let inputs: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("text", b"this is not a profile\n".to_vec()),
            ("gzip-cut", FIXTURE[..FIXTURE.len() / 2].to_vec()),
            ("proto-cut", raw[..raw.len() - 3].to_vec()),
        ];
        for (name, bytes) in inputs {
            let e = read(name, &bytes, None, Mode::Leaf)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("{name}: ")), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = read("empty", b"", None, Mode::Leaf)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "empty: not a pprof profile (string table missing, or its entry 0 is not empty)"
        );
    }

    #[test]
    fn gzip_bomb_hits_the_cap() {
        // 1 MiB of zeros compresses to about 1 KiB; with a 64 KiB cap it must be refused.
        let bomb = gzip(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 4096);
        let e = read_capped("bomb.gz", &bomb, None, Mode::Leaf, 64 << 10, MAX_DECODED)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "bomb.gz: the protobuf is larger than the 65536-byte limit (a gzip bomb, or not a profile)"
        );
        // Exactly at the cap is accepted by the size check (and then judged as protobuf).
        let e = read_capped("z.gz", &gzip(&[0u8; 16]), None, Mode::Leaf, 16, MAX_DECODED)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a pprof profile"), "{e}");
    }

    #[test]
    fn regress_empty_sample_bomb_is_refused_before_decoding() {
        // Audit find: 64M empty `Sample`s (`12 00`, 128 MiB, 130 KB gzipped) took 3.3 GB to
        // decode. Their count is checked against the memory budget before anything is decoded.
        let mut raw = tiny().encode_to_vec();
        let n = 200_000;
        raw.extend([0x12, 0x00].repeat(n));
        let counts = estimate(&raw);
        assert_eq!(counts.samples, n as u64 + 4);
        assert!(counts.bytes >= 2 * n as u64 * std::mem::size_of::<pb::Sample>() as u64);
        let e = read_capped(
            "b.pb.gz",
            &gzip(&raw),
            None,
            Mode::Leaf,
            MAX_DECOMPRESSED,
            8 << 20,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            format!(
                "b.pb.gz: too large to import: its {} samples, 5 locations, 4 functions and 11 \
                 strings would take more than the 8388608-byte memory limit",
                n + 4
            )
        );
        // Packed location ids count one per varint: 3 ids in 4 bytes (300 takes two).
        let sample = [0x12, 0x06, 0x0a, 0x04, 0x01, 0xac, 0x02, 0x05];
        let c = estimate(&sample);
        assert_eq!((c.samples, c.locations), (1, 0));
        let vec = 3 * 16 + ALLOC_COST;
        assert_eq!(c.bytes, 2 * std::mem::size_of::<pb::Sample>() as u64 + vec);
    }

    /// A profile whose one function has a `len`-byte name, with `binaries` mappings and one
    /// location and one sample in each (so the name is listed in every binary's profile).
    fn long_name(len: usize, binaries: u64) -> pb::Profile {
        let mut p = tiny();
        p.string_table.push(vec![b'f'; len]);
        let name = p.string_table.len() as i64 - 1;
        p.function = vec![pb::Function {
            id: 1,
            name,
            system_name: 0,
            filename: 0,
        }];
        p.mapping.clear();
        p.location.clear();
        p.sample.clear();
        for i in 1..=binaries {
            p.string_table.push(format!("/lib/{i}.so").into_bytes());
            p.mapping.push(pb::Mapping {
                id: i,
                filename: p.string_table.len() as i64 - 1,
                ..Default::default()
            });
            p.location.push(pb::Location {
                id: i,
                mapping_id: i,
                address: 0,
                line: vec![pb::Line {
                    function_id: 1,
                    line: 0,
                }],
            });
            p.sample.push(pb::Sample {
                location_id: vec![i, i],
                value: vec![1],
            });
        }
        p
    }

    #[test]
    fn regress_long_name_copied_into_many_profiles_hits_the_budget() {
        // Audit: one 64 KiB name listed in 100 binaries' profiles is 6.4 MB of copies from a
        // 70 KB file; the copies are counted against the budget as they are made.
        let bytes = long_name(64 << 10, 100).encode_to_vec();
        let e = read_capped("l.pb", &bytes, None, Mode::Leaf, MAX_DECOMPRESSED, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("l.pb: too large to import: its function names"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        // Within the default budget it imports: the name in each binary, with its self call.
        let ps = read("l.pb", &bytes, None, Mode::Leaf).unwrap();
        assert_eq!(ps.len(), 100);
        assert_eq!(ps[1].edges.len(), 1);
    }

    #[test]
    fn regress_function_name_is_not_copied_per_location() {
        // Audit: every location held its own copy of its function's name; 20000 locations of
        // one 64 KiB-named function were 1.3 GB. One copy per binary profile now.
        let mut p = long_name(64 << 10, 1);
        for i in 2..=20_000 {
            let mut l = p.location[0].clone();
            l.id = i;
            p.location.push(l);
        }
        let ps = read_capped(
            "n.pb",
            &p.encode_to_vec(),
            None,
            Mode::Leaf,
            1 << 30,
            16 << 20,
        )
        .unwrap();
        assert_eq!(ps[0].functions.len(), 1);
    }

    proptest::proptest! {
        #[test]
        fn mutated_inputs_never_panic(
            at in 0usize..8192,
            byte in proptest::prelude::any::<u8>(),
            cut in 0usize..8192,
        ) {
            // Any single-byte change or truncation gives profiles or an error, never a panic.
            let raw = gunzip(FIXTURE);
            let tiny = tiny().encode_to_vec();
            for base in [FIXTURE, raw.as_slice(), tiny.as_slice()] {
                let mut bytes = base.to_vec();
                let i = at % bytes.len();
                bytes[i] = byte;
                bytes.truncate(cut.max(1).min(bytes.len()));
                let _ = read("m.pb", &bytes, None, Mode::Chain);
            }
        }
    }
}
