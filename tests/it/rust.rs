//! Rust programs built by cargo: the route of docs/guide/rust.md (an lld symbol ordering file
//! given through `RUSTFLAGS`, written by `sediment link --unseen-by-name` from the standard
//! library's and the dependencies' `.rlib` archives), and `sediment match` carrying a profile
//! across a rebuild that renamed every function of the crate (Rust symbol hashes).

use crate::common::{sediment, sediment_ok, sh};
use sediment_elf::Binary;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small program: word generation (formatting), counting in a `HashMap`, a sorted report.
/// Most of its time is in the standard library (`core::fmt`, `alloc`, hashbrown, SipHash).
const MAIN_RS: &str = r#"
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

#[inline(never)]
fn words(n: u64) -> Vec<String> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            format!("w{}", s % 5000)
        })
        .collect()
}

#[inline(never)]
fn count(ws: &[String]) -> HashMap<&str, u64> {
    let mut m = HashMap::new();
    for w in ws {
        *m.entry(w.as_str()).or_insert(0) += 1;
    }
    m
}

#[inline(never)]
fn report(m: &HashMap<&str, u64>) -> String {
    let sorted: BTreeMap<&&str, &u64> = m.iter().collect();
    let mut out = String::new();
    for (w, n) in sorted.iter().take(5) {
        let _ = writeln!(out, "{w} {n}");
    }
    if cfg!(feature = "extra") {
        out.push_str("extra\n");
    }
    out
}

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(40);
    let mut total = 0;
    for r in 0..rounds {
        let ws = words(20_000 + r);
        let m = count(&ws);
        total += m.len();
        if r + 1 == rounds {
            print!("{}", report(&m));
        }
    }
    println!("{total}");
}
"#;

const CARGO_TOML: &str = r#"
[package]
name = "wordcount"
version = "0.1.0"
edition = "2021"

[features]
extra = []

[profile.release]
debug = 1
"#;

/// Writes the crate into `dir` and an empty ordering file `app.symorder` beside it.
fn write_crate(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), CARGO_TOML).unwrap();
    std::fs::write(dir.join("src/main.rs"), MAIN_RS).unwrap();
    std::fs::write(dir.join("app.symorder"), "").unwrap();
}

