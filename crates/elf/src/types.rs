//! Struct layouts from DWARF debug information: every named structure type of a linked binary
//! built with `-g`, with each member's offset, size and type name.
//!
//! This is the input of `sediment structs` (data layout: holes, padding, fields that straddle
//! cache lines, and locks or atomics that share a cache line with other fields, the static
//! signature of false sharing). The walk follows DWARF 5 (and 4), section 5.7 "Structure,
//! Union, Class and Interface Type Entries": a `DW_TAG_structure_type` with `DW_AT_byte_size`
//! owns `DW_TAG_member` children placed by `DW_AT_data_member_location` (a constant; bit-fields
//! by `DW_AT_data_bit_offset` or the DWARF 2 `DW_AT_bit_offset` form, which is reduced here to
//! the containing bytes). A member's size comes from its type, followed through typedefs and
//! qualifiers to a base type, pointer, enumeration, structure or array.
//!
//! Synchronisation members are recognised by their type: any `_Atomic`/`std::atomic` type
//! (`DW_TAG_atomic_type`, or a type name starting with `atomic`/`std::atomic`) and the POSIX
//! lock types (`pthread_mutex_t`, `pthread_spinlock_t`, `pthread_rwlock_t`, `pthread_cond_t`).
//!
//! Reading is done by `gimli`, which bounds-checks every offset; type chains are followed at
//! most [`MAX_TYPE_DEPTH`] steps, so a cyclic or hostile chain ends in an unknown type, never a
//! loop. A compressed debug section may declare at most [`MAX_SECTION_BYTES`] (and 4096 times
//! its compressed size). Relocatable objects are not supported (their `.debug_info` needs
//! relocations applied): read the linked binary.

pub use crate::dwarf::MAX_SECTION_BYTES;
use crate::dwarf::{Sections, R};
use crate::Error;
use gimli::{AttributeValue, UnitOffset};
use object::Object;

/// Steps followed along a type chain (typedef -> const -> atomic -> ...) before giving up.
pub const MAX_TYPE_DEPTH: usize = 16;

/// One member of a structure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Member {
    /// Byte offset from the start of the structure (of the containing bytes, for bit-fields).
    pub offset: u64,
    /// Name (`<anonymous>` for unnamed members).
    pub name: String,
    /// Size in bytes (the bytes a bit-field touches); 0 when the type's size is unknown.
    pub size: u64,
    /// The member's type as written (typedef names kept).
    pub type_name: String,
    /// True for atomics and locks.
    pub sync: bool,
}

/// A structure type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StructLayout {
    /// Tag name (`struct foo` is `foo`).
    pub name: String,
    /// `sizeof`.
    pub size: u64,
    /// Members in offset order.
    pub members: Vec<Member>,
}

