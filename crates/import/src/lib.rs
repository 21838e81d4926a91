//! sediment-import: turns a profiler's output into Sediment [`Profile`]s.
//!
//! One module per input format, each with a single entry function `read(...)` (the shape of
//! samply's `import::perf::convert`):
//! - [`perf`]: a `perf.data` file from `perf record -e cpu-clock -g`, read with the
//!   `linux-perf-data` crate (never by shelling out to `perf script`), sample addresses mapped
//!   through the recorded MMAP/MMAP2 records and the binaries' ELF symbol tables. LBR branch
//!   stacks (`-j any_call`) are decoded from the raw samples by the private `perf_branch`
//!   module, which that crate's parser skips.
//! - [`callgrind`]: a `callgrind.out` file (valgrind's text format); with instruction positions
//!   (`--dump-instr=yes`) and the binaries, attributed by address like perf.
//! - [`perf_script`]: `perf script` text (call graphs or `brstacksym`), when only text is shared.
//! - [`fdata`]: BOLT `.fdata` (LBR and `no_lbr` forms), read and written.
//! - [`llvm_unsymbolized`]: written only: callgrind's instruction and jump counts as
//!   `llvm-profgen`'s unsymbolized profile (range and branch counters by address), so clang's
//!   sample PGO (`-fprofile-sample-use`) can be trained in a VM without LBR.
//! - [`gprof`]: glibc `gmon.out` call arcs and histogram of a `-pg` build.
//! - [`gv`]: the historical Sediment `.gv` call graph (Graphviz DOT, a cluster per executable),
//!   read and written.
//! - [`gcc_callgraph`]: GCC `-fcallgraph-info` `.ci` files, a static call graph without counts.
//! - [`relocs`]: the same kind of static graph from the relocations of object files (any
//!   compiler), read by `sediment_elf::objects`.
//! - [`pprof`]: pprof `profile.proto` (Go, Parca, Pyroscope, Cloud Profiler), gzipped or raw,
//!   decoded with `prost`; one profile per mapped binary, inlined frames folded into their caller.
//! - [`dhat`]: DHAT's heap profile (JSON): per-byte access counts of heap blocks, which weigh a
//!   structure's members by use (not a call profile).
//! - [`report`]: the one report type every import returns ([`Imported`]: profiles, the main
//!   executable, counted warnings), and the warnings and main-executable rules shared by the
//!   callers of the readers above.
//! - [`bind`]: shared by importers that only know a function's name and a source-file *hint*
//!   (callgrind's `fl=`): rewrites keys to the canonical form using the binary's symbols.
//!
//! Design constraints:
//! - **No file access.** Importers take the input as bytes and get the bytes of the profiled
//!   binaries through a resolver the caller passes in ([`perf::BinaryResolver`]), so tests can
//!   point them at copies and the CLI alone decides what may be opened.
//! - **Hostile input.** A perf.data or callgrind.out may come from a stranger: no panics, no
//!   allocation sized by an unchecked length field, and every error names the file and the
//!   offset, line or structure that failed.
//! - **Deterministic.** The same inputs give the same profiles (canonical [`Profile`]s, and
//!   profile lists sorted by binary path).
//!
//! Non-goal: kernel and JIT code. Only user-space frames of ELF files on disk are attributed.
//!
//! [`Profile`]: sediment_profile::Profile

pub mod bind;
pub mod callgrind;
pub mod dhat;
pub mod fdata;
pub mod gcc_callgraph;
pub mod gprof;
pub mod gv;
pub mod llvm_unsymbolized;
pub mod perf;
mod perf_branch;
pub mod perf_script;
pub mod pprof;
pub mod relocs;
pub mod report;

pub use report::Imported;

/// Errors of every importer in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is not in the expected format at all (wrong magic, empty file...).
    #[error("{path}: {message}")]
    Format {
        /// The input file.
        path: String,
        /// What was expected.
        message: String,
    },
    /// A binary input is damaged at a known byte offset.
    #[error("{path}: offset {offset}: {message}")]
    Corrupt {
        /// The input file.
        path: String,
        /// Byte offset of the structure that failed.
        offset: u64,
        /// Which structure and what was wrong.
        message: String,
    },
    /// A text input is damaged on a known line.
    #[error("{path}: line {line}: {message}")]
    Syntax {
        /// The input file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What was wrong with it.
        message: String,
    },
    /// The binary on disk is not the one that was profiled.
    #[error("{binary}: build-id mismatch: the profile recorded {recorded}, the file has {found}")]
    BuildIdMismatch {
        /// The binary (as resolved).
        binary: String,
        /// Build-id stored in the profile data.
        recorded: String,
        /// Build-id of the file that was found.
        found: String,
    },
    /// The resolver could not provide a binary that the profile needs.
    #[error("{binary}: {message}")]
    Resolve {
        /// The binary.
        binary: String,
        /// Why it could not be read.
        message: String,
    },
    /// A name too long for the output format (a Graphviz string holds at most
    /// [`gv::MAX_STRING_LEN`] bytes).
    #[error("profile {index}: {what} `{name}` is {len} bytes written, longer than the {limit}-byte limit of the format")]
    NameTooLong {
        /// Which of the profiles written (0-based).
        index: usize,
        /// What the name is (`function name`, `binary`, ...).
        what: &'static str,
        /// The name, quoted and cut ([`sediment_profile::quote`]).
        name: String,
        /// Its length as written (escaped).
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A binary's ELF data could not be read.
    #[error(transparent)]
    Elf(#[from] sediment_elf::Error),
}
