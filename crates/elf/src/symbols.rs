//! Function symbols and load segments of a linked ELF executable or shared object.
//!
//! A sampling profiler records *runtime* addresses. To name the function behind one, the
//! importer needs two things from the binary, both read here:
//!
//! 1. The `PT_LOAD` program headers. A perf `MMAP` record says that bytes `[pgoff, pgoff+len)`
//!    of a file were mapped at `[start, start+len)`; so a runtime address `a` is at file offset
//!    `a - start + pgoff`, and the `PT_LOAD` segment holding that offset turns it into the
//!    link-time virtual address `p_vaddr + (offset - p_offset)` (System V ABI, "Program Header").
//!    This works the same for position-independent executables, shared objects and fixed-address
//!    executables, and needs no guess about the load bias.
//! 2. The function symbols (`STT_FUNC`, `STT_GNU_IFUNC`) sorted by address. `.symtab` is
//!    preferred; a binary without it falls back to `.dynsym` (exported functions only); one with
//!    neither is refused ("no symbol table (stripped?)"). A local (`STB_LOCAL`) function gets the
//!    base name of the `STT_FILE` symbol that precedes it in the table: linkers keep each object's
//!    locals together after its `STT_FILE` entry, which is how `helper` of `a.c` and `helper` of
//!    `b.c` stay apart. Global functions never carry a file, and neither do the locals that were
//!    globals of hidden (or internal or protected) visibility in their object: the linker makes
//!    those local, and lld keeps them under their object's `STT_FILE` with the visibility kept
//!    (`LOCAL HIDDEN`), whereas GNU ld puts them after an empty `STT_FILE` (so no file either
//!    way). Keying them by name alone gives one key whichever linker made the binary, the key
//!    `sediment link` finds as a global in the object files (Lua's `LUAI_FUNC` functions).
//!    One exception: GCC's LTO renames same-named statics of different files
//!    (`helper.lto_priv.0`, `helper.lto_priv.1`, numbered by partition, not by file) and puts
//!    them after an empty `STT_FILE`; such a local gets the file its DWARF names
//!    (`crate::dwarf`), when the binary has DWARF, so that a profile of a build without LTO
//!    still tells the two `helper`s apart on an LTO build.
//!
//! Only linked files are read: a relocatable object (`.o`) is refused by name, since its symbol
//! values are section offsets (every function would sit at address 0); object files are read
//! by [`crate::objects`] instead.
//!
//! Compiler clones and split parts (`foo.constprop.0`, `foo.part.0`, `foo.cold`) are separate
//! symbols and stay separate functions: they can be placed independently, which is the point of
//! hot/cold splitting. Clang 16 writes the cold part of a basic-block-sections function as an
//! `STT_NOTYPE` local (`foo.cold`, and `foo.__part.N` for its extra clusters); in a code section
//! it is taken as a function too.
//!
//! Lookup is a binary search for the last symbol starting at or below the address. A symbol with
//! a size covers `[addr, addr+size)`; a symbol of size zero (hand-written assembly) extends to the
//! next symbol's start, or to the end of its executable segment for the last one.
//!
//! Aliases (several names at one address, e.g. `malloc` and `__libc_malloc`) keep one name:
//! global before weak before local, then the smallest name, so the choice is deterministic.
//! Turned down: keeping all aliases and attributing to each; it would count the same samples
//! several times and give the order file two entries for one piece of code.

use crate::Error;
use object::{
    Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, SegmentFlags, SymbolKind,
};
use sediment_profile::{base_name, FuncKey};
use std::collections::BTreeSet;

/// `p_flags` bit of an executable segment (System V ABI `PF_X`).
pub const PF_X: u32 = 1;

/// One `PT_LOAD` program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// `p_vaddr`: link-time virtual address of the first byte.
    pub vaddr: u64,
    /// `p_offset`: file offset of the first byte.
    pub offset: u64,
    /// `p_filesz`: bytes present in the file.
    pub file_size: u64,
    /// `p_memsz`: bytes in memory (at least `file_size`; the rest is zero-filled).
    pub mem_size: u64,
    /// `p_flags`: `PF_X` = 1, `PF_W` = 2, `PF_R` = 4.
    pub flags: u32,
}

impl Segment {
    /// True for a segment holding code.
    pub fn is_executable(&self) -> bool {
        self.flags & PF_X != 0
    }
}

/// One function symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Name, plus the source file base name for local symbols.
    pub key: FuncKey,
    /// Link-time virtual address (`st_value`).
    pub address: u64,
    /// Size in bytes (`st_size`); 0 when the symbol did not say.
    pub size: u64,
}

