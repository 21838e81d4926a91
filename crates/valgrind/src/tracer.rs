//! Sediment's own valgrind tool, `sedtrace`: built from its C source on first use, cached, and
//! named on valgrind's command line.
//!
//! The tool (`crates/valgrind/tool/sediment_trace.c`, format documented in
//! `sediment_sim::bintrace`) writes the instructions a program executes as 16-byte records of
//! runs of consecutive instructions instead of lackey's text line per instruction. It is an
//! ordinary external valgrind tool: one C file compiled and linked statically against the
//! core libraries a valgrind installation ships (`libcoregrind`, `libvex`, `libgcc-sup`, the
//! `pub_tool_*.h` headers; Debian's `valgrind` package has them), at valgrind's tool load
//! address `0x58000000`, with valgrind's own entry point (`_start` from `libcoregrind`).
//!
//! **Cache.** The executable lands in `$XDG_CACHE_HOME/sediment/valgrind-tool/KEY/` (or
//! `~/.cache/...`, or the temporary directory), KEY a hash of the C source, the output of
//! `valgrind --version` and the size of `libcoregrind`: a new source or another valgrind
//! builds a new tool, which takes about a second. It is built under a temporary name and
//! renamed, so concurrent first runs (threads or processes) do not see half a file.
//!
//! **Naming it to valgrind.** The launcher looks for a tool as `$VALGRIND_LIB/NAME-amd64-linux`
//! (or its compiled-in directory). Setting `VALGRIND_LIB` would do, but valgrind passes it on to
//! the program, and a longer environment alone changes the dynamic loader's instruction count,
//! so the counts would differ from lackey's and cachegrind's. Instead NAME is a relative path:
//! enough `../` to climb from any library directory to `/`, then the cache directory. The
//! launcher joins the strings; the core then finds no `vgpreload_NAME` library (lackey has none
//! either), so the program's environment is exactly what lackey's run gives it.
//!
//! **Running.** [`spawn`] starts `valgrind --tool=... --trace-fd=3 -q --vgdb=no BINARY ARGS`
//! the way [`crate::lackey`] starts lackey: `sh -c '... exec valgrind ... 3>&1 1>OUT 2>ERR'`
//! makes descriptor 3 our pipe, the program's own output goes to files in a private temporary
//! directory, the environment is Sediment's unchanged, and the child dies with Sediment.
//! Valgrind's own messages go to the standard error file. The trace is never stored.
//!
//! Non-goals: other platforms than amd64 Linux (the static libraries are per platform), and
//! 32-bit programs (valgrind would look for `NAME-x86-linux`).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command};

use crate::piped::{self, PipedRun};
use crate::Error;

/// The tool's C source, compiled on first use.
pub const TOOL_SOURCE: &str = include_str!("../tool/sediment_trace.c");

/// The tool's base name; valgrind appends `-amd64-linux`.
pub const TOOL_NAME: &str = "sedtrace";

/// Valgrind's platform suffix of tool executables on amd64 Linux.
const PLATFORM: &str = "amd64-linux";

/// Where valgrind installations put the static core libraries.
const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/valgrind",
    "/usr/lib64/valgrind",
    "/usr/lib/valgrind",
    "/usr/libexec/valgrind",
    "/usr/local/lib/valgrind",
    "/usr/local/libexec/valgrind",
];

/// Where they put the tool headers.
const INCLUDE_DIRS: &[&str] = &["/usr/include/valgrind", "/usr/local/include/valgrind"];

/// The static libraries a tool links against, in link order.
const LIBS: [&str; 3] = [
    "libcoregrind-amd64-linux.a",
    "libvex-amd64-linux.a",
    "libgcc-sup-amd64-linux.a",
];

/// A built `sedtrace` tool.
#[derive(Debug, Clone)]
pub struct Tool {
    exe: PathBuf,
}

