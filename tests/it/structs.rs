//! `sediment structs` end to end: a C program with known layout problems, built by gcc with
//! `-g`, prints its own `sizeof`/`offsetof` figures; the report read from its DWARF must agree
//! with them, and must flag the atomic and the lock that share a cache line, and not the
//! 64-byte-aligned variant.

use crate::common::{have_tool, sediment};
use std::process::Command;

const SOURCE: &str = r#"
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
struct holey { char a; int b; char c; };
struct stats { atomic_long hits; long misses; };
struct stats_aligned { _Alignas(64) atomic_long hits; _Alignas(64) long misses; };
struct queue { pthread_mutex_t lock; int head, tail; char buf[16]; };
struct __attribute__((packed)) straddle { char pad[60]; long x; };
int main(void) {
    struct holey h = {0}; struct stats s = {0}; struct stats_aligned sa = {0};
    struct queue q = {0}; struct straddle st = {0};
    /* name size wasted-bytes */
    printf("holey %zu %zu\n", sizeof h,
           offsetof(struct holey, b) - 1 + sizeof h - (offsetof(struct holey, c) + 1));
    printf("stats %zu 0\n", sizeof s);
    printf("stats_aligned %zu %zu\n", sizeof sa, sizeof sa - 2 * sizeof(long));
    printf("queue %zu %zu\n", sizeof q, sizeof q - offsetof(struct queue, buf) - 16);
    printf("straddle %zu 0\n", sizeof st);
    return h.a + (int)s.misses + (int)sa.misses + q.head + (int)st.x;
}
"#;

#[test]
fn structs_report_agrees_with_the_compiler_and_flags_shared_lines() {
    if !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("st.c"), SOURCE).unwrap();
    let ok = Command::new("gcc")
        .current_dir(dir.path())
        .args(["-g", "-O0", "-o", "st", "st.c"])
        .status()
        .unwrap();
    assert!(ok.success());
    let truth = Command::new(dir.path().join("st")).output().unwrap();
    let out = sediment(
        dir.path(),
        &[
            "structs", "--binary", "st", "--all", "--json", "--top", "100",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let find = |name: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} not reported"))
            .clone()
    };
    for line in String::from_utf8(truth.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let r = find(f[0]);
        assert_eq!(
            r["size"].as_u64().unwrap().to_string(),
            f[1],
            "{} size",
            f[0]
        );
        let wasted: u64 = r["holes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["bytes"].as_u64().unwrap())
            .sum::<u64>()
            + r["tail_padding"].as_u64().unwrap();
        assert_eq!(wasted.to_string(), f[2], "{} wasted bytes", f[0]);
    }
    let shared = |name: &str| find(name)["shared_lines"].as_array().unwrap().len();
    assert_eq!(shared("stats"), 1);
    assert_eq!(shared("queue"), 1);
    assert_eq!(shared("stats_aligned"), 0);
    assert_eq!(shared("holey"), 0);
    assert_eq!(find("straddle")["straddling"][0], "x");

    // Text mode lists the line sharers first.
    let text = sediment(dir.path(), &["structs", "--binary", "st"]);
    let t = String::from_utf8(text.stdout).unwrap();
    let first = t.lines().find(|l| l.starts_with("struct ")).unwrap();
    assert!(
        first.starts_with("struct queue") || first.starts_with("struct stats:"),
        "{t}"
    );
}

#[test]
fn structs_without_debug_info_is_a_one_line_error() {
    if !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.c"), "int main(void) { return 0; }\n").unwrap();
    let ok = Command::new("gcc")
        .current_dir(dir.path())
        .args(["-g0", "-o", "n", "n.c"])
        .status()
        .unwrap();
    assert!(ok.success());
    // The binary as the operand: the old spelling of `--binary`, still accepted.
    let out = sediment(dir.path(), &["structs", "n"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("n: no DWARF"), "{err}");
}