/// What Sediment reads from a linked ELF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// GNU build-id as lowercase hex, when the file has the note.
    pub build_id: Option<String>,
    /// Architecture name (`x86_64`, `aarch64`, ...).
    pub arch: String,
    /// `PT_LOAD` segments in program-header order.
    pub segments: Vec<Segment>,
    /// Function symbols sorted by address, one per address.
    pub functions: Vec<Symbol>,
    /// True when the symbols came from `.dynsym` because `.symtab` was missing.
    pub from_dynsym: bool,
    /// Address ranges `[start, end)` of the procedure linkage table's sections (`.plt`,
    /// `.plt.sec`, `.plt.got`, `.iplt`), sorted: stubs that jump to a function of another
    /// binary (or resolve one), which no symbol covers. [`Binary::lookup`] finds no function
    /// there, so that a sample in a stub is never taken for the size-less symbol before it
    /// (`_init`, which ends the `.init` section just before `.plt`).
    pub plt: Vec<(u64, u64)>,
}

/// Binding rank used to choose among aliases: lower wins.
fn binding_rank<'d>(sym: &impl ObjectSymbol<'d>) -> u8 {
    if sym.is_local() {
        2
    } else if sym.is_weak() {
        1
    } else {
        0
    }
}

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The `sediment` name of an architecture.
fn arch_name(arch: object::Architecture) -> String {
    use object::Architecture as A;
    match arch {
        A::X86_64 | A::X86_64_X32 => "x86_64".into(),
        A::I386 => "x86".into(),
        A::Aarch64 | A::Aarch64_Ilp32 => "aarch64".into(),
        A::Arm => "arm".into(),
        A::Riscv64 => "riscv64".into(),
        A::Riscv32 => "riscv32".into(),
        A::PowerPc64 => "ppc64".into(),
        A::S390x => "s390x".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

impl Binary {
    /// Reads a linked ELF file. `path` is used only in error messages. A relocatable object
    /// (`ET_REL`, a `.o`) or a core dump is refused: its symbol values are not addresses of
    /// running code.
    pub fn parse(path: &str, data: &[u8]) -> Result<Binary, Error> {
        let err = |message: String| Error::Parse {
            path: path.to_string(),
            message,
        };
        let file =
            object::File::parse(data).map_err(|e| err(format!("not a readable ELF file: {e}")))?;
        if file.format() != object::BinaryFormat::Elf {
            return Err(err(format!("not an ELF file ({:?})", file.format())));
        }
        // An object file has symbols too, but its addresses are section offsets, not where the
        // code runs: read as a binary it looks like one function at address 0.
        match file.kind() {
            object::ObjectKind::Relocatable => {
                return Err(err(
                    "a relocatable object (.o), not a linked executable or shared library".into(),
                ))
            }
            object::ObjectKind::Core => {
                return Err(err(
                    "a core dump, not a linked executable or shared library".into(),
                ))
            }
            _ => {}
        }
        let build_id = file
            .build_id()
            .map_err(|e| err(format!("bad build-id note: {e}")))?
            .map(hex);
        let segments = file
            .segments()
            .map(|s| {
                let (offset, file_size) = s.file_range();
                let flags = match s.flags() {
                    SegmentFlags::Elf { p_flags, .. } => p_flags.0,
                    _ => 0,
                };
                Segment {
                    vaddr: s.address(),
                    offset,
                    file_size,
                    mem_size: s.size(),
                    flags,
                }
            })
            .collect();

        let mut from_dynsym = false;
        let mut functions = match file.symbol_table() {
            Some(t) => collect_functions(&file, t.symbols()).map_err(&err)?,
            None => Vec::new(),
        };
        if functions.is_empty() {
            if let Some(t) = file.dynamic_symbol_table() {
                functions = collect_functions(&file, t.symbols()).map_err(&err)?;
                from_dynsym = true;
            }
        }
        if functions.is_empty() {
            return Err(Error::NoSymbols {
                path: path.to_string(),
            });
        }
        let mut plt: Vec<(u64, u64)> = file
            .sections()
            .filter(|s| {
                matches!(
                    s.name(),
                    Ok(".plt" | ".plt.sec" | ".plt.got" | ".iplt" | ".plt.bnd")
                ) && s.size() > 0
            })
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        plt.sort_unstable();
        Ok(Binary {
            plt,
            build_id,
            arch: arch_name(file.architecture()),
            segments,
            functions,
            from_dynsym,
        })
    }

    /// Link-time virtual address of a file offset, through the `PT_LOAD` segment holding it.
    /// Executable segments are tried first, so that an offset on a page shared by the end of
    /// the code and the start of the data resolves to code.
    pub fn offset_to_vaddr(&self, offset: u64) -> Option<u64> {
        let hit = |s: &&Segment| offset >= s.offset && offset - s.offset < s.file_size;
        self.segments
            .iter()
            .filter(|s| s.is_executable())
            .find(hit)
            .or_else(|| self.segments.iter().find(hit))
            .map(|s| s.vaddr.wrapping_add(offset - s.offset))
    }

    /// True when a link-time address is in a PLT section ([`Binary::plt`]).
    pub fn in_plt(&self, address: u64) -> bool {
        self.plt
            .iter()
            .any(|&(start, end)| address >= start && address < end)
    }

    /// Index into [`Binary::functions`] of the function containing a link-time address; none
    /// in a PLT section ([`Binary::in_plt`]).
    pub fn lookup(&self, address: u64) -> Option<usize> {
        if self.in_plt(address) {
            return None;
        }
        let i = self
            .functions
            .partition_point(|f| f.address <= address)
            .checked_sub(1)?;
        let f = &self.functions[i];
        let end = if f.size > 0 {
            f.address.saturating_add(f.size)
        } else if let Some(next) = self.functions.get(i + 1) {
            next.address
        } else {
            self.segments
                .iter()
                .filter(|s| s.is_executable())
                .find(|s| f.address >= s.vaddr && f.address - s.vaddr < s.mem_size)
                .map_or(f.address, |s| s.vaddr.saturating_add(s.mem_size))
        };
        (address < end).then_some(i)
    }

    /// The function containing a link-time address.
    pub fn function_at(&self, address: u64) -> Option<&Symbol> {
        self.lookup(address).map(|i| &self.functions[i])
    }
}

/// Function symbols that share an address (the aliases [`Binary::parse`] folds into one
/// name), and which of them the compiler compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasSet {
    /// The shared address.
    pub address: u64,
    /// The names, sorted.
    pub names: Vec<String>,
    /// The name the binary's DWARF gives the function compiled at the address (the linkage
    /// name of its `DW_TAG_subprogram`), when it is one of `names`; `None` without DWARF, and
    /// from [`aliases`], which does not read the DWARF.
    pub compiled: Option<String>,
}

/// The function symbols that share an address with another one ([`AliasSet`]), by address,
/// without [`AliasSet::compiled`] (see [`compiled_aliases`]). Read from the table
/// [`Binary::parse`] uses (`.symtab`, else `.dynsym`). C++ compilers define the complete-object
/// constructor or destructor (`C1`, `D1`) as an alias of the base-object one (`C2`, `D2`) when
/// the two are the same code, and clang a derived class's destructor whose body is empty as an
/// alias of its base class's.
pub fn aliases(path: &str, data: &[u8]) -> Result<Vec<AliasSet>, Error> {
    Ok(alias_sets(&parse_file(path, data)?))
}

/// [`aliases`] with [`AliasSet::compiled`]: which name of each set the compiler compiled as a
/// function, and so named its split parts after, as the binary's DWARF tells (a walk of its
/// subprograms, the cost of which [`aliases`] saves).
pub fn compiled_aliases(path: &str, data: &[u8]) -> Result<Vec<AliasSet>, Error> {
    let file = parse_file(path, data)?;
    let mut out = alias_sets(&file);
    let addresses: BTreeSet<u64> = out.iter().map(|a| a.address).collect();
    let mut compiled =
        crate::dwarf::linkage_names(&file, &addresses).map_err(|message| Error::Parse {
            path: path.to_string(),
            message,
        })?;
    for a in &mut out {
        a.compiled = compiled
            .remove(&a.address)
            .filter(|n| a.names.binary_search(n).is_ok());
    }
    Ok(out)
}

fn parse_file<'d>(path: &str, data: &'d [u8]) -> Result<object::File<'d>, Error> {
    object::File::parse(data).map_err(|e| Error::Parse {
        path: path.to_string(),
        message: format!("not a readable ELF file: {e}"),
    })
}

