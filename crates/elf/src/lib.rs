//! sediment-elf: what Sediment needs to know about ELF files.
//!
//! - [`symbols`]: a linked executable or shared object: build-id, architecture, `PT_LOAD`
//!   segments (to turn a file offset from a perf MMAP record into a link-time address) and the
//!   function symbols sorted by address, with a lookup from an address to its function.
//! - `objects`: the inventory of relocatable object files for the linker step.
//! - [`realign`]: copies of relocatable objects with chosen code sections' alignment raised.
//! - [`bb_addr_map`]: clang's basic-block address map (`-fbasic-block-sections=labels`), for
//!   block-level hot/cold splitting.
//!
//! Design constraints: **no file access**. Every function takes the file's bytes and the path
//! it came from (used only in error messages); callers read files (size-capped) themselves.
//! Parsing is done by the `object` crate, which bounds-checks every header and table against the
//! data, so hostile input yields an error, never a panic or an unbounded allocation.
//!
//! - [`types`]: structure layouts from DWARF (`gimli`), for the data-layout report.
//!
//! Function identity comes from the symbol table alone (name, plus the `STT_FILE` base name
//! for local symbols, or for a static renamed by LTO the compilation unit its DWARF names);
//! DWARF line tables and inlining are not read.
//!
//! References: System V ABI, *Object Files* chapter ("Symbol Table", "Program Header"), and the
//! GNU build-id note (`NT_GNU_BUILD_ID`, ld's `--build-id`).

pub mod bb_addr_map;
mod dwarf;
pub mod objects;
pub mod realign;
pub mod symbols;
pub mod types;

pub use bb_addr_map::{read_bb_addr_map, BbEntry, BbFunction};
pub use symbols::{aliases, compiled_aliases, AliasSet, Binary, Segment, Symbol};

/// True for the name of a part of a function as clang 16 writes it for
/// `-fbasic-block-sections=list=`: the cold part `f.cold` (in `.text.split.f`) and the extra
/// clusters `f.__part.N` (further `!!` lines, each in its own `.text.hot.f` section), all
/// `STT_NOTYPE` locals. Such a symbol in a code section is taken as a function, so that it can
/// be found and ordered.
pub(crate) fn is_split_part(name: &str) -> bool {
    let cluster = name.rsplit_once(".__part.").is_some_and(|(f, n)| {
        !f.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
    });
    cluster || (name.len() > ".cold".len() && name.ends_with(".cold"))
}

/// True when `data` is a readable ELF file with a non-empty section called `name` (e.g.
/// `.debug_line`: whether a tool that maps addresses to source lines can use the file).
pub fn has_section(data: &[u8], name: &str) -> bool {
    use object::{Object, ObjectSection};
    object::File::parse(data)
        .ok()
        .and_then(|f| f.section_by_name(name).map(|s| s.size() > 0))
        .unwrap_or(false)
}

/// How many of `addresses`, taken in their order, can stay where they are while the rest move:
/// the length of the longest non-decreasing subsequence (patience sorting, O(n log n)). Used
/// to count the functions of a list laid out in the list's order (equal addresses, aliases of
/// one function, count as in order).
pub fn longest_in_address_order(addresses: impl IntoIterator<Item = u64>) -> usize {
    let mut tails: Vec<u64> = Vec::new();
    for v in addresses {
        let at = tails.partition_point(|&t| t <= v);
        if at == tails.len() {
            tails.push(v);
        } else {
            tails[at] = v;
        }
    }
    tails.len()
}

/// Errors of this crate. Each names the file it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not a readable ELF file (or a table inside it is damaged).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What could not be read.
        message: String,
    },
    /// The file has neither `.symtab` nor `.dynsym` function symbols.
    #[error("{path}: no symbol table (stripped?)")]
    NoSymbols {
        /// The file.
        path: String,
    },
}

#[cfg(test)]
mod tests {
    // One function out of place costs one; aliases (equal addresses) stay in order; the
    // reverse of a list keeps one.
    #[test]
    fn longest_in_address_order_counts_what_stays() {
        assert_eq!(super::longest_in_address_order([10, 20, 5, 30, 40]), 4);
        assert_eq!(super::longest_in_address_order([10, 10, 20]), 3);
        assert_eq!(super::longest_in_address_order([40, 30, 20, 10]), 1);
        assert_eq!(super::longest_in_address_order([]), 0);
        assert_eq!(super::longest_in_address_order([3, 1, 2, 5, 4, 6]), 4);
    }

    // Clang's split parts are recognised; other dotted names (GCC clones) are not parts.
    #[test]
    fn split_part_names() {
        for name in ["f.cold", "f.__part.1", "g.x.__part.12"] {
            assert!(super::is_split_part(name), "{name}");
        }
        for name in [
            ".cold",
            ".__part.1",
            "f.__part.",
            "f.__part.x",
            "f.part.0",
            "f",
        ] {
            assert!(!super::is_split_part(name), "{name}");
        }
    }
}
