//! Inventory of the functions in relocatable objects (`.o`) and static archives (`.a`).
//!
//! `sediment link` checks an order against the objects that will really be linked, and the
//! linker inputs it writes may only name what this inventory found: a profile comes from a
//! stranger, the objects do not. For every object (or archive member) we record the `STT_FILE`
//! name, and for every defined function symbol (`STT_FUNC`/`STT_GNU_IFUNC`) its name, binding,
//! size and the *input section* holding it, by its real name.
//!
//! What GCC 12 (`-O2 -ffunction-sections`, x86-64) actually emits, checked by hand while writing
//! this module and by the end-to-end tests in `tests/it/link.rs`:
//!
//! | source                                   | symbol (binding)          | input section              |
//! |------------------------------------------|---------------------------|----------------------------|
//! | `int f(void)`                            | `f` (global)              | `.text.f`                  |
//! | `static int helper(void)` (not inlined)  | `helper` (local)          | `.text.helper`             |
//! | `int main(void)`                         | `main` (global)           | `.text.startup.main`       |
//! | `__attribute__((hot)) int h(void)`       | `h` (global)              | `.text.hot.h`              |
//! | `__attribute__((cold)) int c(void)`      | `c` (global)              | `.text.unlikely.c`         |
//! | unlikely path split out of `f`           | `f.cold` (local)          | `.text.unlikely.f` (sic)   |
//! | constant-propagated clone of `cp`        | `cp.constprop.0` (local)  | `.text.cp.constprop.0`     |
//! | partially inlined `slow`                 | `slow.part.0` (local)     | `.text.slow.part.0`        |
//!
//! | clang 16 `-fbasic-block-sections=list=` | `f` (global), `f.__part.N`, `f.cold` (locals, `STT_NOTYPE`) | `.text.hot.f` (one per cluster), `.text.split.f` |
//!
//! Other architectures' objects read the same: aarch64 and s390x (big-endian) GCC objects have
//! the same symbols and sections (`tests/fixtures/cross`, checked in the tests below); only
//! their call relocations differ (see [`read_object`]).
//!
//! Note the `.cold` part: its section is named after the *parent* function
//! (`.text.unlikely.f`), not after the `f.cold` symbol, which is why section names must be read
//! from the objects and never derived from symbol names. Without `-ffunction-sections` every
//! function lands in a shared `.text`, `.text.hot`, `.text.unlikely` or `.text.startup`; then
//! one executable section holds functions at several offsets and no linker can move them one by
//! one. [`ObjectFile::function_sections`] is false in that case (aliases at the same offset do
//! not count).
//!
//! Local symbols belong to the source file named by the closest preceding `STT_FILE` symbol
//! (ELF gABI, "Symbol Table": an `STT_FILE` symbol precedes the other `STB_LOCAL` symbols of its
//! file). A plain `.o` has one; an `ld -r` output can have several, so the file is tracked per
//! symbol, reduced to its base name as in [`sediment_profile::FuncKey`].
//!
//! LTO inputs are recognised, not read: their functions only exist after the code generation
//! the linker runs (docs/guide/packaging.md, "LTO"). An [`ObjectFile`] with [`ObjectFile::lto`] set
//! is one of
//!
//! | input                                   | how it is told                                        |
//! |-----------------------------------------|-------------------------------------------------------|
//! | LLVM bitcode (`clang -flto`)            | the magic `BC\xC0\xDE`, or the bitcode wrapper `\xDE\xC0\x17\x0B` ([`is_bitcode`]) |
//! | GCC LTO object, slim (GCC's default)    | ELF relocatable with `.gnu.lto_*` sections and the symbol `__gnu_lto_slim`; no code of its own |
//! | GCC LTO object, fat (`-ffat-lto-objects`) | the same without `__gnu_lto_slim`; its code is read as usual, for a link without the LTO plugin |
//!
//! and the same objects as archive members. A bitcode object has no functions here.
//!
//! Non-goals: COFF/Mach-O, the symbol tables inside LTO inputs (LLVM's is a bitcode block, and
//! neither lists the `static` functions that a profile names), thin archives (their members
//! live in other files: they are rejected with a clear error rather than read from paths a
//! stranger chose). This module does no I/O: callers pass the bytes.