/// The sets of [`aliases`], `compiled` left empty.
fn alias_sets(file: &object::File<'_>) -> Vec<AliasSet> {
    let collect = |t: object::SymbolTable<'_, '_>| -> Vec<(u64, String)> {
        t.symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
            .filter_map(|s| Some((s.address(), s.name().ok()?.to_string())))
            .filter(|(_, n)| !n.is_empty())
            .collect()
    };
    let mut found = file.symbol_table().map(collect).unwrap_or_default();
    if found.is_empty() {
        found = file.dynamic_symbol_table().map(collect).unwrap_or_default();
    }
    found.sort();
    found.dedup();
    let mut out: Vec<AliasSet> = Vec::new();
    for (address, name) in found {
        match out.last_mut() {
            Some(a) if a.address == address => a.names.push(name),
            _ => out.push(AliasSet {
                address,
                names: vec![name],
                compiled: None,
            }),
        }
    }
    out.retain(|a| a.names.len() > 1);
    out
}

/// True when a symbol has a non-default ELF visibility (`st_other & 3`): in a linked file, a
/// local of that kind was a hidden, internal or protected global of its object (a `static`
/// function has default visibility).
fn was_hidden_global<'d>(sym: &impl ObjectSymbol<'d>) -> bool {
    matches!(sym.flags(), object::SymbolFlags::Elf { st_other, .. }
        if st_other.visibility() != object::elf::STV_DEFAULT)
}

