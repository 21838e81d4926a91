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
