//! The historical `.gv` call graph end to end: `sediment export --format gv` writes DOT that the
//! real Graphviz `dot` renders, `sediment import --format gv` reads it back, and a second export
//! is byte-identical to the first.

use crate::common::{fails_one_line, fixture, sediment, sediment_ok};
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};
use std::path::Path;
use std::process::Command;

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A profile of a second binary whose names need escaping: a quote, a newline, a backslash
/// sequence Graphviz would expand (`\N`), and a `main` that clashes with the first binary's.
fn hostile_profile() -> Profile {
    let mut b = ProfileBuilder::new(Meta {
        binary: "/usr/lib/lib\"odd\".so".into(),
        source: "perf".into(),
        event: Some("cpu-clock".into()),
        total: 77,
        ..Meta::default()
    });
    let quote = FuncKey::global("say\"hi\"");
    let newline = FuncKey::local("two\nlines", "x y.c");
    let label = FuncKey::global("esc\\N\\l");
    b.add_self(&FuncKey::global("main"), 1);
    b.add_self(&quote, 40);
    b.add_call(&FuncKey::global("main"), &quote, 5);
    b.add_call(&quote, &newline, 3);
    b.add_call(&newline, &label, 1);
    b.build()
}

fn write(dir: &Path, name: &str, p: &Profile) {
    std::fs::write(dir.join(name), p.to_text()).unwrap();
}

