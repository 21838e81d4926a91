//! sediment-parquet: Sediment profiles as one Parquet table, the columnar interchange for
//! fleets (documented for users in `docs/design/parquet.md`).
//!
//! A fleet's profiles (many binaries, many submissions of each) are one *long table*: one row
//! per profile (`kind = profile`, carrying its metadata), one per function (`kind = function`),
//! one per call (`kind = call`) and one per per-instruction sample (`kind = sample`, with the
//! columns `offset` and `sample_weight` of schema version 2, written only when a profile has
//! samples, so that tables without them stay version 1). Every row repeats its profile's identity (`profile`, the
//! submission id, and `binary_name`, `build_id`, `arch`, the submission's `submitter`,
//! `recorded_at` and `weight`), so a query can filter any row by binary or host without a
//! join, and several files of the table can simply be concatenated. The schema version is in
//! the file's key-value metadata ([`SCHEMA_KEY`] = [`SCHEMA_VERSION`]).
//!
//! - [`write()`]: profiles -> Parquet bytes (uncompressed pages, one row group per profile,
//!   deterministic: the same profiles give the same bytes).
//! - [`read`]: Parquet bytes -> the submissions in the file, each a canonical [`Profile`] with
//!   its weight, in the order of their `profile` rows. Readers accept what SQL engines write for
//!   the same columns: unsigned 64-bit weights as `UINT_64` integers or as `DECIMAL(p, 0)`
//!   (Spark has no unsigned type), any compression this build reads (none, Snappy), and files
//!   without the version key whose columns are those of version 1 (Spark cannot write file
//!   metadata).
//! - [`by_binary`]: the submissions grouped into one profile per binary (build-id, else path):
//!   a binary with one submission keeps its profile unchanged, so text -> Parquet -> text is
//!   byte-identical; several submissions of one binary are merged as `sediment merge` merges
//!   them, each with its `weight`.
//!
//! The `meta` keys `submitter` and `recorded-at` (integer Unix seconds) of a text profile are
//! columns of their own; every other extra key travels in the `meta` column, one `KEY VALUE`
//! line each, escaped as in the text format.
//!
//! Hostile input: errors name the file and, where known, the row; no value is trusted as a
//! size. Before the `parquet` crate decodes the footer and the pages, their Thrift structures are
//! walked and any count, length or page size the file's bytes cannot hold is refused (the crate
//! would reserve memory for it first). Bounds on memory are those of the input (at most the
//! caller's input limit) and of the profiles it describes.
//!
//! Turned down: two files (functions, calls) per dataset. Joins would be simpler to write, but
//! a fleet's table would then be two datasets to keep in step; one long table with nullable
//! columns is one file, and engines store the null columns of each kind in a few bytes.

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::format::KeyValue;
use parquet::record::Field;
use parquet::schema::types::Type;
use sediment_profile::{
    escape, quote, quote_whole, unescape, FuncKey, MergeOptions, Merger, Meta, Profile,
};
use sediment_profile::{ProfileBuilder, META_RECORDED_AT, META_SUBMITTER};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

mod guard;

/// Key of the file's key-value metadata that holds the schema version.
pub const SCHEMA_KEY: &str = "sediment.schema";
/// The schema version this build writes for profiles without samples, and reads.
pub const SCHEMA_VERSION: &str = "1";
/// The schema version of tables holding per-instruction samples ([`SAMPLE_COLUMNS`] and
/// `kind = sample` rows); this build writes it when a profile written has samples, and reads it.
pub const SCHEMA_VERSION_SAMPLES: &str = "2";

/// The columns schema version 2 adds after [`COLUMNS`]: a sample's offset in its function
/// (the row's `name` and `file`) and its weight.
pub const SAMPLE_COLUMNS: [&str; 2] = ["offset", "sample_weight"];

/// The columns of schema version 1, in file order.
pub const COLUMNS: [&str; 19] = [
    "profile",
    "kind",
    "binary_name",
    "build_id",
    "arch",
    "source",
    "event",
    "total",
    "meta",
    "submitter",
    "recorded_at",
    "weight",
    "name",
    "file",
    "size",
    "self_weight",
    "callee_name",
    "callee_file",
    "call_weight",
];

