//! Which linker program a cross link needs: the emulation on the linker's command line, the
//! target it names, and the target-prefixed linker that links for it.
//!
//! A linker shim of `sediment wrappers` stands for one program (`ld`, `ld.bfd`, `ld.gold`,
//! `ld.lld`) and runs the one of that name found on `PATH` when the shims were written: the
//! host's. A cross compiler driver given `-B<shims>/` (`aarch64-linux-gnu-gcc -B...`) finds the
//! shim too, and would otherwise have run its own target's linker (gcc from its tool
//! directory, `/usr/aarch64-linux-gnu/bin/ld`; clang as `aarch64-linux-gnu-ld` on `PATH`); the
//! host's GNU ld refuses the link (`unrecognised emulation mode: aarch64linux`). The shim
//! cannot see the driver, but the driver tells the linker its target: gcc and clang pass the
//! GNU emulation (`-m aarch64linux`, `-m elf64_s390`) on every link. So:
//!
//! 1. [`emulation`] reads it from the command line (`-m EMU` or `-mEMU`, the last one wins, as
//!    in GNU ld);
//! 2. [`target_of`] names its target: the architecture, its byte order and the GNU target
//!    triples whose binutils link for it (Debian's cross toolchains are `<triple>-ld`,
//!    `<triple>-ld.bfd`, `<triple>-ld.gold`);
//! 3. [`linker_for`] decides: the host's own targets (same architecture and byte order as the
//!    machine Sediment runs on: `elf_x86_64` and `elf32_x86_64` on x86-64) and emulations not
//!    in the table keep the given linker, which reports what it cannot do itself; lld (and
//!    mold) keep it too, since one lld links every target it was built for; GNU ld and gold
//!    for another target become the target-prefixed program of the same flavour, the caller
//!    taking the first of [`Program::programs`] found on `PATH`;
//! 4. unless the given linker links that target itself: the host's GNU ld has emulations of
//!    other architectures built in (`elf_i386` on x86-64, for `gcc -m32`; `armelf_linux_eabi`
//!    on aarch64), and a multilib link must stay what it was, search path included. So for a
//!    foreign emulation the caller asks the given linker (`ld -V`, [`supported_emulations`])
//!    before looking for another.
//!
//! Turned down: asking the driver (`$COLLECT_GCC -print-prog-name=ld`). Only gcc sets
//! `COLLECT_GCC`, the answer costs a driver run on every link, and with the shims' `-B` among
//! the driver's options it can name the shim itself. Also turned down: asking the given linker
//! (`ld -V`) on every link: the host's own targets are known without running anything, so
//! only a link for another architecture costs that one run.
//!
//! Pure: the caller searches `PATH`, runs `ld -V` and passes the host's architecture and byte
//! order.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// What a GNU linker emulation links for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The emulation, as on the command line (`aarch64linux`).
    pub emulation: &'static str,
    /// The architecture, spelled as Rust's `std::env::consts::ARCH` (`aarch64`, `s390x`,
    /// `x86_64`, `x86`), so that it compares with the host's.
    pub arch: &'static str,
    /// True for a big-endian target (`s390x`, `aarch64_be`, `powerpc64`).
    pub big_endian: bool,
    /// GNU target triples of the binutils that link for it, most common first (Debian's cross
    /// toolchains, `gcc-<triple>` and `binutils-<triple>`).
    pub triples: &'static [&'static str],
}

/// The emulations of GNU ld's Linux targets that Debian builds cross toolchains for (binutils
/// `ld/configure.tgt`, and what gcc's `LINK_SPEC` passes for each target).
const TARGETS: &[Target] = &[
    t("elf_x86_64", "x86_64", false, &["x86_64-linux-gnu"]),
    t("elf32_x86_64", "x86_64", false, &["x86_64-linux-gnux32"]),
    t("elf_i386", "x86", false, &["i686-linux-gnu"]),
    t("aarch64linux", "aarch64", false, &["aarch64-linux-gnu"]),
    t("aarch64linuxb", "aarch64", true, &["aarch64_be-linux-gnu"]),
    t(
        "armelf_linux_eabi",
        "arm",
        false,
        &["arm-linux-gnueabihf", "arm-linux-gnueabi"],
    ),
    t("armelfb_linux_eabi", "arm", true, &["armeb-linux-gnueabi"]),
    t("elf64_s390", "s390x", true, &["s390x-linux-gnu"]),
    t("elf_s390", "s390", true, &["s390-linux-gnu"]),
    t("elf64lppc", "powerpc64", false, &["powerpc64le-linux-gnu"]),
    t("elf64ppc", "powerpc64", true, &["powerpc64-linux-gnu"]),
    t("elf32ppclinux", "powerpc", true, &["powerpc-linux-gnu"]),
    t("elf64lriscv", "riscv64", false, &["riscv64-linux-gnu"]),
    t("elf32lriscv", "riscv32", false, &["riscv32-linux-gnu"]),
    t("elf64ltsmip", "mips64", false, &["mips64el-linux-gnuabi64"]),
    t("elf64btsmip", "mips64", true, &["mips64-linux-gnuabi64"]),
    t("elf32ltsmip", "mips", false, &["mipsel-linux-gnu"]),
    t("elf32btsmip", "mips", true, &["mips-linux-gnu"]),
    t(
        "elf64loongarch",
        "loongarch64",
        false,
        &["loongarch64-linux-gnu"],
    ),
    t("elf64_sparc", "sparc64", true, &["sparc64-linux-gnu"]),
    t("m68kelf", "m68k", true, &["m68k-linux-gnu"]),
    t("shlelf_linux", "sh", false, &["sh4-linux-gnu"]),
    t("hppalinux", "hppa", true, &["hppa-linux-gnu"]),
    t("elf64alpha", "alpha", false, &["alpha-linux-gnu"]),
];

