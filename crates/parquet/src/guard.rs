//! Checks the Thrift structures of a Parquet file before the `parquet` crate decodes them.
//!
//! The crate takes counts and lengths from the footer and the page headers as allocation sizes:
//! a list header claiming two billion elements makes it reserve hundreds of gigabytes before it
//! reads the first one, and the process aborts. The walk here reads the same bytes with Thrift's
//! compact protocol and refuses any count or length that the bytes after it cannot hold (every
//! element of a list takes at least one byte), and any page whose stated size its stored bytes
//! cannot produce. Every allocation the decoder then makes from these structures stays within a
//! small multiple of the input's size.

use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;

/// How deep structures and collections may nest. The Parquet format nests a few levels; the
/// `parquet` crate's own skipping of unknown fields stops at 64.
const MAX_DEPTH: usize = 32;

/// The most bytes Snappy can expand one stored byte into, rounded up: a three-byte copy writes at
/// most 64 bytes.
const SNAPPY_MAX_RATIO: i64 = 24;

/// Thrift compact protocol type codes (the low nibble of a field header).
mod ty {
    pub const TRUE: u8 = 1;
    pub const FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const SET: u8 = 10;
    pub const MAP: u8 = 11;
    pub const STRUCT: u8 = 12;
}

/// Reads compact-protocol values from a slice; every read is bounds-checked.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.buf.get(self.pos).ok_or("ends inside a structure")?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a variable-length integer longer than 10 bytes".into())
    }

    fn zigzag(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn skip(&mut self, n: u64, what: &str) -> Result<(), String> {
        if n > self.remaining() as u64 {
            return Err(format!(
                "{what} of {n} bytes where {} remain",
                self.remaining()
            ));
        }
        self.pos += n as usize;
        Ok(())
    }

    /// Checks that `count` elements of at least `min` bytes each fit in what remains.
    fn fits(&self, count: u64, min: u64, what: &str) -> Result<(), String> {
        if count.saturating_mul(min) > self.remaining() as u64 {
            return Err(format!(
                "a {what} of {count} elements where {} bytes remain",
                self.remaining()
            ));
        }
        Ok(())
    }
}

/// Integer fields a walk reports: the path of field ids from the outermost struct, and the value.
type OnInt<'a> = dyn FnMut(&[i16], i64) + 'a;

/// Walks one struct (its fields up to the stop byte), reporting its integer fields and those of
/// the structs it holds.
fn walk_struct(
    c: &mut Cursor,
    depth: usize,
    path: &mut Vec<i16>,
    on_int: &mut OnInt,
) -> Result<(), String> {
    let mut last = 0i16;
    loop {
        let header = c.byte()?;
        if header == 0 {
            return Ok(());
        }
        let delta = header >> 4;
        let id = if delta == 0 {
            c.zigzag()? as i16
        } else {
            last.wrapping_add(i16::from(delta))
        };
        last = id;
        path.push(id);
        walk_value(c, header & 0x0f, depth, path, Some(on_int))?;
        path.pop();
    }
}

