//! A valgrind run whose tool writes its trace to descriptor 3, streamed to the caller through
//! a pipe: lackey's text ([`crate::lackey`]) and Sediment's binary trace ([`crate::tracer`]).
//!
//! The trace is never stored: a `sh -c '... exec valgrind ... 3>&1 1>OUT 2>ERR'` wrapper points
//! descriptor 3 at our pipe while the program's own standard output and error go to files in a
//! private temporary directory. The wrapper sets plain shell variables, not exported ones: the
//! program sees Sediment's environment unchanged (a longer environment alone changes the
//! dynamic loader's instruction count).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};

use crate::{die_with_parent, stdin_for, Error};

/// A running traced program; dropping it before [`PipedRun::wait`] kills the run.
pub struct PipedRun {
    child: Option<Child>,
    binary: PathBuf,
    /// The tool's name, for messages.
    tool: &'static str,
    /// Holds the program's standard output and error; removed on drop.
    dir: tempfile::TempDir,
}

/// How a run ended.
#[derive(Debug)]
pub struct Finished {
    /// Exit status of valgrind (the program's, or valgrind's own on its errors).
    pub status: ExitStatus,
    /// The program's standard output.
    pub stdout: Vec<u8>,
    /// The last non-blank line of the program's (and valgrind's) standard error.
    pub stderr_tail: String,
    /// The program's whole standard error (with valgrind's own messages, which `-q` limits
    /// to errors), for comparing the outputs of two builds.
    pub stderr: Vec<u8>,
}

/// Starts `valgrind` with `valgrind_args` (the tool and its options, which must send the trace
/// to descriptor 3) on `binary` (a canonical path) with `args`, reading `stdin` (a file, or
/// nothing); returns the run and the pipe carrying the trace. `tool` names the tool in
/// messages.
pub(crate) fn spawn(
    valgrind: &OsStr,
    valgrind_args: &[OsString],
    tool: &'static str,
    binary: &Path,
    args: &[OsString],
    stdin: Option<&Path>,
) -> Result<(PipedRun, ChildStdout), Error> {
    let dir = tempfile::tempdir().map_err(|source| Error::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let mut sh = Command::new("sh");
    die_with_parent(&mut sh);
    let mut child = sh
        .arg("-c")
        .arg(r#"o=$1 e=$2; shift 2; exec "$@" 3>&1 1>"$o" 2>"$e""#)
        .arg("sh")
        .arg(dir.path().join("stdout"))
        .arg(dir.path().join("stderr"))
        .arg(valgrind)
        .args(valgrind_args)
        .arg(binary)
        .args(args)
        .stdin(stdin_for(stdin)?)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|source| Error::ToolMissing {
            tool: format!("sh -c 'exec valgrind --tool={tool} ...'"),
            binary: binary.to_path_buf(),
            source,
        })?;
    let pipe = child.stdout.take().ok_or_else(|| Error::Io {
        path: binary.to_path_buf(),
        source: std::io::Error::other("no pipe to valgrind"),
    })?;
    Ok((
        PipedRun {
            child: Some(child),
            binary: binary.to_path_buf(),
            tool,
            dir,
        },
        pipe,
    ))
}

impl PipedRun {
    /// The process id of the run (valgrind and the program are one process once the shell has
    /// exec'd), for [`crate::maps::exec_range`].
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Stops a run whose trace is no longer read (it would block on the full pipe).
    pub fn kill(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
        }
    }

    /// The last non-blank line of the run's standard error so far.
    pub fn stderr_tail(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr"))
            .unwrap_or_default()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string()
    }

    /// Waits for the run to end; the trace pipe must have been read to its end or dropped.
    pub fn wait(mut self) -> Result<Finished, Error> {
        let Some(mut child) = self.child.take() else {
            return Err(Error::Io {
                path: self.binary.clone(),
                source: std::io::Error::other(format!("{} run already waited for", self.tool)),
            });
        };
        let status = child.wait().map_err(|source| Error::Io {
            path: self.binary.clone(),
            source,
        })?;
        Ok(Finished {
            status,
            stdout: std::fs::read(self.dir.path().join("stdout")).unwrap_or_default(),
            stderr_tail: self.stderr_tail(),
            stderr: std::fs::read(self.dir.path().join("stderr")).unwrap_or_default(),
        })
    }
}

impl Drop for PipedRun {
    /// A run dropped before [`PipedRun::wait`] (an error on the reading side) is killed and
    /// reaped, so that no valgrind outlives the work it was started for.
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
