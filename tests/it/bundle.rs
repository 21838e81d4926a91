//! Profiles from many users (issue 33): `record --bundle` writes one self-describing, private
//! file; `merge --prof-dir` merges an inbox of them per binary, matching, refusing and
//! deduplicating, with provenance in the result. Real perf recordings of gcc-built programs.

use crate::common::{run, sediment, sediment_ok};
use sediment_profile::Profile;
use std::io::Read as _;
use std::path::Path;

/// A program whose own loop (`work`) is hot and calls libc's `snprintf` every 64 rounds.
fn program(work: &str, extra: &str) -> String {
    format!(
        r#"
#include <stdio.h>
#include <stdlib.h>
volatile unsigned long sink;
{extra}
__attribute__((noinline)) unsigned long {work}(long n) {{
    unsigned long s = 0;
    char b[32];
    for (long i = 0; i < n; i++) {{
        s = s * 2654435761u + (unsigned long)i; s ^= s >> 13;
        if ((i & 63) == 0) {{ snprintf(b, sizeof b, "%ld", i); s += (unsigned char)b[0]; }}
    }}
    return s + (unsigned long)abs((int)n);
}}
int main(int argc, char **argv) {{
    long n = argc > 1 ? atol(argv[1]) : 1;
    sink = {work}(n);
    printf("%lu\n", sink);
    return 0;
}}
"#
    )
}

/// Builds `dir/a` from `source`.
fn build(dir: &Path, source: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("a.c"), source).unwrap();
    run(
        dir,
        "gcc",
        &["-O1", "-g", "-fno-omit-frame-pointer", "-o", "a", "a.c"],
    );
}

/// Every member of the bundle at `path`: (name, text).
fn members(path: &Path) -> Vec<(String, String)> {
    let f = std::fs::File::open(path).unwrap();
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(f));
    ar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut text = String::new();
            e.read_to_string(&mut text).unwrap();
            (name, text)
        })
        .collect()
}

/// `sediment record --bundle FILE EXTRA... -- ./a N` in `dir`, asserting success.
fn record_bundle(dir: &Path, file: &str, extra: &[&str]) {
    let mut args = vec!["record", "--bundle", file];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "./a", "150000000"]);
    sediment_ok(dir, &args);
}

fn build_id(bin: &Path) -> String {
    sediment_elf::Binary::parse("a", &std::fs::read(bin).unwrap())
        .unwrap()
        .build_id
        .expect("gcc writes a build-id")
}

// One file: a manifest (format, submitter, duration, samples, one entry per binary keyed by
// base name and build-id, libc's Debian package and version) and the profiles; nothing in it
// names the recording's directory or command line. `--keep-paths` keeps the paths.
#[test]
fn record_bundle_is_one_private_self_describing_file() {
    require!("gcc", "perf");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d, &program("own_work", ""));
    record_bundle(d, "x.sbundle", &["--submitter", "alice"]);
    let m = members(&d.join("x.sbundle"));
    assert_eq!(m[0].0, "manifest.json");
    let manifest: serde_json::Value = serde_json::from_str(&m[0].1).unwrap();
    assert_eq!(manifest["format"], "sediment-bundle 1");
    assert_eq!(manifest["submitter"], "alice");
    assert_eq!(manifest["source"], "perf");
    assert!(manifest["duration_ms"].as_u64().unwrap() > 0, "{manifest}");
    assert!(manifest["total"].as_u64().unwrap() > 0, "{manifest}");
    let entries = manifest["profiles"].as_array().unwrap();
    let a = entries
        .iter()
        .find(|e| e["binary"] == "a")
        .expect("a profile of a");
    assert_eq!(a["build_id"], build_id(&d.join("a")).as_str());
    assert_eq!(a["file"], "profiles/a.sprof");
    let libc = entries.iter().find(|e| e["binary"] == "libc.so.6");
    if crate::common::have_tool("dpkg") {
        let libc = libc.expect("libc got samples (snprintf)");
        assert_eq!(libc["package"], "libc6", "{manifest}");
        assert!(libc["version"].as_str().is_some_and(|v| !v.is_empty()));
    }
    // Nothing private: no directory, no command line.
    let here = d.display().to_string();
    for (name, text) in &m {
        assert!(!text.contains(&here), "{name} names {here}:\n{text}");
        assert!(!text.contains("150000000"), "{name} has the command line");
    }
    let prof =
        Profile::from_text(&m.iter().find(|(n, _)| n == "profiles/a.sprof").unwrap().1).unwrap();
    assert_eq!(prof.meta.binary, "a");
    assert_eq!(prof.meta.extra["submitter"], "alice");
    assert!(prof.meta.extra.contains_key("recorded-at"));

    record_bundle(d, "kept.sbundle", &["--keep-paths"]);
    let m = members(&d.join("kept.sbundle"));
    let prof =
        Profile::from_text(&m.iter().find(|(n, _)| n == "profiles/a.sprof").unwrap().1).unwrap();
    assert!(prof.meta.binary.starts_with('/'), "{}", prof.meta.binary);
    assert!(prof.meta.binary.ends_with("/a"), "{}", prof.meta.binary);
}