/// True when a symbol is defined in a code section.
fn in_code<'d>(obj: &object::File<'d>, sym: &impl ObjectSymbol<'d>) -> bool {
    match sym.section() {
        object::SymbolSection::Section(i) => obj
            .section_by_index(i)
            .is_ok_and(|s| s.kind() == object::SectionKind::Text),
        _ => false,
    }
}

/// Function symbols of one table, in address order, aliases folded (see the module docs).
fn collect_functions<'d, S: ObjectSymbol<'d>>(
    obj: &object::File<'d>,
    symbols: impl Iterator<Item = S>,
) -> Result<Vec<Symbol>, String> {
    // (address, rank, name, file, size) so that sorting puts the preferred alias first.
    let mut found: Vec<(u64, u8, String, Option<String>, u64)> = Vec::new();
    let mut current_file: Option<String> = None;
    // Statics renamed by LTO under an empty `STT_FILE`: their file comes from DWARF.
    let mut lto_statics = BTreeSet::new();
    for sym in symbols {
        let name = match sym.name_bytes() {
            Ok(n) => String::from_utf8_lossy(n).into_owned(),
            Err(_) => continue,
        };
        match sym.kind() {
            SymbolKind::File => {
                current_file = (!name.is_empty()).then(|| base_name(&name).to_string());
            }
            kind @ (SymbolKind::Text | SymbolKind::Unknown)
                if sym.is_definition()
                    && !name.is_empty()
                    && (kind == SymbolKind::Text
                        || (crate::is_split_part(&name) && in_code(obj, &sym))) =>
            {
                let file = if sym.is_local() && !was_hidden_global(&sym) {
                    if current_file.is_none() && is_lto_static(&name) {
                        lto_statics.insert(sym.address());
                    }
                    current_file.clone()
                } else {
                    None
                };
                found.push((sym.address(), binding_rank(&sym), name, file, sym.size()));
            }
            _ => {}
        }
    }
    let origins = crate::dwarf::origin_files(obj, &lto_statics)?;
    // Ties (same address and rank) go to the smallest name, then file: a total order, so the
    // result does not depend on the table's order.
    found.sort();
    found.dedup_by_key(|f| f.0);
    Ok(found
        .into_iter()
        .map(|(address, _, name, file, size)| {
            let file = match file {
                None if !origins.is_empty() && is_lto_static(&name) => {
                    origins.get(&address).cloned()
                }
                file => file,
            };
            Symbol {
                key: FuncKey { name, file },
                address,
                size,
            }
        })
        .collect())
}

