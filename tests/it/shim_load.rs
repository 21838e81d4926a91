//! A load test of the linker shims (issue 34): a parallel `make -j4` of a few dozen ordered
//! links through `sediment wrappers`, with recordings into the same profile directory at the
//! same time (`record --prof-dir`). Nothing may be lost (the merged profile counts every
//! recording), no temporary file may be left, and every linked program must be byte-equal to
//! the one a serial build (`make -j1`) links.

use crate::common::sediment_ok;
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};
use std::path::Path;
use std::process::Command;

/// Programs linked (each with its own profile).
const LINKS: usize = 24;
/// Recordings into the profile directory during the build.
const RECORDS: usize = 6;

const PROG: &str = r#"
#define F(n, k) __attribute__((noinline)) unsigned f##n(unsigned x) { return x * k + n; }
F(0, 3) F(1, 5) F(2, 7) F(3, 11) F(4, 13) F(5, 17) F(6, 19) F(7, 23)
int main(int argc, char **argv) {
    (void)argv;
    unsigned s = (unsigned)argc;
    for (unsigned i = 0; i < 100; i++) s = f6(s) + f2(s) + f5(i);
    if (argc > 5) s += f0(s) + f1(s) + f3(s) + f4(s) + f7(s);
    return (int)(s & 1);
}
"#;

/// Sets up a build directory `d`: the object, one profile per program (each with another hot
/// set, so each link gets another order), the shims, and a Makefile whose `all` links every
/// program through them and records `./tiny` `RECORDS` times into the same directory.
fn project(d: &Path) {
    std::fs::write(d.join("prog.c"), PROG).unwrap();
    std::fs::write(d.join("tiny.c"), "int main(void) { return 0; }\n").unwrap();
    crate::common::run(
        d,
        "gcc",
        &["-O1", "-ffunction-sections", "-c", "-o", "prog.o", "prog.c"],
    );
    crate::common::run(d, "gcc", &["-O1", "-o", "tiny", "tiny.c"]);
    std::fs::create_dir(d.join("prof")).unwrap();
    for i in 0..LINKS {
        let name = format!("p{i:02}");
        let mut b = ProfileBuilder::new(Meta {
            binary: name.clone(),
            source: "test".into(),
            ..Meta::default()
        });
        let f = |n: usize| FuncKey::global(format!("f{}", n % 8));
        b.add_self(&FuncKey::global("main"), 10);
        for k in 0..3 {
            b.add_self(&f(i + 3 * k), 100 * (k as u64 + 1));
            b.add_call(&FuncKey::global("main"), &f(i + 3 * k), 5);
        }
        std::fs::write(d.join(format!("prof/{name}.sprof")), b.build().to_text()).unwrap();
    }
    let out = sediment_ok(d, &["wrappers", "--prof-dir", "prof", "shims"]);
    let b_flag = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let links: Vec<String> = (0..LINKS).map(|i| format!("p{i:02}")).collect();
    let records: Vec<String> = (0..RECORDS).map(|i| format!("rec{i}")).collect();
    let sediment = crate::common::sediment_bin();
    let make = format!(
        "all: {links} {records}\n\
         {links}: prog.o\n\t$(CC) -fuse-ld=lld -o $@ prog.o {b_flag}\n\
         {records}:\n\t{sediment} record --via callgrind --prof-dir prof -- ./tiny 2>/dev/null\n\
         .PHONY: {records}\n",
        links = links.join(" "),
        records = records.join(" "),
        sediment = sediment.display(),
    );
    std::fs::write(d.join("Makefile"), make).unwrap();
}

/// Names in `dir` (sorted) that are not outputs: temporary files of an interrupted write.
fn temporaries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    v.sort();
    v
}

#[test]
fn parallel_build_through_the_shims_equals_a_serial_one() {
    require!("gcc", "make", "ld.lld", "valgrind");
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for (dir, jobs) in dirs.iter().zip(["-j4", "-j1"]) {
        let d = dir.path();
        project(d);
        let out = Command::new("make")
            .args(["-s", jobs])
            .current_dir(d)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "make {jobs}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Every recording is in the merged profile.
        let text = std::fs::read_to_string(d.join("prof/tiny.sprof")).unwrap();
        let p = Profile::from_text(&text).unwrap();
        assert_eq!(
            p.meta
                .extra
                .get(sediment_profile::META_RECORDINGS)
                .map(String::as_str),
            Some(RECORDS.to_string().as_str()),
            "make {jobs}"
        );
        assert_eq!(temporaries(d), Vec::<String>::new(), "make {jobs}");
        assert_eq!(
            temporaries(&d.join("prof")),
            Vec::<String>::new(),
            "make {jobs}"
        );
    }
    // Every program linked in parallel is the one the serial build linked, and ordered.
    let (par, ser) = (dirs[0].path(), dirs[1].path());
    for i in 0..LINKS {
        let name = format!("p{i:02}");
        let a = std::fs::read(par.join(&name)).unwrap();
        let b = std::fs::read(ser.join(&name)).unwrap();
        assert!(a == b, "{name} differs between make -j4 and make -j1");
    }
    let plain = Command::new("gcc")
        .args(["-fuse-ld=lld", "-o", "plain", "prog.o"])
        .current_dir(ser)
        .status()
        .unwrap();
    assert!(plain.success());
    let plain = std::fs::read(ser.join("plain")).unwrap();
    let ordered = (0..LINKS)
        .filter(|i| std::fs::read(ser.join(format!("p{i:02}"))).unwrap() != plain)
        .count();
    assert_eq!(ordered, LINKS, "every link was ordered by the shims");
}