/// Errors of this crate; each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Parquet container itself could not be read or written.
    #[error("{path}: {message}")]
    Parquet {
        /// The file.
        path: String,
        /// What the Parquet reader or writer said.
        message: String,
    },
    /// The table does not follow the schema.
    #[error("{path}: {message}")]
    Schema {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A row holds a value the schema does not allow; `row` is 0-based.
    #[error("{path}: row {row}: {message}")]
    Row {
        /// The file.
        path: String,
        /// 0-based row number.
        row: usize,
        /// What is wrong.
        message: String,
    },
    /// A profile cannot be written: a metadata value the columns cannot hold.
    #[error("{path}: {message}")]
    Unwritable {
        /// The profile's file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// One submission of the table: a profile with its submission id and weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    /// The `profile` column: the submission's id, unique in a dataset.
    pub id: String,
    /// The `weight` column (1 when null).
    pub weight: f64,
    /// The profile, with `submitter` and `recorded-at` back in its `meta` extra keys.
    pub profile: Profile,
}

const SCHEMA: &str = "
message sediment_profile {
  required binary profile (STRING);
  required binary kind (STRING);
  required binary binary_name (STRING);
  optional binary build_id (STRING);
  optional binary arch (STRING);
  required binary source (STRING);
  optional binary event (STRING);
  required int64 total (INTEGER(64, false));
  optional binary meta (STRING);
  optional binary submitter (STRING);
  optional int64 recorded_at;
  required double weight;
  optional binary name (STRING);
  optional binary file (STRING);
  optional int64 size (INTEGER(64, false));
  optional int64 self_weight (INTEGER(64, false));
  optional binary callee_name (STRING);
  optional binary callee_file (STRING);
  optional int64 call_weight (INTEGER(64, false));
}";

/// The columns schema version 2 adds, spelled as in [`SCHEMA`].
const SAMPLE_SCHEMA: &str = "
  optional int64 offset (INTEGER(64, false));
  optional int64 sample_weight (INTEGER(64, false));
";

/// A column's values for one row group, with definition levels for optional columns.
enum Col {
    Str(Vec<Option<ByteArray>>),
    U64(Vec<Option<u64>>),
    I64(Vec<Option<i64>>),
    F64(Vec<Option<f64>>),
}

impl Col {
    fn push_str(&mut self, v: Option<&str>) {
        if let Col::Str(c) = self {
            c.push(v.map(|s| ByteArray::from(s.as_bytes().to_vec())));
        }
    }
    fn push_u64(&mut self, v: Option<u64>) {
        if let Col::U64(c) = self {
            c.push(v);
        }
    }
    fn push_i64(&mut self, v: Option<i64>) {
        if let Col::I64(c) = self {
            c.push(v);
        }
    }
    fn push_f64(&mut self, v: Option<f64>) {
        if let Col::F64(c) = self {
            c.push(v);
        }
    }
}

/// Values and definition levels of an optional column (levels ignored for required ones).
fn split<T: Clone>(v: &[Option<T>]) -> (Vec<T>, Vec<i16>) {
    let values = v.iter().flatten().cloned().collect();
    let levels = v.iter().map(|x| i16::from(x.is_some())).collect();
    (values, levels)
}

/// The meta extra keys other than submitter and recorded-at, as the `meta` column's text.
fn meta_text(extra: &BTreeMap<String, String>) -> Option<String> {
    let lines: Vec<String> = extra
        .iter()
        .filter(|(k, _)| k.as_str() != META_SUBMITTER && k.as_str() != META_RECORDED_AT)
        .map(|(k, v)| format!("{} {}", escape(k), escape(v)))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Writes `profiles` (each with its submission id, its weight and the file it came from, for
/// errors) as one Parquet table. Fails, naming the profile's file, when a `recorded-at` is not
/// integer Unix seconds.
pub fn write(profiles: &[(&str, f64, &str, &Profile)]) -> Result<Vec<u8>, Error> {
    let out_err = |e: parquet::errors::ParquetError| Error::Parquet {
        path: "parquet output".into(),
        message: e.to_string(),
    };
    // Version 1 unless a profile has samples, so that tables without them stay as they were.
    let with_samples = profiles.iter().any(|p| !p.3.samples.is_empty());
    let (schema_text, version) = if with_samples {
        let close = SCHEMA.rfind('}').unwrap_or(SCHEMA.len());
        (
            format!("{}{SAMPLE_SCHEMA}}}", &SCHEMA[..close]),
            SCHEMA_VERSION_SAMPLES,
        )
    } else {
        (SCHEMA.to_string(), SCHEMA_VERSION)
    };
    let columns: Vec<&str> = if with_samples {
        COLUMNS
            .iter()
            .chain(SAMPLE_COLUMNS.iter())
            .copied()
            .collect()
    } else {
        COLUMNS.to_vec()
    };
    let schema =
        Arc::new(parquet::schema::parser::parse_message_type(&schema_text).map_err(out_err)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_created_by("sediment".to_string())
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_KEY.to_string(),
                version.to_string(),
            )]))
            .build(),
    );
    let mut buf = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut buf, schema, props).map_err(out_err)?;
    for &(id, weight, path, p) in profiles {
        let m = &p.meta;
        let recorded_at = match m.extra.get(META_RECORDED_AT) {
            None => None,
            Some(s) => Some(
                s.parse::<i64>()
                    .ok()
                    .filter(|_| canonical_int(s))
                    .ok_or_else(|| Error::Unwritable {
                        path: path.to_string(),
                        message: format!(
                            "meta {META_RECORDED_AT} `{}` is not integer Unix seconds in canonical form (no `+`, no leading zero)",
                            quote(s)
                        ),
                    })?,
            ),
        };
        let submitter = m.extra.get(META_SUBMITTER).map(String::as_str);
        let meta = meta_text(&m.extra);
        let mut cols: Vec<Col> = columns
            .iter()
            .map(|c| match *c {
                "total" | "size" | "self_weight" | "call_weight" | "offset" | "sample_weight" => {
                    Col::U64(Vec::new())
                }
                "recorded_at" => Col::I64(Vec::new()),
                "weight" => Col::F64(Vec::new()),
                _ => Col::Str(Vec::new()),
            })
            .collect();
        let mut row = |kind: &str,
                       name: Option<&FuncKey>,
                       size: Option<u64>,
                       self_w: Option<u64>,
                       callee: Option<&FuncKey>,
                       call_w: Option<u64>,
                       at: Option<(u64, u64)>| {
            cols[0].push_str(Some(id));
            cols[1].push_str(Some(kind));
            cols[2].push_str(Some(&m.binary));
            cols[3].push_str(m.build_id.as_deref());
            cols[4].push_str(m.arch.as_deref());
            cols[5].push_str(Some(&m.source));
            cols[6].push_str(m.event.as_deref());
            cols[7].push_u64(Some(m.total));
            cols[8].push_str(meta.as_deref());
            cols[9].push_str(submitter);
            cols[10].push_i64(recorded_at);
            cols[11].push_f64(Some(weight));
            cols[12].push_str(name.map(|k| k.name.as_str()));
            cols[13].push_str(name.and_then(|k| k.file.as_deref()));
            cols[14].push_u64(size);
            cols[15].push_u64(self_w);
            cols[16].push_str(callee.map(|k| k.name.as_str()));
            cols[17].push_str(callee.and_then(|k| k.file.as_deref()));
            cols[18].push_u64(call_w);
            if with_samples {
                cols[19].push_u64(at.map(|a| a.0));
                cols[20].push_u64(at.map(|a| a.1));
            }
        };
        row("profile", None, None, None, None, None, None);
        for f in &p.functions {
            row(
                "function",
                Some(&f.key),
                f.size,
                Some(f.self_weight),
                None,
                None,
                None,
            );
        }
        for e in &p.edges {
            let (Some(a), Some(b)) = (
                p.functions.get(e.caller as usize),
                p.functions.get(e.callee as usize),
            ) else {
                continue;
            };
            row(
                "call",
                Some(&a.key),
                None,
                None,
                Some(&b.key),
                Some(e.weight),
                None,
            );
        }
        for smp in &p.samples {
            let Some(f) = p.functions.get(smp.func as usize) else {
                continue;
            };
            row(
                "sample",
                Some(&f.key),
                None,
                None,
                None,
                None,
                Some((smp.offset, smp.weight)),
            );
        }
        let mut group = writer.next_row_group().map_err(out_err)?;
        let mut i = 0;
        while let Some(mut col) = group.next_column().map_err(out_err)? {
            let optional = col_is_optional(columns[i]);
            let levels = |l: Vec<i16>| if optional { Some(l) } else { None };
            match &cols[i] {
                Col::Str(v) => {
                    let (values, l) = split(v);
                    col.typed::<ByteArrayType>()
                        .write_batch(&values, levels(l).as_deref(), None)
                        .map_err(out_err)?;
                }
                Col::U64(v) => {
                    // UINT_64 is stored in INT64's bits.
                    let (values, l) = split(v);
                    let values: Vec<i64> = values.into_iter().map(|x| x as i64).collect();
                    col.typed::<Int64Type>()
                        .write_batch(&values, levels(l).as_deref(), None)
                        .map_err(out_err)?;
                }
                Col::I64(v) => {
                    let (values, l) = split(v);
                    col.typed::<Int64Type>()
                        .write_batch(&values, levels(l).as_deref(), None)
                        .map_err(out_err)?;
                }
                Col::F64(v) => {
                    let (values, l) = split(v);
                    col.typed::<DoubleType>()
                        .write_batch(&values, levels(l).as_deref(), None)
                        .map_err(out_err)?;
                }
            }
            col.close().map_err(out_err)?;
            i += 1;
        }
        group.close().map_err(out_err)?;
    }
    writer.close().map_err(out_err)?;
    Ok(buf)
}

