//! `sediment link` / `link-flags` end to end, the mold-test way: small C programs compiled by
//! gcc with -ffunction-sections, an order that reverses the default layout, each real linker
//! (lld, gold, GNU ld, mold via the ld -r route), the program run, and the symbol order of the
//! linked binary checked with the `object` crate.

use crate::common::{have_tool, sediment, sediment_ok};
use object::{Object, ObjectSymbol, SymbolKind};
use sediment_elf::objects::{read_objects, Binding};
use sediment_profile::{FuncKey, FunctionOrder};
use std::path::Path;
use std::process::Command;

const A_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static int helper(int x) { return x * 3 + 1; }
__attribute__((hot)) int hotfn(int x) { return helper(x) + 2; }
__attribute__((cold, noinline)) int coldfn(int x) { return x - 5; }
__attribute__((noinline)) static int cp(int x, int y) { return x * y + (x ^ y) * 7 + y / 3; }
int usecp(int x) { return cp(x, 5) + cp(x + 1, 5); }
int a_entry(int x) {
  if (__builtin_expect(x > 1000000, 0)) { fprintf(stderr, "big %d\n", x); fprintf(stderr, "again %d\n", x * 2); abort(); }
  return helper(x) + hotfn(x) + usecp(x) + (x > 100 ? coldfn(x) : 0);
}
"#;

const B_C: &str = r#"#include <stdio.h>
__attribute__((noinline)) static int helper(int x) { return x * 5 + 2; }
int a_entry(int);
int p1(int);
int b_entry(int x) { return helper(x) + 1; }
int main(int argc, char **argv) {
  (void)argv;
  printf("%d\n", a_entry(argc) + b_entry(argc) + p1(argc));
  return 0;
}
"#;

const P_C: &str = r#"int g[100];
static int slow(int x) {
  if (x == 0) return 0;
  for (int i = 0; i < 100; i++) { g[i] += x * i; g[(i * 7) % 100] ^= g[i] >> 3; }
  for (int i = 0; i < 100; i++) { g[i] -= x / (i + 1); }
  return g[x % 100];
}
int p1(int x) { return slow(x) + 1; }
int p2(int x) { return slow(x + 1) * 2; }
int p3(int x) { return slow(x + 2) * 3; }
"#;

/// The reference output: the same sources built at -O0 and linked with no ordering.
fn expected_output(dir: &Path) -> String {
    let out = dir.join("ref");
    gcc(
        dir,
        &["-O0", "a.c", "b.c", "p.c", "-o", out.to_str().unwrap()],
    );
    run(&out)
}

