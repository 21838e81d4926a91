//! The link routes of the linker shims that a package build meets beyond a plain executable:
//! shared libraries with GNU ld before 2.43 (a full script for the link's own mode), response
//! files (`@file`) from CMake/Ninja, Meson and the compiler driver, and a profile that matches
//! too little of the link (stale). Each test runs the real compiler driver and linker through
//! `sediment wrappers` on the program of `packaging.rs` ([`Project`]).

use crate::packaging::{cc, succeeded_with, Project};

/// `prof/alpha.sprof` copied as the profile of `output` (a library's profile is named after
/// its file: `libalpha.so.sprof`).
fn profile_as(p: &Project, output: &str) {
    std::fs::copy(
        p.path().join("prof/alpha.sprof"),
        p.path().join(format!("prof/{output}.sprof")),
    )
    .unwrap();
}

// Regression (issue 33): with GNU ld before 2.43 (Debian 12's 2.40) a shared library was "not
// ordered: GNU ld before 2.43 needs a full script, which Sediment writes for executables
// only". The script now comes from ld's own default for the link's mode (`ld --verbose
// -shared -z relro -z now ...`), and the summary line says what the output shows. A PIE
// executable linked with `-z now` gets its own mode's script the same way, checked too.
#[test]
fn regress_gnu_ld_orders_shared_libraries_and_pie_with_their_own_script() {
    require!("gcc", "ld.bfd");
    let p = Project::new();
    let b = p.wrappers();
    profile_as(&p, "libalpha.so");
    let lines = succeeded_with(&cc(
        &p,
        "gcc",
        &[
            "-O1",
            "-ffunction-sections",
            "-fPIC",
            "-shared",
            "-fuse-ld=bfd",
            &b,
            "-Wl,-z,relro,-z,now",
            "-o",
            "libalpha.so",
            "prog.c",
        ],
    ));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with("sediment ld: libalpha.so: ordered 4 of 4 profiled functions")
            && lines[0].ends_with("; in the output: 4 of the 4 found in order"),
        "{lines:#?}"
    );
    assert!(
        p.is_ordered(&p.path().join("libalpha.so")),
        "the library's symbols are in the order"
    );
    // The library works: a program linked against it runs.
    let main = "unsigned f6(unsigned);\nint main(void) { return f6(1) == 25 ? 0 : 1; }\n";
    std::fs::write(p.path().join("use.c"), main).unwrap();
    let out = cc(
        &p,
        "gcc",
        &["-o", "use", "use.c", "-L.", "-lalpha", "-Wl,-rpath,$ORIGIN"],
    );
    assert!(out.status.success(), "{out:?}");
    let run = std::process::Command::new(p.path().join("use"))
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");

    let lines = succeeded_with(&cc(
        &p,
        "gcc",
        &[
            "-O1",
            "-ffunction-sections",
            "-pie",
            "-fPIE",
            "-fuse-ld=bfd",
            &b,
            "-Wl,-z,relro,-z,now",
            "-o",
            "alpha",
            "prog.c",
        ],
    ));
    assert!(
        lines[0].starts_with("sediment ld: alpha: ordered 4 of 4 profiled functions")
            && lines[0].ends_with("; in the output: 4 of the 4 found in order"),
        "{lines:#?}"
    );
    assert!(p.is_ordered(&p.path().join("alpha")));
    let run = std::process::Command::new(p.path().join("alpha"))
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
}

