//! gprof's `gmon.out`: the call counts and PC histogram that `gcc -pg` programs write at exit.
//!
//! The format is glibc's (`gmon/sys/gmon_out.h`, written by `gmon/gmon.c`, read by binutils
//! `gprof/gmon_io.c`). All integers are in the byte order of the profiled machine, addresses are
//! as wide as its pointers (8 bytes on x86_64, taken from the binary's architecture), and nothing
//! is padded:
//!
//! ```text
//! header   cookie "gmon" (4) | version (4) = 1 | spare (12)
//! records  tag (1) | body, repeated to the end of the file
//!   tag 0  GMON_TAG_TIME_HIST  low_pc (A) | high_pc (A) | hist_size (4, number of bins)
//!                              | prof_rate (4, Hz) | dimen (15, "seconds") | dimen_abbrev (1)
//!                              | hist_size bins of u16 ticks
//!   tag 1  GMON_TAG_CG_ARC     from_pc (A) | self_pc (A) | count (4)
//!   tag 2  GMON_TAG_BB_COUNT   n (4) | n pairs of address (A) | count (A)
//! ```
//!
//! The byte order is read from the version field (1 must read as 1), so the reader needs no
//! table of big-endian architectures.
//!
//! **Call arcs.** mcount, called at the entry of every `-pg` function, records the pair
//! (its caller's return address, its own return address). So `self_pc` points *inside* the
//! callee, just after the mcount call, and `from_pc` inside the caller. glibc keeps the arcs in
//! a hash table indexed by `from_pc` and rebuilds `from_pc` from the index when writing, which
//! rounds it down to a multiple of `HASHFRACTION * sizeof(u_long)` (16 bytes on x86_64) from
//! `low_pc`. With functions 16-byte aligned, as gcc places them at `-O1` and above, the rounded
//! address stays in the caller; it is looked up like any address. Both ends are looked up with
//! [`Binary::lookup`] (the containing symbol), each arc adds its count to the edge caller ->
//! callee, and the same pair from several call sites (several arcs) is summed. An arc with an end
//! outside every symbol (`from_pc` in code without symbols, such as a PLT stub) is dropped and its
//! count kept in `meta unresolved-calls`. A tail call (`jmp`) never returns through its caller, so
//! gprof credits the call to the caller's caller; this importer cannot undo that.
//!
//! **Histogram.** `profil()` adds one tick to the bin holding the interrupted PC, `prof_rate`
//! times a second of CPU time (`ITIMER_PROF`). Bin `i` covers
//! `[low_pc + i*(high_pc-low_pc)/hist_size, low_pc + (i+1)*(high_pc-low_pc)/hist_size)`, computed
//! exactly in 128-bit integers. A bin's ticks go, whole, to the function containing the bin's
//! first address. Turned down: binutils gprof's proportional split of a bin over the functions
//! it overlaps, which gives fractional ticks; glibc bins are 4 bytes (`HISTFRACTION` 2 times a
//! 2-byte counter), so a bin straddles two functions only when one starts at an address that is
//! not a multiple of 4, and then the error is under one bin. Ticks in no function count only in
//! `meta total`, which is the sum of all bins. Self weights are therefore ticks (event
//! `prof-tick`) and edge weights exact call counts, as in gprof's own report.
//!
//! **Basic-block counts** (tag 2, from the long-gone `-a`/`-fprofile-arcs` support of old gcc)
//! are checked for length and skipped: Sediment orders functions.
//!
//! **PIE.** A PIE runs at a random base, but glibc 2.36 (Debian 12, the fixture's) writes
//! *link-time* addresses: in `tests/fixtures/gprof` the histogram starts at `low_pc` 0 and the arcs
//! land on the `nm` addresses. An older libc that wrote run-time addresses would give arcs that
//! resolve to nothing; the reader then refuses the file, since a histogram that overlaps no
//! executable segment of the binary means a wrong binary or run-time addresses.
//!
//! **Bounds.** `hist_size` and the bb count are checked against the bytes left before anything
//! is read or allocated, and the only allocations are the builder's maps, bounded by the number
//! of symbols in the binary.

