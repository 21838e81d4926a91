//! The linker a link through the shims runs: the shim's own, or, for a cross link, the
//! target-prefixed GNU ld or gold that the compiler driver would have run
//! ([`sediment_link::target`] reads the emulation and names the programs; this module looks
//! them up on `PATH`).
//!
//! A cross link (`aarch64-linux-gnu-gcc -B<shims>/`) reaches the shim `ld`, written for the
//! host's `/usr/bin/ld`; the driver passes `-m aarch64linux`, and this link runs
//! `aarch64-linux-gnu-ld` instead: the program Debian's `binutils-aarch64-linux-gnu` installs,
//! the same linker the driver finds in its tool directory (`/usr/aarch64-linux-gnu/bin/ld`).
//! Everything after (which linker it is, its default script and search path, the ordering
//! input) is then that linker's. A foreign emulation the given linker has itself (`elf_i386`
//! for `gcc -m32` on x86-64) keeps it: it is asked once (`ld -V`) before any other is looked for.

use sediment_link::target::{linker_for, supported_emulations, Program, Target};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The linker to run, and the line to print when the one the link needs was not found.
pub struct Chosen {
    /// The program to run.
    pub path: PathBuf,
    /// The target of a cross link, when the link is one.
    pub cross: Option<&'static Target>,
    /// Set when the link is for another target and none of its linkers is on `PATH`: the
    /// given linker runs (it may link for that target itself, or says why it cannot), after
    /// this line.
    pub missing: Option<String>,
}

/// The linker for a link of `args` (the command line with its response files expanded: a
/// driver given a response file, as CMake and Ninja write for long lines, hands the linker
/// one, with the emulation inside; [`super::link::expand_response_files`]) through the shim
/// standing for `real`: `real` itself, unless the link is for another target, `real` is GNU
/// ld or gold ([`sediment_link::target::linker_for`]) and does not list the target's
/// emulation in its `-V`; then the first of the target's programs on `PATH`.
pub fn linker(real: &Path, args: &[OsString]) -> Chosen {
    let given = Chosen {
        path: real.to_path_buf(),
        cross: None,
        missing: None,
    };
    let Some(name) = real.file_name().and_then(|n| n.to_str()) else {
        return given;
    };
    let host_big_endian = cfg!(target_endian = "big");
    let (target, programs) = match linker_for(name, args, std::env::consts::ARCH, host_big_endian) {
        Program::Given => return given,
        Program::Cross { target, programs } => (target, programs),
    };
    if links_itself(real, target.emulation) {
        return given;
    }
    match programs.iter().find_map(|p| on_path(p)) {
        Some(path) => Chosen {
            path,
            cross: Some(target),
            missing: None,
        },
        None => Chosen {
            missing: Some(format!(
                "a link for {} (-m {}) and no {} on PATH (Debian: binutils-{}); running {}",
                target.arch,
                target.emulation,
                programs.join(" or "),
                target.triples[0],
                real.display()
            )),
            ..given
        },
    }
}

/// Whether the linker `real` lists `emulation` among its own (`real -V`); a linker that cannot
/// be run lists none.
fn links_itself(real: &Path, emulation: &str) -> bool {
    std::process::Command::new(real)
        .arg("-V")
        .output()
        .is_ok_and(|o| {
            supported_emulations(&String::from_utf8_lossy(&o.stdout)).contains(&emulation)
        })
}

/// The first regular file named `name` in a directory of `$PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