fn gcc(dir: &Path, args: &[&str]) {
    let out = Command::new("gcc")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run(exe: &Path) -> String {
    let out = Command::new(exe).output().expect("run program");
    assert!(out.status.success(), "{} failed", exe.display());
    String::from_utf8(out.stdout).unwrap()
}

/// Writes the sources and compiles them with -O2 -ffunction-sections.
fn build_objects(dir: &Path) {
    for (name, src) in [("a.c", A_C), ("b.c", B_C), ("p.c", P_C)] {
        std::fs::write(dir.join(name), src).unwrap();
    }
    gcc(
        dir,
        &["-O2", "-ffunction-sections", "-c", "a.c", "b.c", "p.c"],
    );
}

/// The order used throughout, deliberately against the default layout (GNU ld puts
/// `.text.startup` and `.text.hot` first, then the objects in command-line order).
fn reversed_order() -> Vec<FuncKey> {
    vec![
        FuncKey::global("p3"),
        FuncKey::local("slow.part.0", "p.c"),
        FuncKey::local("helper", "b.c"),
        FuncKey::global("b_entry"),
        FuncKey::local("cp.constprop.0", "a.c"),
        FuncKey::global("a_entry"),
        FuncKey::local("helper", "a.c"),
        FuncKey::global("usecp"),
        FuncKey::global("main"),
        FuncKey::global("hotfn"),
    ]
}

fn write_order(dir: &Path, keys: &[FuncKey]) {
    let order = FunctionOrder {
        functions: keys.to_vec(),
        ..Default::default()
    };
    std::fs::write(dir.join("order.txt"), order.to_text()).unwrap();
}

/// Address of every function symbol of a linked binary, keyed like the profile (locals carry
/// the preceding STT_FILE base name).
fn addresses(exe: &Path) -> Vec<(FuncKey, u64)> {
    let data = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut current_file = None;
    let mut out = Vec::new();
    for sym in file.symbols() {
        let name = sym.name().unwrap_or("").to_string();
        match sym.kind() {
            SymbolKind::File => current_file = Some(name),
            SymbolKind::Text if sym.is_definition() => {
                let key = match (&current_file, sym.is_local()) {
                    (Some(f), true) => FuncKey::local(name, f),
                    _ => FuncKey::global(name),
                };
                out.push((key, sym.address()));
            }
            _ => {}
        }
    }
    out
}

fn addr(all: &[(FuncKey, u64)], key: &FuncKey) -> u64 {
    let mut found: Vec<u64> = all
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, a)| *a)
        .collect();
    if found.is_empty() && key.file.is_none() {
        // mold writes every symbol of an executable with local binding: match globals by name.
        found = all
            .iter()
            .filter(|(k, _)| k.name == key.name)
            .map(|(_, a)| *a)
            .collect();
    }
    assert_eq!(found.len(), 1, "{key} in linked binary: {found:?}");
    found[0]
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `sediment link` + `link-flags` + gcc link; returns the linked program's path.
fn link_with(dir: &Path, linker: &str) -> std::path::PathBuf {
    let file = format!("{linker}.order");
    sediment_ok(
        dir,
        &[
            "link",
            "--linker",
            linker,
            "--order",
            "order.txt",
            "-o",
            &file,
            "a.o",
            "b.o",
            "p.o",
        ],
    );
    let flags = sediment_ok(dir, &["link-flags", "--linker", linker, &file]);
    let flags = String::from_utf8(flags.stdout).unwrap();
    let exe = dir.join(format!("prog_{linker}"));
    let mut args: Vec<String> = flags.split_whitespace().map(str::to_string).collect();
    args.extend(["a.o", "b.o", "p.o", "-o"].map(String::from));
    args.push(exe.to_str().unwrap().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    gcc(dir, &args);
    exe
}

// The inventory sees what gcc 12 really emits: section names for hot, cold, startup, clones.
#[test]
fn inventory_of_gcc_objects() {
    require!("gcc");
    let tmp = tempfile::tempdir().unwrap();
    build_objects(tmp.path());
    let a = read_objects("a.o", &std::fs::read(tmp.path().join("a.o")).unwrap()).unwrap();
    assert_eq!(a.len(), 1);
    let a = &a[0];
    assert_eq!(a.file_symbol.as_deref(), Some("a.c"));
    assert!(a.function_sections);
    let find = |n: &str| {
        a.functions
            .iter()
            .find(|f| f.name == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    assert_eq!(find("hotfn").section, ".text.hot.hotfn");
    assert_eq!(find("coldfn").section, ".text.unlikely.coldfn");
    assert_eq!(find("a_entry.cold").section, ".text.unlikely.a_entry");
    assert_eq!(find("a_entry.cold").binding, Binding::Local);
    assert_eq!(find("cp.constprop.0").section, ".text.cp.constprop.0");
    assert_eq!(find("cp.constprop.0").file.as_deref(), Some("a.c"));
    assert_eq!(find("helper").binding, Binding::Local);
    assert_eq!(find("usecp").file, None);
    let b = &read_objects("b.o", &std::fs::read(tmp.path().join("b.o")).unwrap()).unwrap()[0];
    assert!(b
        .functions
        .iter()
        .any(|f| f.name == "main" && f.section == ".text.startup.main"));
    let p = &read_objects("p.o", &std::fs::read(tmp.path().join("p.o")).unwrap()).unwrap()[0];
    assert!(p
        .functions
        .iter()
        .any(|f| f.name == "slow.part.0" && f.section == ".text.slow.part.0"));

    // Without -ffunction-sections functions share `.text`, and an archive is read member by member.
    gcc(tmp.path(), &["-O2", "-c", "a.c", "-o", "a_plain.o"]);
    let ar = Command::new("ar")
        .args(["rcs", "lib.a", "a_plain.o", "p.o"])
        .current_dir(tmp.path())
        .status()
        .unwrap();
    assert!(ar.success());
    let lib = read_objects("lib.a", &std::fs::read(tmp.path().join("lib.a")).unwrap()).unwrap();
    assert_eq!(lib.len(), 2);
    assert_eq!(lib[0].member.as_deref(), Some("a_plain.o"));
    assert!(!lib[0].function_sections);
    assert!(lib[1].function_sections);
}

// LTO inputs as gcc 12 and clang 14 write them are recognised, alone and in archives: a slim
// GCC object (GCC's default) by its `.gnu.lto_*` sections and `__gnu_lto_slim`, a fat one by
// the sections alone (its ordinary code still read), LLVM bitcode by its magic.
#[test]
fn inventory_recognises_lto_inputs() {
    use sediment_elf::objects::Lto;
    if !have_tool("clang") || !have_tool("llvm-ar") || !have_tool("gcc-ar") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("a.c"), A_C).unwrap();
    gcc(
        d,
        &[
            "-O2",
            "-flto",
            "-ffunction-sections",
            "-c",
            "a.c",
            "-o",
            "slim.o",
        ],
    );
    gcc(
        d,
        &[
            "-O2",
            "-flto",
            "-ffat-lto-objects",
            "-ffunction-sections",
            "-c",
            "a.c",
            "-o",
            "fat.o",
        ],
    );
    let clang = Command::new("clang")
        .args(["-O2", "-flto", "-c", "a.c", "-o", "bc.o"])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(clang.success());
    let read = |name: &str| read_objects(name, &std::fs::read(d.join(name)).unwrap()).unwrap();
    let slim = read("slim.o");
    assert_eq!(slim[0].lto, Some(Lto::Gcc { slim: true }));
    assert!(slim[0].functions.is_empty(), "no code of its own");
    let fat = read("fat.o");
    assert_eq!(fat[0].lto, Some(Lto::Gcc { slim: false }));
    assert!(fat[0]
        .functions
        .iter()
        .any(|f| f.section == ".text.hot.hotfn"));
    let bc = read("bc.o");
    assert_eq!(bc[0].lto, Some(Lto::Bitcode));
    for (ar, lib, member) in [
        ("gcc-ar", "libg.a", "slim.o"),
        ("llvm-ar", "libb.a", "bc.o"),
    ] {
        let ok = Command::new(ar)
            .args(["rcs", lib, member])
            .current_dir(d)
            .status()
            .unwrap();
        assert!(ok.success());
        let objs = read(lib);
        assert_eq!(objs.len(), 1, "{lib}");
        assert_eq!(objs[0].member.as_deref(), Some(member));
        assert!(objs[0].lto.is_some(), "{lib}");
    }
}

// GNU ld gets a file-qualified script: the exact order holds, same-named statics apart.
#[test]
fn bfd_places_exact_order() {
    require!("gcc");
    have_tool("ld.bfd");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    build_objects(dir);
    let expected = expected_output(dir);
    write_order(dir, &reversed_order());
    let exe = link_with(dir, "bfd");
    assert_eq!(run(&exe), expected);
    let all = addresses(&exe);
    let got: Vec<u64> = reversed_order().iter().map(|k| addr(&all, k)).collect();
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "not in order: {got:x?}"
    );
}

// lld and gold: the order holds; same-named statics sit together at the hottest position.
#[test]
fn lld_and_gold_follow_order() {
    require!("gcc");
    have_tool("ld.lld");
    have_tool("ld.gold");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    build_objects(dir);
    let expected = expected_output(dir);
    write_order(dir, &reversed_order());
    for linker in ["lld", "gold"] {
        let exe = link_with(dir, linker);
        assert_eq!(run(&exe), expected, "{linker}");
        let all = addresses(&exe);
        let at = |k: FuncKey| addr(&all, &k);
        let helpers = [
            at(FuncKey::local("helper", "a.c")),
            at(FuncKey::local("helper", "b.c")),
        ];
        let (lo, hi) = (helpers[0].min(helpers[1]), helpers[0].max(helpers[1]));
        // helper (a.c) is merged into the position of helper (b.c): between slow.part.0 and b_entry.
        let seq = [
            at(FuncKey::global("p3")),
            at(FuncKey::local("slow.part.0", "p.c")),
            lo,
            hi,
            at(FuncKey::global("b_entry")),
            at(FuncKey::local("cp.constprop.0", "a.c")),
            at(FuncKey::global("a_entry")),
            at(FuncKey::global("usecp")),
            at(FuncKey::global("main")),
            at(FuncKey::global("hotfn")),
        ];
        assert!(
            seq.windows(2).all(|w| w[0] < w[1]),
            "{linker}: not in order: {seq:x?}"
        );
    }
}

// mold cannot order; the ld -r pre-link route does, and link-flags prints its two steps.
#[test]
fn mold_prelink_route() {
    require!("gcc");
    have_tool("mold");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    build_objects(dir);
    let expected = expected_output(dir);
    write_order(dir, &reversed_order());
    let out = sediment_ok(
        dir,
        &[
            "link",
            "--linker",
            "mold",
            "--order",
            "order.txt",
            "-o",
            "mold.ld",
            "a.o",
            "b.o",
            "p.o",
        ],
    );
    assert!(stderr(&out).contains("mold cannot order functions itself"));
    let flags = sediment(dir, &["link-flags", "--linker", "mold", "mold.ld"]);
    let flags = String::from_utf8(flags.stdout).unwrap();
    assert_eq!(
        flags,
        "ld -r -T mold.ld -o mold.ld.o\n-fuse-ld=mold mold.ld.o\n"
    );
    let mut lines = flags.lines();
    let step1: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let st = Command::new(step1[0])
        .args(&step1[1..])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success());
    let mut args: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    args.extend(["-o", "prog_mold"]);
    gcc(dir, &args);
    let exe = dir.join("prog_mold");
    assert_eq!(run(&exe), expected);
    let all = addresses(&exe);
    let got: Vec<u64> = reversed_order().iter().map(|k| addr(&all, k)).collect();
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "not in order: {got:x?}"
    );
}

