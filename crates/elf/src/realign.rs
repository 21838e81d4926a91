//! Raising the alignment of chosen input sections in a copy of a relocatable object, so that
//! any linker (lld, gold, GNU ld) starts the functions they hold on a cache-line boundary
//! without a linker script and without recompiling.
//!
//! A linker places an input section at the next multiple of its `sh_addralign` (ELF gABI,
//! "Sections"), so with `-ffunction-sections` (one function per section) raising one
//! section's `sh_addralign` from 16 to 64 is exactly "this function starts on a line", and it
//! keeps the link order: nothing else about the link changes. Only that field of the section
//! header is rewritten; relocations, symbols and contents stay byte for byte, so the copy
//! links wherever the original did. [`raise_alignment`] only raises the alignment, never lowers it.
//!
//! Turned down: a GNU ld or gold linker script with `. = ALIGN(64);` before the chosen
//! sections. A script that names only the chosen sections also moves them (a script places
//! what it lists first), and one that keeps the default order has to list every input
//! section of every object in the linker's own default order; lld would need the same. The
//! header field gives the three linkers the same input.
//!
//! [`set_alignment`] also lowers: it gives every wanted section exactly one alignment, which is
//! how `sediment align --build` relinks the objects as `-falign-functions=A` would have
//! compiled them, for every `A` of the sweep, without recompiling.
//!
//! Only 64-bit little-endian relocatable objects are rewritten (x86-64, AArch64); others, and
//! archives, are an error naming the file. This module does no I/O: callers pass the bytes and write the copy.

use crate::Error;
use object::{Object, ObjectSection, SectionKind};

/// Offset of `sh_addralign` in an `Elf64_Shdr`: `sh_name` (4), `sh_type` (4), `sh_flags` (8),
/// `sh_addr` (8), `sh_offset` (8), `sh_size` (8), `sh_link` (4), `sh_info` (4).
const SH_ADDRALIGN_64: usize = 0x30;

/// `data` (a relocatable ELF object named `path`) with the alignment of every executable
/// section whose name `wanted` maps to `Some(a)` raised to `a` (a power of two); returns the
/// new bytes and the names of the sections changed, in section order. A section already
/// aligned to `a` or more is left alone and not listed.
pub fn raise_alignment(
    path: &str,
    data: &[u8],
    wanted: impl Fn(&str) -> Option<u64>,
) -> Result<(Vec<u8>, Vec<String>), Error> {
    rewrite(path, data, wanted, false)
}

/// [`raise_alignment`], except that a section aligned to more than `a` is lowered to `a`:
/// every executable section `wanted` maps to `Some(a)` ends with alignment exactly `a`, as if
/// compiled with `-falign-functions=a` (a lowered section's code is still correct anywhere;
/// only the padding the assembler put inside it for loops no longer aligns what it did). The
/// sections changed are listed in section order.
pub fn set_alignment(
    path: &str,
    data: &[u8],
    wanted: impl Fn(&str) -> Option<u64>,
) -> Result<(Vec<u8>, Vec<String>), Error> {
    rewrite(path, data, wanted, true)
}

/// Link-time address of the section `name` of the ELF file `data` (named `path`), `None` when
/// it has no such section: where a linked binary's `.text` starts, which a section aligned by
/// [`raise_alignment`] makes the linker round up.
pub fn section_address(path: &str, data: &[u8], name: &str) -> Result<Option<u64>, Error> {
    let file = object::File::parse(data).map_err(|e| Error::Parse {
        path: path.to_string(),
        message: format!("malformed ELF: {e}"),
    })?;
    Ok(file.section_by_name(name).map(|s| s.address()))
}

/// Rewrites `sh_addralign` of the wanted executable sections; `lower`: also where it is larger.
fn rewrite(
    path: &str,
    data: &[u8],
    wanted: impl Fn(&str) -> Option<u64>,
    lower: bool,
) -> Result<(Vec<u8>, Vec<String>), Error> {
    let bad = |message: String| Error::Parse {
        path: path.to_string(),
        message,
    };
    if data.starts_with(b"!<arch>\n") {
        return Err(bad(
            "an archive: extract its members (`ar x`) and pass the objects".into(),
        ));
    }
    let file = object::File::parse(data).map_err(|e| bad(format!("malformed ELF: {e}")))?;
    if file.kind() != object::ObjectKind::Relocatable {
        return Err(bad("not a relocatable object".into()));
    }
    if !file.is_64() || !file.is_little_endian() {
        return Err(bad(
            "only 64-bit little-endian objects can be realigned".into()
        ));
    }
    let field = |at: usize, len: usize| -> Result<u64, Error> {
        let b = data
            .get(at..at + len)
            .ok_or_else(|| bad("section header table out of bounds".into()))?;
        Ok(b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    };
    // ELF64 header: e_shoff at 0x28 (8 bytes), e_shentsize at 0x3a (2).
    let shoff = usize::try_from(field(0x28, 8)?).map_err(|_| bad("e_shoff too large".into()))?;
    let shentsize = field(0x3a, 2)? as usize;
    if shentsize < SH_ADDRALIGN_64 + 8 {
        return Err(bad(format!("section header entries of {shentsize} bytes")));
    }
    let mut out = data.to_vec();
    let mut changed = Vec::new();
    for section in file.sections() {
        if section.kind() != SectionKind::Text {
            continue;
        }
        let name = section
            .name()
            .map_err(|e| bad(format!("section {}: {e}", section.index().0)))?;
        let Some(a) = wanted(name) else { continue };
        if !a.is_power_of_two() {
            return Err(bad(format!(
                "alignment {a} for {name} is not a power of two"
            )));
        }
        if section.align() == a || (section.align() > a && !lower) {
            continue;
        }
        let at = section
            .index()
            .0
            .checked_mul(shentsize)
            .and_then(|o| o.checked_add(shoff))
            .and_then(|o| o.checked_add(SH_ADDRALIGN_64))
            .filter(|&o| o + 8 <= out.len())
            .ok_or_else(|| bad(format!("section header of {name} out of bounds")))?;
        out[at..at + 8].copy_from_slice(&a.to_le_bytes());
        changed.push(name.to_string());
    }
    Ok((out, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Not an object, an archive: one error each, naming the file.
    #[test]
    fn refuses_what_it_cannot_rewrite() {
        let e = raise_alignment("a.a", b"!<arch>\nxxxx", |_| Some(64)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.a: an archive: extract its members (`ar x`) and pass the objects"
        );
        let e = raise_alignment("j.o", b"junk", |_| Some(64)).unwrap_err();
        assert!(e.to_string().starts_with("j.o: malformed ELF"), "{e}");
    }
}