const fn t(
    emulation: &'static str,
    arch: &'static str,
    big_endian: bool,
    triples: &'static [&'static str],
) -> Target {
    Target {
        emulation,
        arch,
        big_endian,
        triples,
    }
}

/// The emulations a GNU linker lists in its `-V` output: the indented lines under
/// `Supported emulations:` (GNU ld 2.40 and gold 1.16 both print that heading, gold after its
/// `Supported targets:`).
pub fn supported_emulations(v_output: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in v_output.lines() {
        let word = line.trim();
        if word.ends_with(':') {
            inside = word == "Supported emulations:";
        } else if inside && line.starts_with(char::is_whitespace) && !word.is_empty() {
            out.push(word);
        } else {
            inside = false;
        }
    }
    out
}

/// The emulation the command line asks for: the value of the last `-m EMU` or `-mEMU` (GNU ld
/// and lld read `-m` so; lld's `-mllvm OPTION` is no emulation). `None` when there is none, or
/// it is not UTF-8.
pub fn emulation(args: &[OsString]) -> Option<&str> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let b = a.as_bytes();
        if b == b"-mllvm" {
            it.next();
        } else if b == b"-m" {
            found = it.next().map(|v| v.as_bytes());
        } else if b.len() > 2 && b.starts_with(b"-m") && !b.starts_with(b"-mllvm") {
            found = Some(&b[2..]);
        }
    }
    found.and_then(|v| std::str::from_utf8(v).ok())
}

/// The target of a GNU emulation, when it is one of the Linux targets known here.
pub fn target_of(emulation: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.emulation == emulation)
}

/// The flavour of a linker program, from its file name: `ld`, `ld.bfd`, `ld.gold`, with or
/// without a target prefix (`x86_64-linux-gnu-ld.gold` is `ld.gold`); `None` for anything
/// else (`ld.lld`, `lld`, `ld.mold`, `mold`), which links for every target it supports itself.
fn gnu_flavour(file_name: &str) -> Option<&'static str> {
    let base = file_name.rsplit('-').next().unwrap_or(file_name);
    ["ld", "ld.bfd", "ld.gold"].into_iter().find(|&f| f == base)
}

/// The linker a link runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// The linker the shim was given: the host's targets, lld and mold, a command line
    /// without an emulation, or one not in the table.
    Given,
    /// A link for another target: the first of `programs` on `PATH`.
    Cross {
        /// What the emulation links for.
        target: &'static Target,
        /// Program names to look for, in order (`aarch64-linux-gnu-ld.gold`).
        programs: Vec<String>,
    },
}

impl Program {
    /// The program names to look for on `PATH`, in order; empty for [`Program::Given`].
    pub fn programs(&self) -> &[String] {
        match self {
            Program::Given => &[],
            Program::Cross { programs, .. } => programs,
        }
    }
}

