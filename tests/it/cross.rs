//! One profile, every architecture: a program profiled on x86-64 (callgrind, through
//! `sediment record`), then cross-built for aarch64 and s390x (big-endian) with Debian's cross
//! compilers through the linker shims of `sediment wrappers` (`-B`), with GNU ld (the driver's
//! default, and `-fuse-ld=bfd`), gold and lld.
//! The shims must run the target's linker (`aarch64-linux-gnu-ld`, lld as it is), order the
//! link from the x86-64 profile with the x86-64-only function counted as not found, and the
//! programs must run under qemu-user with the native build's output. The order in each output
//! and each architecture's matched share are `sediment verify`'s (and `sediment match`'s share
//! agrees).

use crate::common::{record_callgrind, sediment, sediment_ok};
use sediment_elf::Binary;
use sediment_profile::FunctionOrder;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Twelve functions called in a pattern the default layout (definition order) scatters, and
/// one that only x86-64 builds have (`x86_mix`; elsewhere the same arithmetic inline). `noipa`
/// keeps every function whole and unrenamed on every architecture (no clones, no inlining),
/// so the names the x86-64 profile holds are the ones the other builds define.
const PROG: &str = r#"
#include <stdio.h>
#define F(n, k) __attribute__((noipa)) unsigned f##n(unsigned x) { return x * k + n; }
F(0, 3) F(1, 5) F(2, 7) F(3, 11) F(4, 13) F(5, 17) F(6, 19) F(7, 23) F(8, 29) F(9, 31)
F(10, 37) F(11, 41)
#ifdef __x86_64__
__attribute__((noipa)) unsigned x86_mix(unsigned x) { return (x ^ 0x9e3779b9u) >> 1; }
#else
#define x86_mix(x) (((x) ^ 0x9e3779b9u) >> 1)
#endif
int main(int argc, char **argv) {
    (void)argv;
    unsigned s = (unsigned)argc;
    for (unsigned i = 0; i < 2000; i++) {
        s = f11(s) + f3(i) + x86_mix(s);
        if (i % 3 == 0) s += f7(s) + f0(i);
        if (i % 7 == 0) s += f9(s);
    }
    if (argc > 5) s += f1(s) + f2(s) + f4(s) + f5(s) + f6(s) + f8(s) + f10(s);
    printf("%u\n", s);
    return 0;
}
"#;

/// The program's own functions (the profile also names the C runtime's).
const OWN: [&str; 14] = [
    "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "x86_mix", "main",
];

/// The cross targets: architecture (Debian's triple prefix and qemu's name).
const ARCHES: [&str; 2] = ["aarch64", "s390x"];

/// The linkers a build asks for: `ld` is the driver's default (no `-fuse-ld`), the others by
/// `-fuse-ld=` (the shims `ld`, `ld.bfd`, `ld.gold`, `ld.lld`).
const LINKERS: [&str; 4] = ["ld", "bfd", "gold", "lld"];

/// The driver option that picks `linker` of [`LINKERS`].
fn fuse_ld(linker: &str) -> Vec<String> {
    match linker {
        "ld" => Vec::new(),
        _ => vec![format!("-fuse-ld={linker}")],
    }
}