use crate::Error;
use object::read::archive::ArchiveFile;
use object::{
    Object, ObjectComdat, ObjectSection, ObjectSymbol, SectionKind, SymbolKind, SymbolSection,
};
use std::collections::BTreeMap;

/// Binding of a function symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Binding {
    /// `STB_LOCAL`: a `static` function or a compiler-made clone/part.
    Local,
    /// `STB_GLOBAL`.
    Global,
    /// `STB_WEAK`.
    Weak,
}

/// One defined function symbol of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectFunction {
    /// Symbol name as in the symbol table (mangled for C++).
    pub name: String,
    /// Its binding.
    pub binding: Binding,
    /// `st_size` in bytes.
    pub size: u64,
    /// Offset of the symbol inside its section.
    pub offset: u64,
    /// Name of the input section that holds it (`.text.hot.foo`, `.text.unlikely.foo`, ...).
    pub section: String,
    /// True when that section holds other functions at other offsets, so it cannot be placed
    /// for this function alone (object not built with `-ffunction-sections`).
    pub shared_section: bool,
    /// Base name of the source file (from the preceding `STT_FILE`) for local symbols; `None`
    /// for global and weak ones, as in [`sediment_profile::FuncKey`].
    pub file: Option<String>,
    /// Signature of the COMDAT group its section belongs to (`None` outside a group): an
    /// inline function or template instance, of which every object using it has a copy and
    /// the linker keeps one. The locals of such a section (a split function's `.cold` and
    /// `.__part.N` parts) have the same name in every copy.
    pub group: Option<String>,
}

/// What a function's code refers to: another function of the same object (an index into
/// [`ObjectFile::functions`]) or a function defined elsewhere, by symbol name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Callee {
    /// A function of this object.
    Here(usize),
    /// An undefined symbol the code calls (a global defined in another object or library).
    Elsewhere(String),
}

/// The functions of one relocatable object (a `.o` file or one member of a `.a`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectFile {
    /// Path of the file as the caller gave it (the archive's path for a member).
    pub path: String,
    /// Name of the archive member, when the object came from an archive.
    pub member: Option<String>,
    /// The first `STT_FILE` name (the translation unit, as the compiler recorded it).
    pub file_symbol: Option<String>,
    /// Defined functions in symbol-table order.
    pub functions: Vec<ObjectFunction>,
    /// False when some executable section holds several functions at different offsets.
    pub function_sections: bool,
    /// Static references from the code, from the relocations of its executable sections:
    /// `(function index, callee, sites)`, sorted, one entry per pair (see [`read_object`]).
    pub references: Vec<(usize, Callee, u32)>,
    /// Set when the object is LTO input: the code the linker places is generated at link time.
    pub lto: Option<Lto>,
}

/// The kind of an LTO input (see the module documentation for how each is recognised).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lto {
    /// LLVM bitcode: linked by lld itself, by gold and GNU ld through LLVMgold.so.
    Bitcode,
    /// A GCC LTO object: linked by gold and GNU ld through GCC's `liblto_plugin.so`.
    Gcc {
        /// True for a slim object (no machine code; GCC's default); false for a fat one
        /// (`-ffat-lto-objects`), whose ordinary code a link without the plugin uses.
        slim: bool,
    },
}

/// True when `head` (the first bytes of a file or archive member) starts with LLVM bitcode:
/// the raw magic `BC\xC0\xDE` or the bitcode wrapper header's magic `0x0B17C0DE`, which is
/// little-endian on disk (LLVM `BitcodeReader`, `isBitcodeWrapper`). Four bytes are enough.
pub fn is_bitcode(head: &[u8]) -> bool {
    head.starts_with(b"BC\xC0\xDE") || head.starts_with(b"\xDE\xC0\x17\x0B")
}