/// Walks one value of type `t`, `depth` structures and collections deep; `on_int` is given for a
/// struct's field, not for an element of a collection (a boolean field carries its value in its
/// type; a boolean element takes a byte), whose structs are walked without reporting.
fn walk_value(
    c: &mut Cursor,
    t: u8,
    depth: usize,
    path: &mut Vec<i16>,
    on_int: Option<&mut OnInt>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("structures nested deeper than {MAX_DEPTH} levels"));
    }
    let field = on_int.is_some();
    match t {
        ty::TRUE | ty::FALSE => {
            if !field {
                c.byte()?;
            }
        }
        ty::BYTE => {
            c.byte()?;
        }
        ty::I16 | ty::I32 | ty::I64 => {
            let v = c.zigzag()?;
            if let Some(f) = on_int {
                f(path, v);
            }
        }
        ty::DOUBLE => c.skip(8, "a double")?,
        ty::BINARY => {
            let n = c.varint()?;
            c.skip(n, "a string")?;
        }
        ty::LIST | ty::SET => {
            let header = c.byte()?;
            let count = match header >> 4 {
                15 => c.varint()?,
                n => u64::from(n),
            };
            let element = header & 0x0f;
            let min = if element == ty::DOUBLE { 8 } else { 1 };
            c.fits(count, min, "list")?;
            for _ in 0..count {
                walk_value(c, element, depth + 1, path, None)?;
            }
        }
        ty::MAP => {
            let count = c.varint()?;
            if count > 0 {
                let kinds = c.byte()?;
                c.fits(count, 2, "map")?;
                for _ in 0..count {
                    walk_value(c, kinds >> 4, depth + 1, path, None)?;
                    walk_value(c, kinds & 0x0f, depth + 1, path, None)?;
                }
            }
        }
        ty::STRUCT => {
            let mut none = |_: &[i16], _: i64| {};
            walk_struct(c, depth + 1, path, on_int.unwrap_or(&mut none))?
        }
        other => return Err(format!("unknown Thrift type {other}")),
    }
    Ok(())
}

/// Checks the footer (the file metadata) of `data`, a whole Parquet file. A file without a
/// readable footer frame passes: the `parquet` crate reports what is wrong with it.
pub(crate) fn check_footer(data: &[u8]) -> Result<(), String> {
    let Some(frame) = data.len().checked_sub(8).map(|at| &data[at..]) else {
        return Ok(());
    };
    if &frame[4..] != b"PAR1" {
        return Ok(());
    }
    let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    let Some(start) = (data.len() - 8).checked_sub(len) else {
        return Ok(());
    };
    let mut c = Cursor {
        buf: &data[start..data.len() - 8],
        pos: 0,
    };
    walk_struct(&mut c, 0, &mut Vec::new(), &mut |_, _| {})
        .map_err(|m| format!("damaged Parquet footer: {m}"))
}

/// Checks every page header of every column chunk the metadata lists, and that each page's
/// stated size is one its stored bytes can produce.
pub(crate) fn check_pages(data: &[u8], meta: &ParquetMetaData) -> Result<(), String> {
    for (g, group) in meta.row_groups().iter().enumerate() {
        for (j, col) in group.columns().iter().enumerate() {
            let at = |m: String| {
                format!("damaged Parquet pages: column chunk {j} of row group {g}: {m}")
            };
            let start = col
                .dictionary_page_offset()
                .unwrap_or(col.data_page_offset());
            let len = col.compressed_size();
            let end = start.checked_add(len);
            let (start, end) = match (usize::try_from(start), end.map(usize::try_from)) {
                (Ok(s), Some(Ok(e))) if s <= e && e <= data.len() => (s, e),
                _ => {
                    return Err(at(format!(
                        "{len} bytes at offset {start} lie outside the file's {} bytes",
                        data.len()
                    )))
                }
            };
            // Snappy is the one codec this build decodes: the crate reports the others.
            let snappy = col.compression() == Compression::SNAPPY;
            let mut pos = start;
            while pos < end {
                pos = check_page(&data[pos..end], snappy)
                    .map(|n| pos + n)
                    .map_err(|m| at(format!("page at offset {pos}: {m}")))?;
            }
        }
    }
    Ok(())
}

