//! Branch stacks (LBR) of `perf.data` samples, decoded from the raw sample bytes.
//!
//! `perf record -e branches:u -j any_call` asks the CPU's last-branch record for the most recent
//! taken branches and stores them in every sample. `linux-perf-event-reader` (0.10) walks over
//! that part of a `PERF_RECORD_SAMPLE` and throws it away, and it drops the attribute bits it does
//! not know (`PERF_SAMPLE_BRANCH_COUNTERS`, Linux 6.8), so this module reads both itself:
//!
//! - [`attrs`] takes each event's raw `perf_event_attr` from the same place the crate takes it
//!   (the `HEADER_EVENT_DESC` feature when present, else the attribute section), keeping
//!   `sample_type`, `read_format` and the full `branch_sample_type`, and the event ids that
//!   tell which event a sample belongs to when there are several.
//! - [`branch_stack`] walks a sample body field by field in `sample_type` bit order, as
//!   `PERF_RECORD_SAMPLE` is laid out in the kernel's `include/uapi/linux/perf_event.h`
//!   (also `tools/perf/Documentation/perf.data-file-format.txt`), up to the branch stack:
//!
//!   ```text
//!   u64 id        if PERF_SAMPLE_IDENTIFIER    u64 ip         if PERF_SAMPLE_IP
//!   u32 pid, tid  if PERF_SAMPLE_TID           u64 time       if PERF_SAMPLE_TIME
//!   u64 addr      if PERF_SAMPLE_ADDR          u64 id         if PERF_SAMPLE_ID
//!   u64 stream_id if PERF_SAMPLE_STREAM_ID     u32 cpu, res   if PERF_SAMPLE_CPU
//!   u64 period    if PERF_SAMPLE_PERIOD
//!   read_format   if PERF_SAMPLE_READ     (one value, or u64 nr + nr values with
//!                                          PERF_FORMAT_GROUP; each optionally with id, lost)
//!   u64 nr, u64 ips[nr]        if PERF_SAMPLE_CALLCHAIN
//!   u32 size, u8 data[size]    if PERF_SAMPLE_RAW (size includes the padding to 8 bytes)
//!   u64 nr                     if PERF_SAMPLE_BRANCH_STACK, then
//!     u64 hw_idx               if branch_sample_type has PERF_SAMPLE_BRANCH_HW_INDEX
//!     { u64 from, to, flags }  [nr]   (struct perf_branch_entry)
//!     u64 counters             [nr]   if branch_sample_type has PERF_SAMPLE_BRANCH_COUNTERS
//!   ```
//!
//!   `nr` is checked against the bytes left in the record before anything is allocated, so a
//!   crafted count is an error naming the offset of the field, never a huge allocation.
//! - [`check_samples`] runs that decoder over every sample of the data section in file order
//!   before `linux-perf-data` sees the records (it sorts them by time, which loses their file
//!   offsets), so that a damaged branch stack is reported at its byte offset in the file.
//!
//! Only `from` and `to` are kept: the flags (mispredict, cycles, branch type) and the counters
//! say nothing about which function calls which. Whether an entry is a call is decided by the
//! importer ([`is_call_filter`] and the module docs of [`crate::perf`]).
//!
//! Turned down: patching `linux-perf-event-reader` to return the branch stack. The fork would
//! have to be maintained, and the crate would still need the raw attribute bits it discards.

use crate::perf::{u32_at, u64_at};
use std::collections::HashMap;

/// `PERF_RECORD_SAMPLE`.
pub(crate) const RECORD_SAMPLE: u32 = 9;

