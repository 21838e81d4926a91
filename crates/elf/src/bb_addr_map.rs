//! The basic-block address map (`.llvm_bb_addr_map`) of a binary built by clang with
//! `-fbasic-block-sections=labels`.
//!
//! Why: to split hot from cold code *inside* functions with clang's
//! `-fbasic-block-sections=list=FILE`, Sediment must name blocks the way the compiler does. The
//! labels build records, for every function, its address and each machine basic block's offset,
//! size and flags; an executed instruction address then maps to (function, block), and the
//! block's position in the map is the id the list file uses.
//!
//! Layout (LLVM `AsmPrinter::emitBBAddrMapSection`, `llvm/Object/ELFTypes.h`, and
//! `llvm-readobj --bb-addr-map`, which a test compares against). The section is a sequence of
//! per-function entries, each object's entries concatenated by the linker; ULEB128 is the
//! DWARF unsigned LEB128 encoding:
//!
//! | field      | encoding | meaning                                                         |
//! |------------|----------|-----------------------------------------------------------------|
//! | version    | u8       | 1 (clang 16, tested) or 2 (clang 17+, untested); clang 14 wrote none |
//! | features   | u8       | 0; bits ask for extra PGO fields (clang 17+), refused here     |
//! | address    | u64 (LE) | the function's address (relocated by the linker)                |
//! | num blocks | ULEB128  | number of block entries that follow                             |
//! | per block: id | ULEB128 | version 2 only: the block's stable id; version 1: its index  |
//! | offset     | ULEB128  | version 1, 2: from the end of the previous block (the function start for the first) |
//! | size       | ULEB128  | bytes of the block                                              |
//! | metadata   | ULEB128  | bit 0 has return, 1 has tail call, 2 EH pad, 3 can fall through |
//!
//! Block ids. In version 1 a block has no stored id: clang renumbers the blocks in layout order
//! before emitting the map (`BasicBlockSections.cpp`: "This renumbering should also be done for
//! basic block labels to match the profiles with the correct blocks"), so the index in the map
//! is the number the list file uses. Version 2 stores the id. Version 0 (clang 14) has no
//! version byte at all and cannot be told apart from a version 1 map whose address starts with
//! the byte 1; it is not supported (build the labels binary with clang 16).
//!
//! Functions the linker discarded (`--gc-sections`, COMDAT duplicates) keep their entry with
//! the address resolved to 0 or a tombstone (lld writes 0 or -1 in non-allocated sections);
//! such entries are dropped. Only little-endian 64-bit ELF files are read.
//!
//! Hostile input: every read is bounds-checked against the section, a block count is never
//! used to reserve memory (the list grows only with entries actually present), and any
//! malformed entry is an error naming the file and the section offset.

use crate::Error;
use object::{Object, ObjectSection};

/// Name of the section.
pub const SECTION: &str = ".llvm_bb_addr_map";

/// One basic block of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BbEntry {
    /// The id the list file uses (see the module docs).
    pub id: u32,
    /// Offset of the block's first byte from the function's address.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// Bit 0: ends in a return; 1: a tail call; 2: EH landing pad; 3: can fall through.
    pub metadata: u64,
}

impl BbEntry {
    /// True when control can fall through to the next block in address order.
    pub fn can_fall_through(&self) -> bool {
        self.metadata & 8 != 0
    }

    /// True for an exception landing pad.
    pub fn is_eh_pad(&self) -> bool {
        self.metadata & 4 != 0
    }
}

/// The block map of one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BbFunction {
    /// Link-time address of the function.
    pub address: u64,
    /// Its blocks in address order, as the map lists them.
    pub blocks: Vec<BbEntry>,
}

/// Reads every function entry of a linked binary's `.llvm_bb_addr_map`, sorted by address.
/// Returns an empty list when the binary has no such section. `path` is for error messages.
pub fn read_bb_addr_map(path: &str, data: &[u8]) -> Result<Vec<BbFunction>, Error> {
    let err = |message: String| Error::Parse {
        path: path.to_string(),
        message,
    };
    let file =
        object::File::parse(data).map_err(|e| err(format!("not a readable ELF file: {e}")))?;
    if file.format() != object::BinaryFormat::Elf || !file.is_little_endian() || !file.is_64() {
        return Err(err(format!(
            "{SECTION}: only little-endian 64-bit ELF files are read"
        )));
    }
    let mut out = Vec::new();
    for section in file.sections() {
        if section.name() != Ok(SECTION) {
            continue;
        }
        let bytes = section
            .data()
            .map_err(|e| err(format!("{SECTION}: unreadable section data: {e}")))?;
        parse_section(bytes, &mut out)
            .map_err(|(offset, what)| err(format!("{SECTION}: offset {offset:#x}: {what}")))?;
    }
    out.sort_by_key(|f| f.address);
    Ok(out)
}

