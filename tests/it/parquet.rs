//! The Parquet interchange and the merge as SQL (issue 37): `export --format parquet` and
//! `import --format parquet` round trips, a fleet's pprof files as one table, bad tables, and
//! `sediment merge` against integrations/sql/merge.sql run on DuckDB and on Spark (local mode)
//! over generated inputs with the edge cases (empty profiles, same-named statics, functions in
//! some inputs only, extreme weights, several binaries in one table).

use crate::common::{fails_one_line, fixture, require_python, sediment, sediment_ok};
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every `.sprof` file of `dir` whose name starts with `prefix`, as (name, text), sorted by name.
fn texts_with_prefix(dir: &Path, prefix: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.ends_with(".sprof"))
        .map(|n| {
            let t = std::fs::read_to_string(dir.join(&n)).unwrap();
            (n, t)
        })
        .collect();
    v.sort();
    v
}

fn meta(binary: &str, build_id: Option<&str>) -> Meta {
    Meta {
        binary: binary.into(),
        build_id: build_id.map(str::to_string),
        arch: Some("x86_64".into()),
        source: "perf".into(),
        event: Some("cpu-clock".into()),
        ..Meta::default()
    }
}

/// Edge-case profiles for the round trip: same-named statics, odd names, an empty profile,
/// `u64::MAX` everywhere a weight can be.
fn edge_profiles() -> Vec<Profile> {
    let mut b = ProfileBuilder::new(meta("/usr/bin/app", Some("aa01")));
    let main = FuncKey::global("main");
    let h1 = FuncKey::local("helper", "a.c");
    let h2 = FuncKey::local("helper", "b.c");
    let odd = FuncKey::global("operator new(unsigned long) -#%\u{e9}");
    b.add_self(&main, u64::MAX);
    b.add_self(&h1, 3);
    b.add_self(&h2, 0);
    b.add_self(&odd, 1);
    b.set_size(&h1, u64::MAX);
    b.add_call(&main, &h1, u64::MAX);
    b.add_call(&h2, &h2, 1);
    b.add_call(&odd, &main, 7);
    b.meta_mut().total = u64::MAX;
    b.meta_mut().extra.insert("mode".into(), "leaf".into());
    b.meta_mut()
        .extra
        .insert("submitter".into(), "host 1\n".into());
    b.meta_mut()
        .extra
        .insert("recorded-at".into(), "-12".into());
    let extreme = b.build();
    let empty = Profile {
        meta: Meta {
            binary: "libempty.so".into(),
            source: "pprof".into(),
            ..Meta::default()
        },
        ..Profile::default()
    };
    vec![extreme, empty]
}

// Text -> Parquet -> text is byte-identical: every .sprof fixture, edge cases, an empty profile.
#[test]
fn round_trip_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut inputs: Vec<PathBuf> = Vec::new();
    for sub in ["perf", "perf_script"] {
        for e in std::fs::read_dir(fixture(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sprof") {
                inputs.push(p);
            }
        }
    }
    for (i, p) in edge_profiles().iter().enumerate() {
        let path = d.join(format!("edge{i}.sprof"));
        std::fs::write(&path, p.to_text()).unwrap();
        inputs.push(path);
    }
    assert!(inputs.len() >= 5, "{inputs:?}");
    for input in &inputs {
        let s = input.to_str().unwrap();
        sediment_ok(
            d,
            &["export", "--format", "parquet", "-p", s, "-o", "t.parquet"],
        );
        sediment_ok(
            d,
            &[
                "import",
                "--format",
                "parquet",
                "t.parquet",
                "-o",
                "back.sprof",
            ],
        );
        let back = std::fs::read_to_string(d.join("back.sprof")).unwrap();
        let want = std::fs::read_to_string(input).unwrap();
        assert_eq!(back, want, "{}", input.display());
        // The same profile exports to the same bytes.
        let first = std::fs::read(d.join("t.parquet")).unwrap();
        sediment_ok(
            d,
            &["export", "--format", "parquet", "-p", s, "-o", "t2.parquet"],
        );
        assert_eq!(std::fs::read(d.join("t2.parquet")).unwrap(), first);
    }
}