fn col_is_optional(name: &str) -> bool {
    !matches!(
        name,
        "profile" | "kind" | "binary_name" | "source" | "total" | "weight"
    )
}

/// Decimal digits with an optional leading `-`, no leading zero: as `recorded-at` is written.
fn canonical_int(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0"
}

/// One profile being read back: its metadata (from its `profile` row) and its rows.
#[derive(Default)]
struct Partial {
    meta: Option<(Meta, f64)>,
    functions: Vec<(FuncKey, u64, Option<u64>)>,
    calls: Vec<(FuncKey, FuncKey, u64, usize)>,
    /// (function, offset, weight, row) of `sample` rows.
    samples: Vec<(FuncKey, u64, u64, usize)>,
}

/// Reads a Parquet table of schema version 1 or 2 (see the module docs); `path` names the file
/// in errors. Returns the submissions in the order of their `profile` rows.
pub fn read(path: &str, data: Vec<u8>) -> Result<Vec<Submission>, Error> {
    // The `parquet` crate panics on some malformed pages (a level length past the page, found
    // by fuzzing); such a file is an error like any other damaged input, reported in one line:
    // the default hook's message is silenced while the decoder runs (a panic on another thread
    // in that window goes unprinted, and still unwinds as usual).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| read_table(path, data));
    std::panic::set_hook(hook);
    result.unwrap_or_else(|_| {
        Err(Error::Parquet {
            path: path.to_string(),
            message: "damaged Parquet pages (the Parquet decoder failed)".into(),
        })
    })
}