// Same inputs give byte-identical files; a different order gives a different file.
#[test]
fn link_output_is_deterministic() {
    require!("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    build_objects(dir);
    write_order(dir, &reversed_order());
    for linker in ["lld", "gold", "bfd", "mold"] {
        let mut outs = Vec::new();
        for i in 0..2 {
            let f = format!("{linker}{i}.out");
            sediment_ok(
                dir,
                &[
                    "link",
                    "--linker",
                    linker,
                    "--order",
                    "order.txt",
                    "-o",
                    &f,
                    "a.o",
                    "b.o",
                    "p.o",
                ],
            );
            outs.push(std::fs::read(dir.join(f)).unwrap());
        }
        assert_eq!(outs[0], outs[1], "{linker}");
        let mut other = reversed_order();
        other.reverse();
        write_order(dir, &other);
        sediment_ok(
            dir,
            &[
                "link",
                "--linker",
                linker,
                "--order",
                "order.txt",
                "-o",
                "x.out",
                "a.o",
                "b.o",
                "p.o",
            ],
        );
        assert_ne!(
            std::fs::read(dir.join("x.out")).unwrap(),
            outs[0],
            "{linker}"
        );
        write_order(dir, &reversed_order());
    }
}

// Bad input: unknown linker, an order from another program, a non-object: one line, no file.
#[test]
fn link_errors_leave_no_output() {
    require!("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    build_objects(dir);
    write_order(dir, &reversed_order());
    let o = sediment(
        dir,
        &[
            "link",
            "--linker",
            "ld64",
            "--order",
            "order.txt",
            "-o",
            "out",
            "a.o",
        ],
    );
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o),
        "sediment: unknown linker `ld64` (known: lld, gold, bfd, mold)\n"
    );
    assert!(!dir.join("out").exists());

    write_order(
        dir,
        &[FuncKey::global("nosuch"), FuncKey::local("other", "x.c")],
    );
    let o = sediment(
        dir,
        &[
            "link",
            "--linker",
            "lld",
            "--order",
            "order.txt",
            "-o",
            "out",
            "a.o",
            "b.o",
        ],
    );
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o),
        "sediment: order.txt: order/profile does not match these objects (0 of 2 functions found; recorded from another program?)\n"
    );
    assert!(!dir.join("out").exists());

    write_order(dir, &reversed_order());
    let o = sediment(
        dir,
        &[
            "link",
            "--linker",
            "gold",
            "--order",
            "order.txt",
            "-o",
            "out",
            "a.o",
            "a.c",
        ],
    );
    assert!(!o.status.success());
    assert_eq!(stderr(&o), "sediment: a.c: not an ELF file or archive\n");
    assert!(!dir.join("out").exists());
}

