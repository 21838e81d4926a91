//! Every run of a program under valgrind, in one place: cachegrind, callgrind, lackey and
//! Sediment's own trace tool. Children die with Sediment; a binary's results can be cached.
//!
//! - [`tracer`]: Sediment's valgrind tool `sedtrace` (a binary instruction trace, tens of times
//!   faster than lackey's text), built from its C source on first use and cached, and a run of
//!   a program under it whose trace streams through a pipe.

pub mod tracer;

use std::path::PathBuf;

/// Errors of this crate. Every variant names the file or tool it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Sediment's valgrind tool could not be built (what is missing, in one line).
    #[error("{0}")]
    ToolBuild(String),
    /// Valgrind (or the shell wrapping it) could not be started.
    #[error("cannot run `{tool}` to measure {binary}: {source} (is valgrind installed?)")]
    ToolMissing {
        /// The command that failed to start.
        tool: String,
        /// The binary being run.
        binary: PathBuf,
        /// Why the spawn failed.
        source: std::io::Error,
    },
    /// A file or directory operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}
