//! The package-build link step end to end: `sediment wrappers` shims found through `-B` by the
//! real gcc, driven by real make, CMake (with `integrations/cmake/Sediment.cmake`), Meson and
//! rpmbuild (with `integrations/rpm/macros.sediment`). One program is built twice under two
//! names; the profile directory holds a profile for `alpha` only. `alpha` must come out with its
//! profiled functions together in the order `sediment order` computes; `beta` (no profile)
//! must be byte-identical to a build without the wrappers: the safe default.
//!
//! LTO builds (clang full and thin LTO with lld and gold, gcc's with gold and GNU ld, mixed
//! with ordinary objects and archives, through CMake and the RPM macros) must come out ordered
//! too, with the output checked after the link; a GCC LTO link without -ffunction-sections at
//! link time links unchanged with one line, and a profile of another program fails the link
//! and leaves no output.

use crate::common::{fails_one_line, have_tool, sediment_bin, sediment_ok};
use sediment_elf::Binary;
use sediment_profile::{FuncKey, FunctionOrder, Meta, ProfileBuilder};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Eight functions in definition order; the profile makes f6, f2 and f5 hot, which the default
/// layout (definition order) scatters.
pub(crate) const PROG: &str = r#"
#include <stdio.h>
#define F(n, k) __attribute__((noinline)) unsigned f##n(unsigned x) { return x * k + n; }
F(0, 3) F(1, 5) F(2, 7) F(3, 11) F(4, 13) F(5, 17) F(6, 19) F(7, 23)
int main(int argc, char **argv) {
    (void)argv;
    unsigned s = (unsigned)argc;
    for (unsigned i = 0; i < 100; i++) s = f6(s) + f2(s) + f5(i);
    if (argc > 5) s += f0(s) + f1(s) + f3(s) + f4(s) + f7(s);
    printf("%u\n", s);
    return 0;
}
"#;