/// Prefix of the sections GCC writes its LTO bytecode to (`.gnu.lto_.symtab.…`,
/// `.gnu.lto_main.…`; `.gnu.lto_.lto.…` holds the version).
const GCC_LTO_SECTION_PREFIX: &[u8] = b".gnu.lto_";
/// The symbol GCC defines in a slim LTO object (one without machine code).
const GCC_LTO_SLIM_SYMBOL: &[u8] = b"__gnu_lto_slim";

/// An LTO input as an object without functions; `path` and `member` as in [`ObjectFile`].
fn lto_object(path: &str, member: Option<String>, lto: Lto) -> ObjectFile {
    ObjectFile {
        path: path.to_string(),
        member,
        file_symbol: None,
        functions: Vec::new(),
        function_sections: true,
        references: Vec::new(),
        lto: Some(lto),
    }
}

impl ObjectFile {
    /// `path` or `path(member)` for messages; the member name, which comes from the archive,
    /// with control characters escaped ([`sediment_profile::quote`]).
    pub fn display_name(&self) -> String {
        match &self.member {
            Some(m) => format!("{}({})", self.path, sediment_profile::quote(m)),
            None => self.path.clone(),
        }
    }
}

/// Reads a relocatable ELF object, an LLVM bitcode file or a static archive of them. `path` is
/// only used to label the result and errors. Archive members that are neither ELF objects nor
/// bitcode are skipped; an ELF member that is corrupt is an error.
pub fn read_objects(path: &str, data: &[u8]) -> Result<Vec<ObjectFile>, Error> {
    if is_bitcode(data) {
        return Ok(vec![lto_object(path, None, Lto::Bitcode)]);
    }
    if data.starts_with(b"!<thin>\n") {
        return Err(bad(
            path,
            "thin archive: its members live in other files; pass the objects themselves",
        ));
    }
    if data.starts_with(b"!<arch>\n") {
        check_archive_layout(path, data)?;
        let archive = ArchiveFile::parse(data).map_err(|e| bad(path, &format!("archive: {e}")))?;
        let mut out = Vec::new();
        for member in archive.members() {
            let member = member.map_err(|e| bad(path, &format!("archive member: {e}")))?;
            let name = String::from_utf8_lossy(member.name()).into_owned();
            let bytes = member.data(data).map_err(|e| {
                bad(
                    path,
                    &format!("archive member {}: {e}", sediment_profile::quote(&name)),
                )
            })?;
            if is_bitcode(bytes) {
                out.push(lto_object(path, Some(name), Lto::Bitcode));
                continue;
            }
            if !bytes.starts_with(b"\x7fELF") {
                continue;
            }
            let label = format!("{path}({})", sediment_profile::quote(&name));
            let mut obj = read_object(&label, bytes)?;
            obj.path = path.to_string();
            obj.member = Some(name);
            out.push(obj);
        }
        return Ok(out);
    }
    Ok(vec![read_object(path, data)?])
}

/// Size of an `ar` member header: name 16, date 12, uid 6, gid 6, mode 8, size 10 (decimal,
/// space-padded), then the terminator `` `\n `` (2).
const AR_HEADER: usize = 60;

/// Walks the member headers of an `ar` archive (after the `!<arch>\n` magic) and fails when a
/// header or a member's data is cut short by the end of the file, or a header is not one. The
/// `object` crate stops quietly at a member that runs past the end (a cut symbol index reads as
/// an archive with no members), so a truncated copy would otherwise look like an empty archive.
/// A missing padding byte after the last member is tolerated, as GNU ld tolerates it.
fn check_archive_layout(path: &str, data: &[u8]) -> Result<(), Error> {
    let mut at = 8usize;
    while at < data.len() {
        let Some(header) = data.get(at..at + AR_HEADER) else {
            return Err(bad(
                path,
                &format!(
                    "archive truncated: the member header at offset {at} has {} of its {AR_HEADER} bytes",
                    data.len() - at
                ),
            ));
        };
        let size = std::str::from_utf8(&header[48..58])
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|_| &header[58..60] == b"`\n")
            .ok_or_else(|| {
                bad(
                    path,
                    &format!("archive: the member header at offset {at} is malformed"),
                )
            })?;
        let start = at + AR_HEADER;
        let left = data.len() - start;
        if size > left {
            return Err(bad(
                path,
                &format!(
                    "archive truncated: the member at offset {at} has {left} of its {size} bytes"
                ),
            ));
        }
        let end = start + size;
        at = end + (end & 1);
    }
    Ok(())
}