// Missing entries are one counted warning, and non-function-sections objects are flagged.
#[test]
fn link_warnings_are_counted() {
    require!("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    build_objects(dir);
    gcc(dir, &["-O2", "-c", "p.c", "-o", "p_plain.o"]);
    let mut keys = reversed_order();
    keys.extend(["gone1", "gone2"].map(FuncKey::global));
    write_order(dir, &keys);
    let o = sediment_ok(
        dir,
        &[
            "link",
            "--linker",
            "gold",
            "--order",
            "order.txt",
            "-o",
            "g.txt",
            "a.o",
            "b.o",
            "p_plain.o",
        ],
    );
    let err = stderr(&o);
    assert!(
        err.contains("warning: 2 of 12 order entries not found in the objects: gone1, gone2\n"),
        "{err}"
    );
    assert!(
        err.contains("warning: 1 objects not built with -ffunction-sections"),
        "{err}"
    );
    assert!(
        err.contains(
            "warning: 2 ordered functions skipped: their section holds other functions too"
        ),
        "{err}"
    );
    let text = std::fs::read_to_string(dir.join("g.txt")).unwrap();
    assert!(!text.contains(".text\n"));
}

// A name carrying linker-script syntax (INCLUDE, SECTIONS, braces) never reaches any output.
#[test]
fn script_injection_never_reaches_output() {
    require!("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    build_objects(dir);
    let evil_sym = "ev}INCLUDE evil.ld SECTIONS{";
    std::fs::write(
        dir.join("evil.s"),
        format!(
            "\t.section .text.evil_sec,\"ax\",@progbits\n\t.globl \"{evil_sym}\"\n\t.type \"{evil_sym}\", @function\n\"{evil_sym}\":\n\tret\n\t.size \"{evil_sym}\", 1\n\t.section \".text.x}}INCLUDE evil.ld\",\"ax\",@progbits\n\t.globl okname\n\t.type okname, @function\nokname:\n\tret\n\t.size okname, 1\n\t.section .note.GNU-stack,\"\",@progbits\n"
        ),
    )
    .unwrap();
    gcc(dir, &["-c", "evil.s", "-o", "evil.o"]);
    write_order(
        dir,
        &[
            FuncKey::global(evil_sym),
            FuncKey::global("okname"),
            FuncKey::global("main"),
        ],
    );
    for linker in ["lld", "gold", "bfd", "mold"] {
        let f = format!("{linker}.out");
        let o = sediment_ok(
            dir,
            &[
                "link",
                "--linker",
                linker,
                "--order",
                "order.txt",
                "-o",
                &f,
                "evil.o",
                "b.o",
            ],
        );
        let text = std::fs::read_to_string(dir.join(&f)).unwrap();
        assert!(
            !text.contains("INCLUDE") && !text.contains("evil.ld"),
            "{linker}: {text}"
        );
        assert!(
            stderr(&o).contains("warning: 1 order entries skipped: their name, section or object path has characters"),
            "{linker}: {}",
            stderr(&o)
        );
        match linker {
            "lld" => assert_eq!(text, "okname\nmain\n"),
            "gold" => assert_eq!(text, ".text.evil_sec\n.text.startup.main\n"),
            _ => assert!(text.contains(
                "*/evil.o(.text.evil_sec) [e]vil.o(.text.evil_sec)\n    */b.o(.text.startup.main)"
            )),
        }
    }
}

// Regression: a function of hidden visibility (a library-internal global, like Lua's
// `LUAI_FUNC`) is made local by the linker; lld writes it under its object's STT_FILE, GNU ld
// after an empty one. Its key must not depend on that: the order's key has to name the global
// that `sediment link` finds in the object files (before the fix, an order made from an lld
// binary lost every such function: "not found in the objects").
#[test]
fn hidden_functions_have_one_key_whatever_the_linker() {
    if !have_tool("ld.lld") {
        eprintln!("skipped: ld.lld not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("h.c"),
        "__attribute__((noinline)) static int st(int x) { return x * 7 + 1; }\n\
         __attribute__((visibility(\"hidden\"), noinline)) int hid(int x) { return st(x) + 3; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("m.c"),
        "int hid(int);\nint main(int argc, char **argv) { (void)argv; return hid(argc) == 11 ? 0 : 1; }\n",
    )
    .unwrap();
    gcc(dir, &["-O2", "-ffunction-sections", "-c", "h.c", "m.c"]);
    let mut orders = Vec::new();
    for ld in ["lld", "bfd"] {
        let exe = dir.join(format!("prog_{ld}"));
        gcc(
            dir,
            &[
                &format!("-fuse-ld={ld}"),
                "h.o",
                "m.o",
                "-o",
                exe.to_str().unwrap(),
            ],
        );
        assert_eq!(run(&exe), "");
        let bin = sediment_elf::Binary::parse(ld, &std::fs::read(&exe).unwrap()).unwrap();
        let key = |name: &str| {
            let found: Vec<&FuncKey> = bin
                .functions
                .iter()
                .map(|s| &s.key)
                .filter(|k| k.name == name)
                .collect();
            assert_eq!(found.len(), 1, "{ld}: {name}: {found:?}");
            found[0].clone()
        };
        assert_eq!(key("hid"), FuncKey::global("hid"), "{ld}");
        assert_eq!(key("st"), FuncKey::local("st", "h.c"), "{ld}");
        orders.push(vec![key("st"), key("hid"), key("main")]);
    }
    assert_eq!(orders[0], orders[1], "the same keys from both linkers");
    // The keys read from the lld binary find every function in the objects.
    write_order(dir, &orders[0]);
    let out = sediment_ok(
        dir,
        &[
            "link",
            "--linker",
            "lld",
            "--order",
            "order.txt",
            "-o",
            "o.lld",
            "h.o",
            "m.o",
        ],
    );
    assert!(
        stderr(&out).contains("3 of 3 functions found"),
        "{}",
        stderr(&out)
    );
}

// Regression: objects built without -ffunction-sections made `link` fail with only
// "(see warnings)", naming no file and printing no warnings. The one-line error now says
// which function, in which object, and why; the warnings come before it; nothing is written.
#[test]
fn nothing_emitted_names_the_object_and_the_reason() {
    if !have_tool("gcc") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("p.c"), P_C).unwrap();
    gcc(dir, &["-O1", "-c", "p.c", "-o", "nofs.o"]);
    write_order(dir, &[FuncKey::global("p2"), FuncKey::global("p1")]);
    for linker in ["gold", "mold"] {
        let out = sediment(
            dir,
            &[
                "link",
                "--linker",
                linker,
                "--order",
                "order.txt",
                "-o",
                "out",
                "nofs.o",
            ],
        );
        let err = stderr(&out);
        assert!(!out.status.success(), "{err}");
        assert!(!dir.join("out").exists());
        let last = err.lines().last().unwrap();
        assert_eq!(
            last,
            "sediment: nothing left to order: all 2 matching functions were skipped: p2 in nofs.o: \
             its section holds other functions too (object not built with -ffunction-sections); \
             and 1 more (see the warnings)",
            "{err}"
        );
        assert!(
            err.contains("sediment link: warning: 1 objects not built with -ffunction-sections"),
            "{err}"
        );
    }
}

// Regression: `link-flags` printed flags for a missing file, turned any file into a bfd `-T`
// script and gave mold a GNU ld script. It now reads the file and checks that it is what
// `sediment link` writes for that linker.
#[test]
fn link_flags_checks_the_file() {
    use sediment_link::emit::{BFD_FRAGMENT_HEADER, MOLD_PRELINK_HEADER};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let frag = format!("{BFD_FRAGMENT_HEADER}\nSECTIONS\n{{\n}}\n");
    std::fs::write(dir.join("frag.ld"), &frag).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello world\n").unwrap();
    std::fs::write(dir.join("order.lld"), "main\nwork\n").unwrap();
    let fails = |linker: &str, file: &str, want: &str| {
        let out = sediment(dir, &["link-flags", "--linker", linker, file]);
        let err = stderr(&out);
        assert!(
            !out.status.success() && out.stdout.is_empty(),
            "{linker} {file}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("sediment: {file}: ")), "{err}");
        assert!(err.contains(want), "{err}");
    };
    fails("lld", "nonexist", "cannot open");
    fails("bfd", "notes.txt", "its first line is `hello world`");
    fails("mold", "frag.ld", MOLD_PRELINK_HEADER);
    fails("lld", "frag.ld", "line 1 `/* sediment: GNU ld");
    fails("gold", "notes.txt", "is not a section name");
    let ok = |linker: &str, file: &str| {
        let out = sediment_ok(dir, &["link-flags", "--linker", linker, file]);
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        ok("bfd", "frag.ld"),
        "-fuse-ld=bfd -Wl,--section-ordering-file=frag.ld\n"
    );
    assert!(ok("lld", "order.lld").contains("--symbol-ordering-file=order.lld"));
}

// Regression: an empty or cut archive gave `sediment: : no object defines a function` (no
// file name), and `link` blamed the order file. Now the archive is named, and a cut one is
// reported as truncated.
#[test]
fn empty_and_cut_archives_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("empty.a"), b"!<arch>\n").unwrap();
    let mut cut =
        b"!<arch>\n/               0           0     0     0       32        `\n".to_vec();
    cut.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0]);
    std::fs::write(dir.join("cut75.a"), &cut).unwrap();
    write_order(dir, &[FuncKey::global("main")]);
    let err_of = |args: &[&str]| {
        let out = sediment(dir, args);
        assert!(!out.status.success());
        stderr(&out)
    };
    let import = |a: &str| {
        err_of(&[
            "import",
            "--format",
            "objects",
            "--program",
            "prog",
            "-o",
            "x.sprof",
            a,
        ])
    };
    assert_eq!(
        import("empty.a"),
        "sediment: empty.a: no object defines a function (an empty archive, or no code?)\n"
    );
    assert_eq!(
        import("cut75.a"),
        "sediment: cut75.a: archive truncated: the member at offset 8 has 7 of its 32 bytes\n"
    );
    let link = err_of(&[
        "link",
        "--linker",
        "lld",
        "--order",
        "order.txt",
        "-o",
        "o.lld",
        "empty.a",
    ]);
    assert!(
        link.starts_with("sediment: empty.a: no object defines"),
        "{link}"
    );
    assert!(!dir.join("x.sprof").exists() && !dir.join("o.lld").exists());
}

