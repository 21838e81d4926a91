//! Loading a linked binary's DWARF sections for `gimli`, and the one fact the symbol reader
//! takes from them: the source file that defines a function whose symbol table entry names
//! none.
//!
//! GCC's LTO renames same-named statics of different files (`helper.lto_priv.0`,
//! `helper.lto_priv.1`) and writes them after an empty `STT_FILE`, so the symbol table no longer
//! tells which file each came from, and the numbers depend on the partitioning. Its DWARF
//! still does: the out-of-line instance (a `DW_TAG_subprogram` with `DW_AT_low_pc`, in an
//! `<artificial>` unit of the link-time compilation) points by `DW_AT_abstract_origin` into the
//! compilation unit of the source file that defined the function. [`origin_files`] returns
//! that unit's `DW_AT_name`, base name only, the same name a non-LTO build's `STT_FILE` gives
//! (DWARF 5, sections 3.1.1 "Full and Partial Compilation Unit Entries" and 3.3.8.1 "Abstract
//! Instances").
//!
//! Every offset is bounds-checked by `gimli`. A compressed debug section may declare at most
//! [`MAX_SECTION_BYTES`] (and 4096 times its compressed size).

use gimli::{AttributeValue, EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection};
use std::collections::{BTreeMap, BTreeSet};

/// Largest accepted debug section after decompression (1 GiB): a compressed section's header
/// declares its size, and a hostile one must not get an allocation of whatever it declares.
pub const MAX_SECTION_BYTES: u64 = 1 << 30;
/// Largest accepted ratio of a compressed section's declared size to its compressed bytes.
const MAX_INFLATION: u64 = 4096;

pub(crate) type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// The sections `gimli` reads, as owned bytes (decompressed when need be).
pub(crate) struct Sections {
    endian: RunTimeEndian,
    sections: Vec<(gimli::SectionId, Vec<u8>)>,
}

impl Sections {
    /// The sections `ids` of `file` (the others read as empty); `None` when it has no
    /// `.debug_info`. Errors name the section.
    pub(crate) fn read(
        file: &object::File<'_>,
        ids: &[gimli::SectionId],
    ) -> Result<Option<Sections>, String> {
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let mut sections = Vec::new();
        for &id in ids {
            let bytes = match file.section_by_name(id.name()) {
                Some(s) => section_bytes(&s).map_err(|e| format!("{}: {e}", id.name()))?,
                None => Vec::new(),
            };
            sections.push((id, bytes));
        }
        let has_info = sections
            .iter()
            .any(|(id, b)| *id == gimli::SectionId::DebugInfo && !b.is_empty());
        Ok(has_info.then_some(Sections { endian, sections }))
    }

    /// The `gimli` view of the sections.
    pub(crate) fn dwarf(&self) -> Result<gimli::Dwarf<R<'_>>, String> {
        gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
            let bytes = self
                .sections
                .iter()
                .find(|(s, _)| *s == id)
                .map(|(_, b)| b.as_slice())
                .unwrap_or(&[]);
            Ok(EndianSlice::new(bytes, self.endian))
        })
        .map_err(|e| format!("DWARF: {e}"))
    }
}

/// A section's bytes, decompressed when `SHF_COMPRESSED` (or a `.zdebug` section) after checking
/// the declared size against [`MAX_SECTION_BYTES`] and the compression ratio.
fn section_bytes(section: &object::Section<'_, '_>) -> Result<Vec<u8>, String> {
    let compressed = section.compressed_data().map_err(|e| e.to_string())?;
    if compressed.format != object::CompressionFormat::None {
        let declared = compressed.uncompressed_size;
        let bound = (compressed.data.len() as u64)
            .saturating_mul(MAX_INFLATION)
            .saturating_add(4096)
            .min(MAX_SECTION_BYTES);
        if declared > bound {
            return Err(format!(
                "compressed section declares {declared} bytes from {} (limit {bound})",
                compressed.data.len()
            ));
        }
    }
    Ok(compressed
        .decompress()
        .map_err(|e| e.to_string())?
        .into_owned())
}

/// What [`origin_files`] reads: the entries, their strings and `DW_FORM_addrx` addresses, and
/// `.debug_line`, whose header `gimli` parses with each unit.
const ORIGIN_SECTIONS: [gimli::SectionId; 7] = [
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugStrOffsets,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugLine,
];

/// The sections the address lookups read ([`ORIGIN_SECTIONS`]); `None` when nothing is wanted
/// or `file` has no DWARF.
fn sections_for(
    file: &object::File<'_>,
    wanted: &BTreeSet<u64>,
) -> Result<Option<Sections>, String> {
    if wanted.is_empty() {
        return Ok(None);
    }
    Sections::read(file, &ORIGIN_SECTIONS)
}