/// Reads one relocatable ELF object.
///
/// Its [`ObjectFile::references`] come from the relocations of every executable section: a
/// relocation at offset `o` belongs to the function of that section starting at or before
/// `o`, and refers to the function its symbol names, or, for a section symbol (how GCC refers
/// to a `static` function in its own `.text.NAME` section), to the function at the addend's
/// offset in that section (corrected, for PC-relative fields, by where each processor counts
/// from: `pc_bias`). Both calls and address-taken functions count: `lua_resume`
/// hands `resume` to `luaD_rawrunprotected` by address, and they run together. An undefined
/// symbol counts only through a call relocation (`is_call`), since an undefined data
/// symbol looks the same. References to the function itself are left out.
pub fn read_object(path: &str, data: &[u8]) -> Result<ObjectFile, Error> {
    if !data.starts_with(b"\x7fELF") {
        return Err(bad(path, "not an ELF file or archive"));
    }
    let file = object::File::parse(data).map_err(|e| bad(path, &format!("malformed ELF: {e}")))?;
    if file.kind() != object::ObjectKind::Relocatable {
        return Err(bad(
            path,
            "not a relocatable object (an executable or shared library? pass the .o files)",
        ));
    }
    let lto = file
        .sections()
        .any(|s| {
            s.name_bytes()
                .is_ok_and(|n| n.starts_with(GCC_LTO_SECTION_PREFIX))
        })
        .then(|| Lto::Gcc {
            slim: file
                .symbols()
                .any(|s| s.name_bytes().is_ok_and(|n| n == GCC_LTO_SLIM_SYMBOL)),
        });
    // Section index -> signature of its COMDAT group.
    let mut groups: BTreeMap<usize, String> = BTreeMap::new();
    for g in file.comdats() {
        if g.kind() != object::ComdatKind::Any {
            continue;
        }
        let Ok(signature) = g.name_bytes() else {
            continue;
        };
        let signature = String::from_utf8_lossy(signature).into_owned();
        for index in g.sections() {
            groups.insert(index.0, signature.clone());
        }
    }
    let mut file_symbol = None;
    let mut current_file: Option<String> = None;
    let mut functions = Vec::new();
    for sym in file.symbols() {
        let name = String::from_utf8_lossy(
            sym.name_bytes()
                .map_err(|e| bad(path, &format!("symbol {}: {e}", sym.index().0)))?,
        )
        .into_owned();
        match sym.kind() {
            SymbolKind::File => {
                let base = sediment_profile::base_name(&name).to_string();
                if file_symbol.is_none() {
                    file_symbol = Some(base.clone());
                }
                current_file = Some(base);
                continue;
            }
            SymbolKind::Text => {}
            SymbolKind::Unknown if crate::is_split_part(&name) => {}
            _ => continue,
        }
        let SymbolSection::Section(index) = sym.section() else {
            continue; // undefined, absolute or common: not code we can place
        };
        if name.is_empty() {
            continue;
        }
        let section = file
            .section_by_index(index)
            .map_err(|e| bad(path, &format!("symbol {name}: {e}")))?;
        if section.kind() != SectionKind::Text {
            continue;
        }
        let section_name = String::from_utf8_lossy(
            section
                .name_bytes()
                .map_err(|e| bad(path, &format!("section of {name}: {e}")))?,
        )
        .into_owned();
        let binding = if sym.is_local() {
            Binding::Local
        } else if sym.is_weak() {
            Binding::Weak
        } else {
            Binding::Global
        };
        functions.push((
            index.0,
            ObjectFunction {
                name,
                binding,
                size: sym.size(),
                offset: sym.address(),
                section: section_name,
                shared_section: false,
                file: if binding == Binding::Local {
                    current_file.clone()
                } else {
                    None
                },
                group: groups.get(&index.0).cloned(),
            },
        ));
    }
    // A section is shared when its functions start at more than one offset.
    let mut offsets: BTreeMap<usize, (u64, bool)> = BTreeMap::new();
    for (sec, f) in &functions {
        offsets
            .entry(*sec)
            .and_modify(|(first, shared)| *shared |= *first != f.offset)
            .or_insert((f.offset, false));
    }
    let references = references(path, &file, &functions)?;
    let mut function_sections = true;
    let functions = functions
        .into_iter()
        .map(|(sec, mut f)| {
            f.shared_section = offsets[&sec].1;
            function_sections &= !f.shared_section;
            f
        })
        .collect();
    Ok(ObjectFile {
        path: path.to_string(),
        member: None,
        file_symbol,
        functions,
        function_sections,
        references,
        lto,
    })
}