use crate::Error;
use sediment_elf::Binary;
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};

/// Value of `meta source` in profiles read from `gmon.out`.
pub const SOURCE: &str = "gprof";

/// Value of `meta event`: self weights are `profil()` ticks.
pub const EVENT: &str = "prof-tick";

/// `GMON_MAGIC`.
const MAGIC: &[u8; 4] = b"gmon";
/// `GMON_VERSION`, the only version glibc has ever written.
const VERSION: u32 = 1;
/// Size of `struct gmon_hdr`: cookie, version and three spare ints.
const HEADER_LEN: usize = 20;
/// `GMON_TAG_TIME_HIST`.
const TAG_TIME_HIST: u8 = 0;
/// `GMON_TAG_CG_ARC`.
const TAG_CG_ARC: u8 = 1;
/// `GMON_TAG_BB_COUNT`.
const TAG_BB_COUNT: u8 = 2;
/// Bytes of `dimen` plus `dimen_abbrev` in the histogram header.
const DIMEN_LEN: usize = 16;

/// A bounds-checked cursor over the file, in the file's byte order and address width.
struct Reader<'a> {
    path: &'a str,
    data: &'a [u8],
    pos: usize,
    big_endian: bool,
    addr_width: usize,
}

impl<'a> Reader<'a> {
    fn corrupt(&self, offset: usize, message: String) -> Error {
        Error::Corrupt {
            path: self.path.to_string(),
            offset: offset as u64,
            message,
        }
    }