/// Parses the contents of one `.llvm_bb_addr_map` section (as extracted with
/// `objcopy --dump-section`), without sorting. `path` is for error messages.
pub fn parse_bb_addr_map_section(path: &str, bytes: &[u8]) -> Result<Vec<BbFunction>, Error> {
    let mut out = Vec::new();
    parse_section(bytes, &mut out).map_err(|(offset, what)| Error::Parse {
        path: path.to_string(),
        message: format!("{SECTION}: offset {offset:#x}: {what}"),
    })?;
    Ok(out)
}

/// Parses one section's bytes; an error is (offset in the section, what failed).
fn parse_section(bytes: &[u8], out: &mut Vec<BbFunction>) -> Result<(), (usize, String)> {
    let mut r = Reader { bytes, pos: 0 };
    while r.pos < bytes.len() {
        let start = r.pos;
        let version = r.u8("version")?;
        if version != 1 && version != 2 {
            return Err((
                start,
                format!("unsupported version {version} (Sediment reads versions 1 and 2, from clang 16 and later)"),
            ));
        }
        let features = r.u8("features")?;
        if features != 0 {
            return Err((
                start + 1,
                format!("unsupported feature bits {features:#x} (only plain block maps are read)"),
            ));
        }
        let address = r.u64("function address")?;
        let count = r.uleb("block count")?;
        let mut blocks = Vec::new();
        let mut end = 0u64;
        for index in 0..count {
            let id = if version >= 2 {
                r.uleb("block id")?
            } else {
                index
            };
            let id = u32::try_from(id).map_err(|_| (r.pos, format!("block id {id} too large")))?;
            let gap = r.uleb("block offset")?;
            let size = r.uleb("block size")?;
            let metadata = r.uleb("block metadata")?;
            let offset = end
                .checked_add(gap)
                .ok_or((r.pos, "block offset overflows".to_string()))?;
            end = offset
                .checked_add(size)
                .ok_or((r.pos, "block end overflows".to_string()))?;
            blocks.push(BbEntry {
                id,
                offset,
                size,
                metadata,
            });
        }
        // Discarded functions: address 0 or lld's tombstone.
        if address != 0 && address != u64::MAX {
            out.push(BbFunction { address, blocks });
        }
    }
    Ok(())
}

/// A bounds-checked little-endian cursor.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u8(&mut self, what: &str) -> Result<u8, (usize, String)> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or((self.pos, format!("truncated {what}")))?;
        self.pos += 1;
        Ok(b)
    }

    fn u64(&mut self, what: &str) -> Result<u64, (usize, String)> {
        let s = self
            .bytes
            .get(self.pos..self.pos + 8)
            .ok_or((self.pos, format!("truncated {what}")))?;
        self.pos += 8;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    fn uleb(&mut self, what: &str) -> Result<u64, (usize, String)> {
        let start = self.pos;
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.u8(what)?;
            if shift >= 64 || (shift == 63 && b & 0x7e != 0) {
                return Err((start, format!("{what} does not fit in 64 bits")));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Vec<BbFunction>, (usize, String)> {
        let mut out = Vec::new();
        parse_section(bytes, &mut out).map(|()| out)
    }

    // The bytes clang 16 wrote for `work` of tests/it/blocks.rs's program (version 1): offsets
    // count from the previous block's end, ids are the positions.
    #[test]
    fn version1_offsets_are_relative() {
        let bytes = [
            1, 0, 0x70, 0x17, 0, 0, 0, 0, 0, 0, 3, 0, 4, 8, 0, 0x16, 1, 0, 3, 1,
        ];
        let f = parse(&bytes).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].address, 0x1770);
        let got: Vec<(u32, u64, u64)> = f[0]
            .blocks
            .iter()
            .map(|b| (b.id, b.offset, b.size))
            .collect();
        assert_eq!(got, vec![(0, 0, 4), (1, 4, 0x16), (2, 0x1a, 3)]);
        assert!(f[0].blocks[0].can_fall_through());
        assert!(!f[0].blocks[1].can_fall_through());
    }

    // Version 2 stores ids; discarded functions (address 0) are dropped.
    #[test]
    fn version2_ids_and_discarded() {
        let bytes = [
            2, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 2, 5, 0, 2, 8, 3, 1, 1, 0, //
            2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0,
        ];
        let f = parse(&bytes).unwrap();
        assert_eq!(f.len(), 1);
        let got: Vec<(u32, u64)> = f[0].blocks.iter().map(|b| (b.id, b.offset)).collect();
        assert_eq!(got, vec![(5, 0), (3, 3)]);
    }

    // Truncation, bad versions and oversized LEBs are errors with an offset, never panics.
    #[test]
    fn damage_is_an_error() {
        let good = [1u8, 0, 0x70, 0x17, 0, 0, 0, 0, 0, 0, 1, 0, 4, 8];
        for cut in 1..good.len() {
            assert!(parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(parse(&[3, 0]).unwrap_err().0, 0);
        assert!(parse(&[1, 1]).is_err());
        let mut huge = vec![1u8, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        huge.extend([0xff; 11]);
        assert!(parse(&huge).is_err());
        // A block count far beyond the data reserves nothing and fails on the first block.
        let mut many = vec![1u8, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        many.extend([0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(parse(&many).is_err());
    }
}