/// The references of [`read_object`]'s documentation; `functions` are `(section index,
/// function)` in symbol-table order.
fn references(
    path: &str,
    file: &object::File,
    functions: &[(usize, ObjectFunction)],
) -> Result<Vec<(usize, Callee, u32)>, Error> {
    use object::RelocationTarget;
    // Per section: (offset, function index), sorted; the function at or before an offset.
    let mut by_section: BTreeMap<usize, Vec<(u64, usize)>> = BTreeMap::new();
    for (i, (sec, f)) in functions.iter().enumerate() {
        by_section.entry(*sec).or_default().push((f.offset, i));
    }
    for starts in by_section.values_mut() {
        starts.sort_unstable();
    }
    let at = |sec: usize, offset: u64| {
        let starts = by_section.get(&sec)?;
        let k = starts.partition_point(|&(o, _)| o <= offset);
        starts.get(k.checked_sub(1)?).map(|&(_, i)| i)
    };
    let arch = file.architecture();
    let mut counts: BTreeMap<(usize, Callee), u32> = BTreeMap::new();
    for section in file.sections() {
        if section.kind() != SectionKind::Text {
            continue;
        }
        for (offset, reloc) in section.relocations() {
            let Some(from) = at(section.index().0, offset) else {
                continue;
            };
            let RelocationTarget::Symbol(index) = reloc.target() else {
                continue;
            };
            let sym = file
                .symbol_by_index(index)
                .map_err(|e| bad(path, &format!("relocation at {offset:#x}: {e}")))?;
            let callee = match sym.section() {
                SymbolSection::Section(sec) => {
                    let target = sym
                        .address()
                        .wrapping_add(reloc.addend() as u64)
                        .wrapping_add(pc_bias(arch, &reloc) as u64);
                    match at(sec.0, target) {
                        Some(i) => Callee::Here(i),
                        None => continue,
                    }
                }
                SymbolSection::Undefined if is_call(arch, &reloc) => match sym.name_bytes() {
                    Ok(n) if !n.is_empty() => {
                        Callee::Elsewhere(String::from_utf8_lossy(n).into_owned())
                    }
                    _ => continue,
                },
                _ => continue,
            };
            if callee != Callee::Here(from) {
                let n = counts.entry((from, callee)).or_default();
                *n = n.saturating_add(1);
            }
        }
    }
    Ok(counts.into_iter().map(|((f, c), n)| (f, c, n)).collect())
}

