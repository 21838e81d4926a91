//! `sediment align`: the alignment sweep, the selection and the aligned objects, on a tiny
//! static program whose function sizes are known byte for byte (written in assembler, no libc,
//! no C runtime), linked with every linker.

use std::path::Path;

use crate::common::{fails_one_line, run, sediment, sediment_ok};

/// `_start` (28 bytes: a loop of 1000 calls to `f1` and `f2`, then `exit`), `f1` (38 bytes),
/// `f2` (50 bytes) and `f3` (20 bytes, never run), each in its own section aligned to 16,
/// in that order: as linked at 0x401000 they start at +0, +32, +80 and +144, 164 bytes of code.
const TINY_S: &str = "\
.section .text._start,\"ax\",@progbits
.globl _start
.type _start,@function
.p2align 4
_start:
  mov $1000, %ecx
1:
  call f1
  call f2
  dec %ecx
  jnz 1b
  mov $60, %eax
  xor %edi, %edi
  syscall
.size _start, .-_start
.section .text.f1,\"ax\",@progbits
.globl f1
.type f1,@function
.p2align 4
f1:
  .fill 37, 1, 0x90
  ret
.size f1, .-f1
.section .text.f2,\"ax\",@progbits
.globl f2
.type f2,@function
.p2align 4
f2:
  .fill 49, 1, 0x90
  ret
.size f2, .-f2
.section .text.f3,\"ax\",@progbits
.globl f3
.type f3,@function
.p2align 4
f3:
  .fill 19, 1, 0x90
  ret
.size f3, .-f3
.section .note.GNU-stack,\"\",@progbits
";

/// Assembles `tiny.o` in `dir` and links `name` from `objects` with gcc and `-fuse-ld=LD`
/// (`None`: the driver's default).
fn link(dir: &Path, ld: Option<&str>, objects: &[&str], name: &str) {
    let fuse = ld.map(|l| format!("-fuse-ld={l}"));
    let mut args = vec!["-static", "-nostdlib", "-no-pie", "-o", name];
    if let Some(f) = &fuse {
        args.push(f);
    }
    args.extend_from_slice(objects);
    run(dir, "gcc", &args);
}

fn assemble(dir: &Path) {
    std::fs::write(dir.join("tiny.s"), TINY_S).unwrap();
    run(dir, "gcc", &["-c", "tiny.s", "-o", "tiny.o"]);
}

/// Start of each named function in the linked binary, from Sediment's ELF reader.
fn starts(path: &Path, names: &[&str]) -> Vec<u64> {
    let data = std::fs::read(path).unwrap();
    let bin = sediment_elf::Binary::parse(&path.display().to_string(), &data).unwrap();
    names
        .iter()
        .map(|n| {
            bin.functions
                .iter()
                .find(|f| f.key.name == *n)
                .unwrap_or_else(|| panic!("{n} not in {}", path.display()))
                .address
        })
        .collect()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap()
}

#[test]
fn align_sweep_exact_on_a_tiny_program() {
    // Code bytes per alignment, by hand from the sizes 28, 38, 50, 20: packed at 1 and 2
    // (136), then 140, 148, the linked 164 at 16, 180, 212, 404, 788, 1556. The run fetches
    // all of _start, f1 and f2 from one page, and nothing evicts: I1 misses are the lines
    // touched, 2 when f1 and f2 share lines with _start (alignments 1 to 8: bytes 0..122) and
    // 3 otherwise (the linked layout: 0..28, 32..70, 80..130). A second layout a page further
    // on changes no line offset: the same counts, and the noise range is [3, 3]. The best row
    // is 1 (fewest misses; 2 ties at the same size and comes later), below it: a win.
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assemble(d);
    link(d, None, &["tiny.o"], "tiny");
    let v = json(&sediment(
        d,
        &[
            "align",
            "--binary",
            "tiny",
            "--shifts",
            "2",
            "--shift-step",
            "4096",
            "--json",
            "--",
        ],
    ));
    let rows = v["rows"].as_array().unwrap();
    let col = |f: &dyn Fn(&serde_json::Value) -> serde_json::Value| -> Vec<serde_json::Value> {
        rows.iter().map(f).collect()
    };
    let labels: Vec<serde_json::Value> = col(&|r| r["align"].clone());
    assert_eq!(
        labels,
        [
            "as linked",
            "1",
            "2",
            "4",
            "8",
            "16",
            "32",
            "64",
            "128",
            "256",
            "512"
        ]
    );
    let bytes: Vec<u64> = col(&|r| r["code_bytes"].clone())
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(
        bytes,
        [164, 136, 136, 140, 148, 164, 180, 212, 404, 788, 1556]
    );
    for key in ["i1_misses_32k_8way", "i1_misses_16k_4way"] {
        for shift in 0..2 {
            let misses: Vec<u64> = col(&|r| r["shifts"][shift][key].clone())
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(misses, [3, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3], "{key} {shift}");
        }
    }
    let itlb: Vec<u64> = col(&|r| r["shifts"][0]["itlb_misses_64"].clone())
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(itlb, [1; 11]);
    // Both layouts agree, so every row is perfectly stable.
    assert!(rows.iter().all(|r| r["i1_spread"].as_f64() == Some(1.0)));
    assert_eq!(v["best"], "1");
    assert_eq!(v["best_outside_noise"], true);
    assert_eq!(v["noise_range"], serde_json::json!([3, 3]));
}