    /// The next `n` bytes, or a "truncated" error naming `what` at the current offset.
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        let left = self.data.len() - self.pos;
        if n > left {
            return Err(self.corrupt(
                self.pos,
                format!("truncated {what}: needs {n} bytes, {left} left"),
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// An unsigned integer of `bytes.len()` (at most 8) bytes in the file's byte order.
    fn uint(&self, bytes: &[u8]) -> u64 {
        let fold = |acc: u64, b: &u8| (acc << 8) | u64::from(*b);
        if self.big_endian {
            bytes.iter().fold(0, fold)
        } else {
            bytes.iter().rev().fold(0, fold)
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.take(4, what)?;
        Ok(self.uint(b) as u32)
    }

    fn addr(&mut self, what: &str) -> Result<u64, Error> {
        let b = self.take(self.addr_width, what)?;
        Ok(self.uint(b))
    }
}

/// Pointer width in bytes of an architecture named as `sediment-elf` names them.
fn address_width(arch: &str) -> Option<usize> {
    match arch {
        "x86_64" | "aarch64" | "riscv64" | "ppc64" | "s390x" | "mips64" | "loongarch64"
        | "sparc64" => Some(8),
        "x86" | "arm" | "riscv32" | "mips" | "ppc" | "sparc" => Some(4),
        _ => None,
    }
}

/// Reads the `gmon.out` held in `bytes` (`path` names it in errors) against `binary`, the ELF
/// file of the profiled program, whose path or name `binary_path` becomes `meta binary`.
pub fn read(
    path: &str,
    bytes: &[u8],
    binary_path: &str,
    binary: &Binary,
) -> Result<Profile, Error> {
    let format = |message: String| Error::Format {
        path: path.to_string(),
        message,
    };
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(format(
            "not a gmon.out file (no \"gmon\" header; was it written by a -pg program?)".into(),
        ));
    }
    let addr_width = address_width(&binary.arch).ok_or_else(|| {
        format(format!(
            "address width of architecture `{}` unknown to the gmon.out reader",
            binary.arch
        ))
    })?;
    let version = &bytes[4..8];
    let big_endian = if version == VERSION.to_le_bytes() {
        false
    } else if version == VERSION.to_be_bytes() {
        true
    } else {
        return Err(Error::Corrupt {
            path: path.to_string(),
            offset: 4,
            message: format!(
                "unsupported gmon.out version (bytes {:02x?}, expected 1)",
                version
            ),
        });
    };
    let mut r = Reader {
        path,
        data: bytes,
        pos: HEADER_LEN,
        big_endian,
        addr_width,
    };

    let mut builder = ProfileBuilder::new(Meta::default());
    let mut total = 0u64;
    let mut unresolved_calls = 0u64;
    let mut prof_rate: Option<u32> = None;
    let mut hist_records = 0usize;
    let key = |i: usize| -> &FuncKey { &binary.functions[i].key };
    let mut touched: Vec<usize> = Vec::new();

    while r.pos < r.data.len() {
        let record_at = r.pos;
        let tag = r.take(1, "record tag")?[0];
        match tag {
            TAG_TIME_HIST => {
                let low = r.addr("histogram low_pc")?;
                let high = r.addr("histogram high_pc")?;
                let n = r.u32("histogram hist_size")? as usize;
                let rate = r.u32("histogram prof_rate")?;
                r.take(DIMEN_LEN, "histogram dimension")?;
                if high < low {
                    return Err(r.corrupt(
                        record_at,
                        format!("histogram high_pc {high:#x} below low_pc {low:#x}"),
                    ));
                }
                if n > 0 && !overlaps_code(binary, low, high) {
                    return Err(r.corrupt(
                        record_at,
                        format!(
                            "histogram covers {low:#x}..{high:#x}, outside the binary's code \
                             (wrong binary, or run-time addresses of a PIE)"
                        ),
                    ));
                }
                if let Some(previous) = prof_rate.filter(|&p| p != rate) {
                    return Err(r.corrupt(
                        record_at,
                        format!("histogram prof_rate {rate} differs from earlier {previous}"),
                    ));
                }
                prof_rate = Some(rate);
                hist_records += 1;
                // Checked before reading: hist_size bins of 2 bytes must fit in what is left.
                let bins = r.take(n.saturating_mul(2), "histogram bins")?;
                let span = u128::from(high - low);
                for (i, bin) in bins.chunks_exact(2).enumerate() {
                    let ticks = r.uint(bin);
                    if ticks == 0 {
                        continue;
                    }
                    total = total.saturating_add(ticks);
                    // Exact: i < n, so i*span/n < span and the sum stays within low..high.
                    let start = low + (i as u128 * span / n as u128) as u64;
                    if let Some(f) = binary.lookup(start) {
                        builder.add_self(key(f), ticks);
                        touched.push(f);
                    }
                }
            }
            TAG_CG_ARC => {
                let from = r.addr("call arc from_pc")?;
                let to = r.addr("call arc self_pc")?;
                let count = u64::from(r.u32("call arc count")?);
                match (binary.lookup(from), binary.lookup(to)) {
                    (Some(caller), Some(callee)) => {
                        builder.add_call(key(caller), key(callee), count);
                        touched.push(caller);
                        touched.push(callee);
                    }
                    _ => unresolved_calls = unresolved_calls.saturating_add(count),
                }
            }
            TAG_BB_COUNT => {
                let n = r.u32("basic-block count")? as usize;
                r.take(n.saturating_mul(2 * addr_width), "basic-block records")?;
            }
            other => {
                return Err(r.corrupt(
                    record_at,
                    format!("unknown record tag {other} (expected 0, 1 or 2)"),
                ))
            }
        }
    }

    for f in touched {
        let s = &binary.functions[f];
        if s.size > 0 {
            builder.set_size(&s.key, s.size);
        }
    }
    let mut meta = Meta {
        binary: binary_path.to_string(),
        build_id: binary.build_id.clone(),
        arch: Some(binary.arch.clone()),
        source: SOURCE.to_string(),
        event: (hist_records > 0).then(|| EVENT.to_string()),
        total,
        ..Meta::default()
    };
    if let Some(rate) = prof_rate {
        meta.extra.insert("prof-rate".into(), rate.to_string());
    }
    if unresolved_calls > 0 {
        meta.extra
            .insert("unresolved-calls".into(), unresolved_calls.to_string());
    }
    *builder.meta_mut() = meta;
    Ok(builder.build())
}

/// True when `[low, high)` overlaps an executable `PT_LOAD` segment of the binary.
fn overlaps_code(binary: &Binary, low: u64, high: u64) -> bool {
    binary
        .segments
        .iter()
        .filter(|s| s.is_executable())
        .any(|s| {
            let end = s.vaddr.saturating_add(s.mem_size);
            low < end && s.vaddr < high.max(low.saturating_add(1))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GMON: &[u8] = include_bytes!("../../../tests/fixtures/gprof/gmon.out");
    const PROG: &[u8] = include_bytes!("../../../tests/fixtures/gprof/prog");

    fn binary() -> Binary {
        Binary::parse("prog", PROG).unwrap()
    }

    fn edges(p: &Profile) -> Vec<(String, String, u64)> {
        p.named_edges()
    }

    /// A gmon.out with only the header and the given records (little-endian, 8-byte addresses).
    fn synthetic(records: &[u8]) -> Vec<u8> {
        let mut v = b"gmon".to_vec();
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&[0; 12]);
        v.extend_from_slice(records);
        v
    }

    fn arc(from: u64, to: u64, count: u32) -> Vec<u8> {
        let mut v = vec![TAG_CG_ARC];
        v.extend_from_slice(&from.to_le_bytes());
        v.extend_from_slice(&to.to_le_bytes());
        v.extend_from_slice(&count.to_le_bytes());
        v
    }

    fn hist(low: u64, high: u64, bins: &[u16], claimed: u32) -> Vec<u8> {
        let mut v = vec![TAG_TIME_HIST];
        v.extend_from_slice(&low.to_le_bytes());
        v.extend_from_slice(&high.to_le_bytes());
        v.extend_from_slice(&claimed.to_le_bytes());
        v.extend_from_slice(&100u32.to_le_bytes());
        v.extend_from_slice(b"seconds\0\0\0\0\0\0\0\0s");
        for b in bins {
            v.extend_from_slice(&b.to_le_bytes());
        }
        v
    }

    #[test]
    fn fixture_call_counts_are_the_programs() {
        // main->a 1000, a->b(prog.c) 2000, main->c 10, c->b(other.c) 3x10 (two arcs summed).
        let p = read("gmon.out", GMON, "prog", &binary()).unwrap();
        assert_eq!(
            edges(&p),
            vec![
                ("a".to_string(), "b (prog.c)".to_string(), 2000),
                ("c".to_string(), "b (other.c)".to_string(), 30),
                ("main".to_string(), "a".to_string(), 1000),
                ("main".to_string(), "c".to_string(), 10),
            ]
        );
    }

    #[test]
    fn fixture_histogram_goes_to_b() {
        // All 88 ticks of the capture fall in bins 1167 and 1170, both inside b of prog.c.
        let p = read("gmon.out", GMON, "prog", &binary()).unwrap();
        let weights: Vec<(String, u64, Option<u64>)> = p
            .functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight, f.size))
            .collect();
        let b_prog = weights.iter().find(|w| w.0 == "b (prog.c)").unwrap();
        assert_eq!(b_prog.1, 53 + 35);
        assert_eq!(p.self_total(), 88);
        assert_eq!(p.meta.total, 88);
        assert_eq!(p.meta.source, "gprof");
        assert_eq!(p.meta.event.as_deref(), Some("prof-tick"));
        assert_eq!(p.meta.binary, "prog");
        assert_eq!(p.meta.arch.as_deref(), Some("x86_64"));
        assert_eq!(
            p.meta.extra.get("prof-rate").map(String::as_str),
            Some("100")
        );
        assert!(!p.meta.extra.contains_key("unresolved-calls"));
        // Functions touched by an arc or a tick, with their symbol sizes (nm -S prog).
        assert_eq!(
            weights.iter().map(|w| w.0.as_str()).collect::<Vec<_>>(),
            vec!["a", "b (other.c)", "b (prog.c)", "c", "main"]
        );
        assert!(weights.iter().all(|w| w.2.is_some_and(|s| s > 0)));
    }

    #[test]
    fn bins_go_by_start_address() {
        // 4 bins over a..a+32 of 8 bytes each: all start inside a (0x1250, size 0x20).
        let b = binary();
        let a = b.functions.iter().find(|s| s.key.name == "a").unwrap();
        assert_eq!((a.address, a.size), (0x1250, 0x20));
        let data = synthetic(&hist(0x1250, 0x1270, &[1, 2, 3, 4], 4));
        let p = read("h.out", &data, "prog", &b).unwrap();
        assert_eq!(p.functions.len(), 1);
        assert_eq!(p.functions[0].self_weight, 10);
        // 3 bins of 0x18 bytes from 0x1250: the second starts at 0x1268 (in a), then
        // 0x1280 lies in b of other.c (0x1270..).
        let data = synthetic(&hist(0x1250, 0x1298, &[5, 6, 7], 3));
        let p = read("h.out", &data, "prog", &b).unwrap();
        let w: Vec<(String, u64)> = p
            .functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight))
            .collect();
        assert_eq!(
            w,
            vec![("a".to_string(), 11), ("b (other.c)".to_string(), 7)]
        );
    }