/// What to add to a relocation's symbol and addend to get the address it refers to. A
/// PC-relative field's value is `S + A - P`, `P` the field's address, but each processor adds
/// it to its own reference point, and the assembler folds the distance from `P` to that point
/// into `A`: x86's is the end of the field (`call f` is `f - 4`), so the field size is added
/// back; aarch64's is the instruction, which is the field (`bl f` is `f + 0`); s390x's
/// halfword-scaled fields (`brasl`, `larl`: `R_390_PLT32DBL`, `R_390_PC32DBL`) sit 2 bytes into
/// the instruction, which is where it counts from (`f + 2`). Absolute fields need nothing.
fn pc_bias(arch: object::Architecture, reloc: &object::Relocation) -> i64 {
    use object::{Architecture as A, RelocationEncoding, RelocationKind};
    if !matches!(
        reloc.kind(),
        RelocationKind::Relative | RelocationKind::PltRelative
    ) {
        return 0;
    }
    match (arch, reloc.encoding()) {
        (_, RelocationEncoding::S390xDbl) => -2,
        (A::Aarch64 | A::Aarch64_Ilp32, _) => 0,
        _ => i64::from(reloc.size() / 8),
    }
}

/// Whether a relocation is a call or tail call (so that, against an undefined symbol, it is
/// a function called in another object and not data): a PLT-relative field (x86's
/// `R_X86_64_PLT32`, aarch64's `R_AARCH64_CALL26`, s390x's `R_390_PLT32DBL`), or aarch64's
/// `R_AARCH64_JUMP26` (`b f`, a tail call), which the `object` crate leaves untyped.
fn is_call(arch: object::Architecture, reloc: &object::Relocation) -> bool {
    use object::{Architecture as A, RelocationFlags, RelocationKind};
    reloc.kind() == RelocationKind::PltRelative
        || (matches!(arch, A::Aarch64)
            && matches!(reloc.flags(), RelocationFlags::Elf { r_type } if r_type == object::elf::R_AARCH64_JUMP26))
}