#[test]
fn align_select_and_apply_with_every_linker() {
    // The gain of starting on a line, averaged over the four 16-byte starts: f2 (50 bytes,
    // 1000 runs) 750 line fetches, f1 (38 bytes) 500, _start's loop 250. A budget of 30% of
    // the 164 bytes (49 bytes) pays for one function's worst-case 48 bytes of padding: f2.
    // Its section, aligned to 64 in the copy of tiny.o, puts it at +128 (f1 ends at +70)
    // with every linker; f1 stays at +32, and the code grows by 48 bytes, within the budget.
    require!("gcc", "valgrind", "ld.lld", "ld.gold", "ld.bfd");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assemble(d);
    link(d, None, &["tiny.o"], "tiny");
    let v = json(&sediment(
        d,
        &[
            "align",
            "--binary",
            "tiny",
            "--select",
            "chosen",
            "--max-growth",
            "30",
            "--shifts",
            "1",
            "--json",
            "--",
        ],
    ));
    let chosen = std::fs::read_to_string(d.join("chosen")).unwrap();
    let names: Vec<&str> = chosen
        .lines()
        .filter(|l| !l.starts_with("sediment-order") && !l.starts_with("meta "))
        .collect();
    assert_eq!(names, ["f2 -"]);
    assert!(chosen.contains("meta boundary 64\n"), "{chosen}");
    let labels: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["align"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["as linked", "all 64", "chosen 64"]);
    // Chosen: 0, 32, 128 (f2 on its line), 192 (f3 back on 16): 212 bytes.
    assert_eq!(v["rows"][2]["code_bytes"], 212);

    let out = sediment_ok(
        d,
        &["align", "--apply", "chosen", "-o", "aligned", "tiny.o"],
    );
    let copies = String::from_utf8(out.stdout).unwrap();
    assert_eq!(copies.trim(), "aligned/0000-tiny.o");
    for ld in ["lld", "gold", "bfd"] {
        let name = format!("tiny-{ld}");
        link(d, Some(ld), &["aligned/0000-tiny.o"], &name);
        let s = starts(&d.join(&name), &["_start", "f1", "f2", "f3"]);
        let rel: Vec<u64> = s.iter().map(|a| a - s[0]).collect();
        assert_eq!(rel, [0, 32, 128, 192], "{ld}");
        assert_eq!(s[2] % 64, 0, "{ld}");
        // The program still runs and exits 0.
        let status = std::process::Command::new(d.join(&name)).status().unwrap();
        assert!(status.success(), "{ld}");
    }
    // The original object is untouched: linked from it, f2 stays at +80.
    let s = starts(&d.join("tiny"), &["_start", "f2"]);
    assert_eq!(s[1] - s[0], 80);
}

