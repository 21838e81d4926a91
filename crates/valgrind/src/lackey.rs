//! A valgrind lackey run whose instruction trace streams to the caller.
//!
//! Lackey writes its trace to descriptor 3 (`--log-fd=3`), which [`crate::piped`] streams to
//! the caller while the program's own output goes to private files. `--vgdb=no`: no gdbserver FIFOs in /tmp (they are named by PID only, so a stale one
//! left by another user's killed run makes valgrind refuse to start under a reused PID).

use std::ffi::OsString;
use std::path::Path;
use std::process::ChildStdout;

use crate::piped::{self, PipedRun};
use crate::Error;

pub use crate::piped::Finished;

/// A running lackey; dropping it before [`PipedRun::wait`] kills the run.
pub type Lackey = PipedRun;

/// Starts `valgrind --tool=lackey --trace-mem=yes` on `binary` (a canonical path) with `args`,
/// reading `stdin` (a file, or nothing); returns the run and the pipe carrying its trace.
pub fn spawn(
    valgrind: &OsString,
    binary: &Path,
    args: &[OsString],
    stdin: Option<&Path>,
) -> Result<(Lackey, ChildStdout), Error> {
    let valgrind_args: Vec<OsString> = [
        "--tool=lackey",
        "--trace-mem=yes",
        "-q",
        "--vgdb=no",
        "--log-fd=3",
    ]
    .iter()
    .map(Into::into)
    .collect();
    piped::spawn(valgrind, &valgrind_args, "lackey", binary, args, stdin)
}