/// Checks the page starting at `chunk[0]` and returns its whole length (header and data);
/// `snappy`: its data is Snappy-compressed.
fn check_page(chunk: &[u8], snappy: bool) -> Result<usize, String> {
    let mut c = Cursor { buf: chunk, pos: 0 };
    let (mut stored, mut size, mut dictionary_values) = (None, None, None);
    walk_struct(&mut c, 0, &mut Vec::new(), &mut |path, v| match path {
        [2] => size = Some(v),
        [3] => stored = Some(v),
        [7, 1] => dictionary_values = Some(v),
        _ => {}
    })?;
    let (Some(stored), Some(size)) = (stored, size) else {
        return Err("a page header without its sizes".into());
    };
    if stored < 0 || size < 0 {
        return Err(format!(
            "negative page size ({stored} stored, {size} decoded)"
        ));
    }
    c.skip(stored as u64, "a page")?;
    if snappy && size > stored * SNAPPY_MAX_RATIO + 64 {
        return Err(format!(
            "{stored} stored bytes cannot decompress to the {size} bytes the header states"
        ));
    }
    if let Some(n) = dictionary_values {
        // A dictionary's values are plain-encoded, each one byte or more.
        if n < 0 || n > size {
            return Err(format!("a dictionary of {n} values in {size} bytes"));
        }
    }
    Ok(c.pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact-protocol list header of `count` elements of type `t`.
    fn list_header(t: u8, count: u32) -> Vec<u8> {
        let mut out = vec![0xf0 | t];
        let mut v = count;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    /// A file frame around `footer`: magic, footer, its length, magic.
    fn framed(footer: &[u8]) -> Vec<u8> {
        let mut data = b"PAR1".to_vec();
        data.extend_from_slice(footer);
        data.extend_from_slice(&(footer.len() as u32).to_le_bytes());
        data.extend_from_slice(b"PAR1");
        data
    }

    #[test]
    fn a_list_longer_than_its_bytes_is_refused() {
        // FileMetaData { 1: version = 1, 2: schema = list<struct> of a billion elements }.
        let mut footer = vec![0x15, 0x02, 0x19];
        footer.extend_from_slice(&list_header(ty::STRUCT, 1 << 30));
        footer.extend_from_slice(&[0, 0, 0]);
        let err = check_footer(&framed(&footer)).unwrap_err();
        assert!(err.contains("a list of 1073741824 elements"), "{err}");
        // The same list with the elements it claims passes.
        let mut footer = vec![0x15, 0x02, 0x19];
        footer.extend_from_slice(&list_header(ty::STRUCT, 3));
        footer.extend_from_slice(&[0, 0, 0, 0]);
        check_footer(&framed(&footer)).unwrap();
    }

    #[test]
    fn strings_and_nesting_are_bounded() {
        // { 1: binary of 4 GiB - 1 }
        let footer = [0x18, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        let err = check_footer(&framed(&footer)).unwrap_err();
        assert!(err.contains("a string of 4294967295 bytes"), "{err}");
        // Structs in structs, 40 deep.
        let mut footer = vec![0x1c; 40];
        footer.extend_from_slice(&[0; 41]);
        let err = check_footer(&framed(&footer)).unwrap_err();
        assert!(err.contains("nested deeper"), "{err}");
        // Lists of lists, 40 deep (no struct between them).
        let mut footer = vec![0x19; 41];
        footer.push(0);
        let err = check_footer(&framed(&footer)).unwrap_err();
        assert!(err.contains("nested deeper"), "{err}");
    }

    #[test]
    fn page_sizes_must_be_possible() {
        // PageHeader { 1: type = 0, 2: uncompressed = 100000, 3: compressed = 4 } + 4 bytes.
        let header = |size: u32| {
            let mut h = vec![0x15, 0x00, 0x15];
            let mut v = u64::from(size) << 1;
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    h.push(b);
                    break;
                }
                h.push(b | 0x80);
            }
            h.extend_from_slice(&[0x15, 0x08, 0x00, 1, 2, 3, 4]);
            h
        };
        let err = check_page(&header(100_000), true).unwrap_err();
        assert!(err.contains("cannot decompress"), "{err}");
        assert_eq!(check_page(&header(90), true).unwrap(), header(90).len());
        // Uncompressed chunks never decompress: the stated size is not an allocation.
        assert!(check_page(&header(100_000), false).is_ok());
        // Data past the chunk.
        let mut short = header(90);
        short.pop();
        assert!(check_page(&short, true)
            .unwrap_err()
            .contains("a page of 4 bytes"));
    }
}