#[test]
fn align_build_relinks_every_alignment_exactly() {
    // `--build` links tiny.o unchanged and at every alignment of the sweep. Read back from
    // each built ELF, the four functions start where the sizes 28, 38, 50, 20 put them when
    // each start is rounded up to the alignment (by hand), every start a multiple of it; the
    // built code bytes equal the predicted ones, and so do the measured I1 misses (the same
    // simulator, on real relinks).
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assemble(d);
    link(d, None, &["tiny.o"], "tiny");
    let v = json(&sediment(
        d,
        &[
            "align",
            "--binary",
            "tiny",
            "--build",
            "-o",
            "built",
            "--shifts",
            "1",
            "--link-arg=-static",
            "--link-arg=-nostdlib",
            "--link-arg=-no-pie",
            "--json",
            "tiny.o",
            "--",
        ],
    ));
    let expected: [(u64, [u64; 4]); 10] = [
        (1, [0, 28, 66, 116]),
        (2, [0, 28, 66, 116]),
        (4, [0, 28, 68, 120]),
        (8, [0, 32, 72, 128]),
        (16, [0, 32, 80, 144]),
        (32, [0, 32, 96, 160]),
        (64, [0, 64, 128, 192]),
        (128, [0, 128, 256, 384]),
        (256, [0, 256, 512, 768]),
        (512, [0, 512, 1024, 1536]),
    ];
    for (a, rel) in expected {
        let s = starts(
            &d.join(format!("built/align-{a:04}")),
            &["_start", "f1", "f2", "f3"],
        );
        let got: Vec<u64> = s.iter().map(|x| x - s[0]).collect();
        assert_eq!(got, rel, "alignment {a}");
        assert!(s.iter().all(|x| x % a == 0), "alignment {a}: {s:?}");
    }
    let s = starts(&d.join("built/align-0000"), &["_start", "f1", "f2", "f3"]);
    assert_eq!(
        s.iter().map(|x| x - s[0]).collect::<Vec<_>>(),
        [0, 32, 80, 144]
    );
    let (predicted, built) = (
        v["predicted"]["rows"].as_array().unwrap(),
        v["built"]["rows"].as_array().unwrap(),
    );
    assert_eq!(predicted.len(), 11);
    assert_eq!(built.len(), 11);
    for (p, b) in predicted.iter().zip(built) {
        assert_eq!(p["align"], b["align"]);
        assert_eq!(p["code_bytes"], b["code_bytes"], "{}", p["align"]);
        for key in ["i1_misses_32k_8way", "i1_misses_16k_4way"] {
            assert_eq!(
                p["shifts"][0][key], b["shifts"][0][key],
                "{} {key}",
                p["align"]
            );
        }
    }
}

#[test]
fn align_bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("junk.o"), "not an object").unwrap();
    std::fs::write(d.join("list"), "sediment-order 1\nf2 -\n").unwrap();
    // A good object before the bad one: no copy of either is written.
    std::fs::write(d.join("tiny.s"), TINY_S).unwrap();
    let gcc = std::process::Command::new("gcc")
        .args(["-c", "tiny.s", "-o", "tiny.o"])
        .current_dir(d)
        .status()
        .is_ok_and(|s| s.success());
    let objects: &[&str] = if gcc {
        &["tiny.o", "junk.o"]
    } else {
        &["junk.o"]
    };
    let mut a = vec!["align", "--apply", "list", "-o", "out"];
    a.extend_from_slice(objects);
    fails_one_line(d, &a, &["junk.o"]);
    assert!(!d.join("out").exists());
    fails_one_line(
        d,
        &["align", "--binary", "x", "--boundary", "48"],
        &["--boundary"],
    );
}

/// Two objects. `a.s`: `_start` (28 bytes: 1000 calls of `h1` and `h2`, then `exit`) and `g`
/// (16 bytes, never run); `b.s`: `c1` (0xfb0 bytes) and `c2` (0x40), never run, then `h1` and
/// `h2` (48 bytes each, run 1000 times). Linked static at 0x401000: `_start` +0, `g` +0x20,
/// `c1` +0x30, `c2` +0xfe0, `h1` +0x1020, `h2` +0x1050; 0x1080 bytes of code.
const CAPS_A: &str = "\
.section .text._start,\"ax\",@progbits
.globl _start
.type _start,@function
.p2align 4
_start:
  mov $1000, %ecx
1:
  call h1
  call h2
  dec %ecx
  jnz 1b
  mov $60, %eax
  xor %edi, %edi
  syscall
.size _start, .-_start
.section .text.g,\"ax\",@progbits
.globl g
.type g,@function
.p2align 4
g:
  .fill 15, 1, 0x90
  ret
.size g, .-g
.section .note.GNU-stack,\"\",@progbits
";

const CAPS_B: &str = "\
.section .text.c1,\"ax\",@progbits
.globl c1
.type c1,@function
.p2align 4
c1:
  .fill 0xfaf, 1, 0x90
  ret
.size c1, .-c1
.section .text.c2,\"ax\",@progbits
.globl c2
.type c2,@function
.p2align 4
c2:
  .fill 0x3f, 1, 0x90
  ret
.size c2, .-c2
.section .text.h1,\"ax\",@progbits
.globl h1
.type h1,@function
.p2align 4
h1:
  .fill 47, 1, 0x90
  ret
.size h1, .-h1
.section .text.h2,\"ax\",@progbits
.globl h2
.type h2,@function
.p2align 4
h2:
  .fill 47, 1, 0x90
  ret
.size h2, .-h2
.section .note.GNU-stack,\"\",@progbits
";