fn bad(path: &str, message: &str) -> Error {
    Error::Parse {
        path: path.to_string(),
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Garbage and truncated inputs are errors naming the file, never panics.
    #[test]
    fn rejects_garbage_and_truncation() {
        let e = read_objects("x.o", b"hello").unwrap_err().to_string();
        assert_eq!(e, "x.o: not an ELF file or archive");
        let e = read_objects("y.o", b"\x7fELF\x02\x01\x01")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("y.o: malformed ELF: "), "{e}");
        let e = read_objects("z.a", b"!<thin>\n").unwrap_err().to_string();
        assert!(e.starts_with("z.a: thin archive"), "{e}");
        // An archive whose member header is cut short.
        let e = read_objects("t.a", b"!<arch>\na.o/            0  ")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.a: archive"), "{e}");
    }

    // LLVM bitcode, raw or in its wrapper, is an LTO input with no functions, alone or as an
    // archive member; other non-ELF members are still skipped.
    #[test]
    fn bitcode_is_an_lto_input() {
        for data in [&b"BC\xC0\xDE\x35\x14\0\0"[..], b"\xDE\xC0\x17\x0B\0\0\0\0"] {
            assert_eq!(
                read_objects("a.o", data).unwrap(),
                vec![lto_object("a.o", None, Lto::Bitcode)]
            );
        }
        assert!(!is_bitcode(b"BC\xC0"));
        assert!(!is_bitcode(b"\x7fELF\x02\x01\x01"));
        let member = |name: &str, data: &[u8]| {
            let mut m = format!(
                "{name:<16}0           0     0     644     {:<10}`\n",
                data.len()
            )
            .into_bytes();
            m.extend_from_slice(data);
            if data.len() % 2 == 1 {
                m.push(b'\n');
            }
            m
        };
        let mut ar = b"!<arch>\n".to_vec();
        ar.extend(member("b.o/", b"BC\xC0\xDE\x35\x14\0\0"));
        ar.extend(member("notes.txt/", b"hello"));
        assert_eq!(
            read_objects("lib.a", &ar).unwrap(),
            vec![lto_object("lib.a", Some("b.o".into()), Lto::Bitcode)]
        );
    }

    /// The calls of an object as `(caller, callee, sites)`, by name (`*` marks another object's).
    fn calls_of(o: &ObjectFile) -> Vec<(String, String, u32)> {
        let name = |i: usize| o.functions[i].name.clone();
        let mut v: Vec<(String, String, u32)> = o
            .references
            .iter()
            .map(|(from, callee, n)| {
                let to = match callee {
                    Callee::Here(i) => name(*i),
                    Callee::Elsewhere(s) => format!("*{s}"),
                };
                (name(*from), to, *n)
            })
            .collect();
        v.sort();
        v
    }

    // aarch64 and s390x (big-endian) objects: the same functions, sections and files as on
    // x86-64, and every call found: a static in its own section (through the section symbol on
    // aarch64, the local symbol on s390x), another object's function called and tail-called
    // (`R_AARCH64_JUMP26`), and a static whose address is taken (two relocations on aarch64).
    #[test]
    fn cross_architecture_objects() {
        let fixtures = [
            (
                "aarch64",
                &include_bytes!("../../../tests/fixtures/cross/calls-aarch64.o")[..],
                2,
            ),
            (
                "s390x",
                &include_bytes!("../../../tests/fixtures/cross/calls-s390x.o")[..],
                1,
            ),
        ];
        for (arch, data, callback_sites) in fixtures {
            let o = read_object(arch, data).unwrap();
            assert!(o.function_sections, "{arch}");
            assert_eq!(o.file_symbol.as_deref(), Some("calls.c"), "{arch}");
            let mut functions: Vec<(&str, &str, Binding, Option<&str>)> = o
                .functions
                .iter()
                .map(|f| {
                    (
                        f.name.as_str(),
                        f.section.as_str(),
                        f.binding,
                        f.file.as_deref(),
                    )
                })
                .collect();
            functions.sort();
            assert_eq!(
                functions,
                [
                    (
                        "callback",
                        ".text.callback",
                        Binding::Local,
                        Some("calls.c")
                    ),
                    ("helper", ".text.helper", Binding::Local, Some("calls.c")),
                    ("main", ".text.startup.main", Binding::Global, None),
                    ("tail", ".text.tail", Binding::Global, None),
                    ("twice", ".text.twice", Binding::Global, None),
                ],
                "{arch}"
            );
            let own = |a: &str, b: &str, n: u32| (a.to_string(), b.to_string(), n);
            assert_eq!(
                calls_of(&o),
                [
                    own("main", "*apply", 1),
                    own("main", "*elsewhere", 1),
                    own("main", "callback", callback_sites),
                    own("main", "twice", 1),
                    own("tail", "*elsewhere", 1),
                    own("twice", "helper", 2),
                ],
                "{arch}"
            );
        }
    }

    // Regression: an archive cut inside a member (`head -c 75 liba.a`: the symbol index
    // header and 7 of its 32 bytes) read as an empty archive; now it is reported as truncated.
    // The bare magic is a valid empty archive.
    #[test]
    fn truncated_archive_is_reported() {
        let mut cut =
            b"!<arch>\n/               0           0     0     0       32        `\n".to_vec();
        cut.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(cut.len(), 75);
        assert_eq!(
            read_objects("cut.a", &cut).unwrap_err().to_string(),
            "cut.a: archive truncated: the member at offset 8 has 7 of its 32 bytes"
        );
        let e = read_objects("h.a", &cut[..40]).unwrap_err().to_string();
        assert_eq!(
            e,
            "h.a: archive truncated: the member header at offset 8 has 32 of its 60 bytes"
        );
        let mut bad_header = cut[..68].to_vec();
        bad_header[66] = b'x';
        let e = read_objects("b.a", &bad_header).unwrap_err().to_string();
        assert!(
            e.starts_with("b.a: archive: the member header at offset 8"),
            "{e}"
        );
        assert_eq!(read_objects("e.a", b"!<arch>\n").unwrap(), vec![]);
    }
}