/// The linker that links `args` in place of the program called `given` (its file name), on a
/// host of architecture `host_arch` (`std::env::consts::ARCH`) and byte order `host_big_endian`.
pub fn linker_for(
    given: &str,
    args: &[OsString],
    host_arch: &str,
    host_big_endian: bool,
) -> Program {
    let Some(flavour) = gnu_flavour(given) else {
        return Program::Given;
    };
    let Some(target) = emulation(args).and_then(target_of) else {
        return Program::Given;
    };
    if target.arch == host_arch && target.big_endian == host_big_endian {
        return Program::Given;
    }
    Program::Cross {
        target,
        programs: target
            .triples
            .iter()
            .map(|triple| format!("{triple}-{flavour}"))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    // What gcc 12's cross drivers pass, separate or attached; the last one wins; lld's
    // `-mllvm` and its value are no emulation.
    #[test]
    fn emulation_from_the_command_line() {
        assert_eq!(
            emulation(&args(&["-plugin", "x.so", "-m", "aarch64linux", "-o", "a"])),
            Some("aarch64linux")
        );
        assert_eq!(emulation(&args(&["-melf64_s390"])), Some("elf64_s390"));
        assert_eq!(
            emulation(&args(&["-m", "elf_x86_64", "-m", "elf_i386"])),
            Some("elf_i386")
        );
        assert_eq!(
            emulation(&args(&["-mllvm", "-m", "-mllvm=-x", "-o", "a"])),
            None
        );
        assert_eq!(emulation(&args(&["-o", "a", "a.o", "-m"])), None);
        assert_eq!(emulation(&args(&["-Map", "a.map", "-M"])), None);
    }

    // A foreign target's GNU ld and gold become the target-prefixed programs of the same
    // flavour, whatever prefix the given one had.
    #[test]
    fn foreign_targets_take_prefixed_linkers() {
        let arm = linker_for("ld", &args(&["-m", "aarch64linux"]), "x86_64", false);
        assert_eq!(arm.programs(), ["aarch64-linux-gnu-ld"]);
        let z = linker_for(
            "x86_64-linux-gnu-ld.gold",
            &args(&["-m", "elf64_s390"]),
            "x86_64",
            false,
        );
        assert_eq!(z.programs(), ["s390x-linux-gnu-ld.gold"]);
        let Program::Cross { target, .. } = z else {
            panic!("{z:?}")
        };
        assert_eq!((target.arch, target.big_endian), ("s390x", true));
        let armhf = linker_for(
            "ld.bfd",
            &args(&["-m", "armelf_linux_eabi"]),
            "x86_64",
            false,
        );
        assert_eq!(
            armhf.programs(),
            ["arm-linux-gnueabihf-ld.bfd", "arm-linux-gnueabi-ld.bfd"]
        );
        // On an aarch64 host, x86-64 is the foreign one.
        let x86 = linker_for("ld", &args(&["-m", "elf_x86_64"]), "aarch64", false);
        assert_eq!(x86.programs(), ["x86_64-linux-gnu-ld"]);
    }

    // The host's own targets, lld, mold, an unknown emulation or none keep the given linker.
    #[test]
    fn given_linker_kept() {
        let native = args(&["-m", "elf_x86_64"]);
        assert_eq!(linker_for("ld", &native, "x86_64", false), Program::Given);
        let x32 = args(&["-m", "elf32_x86_64"]);
        assert_eq!(linker_for("ld.bfd", &x32, "x86_64", false), Program::Given);
        let arm = args(&["-m", "aarch64linux"]);
        for given in ["ld.lld", "lld", "ld.mold", "mold", "ld64.lld"] {
            assert_eq!(linker_for(given, &arm, "x86_64", false), Program::Given);
        }
        assert_eq!(
            linker_for("ld", &args(&["-m", "i386pep"]), "x86_64", false),
            Program::Given
        );
        assert_eq!(
            linker_for("ld", &args(&["-o", "a"]), "x86_64", false),
            Program::Given
        );
        // Byte order counts: a little-endian powerpc64 host does not link big-endian itself.
        let be = linker_for("ld", &args(&["-m", "elf64ppc"]), "powerpc64", false);
        assert_eq!(be.programs(), ["powerpc64-linux-gnu-ld"]);
        let le = linker_for("ld", &args(&["-m", "elf64lppc"]), "powerpc64", false);
        assert_eq!(le, Program::Given);
    }

    // GNU ld's and gold's `-V`: the emulations, not gold's BFD target names.
    #[test]
    fn emulations_from_dash_v() {
        let bfd = "GNU ld (GNU Binutils for Debian) 2.40\n  Supported emulations:\n   elf_x86_64\n   elf32_x86_64\n   elf_i386\n";
        assert_eq!(
            supported_emulations(bfd),
            ["elf_x86_64", "elf32_x86_64", "elf_i386"]
        );
        let gold = "GNU gold (GNU Binutils for Debian 2.40) 1.16\n  Supported targets:\n   elf64-x86-64\n   elf32-i386\n  Supported emulations:\n   elf_x86_64\n   elf_i386\n";
        assert_eq!(supported_emulations(gold), ["elf_x86_64", "elf_i386"]);
        assert!(supported_emulations("LLD 14.0.6\n").is_empty());
    }

    // Every emulation is listed once, with at least one triple.
    #[test]
    fn table_is_consistent() {
        for (i, t) in TARGETS.iter().enumerate() {
            assert!(!t.triples.is_empty(), "{}", t.emulation);
            assert!(
                TARGETS[..i].iter().all(|o| o.emulation != t.emulation),
                "{} twice",
                t.emulation
            );
        }
    }
}