/// The `parquet` crate's message, which quotes the file's own names (a column name of any bytes):
/// its control characters escaped and its length bounded, so the error stays one line.
fn decoder_message(e: &parquet::errors::ParquetError) -> String {
    quote_whole(&e.to_string().chars().take(300).collect::<String>())
}

/// [`read`] without the guard against the decoder's panics.
fn read_table(path: &str, data: Vec<u8>) -> Result<Vec<Submission>, Error> {
    let perr = |e: parquet::errors::ParquetError| Error::Parquet {
        path: path.to_string(),
        message: format!("not a readable Parquet file: {}", decoder_message(&e)),
    };
    let schema_err = |message: String| Error::Schema {
        path: path.to_string(),
        message,
    };
    let damaged = |message: String| Error::Parquet {
        path: path.to_string(),
        message,
    };
    guard::check_footer(&data).map_err(damaged)?;
    let data = bytes::Bytes::from(data);
    let reader = SerializedFileReader::new(data.clone()).map_err(perr)?;
    let meta = reader.metadata().file_metadata();
    if let Some(kv) = meta.key_value_metadata() {
        if let Some(v) = kv.iter().find(|k| k.key == SCHEMA_KEY) {
            let v = v.value.as_deref().unwrap_or("");
            if v != SCHEMA_VERSION && v != SCHEMA_VERSION_SAMPLES {
                return Err(schema_err(format!(
                    "unsupported sediment Parquet schema version `{}` (this build reads versions {SCHEMA_VERSION} and {SCHEMA_VERSION_SAMPLES})",
                    quote(v)
                )));
            }
        }
    }
    // Column positions by name; nested columns are not part of the schema.
    let root = meta.schema_descr().root_schema();
    let fields = root.get_fields();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, f) in fields.iter().enumerate() {
        if !f.is_primitive() {
            return Err(schema_err(format!(
                "column `{}` is nested; the sediment schema has only flat columns",
                quote(f.name())
            )));
        }
        if f.get_basic_info().repetition() == Repetition::REPEATED {
            return Err(schema_err(format!(
                "column `{}` is repeated",
                quote(f.name())
            )));
        }
        check_type(f, path)?;
        index.insert(f.name(), i);
    }
    let mut pos = [0usize; COLUMNS.len()];
    for (j, c) in COLUMNS.iter().enumerate() {
        pos[j] = *index.get(c).ok_or_else(|| {
            schema_err(format!(
                "no column `{c}`: not a sediment profile table (schema version {SCHEMA_VERSION})"
            ))
        })?;
    }
    // Version 2's columns, where the table has them (a version-1 table has no samples).
    let sample_pos: Option<(usize, usize)> = match SAMPLE_COLUMNS.map(|c| index.get(c)) {
        [Some(&o), Some(&w)] => Some((o, w)),
        _ => None,
    };

    let mut order: Vec<String> = Vec::new();
    let mut partials: HashMap<String, Partial> = HashMap::new();
    guard::check_pages(&data, reader.metadata()).map_err(damaged)?;
    let rows = reader.get_row_iter(None).map_err(perr)?;
    for (r, row) in rows.enumerate() {
        let row = row.map_err(|e| Error::Row {
            path: path.to_string(),
            row: r,
            message: format!("unreadable: {}", decoder_message(&e)),
        })?;
        let values: Vec<&Field> = row.get_column_iter().map(|(_, f)| f).collect();
        if values.len() != fields.len() {
            return Err(schema_err("rows do not match the schema".into()));
        }
        let cx = RowCx { path, row: r };
        let get = |j: usize| values[pos[j]];
        let id = cx.req_str(get(0), "profile")?;
        let kind = cx.req_str(get(1), "kind")?;
        if !partials.contains_key(&id) {
            order.push(id.clone());
        }
        let part = partials.entry(id.clone()).or_default();
        match kind.as_str() {
            "profile" => {
                if part.meta.is_some() {
                    return Err(cx.err(format!(
                        "a second `profile` row for profile `{}`",
                        quote(&id)
                    )));
                }
                let mut extra = BTreeMap::new();
                if let Some(text) = cx.opt_str(get(8), "meta")? {
                    parse_meta(&cx, &text, &mut extra)?;
                }
                if let Some(s) = cx.opt_str(get(9), "submitter")? {
                    extra.insert(META_SUBMITTER.to_string(), s);
                }
                if let Some(t) = cx.opt_i64(get(10), "recorded_at")? {
                    extra.insert(META_RECORDED_AT.to_string(), t.to_string());
                }
                let weight = cx.opt_f64(get(11), "weight")?.unwrap_or(1.0);
                if !weight.is_finite() || weight < 0.0 {
                    return Err(cx.err(format!("weight {weight} is not a finite number >= 0")));
                }
                let m = Meta {
                    binary: cx.req_str(get(2), "binary_name")?,
                    build_id: cx.opt_str(get(3), "build_id")?,
                    arch: cx.opt_str(get(4), "arch")?,
                    source: cx.req_str(get(5), "source")?,
                    event: cx.opt_str(get(6), "event")?,
                    total: cx
                        .opt_u64(get(7), "total")?
                        .ok_or_else(|| cx.null("total"))?,
                    extra,
                };
                part.meta = Some((m, weight));
            }
            "function" => {
                let key = FuncKey {
                    name: cx.req_str(get(12), "name")?,
                    file: cx.opt_str(get(13), "file")?,
                };
                let size = cx.opt_u64(get(14), "size")?;
                let w = cx
                    .opt_u64(get(15), "self_weight")?
                    .ok_or_else(|| cx.null("self_weight"))?;
                part.functions.push((key, w, size));
            }
            "call" => {
                let caller = FuncKey {
                    name: cx.req_str(get(12), "name")?,
                    file: cx.opt_str(get(13), "file")?,
                };
                let callee = FuncKey {
                    name: cx.req_str(get(16), "callee_name")?,
                    file: cx.opt_str(get(17), "callee_file")?,
                };
                let w = cx
                    .opt_u64(get(18), "call_weight")?
                    .ok_or_else(|| cx.null("call_weight"))?;
                if w == 0 {
                    return Err(cx.err("call_weight 0 (calls have a weight > 0)".into()));
                }
                part.calls.push((caller, callee, w, r));
            }
            "sample" => {
                let Some((o, w)) = sample_pos else {
                    return Err(cx.err(format!(
                        "a `sample` row in a table without the columns `offset` and `sample_weight` (schema version {SCHEMA_VERSION_SAMPLES})"
                    )));
                };
                let key = FuncKey {
                    name: cx.req_str(get(12), "name")?,
                    file: cx.opt_str(get(13), "file")?,
                };
                let offset = cx
                    .opt_u64(values[o], "offset")?
                    .ok_or_else(|| cx.null("offset"))?;
                let w = cx
                    .opt_u64(values[w], "sample_weight")?
                    .ok_or_else(|| cx.null("sample_weight"))?;
                if w == 0 {
                    return Err(cx.err("sample_weight 0 (samples have a weight > 0)".into()));
                }
                part.samples.push((key, offset, w, r));
            }
            other => {
                return Err(cx.err(format!(
                    "kind `{}` is none of profile, function, call, sample",
                    quote(other)
                )))
            }
        }
    }

    let mut out = Vec::with_capacity(order.len());
    for id in order {
        let Some(part) = partials.remove(&id) else {
            continue;
        };
        let Some((meta, weight)) = part.meta else {
            return Err(schema_err(format!(
                "profile `{}` has rows but no `profile` row (its metadata)",
                quote(&id)
            )));
        };
        let mut b = ProfileBuilder::new(meta);
        let mut seen: HashMap<&FuncKey, ()> = HashMap::with_capacity(part.functions.len());
        for (key, w, size) in &part.functions {
            if seen.insert(key, ()).is_some() {
                return Err(schema_err(format!(
                    "profile `{}` lists function `{}` twice",
                    quote(&id),
                    quote(&key.to_string())
                )));
            }
            b.add_self(key, *w);
            if let Some(s) = size {
                b.set_size(key, *s);
            }
        }
        let mut pairs: HashMap<(&FuncKey, &FuncKey), ()> = HashMap::new();
        for (a, c, w, r) in &part.calls {
            for k in [a, c] {
                if !seen.contains_key(k) {
                    return Err(Error::Row {
                        path: path.to_string(),
                        row: *r,
                        message: format!(
                            "call names function `{}`, which profile `{}` does not list",
                            quote(&k.to_string()),
                            quote(&id)
                        ),
                    });
                }
            }
            if pairs.insert((a, c), ()).is_some() {
                return Err(Error::Row {
                    path: path.to_string(),
                    row: *r,
                    message: format!(
                        "a second call `{}` -> `{}`",
                        quote(&a.to_string()),
                        quote(&c.to_string())
                    ),
                });
            }
            b.add_call(a, c, *w);
        }
        let mut offsets: HashMap<(&FuncKey, u64), ()> = HashMap::new();
        for (k, offset, w, r) in &part.samples {
            let row_err = |message: String| Error::Row {
                path: path.to_string(),
                row: *r,
                message,
            };
            if !seen.contains_key(k) {
                return Err(row_err(format!(
                    "sample names function `{}`, which profile `{}` does not list",
                    quote(&k.to_string()),
                    quote(&id)
                )));
            }
            if offsets.insert((k, *offset), ()).is_some() {
                return Err(row_err(format!(
                    "a second sample at offset {offset} of `{}`",
                    quote(&k.to_string())
                )));
            }
            b.add_sample(k, *offset, *w);
        }
        out.push(Submission {
            id,
            weight,
            profile: b.build(),
        });
    }
    Ok(out)
}