// Several binaries in one table: import writes one profile per binary, `-o` for the first
// row's binary and the others beside it, each byte-identical to its input; `--cluster` picks one.
#[test]
fn one_profile_per_binary() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let profiles = edge_profiles();
    for (i, p) in profiles.iter().enumerate() {
        std::fs::write(d.join(format!("p{i}.sprof")), p.to_text()).unwrap();
    }
    sediment_ok(
        d,
        &[
            "export",
            "--format",
            "parquet",
            "-p",
            "p0.sprof",
            "-p",
            "p1.sprof",
            "-o",
            "t.parquet",
        ],
    );
    sediment_ok(
        d,
        &[
            "import",
            "--format",
            "parquet",
            "t.parquet",
            "-o",
            "out.sprof",
        ],
    );
    let got = texts_with_prefix(d, "out.");
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["out.libempty.so.sprof", "out.sprof"]);
    assert_eq!(got[1].1, profiles[0].to_text());
    assert_eq!(got[0].1, profiles[1].to_text());
    // --cluster NAME: only that binary, as the main one.
    sediment_ok(
        d,
        &[
            "import",
            "--format",
            "parquet",
            "--cluster",
            "libempty.so",
            "t.parquet",
            "-o",
            "lib.sprof",
        ],
    );
    let got = texts_with_prefix(d, "lib.");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].1, profiles[1].to_text());
    fails_one_line(
        d,
        &[
            "import",
            "--format",
            "parquet",
            "--cluster",
            "nope",
            "t.parquet",
            "-o",
            "n.sprof",
        ],
        &["nope", "t.parquet"],
    );
}

// Bad tables: one line naming the file, non-zero exit, nothing written.
#[test]
fn bad_table_is_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("junk.parquet"), b"PAR1 this is not parquet PAR1").unwrap();
    let out = fails_one_line(
        d,
        &[
            "import",
            "--format",
            "parquet",
            "junk.parquet",
            "-o",
            "o.sprof",
        ],
        &["junk.parquet"],
    );
    assert!(!out.status.success());
    assert!(!d.join("o.sprof").exists());
    // A real table cut short.
    std::fs::write(d.join("p.sprof"), edge_profiles()[0].to_text()).unwrap();
    sediment_ok(
        d,
        &[
            "export",
            "--format",
            "parquet",
            "-p",
            "p.sprof",
            "-o",
            "t.parquet",
        ],
    );
    let bytes = std::fs::read(d.join("t.parquet")).unwrap();
    std::fs::write(d.join("cut.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    fails_one_line(
        d,
        &[
            "import",
            "--format",
            "parquet",
            "cut.parquet",
            "-o",
            "o.sprof",
        ],
        &["cut.parquet"],
    );
    assert!(!d.join("o.sprof").exists());
    // A profile whose recorded-at the column cannot hold is refused by export.
    let mut p = edge_profiles()[0].clone();
    p.meta.extra.insert("recorded-at".into(), "soon".into());
    std::fs::write(d.join("soon.sprof"), p.to_text()).unwrap();
    fails_one_line(
        d,
        &[
            "export",
            "--format",
            "parquet",
            "-p",
            "soon.sprof",
            "-o",
            "s.parquet",
        ],
        &["soon.sprof", "recorded-at"],
    );
    assert!(!d.join("s.parquet").exists());
}

// A table whose page claims a level length past its end (found by fuzzing; the `parquet` crate
// panics on it, and its page header lacks its sizes): the import reports the pages as damaged,
// naming the file, and writes nothing.
#[test]
fn regress_level_length_past_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bad = fixture("parquet/regress-level-length.parquet");
    let out = sediment(
        d,
        &[
            "import",
            "--format",
            "parquet",
            bad.to_str().unwrap(),
            "-o",
            "o.sprof",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // One line, naming the file: no panic message of the decoder before it.
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("regress-level-length.parquet: damaged Parquet pages"),
        "{err}"
    );
    assert!(!d.join("o.sprof").exists());
}