// Regression: `link` warned about the C runtime's own functions (`_start`, `frame_dummy`,
// `register_tm_clones`, ...) as order entries "not found in the objects", though they live in
// the objects the compiler driver adds and no user can order them. A real recording of a gcc
// program has them: they are counted in one line of their own, and no warning names them.
#[test]
fn link_counts_the_c_runtime_apart() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("p.c"),
        "#include <stdio.h>\n\
         __attribute__((noinline)) int work(int x) { return x * 7 + 1; }\n\
         int main(void) { int s = 0; for (int i = 0; i < 1000; i++) s += work(i);\n\
           printf(\"%d\\n\", s); return 0; }\n",
    )
    .unwrap();
    crate::common::run(d, "gcc", &["-O2", "-ffunction-sections", "-c", "p.c"]);
    crate::common::run(d, "gcc", &["p.o", "-o", "p"]);
    let profile = crate::common::record_callgrind(d, "p.sprof", "./p");
    let runtime: Vec<&str> = profile
        .functions
        .iter()
        .map(|f| f.key.name.as_str())
        .filter(|n| sediment_profile::C_RUNTIME.contains(n))
        .collect();
    assert!(
        runtime.len() >= 2,
        "premise: the recording has the C runtime: {runtime:?}"
    );
    sediment_ok(
        d,
        &[
            "order",
            "-p",
            "p.sprof",
            "--algorithm",
            "hot",
            "-o",
            "p.order",
        ],
    );
    let order = std::fs::read_to_string(d.join("p.order")).unwrap();
    assert!(
        order.contains("_start"),
        "premise: the order has _start: {order}"
    );
    let out = sediment_ok(
        d,
        &[
            "link", "--linker", "lld", "--order", "p.order", "-o", "p.sym", "p.o",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("warning"), "{err}");
    let line: Vec<&str> = err.lines().filter(|l| l.contains("C runtime")).collect();
    assert_eq!(line.len(), 1, "{err}");
    assert!(
        line[0].contains(&format!("{} entries are the C runtime's", runtime.len())),
        "{err}"
    );
    let sym = std::fs::read_to_string(d.join("p.sym")).unwrap();
    let mut written: Vec<&str> = sym.lines().collect();
    written.sort_unstable();
    assert_eq!(written, ["main", "work"]);
}