/// For each address of `wanted` where a `DW_TAG_subprogram` starts (`DW_AT_low_pc`), the base
/// name of the compilation unit holding its origin: the unit its `DW_AT_abstract_origin` (or
/// else `DW_AT_specification`) points into, or its own unit without either. Units named
/// `<artificial>` (GCC's link-time units) and unnamed ones give nothing, and so does a binary
/// without DWARF.
pub(crate) fn origin_files(
    file: &object::File<'_>,
    wanted: &BTreeSet<u64>,
) -> Result<BTreeMap<u64, String>, String> {
    let mut found = BTreeMap::new();
    let Some(sections) = sections_for(file, wanted)? else {
        return Ok(found);
    };
    let dwarf = sections.dwarf()?;
    let e = |e: gimli::Error| format!("DWARF: {e}");
    // Every unit's start in .debug_info and its name, in section order.
    let mut units = Vec::new();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next().map_err(e)? {
        let Some(start) = header.offset().as_debug_info_offset() else {
            continue;
        };
        let unit = dwarf.unit(header).map_err(e)?;
        let name = unit
            .name
            .map(|n| sediment_profile::base_name(&String::from_utf8_lossy(n.slice())).to_string())
            .filter(|n| !n.is_empty() && n != "<artificial>");
        units.push((start.0, unit, name));
    }
    // The name of the unit holding a .debug_info offset: the last one starting at or before it.
    let unit_at = |offset: usize| -> Option<&String> {
        let i = units.partition_point(|(start, _, _)| *start <= offset);
        units[..i].last().and_then(|(_, _, name)| name.as_ref())
    };
    for (_, unit, own) in &units {
        subprograms_at(&dwarf, unit, wanted, &mut found, |entry| {
            let mut origin = entry.attr_value(gimli::DW_AT_abstract_origin).map_err(e)?;
            if origin.is_none() {
                origin = entry.attr_value(gimli::DW_AT_specification).map_err(e)?;
            }
            Ok(match origin {
                Some(AttributeValue::DebugInfoRef(offset)) => unit_at(offset.0),
                _ => own.as_ref(),
            }
            .cloned())
        })?;
    }
    Ok(found)
}

/// Calls `name` for every `DW_TAG_subprogram` of `unit` whose `DW_AT_low_pc` is in `wanted` and
/// not yet in `found`, and records what it returns there.
fn subprograms_at<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &gimli::Unit<R<'a>>,
    wanted: &BTreeSet<u64>,
    found: &mut BTreeMap<u64, String>,
    mut name: impl FnMut(
        &gimli::DebuggingInformationEntry<'_, '_, R<'a>>,
    ) -> Result<Option<String>, String>,
) -> Result<(), String> {
    let e = |e: gimli::Error| format!("DWARF: {e}");
    let mut cursor = unit.entries();
    while let Some((_, entry)) = cursor.next_dfs().map_err(e)? {
        if entry.tag() != gimli::DW_TAG_subprogram {
            continue;
        }
        let Some(low) = entry.attr_value(gimli::DW_AT_low_pc).map_err(e)? else {
            continue;
        };
        let Some(address) = dwarf.attr_address(unit, low).map_err(e)? else {
            continue;
        };
        if !wanted.contains(&address) || found.contains_key(&address) {
            continue;
        }
        if let Some(n) = name(entry)? {
            found.insert(address, n);
        }
    }
    Ok(())
}

/// For each address of `wanted` where a `DW_TAG_subprogram` starts (`DW_AT_low_pc`), the
/// linkage name of the function compiled there: the entry's own `DW_AT_linkage_name`, or that
/// of the declaration or abstract instance its `DW_AT_specification` or
/// `DW_AT_abstract_origin` names in the same unit. Several symbols may share that address (a
/// C++ destructor clang emits as an alias of its base class's); the compiler compiled, and
/// named the section and split parts after, this one. Empty for a binary without DWARF.
pub(crate) fn linkage_names(
    file: &object::File<'_>,
    wanted: &BTreeSet<u64>,
) -> Result<BTreeMap<u64, String>, String> {
    let mut found = BTreeMap::new();
    let Some(sections) = sections_for(file, wanted)? else {
        return Ok(found);
    };
    let dwarf = sections.dwarf()?;
    let e = |e: gimli::Error| format!("DWARF: {e}");
    let name_of = |unit: &gimli::Unit<R<'_>>,
                   entry: &gimli::DebuggingInformationEntry<'_, '_, R<'_>>|
     -> Result<Option<String>, String> {
        for at in [gimli::DW_AT_linkage_name, gimli::DW_AT_MIPS_linkage_name] {
            if let Some(v) = entry.attr_value(at).map_err(e)? {
                let s = dwarf.attr_string(unit, v).map_err(e)?;
                return Ok(Some(String::from_utf8_lossy(s.slice()).into_owned()));
            }
        }
        Ok(None)
    };
    let mut headers = dwarf.units();
    while let Some(header) = headers.next().map_err(e)? {
        let unit = dwarf.unit(header).map_err(e)?;
        subprograms_at(&dwarf, &unit, wanted, &mut found, |entry| {
            let mut name = name_of(&unit, entry)?;
            for at in [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin] {
                if name.is_some() {
                    break;
                }
                if let Some(AttributeValue::UnitRef(offset)) = entry.attr_value(at).map_err(e)? {
                    let target = unit.entry(offset).map_err(e)?;
                    name = name_of(&unit, &target)?;
                }
            }
            Ok(name)
        })?;
    }
    Ok(found)
}
