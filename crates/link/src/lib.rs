//! sediment-link: turn a linker-neutral [`FunctionOrder`] into what each linker reads.
//!
//! The pass has two halves, kept apart:
//! 1. [`resolve()`] matches every order entry ([`FuncKey`]: name, plus the `STT_FILE` base
//!    name for statics) against the function symbols found in the real object files
//!    ([`sediment_elf::objects`]). The inventory is the source of truth: an emitter only ever
//!    writes names and sections that exist in the objects, so a profile (which comes from a
//!    stranger) cannot invent linker-script text. Entries that match nothing become one
//!    counted warning; an order of which *nothing* matches is an error, since it was almost
//!    certainly recorded from another program.
//! 2. The emitters in [`mod@emit`] write one linker's input:
//!    - **lld** `--symbol-ordering-file`: symbol names, one per line. lld identifies a
//!      function by name only, so same-named statics of two files cannot be told apart; the
//!      name is listed once, at its hottest position, and lld places both there.
//!    - **gold** `--section-ordering-file`: the real input-section names read from the objects
//!      (`.text.startup.main`, `.text.hot.f`, `.text.f.constprop.0`). gold also matches names
//!      only, with the same limit for same-named statics.
//!    - **GNU ld (bfd)**: from binutils 2.43 on, a `--section-ordering-file` fragment; before
//!      that, a complete `-T` script: ld's own default script (`ld --verbose`, for the same
//!      PIE mode as the final link) with the ordered input sections inserted at the start of
//!      the `.text` output section. Patterns are file-qualified (`*/a.o(.text.helper)`), so
//!      same-named statics of two objects are placed separately, in exact order.
//!    - **mold** has no ordering option at all. The route offered is a pre-link: an `ld -r`
//!      script that concatenates the ordered sections into the `.text` section of one
//!      relocatable object, which mold then links as it is.
//!
//! 3. With LTO, the functions in bitcode exist only after the code generation the linker runs.
//!    [`resolve_lto`] keeps the entries found in no object in their place, the emitters write
//!    them by name (lld) or as the section names LTO gives them (gold, GNU ld:
//!    [`emit::lto_sections`]), and [`verify`] checks the linked output afterwards: how many of
//!    the order's functions are there, and how many in the intended relative order.
//!    [`held()`] measures the same on any linked output for `sediment verify`: the missing
//!    entries and their weight, the distance from the intended order, the renames recognised.
//!
//! 4. [`cmdline`] reads the linker's own command line, as a compiler driver passes it (the
//!    linker shims of `sediment wrappers`): the output, the inputs, whether the build already
//!    orders or scripts the link, LTO plugins, and the option that makes each linker read the
//!    emitted file; [`response`] reads and writes the response files (`@FILE`) such a command
//!    line may hold; [`specs`] writes the GCC specs file that brings links which drop `-B`
//!    (libtool's) to the linker shims.
//!
//! 5. [`call_graph`] writes a profile's call edges as lld's `--call-graph-ordering-file`, for
//!    lld's own C3 (`sediment export --format lld-call-graph`).
//!
//! 6. [`target`] names the linker a cross link needs: the GNU emulation on the command line
//!    (`-m aarch64linux`) and the target-prefixed GNU ld or gold that links for it, so that a
//!    cross compiler driver reaching the host's linker shims still gets its target's linker.
//!
//! Safety: anything that reaches a linker script or order file must match a conservative
//! character set ([`safe`]); anything else is skipped with one counted warning. Outputs are
//! deterministic: they follow the order file, duplicates are dropped keeping the first (the
//! hottest) occurrence, and the several objects a key can match are taken in inventory order
//! (the order of the object files on the command line).
//!
//! This crate does no I/O: the caller reads the files, runs `ld --verbose` when a bfd script
//! is wanted, writes the result, and reads the linked output's symbols for [`verify`].

pub mod call_graph;
pub mod cmdline;
pub mod emit;
pub mod held;
pub mod placement;
pub mod resolve;
pub mod response;
pub mod safe;
pub mod specs;
pub mod target;
pub mod verify;