/// True for a name GCC's LTO gave a static it had to rename (`helper.lto_priv.0`).
fn is_lto_static(name: &str) -> bool {
    sediment_profile::normalize(name)
        .suffixes
        .contains(&sediment_profile::SuffixKind::LtoPriv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(functions: Vec<(&str, u64, u64)>) -> Binary {
        Binary {
            build_id: None,
            arch: "x86_64".into(),
            segments: vec![
                Segment {
                    vaddr: 0x0,
                    offset: 0,
                    file_size: 0x1000,
                    mem_size: 0x1000,
                    flags: 4,
                },
                Segment {
                    vaddr: 0x1000,
                    offset: 0x1000,
                    file_size: 0x200,
                    mem_size: 0x200,
                    flags: 5,
                },
            ],
            functions: functions
                .into_iter()
                .map(|(n, address, size)| Symbol {
                    key: FuncKey::global(n),
                    address,
                    size,
                })
                .collect(),
            from_dynsym: false,
            plt: Vec::new(),
        }
    }

    // Sized symbols cover [addr, addr+size); gaps between them belong to nobody.
    #[test]
    fn lookup_respects_sizes_and_gaps() {
        let b = bin(vec![("a", 0x1000, 0x10), ("b", 0x1020, 0x10)]);
        assert_eq!(b.lookup(0x0fff), None);
        assert_eq!(b.lookup(0x1000), Some(0));
        assert_eq!(b.lookup(0x100f), Some(0));
        assert_eq!(b.lookup(0x1010), None);
        assert_eq!(b.lookup(0x102f), Some(1));
        assert_eq!(b.lookup(0x1030), None);
    }

    // A zero-size symbol extends to the next one, the last one to the end of its segment.
    #[test]
    fn zero_size_symbols_extend() {
        let b = bin(vec![("a", 0x1000, 0), ("b", 0x1100, 0)]);
        assert_eq!(b.lookup(0x10ff), Some(0));
        assert_eq!(b.lookup(0x1100), Some(1));
        assert_eq!(b.lookup(0x11ff), Some(1));
        assert_eq!(b.lookup(0x1200), None);
    }

    // File offsets map through the PT_LOAD holding them; code segments win.
    #[test]
    fn offsets_map_to_vaddrs() {
        let mut b = bin(vec![("a", 0x1000, 0)]);
        b.segments[1].vaddr = 0x401000;
        assert_eq!(b.offset_to_vaddr(0x1010), Some(0x401010));
        assert_eq!(b.offset_to_vaddr(0x10), Some(0x10));
        assert_eq!(b.offset_to_vaddr(0x1200), None);
    }

    // Garbage is an error naming the file, not a panic.
    #[test]
    fn garbage_is_a_parse_error() {
        let e = Binary::parse("x.bin", b"\x7fELF\x02\x01\x01garbage").unwrap_err();
        assert!(
            matches!(&e, Error::Parse { path, .. } if path == "x.bin"),
            "{e}"
        );
        assert!(Binary::parse("y", b"").is_err());
    }

    // A relocatable object (an ELF header with `e_type` ET_REL, no sections) is refused by
    // name, before its symbols are read.
    #[test]
    fn relocatable_object_is_refused() {
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2; // ELFCLASS64
        h[5] = 1; // ELFDATA2LSB
        h[6] = 1; // EV_CURRENT
        h[16] = 1; // e_type ET_REL
        h[18] = 62; // e_machine EM_X86_64
        h[20] = 1; // e_version
        h[52] = 64; // e_ehsize
        let e = Binary::parse("a.o", &h).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.o: a relocatable object (.o), not a linked executable or shared library"
        );
    }

    // Linked aarch64 and s390x (big-endian) executables: their architecture, the program's
    // functions at their addresses in their executable segment, statics keyed with their file.
    #[test]
    fn cross_architecture_binaries() {
        let fixtures = [
            (
                "aarch64",
                &include_bytes!("../../../tests/fixtures/cross/calls-aarch64")[..],
            ),
            (
                "s390x",
                &include_bytes!("../../../tests/fixtures/cross/calls-s390x")[..],
            ),
        ];
        for (arch, data) in fixtures {
            let b = Binary::parse(arch, data).unwrap();
            assert_eq!(b.arch, arch);
            assert!(!b.from_dynsym, "{arch}");
            let code = b.segments.iter().find(|s| s.is_executable()).unwrap();
            let own = [
                "apply",
                "callback",
                "elsewhere",
                "helper",
                "main",
                "tail",
                "twice",
            ];
            let found: Vec<&Symbol> = b
                .functions
                .iter()
                .filter(|f| own.contains(&f.key.name.as_str()))
                .collect();
            assert_eq!(found.len(), own.len(), "{arch}: {found:?}");
            for f in found {
                assert!(
                    f.size > 0
                        && f.address >= code.vaddr
                        && f.address + f.size <= code.vaddr + code.mem_size,
                    "{arch}: {f:?} outside {code:?}"
                );
                let local = ["callback", "helper"].contains(&f.key.name.as_str());
                assert_eq!(f.key.file.as_deref(), local.then_some("calls.c"), "{f:?}");
                assert_eq!(
                    b.function_at(f.address + f.size - 1).map(|g| &g.key),
                    Some(&f.key)
                );
            }
        }
    }
}