// `--grow-after NAME` where two statics of different objects have that name: which one grows
// is not the user's choice, so both the sweep and the capsule choice refuse it in one line.
#[test]
fn align_grow_after_a_shared_static_name_is_refused() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assemble(d);
    // A local `f1` beside tiny.o's global one.
    let dup = TINY_S
        .split(".section .text.f1")
        .nth(1)
        .and_then(|t| t.split(".section .text.f2").next())
        .unwrap()
        .replace(".globl f1\n", "");
    std::fs::write(d.join("dup.s"), format!(".section .text.f1{dup}")).unwrap();
    run(d, "gcc", &["-c", "dup.s", "-o", "dup.o"]);
    link(d, None, &["tiny.o", "dup.o"], "two");
    let want = ["--grow-after f1: 2 functions of the binary have that name"];
    let align = |mode: &[&'static str], grow: &'static str| {
        let mut a = vec!["align", "--binary", "two"];
        a.extend_from_slice(mode);
        a.extend_from_slice(&["--grow-after", grow, "--", "./two"]);
        a
    };
    fails_one_line(d, &align(&["--shifts", "2"], "f1"), &want);
    fails_one_line(d, &align(&["--select", "c", "--capsules"], "f1"), &want);
    // A unique name is taken.
    sediment_ok(d, &align(&["--shifts", "2"], "f2"));
}

#[test]
fn align_capsules_at_the_cheapest_protecting_boundary() {
    // Growth at the end of a.o's code (`g`) moves `h1` and `h2` against `_start`. A capsule
    // at `c1`, `c2` or `h1` protects both; on a 4 KiB boundary they need 4048, 32 and 4064
    // bytes of padding: `c2` is chosen (1% of the 4224 bytes of code is 42). Given the objects
    // instead of `--grow-after`, growth at each object's end gives the same choice (growth
    // after `h2` moves nothing). Applied, `c2` starts at 0x402000 with every linker, `h1` and
    // `h2` 32 bytes later than linked, and the code grows by 32 bytes. At 0.5% (21 bytes) no
    // capsule fits.
    require!("gcc", "valgrind", "ld.lld", "ld.gold", "ld.bfd");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.s"), CAPS_A).unwrap();
    std::fs::write(d.join("b.s"), CAPS_B).unwrap();
    run(d, "gcc", &["-c", "a.s", "-o", "a.o"]);
    run(d, "gcc", &["-c", "b.s", "-o", "b.o"]);
    link(d, None, &["a.o", "b.o"], "caps");
    let names = ["_start", "g", "c1", "c2", "h1", "h2"];
    let linked = starts(&d.join("caps"), &names);
    let rel: Vec<u64> = linked.iter().map(|a| a - linked[0]).collect();
    assert_eq!(rel, [0, 0x20, 0x30, 0xfe0, 0x1020, 0x1050]);
    assert_eq!(linked[0] % 4096, 0);
    let chosen_names = |file: &str| -> Vec<String> {
        let text = std::fs::read_to_string(d.join(file)).unwrap();
        assert!(text.contains("meta boundary 4096\n"), "{text}");
        text.lines()
            .filter(|l| !l.starts_with("sediment-order") && !l.starts_with("meta "))
            .map(str::to_string)
            .collect()
    };
    let select = |file: &str, growth: &str, extra: &[&str]| {
        let mut a = vec![
            "align",
            "--binary",
            "caps",
            "--select",
            file,
            "--capsules",
            "--max-growth",
            growth,
            "--shifts",
            "1",
            "--json",
        ];
        a.extend_from_slice(extra);
        a.push("--");
        json(&sediment(d, &a))
    };
    let v = select("by-growth", "1", &["--grow-after", "g"]);
    assert_eq!(chosen_names("by-growth"), ["c2 -"]);
    assert_eq!(v["rows"][1]["align"], "capsules 4096");
    assert_eq!(v["rows"][1]["code_bytes"], 0x1080 + 32);
    select("by-objects", "1", &["a.o", "b.o"]);
    assert_eq!(chosen_names("by-objects"), ["c2 -"]);
    select("none", "0.5", &["--grow-after", "g"]);
    assert!(chosen_names("none").is_empty());

    let out = sediment(
        d,
        &[
            "align",
            "--apply",
            "by-objects",
            "-o",
            "capsuled",
            "a.o",
            "b.o",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ld in ["lld", "gold", "bfd"] {
        let name = format!("caps-{ld}");
        link(
            d,
            Some(ld),
            &["capsuled/0000-a.o", "capsuled/0001-b.o"],
            &name,
        );
        let s = starts(&d.join(&name), &names);
        let rel: Vec<u64> = s.iter().map(|a| a - s[0]).collect();
        assert_eq!(rel, [0, 0x20, 0x30, 0x1000, 0x1040, 0x1070], "{ld}");
        assert_eq!(s[3] % 4096, 0, "{ld}");
        let status = std::process::Command::new(d.join(&name)).status().unwrap();
        assert!(status.success(), "{ld}");
    }
}