/// The project: the program, its native build and output, the x86-64 profile in `prof/`, the
/// order `sediment order` computes from it, and the shims.
struct Project {
    dir: tempfile::TempDir,
    /// The native build's standard output.
    expected: String,
    /// The order's entries that are the program's own functions, hottest first.
    order: Vec<String>,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("prog.c"), PROG).unwrap();
        std::fs::create_dir(p.join("prof")).unwrap();
        ok(Command::new("gcc").current_dir(p).args([
            "-O2",
            "-ffunction-sections",
            "-o",
            "app",
            "prog.c",
        ]));
        let expected = ok(Command::new(p.join("app")).current_dir(p));
        let profile = record_callgrind(p, "prof/app.sprof", "./app");
        assert_eq!(profile.meta.arch.as_deref(), Some("x86_64"), "premise");
        sediment_ok(p, &["order", "-p", "prof/app.sprof", "-o", "app.order"]);
        let order =
            FunctionOrder::from_text(&std::fs::read_to_string(p.join("app.order")).unwrap())
                .unwrap()
                .functions
                .into_iter()
                .map(|k| k.name)
                .filter(|n| OWN.contains(&n.as_str()))
                .collect::<Vec<_>>();
        assert!(
            order.iter().any(|n| n == "x86_mix") && order.len() >= 6,
            "premise: the profile holds x86_mix and the hot functions: {order:?}"
        );
        Project {
            dir,
            expected,
            order,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes the shims into `name` with `prof/` baked in, the `ld.lld` among them standing
    /// for `lld` (a program on PATH through a directory of its own); returns the `-B` flag.
    fn wrappers(&self, name: &str, lld: &str) -> String {
        let bin = self.path().join(format!("{name}.lld"));
        std::fs::create_dir_all(&bin).unwrap();
        let link = bin.join("ld.lld");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(which(lld).unwrap(), &link).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new(crate::common::sediment_bin())
            .current_dir(self.path())
            .env("PATH", path)
            .args(["wrappers", "--prof-dir", "prof", name])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

/// Runs `cmd`, asserts success, returns its standard output.
fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `name` on PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The lld that links for `arch`: `ld.lld`, else a newer one (lld links s390x from LLVM 18 on).
/// Told by `-m EMULATION` without inputs: "no input files" means the emulation is known.
fn lld_for(emulation: &str) -> Option<&'static str> {
    ["ld.lld", "ld.lld-19"].into_iter().find(|lld| {
        Command::new(lld)
            .args(["-m", emulation])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stderr).contains("no input files"))
    })
}

fn emulation(arch: &str) -> &'static str {
    match arch {
        "aarch64" => "aarch64linux",
        "s390x" => "elf64_s390",
        _ => unreachable!(),
    }
}

