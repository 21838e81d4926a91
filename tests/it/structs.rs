//! `sediment structs` end to end: a C program with known layout problems, built by gcc with
//! `-g`, prints its own `sizeof`/`offsetof` figures; the report read from its DWARF must agree
//! with them, and must flag the atomic and the lock that share a cache line, and not the
//! 64-byte-aligned variant.

use crate::common::{have_tool, sediment, sediment_ok};
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
    let out = sediment_ok(
        dir.path(),
        &[
            "structs", "--binary", "st", "--all", "--json", "--top", "100",
        ],
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

/// A program whose member accesses follow from its loops at `-O0` (every `x++` one load and
/// one store of the member's bytes): `hits` is incremented N times, `last` written N/4 times,
/// `misses` read N/16 times; a second 328-byte structure (`other`) is allocated in another
/// function (both through functions of their own, so `--allocated-in` tells them apart);
/// `ring` holds two locks on the two lines of one 128-byte pair.
const ACCESSES: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
struct conn { long hits; char name[100]; long misses; char pad[200]; long last; };
struct other { char blob[320]; long tail; };
struct ring { pthread_mutex_t head_lock; char a[24]; pthread_mutex_t tail_lock; char b[24]; };
static struct other *make_other(void) { return calloc(1, sizeof(struct other)); }
static struct conn *make_conn(void) { return calloc(1, sizeof(struct conn)); }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    struct conn *c[4];
    for (int k = 0; k < 4; k++) c[k] = make_conn();
    struct other *o = make_other();
    long s = 0;
    for (long i = 0; i < n; i++) {
        c[i & 3]->hits++;
        if (i % 4 == 0) c[i & 3]->last = i;
        if (i % 16 == 0) s += c[i & 3]->misses;
        o->tail++;
    }
    struct ring *r = calloc(1, sizeof *r);
    printf("%zu %zu %ld\n", sizeof **c, sizeof *o, s + c[0]->hits + r->a[0]);
    return 0;
}
"#;

#[test]
fn structs_weighs_members_by_a_dhat_profile_and_proposes_the_first_line() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("acc.c"), ACCESSES).unwrap();
    let ok = Command::new("gcc")
        .current_dir(dir.path())
        .args(["-g", "-O0", "-o", "acc", "acc.c"])
        .status()
        .unwrap();
    assert!(ok.success());
    let dhat = |n: u64, file: &str| {
        let ok = Command::new("valgrind")
            .current_dir(dir.path())
            .args([
                "-q",
                "--tool=dhat",
                &format!("--dhat-out-file={file}"),
                "./acc",
            ])
            .arg(n.to_string())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success());
    };
    let n = 4000u64;
    dhat(n, "small.dhat");
    let json = |extra: &[&str]| {
        let mut args = vec!["structs", "acc", "--accesses", "small.dhat", "--json"];
        args.extend_from_slice(extra);
        let out = sediment_ok(dir.path(), &args);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let member = |v: &serde_json::Value, name: &str| {
        v["accesses"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"))["accesses"]
            .as_u64()
            .unwrap()
    };
    // Both 328-byte structures take the counts of both allocation points until
    // --allocated-in says which blocks are which.
    let v = json(&["--name", "conn", "--allocated-in", "make_conn"]);
    let conn = &v[0];
    assert_eq!(conn["name"], "conn");
    assert_eq!(member(conn, "hits"), 8 * (2 * n + 1), "{conn}");
    assert_eq!(member(conn, "last"), 8 * (n / 4));
    assert_eq!(member(conn, "misses"), 8 * (n / 16));
    assert_eq!(member(conn, "name"), 0);
    let hot: Vec<&str> = conn["accesses"]["hot"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(hot, ["hits", "last", "misses"], "{conn}");
    assert!(conn["accesses"]["proposed_share"].as_f64().unwrap() > 0.99);
    let other = json(&["--name", "other", "--allocated-in", "make_other"]);
    assert_eq!(member(&other[0], "tail"), 8 * 2 * n, "{other}");
    assert_eq!(member(&other[0], "blob"), 0);
    let mixed = json(&["--name", "conn"]);
    assert_eq!(member(&mixed[0], "last"), 8 * (n / 4) + 8 * 2 * n);

    // The two locks of `ring` on lines 0 and 1: the 128-byte pair finding, without a profile.
    let out = sediment(dir.path(), &["structs", "acc", "--name", "ring"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("lines 0 and 1 (one 128-byte pair): head_lock and tail_lock"),
        "{text}"
    );

    // Past 65535 accesses a byte, DHAT's counts stop or wrap: the point is skipped, and said.
    dhat(40_000, "big.dhat");
    let out = sediment(
        dir.path(),
        &[
            "structs",
            "acc",
            "--accesses",
            "big.dhat",
            "--name",
            "conn",
            "--allocated-in",
            "make_conn",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1 allocation point of this size skipped"),
        "{text}"
    );
    assert!(!text.contains("proposed first line"), "{text}");
}

#[test]
fn structs_accesses_not_from_dhat_is_a_one_line_error() {
    require!("gcc");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("n.c"),
        "struct s { long a; }; struct s v; int main(void) { return (int)v.a; }\n",
    )
    .unwrap();
    let ok = Command::new("gcc")
        .current_dir(dir.path())
        .args(["-g", "-o", "n", "n.c"])
        .status()
        .unwrap();
    assert!(ok.success());
    std::fs::write(dir.path().join("bad.dhat"), b"{\"dhatFileVersion\":2,\"mode\":\"heap\",\"pps\":[{\"tb\":8,\"tbk\":1,\"acc\":[-9,1],\"fs\":[]}],\"ftbl\":[]}").unwrap();
    let out = sediment(dir.path(), &["structs", "n", "--accesses", "bad.dhat"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("bad.dhat: allocation point 0"), "{err}");
}
