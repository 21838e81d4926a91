//! `sediment diff` end to end: two real gcc builds of one program, the second with one
//! function grown (the seed's "one unrelated change moved everything after it"), compared
//! through their ELF symbols. Expected numbers are read from the two binaries' symbol tables
//! with `sediment_elf`, never written into the test.

use crate::common::{fails_one_line, have_tool, sediment, sediment_ok};
use sediment_elf::Binary;
use sediment_profile::{FuncKey, Meta, ProfileBuilder};
use std::path::Path;
use std::process::Command;

/// Four functions in definition order; `-DGROW` adds work to `grows` only.
const SOURCE: &str = r#"
#include <stdio.h>
__attribute__((noinline)) unsigned first(unsigned x) { return x * 3 + 1; }
__attribute__((noinline)) unsigned grows(unsigned x) {
    unsigned s = x;
#ifdef GROW
    for (unsigned i = 0; i < x % 13; i++) s = s * 2654435761u + i;
    s ^= s >> 7;
#endif
    return s + 5;
}
__attribute__((noinline)) unsigned hot_after(unsigned x) { return (x << 3) ^ (x >> 2); }
__attribute__((noinline)) unsigned last(unsigned x) { return x - 9; }
int main(int argc, char **argv) {
    (void)argv;
    unsigned s = 0;
    for (unsigned i = 0; i < 1000; i++) s += hot_after(first(i + (unsigned)argc));
    printf("%u\n", grows(s) + last(s));
    return 0;
}
"#;

fn build(dir: &Path, name: &str, grow: bool) -> Binary {
    let src = dir.join("prog.c");
    std::fs::write(&src, SOURCE).unwrap();
    let out = dir.join(name);
    let mut cc = Command::new("gcc");
    cc.args([
        "-O1",
        "-fno-toplevel-reorder",
        "-fno-inline",
        "-fuse-ld=bfd",
        "-o",
    ])
    .arg(&out)
    .arg(&src);
    if grow {
        cc.arg("-DGROW");
    }
    let st = cc.status().unwrap();
    assert!(st.success(), "gcc failed");
    Binary::parse(name, &std::fs::read(&out).unwrap()).unwrap()
}

fn sym<'a>(b: &'a Binary, name: &str) -> &'a sediment_elf::Symbol {
    b.functions
        .iter()
        .find(|s| s.key.name == name)
        .unwrap_or_else(|| panic!("{name} not in the binary"))
}