// Two real profiles in one graph: `dot -Tsvg` accepts it and draws every function of both
// clusters; import gives the same functions and self weights, and re-export is byte-identical.
#[test]
fn gv_renders_with_dot_and_round_trips() {
    require!("dot");
    // `dot` answers `-V`, not `--version`: check it the same strict way as `have_tool`.
    let dot = Command::new("dot").arg("-V").output();
    assert!(
        dot.is_ok_and(|o| o.status.success()),
        "dot is not installed: run scripts/setup (Debian package graphviz)"
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(fixture("callgrind/twins.golden"), d.join("twins.sprof")).unwrap();
    let twins =
        Profile::from_text(&std::fs::read_to_string(d.join("twins.sprof")).unwrap()).unwrap();
    write(d, "lib.sprof", &hostile_profile());
    ok(&sediment(
        d,
        &[
            "export",
            "--format",
            "gv",
            "-p",
            "twins.sprof",
            "-p",
            "lib.sprof",
            "-o",
            "a.gv",
        ],
    ));
    let gv = std::fs::read_to_string(d.join("a.gv")).unwrap();

    // The real Graphviz reads it without complaint and draws two clusters and every node.
    let out = Command::new("dot")
        .arg("-Tsvg")
        .arg(d.join("a.gv"))
        .output()
        .unwrap();
    ok(&out);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = String::from_utf8(out.stdout).unwrap();
    assert_eq!(svg.matches("class=\"cluster\"").count(), 2, "{svg}");
    let nodes = twins.functions.len() + hostile_profile().functions.len();
    assert_eq!(svg.matches("class=\"node\"").count(), nodes, "{svg}");
    assert_eq!(svg.matches("class=\"edge\"").count(), twins.edges.len() + 3);

    // Import: the first cluster is the main executable, the other goes beside it.
    ok(&sediment(
        d,
        &["import", "--format", "gv", "a.gv", "-o", "back.sprof"],
    ));
    let back = Profile::from_text(&std::fs::read_to_string(d.join("back.sprof")).unwrap()).unwrap();
    // `--mode` is about sampled call chains: with a format that has none it is refused, not
    // silently ignored, and the same valid input writes nothing.
    for mode in ["chain", "leaf"] {
        fails_one_line(
            d,
            &[
                "import", "--format", "gv", "--mode", mode, "a.gv", "-o", "m.sprof",
            ],
            &[&format!("--mode {mode}"), "sampled call chains"],
        );
    }
    assert!(!d.join("m.sprof").exists());
    assert_eq!(back.meta.binary, twins.meta.binary);
    assert_eq!(back.meta.source, "gv");
    let keys = |p: &Profile| -> Vec<(FuncKey, u64, Option<u64>)> {
        p.functions
            .iter()
            .map(|f| (f.key.clone(), f.self_weight, f.size))
            .collect()
    };
    assert_eq!(keys(&back), keys(&twins));
    // Edge weights are the labels' shares of 10^9: run_b -> twin (b.c) had 700 of 1002 calls.
    let w: u64 = back.edges.iter().map(|e| e.weight).sum();
    assert_eq!(w, 1_000_000_000);
    let heavy = back
        .named_edges()
        .into_iter()
        .find(|(a, b, _)| a == "run_b" && b == "twin (b.c)")
        .unwrap();
    // 700/1002 of 10^9 has the smallest remainder of the four shares, so it is not rounded up.
    assert_eq!(heavy.2, 700 * 1_000_000_000 / 1002);
    // The quotes are not in the set a side file's name keeps: `_`.
    let side = d.join("back.lib_odd_.so.sprof");
    let lib = Profile::from_text(&std::fs::read_to_string(&side).unwrap()).unwrap();
    assert_eq!(keys(&lib), keys(&hostile_profile()));

    // `--binary` picks one cluster by base name; a name no cluster has is an error.
    ok(&sediment(
        d,
        &[
            "import",
            "--format",
            "gv",
            // `--binary` is the old spelling of `--cluster`, still accepted.
            "--binary",
            "lib\"odd\".so",
            "a.gv",
            "-o",
            "one.sprof",
        ],
    ));
    let one = Profile::from_text(&std::fs::read_to_string(d.join("one.sprof")).unwrap()).unwrap();
    assert_eq!(keys(&one), keys(&hostile_profile()));
    let none = sediment(
        d,
        &[
            "import",
            "--format",
            "gv",
            "--cluster",
            "nope",
            "a.gv",
            "-o",
            "x.sprof",
        ],
    );
    assert!(!none.status.success());
    assert!(!d.join("x.sprof").exists());

    // Export again from what was imported: the same bytes.
    let side_name = side.file_name().unwrap().to_str().unwrap().to_string();
    ok(&sediment(
        d,
        &[
            "export",
            "--format",
            "gv",
            "-p",
            "back.sprof",
            "-p",
            &side_name,
            "-o",
            "b.gv",
        ],
    ));
    assert_eq!(std::fs::read_to_string(d.join("b.gv")).unwrap(), gv);
}

// A damaged graph: one line naming the file and the line, non-zero exit, no output written.
#[test]
fn gv_damaged_input_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "lib.sprof", &hostile_profile());
    ok(&sediment(
        d,
        &["export", "--format", "gv", "-p", "lib.sprof", "-o", "a.gv"],
    ));
    let gv = std::fs::read_to_string(d.join("a.gv")).unwrap();
    let cases = [
        // Cut inside the cluster.
        (gv[..gv.find("->").unwrap()].to_string(), "truncated"),
        // A share above 1.
        (
            gv.replacen("[label=\"0.", "[label=\"3.", 1),
            "not a fraction",
        ),
        // An edge to a node nobody declared.
        (gv.replacen("-> \"0:", "-> \"0:ghost", 1), "undeclared node"),
    ];
    for (text, what) in cases {
        std::fs::write(d.join("bad.gv"), &text).unwrap();
        let out = sediment(
            d,
            &["import", "--format", "gv", "bad.gv", "-o", "out.sprof"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("bad.gv: line "), "{stderr}");
        assert!(stderr.contains(what), "{what}: {stderr}");
        assert!(!d.join("out.sprof").exists());
    }
}

/// A `.gv` graph of two clusters: the main executable `/tmp/a.out` and `second`, each with one
/// function.
fn two_clusters(second: &str) -> String {
    format!(
        "digraph \"sediment\" {{\n  subgraph \"cluster_0\" {{\n    label=\"/tmp/a.out\";\n    \
         \"0:main\" [label=\"main\", self=\"10\", size=\"37\"];\n  }}\n  subgraph \"cluster_1\" \
         {{\n    label=\"{second}\";\n    \"1:f\" [label=\"f\", self=\"10\", size=\"37\"];\n  \
         }}\n}}\n"
    )
}