// pprof files from many hosts -> one table -> one profile per build-id, equal to
// `sediment merge` of the hosts' profiles.
#[test]
fn pprof_from_many_hosts_is_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pb = fixture("pprof/burn.pb.gz");
    let pb = pb.to_str().unwrap();
    let mut sprofs = Vec::new();
    for (i, host) in ["web-1", "web-2", "db-1"].iter().enumerate() {
        let out = format!("{host}.sprof");
        let t = (1_700_000_000 + 3600 * i).to_string();
        sediment_ok(
            d,
            &[
                "import",
                "--format",
                "pprof",
                "--submitter",
                host,
                "--recorded-at",
                &t,
                pb,
                "-o",
                &out,
            ],
        );
        let text = std::fs::read_to_string(d.join(&out)).unwrap();
        assert!(text.contains(&format!("meta submitter {host}\n")), "{text}");
        assert!(text.contains(&format!("meta recorded-at {t}\n")), "{text}");
        sprofs.push(out);
    }
    let mut args = vec!["export", "--format", "parquet", "-o", "fleet.parquet"];
    for s in &sprofs {
        args.extend(["-p", s.as_str()]);
    }
    sediment_ok(d, &args);
    sediment_ok(
        d,
        &[
            "import",
            "--format",
            "parquet",
            "fleet.parquet",
            "-o",
            "burn.sprof",
        ],
    );
    let mut args = vec!["merge", "-o", "want.sprof"];
    args.extend(sprofs.iter().map(String::as_str));
    sediment_ok(d, &args);
    let got = texts_with_prefix(d, "burn.");
    assert_eq!(got.len(), 1, "one binary: {got:?}");
    assert_eq!(
        got[0].1,
        std::fs::read_to_string(d.join("want.sprof")).unwrap()
    );
    assert!(got[0].1.contains("meta merge-inputs 3\n"), "{}", got[0].1);
}

// Many pprof windows in one import: each binary's profiles merged as `sediment merge` merges
// inputs of weight 1, byte-identical to importing each window and merging the results.
#[test]
fn pprof_windows_in_one_import_equal_import_then_merge() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pb = fixture("pprof/burn.pb.gz");
    let windows = ["w1.pb.gz", "w2.pb.gz", "w3.pb.gz"];
    for w in windows {
        std::fs::copy(&pb, d.join(w)).unwrap();
    }
    let mut args = vec!["import", "--format", "pprof", "-o", "all.sprof"];
    args.extend(windows);
    sediment_ok(d, &args);
    let mut merge = vec!["merge", "-o", "want.sprof"];
    let singles: Vec<String> = windows.iter().map(|w| format!("{w}.sprof")).collect();
    for (w, out) in windows.iter().zip(&singles) {
        sediment_ok(d, &["import", "--format", "pprof", w, "-o", out]);
        merge.push(out);
    }
    sediment_ok(d, &merge);
    let got = std::fs::read_to_string(d.join("all.sprof")).unwrap();
    assert_eq!(got, std::fs::read_to_string(d.join("want.sprof")).unwrap());
    assert!(got.contains("meta merge-inputs 3\n"), "{got}");
    // One window alone is imported as it is, not renormalised.
    let one = std::fs::read_to_string(d.join("w1.pb.gz.sprof")).unwrap();
    assert!(!one.contains("merge-inputs"), "{one}");
}

/// A small deterministic generator (an LCG), so the inputs are the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One generated submission: its file, its weight, and the group (binary) it belongs to.
struct Input {
    file: String,
    weight: f64,
    group: usize,
}