pub use emit::{check_output, emit, flags, lto_sections, BfdFlavor, Emitted, PieMode};
pub use held::{held, Found, Held};
pub use resolve::{resolve, resolve_lto, Resolution, Step, SymRef};
pub use verify::{check_order, OrderCheck};

use sediment_profile::{FuncKey, FunctionOrder};
use std::fmt;
use std::str::FromStr;

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A linker name this crate does not know.
    #[error("unknown linker `{0}` (known: lld, gold, bfd, mold)")]
    UnknownLinker(String),
    /// Not a single order entry exists in the objects.
    #[error(
        "order/profile does not match these objects (0 of {total} functions found; recorded from another program?)"
    )]
    NothingMatches {
        /// Number of entries in the order.
        total: usize,
    },
    /// Every matching entry had to be skipped (unsafe names, shared sections...). The message
    /// says why the first was, in which object, and how many others there were, so that it
    /// stands alone; `warnings` are the counted warnings met on the way, for the caller to
    /// print before it (they are not part of the one-line message).
    #[error("nothing left to order: all {matched} matching functions were skipped: {reason}")]
    NothingEmitted {
        /// Number of entries that matched the objects.
        matched: usize,
        /// Why the hottest entry was skipped, naming its object file, and how many others were.
        reason: String,
        /// The resolution's and the emitter's warnings.
        warnings: Vec<String>,
    },
    /// The `ld --verbose` output did not contain a usable default script.
    #[error("GNU ld default script: {0}")]
    DefaultScript(String),
    /// The mold pre-link route cannot take this input.
    #[error("mold: {0}")]
    Mold(String),
    /// A file given to `sediment link-flags` is not what `sediment link` writes for that linker
    /// (see [`emit::check_output`]).
    #[error("not written by `sediment link --linker {linker}`: {problem}")]
    NotLinkOutput {
        /// The linker the file was said to be for.
        linker: Linker,
        /// What does not match, with the offending text escaped.
        problem: String,
    },
    /// A directory a GCC specs file cannot name ([`specs::gcc_specs`]); the path is shown
    /// escaped, on one line.
    #[error("{0}: a GCC specs file cannot name a directory whose path holds a newline")]
    SpecsPath(String),
}

/// The linkers Sediment writes inputs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Linker {
    /// LLVM lld (`--symbol-ordering-file`).
    Lld,
    /// GNU gold (`--section-ordering-file`).
    Gold,
    /// GNU ld, the BFD linker (`-T` script, or `--section-ordering-file` from 2.43).
    Bfd,
    /// mold (no ordering option: pre-link with `ld -r -T`).
    Mold,
}

impl FromStr for Linker {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "lld" => Ok(Linker::Lld),
            "gold" => Ok(Linker::Gold),
            "bfd" => Ok(Linker::Bfd),
            "mold" => Ok(Linker::Mold),
            _ => Err(Error::UnknownLinker(s.to_string())),
        }
    }
}

impl fmt::Display for Linker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Linker::Lld => "lld",
            Linker::Gold => "gold",
            Linker::Bfd => "bfd",
            Linker::Mold => "mold",
        })
    }
}

/// Keys listed in a warning before "...".
pub const WARN_LIST_MAX: usize = 5;

/// `a, b, c (and 4 more)` with names shown escaped, so a hostile name cannot reach the
/// terminal raw.
pub(crate) fn list_some<'a>(items: impl IntoIterator<Item = &'a FuncKey>, total: usize) -> String {
    let shown: Vec<String> = items
        .into_iter()
        .take(WARN_LIST_MAX)
        .map(|k| match &k.file {
            Some(f) => format!(
                "{} ({})",
                sediment_profile::escape(&k.name),
                sediment_profile::escape(f)
            ),
            None => sediment_profile::escape(&k.name),
        })
        .collect();
    let more = total.saturating_sub(shown.len());
    if more > 0 {
        format!("{} (and {more} more)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Convenience for callers: resolve then emit.
pub fn link_input(
    linker: Linker,
    order: &FunctionOrder,
    objects: &[sediment_elf::objects::ObjectFile],
    bfd: &BfdFlavor,
) -> Result<Emitted, Error> {
    let res = resolve(order, objects)?;
    emit(linker, &res, objects, bfd)
}