/// `cargo build --release` of the crate in `dir` through the guide's route: `RUSTFLAGS` give
/// lld `app.symorder` (empty: the default layout). The outer `cargo test`'s own settings are
/// removed so that they cannot override the flags. Returns the executable.
fn cargo_build(dir: &Path, extra: &[&str]) -> PathBuf {
    let order = dir.join("app.symorder");
    let flags = format!(
        "-C link-arg=-fuse-ld=lld -C link-arg=-Wl,--symbol-ordering-file={} \
         -C link-arg=-Wl,--no-warn-symbol-ordering",
        order.display()
    );
    let out = Command::new("cargo")
        .args(["build", "--release", "--offline", "--quiet"])
        .args(extra)
        .current_dir(dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_MAKEFLAGS")
        .env("RUSTFLAGS", flags)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("target/release/wordcount")
}

/// The `.rlib` archives of the standard library cargo links against.
fn std_rlibs() -> Vec<String> {
    let root = sh(Path::new("."), "rustc", &["--print", "sysroot"]);
    let lib = Path::new(root.trim()).join("lib/rustlib/x86_64-unknown-linux-gnu/lib");
    let mut libs: Vec<String> = std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rlib"))
        .map(|p| p.display().to_string())
        .collect();
    libs.sort();
    assert!(!libs.is_empty(), "no .rlib in {}", lib.display());
    libs
}

fn binary(path: &Path) -> Binary {
    Binary::parse(&path.display().to_string(), &std::fs::read(path).unwrap()).unwrap()
}

/// Whether a symbol name is the standard library's (core, alloc, std, hashbrown as std
/// vendors it): std is compiled with v0 mangling, which names the crate as `<len><name>`
/// after its disambiguator, or legacy names starting with the crate.
fn is_std(name: &str) -> bool {
    let d = sediment_profile::demangle(name);
    [
        "core::", "alloc::", "std::", "<core::", "<alloc::", "<std::",
    ]
    .iter()
    .any(|p| d.starts_with(p))
}

/// Records `exe` under perf into `out` in `dir`.
fn record(dir: &Path, exe: &Path, out: &str) -> sediment_profile::Profile {
    sediment_ok(
        dir,
        &["record", "-o", out, "--", exe.to_str().unwrap(), "60"],
    );
    sediment_profile::Profile::from_text(&std::fs::read_to_string(dir.join(out)).unwrap()).unwrap()
}

// The guide's route end to end: a cargo build recorded with perf, ordered, the ordering file
// written from the standard library's archives plus the crate's own functions by name, the
// crate relinked by cargo with it, and the linked binary follows the order, standard library
// functions included.
#[test]
fn cargo_route_orders_the_crate_and_std() {
    require!("cargo", "rustc", "perf");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write_crate(d);
    let exe = cargo_build(d, &[]);
    let before = binary(&exe);
    std::fs::copy(&exe, d.join("app.default")).unwrap();
    record(d, &exe, "app.sprof");
    sediment_ok(d, &["order", "-p", "app.sprof", "-o", "app.order"]);

    let mut args = vec![
        "link",
        "--linker",
        "lld",
        "--order",
        "app.order",
        "-o",
        "app.symorder",
        "--unseen-by-name",
    ];
    let rlibs = std_rlibs();
    args.extend(rlibs.iter().map(String::as_str));
    let out = sediment_ok(d, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("written by name (--unseen-by-name)"), "{err}");
    let order: Vec<String> = std::fs::read_to_string(d.join("app.symorder"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(
        order.iter().any(|n| is_std(n)),
        "no std function: {order:?}"
    );
    assert!(
        order.iter().any(|n| n.contains("9wordcount5count")),
        "{order:?}"
    );

    // Relink: cargo does not watch the ordering file, so the crate root is rewritten unchanged
    // (a new modification time; changed contents would rename the `.llvm.N` functions).
    std::fs::write(d.join("src/main.rs"), MAIN_RS).unwrap();
    let exe = cargo_build(d, &[]);
    let after = binary(&exe);
    // `sediment verify`, the guide's check, holds it; the default link does not.
    let v = sediment_ok(
        d,
        &["verify", exe.to_str().unwrap(), "--order", "app.order"],
    );
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(text.contains("(100.0%)"), "{text}");
    let addr = |b: &Binary| -> HashMap<String, u64> {
        b.functions
            .iter()
            .map(|f| (f.key.name.clone(), f.address))
            .collect()
    };
    let (was, now) = (addr(&before), addr(&after));
    // Every entry is in the output, in the order's order (the only failure is a function placed
    // before one listed ahead of it).
    let placed: Vec<(&String, u64)> = order
        .iter()
        .filter_map(|n| now.get(n).map(|&a| (n, a)))
        .collect();
    assert_eq!(placed.len(), order.len(), "{order:?}");
    let out_of_order = placed.windows(2).filter(|w| w[1].1 <= w[0].1).count();
    assert_eq!(out_of_order, 0, "{placed:?}");
    let std_placed = placed.iter().filter(|(n, _)| is_std(n)).count();
    assert!(std_placed >= 3, "{placed:?}");
    // The default link did not already have this order.
    let default_in_order = order
        .windows(2)
        .filter(|w| matches!((was.get(&w[0]), was.get(&w[1])), (Some(a), Some(b)) if a < b))
        .count();
    assert!(default_in_order + 1 < order.len(), "{order:?}");
    let v = sediment(d, &["verify", "app.default", "--order", "app.order"]);
    assert!(
        !v.status.success(),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
}

// A rebuild with another feature set renames every function of the crate (its legacy symbol
// hashes change): exact names carry only the standard library's part of the profile, and the
// Rust rule of `match` carries the crate's functions too.
#[test]
fn match_carries_a_profile_across_a_rust_rebuild() {
    require!("cargo", "perf");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write_crate(d);
    let exe = cargo_build(d, &[]);
    let old = record(d, &exe, "v1.sprof");
    let exe = cargo_build(d, &["--features", "extra"]);
    let new = binary(&exe);
    let names: std::collections::HashSet<&str> =
        new.functions.iter().map(|f| f.key.name.as_str()).collect();
    let total: u64 = old.functions.iter().map(|f| f.self_weight).sum();
    let exact: u64 = old
        .functions
        .iter()
        .filter(|f| names.contains(f.key.name.as_str()))
        .map(|f| f.self_weight)
        .sum();
    // The crate's own functions were renamed (the test means nothing otherwise).
    assert!(
        old.functions
            .iter()
            .any(|f| f.key.name.contains("9wordcount") && !names.contains(f.key.name.as_str())),
        "{}",
        old.to_text()
    );

    let out = sediment_ok(
        d,
        &[
            "match",
            "-p",
            "v1.sprof",
            "--binary",
            exe.to_str().unwrap(),
            "-o",
            "v2.sprof",
            "--json",
        ],
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let matched = j["matched_weight"].as_u64().unwrap();
    assert!(j["matched"]["rust_path"].as_u64().unwrap() > 0, "{j}");
    assert!(
        matched > exact,
        "matched {matched}, exact names {exact} of {total}: {j}"
    );
    assert!(
        matched as f64 >= 0.9 * total as f64,
        "matched {matched} of {total}: {j}"
    );
    let moved =
        sediment_profile::Profile::from_text(&std::fs::read_to_string(d.join("v2.sprof")).unwrap())
            .unwrap();
    assert!(moved
        .functions
        .iter()
        .any(|f| f.key.name.contains("9wordcount5count") && names.contains(f.key.name.as_str())));
}