/// Checks that a column's physical and logical type can hold what its name says.
fn check_type(t: &Type, path: &str) -> Result<(), Error> {
    let name = t.name();
    let physical = t.get_physical_type();
    let logical = t.get_basic_info().logical_type();
    let ok = match name {
        "total" | "size" | "self_weight" | "call_weight" | "recorded_at" | "offset"
        | "sample_weight" => match physical {
            PhysicalType::INT64 | PhysicalType::INT32 => true,
            PhysicalType::FIXED_LEN_BYTE_ARRAY | PhysicalType::BYTE_ARRAY => {
                matches!(logical, Some(LogicalType::Decimal { scale: 0, .. }))
            }
            _ => false,
        },
        "weight" => matches!(
            physical,
            PhysicalType::DOUBLE | PhysicalType::FLOAT | PhysicalType::INT64 | PhysicalType::INT32
        ),
        n if COLUMNS.contains(&n) => physical == PhysicalType::BYTE_ARRAY,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(Error::Schema {
            path: path.to_string(),
            message: format!(
                "column `{}` has type {physical} (see docs/design/parquet.md)",
                quote(name)
            ),
        })
    }
}

/// The `meta` column's lines into `extra`; the built-in keys and the two column keys are refused.
fn parse_meta(cx: &RowCx, text: &str, extra: &mut BTreeMap<String, String>) -> Result<(), Error> {
    for line in text.split('\n') {
        let mut parts = line.split(' ');
        let (Some(k), Some(v), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(cx.err(format!("meta line `{}` is not `KEY VALUE`", quote(line))));
        };
        let key = unescape(k).map_err(|e| cx.err(format!("meta key: {e}")))?;
        let value = unescape(v).map_err(|e| cx.err(format!("meta value: {e}")))?;
        if escape(&key) != k || escape(&value) != v {
            return Err(cx.err(format!(
                "meta line `{}` is not escaped in canonical form",
                quote(line)
            )));
        }
        if matches!(
            key.as_str(),
            "binary" | "build-id" | "arch" | "source" | "event" | "total"
        ) || key == META_SUBMITTER
            || key == META_RECORDED_AT
        {
            return Err(cx.err(format!(
                "meta key `{}` belongs in its own column",
                quote(&key)
            )));
        }
        if extra.insert(key.clone(), value).is_some() {
            return Err(cx.err(format!("meta key `{}` given twice", quote(&key))));
        }
    }
    Ok(())
}