/// `sample_type` bits, in the order their fields appear in a sample (perf_event.h).
const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_ADDR: u64 = 1 << 3;
const SAMPLE_READ: u64 = 1 << 4;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
const SAMPLE_ID: u64 = 1 << 6;
const SAMPLE_CPU: u64 = 1 << 7;
const SAMPLE_PERIOD: u64 = 1 << 8;
const SAMPLE_STREAM_ID: u64 = 1 << 9;
const SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_SAMPLE_BRANCH_STACK`.
pub(crate) const SAMPLE_BRANCH_STACK: u64 = 1 << 11;
const SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// `read_format` bits.
const FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
const FORMAT_ID: u64 = 1 << 2;
const FORMAT_GROUP: u64 = 1 << 3;
const FORMAT_LOST: u64 = 1 << 4;

/// `branch_sample_type` bits that select which branches are recorded (`perf record -j`).
const BRANCH_ANY: u64 = 1 << 3;
const BRANCH_ANY_CALL: u64 = 1 << 4;
const BRANCH_ANY_RETURN: u64 = 1 << 5;
const BRANCH_IND_CALL: u64 = 1 << 6;
const BRANCH_COND: u64 = 1 << 10;
const BRANCH_CALL_STACK: u64 = 1 << 11;
const BRANCH_IND_JUMP: u64 = 1 << 12;
const BRANCH_CALL: u64 = 1 << 13;
/// `PERF_SAMPLE_BRANCH_HW_INDEX`: a `u64 hw_idx` follows `nr`.
const BRANCH_HW_INDEX: u64 = 1 << 17;
/// `PERF_SAMPLE_BRANCH_COUNTERS` (Linux 6.8, `-j ...,counter`): `u64 counters[nr]` follow the
/// entries.
const BRANCH_COUNTERS: u64 = 1 << 19;

/// Size of `struct perf_branch_entry`.
const ENTRY_SIZE: usize = 24;
/// Byte offsets inside `perf_event_attr`.
const ATTR_SIZE_AT: u64 = 4;
const ATTR_SAMPLE_TYPE_AT: u64 = 24;
const ATTR_READ_FORMAT_AT: u64 = 32;
const ATTR_BRANCH_SAMPLE_TYPE_AT: u64 = 72;
/// `PERF_ATTR_SIZE_VER0` (an attr `size` of 0 means this) and `PERF_ATTR_SIZE_VER2`, the first
/// size with `branch_sample_type`.
const ATTR_SIZE_VER0: u64 = 64;
const ATTR_SIZE_VER2: u64 = 80;

/// The fields of one event's `perf_event_attr` that decide a sample's layout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RawAttr {
    /// `sample_type`.
    pub sample_type: u64,
    /// `read_format`.
    pub read_format: u64,
    /// `branch_sample_type`, every bit kept.
    pub branch_sample_type: u64,
}

/// One taken branch: the address of the branch instruction and of its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Branch {
    pub from: u64,
    pub to: u64,
}

/// The events of a file: raw attributes by attribute index, and event id -> attribute index.
#[derive(Debug, Default)]
pub(crate) struct Attrs {
    pub attrs: Vec<RawAttr>,
    pub by_id: HashMap<u64, usize>,
}

/// Where the attributes are, as found by the header checks of [`crate::perf`].
pub(crate) struct AttrSource {
    /// `(start, end)` of `HEADER_EVENT_DESC`, already checked by `check_event_desc`.
    pub event_desc: Option<(u64, u64)>,
    /// `(start, end)` of the attribute section, and the size of one entry in it.
    pub attr_section: (u64, u64),
    pub attr_entry_size: u64,
}

/// Reads one `perf_event_attr` of `room` bytes at `at`; `None` when it runs past the file.
fn raw_attr(data: &[u8], at: u64, room: u64, big: bool) -> Option<RawAttr> {
    let size = match u32_at(data, at + ATTR_SIZE_AT, big)? {
        0 => ATTR_SIZE_VER0,
        n => u64::from(n),
    };
    let branch_sample_type = if size >= ATTR_SIZE_VER2 && room >= ATTR_SIZE_VER2 {
        u64_at(data, at + ATTR_BRANCH_SAMPLE_TYPE_AT, big)?
    } else {
        0
    };
    Some(RawAttr {
        sample_type: u64_at(data, at + ATTR_SAMPLE_TYPE_AT, big)?,
        read_format: u64_at(data, at + ATTR_READ_FORMAT_AT, big)?,
        branch_sample_type,
    })
}

/// The raw attributes, from the same place `linux-perf-data` reads them (event descriptions
/// first, then the attribute section). `None` when they cannot be read from either (an old
/// `event_types` file, simpleperf): the caller then uses the crate's parsed values.
pub(crate) fn attrs(data: &[u8], src: &AttrSource, big: bool) -> Option<Attrs> {
    let mut out = Attrs::default();
    let add_ids = |out: &mut Attrs, ids_at: u64, nr_ids: u64, index: usize| -> Option<()> {
        let end = ids_at.checked_add(nr_ids.checked_mul(8)?)?;
        if end > data.len() as u64 {
            return None;
        }
        for i in 0..nr_ids {
            out.by_id.insert(u64_at(data, ids_at + 8 * i, big)?, index);
        }
        Some(())
    };
    if let Some((start, end)) = src.event_desc {
        // u32 nr, u32 attr_size, then per event: attr, u32 nr_ids, u32 len + string, ids.
        let nr = u32_at(data, start, big)?;
        let attr_size = u64::from(u32_at(data, start + 4, big)?);
        let mut at = start + 8;
        for index in 0..nr as usize {
            out.attrs.push(raw_attr(data, at, attr_size, big)?);
            let ids_count_at = at.checked_add(attr_size)?;
            let nr_ids = u64::from(u32_at(data, ids_count_at, big)?);
            let str_len = u64::from(u32_at(data, ids_count_at + 4, big)?);
            let ids_at = (ids_count_at + 8).checked_add(str_len)?;
            add_ids(&mut out, ids_at, nr_ids, index)?;
            at = ids_at + 8 * nr_ids;
            if at > end {
                return None;
            }
        }
        return Some(out);
    }
    let (start, end) = src.attr_section;
    let entry = src.attr_entry_size;
    // struct perf_file_attr { perf_event_attr attr; perf_file_section ids; }
    if entry < ATTR_SIZE_VER0 + 16 {
        return None;
    }
    let count = (end - start) / entry;
    for index in 0..count as usize {
        let at = start + index as u64 * entry;
        out.attrs.push(raw_attr(data, at, entry - 16, big)?);
        let ids_at = at + entry - 16;
        let (ids_off, ids_size) = (u64_at(data, ids_at, big)?, u64_at(data, ids_at + 8, big)?);
        add_ids(&mut out, ids_off, ids_size / 8, index)?;
    }
    (!out.attrs.is_empty()).then_some(out)
}

/// True when the event records only calls (`-j any_call`, `call`, `ind_call`, or the LBR call
/// stack): then every entry is a call edge, whatever its target offset.
pub(crate) fn is_call_filter(branch_sample_type: u64) -> bool {
    const SELECT: u64 = BRANCH_ANY
        | BRANCH_ANY_CALL
        | BRANCH_ANY_RETURN
        | BRANCH_IND_CALL
        | BRANCH_COND
        | BRANCH_CALL_STACK
        | BRANCH_IND_JUMP
        | BRANCH_CALL;
    const CALLS: u64 = BRANCH_ANY_CALL | BRANCH_IND_CALL | BRANCH_CALL | BRANCH_CALL_STACK;
    let selected = branch_sample_type & SELECT;
    selected != 0 && selected & !CALLS == 0
}

/// A bounds-checked reader over one sample body; errors carry the offset in the body.
struct Cursor<'a> {
    body: &'a [u8],
    at: usize,
    big: bool,
}

impl Cursor<'_> {
    fn u64(&mut self, what: &str) -> Result<u64, (usize, String)> {
        let v = u64_at(self.body, self.at as u64, self.big).ok_or_else(|| {
            (
                self.at,
                format!("sample record ends inside its {what} field"),
            )
        })?;
        self.at += 8;
        Ok(v)
    }

    fn u32(&mut self, what: &str) -> Result<u32, (usize, String)> {
        let v = u32_at(self.body, self.at as u64, self.big).ok_or_else(|| {
            (
                self.at,
                format!("sample record ends inside its {what} field"),
            )
        })?;
        self.at += 4;
        Ok(v)
    }

    /// Skips `count` items of `size` bytes, `count` read from the record at `count_at`.
    fn skip(
        &mut self,
        count: u64,
        size: u64,
        count_at: usize,
        what: &str,
    ) -> Result<(), (usize, String)> {
        let left = (self.body.len() - self.at.min(self.body.len())) as u64;
        match count.checked_mul(size) {
            Some(n) if n <= left => {
                self.at += n as usize;
                Ok(())
            }
            _ => Err((
                count_at,
                format!("{what} of {count} entries does not fit in the {left} bytes left in the sample record"),
            )),
        }
    }
}

/// The branch stack of one sample body (the record without its 8-byte header), or `None` when
/// the event does not record one. Errors give the offset in `body` of the field that failed.
pub(crate) fn branch_stack(
    body: &[u8],
    attr: &RawAttr,
    big: bool,
) -> Result<Option<Vec<Branch>>, (usize, String)> {
    let st = attr.sample_type;
    if st & SAMPLE_BRANCH_STACK == 0 {
        return Ok(None);
    }
    let mut c = Cursor { body, at: 0, big };
    // The fixed-size fields before READ, in layout order.
    for (bit, name) in [
        (SAMPLE_IDENTIFIER, "identifier"),
        (SAMPLE_IP, "ip"),
        (SAMPLE_TID, "pid/tid"),
        (SAMPLE_TIME, "time"),
        (SAMPLE_ADDR, "addr"),
        (SAMPLE_ID, "id"),
        (SAMPLE_STREAM_ID, "stream_id"),
        (SAMPLE_CPU, "cpu"),
        (SAMPLE_PERIOD, "period"),
    ] {
        if st & bit != 0 {
            c.u64(name)?;
        }
    }
    if st & SAMPLE_READ != 0 {
        let rf = attr.read_format;
        let times = u64::from(rf & FORMAT_TOTAL_TIME_ENABLED != 0)
            + u64::from(rf & FORMAT_TOTAL_TIME_RUNNING != 0);
        let per_value = 8 * (1 + u64::from(rf & FORMAT_ID != 0) + u64::from(rf & FORMAT_LOST != 0));
        if rf & FORMAT_GROUP != 0 {
            let nr_at = c.at;
            let nr = c.u64("read_format nr")?;
            c.skip(times, 8, nr_at, "read_format times")?;
            c.skip(nr, per_value, nr_at, "read_format group")?;
        } else {
            let at = c.at;
            c.skip(1, per_value + 8 * times, at, "read_format value")?;
        }
    }
    if st & SAMPLE_CALLCHAIN != 0 {
        let nr_at = c.at;
        let nr = c.u64("callchain nr")?;
        c.skip(nr, 8, nr_at, "callchain")?;
    }
    if st & SAMPLE_RAW != 0 {
        let size_at = c.at;
        let size = c.u32("raw size")?;
        c.skip(u64::from(size), 1, size_at, "raw data")?;
    }
    let nr_at = c.at;
    let nr = c.u64("branch stack nr")?;
    if attr.branch_sample_type & BRANCH_HW_INDEX != 0 {
        c.u64("branch stack hw_idx")?;
    }
    let per_entry =
        ENTRY_SIZE as u64 + 8 * u64::from(attr.branch_sample_type & BRANCH_COUNTERS != 0);
    let first = c.at;
    c.skip(nr, per_entry, nr_at, "branch stack")?;
    // `nr` now fits in the record, so this allocation is bounded by the record size.
    let entries = (0..nr as usize)
        .map(|i| {
            let at = (first + i * ENTRY_SIZE) as u64;
            Branch {
                from: u64_at(body, at, big).unwrap_or(0),
                to: u64_at(body, at + 8, big).unwrap_or(0),
            }
        })
        .collect();
    Ok(Some(entries))
}

/// Where a sample's event id is, when a file has several events: first with
/// `PERF_SAMPLE_IDENTIFIER`, else after the fields before `PERF_SAMPLE_ID`. Files with several
/// events keep it at one place for all (perf arranges that; `linux-perf-data` refuses other
/// files), so the first event's `sample_type` tells.
fn id_position(sample_type: u64) -> Option<u64> {
    if sample_type & SAMPLE_IDENTIFIER != 0 {
        return Some(0);
    }
    (sample_type & SAMPLE_ID != 0).then(|| {
        8 * u64::from(
            (sample_type & (SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_ADDR)).count_ones(),
        )
    })
}

/// Size of `struct perf_event_header`.
const RECORD_HEADER_SIZE: u64 = 8;

/// `PERF_RECORD_AUXTRACE`: a record whose trace data (its first `u64`, in bytes) follows it
/// outside its own size.
const RECORD_AUXTRACE: u32 = 71;

/// The records of the data section `start..end`: `(offset, type, size)` of each, walking the
/// headers (and past an AUXTRACE record's trace data, as perf does) until one is malformed or
/// the section ends; the parser reports a malformed one. An AUXTRACE record whose trace data
/// would run past the section is an error (offset, message): the `perf.data` parser would
/// allocate that many bytes before finding them missing, and a stranger's file can claim
/// terabytes.
pub(crate) fn records(
    data: &[u8],
    (start, end): (u64, u64),
    big: bool,
) -> impl Iterator<Item = Result<(u64, u32, u64), (u64, String)>> + '_ {
    let mut at = start;
    std::iter::from_fn(move || {
        if at.checked_add(RECORD_HEADER_SIZE)? > end {
            return None;
        }
        let kind = u32_at(data, at, big)?;
        let size = data.get(at as usize + 6..at as usize + 8)?;
        let size = u64::from(if big {
            u16::from_be_bytes([size[0], size[1]])
        } else {
            u16::from_le_bytes([size[0], size[1]])
        });
        if size < RECORD_HEADER_SIZE || at + size > end {
            return None;
        }
        let record = (at, kind, size);
        at += size;
        if kind == RECORD_AUXTRACE {
            let trace = u64_at(data, record.0 + RECORD_HEADER_SIZE, big)?;
            match at.checked_add(trace).filter(|&next| next <= end) {
                Some(next) => at = next,
                None => {
                    at = end; // nothing after it can be walked
                    return Some(Err((
                        record.0,
                        format!(
                            "AUXTRACE record claims {trace} bytes of trace data, past the end of \
                             the data section"
                        ),
                    )));
                }
            }
        }
        Some(Ok(record))
    })
}

/// Decodes the branch stack of every sample in the data section `[start, end)` in file order,
/// returning the file offset and message of the first damaged one. Records whose event cannot
/// be told (an unknown id) are skipped; a record size that breaks the walk ends it, leaving
/// that error to the record parser.
pub(crate) fn check_samples(
    data: &[u8],
    (start, end): (u64, u64),
    attrs: &Attrs,
    big: bool,
) -> Result<(), (u64, String)> {
    if !attrs
        .attrs
        .iter()
        .any(|a| a.sample_type & SAMPLE_BRANCH_STACK != 0)
    {
        return Ok(());
    }
    for record in records(data, (start, end), big) {
        let (at, kind, size) = record?;
        let body_at = at + RECORD_HEADER_SIZE;
        if kind == RECORD_SAMPLE {
            let body = &data[body_at as usize..(at + size) as usize];
            let attr = if attrs.attrs.len() == 1 {
                attrs.attrs.first()
            } else {
                id_position(attrs.attrs[0].sample_type)
                    .and_then(|at| u64_at(body, at, big))
                    .and_then(|id| attrs.by_id.get(&id))
                    .and_then(|&i| attrs.attrs.get(i))
            };
            if let Some(attr) = attr {
                branch_stack(body, attr, big).map_err(|(off, m)| (body_at + off as u64, m))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A record header: type, misc 0, size.
    fn header(kind: u32, size: u16) -> Vec<u8> {
        let mut h = kind.to_le_bytes().to_vec();
        h.extend(0u16.to_le_bytes());
        h.extend(size.to_le_bytes());
        h
    }

    // The walk steps over an AUXTRACE record's trace data (its first u64) to the next record;
    // trace data claimed past the section is an error at the record, and the walk stops.
    #[test]
    fn records_skip_auxtrace_data_and_refuse_too_much() {
        let mut d = header(RECORD_AUXTRACE, 16);
        d.extend(words(&[24])); // 24 bytes of trace data follow
        d.extend([0xAA; 24]);
        d.extend(header(RECORD_SAMPLE, 8));
        let end = d.len() as u64;
        let got: Vec<_> = records(&d, (0, end), false).collect();
        assert_eq!(
            got,
            [Ok((0, RECORD_AUXTRACE, 16)), Ok((40, RECORD_SAMPLE, 8))]
        );

        let mut d = header(RECORD_AUXTRACE, 16);
        d.extend(words(&[0x55a1_5d61_f249]));
        d.extend(header(RECORD_SAMPLE, 8));
        let end = d.len() as u64;
        let got: Vec<_> = records(&d, (0, end), false).collect();
        assert_eq!(got.len(), 1, "{got:?}");
        let (at, message) = got[0].clone().unwrap_err();
        assert_eq!(at, 0);
        assert!(
            message.contains("94151544795721 bytes of trace data"),
            "{message}"
        );
    }

    const ANY_CALL: u64 = BRANCH_ANY_CALL | 1; // with PERF_SAMPLE_BRANCH_USER

    // ip, tid, then a two-entry stack: entries come back in order, flags dropped.
    #[test]
    fn decodes_entries_after_the_fields_before_them() {
        let attr = RawAttr {
            sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_BRANCH_STACK,
            read_format: 0,
            branch_sample_type: ANY_CALL,
        };
        let body = words(&[0x10, 7, 2, 0xa, 0xb, 0, 0xc, 0xd, 0]);
        let b = branch_stack(&body, &attr, false).unwrap().unwrap();
        assert_eq!(
            b,
            vec![Branch { from: 0xa, to: 0xb }, Branch { from: 0xc, to: 0xd }]
        );
    }

    // hw_idx shifts the entries by one word; counters add one word per entry at the end.
    #[test]
    fn hw_idx_and_counters_change_the_layout() {
        let mut attr = RawAttr {
            sample_type: SAMPLE_BRANCH_STACK,
            read_format: 0,
            branch_sample_type: ANY_CALL | BRANCH_HW_INDEX,
        };
        let body = words(&[1, 99, 0xa, 0xb, 0]);
        assert_eq!(
            branch_stack(&body, &attr, false).unwrap().unwrap(),
            vec![Branch { from: 0xa, to: 0xb }]
        );
        attr.branch_sample_type = ANY_CALL | BRANCH_COUNTERS;
        let body = words(&[1, 0xa, 0xb, 0, 5]);
        assert_eq!(
            branch_stack(&body, &attr, false).unwrap().unwrap(),
            vec![Branch { from: 0xa, to: 0xb }]
        );
        // Without its counter word the same stack no longer fits.
        let e = branch_stack(&body[..32], &attr, false).unwrap_err();
        assert_eq!(e.0, 0, "{}", e.1);
    }

    // A group read_format and a callchain are skipped by their counts; big-endian works.
    #[test]
    fn skips_read_group_callchain_and_raw() {
        let attr = RawAttr {
            sample_type: SAMPLE_READ | SAMPLE_CALLCHAIN | SAMPLE_RAW | SAMPLE_BRANCH_STACK,
            read_format: FORMAT_GROUP | FORMAT_ID | FORMAT_TOTAL_TIME_ENABLED,
            branch_sample_type: BRANCH_ANY,
        };
        // read: nr=2, time_enabled, (value,id) x2; callchain nr=1; raw size 4 + 4 bytes.
        let mut v: Vec<u64> = vec![2, 0, 1, 1, 2, 2, 1, 0x55];
        let raw: u64 = 4; // u32 size = 4 then 4 data bytes, as one word (big-endian: size first)
        v.push(raw << 32);
        v.extend([1, 0xa, 0xb, 0]);
        let body: Vec<u8> = v.iter().flat_map(|x| x.to_be_bytes()).collect();
        assert_eq!(
            branch_stack(&body, &attr, true).unwrap().unwrap(),
            vec![Branch { from: 0xa, to: 0xb }]
        );
    }

    // A count larger than the record is refused at the offset of the count, before allocating.
    #[test]
    fn huge_nr_is_an_error_at_its_offset() {
        let attr = RawAttr {
            sample_type: SAMPLE_IP | SAMPLE_BRANCH_STACK,
            read_format: 0,
            branch_sample_type: ANY_CALL,
        };
        let body = words(&[0x10, u64::MAX / 2, 0xa, 0xb, 0]);
        let (at, msg) = branch_stack(&body, &attr, false).unwrap_err();
        assert_eq!(at, 8);
        assert!(msg.contains("does not fit"), "{msg}");
        let (at, _) = branch_stack(&body[..12], &attr, false).unwrap_err();
        assert_eq!(at, 8);
    }

    // A sample's event id is at 0 with IDENTIFIER, else after ip, tid, time and addr.
    #[test]
    fn id_positions() {
        assert_eq!(
            id_position(SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_ID),
            Some(0)
        );
        assert_eq!(
            id_position(SAMPLE_IP | SAMPLE_TID | SAMPLE_ID | SAMPLE_CPU),
            Some(16)
        );
        assert_eq!(id_position(SAMPLE_IP | SAMPLE_TID), None);
    }

    // With two events, each sample is checked against its own event (found by its id): a
    // `cycles` sample whose bytes would read as a huge branch count is not one; a damaged
    // branch sample is reported at the file offset of its count.
    #[test]
    fn check_samples_uses_each_samples_event() {
        let branches = RawAttr {
            sample_type: SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_BRANCH_STACK,
            read_format: 0,
            branch_sample_type: ANY_CALL,
        };
        let cycles = RawAttr {
            sample_type: SAMPLE_IDENTIFIER | SAMPLE_IP,
            ..RawAttr::default()
        };
        let attrs = Attrs {
            attrs: vec![branches, cycles],
            by_id: HashMap::from([(1, 0), (2, 1)]),
        };
        let sample = |body: &[u64]| {
            let mut r = vec![9u8, 0, 0, 0, 2, 0];
            r.extend((8 + 8 * body.len() as u16).to_le_bytes());
            r.extend(words(body));
            r
        };
        // 16 bytes of something before the data section.
        let mut data = vec![0u8; 16];
        data.extend(sample(&[2, 0x10, u64::MAX])); // cycles: the third word is not a count
        data.extend(sample(&[1, 0x10, 1, 0xa, 0xb, 0])); // branches: one entry
        let end = data.len() as u64;
        assert_eq!(check_samples(&data, (16, end), &attrs, false), Ok(()));
        data.extend(sample(&[1, 0x10, 5, 0xa, 0xb, 0])); // branches: 5 claimed, 1 present
        let end2 = data.len() as u64;
        let (at, _) = check_samples(&data, (16, end2), &attrs, false).unwrap_err();
        // Header 8, identifier 8, ip 8 into the third record.
        assert_eq!(at, end + 24);
    }

    // Only call filters make every entry a call.
    #[test]
    fn call_filters() {
        assert!(is_call_filter(BRANCH_ANY_CALL | 1));
        assert!(is_call_filter(
            BRANCH_CALL | BRANCH_IND_CALL | BRANCH_HW_INDEX
        ));
        assert!(!is_call_filter(BRANCH_ANY | 1));
        assert!(!is_call_filter(BRANCH_ANY_CALL | BRANCH_ANY_RETURN));
        assert!(!is_call_filter(1));
    }
}