// An inbox: two users of build 1, one of build 2, one of another program that is also
// called `a`, and a second copy of the first bundle. Without `--binary` the build most
// bundles name is merged and the others are refused, one line each; with `--binary` build 2's
// `a`, build 1's bundles are matched into it (coverage printed), the other program refused.
// The duplicate counts once; provenance is in the merged profile.
#[test]
fn inbox_merge_matches_refuses_and_counts_duplicates_once() {
    require!("gcc", "perf");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inbox = d.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    build(&d.join("v1"), &program("own_work", ""));
    build(
        &d.join("v2"),
        &program(
            "own_work",
            "__attribute__((noinline)) int added(int x) { return x * 7; }",
        ),
    );
    build(&d.join("other"), &program("foreign_work", ""));
    assert_ne!(build_id(&d.join("v1/a")), build_id(&d.join("v2/a")));
    for (sub, who) in [
        ("v1", "alice"),
        ("v1", "bob"),
        ("v2", "carol"),
        ("other", "mallory"),
    ] {
        record_bundle(
            &d.join(sub),
            &format!("../inbox/{who}.sbundle"),
            &["--submitter", who, "--under", "."],
        );
    }
    std::fs::copy(inbox.join("alice.sbundle"), inbox.join("alice2.sbundle")).unwrap();

    // Without --binary: build 1 (two bundles) is the inbox's build.
    let out = sediment(d, &["merge", "--prof-dir", "out", "inbox"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("carol.sbundle: a is another build") && err.contains("give --binary"),
        "{err}"
    );
    assert!(err.contains("mallory.sbundle: a is another build"), "{err}");
    assert!(
        err.contains(
            "1 duplicate submission counted once (inbox/alice2.sbundle is inbox/alice.sbundle)"
        ),
        "{err}"
    );
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    let merged = read_profile(&d.join("out/a.sprof"));
    assert_eq!(
        merged.meta.extra["submissions"],
        "2",
        "{}",
        merged.to_text()
    );
    assert_eq!(merged.meta.build_id, Some(build_id(&d.join("v1/a"))));

    // With build 2's binary: build 1 matched in, the other program refused.
    let out = sediment(
        d,
        &["merge", "--prof-dir", "out2", "--binary", "v2/a", "inbox"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    let refusals: Vec<&str> = err.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(refusals.len(), 1, "{err}");
    assert!(
        refusals[0].contains("mallory.sbundle: a (build-id"),
        "{err}"
    );
    let alice = stdout
        .lines()
        .find(|l| l.starts_with("inbox/alice.sbundle"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(alice.contains("submitter alice"), "{alice}");
    assert!(
        alice.contains("merged a ") && alice.contains('%'),
        "{alice}"
    );
    let merged = read_profile(&d.join("out2/a.sprof"));
    let text = merged.to_text();
    assert_eq!(merged.meta.extra["submissions"], "3", "{text}");
    assert_eq!(merged.meta.build_id, Some(build_id(&d.join("v2/a"))));
    for who in ["alice", "bob", "carol"] {
        assert!(text.contains(&format!("submitter={who},")), "{text}");
    }
    assert!(!text.contains("mallory"), "{text}");
    assert!(merged
        .find(&sediment_profile::FuncKey::global("own_work"))
        .is_some());
    // Byte-identical when run again.
    sediment_ok(
        d,
        &["merge", "--prof-dir", "out3", "--binary", "v2/a", "inbox"],
    );
    assert_eq!(
        std::fs::read(d.join("out2/a.sprof")).unwrap(),
        std::fs::read(d.join("out3/a.sprof")).unwrap()
    );
}

// Not a bundle in the inbox: one line naming it, nothing written.
#[test]
fn inbox_merge_refuses_a_file_that_is_not_a_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("inbox")).unwrap();
    std::fs::write(d.join("inbox/x.sbundle"), "sediment-profile 1\n").unwrap();
    crate::common::fails_one_line(
        d,
        &["merge", "--prof-dir", "out", "inbox"],
        &["inbox/x.sbundle: not a Sediment bundle"],
    );
    assert!(!d.join("out").exists());
    let out = sediment(
        d,
        &[
            "merge",
            "--prof-dir",
            "out",
            "--binary",
            "a",
            "--min-share",
            "2",
            "inbox",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'2' is not a share"));
}

/// A tar file of `count` members (`profiles/p<i>.sprof`), each holding `size` zero bytes,
/// compressed by the system's gzip (fast, however large the tar file): what a hostile sender
/// makes.
fn crafted_bundle(count: usize, size: usize) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let data = vec![0u8; size];
    for i in 0..count {
        let mut h = tar::Header::new_gnu();
        h.set_size(size as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, format!("profiles/p{i}.sprof"), data.as_slice())
            .unwrap();
    }
    let tar = tar.into_inner().unwrap();
    let mut gzip = std::process::Command::new("gzip")
        .args(["-1", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = gzip.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &tar).unwrap());
    let out = gzip.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

// Regression: an over-size bundle in the inbox failed with the tar library's words ("failed
// to read entire block") or was held whole. Now reading is bounded per bundle and per run:
// a gzip bomb (16 MiB of zeros in a few kilobytes) past the run's read budget, and a bundle of
// more members than a bundle may hold (65,537 empty ones), are each one line naming the file
// and the limit; nothing is written.
#[test]
fn regress_inbox_merge_refuses_an_over_size_bundle_in_one_line() {
    require!("gzip");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("bomb")).unwrap();
    let bomb = crafted_bundle(1, 16 << 20);
    assert!(bomb.len() < 100_000, "premise: a small file");
    std::fs::write(d.join("bomb/x.sbundle"), &bomb).unwrap();
    let out = std::process::Command::new(crate::common::sediment_bin())
        .current_dir(d)
        .env("SEDIMENT_MAX_INPUT_BYTES", "1000000")
        .args(["merge", "--prof-dir", "out", "bomb"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "bomb/x.sbundle: reading it would take this run past its 1000000-byte input limit"
        ),
        "{err}"
    );
    assert!(!d.join("out").exists(), "nothing written");

    std::fs::create_dir_all(d.join("many")).unwrap();
    let many = crafted_bundle(65_537, 0);
    std::fs::write(d.join("many/x.sbundle"), many).unwrap();
    crate::common::fails_one_line(
        d,
        &["merge", "--prof-dir", "out", "many"],
        &["many/x.sbundle: more than 65536 members, more than a bundle may hold"],
    );
    assert!(!d.join("out").exists(), "nothing written");
}

fn read_profile(path: &Path) -> Profile {
    Profile::from_text(&std::fs::read_to_string(path).unwrap()).unwrap()
}

// A recorded command that fails writes no bundle and exits non-zero with one line;
// `--keep-partial` keeps what was recorded (issue 33: record must not pass off a failed run).
#[test]
fn record_bundle_of_a_failing_command_writes_nothing() {
    require!("gcc", "perf");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("a.c"),
        "volatile long s;\nint main(void) { for (long i = 0; i < 200000000; i++) s += i; return 3; }\n",
    )
    .unwrap();
    run(d, "gcc", &["-O1", "-o", "a", "a.c"]);
    crate::common::fails_one_line(
        d,
        &["record", "--bundle", "x.sbundle", "--", "./a"],
        &["./a failed under perf record", "--keep-partial"],
    );
    assert!(!d.join("x.sbundle").exists());
    sediment_ok(
        d,
        &[
            "record",
            "--bundle",
            "x.sbundle",
            "--keep-partial",
            "--",
            "./a",
        ],
    );
    assert!(members(&d.join("x.sbundle")).len() >= 2);
}