/// Writes the generated fleet into `d`: three binaries (two build-ids, one named only, at two
/// paths), submissions from hosts with several windows and without a submitter, with
/// same-named statics, functions in some inputs only, an empty profile, a calls-only profile,
/// `u64::MAX` weights and totals, weights 0, 0.5, 1, 2.5.
fn fleet(d: &Path) -> Vec<Input> {
    let mut rng = Lcg(37);
    let binaries = [
        ("/usr/bin/app", Some("aa01")),
        ("/usr/lib/libx.so", Some("bb02")),
        ("/opt/a/tool", None),
    ];
    let day = 86_400i64;
    let base = 1_700_000_000i64;
    let hosts = [
        Some("web-1"),
        Some("web-1"),
        Some("web-2"),
        None,
        Some("db-1"),
    ];
    let weights = [1.0, 2.5, 0.5, 1.0, 0.0, 1.0];
    let names = ["main", "work", "parse", "rare", "helper"];
    let mut inputs = Vec::new();
    for (g, (bin, id)) in binaries.iter().enumerate() {
        let count = if g == 0 { 7 } else { 3 };
        for k in 0..count {
            let path = if g == 2 && k % 2 == 1 {
                "/opt/b/tool"
            } else {
                bin
            };
            let mut b = ProfileBuilder::new(meta(path, *id));
            if let Some(h) = hosts[k % hosts.len()] {
                b.meta_mut().extra.insert("submitter".into(), h.into());
            }
            if k != 3 {
                let t = base - day * rng.below(30) as i64 - rng.below(day as u64) as i64;
                b.meta_mut()
                    .extra
                    .insert("recorded-at".into(), t.to_string());
            }
            let mut keys = Vec::new();
            match (g, k) {
                (0, 2) => {} // an empty profile
                (0, 5) => {
                    // extreme: u64::MAX self weight and total
                    let m = FuncKey::global("main");
                    let w = FuncKey::global("work");
                    b.add_self(&m, u64::MAX);
                    b.add_self(&w, 1);
                    b.add_call(&m, &w, u64::MAX);
                    b.meta_mut().total = u64::MAX;
                }
                (1, 1) => {
                    // calls only
                    let m = FuncKey::global("main");
                    let w = FuncKey::global("work");
                    b.add_self(&m, 0);
                    b.add_self(&w, 0);
                    b.add_call(&m, &w, 3);
                }
                _ => {
                    for (i, n) in names.iter().enumerate() {
                        if *n == "rare" && k % 3 != 0 {
                            continue; // in some inputs only
                        }
                        let key = if *n == "helper" {
                            FuncKey::local("helper", ["a.c", "b.c"][k % 2])
                        } else {
                            FuncKey::global(*n)
                        };
                        b.add_self(&key, rng.below(1_000_000) * (i as u64 + 1));
                        if rng.below(2) == 0 {
                            b.set_size(&key, 16 + rng.below(400));
                        }
                        keys.push(key);
                    }
                    // Both statics in one profile too.
                    b.add_self(&FuncKey::local("helper", "c.c"), 1 + rng.below(10));
                    for _ in 0..6 {
                        let a = &keys[rng.below(keys.len() as u64) as usize];
                        let c = &keys[rng.below(keys.len() as u64) as usize];
                        b.add_call(a, c, 1 + rng.below(50_000));
                    }
                    // Per-instruction samples in some inputs of two binaries (their tables are
                    // schema version 2, the others version 1): one offset shared by every such
                    // input, one of each (that of the input of weight 0 merges to nothing, and is
                    // dropped), and a light one.
                    if g != 1 && k % 2 == 0 {
                        b.add_sample(&keys[0], 0x10, 1 + (k as u64 * 7919) % 5000);
                        b.add_sample(&keys[1], 0x20 + k as u64, 300 + k as u64);
                        if k == 0 {
                            b.add_sample(&keys[0], 0x40, 1);
                        }
                    }
                    let self_total: u64 = 3_000_000;
                    b.meta_mut().total = self_total + rng.below(10_000_000);
                }
            }
            let file = format!("g{g}-{k}.sprof");
            std::fs::write(d.join(&file), b.build().to_text()).unwrap();
            inputs.push(Input {
                file,
                weight: weights[(k + g) % weights.len()],
                group: g,
            });
        }
    }
    inputs
}