    #[test]
    fn unresolved_arcs_are_counted() {
        // An arc from an address in no symbol (0x10, the ELF header) is dropped but counted.
        let mut records = arc(0x10, 0x125a, 7);
        records.extend(arc(0x1080, 0x125a, 3));
        let p = read("u.out", &synthetic(&records), "prog", &binary()).unwrap();
        assert_eq!(edges(&p), vec![("main".to_string(), "a".to_string(), 3)]);
        assert_eq!(
            p.meta.extra.get("unresolved-calls").map(String::as_str),
            Some("7")
        );
        assert_eq!(p.meta.event, None);
    }

    #[test]
    fn bad_input_names_file_and_offset() {
        // Each damage gives a one-line error with the file and, for corrupt records, the offset.
        let b = binary();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"gmnx".to_vec(), "bad.out: not a gmon.out file"),
            (
                GMON[..30].to_vec(),
                "bad.out: offset 29: truncated histogram high_pc",
            ),
            (
                synthetic(&hist(0x1250, 0x1270, &[1], 1_000_000_000)),
                "bad.out: offset 61: truncated histogram bins: needs 2000000000 bytes, 2 left",
            ),
            (synthetic(&[7]), "bad.out: offset 20: unknown record tag 7"),
            (
                synthetic(&hist(0x900000, 0x900010, &[1], 1)),
                "bad.out: offset 20: histogram covers 0x900000..0x900010, outside",
            ),
            (
                synthetic(&[TAG_BB_COUNT, 0xff, 0xff, 0xff, 0xff]),
                "bad.out: offset 25: truncated basic-block records",
            ),
            (
                {
                    let mut v = synthetic(&[]);
                    v[4] = 2;
                    v
                },
                "bad.out: offset 4: unsupported gmon.out version",
            ),
        ];
        for (data, want) in cases {
            let e = read("bad.out", &data, "prog", &b).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn big_endian_files_are_read() {
        // The version field gives the byte order: a big-endian arc reads the same as little.
        let mut v = b"gmon".to_vec();
        v.extend_from_slice(&1u32.to_be_bytes());
        v.extend_from_slice(&[0; 12]);
        v.push(TAG_CG_ARC);
        v.extend_from_slice(&0x1080u64.to_be_bytes());
        v.extend_from_slice(&0x125au64.to_be_bytes());
        v.extend_from_slice(&42u32.to_be_bytes());
        let p = read("be.out", &v, "prog", &binary()).unwrap();
        assert_eq!(edges(&p), vec![("main".to_string(), "a".to_string(), 42)]);
    }

    proptest::proptest! {
        #[test]
        fn mutated_fixture_never_panics(
            at in 0usize..4096,
            byte in proptest::prelude::any::<u8>(),
            cut in 0usize..4096,
        ) {
            // Any single-byte change or truncation gives a profile or an error, never a panic.
            let b = binary();
            let mut bytes = GMON.to_vec();
            let i = at % bytes.len();
            bytes[i] = byte;
            bytes.truncate(cut.min(bytes.len()));
            let _ = read("m.out", &bytes, "prog", &b);
        }
    }
}
