//! Demangled names in reports (`--no-demangle` to see symbol names), on real g++ and rustc
//! output; profiles, order files and linker inputs keep the symbol names.

use crate::common::{run, sediment, sediment_ok, sh};

fn stdout_ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const CPP: &str = "#include <cstdio>\n\
namespace ns { template<class T> __attribute__((noinline)) T twice(T x) { return x + x; }\n\
struct W { __attribute__((noinline)) int run(int k); };\n\
int W::run(int k) { return twice<int>(k) + (int)twice<double>(k); } }\n\
#ifdef GROW\n\
__attribute__((noinline)) int pad(int x) { volatile int a[40]; for (int i = 0; i < 40; i++) a[i] = x + i; return a[3]; }\n\
#endif\n\
int main(int argc, char **) { ns::W w; int s = 0; for (int i = 0; i < 1000; i++) s += w.run(i + argc);\n\
#ifdef GROW\n\
s += pad(argc);\n\
#endif\n\
std::printf(\"%d\\n\", s); return 0; }\n";

// `diff` and `match` name C++ functions demangled by default, mangled with --no-demangle.
#[test]
fn diff_and_match_show_demangled_cpp_names() {
    require!("g++");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.cc"), CPP).unwrap();
    run(d, "g++", &["-O2", "-c", "a.cc", "-o", "a.o"]);
    run(d, "g++", &["a.o", "-o", "old"]);
    run(d, "g++", &["-O2", "-DGROW", "a.cc", "-o", "new"]);
    let shown = stdout_ok(&sediment(d, &["diff", "old", "new"]));
    assert!(shown.contains("ns::W::run(int)"), "{shown}");
    assert!(!shown.contains("_ZN2ns1W3runEi"), "{shown}");
    let raw = stdout_ok(&sediment(d, &["diff", "--no-demangle", "old", "new"]));
    assert!(raw.contains("_ZN2ns1W3runEi"), "{raw}");
    assert!(!raw.contains("ns::W::run(int)"), "{raw}");

    // A static call graph of the old build, matched to the new one: `pad` is new.
    let imp = sediment(
        d,
        &[
            "import",
            "--format",
            "objects",
            "--program",
            "old",
            "a.o",
            "-o",
            "a.sprof",
        ],
    );
    stdout_ok(&imp);
    let prof = std::fs::read_to_string(d.join("a.sprof")).unwrap();
    assert!(
        prof.contains("_ZN2ns1W3runEi"),
        "profiles keep symbol names: {prof}"
    );
    let m = stdout_ok(&sediment(
        d,
        &[
            "match",
            "-p",
            "a.sprof",
            "--binary",
            "new",
            "--min-share",
            "0",
        ],
    ));
    assert!(m.contains("\n  pad(int)"), "{m}");
    let m = stdout_ok(&sediment(
        d,
        &[
            "match",
            "-p",
            "a.sprof",
            "--binary",
            "new",
            "--min-share",
            "0",
            "--no-demangle",
        ],
    ));
    assert!(m.contains("\n  _Z3padi"), "{m}");
}

// Rust names (legacy mangling, with hashes) show as paths in the `.gv` export's labels; the
// symbol name travels beside them and comes back on import, and order files keep it.
#[test]
fn rust_names_demangle_in_gv_labels_and_stay_mangled_elsewhere() {
    require!("rustc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("r.rs"),
        "#[inline(never)] fn work(x: u64) -> u64 { (0..x).map(|i| i * i).sum() }\n\
         fn main() { println!(\"{}\", work(std::env::args().count() as u64 * 1000)); }\n",
    )
    .unwrap();
    sh(d, "rustc", &["-O", "--emit=obj", "r.rs", "-o", "r.o"]);
    stdout_ok(&sediment(
        d,
        &[
            "import",
            "--format",
            "objects",
            "--program",
            "r",
            "r.o",
            "-o",
            "r.sprof",
        ],
    ));
    stdout_ok(&sediment(
        d,
        &["export", "--format", "gv", "-p", "r.sprof", "-o", "r.gv"],
    ));
    let gv = std::fs::read_to_string(d.join("r.gv")).unwrap();
    let line = gv
        .lines()
        .find(|l| l.contains("[label=\"r::work\""))
        .unwrap_or_else(|| panic!("{gv}"));
    assert!(line.contains("symbol=\"_ZN1r4work17h"), "{line}");
    stdout_ok(&sediment(
        d,
        &["import", "--format", "gv", "r.gv", "-o", "back.sprof"],
    ));
    let names = |f: &str| {
        let p = sediment_profile::Profile::from_text(&std::fs::read_to_string(d.join(f)).unwrap())
            .unwrap();
        p.functions
            .iter()
            .map(|f| f.key.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names("back.sprof"), names("r.sprof"));
    let raw = stdout_ok(&sediment(
        d,
        &[
            "export",
            "--format",
            "gv",
            "--no-demangle",
            "-p",
            "r.sprof",
            "-o",
            "raw.gv",
        ],
    ));
    drop(raw);
    assert!(!std::fs::read_to_string(d.join("raw.gv"))
        .unwrap()
        .contains("symbol="));
}

// Warnings name C++ functions demangled too (`link`'s entries not found), and the order file
// and the linker's input keep the symbol names.
#[test]
fn link_warnings_show_demangled_names() {
    require!("g++");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.cc"), CPP).unwrap();
    run(
        d,
        "g++",
        &["-O2", "-ffunction-sections", "-c", "a.cc", "-o", "a.o"],
    );
    std::fs::write(
        d.join("a.order"),
        sediment_profile::FunctionOrder {
            functions: vec![
                sediment_profile::FuncKey::global("_ZN2ns1W3runEi"),
                sediment_profile::FuncKey::global("_ZN2ns7missingEv"),
            ],
            ..Default::default()
        }
        .to_text(),
    )
    .unwrap();
    let link = |extra: &[&str]| {
        let mut args = vec![
            "link", "--linker", "lld", "--order", "a.order", "-o", "a.sym",
        ];
        args.extend_from_slice(extra);
        args.push("a.o");
        let out = sediment_ok(d, &args);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = link(&[]);
    assert!(
        err.contains("not found in the objects: ns::missing()"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("a.sym")).unwrap(),
        "_ZN2ns1W3runEi\n"
    );
    let err = link(&["--no-demangle"]);
    assert!(
        err.contains("not found in the objects: _ZN2ns7missingEv"),
        "{err}"
    );
}