impl Tool {
    /// The cached tool for `valgrind` (the launcher Sediment runs), built if missing.
    pub fn get(valgrind: &OsStr) -> Result<Self, Error> {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            return Err(Error::ToolBuild(
                "Sediment's valgrind tool is built for amd64 Linux only".into(),
            ));
        }
        let version = Command::new(valgrind)
            .arg("--version")
            .output()
            .map_err(|e| {
                Error::ToolBuild(format!(
                    "cannot run `{} --version`: {e}",
                    valgrind.to_string_lossy()
                ))
            })?;
        let lib_dir = find_dir(LIB_DIRS, LIBS[0]).ok_or_else(|| {
            Error::ToolBuild(format!(
                "valgrind's static library {} not found in {} (install Debian's `valgrind` \
                 package, or `valgrind-devel` elsewhere)",
                LIBS[0],
                LIB_DIRS.join(", ")
            ))
        })?;
        let include_dir = find_dir(INCLUDE_DIRS, "pub_tool_basics.h").ok_or_else(|| {
            Error::ToolBuild(format!(
                "valgrind's tool headers (pub_tool_basics.h) not found in {}",
                INCLUDE_DIRS.join(", ")
            ))
        })?;
        let core_size = std::fs::metadata(lib_dir.join(LIBS[0])).map_or(0, |m| m.len());
        let mut key = Vec::new();
        key.extend_from_slice(TOOL_SOURCE.as_bytes());
        key.push(0);
        key.extend_from_slice(&version.stdout);
        key.extend_from_slice(&core_size.to_le_bytes());
        let dir = cache_root().join(crate::fnv1a(&key));
        let exe = dir.join(format!("{TOOL_NAME}-{PLATFORM}"));
        if !exe.is_file() {
            // Threads of one process (binaries simulated in parallel) build once; processes
            // build under names of their own and the first rename wins.
            static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
            let _one = BUILD.lock().unwrap_or_else(|e| e.into_inner());
            if !exe.is_file() {
                build(&dir, &exe, &lib_dir, &include_dir)?;
            }
        }
        let exe = std::fs::canonicalize(&exe).map_err(|source| Error::Io {
            path: exe.clone(),
            source,
        })?;
        Ok(Self { exe })
    }

    /// The tool's executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Valgrind's arguments that run this tool writing its trace to descriptor `fd`: the
    /// `--tool=` path that reaches the cache from any library directory, and `--trace-fd`.
    pub fn args(&self, fd: u32) -> [OsString; 2] {
        let mut tool = OsString::from("--tool=");
        // Enough `..` to reach `/` from any library directory; `..` at `/` stays at `/`.
        tool.push("../".repeat(MAX_LIB_DEPTH));
        let stem = self.exe.with_file_name(TOOL_NAME);
        tool.push(stem.strip_prefix("/").unwrap_or(&stem));
        [tool, OsString::from(format!("--trace-fd={fd}"))]
    }
}

/// Directory levels of valgrind's library directory the `--tool=` path climbs.
const MAX_LIB_DEPTH: usize = 32;

fn find_dir(dirs: &[&str], file: &str) -> Option<PathBuf> {
    dirs.iter()
        .map(PathBuf::from)
        .find(|d| d.join(file).is_file())
}

/// `$XDG_CACHE_HOME/sediment/valgrind-tool`, `~/.cache/...`, or the temporary directory's.
fn cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("sediment").join("valgrind-tool")
}

/// Compiles and links the tool into `exe` (through a temporary name in `dir`).
fn build(dir: &Path, exe: &Path, lib_dir: &Path, include_dir: &Path) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let pid = std::process::id();
    let src = dir.join(format!("sediment_trace.{pid}.c"));
    let tmp = dir.join(format!("{TOOL_NAME}.{pid}.tmp"));
    std::fs::write(&src, TOOL_SOURCE).map_err(io(&src))?;
    let mut gcc = Command::new("gcc");
    gcc.args([
        "-O2",
        "-m64",
        "-fno-strict-aliasing",
        "-fno-builtin",
        "-fno-stack-protector",
        "-fno-pie",
        "-DVGA_amd64=1",
        "-DVGO_linux=1",
        "-DVGP_amd64_linux=1",
        "-DVGPV_amd64_linux_vanilla=1",
    ])
    .arg("-I")
    .arg(include_dir)
    // Valgrind's tool link: static, no C library or start files (the core brings its own),
    // at the tools' load address, no build-id note at the default address.
    .args([
        "-static",
        "-nodefaultlibs",
        "-nostartfiles",
        "-u",
        "_start",
        "-Wl,--build-id=none",
        "-Wl,-Ttext-segment=0x58000000",
        "-o",
    ])
    .arg(&tmp)
    .arg(&src)
    .args(LIBS.iter().map(|l| lib_dir.join(l)))
    .arg("-lgcc");
    let out = gcc.output();
    let _ = std::fs::remove_file(&src);
    let out = out.map_err(|e| {
        Error::ToolBuild(format!(
            "cannot run gcc ({e}): building Sediment's valgrind tool needs gcc"
        ))
    })?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let text = String::from_utf8_lossy(&out.stderr);
        let first = text.lines().find(|l| l.contains("error")).unwrap_or("");
        return Err(Error::ToolBuild(format!(
            "gcc could not build Sediment's valgrind tool ({}): {first}",
            out.status
        )));
    }
    std::fs::rename(&tmp, exe).map_err(io(exe))
}

/// A running sedtrace; dropping it before [`PipedRun::wait`] kills the run.
pub type Run = PipedRun;

pub use crate::piped::Finished;

/// Starts `tool` under `valgrind` on `binary` (a canonical path) with `args`, reading `stdin`
/// (a file, or nothing); returns the run and the pipe carrying its binary trace.
pub fn spawn(
    valgrind: &OsStr,
    tool: &Tool,
    binary: &Path,
    args: &[OsString],
    stdin: Option<&Path>,
) -> Result<(Run, ChildStdout), Error> {
    let mut valgrind_args: Vec<OsString> = tool.args(3).to_vec();
    valgrind_args.extend(["-q", "--vgdb=no"].map(OsString::from));
    piped::spawn(valgrind, &valgrind_args, TOOL_NAME, binary, args, stdin)
}