/// Every named, defined structure type of the binary, sorted and deduplicated (one entry for a
/// structure that several compilation units define identically).
pub fn read_structs(path: &str, data: &[u8]) -> Result<Vec<StructLayout>, Error> {
    let err = |message: String| Error::Parse {
        path: path.to_string(),
        message,
    };
    let file =
        object::File::parse(data).map_err(|e| err(format!("not a readable ELF file: {e}")))?;
    if file.kind() == object::ObjectKind::Relocatable {
        return Err(err(
            "a relocatable object: read the linked binary (its DWARF needs relocations applied)"
                .into(),
        ));
    }
    use gimli::SectionId as S;
    let all = [
        S::DebugAbbrev,
        S::DebugInfo,
        S::DebugStr,
        S::DebugLineStr,
        S::DebugStrOffsets,
        S::DebugAddr,
        S::DebugRngLists,
        S::DebugLocLists,
        S::DebugLine,
        S::DebugRanges,
        S::DebugLoc,
        S::DebugTypes,
    ];
    let sections = Sections::read(&file, &all)
        .map_err(err)?
        .ok_or_else(|| err("no DWARF debug information (build with -g)".into()))?;
    let dwarf = sections.dwarf().map_err(err)?;

    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units
        .next()
        .map_err(|e| err(format!("DWARF unit header: {e}")))?
    {
        let unit = dwarf
            .unit(header)
            .map_err(|e| err(format!("DWARF unit: {e}")))?;
        read_unit(&dwarf, &unit, &mut out).map_err(|e| err(format!("DWARF: {e}")))?;
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Structures of one compilation unit.
fn read_unit(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    out: &mut Vec<StructLayout>,
) -> Result<(), gimli::Error> {
    // Depth-first over the whole unit: structures may be nested in namespaces or functions.
    let mut pending: Vec<UnitOffset> = Vec::new();
    let mut cursor = unit.entries();
    while let Some((_, entry)) = cursor.next_dfs()? {
        if matches!(
            entry.tag(),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type
        ) {
            pending.push(entry.offset());
        }
    }
    for off in pending {
        if let Some(s) = read_struct(dwarf, unit, off)? {
            out.push(s);
        }
    }
    Ok(())
}

fn attr_string(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    entry: &gimli::DebuggingInformationEntry<R<'_>>,
) -> Result<Option<String>, gimli::Error> {
    match entry.attr_value(gimli::DW_AT_name)? {
        Some(v) => {
            let s = dwarf.attr_string(unit, v)?;
            Ok(Some(String::from_utf8_lossy(s.slice()).into_owned()))
        }
        None => Ok(None),
    }
}

fn attr_u64(
    entry: &gimli::DebuggingInformationEntry<R<'_>>,
    at: gimli::DwAt,
) -> Result<Option<u64>, gimli::Error> {
    Ok(entry.attr_value(at)?.and_then(|v| v.udata_value()))
}

fn read_struct(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    off: UnitOffset,
) -> Result<Option<StructLayout>, gimli::Error> {
    let mut tree = unit.entries_tree(Some(off))?;
    let root = tree.root()?;
    let entry = root.entry();
    if entry.attr(gimli::DW_AT_declaration)?.is_some() {
        return Ok(None);
    }
    let (Some(name), Some(size)) = (
        attr_string(dwarf, unit, entry)?,
        attr_u64(entry, gimli::DW_AT_byte_size)?,
    ) else {
        return Ok(None);
    };
    let mut members = Vec::new();
    let mut children = root.children();
    while let Some(child) = children.next()? {
        let m = child.entry();
        if m.tag() != gimli::DW_TAG_member {
            continue;
        }
        // Static members (C++) have no location: not part of the layout.
        let bit_offset = attr_u64(m, gimli::DW_AT_data_bit_offset)?;
        let location = attr_u64(m, gimli::DW_AT_data_member_location)?;
        let bit_size = attr_u64(m, gimli::DW_AT_bit_size)?;
        let ty = type_info(dwarf, unit, m.attr_value(gimli::DW_AT_type)?)?;
        let (offset, msize) = match (bit_size, bit_offset, location) {
            (Some(bits), Some(bo), _) => {
                let first = bo / 8;
                let last = (bo + bits.max(1) - 1) / 8;
                (first, last - first + 1)
            }
            // A DWARF 2-4 bit-field: `loc` is its containing storage unit, of the type's size.
            (_, None, Some(loc)) => (loc, ty.size),
            _ => continue,
        };
        members.push(Member {
            offset,
            name: attr_string(dwarf, unit, m)?.unwrap_or_else(|| "<anonymous>".into()),
            size: msize,
            type_name: ty.name,
            sync: ty.sync,
        });
    }
    members.sort();
    Ok(Some(StructLayout {
        name,
        size,
        members,
    }))
}

/// What a member's type chain tells.
struct TypeInfo {
    name: String,
    size: u64,
    sync: bool,
}

/// POSIX lock type names (typedefs) that mark a synchronisation member.
const LOCK_TYPES: [&str; 4] = [
    "pthread_mutex_t",
    "pthread_spinlock_t",
    "pthread_rwlock_t",
    "pthread_cond_t",
];

fn is_sync_name(name: &str) -> bool {
    LOCK_TYPES.contains(&name) || name.starts_with("atomic") || name.starts_with("std::atomic")
}

/// Follows a type reference to its name (the first name met), size and sync flag.
fn type_info<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &gimli::Unit<R<'a>>,
    mut at: Option<AttributeValue<R<'a>>>,
) -> Result<TypeInfo, gimli::Error> {
    let mut info = TypeInfo {
        name: String::new(),
        size: 0,
        sync: false,
    };
    let mut prefix = String::new();
    for _ in 0..MAX_TYPE_DEPTH {
        let Some(AttributeValue::UnitRef(off)) = at else {
            break;
        };
        let entry = unit.entry(off)?;
        let name = attr_string(dwarf, unit, &entry)?;
        if let Some(n) = &name {
            info.sync |= is_sync_name(n);
            if info.name.is_empty() {
                info.name = format!("{prefix}{n}");
            }
        }
        match entry.tag() {
            gimli::DW_TAG_atomic_type => {
                info.sync = true;
                if info.name.is_empty() {
                    prefix.push_str("_Atomic ");
                }
            }
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => {
                info.size = attr_u64(&entry, gimli::DW_AT_byte_size)?
                    .unwrap_or(u64::from(unit.encoding().address_size));
                if info.name.is_empty() {
                    info.name = "pointer".into();
                }
                return Ok(info);
            }
            gimli::DW_TAG_array_type => {
                let elem = type_info(dwarf, unit, entry.attr_value(gimli::DW_AT_type)?)?;
                let mut count = 1u64;
                let mut tree = unit.entries_tree(Some(off))?;
                let root = tree.root()?;
                let mut subs = root.children();
                while let Some(sub) = subs.next()? {
                    let s = sub.entry();
                    if s.tag() == gimli::DW_TAG_subrange_type {
                        let n = match attr_u64(s, gimli::DW_AT_count)? {
                            Some(c) => c,
                            None => attr_u64(s, gimli::DW_AT_upper_bound)?.map_or(0, |u| u + 1),
                        };
                        count = count.saturating_mul(n);
                    }
                }
                info.sync |= elem.sync;
                info.size = attr_u64(&entry, gimli::DW_AT_byte_size)?
                    .unwrap_or(elem.size.saturating_mul(count));
                if info.name.is_empty() {
                    info.name = format!("{}[{count}]", elem.name);
                }
                return Ok(info);
            }
            _ => {}
        }
        if let Some(size) = attr_u64(&entry, gimli::DW_AT_byte_size)? {
            info.size = size;
            if info.name.is_empty() {
                info.name = "<anonymous>".into();
            }
            return Ok(info);
        }
        at = entry.attr_value(gimli::DW_AT_type)?;
    }
    if info.name.is_empty() {
        info.name = "<unknown>".into();
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ObjectSection;

    /// The fuzz corpus's small binary built with `-g`.
    const STRUCTS_ELF: &[u8] = include_bytes!("../../../fuzz/corpus/dwarf_structs/structs.elf");

    /// `STRUCTS_ELF` with `.debug_abbrev` marked `SHF_COMPRESSED` and a zlib header declaring
    /// `declared` bytes (what the fuzzer found: a 3 KiB file asking for 2^53 bytes).
    fn with_compressed_abbrev(declared: u64) -> Vec<u8> {
        let file = object::File::parse(STRUCTS_ELF).unwrap();
        let abbrev = file.section_by_name(".debug_abbrev").unwrap();
        let (offset, size) = abbrev.file_range().unwrap();
        assert!(size >= 24);
        let index = abbrev.index().0;
        let mut bytes = STRUCTS_ELF.to_vec();
        // ELF64 little endian: e_shoff at 0x28, e_shentsize at 0x3a, sh_flags 8 bytes into the
        // section header.
        let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
        let shentsize = u16::from_le_bytes(bytes[0x3a..0x3c].try_into().unwrap()) as usize;
        let flags_at = shoff + index * shentsize + 8;
        let flags = u64::from_le_bytes(bytes[flags_at..flags_at + 8].try_into().unwrap());
        let flags = flags | object::elf::SHF_COMPRESSED.0;
        bytes[flags_at..flags_at + 8].copy_from_slice(&flags.to_le_bytes());
        // Elf64_Chdr: ch_type (ELFCOMPRESS_ZLIB), ch_reserved, ch_size, ch_addralign.
        let at = offset as usize;
        bytes[at..at + 4].copy_from_slice(&object::elf::ELFCOMPRESS_ZLIB.0.to_le_bytes());
        bytes[at + 4..at + 8].copy_from_slice(&0u32.to_le_bytes());
        bytes[at + 8..at + 16].copy_from_slice(&declared.to_le_bytes());
        bytes[at + 16..at + 24].copy_from_slice(&1u64.to_le_bytes());
        bytes
    }

    #[test]
    fn reads_the_corpus_binary() {
        let structs = read_structs("structs.elf", STRUCTS_ELF).unwrap();
        assert!(!structs.is_empty());
    }

    #[test]
    fn a_compressed_section_declaring_a_huge_size_is_refused_before_allocating() {
        let message = read_structs("h.elf", &with_compressed_abbrev(1 << 53))
            .unwrap_err()
            .to_string();
        assert!(message.starts_with("h.elf: "), "{message}");
        assert!(
            message.contains(".debug_abbrev: compressed section declares 9007199254740992 bytes"),
            "{message}"
        );
        // A plausible declared size passes the check and fails in zlib instead (the bytes are
        // not a zlib stream).
        let message = read_structs("h.elf", &with_compressed_abbrev(1000))
            .unwrap_err()
            .to_string();
        assert!(message.contains(".debug_abbrev"), "{message}");
        assert!(!message.contains("declares"), "{message}");
    }
}