/// `sediment verify BINARY -p prof/app.sprof --min-found 0.8 --json`: whether it passes (its
/// exit status), and its report of the binary.
fn verify(p: &Project, binary: &Path) -> (bool, serde_json::Value) {
    let out = sediment(
        p.path(),
        &[
            "verify",
            binary.to_str().unwrap(),
            "-p",
            "prof/app.sprof",
            "--min-found",
            "0.8",
            "--json",
        ],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify --json: {e}: {}", stderr(&out)));
    (out.status.success(), json["binaries"][0].clone())
}

/// The architecture of the linked `binary`, as the ELF reader names it.
fn arch_of(binary: &Path) -> String {
    Binary::parse("bin", &std::fs::read(binary).unwrap())
        .unwrap()
        .arch
}

/// `sediment match`'s matched share of the profile on `binary`, and the target's architecture.
fn matched_share(p: &Project, binary: &Path) -> (f64, String) {
    let out = sediment_ok(
        p.path(),
        &[
            "match",
            "-p",
            "prof/app.sprof",
            "--binary",
            binary.to_str().unwrap(),
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["matched_share"].as_f64().unwrap(),
        v["target"]["arch"].as_str().unwrap().to_string(),
    )
}

// The x86-64 profile orders the aarch64 and s390x builds with GNU ld, gold and lld through the
// shims: the shim runs the target's linker, orders every function the target has (all of the
// program's own but x86_mix, counted in one warning line), the output's symbols (read from a
// big-endian ELF for s390x) follow the order, and the program prints what the native one does
// under qemu-user. A build without the shims (the premise) is not in order.
#[test]
fn one_x86_64_profile_orders_aarch64_and_s390x_links() {
    require!(
        "gcc",
        "valgrind",
        "aarch64-linux-gnu-gcc",
        "s390x-linux-gnu-gcc",
        "qemu-aarch64",
        "qemu-s390x",
        "ld.lld"
    );
    let p = Project::new();
    let hot: Vec<String> = p
        .order
        .iter()
        .filter(|n| *n != "x86_mix")
        .cloned()
        .collect();
    let mut report = Vec::new();
    for arch in ARCHES {
        let Some(lld) = lld_for(emulation(arch)) else {
            // Debian 12's lld 14 does not link s390x; scripts/setup installs lld-19.
            require!("ld.lld-19");
            panic!("no lld links {arch}");
        };
        let b = p.wrappers(&format!("shims-{arch}"), lld);
        let cc = format!("{arch}-linux-gnu-gcc");
        let sysroot = format!("/usr/{arch}-linux-gnu");
        // Premise: the default layout does not follow the order.
        ok(Command::new(&cc).current_dir(p.path()).args([
            "-O2",
            "-ffunction-sections",
            "-o",
            "plain",
            "prog.c",
        ]));
        let (passes, v) = verify(&p, &p.path().join("plain"));
        assert!(
            !passes && v["in_order"].as_u64() < v["found"].as_u64(),
            "{arch}: premise: the default layout is out of order: {v}"
        );
        for linker in LINKERS {
            let out_dir = p.path().join(format!("{arch}-{linker}"));
            std::fs::create_dir(&out_dir).unwrap();
            let app = out_dir.join("app");
            let out = Command::new(&cc)
                .current_dir(p.path())
                .args(["-O2", "-ffunction-sections"])
                .args(fuse_ld(linker))
                .arg(&b)
                .arg("-o")
                .arg(&app)
                .arg("prog.c")
                .output()
                .unwrap();
            let err = stderr(&out);
            assert!(out.status.success(), "{arch} {linker}: {err}");
            let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("sediment")).collect();
            let summary = lines
                .iter()
                .find(|l| l.contains(": ordered "))
                .unwrap_or_else(|| panic!("{arch} {linker}: no summary line: {err}"));
            let kind = if linker == "ld" { "bfd" } else { linker };
            assert!(
                summary.contains(&format!("(c3, {kind}, ")),
                "{arch} {linker}: {summary}"
            );
            // The one function x86-64 alone has is counted, in one line, and named.
            let missing: Vec<&&str> = lines
                .iter()
                .filter(|l| l.contains("not found in the objects"))
                .collect();
            assert_eq!(missing.len(), 1, "{arch} {linker}: {err}");
            assert!(
                missing[0].contains(": warning: 1 of ") && missing[0].contains("x86_mix"),
                "{arch} {linker}: {}",
                missing[0]
            );
            // The rest is in the output, in order (`sediment verify`, reading this
            // architecture's ELF, big-endian for s390x); x86_mix is the one missing entry.
            assert_eq!(arch_of(&app), arch);
            let (passes, v) = verify(&p, &app);
            assert!(passes, "{arch} {linker}: {v}");
            let n = hot.len() as u64;
            assert_eq!(
                (v["found"].as_u64(), v["in_order"].as_u64()),
                (Some(n), Some(n)),
                "{arch} {linker}: {hot:?}: {v}"
            );
            assert_eq!(v["missing"]["count"], 1, "{v}");
            assert_eq!(v["missing"]["first"][0]["name"], "x86_mix", "{v}");
            let found_share = v["found_share"].as_f64().unwrap();
            // Same output as the native build, under qemu-user.
            let ran = ok(Command::new(format!("qemu-{arch}"))
                .current_dir(p.path())
                .args(["-L", &sysroot])
                .arg(&app));
            assert_eq!(ran, p.expected, "{arch} {linker}: output under qemu");
            let (share, target_arch) = matched_share(&p, &app);
            assert_eq!(target_arch, arch);
            assert!(
                share > 0.0 && share < 1.0,
                "{arch} {linker}: x86_mix's weight is not matched: {share}"
            );
            assert!(
                (share - found_share).abs() < 1e-9,
                "{arch} {linker}: match {share}, verify {found_share}"
            );
            report.push(format!(
                "{arch} {linker}: {summary}; verify: {n} of {n} found in order, matched share {found_share:.4} (match: {share:.4})"
            ));
        }
    }
    // The measurements, for the journal (`cargo test --test it cross:: -- --nocapture`).
    for line in report {
        println!("cross: {line}");
    }
}

// Regression: `aarch64-linux-gnu-gcc -B<shims>/` reached the shim `ld`, which ran the host's
// /usr/bin/ld ("unrecognised emulation mode: aarch64linux"), so a cross build through the
// shims failed outright. Now the shim runs the target's linker: without a profile the output
// is byte-identical to a build without the shims, for each architecture, GNU linker and
// driver (gcc's cross driver, given its options directly or in a response file, and clang
// with `--target`).
#[test]
fn regress_cross_links_through_the_shims_run_the_targets_linker() {
    require!("aarch64-linux-gnu-gcc", "s390x-linux-gnu-gcc", "clang");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("prog.c"), PROG).unwrap();
    std::fs::write(p.join("flags.rsp"), "-O2\n-ffunction-sections\n").unwrap();
    let out = sediment_ok(p, &["wrappers", "shims"]);
    let b = String::from_utf8(out.stdout).unwrap().trim().to_string();
    for arch in ARCHES {
        let gcc = format!("{arch}-linux-gnu-gcc");
        let target = format!("--target={arch}-linux-gnu");
        // A driver given a response file hands the linker one (`@/tmp/ccXXXX`), with the
        // emulation inside.
        let builds = [
            (gcc.as_str(), vec![], "ld"),
            (&gcc, vec![], "bfd"),
            (&gcc, vec![], "gold"),
            (&gcc, vec!["@flags.rsp"], "ld"),
            ("clang", vec![target.as_str(), "-w"], "ld"),
        ];
        for (driver, flags, linker) in builds {
            let build = |name: &str, extra: &[&str]| {
                Command::new(driver)
                    .current_dir(p)
                    .args(&flags)
                    .args(["-O2", "-ffunction-sections"])
                    .args(fuse_ld(linker))
                    .args(extra)
                    .args(["-o", name, "prog.c"])
                    .output()
                    .unwrap()
            };
            let what = format!("{arch}, {driver} {flags:?}, {linker}");
            let shimmed = build("shimmed", &[&b]);
            assert!(shimmed.status.success(), "{what}: {}", stderr(&shimmed));
            assert!(stderr(&shimmed).is_empty(), "{what}: {}", stderr(&shimmed));
            let plain = build("plain", &[]);
            assert!(plain.status.success(), "{what}: {}", stderr(&plain));
            assert_eq!(
                std::fs::read(p.join("shimmed")).unwrap(),
                std::fs::read(p.join("plain")).unwrap(),
                "{what}: a link without a profile is untouched"
            );
        }
    }
}