#[test]
fn diff_names_the_grown_function_as_the_cause_of_the_shift() {
    if !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let old = build(dir.path(), "old", false);
    let new = build(dir.path(), "new", true);
    let (g_old, g_new) = (sym(&old, "grows"), sym(&new, "grows"));
    assert!(
        g_new.size > g_old.size,
        "premise: -DGROW makes grows() larger"
    );
    let (h_old, h_new) = (sym(&old, "hot_after"), sym(&new, "hot_after"));
    assert!(
        h_old.address > g_old.address,
        "premise: definition order kept"
    );

    // A profile that makes hot_after and first hot.
    let mut pb = ProfileBuilder::new(Meta {
        binary: "old".into(),
        source: "test".into(),
        ..Meta::default()
    });
    pb.add_self(&FuncKey::global("hot_after"), 900);
    pb.add_self(&FuncKey::global("first"), 100);
    std::fs::write(dir.path().join("p.sprof"), pb.build().to_text()).unwrap();

    let out = sediment_ok(
        dir.path(),
        &["diff", "old", "new", "-p", "p.sprof", "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let segments = v["segments"].as_array().unwrap();
    let seg = segments
        .iter()
        .find(|s| s["first"] == "hot_after")
        .expect("a segment starts at the function after the grown one");
    let shift = h_new.address as i64 - h_old.address as i64;
    assert_eq!(seg["shift"].as_i64().unwrap(), shift);
    let cause = &seg["cause"];
    assert_eq!(cause["after"], "grows");
    assert_eq!(
        cause["size_change"].as_i64().unwrap(),
        g_new.size as i64 - g_old.size as i64
    );
    // Size and padding account for the whole shift change (nothing arrived or left).
    let before = segments
        .iter()
        .take_while(|s| s["first"] != "hot_after")
        .last()
        .unwrap();
    assert_eq!(
        cause["size_change"].as_i64().unwrap() + cause["padding_change"].as_i64().unwrap(),
        shift - before["shift"].as_i64().unwrap()
    );
    let grown = v["size_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "grows")
        .expect("grows is listed as a size change");
    assert_eq!(grown["new_size"].as_u64().unwrap(), g_new.size);

    // Hot footprint: lines covered by the two hot functions, computed here from the symbols.
    let lines = |b: &Binary| {
        let mut ls: Vec<u64> = ["hot_after", "first"]
            .iter()
            .flat_map(|n| {
                let s = sym(b, n);
                s.address / 64..=(s.address + s.size.max(1) - 1) / 64
            })
            .collect();
        ls.sort_unstable();
        ls.dedup();
        ls.len() as u64
    };
    assert_eq!(
        v["hot"]["old_executed"]["lines"].as_u64().unwrap(),
        lines(&old)
    );
    assert_eq!(
        v["hot"]["new_executed"]["lines"].as_u64().unwrap(),
        lines(&new)
    );

    // The heat map of both builds marks exactly those lines as executed.
    sediment_ok(
        dir.path(),
        &["heatmap", "old", "new", "-p", "p.sprof", "-o", "heat.svg"],
    );
    let svg = std::fs::read_to_string(dir.path().join("heat.svg")).unwrap();
    for (build, b) in [("old", &old), ("new", &new)] {
        let said = format!("{} cells executed", lines(b));
        assert!(svg.contains(&said), "{build}: {said} not in the SVG");
    }
    // One coloured cell (not white, grey or the panel frame) per executed line of each build,
    // and the hottest cell at the dark-red end of the scale.
    let fills: Vec<&str> = svg
        .lines()
        .filter(|l| l.starts_with("<rect "))
        .filter_map(|l| l.split("fill=\"").nth(1)?.split('"').next())
        .collect();
    let heated = fills
        .iter()
        .filter(|f| !["white", "none", "#dddddd"].contains(f))
        .count() as u64;
    assert_eq!(heated, lines(&old) + lines(&new));
    assert!(fills.contains(&"#bd0026"), "no cell at full heat");
    if have_tool("xmllint") {
        let st = Command::new("xmllint")
            .arg("--noout")
            .arg(dir.path().join("heat.svg"))
            .status()
            .unwrap();
        assert!(st.success(), "heat.svg is well-formed XML");
    }

    // The text report says the same in words, and the same inputs give the same bytes.
    let text = sediment_ok(dir.path(), &["diff", "old", "new", "-p", "p.sprof"]);
    let t = String::from_utf8(text.stdout.clone()).unwrap();
    assert!(t.contains("grows size +"), "{t}");
    let again = sediment(dir.path(), &["diff", "old", "new", "-p", "p.sprof"]);
    assert_eq!(text.stdout, again.stdout);
}

#[test]
fn diff_of_a_non_elf_file_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk"), b"not an elf file").unwrap();
    let out = sediment(dir.path(), &["diff", "junk", "junk"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("junk"), "{err}");
}

/// Compiles `int main(void) { return 0; }` into `dir/name`: a program that shares no function
/// name with [`SOURCE`] but `main` and the C start-up code.
fn build_other(dir: &Path, name: &str) {
    std::fs::write(dir.join("other.c"), "int main(void) { return 0; }\n").unwrap();
    let st = Command::new("gcc")
        .args(["-O1", "-o", name, "other.c"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed");
}

/// Runs `sediment` expecting failure: one stderr line containing every needle, and `output`
/// (relative to `dir`) not created.
fn fails_with(dir: &Path, args: &[&str], needles: &[&str], output: &str) {
    fails_one_line(dir, args, needles);
    assert!(!dir.join(output).exists(), "{args:?} wrote {output}");
}

// Regression: an object file where a linked binary is needed read as one function at address 0
// and `diff`, `heatmap` and `match` exited 0. Each now names the file and what it is.
#[test]
fn regress_object_file_is_refused_where_a_binary_is_needed() {
    if !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d, "old", false);
    let st = Command::new("gcc")
        .args(["-O1", "-c", "-o", "prog.o", "prog.c"])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(st.success(), "gcc -c failed");
    let mut pb = ProfileBuilder::new(Meta {
        binary: "old".into(),
        source: "test".into(),
        ..Meta::default()
    });
    pb.add_self(&FuncKey::global("hot_after"), 900);
    std::fs::write(d.join("p.sprof"), pb.build().to_text()).unwrap();
    let what = "prog.o: a relocatable object (.o), not a linked executable or shared library";
    fails_with(d, &["diff", "old", "prog.o"], &[what], "none");
    fails_with(d, &["heatmap", "prog.o", "-o", "h.svg"], &[what], "h.svg");
    let matching = [
        "match", "-p", "p.sprof", "--binary", "prog.o", "-o", "m.sprof",
    ];
    fails_with(d, &matching, &[what], "m.sprof");
}

// Regression: a profile of another program (none of its weight but `main`'s names a function
// of the builds) was silently dropped by `diff` and `heatmap`; now it is an error naming the
// profile, the binaries and the share found.
#[test]
fn regress_profile_of_another_program_is_refused() {
    if !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d, "old", false);
    build(d, "new", true);
    build_other(d, "other");
    // A profile of `old` (mostly `main`, as in a small program's loop) and of `other`.
    let profile = |binary: &str, functions: &[(&str, u64)]| {
        let mut pb = ProfileBuilder::new(Meta {
            binary: binary.into(),
            source: "test".into(),
            ..Meta::default()
        });
        for (name, w) in functions {
            pb.add_self(&FuncKey::global(*name), *w);
        }
        pb.build().to_text()
    };
    let of_old = profile("old", &[("main", 3000), ("hot_after", 900), ("first", 100)]);
    std::fs::write(d.join("old.sprof"), of_old).unwrap();
    let of_other = profile("other", &[("main", 50), ("_start", 5), ("helper", 1)]);
    std::fs::write(d.join("other.sprof"), of_other).unwrap();

    let share = "only 0.0% of the profile's weight (not counting main and the C start-up code)";
    fails_with(
        d,
        &["diff", "old", "new", "-p", "other.sprof"],
        &["other.sprof: ", share, "old or new"],
        "none",
    );
    fails_with(
        d,
        &["heatmap", "old", "-p", "other.sprof", "-o", "h.svg"],
        &["other.sprof: ", share, "old"],
        "h.svg",
    );
    // `main` alone does not make `other` the program of old's profile.
    fails_with(
        d,
        &["diff", "other", "other", "-p", "old.sprof"],
        &["old.sprof: ", share, "other or other"],
        "none",
    );
    // The right pairs still work.
    sediment_ok(d, &["diff", "old", "new", "-p", "old.sprof"]);
    sediment_ok(d, &["heatmap", "new", "-p", "old.sprof", "-o", "h.svg"]);
}