struct RowCx<'a> {
    path: &'a str,
    row: usize,
}

impl RowCx<'_> {
    fn err(&self, message: String) -> Error {
        Error::Row {
            path: self.path.to_string(),
            row: self.row,
            message,
        }
    }

    fn null(&self, col: &str) -> Error {
        self.err(format!("{col} is null"))
    }

    fn opt_str(&self, f: &Field, col: &str) -> Result<Option<String>, Error> {
        match f {
            Field::Null => Ok(None),
            Field::Str(s) => Ok(Some(s.clone())),
            Field::Bytes(b) => std::str::from_utf8(b.data())
                .map(|s| Some(s.to_string()))
                .map_err(|_| self.err(format!("{col} is not UTF-8"))),
            other => Err(self.err(format!(
                "{col} is not a string: {}",
                quote(&other.to_string())
            ))),
        }
    }

    fn req_str(&self, f: &Field, col: &str) -> Result<String, Error> {
        self.opt_str(f, col)?.ok_or_else(|| self.null(col))
    }

    /// An integer of any width or a scale-0 decimal, as i128.
    fn opt_int(&self, f: &Field, col: &str) -> Result<Option<i128>, Error> {
        Ok(Some(match f {
            Field::Null => return Ok(None),
            Field::Byte(v) => i128::from(*v),
            Field::Short(v) => i128::from(*v),
            Field::Int(v) => i128::from(*v),
            Field::Long(v) => i128::from(*v),
            Field::UByte(v) => i128::from(*v),
            Field::UShort(v) => i128::from(*v),
            Field::UInt(v) => i128::from(*v),
            Field::ULong(v) => i128::from(*v),
            Field::Decimal(d) if d.scale() == 0 && d.data().len() <= 16 => {
                // Big-endian two's complement, sign-extended to 16 bytes.
                let data = d.data();
                let fill = if data.first().is_some_and(|b| b & 0x80 != 0) {
                    0xFF
                } else {
                    0
                };
                let mut bytes = [fill; 16];
                bytes[16 - data.len()..].copy_from_slice(data);
                i128::from_be_bytes(bytes)
            }
            other => {
                return Err(self.err(format!(
                    "{col} is not an integer: {}",
                    quote(&other.to_string())
                )))
            }
        }))
    }

    fn opt_u64(&self, f: &Field, col: &str) -> Result<Option<u64>, Error> {
        match self.opt_int(f, col)? {
            None => Ok(None),
            Some(v) => u64::try_from(v)
                .map(Some)
                .map_err(|_| self.err(format!("{col} {v} is outside 0..=2^64-1"))),
        }
    }

    fn opt_i64(&self, f: &Field, col: &str) -> Result<Option<i64>, Error> {
        match self.opt_int(f, col)? {
            None => Ok(None),
            Some(v) => i64::try_from(v)
                .map(Some)
                .map_err(|_| self.err(format!("{col} {v} is outside the 64-bit range"))),
        }
    }

    fn opt_f64(&self, f: &Field, col: &str) -> Result<Option<f64>, Error> {
        match f {
            Field::Double(v) => Ok(Some(*v)),
            Field::Float(v) => Ok(Some(f64::from(*v))),
            other => Ok(self.opt_int(other, col)?.map(|v| v as f64)),
        }
    }
}