// A link for a target whose linker is not installed runs the given linker, after one line
// naming the program it looked for and the package that has it.
#[test]
fn a_missing_cross_linker_is_named() {
    require!("ld");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(crate::common::sediment_bin())
        .current_dir(dir.path())
        .env("PATH", "/nonexistent")
        .env_remove("SEDIMENT_PROF_DIR")
        .env_remove("PROF_DIR")
        .args([
            "ld",
            "--real",
            "/usr/bin/ld",
            "--",
            "-m",
            "elf64alpha",
            "-o",
            "a",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("sediment")).collect();
    assert_eq!(
        ours,
        ["sediment ld: a link for alpha (-m elf64alpha) and no alpha-linux-gnu-ld on PATH (Debian: binutils-alpha-linux-gnu); running /usr/bin/ld"],
        "{err}"
    );
    assert!(
        err.contains("elf64alpha"),
        "the linker's own message follows: {err}"
    );
}

// A foreign emulation the host's linker has itself (`elf_i386` on x86-64, for `gcc -m32`)
// keeps the host's linker, silently: a multilib link stays what it was.
#[test]
fn a_multilib_link_keeps_the_hosts_linker() {
    require!("gcc", "ld");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("f.c"), "int f(void) { return 42; }\n").unwrap();
    ok(Command::new("gcc")
        .current_dir(p)
        .args(["-m32", "-c", "f.c", "-o", "f.o"]));
    let out = Command::new(crate::common::sediment_bin())
        .current_dir(p)
        .env_remove("SEDIMENT_PROF_DIR")
        .env_remove("PROF_DIR")
        .args(["ld", "--real", "/usr/bin/ld", "--"])
        .args(["-m", "elf_i386", "-e", "f", "-o", "f", "f.o"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    let b = Binary::parse("f", &std::fs::read(p.join("f")).unwrap()).unwrap();
    assert_eq!(b.arch, "x86");
}