pub(crate) const FUNCS: [&str; 9] = ["f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "main"];

/// A project directory with the program, a profile directory holding `alpha.sprof`, and the
/// order `sediment order` computes from it (the names of the program's own functions).
pub(crate) struct Project {
    dir: tempfile::TempDir,
    expected: Vec<String>,
}

impl Project {
    pub(crate) fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prog.c"), PROG).unwrap();
        std::fs::create_dir(dir.path().join("prof")).unwrap();
        let mut pb = ProfileBuilder::new(Meta {
            binary: "alpha".into(),
            source: "test".into(),
            ..Meta::default()
        });
        let g = FuncKey::global;
        pb.add_self(&g("f6"), 1000);
        pb.add_self(&g("f2"), 600);
        pb.add_self(&g("f5"), 300);
        pb.add_self(&g("main"), 50);
        pb.add_call(&g("main"), &g("f6"), 100);
        pb.add_call(&g("main"), &g("f2"), 100);
        pb.add_call(&g("main"), &g("f5"), 100);
        std::fs::write(dir.path().join("prof/alpha.sprof"), pb.build().to_text()).unwrap();
        sediment_ok(
            dir.path(),
            &["order", "-p", "prof/alpha.sprof", "-o", "alpha.order"],
        );
        let order = FunctionOrder::from_text(
            &std::fs::read_to_string(dir.path().join("alpha.order")).unwrap(),
        )
        .unwrap();
        let expected: Vec<String> = order
            .functions
            .iter()
            .map(|k| k.name.clone())
            .filter(|n| FUNCS.contains(&n.as_str()))
            .collect();
        assert_eq!(expected.len(), 4, "premise: four profiled functions");
        Project { dir, expected }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes the shims with the profile directory baked in; returns the `-B` flag.
    pub(crate) fn wrappers(&self) -> String {
        let out = sediment_ok(
            self.path(),
            &["wrappers", "--prof-dir", "prof", "sediment-ld"],
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// True when the files `a` and `b` of the project hold the same bytes (a link the
    /// wrappers left alone against the same link without them).
    pub(crate) fn same_bytes(&self, a: &str, b: &str) -> bool {
        let read = |n: &str| std::fs::read(self.path().join(n)).unwrap();
        read(a) == read(b)
    }

    /// True when the program's profiled functions are laid out together, in the expected order.
    pub(crate) fn is_ordered(&self, binary: &Path) -> bool {
        let b = Binary::parse("bin", &std::fs::read(binary).unwrap()).unwrap();
        let mut placed: Vec<(u64, &str)> = b
            .functions
            .iter()
            .filter(|s| FUNCS.contains(&s.key.name.as_str()))
            .map(|s| (s.address, s.key.name.as_str()))
            .collect();
        placed.sort_unstable();
        let names: Vec<&str> = placed.iter().map(|&(_, n)| n).collect();
        names
            .windows(self.expected.len())
            .any(|w| w.iter().zip(&self.expected).all(|(a, b)| a == b))
    }
}

/// PATH with the directory of the `sediment` under test first (CMake and rpm look it up).
pub(crate) fn path_with_sediment() -> String {
    let bin_dir = sediment_bin().parent().unwrap().to_path_buf();
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

pub(crate) fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?} failed:\n{}\n{}",
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn make_orders_each_program_from_its_own_profile_with_every_linker() {
    if !have_tool("make") || !have_tool("gcc") {
        return;
    }
    let p = Project::new();
    std::fs::write(
        p.path().join("Makefile"),
        "all: alpha beta\nalpha beta: prog.c\n\t$(CC) $(CFLAGS) -o $@ prog.c $(LDFLAGS)\n",
    )
    .unwrap();
    let b = p.wrappers();
    for linker in ["lld", "gold", "bfd"] {
        let _ = std::fs::remove_file(p.path().join("alpha"));
        let _ = std::fs::remove_file(p.path().join("beta"));
        let cflags = format!("CFLAGS=-O1 -ffunction-sections -fuse-ld={linker}");
        run(Command::new("make").current_dir(p.path()).args([
            "-s",
            &cflags,
            &format!("LDFLAGS={b}"),
        ]));
        assert!(
            p.is_ordered(&p.path().join("alpha")),
            "{linker}: alpha ordered"
        );
        assert!(!p.is_ordered(&p.path().join("beta")), "{linker}: premise");
        run(Command::new("gcc")
            .current_dir(p.path())
            .args(["-O1", "-ffunction-sections"])
            .arg(format!("-fuse-ld={linker}"))
            .args(["-o", "beta.plain", "prog.c"]));
        assert!(
            p.same_bytes("beta", "beta.plain"),
            "{linker}: a link without a profile is untouched"
        );
    }
}

#[test]
fn cmake_module_orders_through_the_wrappers() {
    if !have_tool("cmake") {
        return;
    }
    let p = Project::new();
    std::fs::write(
        p.path().join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(p C)\ninclude(Sediment)\nadd_executable(alpha prog.c)\nadd_executable(beta prog.c)\n",
    )
    .unwrap();
    let module_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/cmake");
    let prof = p.path().join("prof");
    run(Command::new("cmake")
        .current_dir(p.path())
        .env("PATH", path_with_sediment())
        .args(["-S", ".", "-B", "build", "-DCMAKE_C_FLAGS=-O1"])
        .arg(format!("-DCMAKE_MODULE_PATH={}", module_dir.display()))
        .arg(format!("-DSEDIMENT_PROF_DIR={}", prof.display()))
        .arg("-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld"));
    run(Command::new("cmake")
        .current_dir(p.path())
        .args(["--build", "build"]));
    assert!(p.is_ordered(&p.path().join("build/alpha")));
    assert!(!p.is_ordered(&p.path().join("build/beta")));
}

// CMake's LTO (INTERPROCEDURAL_OPTIMIZATION: gcc -flto=auto -fno-fat-lto-objects, archives
// made with gcc-ar) through the module, which passes -ffunction-sections at link time too.
#[test]
fn cmake_module_orders_an_lto_build() {
    if !have_tool("cmake") {
        return;
    }
    let p = Project::new();
    std::fs::write(
        p.path().join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(p C)\ninclude(Sediment)\nadd_executable(alpha prog.c)\nadd_executable(beta prog.c)\n",
    )
    .unwrap();
    let module_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/cmake");
    let prof = p.path().join("prof");
    run(Command::new("cmake")
        .current_dir(p.path())
        .env("PATH", path_with_sediment())
        .args(["-S", ".", "-B", "build", "-DCMAKE_C_COMPILER=gcc"])
        .args([
            "-DCMAKE_C_FLAGS=-O2",
            "-DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON",
        ])
        .arg(format!("-DCMAKE_MODULE_PATH={}", module_dir.display()))
        .arg(format!("-DSEDIMENT_PROF_DIR={}", prof.display()))
        .arg("-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=gold"));
    run(Command::new("cmake")
        .current_dir(p.path())
        .args(["--build", "build"]));
    assert!(p.is_ordered(&p.path().join("build/alpha")));
    assert!(!p.is_ordered(&p.path().join("build/beta")));
}

#[test]
fn meson_link_args_order_through_the_wrappers() {
    if !have_tool("meson") || !have_tool("ninja") {
        return;
    }
    let p = Project::new();
    std::fs::write(
        p.path().join("meson.build"),
        "project('p', 'c')\nexecutable('alpha', 'prog.c')\nexecutable('beta', 'prog.c')\n",
    )
    .unwrap();
    let b = p.wrappers();
    run(Command::new("meson")
        .current_dir(p.path())
        .args(["setup", "build", "--buildtype=plain"])
        .arg("-Dc_args=['-O1','-ffunction-sections']")
        .arg(format!("-Dc_link_args=['-fuse-ld=gold','{b}']")));
    run(Command::new("ninja")
        .current_dir(p.path())
        .args(["-C", "build"]));
    assert!(p.is_ordered(&p.path().join("build/alpha")));
    assert!(!p.is_ordered(&p.path().join("build/beta")));
}

#[test]
fn rpm_macros_order_through_the_wrappers() {
    if !have_tool("rpmbuild") {
        return;
    }
    let p = Project::new();
    let top = p.path().join("rpm");
    let sources = top.join("SOURCES");
    std::fs::create_dir_all(&sources).unwrap();
    std::fs::copy(p.path().join("prog.c"), sources.join("prog.c")).unwrap();
    // The profiles are sources of the package (the macros' default profile directory is
    // %{_sourcedir}), as a spec's `SourceN: alpha.sprof` puts them.
    for name in ["alpha", "alpha_lto"] {
        std::fs::copy(
            p.path().join("prof/alpha.sprof"),
            sources.join(format!("{name}.sprof")),
        )
        .unwrap();
    }
    // alpha_lto: Fedora's LTO, compiled and linked in two steps, as a package's make does;
    // the macros' link flags carry the -ffunction-sections GCC's LTO needs at link time.
    let spec = top.join("t.spec");
    std::fs::write(
        &spec,
        "Name: sedtest\nVersion: 1\nRelease: 1\nSummary: t\nLicense: MIT\n%description\nt\n%build\n%sediment_setup\nfor p in alpha beta; do gcc -O1 %{sediment_cflags} -fuse-ld=bfd -o $p %{_sourcedir}/prog.c %{sediment_ldflags}; done\ngcc -O2 -flto=auto %{sediment_cflags} -c -o prog.o %{_sourcedir}/prog.c\ngcc -O2 -flto=auto -fuse-ld=bfd -o alpha_lto prog.o %{sediment_ldflags}\n",
    )
    .unwrap();
    let macros: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/rpm/macros.sediment");
    run(Command::new("rpmbuild")
        .current_dir(p.path())
        .env("PATH", path_with_sediment())
        .arg("--load")
        .arg(&macros)
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .args(["--nodeps", "-bc"])
        .arg(&spec));
    let build = top.join("BUILD");
    assert!(p.is_ordered(&build.join("alpha")));
    assert!(!p.is_ordered(&build.join("beta")));
    assert!(p.is_ordered(&build.join("alpha_lto")), "LTO build ordered");
}

#[test]
fn a_corrupt_profile_fails_the_link_with_one_line_naming_it() {
    if !have_tool("gcc") {
        return;
    }
    let p = Project::new();
    let b = p.wrappers();
    std::fs::write(
        p.path().join("prof/alpha.sprof"),
        "sediment-profile 1\nfn 0 x\n",
    )
    .unwrap();
    let out = Command::new("gcc")
        .current_dir(p.path())
        .args([
            "-O1",
            "-ffunction-sections",
            "-fuse-ld=lld",
            &b,
            "-o",
            "alpha",
            "prog.c",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("sediment:")).collect();
    assert_eq!(ours.len(), 1, "{err}");
    assert!(ours[0].contains("alpha.sprof"), "{err}");
    assert!(!p.path().join("alpha").exists(), "nothing linked");
}

/// Runs `sediment wrappers DIR` in `cwd` with `PATH` set to `path`.
fn wrappers_with_path(cwd: &Path, dir: &str, path: &str) -> std::process::Output {
    Command::new(sediment_bin())
        .args(["wrappers", dir])
        .current_dir(cwd)
        .env("PATH", path)
        .output()
        .unwrap()
}

// Regression: the shims were written one by one, so a directory in the way of `ld.gold` failed
// the run with `ld` and `ld.bfd` already written, and no linker on PATH still created DIR.
// Now they are written all or nothing, executable, and DIR only when there is something to
// write.
#[test]
fn wrappers_write_every_shim_or_none() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Stand-in linkers: the shims only name them.
    std::fs::create_dir(d.join("bin")).unwrap();
    for name in ["ld", "ld.bfd", "ld.gold"] {
        let path = d.join("bin").join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bin = d.join("bin").display().to_string();

    std::fs::create_dir_all(d.join("shims/ld.gold")).unwrap();
    let out = wrappers_with_path(d, "shims", &bin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("ld.gold"), "{err}");
    let left: Vec<_> = std::fs::read_dir(d.join("shims"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        ["ld.gold"],
        "nothing written beside the directory in the way"
    );

    let out = wrappers_with_path(d, "none", "/nonexistent");
    assert!(!out.status.success());
    assert!(!d.join("none").exists(), "no directory without a linker");

    std::fs::remove_dir(d.join("shims/ld.gold")).unwrap();
    let out = wrappers_with_path(d, "shims", &bin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["ld", "ld.bfd", "ld.gold"] {
        let meta = std::fs::metadata(d.join("shims").join(name)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o755, "{name}");
    }
    assert!(!d.join("shims/ld.lld").exists());
}

/// The lines of `out`'s standard error that Sediment wrote, asserting it failed.
fn failed_with(out: &std::process::Output) -> Vec<String> {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    err.lines()
        .filter(|l| l.starts_with("sediment"))
        .map(str::to_string)
        .collect()
}

// Regression: with an object missing from the command line, the link failed with
// "alpha.sprof: order/profile does not match these objects", blaming a good profile: the
// missing file was silently left out of the objects the profile was checked against. Now the
// one line names the missing input, and nothing is linked. (Through gcc the driver notices
// first; build systems that run `$(LD)` directly, or a driver that does not check, reach the
// shim with it.) With another object present the order applies and the real linker reports
// the missing one in its own words.
#[test]
fn regress_ld_names_a_missing_object_not_the_profile() {
    if !have_tool("gcc") || !have_tool("ld.lld") {
        return;
    }
    let p = Project::new();
    p.wrappers();
    run(Command::new("gcc").current_dir(p.path()).args([
        "-O1",
        "-ffunction-sections",
        "-c",
        "prog.c",
    ]));
    let shim = p.path().join("sediment-ld/ld.lld");
    let link = |inputs: &[&str]| {
        Command::new(&shim)
            .current_dir(p.path())
            .args(["-o", "alpha"])
            .args(inputs)
            .output()
            .unwrap()
    };

    let out = link(&["gone.o"]);
    let ours = failed_with(&out);
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(ours[0].starts_with("sediment: gone.o: "), "{ours:?}");
    assert!(ours[0].contains("alpha"), "{ours:?}");
    assert!(!p.path().join("alpha").exists(), "nothing linked");

    let out = link(&["prog.o", "gone.o"]);
    let ours = failed_with(&out);
    assert!(
        ours.iter().all(|l| !l.contains("does not match")),
        "{ours:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("ld.lld: error:") && l.contains("gone.o")),
        "{err}"
    );
}

// Regression: `wrappers --prof-dir FILE` accepted a regular file and baked it into the shims,
// so every link looked for FILE/<output>.sprof and linked unordered without a word. Now it is
// refused in one line naming it, nothing written; a directory that does not exist yet is still
// fine (a package without profiles links unchanged). The same file given at link time through
// SEDIMENT_PROF_DIR fails the link the same way.
#[test]
fn regress_wrappers_refuse_a_prof_dir_that_is_a_file() {
    if !have_tool("ld") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("profiles"), "not a directory\n").unwrap();
    fails_one_line(
        d,
        &["wrappers", "--prof-dir", "profiles", "shims"],
        &["profiles: not a directory", "--prof-dir"],
    );
    assert!(!d.join("shims").exists(), "nothing written");

    sediment_ok(d, &["wrappers", "--prof-dir", "later", "shims"]);

    sediment_ok(d, &["wrappers", "plain"]);
    let out = Command::new(d.join("plain/ld"))
        .current_dir(d)
        .env("SEDIMENT_PROF_DIR", "profiles")
        .args(["-o", "alpha", "x.o"])
        .output()
        .unwrap();
    let ours = failed_with(&out);
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(ours[0].contains("profiles: not a directory"), "{ours:?}");
    assert!(ours[0].contains("SEDIMENT_PROF_DIR"), "{ours:?}");
    assert!(!d.join("alpha").exists(), "nothing linked");
}

// Regression: a directory named `alpha.sprof` where alpha's profile belongs made the wrappers
// link alpha unordered without a word, as if there were no profile. That is a broken profile
// directory, not a package without profiles: like a corrupt profile, the link fails with one
// line naming it, and nothing is linked. So does a symbolic link to nothing. Outputs without
// anything of their name in the directory still link unchanged.
#[test]
fn regress_a_directory_where_the_profile_belongs_fails_the_link() {
    if !have_tool("gcc") || !have_tool("ld.lld") {
        return;
    }
    let p = Project::new();
    let b = p.wrappers();
    let profile = p.path().join("prof/alpha.sprof");
    let link = |name: &str| {
        Command::new("gcc")
            .current_dir(p.path())
            .args(["-O1", "-ffunction-sections", "-fuse-ld=lld", &b, "-o"])
            .args([name, "prog.c"])
            .output()
            .unwrap()
    };
    std::fs::remove_file(&profile).unwrap();
    type Make = fn(&Path);
    let broken: [(&str, Make); 2] = [
        ("a directory", |p| std::fs::create_dir(p).unwrap()),
        ("a symbolic link to nothing", |p| {
            std::os::unix::fs::symlink("nothing", p).unwrap()
        }),
    ];
    for (what, make) in broken {
        make(&profile);
        let out = link("alpha");
        let ours = failed_with(&out);
        assert_eq!(ours.len(), 1, "{ours:?}");
        assert!(ours[0].contains("alpha.sprof: "), "{ours:?}");
        assert!(ours[0].contains(what), "{ours:?}");
        assert!(!p.path().join("alpha").exists(), "nothing linked");
        let out = link("beta");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_dir(&profile);
        let _ = std::fs::remove_file(&profile);
    }
}

/// The lines of `out`'s standard error that Sediment wrote, asserting it succeeded.
pub(crate) fn succeeded_with(out: &std::process::Output) -> Vec<String> {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    err.lines()
        .filter(|l| l.starts_with("sediment"))
        .map(str::to_string)
        .collect()
}

/// Runs `cc args` in the project directory (no assertion).
pub(crate) fn cc(p: &Project, cc: &str, args: &[&str]) -> std::process::Output {
    Command::new(cc)
        .current_dir(p.path())
        .args(args)
        .output()
        .unwrap()
}

/// `flags` split on spaces, then `rest`.
fn argv<'a>(flags: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    flags
        .split(' ')
        .filter(|f| !f.is_empty())
        .chain(rest.iter().copied())
        .collect()
}

/// The LTO builds distributions use (Debian `-flto=auto -ffat-lto-objects`, Fedora
/// `-flto=auto`, clang's full and thin LTO) with each linker that orders them.
const LTO_CASES: [(&str, &str, &str); 5] = [
    ("clang", "-flto", "lld"),
    ("clang", "-flto=thin", "lld"),
    ("clang", "-flto", "gold"),
    ("gcc", "-flto=auto -ffat-lto-objects", "gold"),
    ("gcc", "-flto=auto", "bfd"),
];

// Regression: with LTO the objects are LLVM bitcode or GCC LTO objects, whose functions only
// exist once the linker has run code generation; the wrappers found none of the profile's
// functions in them and failed the link ("order/profile does not match these objects"), so a
// distribution build with profiles broke. Now every linker orders the code LTO generates (lld
// by symbol name, gold and GNU ld by the section names GCC and LLVM give it), the summary line
// counts what the output shows, and a link without a profile is still untouched.
#[test]
fn regress_lto_links_are_ordered_with_every_linker() {
    if !have_tool("gcc") || !have_tool("clang") {
        return;
    }
    let p = Project::new();
    let b = p.wrappers();
    for (compiler, lto, linker) in LTO_CASES {
        let what = format!("{compiler} {lto} + {linker}");
        let fuse = format!("-fuse-ld={linker}");
        let flags = format!("-O2 {lto} -ffunction-sections {fuse}");
        let compile = cc(
            &p,
            compiler,
            &argv(&flags, &["-c", "prog.c", "-o", "prog.o"]),
        );
        assert!(compile.status.success(), "{what}: {compile:?}");
        for out in ["alpha", "beta"] {
            let _ = std::fs::remove_file(p.path().join(out));
        }
        let alpha = cc(&p, compiler, &argv(&flags, &[&b, "-o", "alpha", "prog.o"]));
        let ours = succeeded_with(&alpha);
        assert_eq!(ours.len(), 1, "{what}: {ours:?}");
        assert!(
            ours[0].starts_with(
                "sediment ld: alpha: ordered after LTO: 4 of 4 profiled functions found in order in the output (4 found; "
            ),
            "{what}: {ours:?}"
        );
        assert!(p.is_ordered(&p.path().join("alpha")), "{what}: ordered");

        let plain = cc(
            &p,
            compiler,
            &argv(&flags, &["-o", "alpha.plain", "prog.o"]),
        );
        assert!(plain.status.success(), "{what}: {plain:?}");
        assert!(
            !p.is_ordered(&p.path().join("alpha.plain")),
            "{what}: premise: LTO alone does not give the order"
        );
        let beta = cc(&p, compiler, &argv(&flags, &[&b, "-o", "beta", "prog.o"]));
        assert_eq!(succeeded_with(&beta), Vec::<String>::new(), "{what}");
        assert!(
            p.same_bytes("beta", "alpha.plain"),
            "{what}: an LTO link without a profile is untouched"
        );
    }
}

// GCC's LTO code generation takes -ffunction-sections from the link-time options only
// (lto-wrapper reads them from $COLLECT_GCC_OPTIONS); given at compile time alone it is
// dropped and every function lands in one `.text`, which no linker can reorder. Then gold and
// GNU ld link unchanged (byte-identical output) with one line saying why and what to add.
#[test]
fn gcc_lto_without_link_time_function_sections_links_unchanged_with_a_note() {
    if !have_tool("gcc") {
        return;
    }
    let p = Project::new();
    let b = p.wrappers();
    let compile = cc(
        &p,
        "gcc",
        &["-O2", "-flto=auto", "-ffunction-sections", "-c", "prog.c"],
    );
    assert!(compile.status.success(), "{compile:?}");
    for linker in ["gold", "bfd"] {
        let fuse = format!("-fuse-ld={linker}");
        let link = |extra: &[&str], out: &str| {
            let mut args = vec!["-O2", "-flto=auto", fuse.as_str()];
            args.extend_from_slice(extra);
            args.extend_from_slice(&["-o", out, "prog.o"]);
            cc(&p, "gcc", &args)
        };
        let ours = succeeded_with(&link(&[&b], "alpha"));
        assert_eq!(ours.len(), 1, "{linker}: {ours:?}");
        assert!(
            ours[0].starts_with("sediment ld: alpha: not ordered: GCC compiles its LTO input"),
            "{linker}: {ours:?}"
        );
        assert!(
            ours[0].contains("add -ffunction-sections to the link flags"),
            "{ours:?}"
        );
        assert!(succeeded_with(&link(&[], "alpha.plain")).is_empty());
        assert!(
            p.same_bytes("alpha", "alpha.plain"),
            "{linker}: linked unchanged"
        );
        // The same link with -ffunction-sections among the link flags is ordered.
        let ours = succeeded_with(&link(&[&b, "-ffunction-sections"], "alpha"));
        assert!(ours[0].contains("ordered after LTO: 4 of 4"), "{ours:?}");
        assert!(p.is_ordered(&p.path().join("alpha")), "{linker}");
    }
}

/// PROG split in two: `lto.c` (f0..f3 and main) and `plain.c` (f4..f7).
fn split_program(p: &Project) {
    let defs = "F(4, 13) F(5, 17) F(6, 19) F(7, 23)";
    assert!(PROG.contains(defs), "premise");
    let decls = "unsigned f4(unsigned), f5(unsigned), f6(unsigned), f7(unsigned);";
    std::fs::write(p.path().join("lto.c"), PROG.replace(defs, decls)).unwrap();
    let head = &PROG[..PROG.find("F(0, 3)").unwrap()];
    std::fs::write(p.path().join("plain.c"), format!("{head}{defs}\n")).unwrap();
}

// A link of ordinary objects and LTO input (here in a static archive, as gcc-ar and llvm-ar
// make them): the ordinary objects are checked and placed exactly, the LTO functions by name,
// and the profiled functions of both (f6 and f5 ordinary, f2 and main from bitcode) come out
// interleaved in the computed order.
#[test]
fn mixed_lto_and_ordinary_objects_are_ordered_together() {
    if !have_tool("gcc") || !have_tool("clang") || !have_tool("llvm-ar") || !have_tool("gcc-ar") {
        return;
    }
    let p = Project::new();
    split_program(&p);
    let b = p.wrappers();
    for (compiler, ar, linker) in [
        ("clang", "llvm-ar", "lld"),
        ("gcc", "gcc-ar", "gold"),
        ("gcc", "gcc-ar", "bfd"),
    ] {
        let fuse = format!("-fuse-ld={linker}");
        let ok = |out: std::process::Output| assert!(out.status.success(), "{out:?}");
        ok(cc(
            &p,
            compiler,
            &["-O2", "-ffunction-sections", "-c", "plain.c"],
        ));
        ok(cc(
            &p,
            compiler,
            &["-O2", "-flto", "-ffunction-sections", "-c", "lto.c"],
        ));
        let _ = std::fs::remove_file(p.path().join("liblto.a"));
        ok(Command::new(ar)
            .current_dir(p.path())
            .args(["rcs", "liblto.a", "lto.o"])
            .output()
            .unwrap());
        let link = cc(
            &p,
            compiler,
            &[
                "-O2",
                "-flto",
                "-ffunction-sections",
                &fuse,
                &b,
                "-o",
                "alpha",
                "plain.o",
                "liblto.a",
            ],
        );
        let ours = succeeded_with(&link);
        assert_eq!(ours.len(), 1, "{linker}: {ours:?}");
        assert!(
            ours[0].contains("ordered after LTO: 4 of 4 profiled functions found in order"),
            "{linker}: {ours:?}"
        );
        assert!(p.is_ordered(&p.path().join("alpha")), "{linker}: ordered");
    }
}

// The non-LTO path fails the link on a profile that matches none of the objects; with LTO that
// can only be seen in the output, so there: a profile none of whose functions is in the linked
// program fails the link with one line naming it, and the output (here replacing a stale one)
// is removed, so that no build goes on with an unchecked binary.
#[test]
fn lto_link_with_a_profile_of_another_program_fails_and_leaves_no_output() {
    if !have_tool("gcc") || !have_tool("clang") {
        return;
    }
    let p = Project::new();
    let b = p.wrappers();
    let mut pb = ProfileBuilder::new(Meta {
        binary: "other".into(),
        source: "test".into(),
        ..Meta::default()
    });
    pb.add_self(&FuncKey::global("only_elsewhere"), 100);
    pb.add_self(&FuncKey::global("nor_here"), 50);
    std::fs::write(p.path().join("prof/alpha.sprof"), pb.build().to_text()).unwrap();
    for (compiler, lto, linker) in [LTO_CASES[0], LTO_CASES[3], LTO_CASES[4]] {
        let alpha = p.path().join("alpha");
        std::fs::write(&alpha, "stale output of an earlier build\n").unwrap();
        let flags = format!("-O2 {lto} -ffunction-sections -fuse-ld={linker}");
        let out = cc(&p, compiler, &argv(&flags, &[&b, "-o", "alpha", "prog.c"]));
        let ours = failed_with(&out);
        assert_eq!(ours.len(), 1, "{linker}: {ours:?}");
        assert!(
            ours[0].starts_with("sediment: ") && ours[0].contains("prof/alpha.sprof: "),
            "{ours:?}"
        );
        assert!(
            ours[0].contains("does not match alpha after LTO (0 of 2 functions"),
            "{ours:?}"
        );
        assert!(!alpha.exists(), "{linker}: no output left behind");
    }
}

// An LTO link whose output has no symbol table (`-s`) cannot be checked: it links, ordered,
// and the summary says it was not checked.
#[test]
fn lto_output_without_symbols_is_not_checked() {
    if !have_tool("clang") {
        return;
    }
    let p = Project::new();
    let b = p.wrappers();
    let out = cc(
        &p,
        "clang",
        &[
            "-O2",
            "-flto",
            "-fuse-ld=lld",
            "-s",
            &b,
            "-o",
            "alpha",
            "prog.c",
        ],
    );
    let ours = succeeded_with(&out);
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(
        ours[0].starts_with("sediment ld: alpha: ordered after LTO, not checked: "),
        "{ours:?}"
    );
    assert!(p.path().join("alpha").exists());
}

// Regression (issue 33): the shim's summary said "(c3, bfd, 2 warnings)" and never showed
// them. Each warning now follows the summary line in the build log, counted and naming the
// first few entries (here: the profiled functions the program does not define). Objects
// without -ffunction-sections are only warned about when they define an entry of the order.
#[test]
fn regress_ld_prints_the_warnings_it_counts() {
    require!("gcc");
    let p = Project::new();
    let mut pb = ProfileBuilder::new(Meta {
        binary: "gamma".into(),
        source: "test".into(),
        ..Meta::default()
    });
    let g = FuncKey::global;
    pb.add_self(&g("f6"), 1000);
    pb.add_self(&g("f2"), 600);
    for i in 0..7 {
        pb.add_self(&FuncKey::global(format!("ghost{i}")), 100 - i);
    }
    std::fs::write(p.path().join("prof/gamma.sprof"), pb.build().to_text()).unwrap();
    let b = p.wrappers();
    let out = cc(
        &p,
        "gcc",
        &["-O1", "-ffunction-sections", &b, "-o", "gamma", "prog.c"],
    );
    let lines = succeeded_with(&out);
    // Only one: gcc's own startup objects (`crtbeginS.o`, no -ffunction-sections) hold no entry
    // of the order and are not warned about.
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with("sediment ld: gamma: ordered 2 of 9 profiled functions")
            && lines[0].contains(", 1 warnings)"),
        "{lines:#?}"
    );
    assert_eq!(
        lines[1],
        "sediment ld: gamma: warning: 7 of 9 order entries not found in the objects: ghost0, ghost1, ghost2, ghost3, ghost4 (and 2 more)",
    );
}

// Regression (issue 33): archives named as `-L DIR -lNAME` or `-l:FILE` were not searched, so
// the functions in them were left unordered (pgbench: 15 of 28). Now `-l` is resolved as the
// linker does: through the `-L` directories and the linker's own search path, a shared library
// found first taken over the archive unless `-Bstatic`.
#[test]
fn regress_archives_named_with_l_are_ordered() {
    require!("gcc", "ar", "ld.lld");
    let p = Project::new();
    split_program(&p);
    let ok = |out: std::process::Output| assert!(out.status.success(), "{out:?}");
    // f4..f7 (f6 and f5 hot) in lib/libhot.a, the rest and main in main.o.
    std::fs::create_dir(p.path().join("lib")).unwrap();
    ok(cc(
        &p,
        "gcc",
        &["-O1", "-ffunction-sections", "-c", "plain.c"],
    ));
    ok(cc(
        &p,
        "gcc",
        &["-O1", "-ffunction-sections", "-c", "lto.c", "-o", "main.o"],
    ));
    ok(Command::new("ar")
        .current_dir(p.path())
        .args(["rcs", "lib/libhot.a", "plain.o"])
        .output()
        .unwrap());
    let b = p.wrappers();
    for linker in ["bfd", "lld"] {
        let fuse = format!("-fuse-ld={linker}");
        for libs in [&["-Llib", "-lhot"][..], &["-L", "lib", "-l:libhot.a"]] {
            let _ = std::fs::remove_file(p.path().join("alpha"));
            let mut line = vec![fuse.as_str(), b.as_str(), "-o", "alpha", "main.o"];
            line.extend(libs);
            let ours = succeeded_with(&cc(&p, "gcc", &line));
            assert!(
                ours[0].starts_with("sediment ld: alpha: ordered 4 of 4 profiled functions"),
                "{linker} {libs:?}: {ours:?}"
            );
            assert!(
                p.is_ordered(&p.path().join("alpha")),
                "{linker} {libs:?}: ordered"
            );
        }
    }
    // A shared library beside the archive is what `-lhot` links: nothing of it to order (f6
    // and f5 are not found), unless -Bstatic asks for the archive. (Most of this profile's
    // weight is then in the library, which would leave the link unordered as one of a stale
    // profile: the least share is turned off to see what the search found.)
    ok(cc(
        &p,
        "gcc",
        &["-shared", "-fPIC", "-o", "lib/libhot.so", "plain.c"],
    ));
    let ours = succeeded_with(
        &Command::new("gcc")
            .current_dir(p.path())
            .env("SEDIMENT_MIN_SHARE", "0")
            .args([&b, "-o", "alpha", "main.o", "-Llib", "-lhot"])
            .output()
            .unwrap(),
    );
    assert!(
        ours[0].starts_with("sediment ld: alpha: ordered 2 of 4 profiled functions"),
        "{ours:?}"
    );
    let ours = succeeded_with(&cc(
        &p,
        "gcc",
        &[
            &b,
            "-o",
            "alpha",
            "main.o",
            "-Llib",
            "-Wl,-Bstatic",
            "-lhot",
            "-Wl,-Bdynamic",
        ],
    ));
    assert!(
        ours[0].starts_with("sediment ld: alpha: ordered 4 of 4 profiled functions"),
        "{ours:?}"
    );
    assert!(p.is_ordered(&p.path().join("alpha")), "-Bstatic: ordered");
}

// Regression (issue 33, a real package): libtool drops a bare `-B` from the link of a shared
// library (it passes on only the compiler flags it knows), so jq's `libjq.so` linked unordered
// with `-B<shims>` in LDFLAGS while the `jq` executable was ordered. The packaging hooks
// (bench/package/debian-rules.mk, integrations/rpm/macros.sediment) add the shims through the
// GCC specs file `sediment wrappers` writes beside them, whose `self_spec` adds the `-B`:
// libtool passes `-specs=` on.
#[test]
fn regress_libtool_library_links_reach_the_shims_through_a_specs_file() {
    require!("gcc", "libtool", "ld.lld");
    let p = Project::new();
    std::fs::copy(
        p.path().join("prof/alpha.sprof"),
        p.path().join("prof/libalpha.so.0.0.0.sprof"),
    )
    .unwrap();
    let b = p.wrappers();
    let specs = p.path().join("sediment-ld/gcc.specs");
    let libtool = |args: &[&str]| {
        let out = Command::new("libtool")
            .current_dir(p.path())
            .args(["--tag=CC"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "libtool {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    libtool(&[
        "--mode=compile",
        "gcc",
        "-O1",
        "-ffunction-sections",
        "-c",
        "prog.c",
    ]);
    let lib = p.path().join(".libs/libalpha.so.0.0.0");
    let link = |flag: &str| {
        // The library and its links; .libs/prog.o, the compiled object, stays.
        for f in [
            "libalpha.so.0.0.0",
            "libalpha.so.0",
            "libalpha.so",
            "libalpha.la",
            "libalpha.lai",
        ] {
            let _ = std::fs::remove_file(p.path().join(".libs").join(f));
        }
        let _ = std::fs::remove_file(p.path().join("libalpha.la"));
        libtool(&[
            "--mode=link",
            "gcc",
            "-O1",
            "-fuse-ld=lld",
            flag,
            "-o",
            "libalpha.la",
            "-rpath",
            "/usr/local/lib",
            "prog.lo",
        ])
    };
    // Premise: with -B alone the shims never run, and the library keeps definition order.
    let log = link(&b);
    assert!(!log.contains("sediment ld"), "{log}");
    assert!(!p.is_ordered(&lib), "premise: -B is dropped by libtool");
    let log = link(&format!("-specs={}", specs.display()));
    assert!(
        log.contains("sediment ld: .libs/libalpha.so.0.0.0: ordered 4 of 4 profiled functions"),
        "{log}"
    );
    assert!(p.is_ordered(&lib), "ordered through the specs file");
}

// `sediment wrappers` writes the GCC specs file beside the shims: gcc reads it (`-specs=`, no
// `-B`) and links through the shims, in a directory whose name needs escaping in a spec string
// (white space and `%`); without a profile for the output the link is the real linker's own,
// and so is a link reading the empty specs file the packaging hooks leave without sediment.
#[test]
fn wrappers_write_a_specs_file_gcc_links_through() {
    require!("gcc");
    let p = Project::new();
    let out = sediment_ok(p.path(), &["wrappers", "--prof-dir", "prof", "shims 50%"]);
    let shims = p.path().canonicalize().unwrap().join("shims 50%");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("-B{}/", shims.display()),
        "stdout: the -B flag, as before"
    );
    let specs = shims.join("gcc.specs");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("-specs={}", specs.display())),
        "the flag is named: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gcc = |output: &str, specs_flag: Option<&Path>| {
        let mut cmd = Command::new("gcc");
        cmd.current_dir(p.path())
            .args(["-O1", "-ffunction-sections", "-o", output, "prog.c"]);
        if let Some(s) = specs_flag {
            cmd.arg(format!("-specs={}", s.display()));
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "gcc -o {output}: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let log = gcc("alpha", Some(&specs));
    assert!(
        log.contains("sediment ld: alpha: ordered 4 of 4 profiled functions"),
        "the link ran through the shim: {log}"
    );
    assert!(p.is_ordered(&p.path().join("alpha")), "alpha ordered");
    let log = gcc("beta", Some(&specs));
    assert!(!log.contains("sediment ld"), "{log}");
    gcc("beta.plain", None);
    assert!(
        p.same_bytes("beta", "beta.plain"),
        "a link without a profile is the real linker's own"
    );
    // Without sediment installed the packaging hooks leave the specs file empty: gcc takes it.
    let empty = p.path().join("empty.specs");
    std::fs::write(&empty, "").unwrap();
    gcc("beta.empty", Some(&empty));
    assert!(
        p.same_bytes("beta.empty", "beta.plain"),
        "an empty specs file"
    );
}