/// The identity of a binary, as `sediment merge` checks it: its build-id, else its base name.
fn identity(m: &Meta) -> String {
    match &m.build_id {
        Some(b) => format!("b {b}"),
        None => format!("n {}", sediment_profile::base_name(&m.binary)),
    }
}

/// One profile per binary (build-id, else base name) of `submissions`, sorted by binary path then
/// build-id: a binary's only submission unchanged, several merged like `sediment merge` (each
/// with its weight, normalised to a common scale). `path` names the file in errors.
pub fn by_binary(path: &str, submissions: Vec<Submission>) -> Result<Vec<Profile>, Error> {
    let mut groups: BTreeMap<String, Vec<Submission>> = BTreeMap::new();
    for s in submissions {
        groups.entry(identity(&s.profile.meta)).or_default().push(s);
    }
    let mut out = Vec::with_capacity(groups.len());
    for (_, mut subs) in groups {
        if subs.len() == 1 {
            out.extend(subs.pop().map(|s| s.profile));
            continue;
        }
        let mut merger = Merger::new();
        for s in &subs {
            merger
                .add(s.weight, &s.profile)
                .map_err(|e| Error::Schema {
                    path: path.to_string(),
                    message: format!("profile `{}`: {e}", quote(&s.id)),
                })?;
        }
        let merged = merger
            .finish(MergeOptions { force: false })
            .map_err(|e| Error::Schema {
                path: path.to_string(),
                message: format!("submissions of one binary: {e}"),
            })?;
        out.push(merged);
    }
    out.sort_by(|a, b| {
        (a.meta.binary.as_str(), a.meta.build_id.as_deref())
            .cmp(&(b.meta.binary.as_str(), b.meta.build_id.as_deref()))
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Profile {
        let mut m = Meta {
            binary: "/usr/bin/demo".into(),
            build_id: Some("ab12".into()),
            arch: Some("x86_64".into()),
            source: "perf".into(),
            event: Some("cpu-clock".into()),
            total: u64::MAX,
            extra: BTreeMap::new(),
        };
        m.extra.insert("mode".into(), "leaf".into());
        m.extra.insert("odd key".into(), "a b%#".into());
        m.extra.insert(META_SUBMITTER.into(), "host-7".into());
        m.extra.insert(META_RECORDED_AT.into(), "1700000000".into());
        let mut b = ProfileBuilder::new(m);
        let main = FuncKey::global("main");
        let h1 = FuncKey::local("helper", "a.c");
        let h2 = FuncKey::local("helper", "b.c");
        let odd = FuncKey::global("we ird\nname-");
        b.add_self(&main, 0);
        b.add_self(&h1, u64::MAX);
        b.add_self(&h2, 1);
        b.add_self(&odd, 5);
        b.set_size(&h1, 112);
        b.add_call(&main, &h1, u64::MAX);
        b.add_call(&h1, &h2, 3);
        b.add_call(&odd, &odd, 1);
        b.build()
    }

    // Text -> Parquet -> text is byte-identical, also for an empty profile and extreme weights;
    // the same profiles write the same bytes.
    #[test]
    fn round_trip() {
        let p = sample();
        let empty = Profile {
            meta: Meta {
                binary: "libempty.so".into(),
                source: "pprof".into(),
                ..Meta::default()
            },
            ..Profile::default()
        };
        let bytes = write(&[("a", 1.0, "a.sprof", &p), ("b", 2.5, "b.sprof", &empty)]).unwrap();
        let again = write(&[("a", 1.0, "a.sprof", &p), ("b", 2.5, "b.sprof", &empty)]).unwrap();
        assert_eq!(bytes, again);
        let back = read("t.parquet", bytes).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].id, "a");
        assert_eq!(back[0].profile.to_text(), p.to_text());
        assert_eq!(back[1].profile.to_text(), empty.to_text());
        assert_eq!(back[1].weight, 2.5);
    }

    // Samples make a version-2 table (two more columns, `sample` rows) that reads back to the
    // same text; a table whose profiles have none stays version 1.
    #[test]
    fn samples_round_trip_in_version_2() {
        let mut b = ProfileBuilder::from(sample());
        b.add_sample(&FuncKey::local("helper", "a.c"), 0, 7);
        b.add_sample(&FuncKey::local("helper", "a.c"), 0x1c, u64::MAX);
        let p = b.build();
        let bytes = write(&[("a", 1.0, "a.sprof", &p)]).unwrap();
        let version = |bytes: &[u8]| {
            let r = SerializedFileReader::new(bytes::Bytes::from(bytes.to_vec())).unwrap();
            let kv = r
                .metadata()
                .file_metadata()
                .key_value_metadata()
                .unwrap()
                .clone();
            let v = kv.iter().find(|k| k.key == SCHEMA_KEY).unwrap();
            let n = r.metadata().file_metadata().schema_descr().num_columns();
            (v.value.clone().unwrap(), n)
        };
        assert_eq!(version(&bytes), ("2".to_string(), 21));
        let back = read("t.parquet", bytes).unwrap();
        assert_eq!(back[0].profile.to_text(), p.to_text());
        let v1 = write(&[("a", 1.0, "a.sprof", &sample())]).unwrap();
        assert_eq!(version(&v1), ("1".to_string(), 19));
    }

    // Several submissions of one binary become one merged profile; other binaries stay apart.
    #[test]
    fn by_binary_merges_submissions() {
        let p = sample();
        let mut q = p.clone();
        q.meta.extra.insert(META_SUBMITTER.into(), "host-8".into());
        let mut other = p.clone();
        other.meta.build_id = Some("cd34".into());
        let bytes = write(&[
            ("a", 1.0, "a", &p),
            ("b", 1.0, "b", &q),
            ("c", 1.0, "c", &other),
        ])
        .unwrap();
        let subs = read("t.parquet", bytes).unwrap();
        let out = by_binary("t.parquet", subs).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].meta.build_id.as_deref(), Some("ab12"));
        assert_eq!(out[0].meta.source, "merge");
        assert_eq!(out[1].to_text(), other.to_text());
    }

    // A bad recorded-at cannot be written; garbage is a one-line error naming the file.
    #[test]
    fn errors_name_the_file() {
        let mut p = sample();
        p.meta
            .extra
            .insert(META_RECORDED_AT.into(), "yesterday".into());
        let e = write(&[("a", 1.0, "x.sprof", &p)]).unwrap_err().to_string();
        assert!(e.starts_with("x.sprof: meta recorded-at"), "{e}");
        let e = read("bad.parquet", b"PAR1 not really".to_vec())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.parquet: "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    // A table whose footer claims a list of hundreds of millions of schema elements (found by
    // fuzzing: the `parquet` crate reserved ~140 GB for it and the process aborted) is an error.
    #[test]
    fn a_footer_claiming_a_huge_list_is_an_error() {
        let data = include_bytes!("../../../fuzz/corpus/parquet/footer-list-count-oom");
        let e = read("big.parquet", data.to_vec()).unwrap_err().to_string();
        assert!(
            e.starts_with("big.parquet: damaged Parquet footer: a list of "),
            "{e}"
        );
    }

    // The decoder's messages quote the file's column names: a name holding a newline (found by
    // fuzzing) stays escaped in the one line of the error.
    #[test]
    fn a_column_name_with_a_newline_stays_one_line() {
        let data = include_bytes!("../../../fuzz/corpus/parquet/column-name-newline");
        let e = read("nl.parquet", data.to_vec()).unwrap_err().to_string();
        assert!(
            e.starts_with("nl.parquet: not a readable Parquet file: "),
            "{e}"
        );
        assert!(e.contains("%0A"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