/// `sediment merge OPTS` of each binary's inputs, texts sorted.
fn merge_per_binary(d: &Path, inputs: &[Input], opts: &[&str]) -> Vec<String> {
    let groups = inputs.iter().map(|i| i.group).max().unwrap() + 1;
    let mut texts = Vec::new();
    for g in 0..groups {
        let out = format!("want{g}.sprof");
        let mut args: Vec<String> = vec!["merge".into(), "-o".into(), out.clone()];
        args.extend(opts.iter().map(|s| s.to_string()));
        for i in inputs.iter().filter(|i| i.group == g) {
            args.extend([
                "-w".into(),
                i.weight.to_string(),
                "-p".into(),
                i.file.clone(),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sediment_ok(d, &args);
        texts.push(std::fs::read_to_string(d.join(out)).unwrap());
    }
    texts.sort();
    texts
}

/// Each input exported to its own table with its weight; returns the table files.
fn export_tables(d: &Path, inputs: &[Input]) -> Vec<String> {
    let mut tables = Vec::new();
    for (n, i) in inputs.iter().enumerate() {
        let t = format!("in{n}.parquet");
        let w = i.weight.to_string();
        sediment_ok(
            d,
            &[
                "export", "--format", "parquet", "-w", &w, "-p", &i.file, "-o", &t,
            ],
        );
        tables.push(t);
    }
    tables
}

/// Runs an SQL runner (`script` of integrations/sql) with `opts` over `tables`, imports the
/// result and returns the imported profiles' texts, sorted.
fn run_sql(d: &Path, script: &str, tag: &str, opts: &[&str], tables: &[String]) -> Vec<String> {
    let runner = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("integrations/sql")
        .join(script);
    let out_table = format!("{tag}.parquet");
    let out = Command::new("python3")
        .arg(&runner)
        .args(opts)
        .args(["-o", &out_table])
        .args(tables)
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} {opts:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = format!("{tag}.sprof");
    sediment_ok(
        d,
        &["import", "--format", "parquet", &out_table, "-o", &prefix],
    );
    let mut texts: Vec<String> = texts_with_prefix(d, &format!("{tag}."))
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    texts.sort();
    texts
}

/// The option sets the SQL must agree with `sediment merge` on.
const OPTION_SETS: &[&[&str]] = &[
    &[],
    &["--per-submitter"],
    &["--half-life", "3"],
    &["--half-life", "2.5", "--now", "1700500000"],
    &["--cap-per-submitter", "0.7"],
    &[
        "--per-submitter",
        "--half-life",
        "7",
        "--cap-per-submitter",
        "0.8",
    ],
];

// merge.sql on DuckDB gives, after import, the profiles `sediment merge` gives, byte for
// byte, for every fleet option.
#[test]
fn duckdb_merge_equals_sediment_merge() {
    if !require_python(&["duckdb"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs = fleet(d);
    let tables = export_tables(d, &inputs);
    for (n, opts) in OPTION_SETS.iter().enumerate() {
        let want = merge_per_binary(d, &inputs, opts);
        assert_eq!(want.len(), 3);
        let got = run_sql(d, "duckdb_merge.py", &format!("duck{n}"), opts, &tables);
        assert_eq!(got, want, "options {opts:?}");
    }
}

// merge.sql on Spark (local mode, one session) gives the same bytes as `sediment merge` with
// every fleet option at once.
#[test]
fn spark_merge_equals_sediment_merge() {
    if !require_python(&["pyspark"]) || !crate::common::require(&["java"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs = fleet(d);
    let tables = export_tables(d, &inputs);
    let opts = OPTION_SETS[OPTION_SETS.len() - 1];
    let want = merge_per_binary(d, &inputs, opts);
    let got = run_sql(d, "spark_merge.py", "spark", opts, &tables);
    assert_eq!(got, want, "options {opts:?}");
}