// Regression: the main profile was written before the side profiles, so a side profile that
// could not be written (a directory in its way) left a new main profile over the old one.
// Now the set is written all or nothing.
#[test]
fn import_writes_nothing_when_a_side_profile_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("g.gv"), two_clusters("/usr/lib/libz.so.1")).unwrap();
    std::fs::write(d.join("o.sprof"), "keep").unwrap();
    std::fs::create_dir(d.join("o.libz.so.1.sprof")).unwrap();
    let out = sediment(d, &["import", "--format", "gv", "-o", "o.sprof", "g.gv"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("o.libz.so.1.sprof"), "{stderr}");
    assert_eq!(std::fs::read_to_string(d.join("o.sprof")).unwrap(), "keep");
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["g.gv", "o.libz.so.1.sprof", "o.sprof"]);
}

// Regression: a binary name from a stranger's graph (a newline, a fake `sediment: wrote`
// line, an ANSI escape) became a side file's name and reached the terminal raw. Now file names
// keep only `[A-Za-z0-9._+-]` and messages escape control characters.
#[test]
fn hostile_binary_names_make_safe_file_names_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let label = "/tmp/lib%0Asediment: wrote evil%1B[31mRED";
    std::fs::write(d.join("g.gv"), two_clusters(label)).unwrap();
    let out = sediment_ok(d, &["import", "--format", "gv", "-o", "o.sprof", "g.gv"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    assert_eq!(stderr.lines().count(), 2, "{stderr:?}");
    assert!(
        stderr.lines().all(|l| l.starts_with("sediment: wrote o.")),
        "{stderr:?}"
    );
    for entry in std::fs::read_dir(d).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c)),
            "{name:?}"
        );
    }
    let side = d.join("o.lib_sediment__wrote_evil__31mRED.sprof");
    let p = Profile::from_text(&std::fs::read_to_string(side).unwrap()).unwrap();
    assert_eq!(p.meta.binary, "/tmp/lib\nsediment: wrote evil\x1b[31mRED");
}

/// A profile whose one function's name is `len` bytes of `n`, calling `main`.
fn long_name_profile(len: usize) -> Profile {
    let mut b = ProfileBuilder::new(Meta {
        binary: "/bin/long".into(),
        source: "perf".into(),
        total: 3,
        ..Meta::default()
    });
    let long = FuncKey::global("n".repeat(len));
    let main = FuncKey::global("main");
    b.add_self(&long, 2);
    b.add_self(&main, 1);
    b.add_call(&main, &long, 1);
    b.build()
}

// Regression (issue 34): a 1 MiB function name made `export --format gv` write a 1 MiB line
// that its own importer and `dot` refuse. A name longer than a Graphviz string may hold
// (`sediment_import::gv::MAX_STRING_LEN` bytes) is refused in one line naming the profile and
// the limit, writing nothing; one at the limit is written, and both `dot` and the importer
// read it (`dot` refuses a string of more than 16384 bytes).
#[test]
fn regress_gv_export_refuses_a_name_dot_cannot_read() {
    require!("dot");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let limit = sediment_import::gv::MAX_STRING_LEN;
    write(d, "huge.sprof", &long_name_profile(1 << 20));
    let args = ["export", "--format", "gv", "-p", "huge.sprof", "-o", "h.gv"];
    let out = fails_one_line(
        d,
        &args,
        &[
            "huge.sprof: function name `nnnn",
            &format!(
                "is {} bytes written, longer than the {limit} bytes",
                1 << 20
            ),
        ],
    );
    // The name is cut in the message (`sediment_profile::QUOTE_MAX` characters and `...`).
    assert!(out.stderr.len() < 300, "{} bytes", out.stderr.len());
    assert!(!d.join("h.gv").exists());
    write(d, "edge.sprof", &long_name_profile(limit));
    ok(&sediment(
        d,
        &["export", "--format", "gv", "-p", "edge.sprof", "-o", "e.gv"],
    ));
    // Graphviz's `nop` (same package and parser as `dot`): read and written back without a
    // layout; a 16000-character box is wider than `dot` lays out, which is not the point here.
    let out = Command::new("nop").arg(d.join("e.gv")).output().unwrap();
    ok(&out);
    ok(&sediment(
        d,
        &["import", "--format", "gv", "-o", "back.sprof", "e.gv"],
    ));
    let back = Profile::from_text(&std::fs::read_to_string(d.join("back.sprof")).unwrap()).unwrap();
    assert!(back.functions.iter().any(|f| f.key.name.len() == limit));
}