/// A linker that records how it was called (its argument count, and a copy of the response
/// file when it got one) and runs the real one: `sediment wrappers` with it first on `PATH`
/// makes it the shims' real `ld`. Returns the `-B` flag of those shims.
fn recording_wrappers(p: &Project) -> String {
    let rec = p.path().join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    let ld = rec.join("ld");
    std::fs::write(
        &ld,
        "#!/bin/sh\n[ \"$1\" = --version ] || { echo $# > \"$REC_DIR/count\"; case \"$1\" in @*) cp \"${1#@}\" \"$REC_DIR/args\";; esac; }\nexec /usr/bin/ld \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&ld, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", rec.display(), std::env::var("PATH").unwrap());
    let out = std::process::Command::new(crate::common::sediment_bin())
        .current_dir(p.path())
        .env("PATH", path)
        .args(["wrappers", "--prof-dir", "prof", "rec-ld"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

// Regression (issue 33): a response file (`@FILE`) on the linker's command line skipped
// ordering. The compiler driver given `@objs.rsp` hands the linker `@/tmp/ccXXXX` of its own;
// the shim reads it (GNU quoting), orders the link, and passes the linker one response file
// of its own holding the whole line and the ordering option, not an over-long command line.
#[test]
fn regress_response_files_from_the_driver_are_ordered() {
    require!("gcc", "ld.bfd", "ld.lld");
    let p = Project::new();
    let ok = |out: std::process::Output| assert!(out.status.success(), "{out:?}");
    ok(cc(
        &p,
        "gcc",
        &["-O1", "-ffunction-sections", "-c", "prog.c", "-o", "prog.o"],
    ));
    // Quoted and escaped arguments, and a nested response file.
    std::fs::write(p.path().join("objs.rsp"), "'prog.o' @more.rsp\n").unwrap();
    std::fs::write(
        p.path().join("more.rsp"),
        "\"-Wl,-z,relro\" -Wl\\,-z\\,now\n",
    )
    .unwrap();
    let b = p.wrappers();
    for linker in ["bfd", "lld"] {
        let fuse = format!("-fuse-ld={linker}");
        let lines = succeeded_with(&cc(&p, "gcc", &[&fuse, &b, "-o", "alpha", "@objs.rsp"]));
        assert!(
            lines[0].starts_with("sediment ld: alpha: ordered 4 of 4 profiled functions"),
            "{linker}: {lines:#?}"
        );
        assert!(p.is_ordered(&p.path().join("alpha")), "{linker}: ordered");
    }
    // What the real linker got: one argument, a response file with the ordering option.
    let b = recording_wrappers(&p);
    let out = std::process::Command::new("gcc")
        .current_dir(p.path())
        .env("REC_DIR", p.path())
        .args([&b, "-o", "alpha", "@objs.rsp"])
        .output()
        .unwrap();
    succeeded_with(&out);
    let count = std::fs::read_to_string(p.path().join("count")).unwrap();
    assert_eq!(count.trim(), "1", "the linker's arguments");
    let args = std::fs::read_to_string(p.path().join("args")).unwrap();
    let lines: Vec<&str> = args.lines().collect();
    assert!(lines.contains(&"prog.o") && lines.contains(&"-T"), "{args}");
    assert!(lines.windows(2).any(|w| w == ["-z", "now"]), "{args}");
    assert!(
        p.is_ordered(&p.path().join("alpha")),
        "recorded link ordered"
    );
}

// CMake passes the objects of a link in a response file when asked, as big projects have it:
// with Ninja through CMAKE_NINJA_FORCE_RESPONSE_FILE, with Makefiles through
// CMAKE_C_USE_RESPONSE_FILE_FOR_OBJECTS. Either link is ordered.
#[test]
fn cmake_response_files_are_ordered() {
    require!("cmake", "ninja", "make", "gcc");
    let p = Project::new();
    std::fs::write(
        p.path().join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(p C)\nadd_executable(alpha prog.c)\n",
    )
    .unwrap();
    let b = p.wrappers();
    for (generator, ask, build) in [
        ("Ninja", "-DCMAKE_NINJA_FORCE_RESPONSE_FILE=1", "ninja"),
        (
            "Unix Makefiles",
            "-DCMAKE_C_USE_RESPONSE_FILE_FOR_OBJECTS=1",
            "make",
        ),
    ] {
        let dir = format!("build-{build}");
        crate::packaging::run(
            std::process::Command::new("cmake")
                .current_dir(p.path())
                .args(["-S", ".", "-B", &dir, "-G", generator, ask])
                .arg("-DCMAKE_C_FLAGS=-O1 -ffunction-sections")
                .arg(format!("-DCMAKE_EXE_LINKER_FLAGS={b}")),
        );
        let verbose = if build == "ninja" { "-v" } else { "VERBOSE=1" };
        let out = std::process::Command::new(build)
            .current_dir(p.path().join(&dir))
            .arg(verbose)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        assert!(
            log.lines()
                .any(|l| l.contains(" -o alpha") && l.contains(" @")),
            "premise: {generator} linked with a response file: {log}"
        );
        assert!(
            log.contains("sediment ld: alpha: ordered 4 of 4 profiled functions"),
            "{generator}: {log}"
        );
        assert!(
            p.is_ordered(&p.path().join(&dir).join("alpha")),
            "{generator}"
        );
    }
}

// Meson writes response files for every link when its threshold is 0 (MESON_RSP_THRESHOLD, the
// length above which it uses them); the link is ordered.
#[test]
fn meson_response_files_are_ordered() {
    require!("meson", "ninja", "gcc");
    let p = Project::new();
    std::fs::write(
        p.path().join("meson.build"),
        "project('p', 'c')\nexecutable('alpha', 'prog.c')\n",
    )
    .unwrap();
    let b = p.wrappers();
    crate::packaging::run(
        std::process::Command::new("meson")
            .current_dir(p.path())
            .env("MESON_RSP_THRESHOLD", "0")
            .args(["setup", "build", "--buildtype=plain"])
            .arg("-Dc_args=['-O1','-ffunction-sections']")
            .arg(format!("-Dc_link_args=['{b}']")),
    );
    let out = std::process::Command::new("ninja")
        .current_dir(p.path())
        .env("MESON_RSP_THRESHOLD", "0")
        .args(["-C", "build", "-v"])
        .output()
        .unwrap();
    let err =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("cc @alpha.rsp"),
        "premise: linked with a response file: {err}"
    );
    assert!(
        err.contains("sediment ld: alpha: ordered 4 of 4 profiled functions"),
        "{err}"
    );
    assert!(p.is_ordered(&p.path().join("build/alpha")));
}

/// A profile of `alpha` whose weight is `matched` on the program's own hot functions and
/// `gone` on functions no longer in it (an older version's), spread over four names.
fn stale_profile(p: &Project, matched: u64, gone: u64) {
    let mut pb = sediment_profile::ProfileBuilder::new(sediment_profile::Meta {
        binary: "alpha".into(),
        source: "test".into(),
        ..sediment_profile::Meta::default()
    });
    let g = sediment_profile::FuncKey::global;
    pb.add_self(&g("f6"), matched / 2);
    pb.add_self(&g("f2"), matched - matched / 2);
    for i in 0..4 {
        pb.add_self(
            &sediment_profile::FuncKey::global(format!("old{i}")),
            gone / 4,
        );
    }
    pb.add_self(&g("main"), 10_000);
    std::fs::write(p.path().join("prof/alpha.sprof"), pb.build().to_text()).unwrap();
}

/// `gcc -O1 -ffunction-sections -fuse-ld=LINKER B -o OUT prog.c` with `env` set.
fn link_prog(p: &Project, linker: &str, b: &str, out: &str, env: &[(&str, &str)]) -> Vec<String> {
    let mut cmd = std::process::Command::new("gcc");
    cmd.current_dir(p.path()).envs(env.iter().copied());
    let fuse = format!("-fuse-ld={linker}");
    let res = cmd
        .args(["-O1", "-ffunction-sections", &fuse, b, "-o", out, "prog.c"])
        .output()
        .unwrap();
    succeeded_with(&res)
}

// A stale profile (issue 33): when less than the least share of the profile's weight (0.5 by
// default; `main` and the C start-up code not counted) is in the link's functions, the link is
// left unordered, byte-identical to a link without the shims, with one line giving the share.
// At or above it the link is ordered. `SEDIMENT_MIN_SHARE` and `wrappers --min-share` set it.
#[test]
fn stale_profile_links_unordered_below_the_least_share() {
    require!("gcc", "ld.lld");
    let p = Project::new();
    let b = p.wrappers();
    for linker in ["lld", "bfd"] {
        // 30% of the weight (main's not counted) in the program's functions: unordered.
        stale_profile(&p, 300, 700);
        let lines = link_prog(&p, linker, &b, "alpha", &[]);
        assert_eq!(
            lines,
            [format!(
                "sediment ld: alpha: not ordered: 30.0% of the profile's weight is in functions of this link (not counting main and the C start-up code), below the least share 50% ($SEDIMENT_MIN_SHARE); a stale profile? {}",
                p.path().join("prof/alpha.sprof").display()
            )],
            "{linker}"
        );
        let plain = format!("-fuse-ld={linker}");
        crate::packaging::run(
            std::process::Command::new("gcc")
                .current_dir(p.path())
                .args([
                    "-O1",
                    "-ffunction-sections",
                    &plain,
                    "-o",
                    "alpha.plain",
                    "prog.c",
                ]),
        );
        assert!(p.same_bytes("alpha", "alpha.plain"), "{linker}: unordered");
        // A lower least share through the environment: ordered.
        let lines = link_prog(&p, linker, &b, "alpha", &[("SEDIMENT_MIN_SHARE", "0.25")]);
        assert!(
            lines[0].starts_with("sediment ld: alpha: ordered 3 of 7 profiled functions"),
            "{linker}: {lines:#?}"
        );
        assert!(!p.same_bytes("alpha", "alpha.plain"), "{linker}: ordered");
        // 60%: ordered with the default.
        stale_profile(&p, 600, 400);
        let lines = link_prog(&p, linker, &b, "alpha", &[]);
        assert!(
            lines[0].starts_with("sediment ld: alpha: ordered 3 of 7 profiled functions"),
            "{linker}: {lines:#?}"
        );
    }
    // Baked into the shims by `wrappers --min-share`.
    let out = crate::common::sediment(
        p.path(),
        &[
            "wrappers",
            "--prof-dir",
            "prof",
            "--min-share",
            "0.7",
            "strict-ld",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let strict = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let lines = link_prog(&p, "lld", &strict, "alpha", &[]);
    assert!(
        lines[0].starts_with("sediment ld: alpha: not ordered: 60.0% of the profile's weight")
            && lines[0].contains("below the least share 70%"),
        "{lines:#?}"
    );
    // A value that is not a share fails the link with one line naming the variable.
    let out = std::process::Command::new("gcc")
        .current_dir(p.path())
        .env("SEDIMENT_MIN_SHARE", "half")
        .args(["-O1", "-ffunction-sections", &b, "-o", "alpha", "prog.c"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("$SEDIMENT_MIN_SHARE: 'half' is not a share between 0 and 1; nothing linked"),
        "{err}"
    );
}

/// A configure script of the autoconf kind: `CC`, `CFLAGS` and `LDFLAGS` from the environment
/// or the command line (`VAR=value`), written into a Makefile after the project's own flags
/// (`-O2 -g`, an rpath), as PostgreSQL's `Makefile.global` does.
const CONFIGURE: &str = r#"#!/bin/sh
for a in "$@"; do
  case "$a" in CC=*|CFLAGS=*|LDFLAGS=*) eval "${a%%=*}=\${a#*=}" ;; esac
done
: "${CC:=cc}"
cat > Makefile <<EOF
CC = $CC
CFLAGS = -O2 -g $CFLAGS
LDFLAGS = -Wl,-rpath,/opt/proj/lib $LDFLAGS
all: alpha
alpha: prog.c
	\$(CC) \$(CFLAGS) -o \$@ prog.c \$(LDFLAGS)
EOF
"#;

/// What of the project's own flags is in `DIR/alpha`: its rpath (`readelf -d`), and the options
/// gcc recorded in the debug information (`DW_AT_producer` of prog.c, there with `-g` only).
fn own_flags(dir: &std::path::Path) -> (bool, String) {
    let readelf = |args: &[&str]| {
        let out = std::process::Command::new("readelf")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let rpath = readelf(&["-d", "alpha"]).contains("/opt/proj/lib");
    let info = readelf(&["--debug-dump=info", "alpha"]);
    let producer = info
        .lines()
        .find(|l| l.contains("DW_AT_producer"))
        .unwrap_or("")
        .to_string();
    (rpath, producer)
}

/// `./configure ARGS` then `make MAKE_ARGS`, the output removed first.
fn configure_make(p: &Project, args: &[&str], make_args: &[&str]) {
    let _ = std::fs::remove_file(p.path().join("alpha"));
    crate::packaging::run(
        std::process::Command::new("sh")
            .current_dir(p.path())
            .arg("./configure")
            .args(args),
    );
    crate::packaging::run(
        std::process::Command::new("make")
            .current_dir(p.path())
            .arg("-s")
            .args(make_args),
    );
}

// Regression (issue 33): the guide's `make CFLAGS+=... LDFLAGS+=...` replaced the flags the
// project's configure had put in those variables (PostgreSQL lost `-O2 -g`, its `-L` paths and
// rpath). The routes that append keep them, and order the link: the flags given to configure,
// and Debian's `DEB_*_MAINT_APPEND` through `dpkg-buildflags`.
#[test]
fn regress_append_routes_keep_the_projects_own_flags() {
    require!("gcc", "make", "readelf", "dpkg-buildflags");
    let p = Project::new();
    std::fs::write(p.path().join("configure"), CONFIGURE).unwrap();
    let b = p.wrappers();
    let ldflags = format!("-ffunction-sections {b}");

    // Premise: on the make command line, `+=` replaces the Makefile's value.
    configure_make(
        &p,
        &[],
        &[
            "CFLAGS+=-ffunction-sections",
            &format!("LDFLAGS+={ldflags}"),
        ],
    );
    let (rpath, producer) = own_flags(p.path());
    assert!(!rpath && !producer.contains("-O2"), "premise: {producer}");

    // The flags given to configure are appended to the project's.
    configure_make(
        &p,
        &["CFLAGS=-ffunction-sections", &format!("LDFLAGS={ldflags}")],
        &[],
    );
    let (rpath, producer) = own_flags(p.path());
    assert!(rpath, "configure: the project's rpath is kept");
    assert!(
        producer.contains("-O2") && producer.contains("-ffunction-sections"),
        "configure: {producer}"
    );
    assert!(p.is_ordered(&p.path().join("alpha")), "configure: ordered");

    // Debian: what dpkg-buildflags gives with the MAINT_APPEND variables, passed to configure.
    let get = |what: &str| {
        let out = std::process::Command::new("dpkg-buildflags")
            .current_dir(p.path())
            .env("DEB_CFLAGS_MAINT_APPEND", "-ffunction-sections")
            .env("DEB_LDFLAGS_MAINT_APPEND", &ldflags)
            .args(["--get", what])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let (cflags, deb_ldflags) = (get("CFLAGS"), get("LDFLAGS"));
    assert!(
        deb_ldflags.contains("-Wl,-z,relro") && deb_ldflags.ends_with(&b),
        "dpkg-buildflags appends: {deb_ldflags}"
    );
    configure_make(
        &p,
        &[
            &format!("CFLAGS={cflags}"),
            &format!("LDFLAGS={deb_ldflags}"),
        ],
        &[],
    );
    let (rpath, producer) = own_flags(p.path());
    assert!(rpath, "dpkg-buildflags: the project's rpath is kept");
    assert!(
        producer.contains("-fstack-protector-strong") && producer.contains("-ffunction-sections"),
        "dpkg-buildflags: {producer}"
    );
    assert!(
        p.is_ordered(&p.path().join("alpha")),
        "dpkg-buildflags: ordered"
    );

    // RPM: the macros appended to %build_ldflags and %build_cflags (Debian's rpm has no
    // redhat-rpm-config: %build_cflags is `-O2 -g` and %build_ldflags unset, so the spec gives
    // it a distribution's start).
    if !crate::common::have_tool("rpmbuild") {
        return;
    }
    let top = p.path().join("rpm");
    let sources = top.join("SOURCES");
    std::fs::create_dir_all(&sources).unwrap();
    for f in ["prog.c", "configure"] {
        std::fs::copy(p.path().join(f), sources.join(f)).unwrap();
    }
    std::fs::copy(
        p.path().join("prof/alpha.sprof"),
        sources.join("alpha.sprof"), // a source of the package: %{sediment_prof_dir}
    )
    .unwrap();
    let spec = top.join("t.spec");
    std::fs::write(
        &spec,
        "Name: appendtest\nVersion: 1\nRelease: 1\nSummary: t\nLicense: MIT\n%description\nt\n%build\n\
         %{!?build_cflags:%global build_cflags -O2 -g}\n\
         %{!?build_ldflags:%global build_ldflags -Wl,-z,relro}\n\
         %sediment_setup\n\
         %global build_cflags %{build_cflags} %{sediment_cflags}\n\
         %global build_ldflags %{build_ldflags} %{sediment_ldflags}\n\
         cp %{_sourcedir}/prog.c %{_sourcedir}/configure .\n\
         sh ./configure CFLAGS=\"%{build_cflags}\" LDFLAGS=\"%{build_ldflags}\"\n\
         make -s\n",
    )
    .unwrap();
    let macros =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/rpm/macros.sediment");
    crate::packaging::run(
        std::process::Command::new("rpmbuild")
            .current_dir(p.path())
            .env("PATH", crate::packaging::path_with_sediment())
            .arg("--load")
            .arg(&macros)
            .arg("--define")
            .arg(format!("_topdir {}", top.display()))
            .args(["--nodeps", "-bc"])
            .arg(&spec),
    );
    let build = top.join("BUILD");
    let (rpath, producer) = own_flags(&build);
    assert!(rpath, "rpm: the project's rpath is kept");
    assert!(
        producer.contains("-O2") && producer.contains("-ffunction-sections"),
        "rpm: {producer}"
    );
    assert!(p.is_ordered(&build.join("alpha")), "rpm: ordered");
}
