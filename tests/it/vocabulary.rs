//! The command line's vocabulary (docs/reference/vocabulary.md), held by walking the clap
//! command tree: one noun has one flag and one value name in every verb, a flag name has one
//! meaning, every environment variable a verb reads is in its help, flag dependencies are
//! declared in clap rather than checked by hand. Quick tier: no external tool runs.

use clap::{Arg, ArgAction, Command};
use sediment::cli;
use std::collections::BTreeMap;
use std::path::Path;

/// A noun of the vocabulary table and its one spelling.
struct Noun {
    noun: &'static str,
    long: &'static str,
    short: Option<char>,
    value: &'static str,
}

/// The table (docs/reference/vocabulary.md). The workload after `--` and the positional nouns
/// are held by [`POSITIONALS`] and [`workload_after_double_dash`].
const NOUNS: &[Noun] = &[
    Noun {
        noun: "Sediment profile",
        long: "profile",
        short: Some('p'),
        value: "FILE",
    },
    Noun {
        noun: "an input ELF binary (one)",
        long: "binary",
        short: None,
        value: "FILE",
    },
    Noun {
        noun: "an order file",
        long: "order",
        short: None,
        value: "FILE",
    },
    Noun {
        noun: "output",
        long: "output",
        short: Some('o'),
        value: "FILE",
    },
    Noun {
        noun: "profile directory",
        long: "prof-dir",
        short: None,
        value: "DIR",
    },
];

/// Value names a positional argument may have: the nouns (several binaries compared, raw
/// profiler output, object files, Sediment profiles to merge), and the roles of two binaries
/// compared (`diff OLD NEW`, `compare BASE NEW...`) and of a verb's own operand.
const POSITIONALS: &[&str] = &[
    "BINARY", "INPUT", "OBJECT", "PROFILE", "OLD", "NEW", "BASE", "DIR", "FILE",
];

/// Value names that are another spelling of a noun's: an option taking one of these is a noun
/// spelled the wrong way.
const SYNONYMS: &[&str] = &[
    "BIN",
    "BINARIES",
    "OUT",
    "OUTPUT",
    "PROFILE",
    "ORDER",
    "ORDERS",
    "CALLGRIND_OUT",
    "SVG",
    "PATHS",
    "STEP",
    "SHIFT_STEP",
    "JOBS",
    "SHIFTS",
];

/// Exceptions, each with its reason. (verb path, long name, value name).
const ALLOWED_VALUES: &[(&str, &str, &str)] = &[
    // `blocks plan` writes a directory of two files (`bb-list.txt`, `order.txt`).
    ("sediment blocks plan", "output", "DIR"),
    // `align --apply` writes one aligned copy per object given.
    ("sediment align", "output", "DIR"),
];

/// Long names used with different value sets or defaults in different verbs on purpose.
const ALLOWED_MEANINGS: &[&str] = &[
    // The format of the file on the other side of the conversion: what `import` reads, what
    // `export` writes (each verb lists the formats it knows).
    "format",
];

/// Long names whose default differs by verb on purpose; value name and choices still agree.
const ALLOWED_DEFAULTS: &[&str] = &[
    // A row limit: each report has its own length (`diff` 15 rows per list, `structs` 20).
    "top",
    // `demo` records with callgrind, which needs no perf permissions; `record` with perf.
    "via",
    // `align` reports a noise range, which one layout does not have (8); `sim` and `compare`
    // print one layout unless asked (1).
    "shifts",
    // `match` refuses a profile of another program below 10%; `wrappers` bakes a least share
    // into the shims only when given (they read `SEDIMENT_MIN_SHARE`, default 0.5, at link time).
    "min-share",
];

/// Short flags with a different long name in different verbs: `-n` is the count in both
/// (`stat -n/--runs`: runs measured, `noise -n/--variants`: layouts built).
const ALLOWED_SHORTS: &[char] = &['n'];

/// Environment variables each verb reads, all of which its help must name.
const ENV: &[(&str, &[&str])] = &[
    (
        "sediment record",
        &[
            "SEDIMENT_PROF_DIR",
            "PROF_DIR",
            "SEDIMENT_MAX_INPUT_BYTES",
            "SEDIMENT_MAX_MEMORY",
        ],
    ),
    (
        "sediment import",
        &["SEDIMENT_MAX_INPUT_BYTES", "SEDIMENT_MAX_MEMORY"],
    ),
    (
        "sediment wrappers",
        &[
            "SEDIMENT_PROF_DIR",
            "PROF_DIR",
            "SEDIMENT_ALGORITHM",
            "SEDIMENT_VERBOSE",
            "SEDIMENT_MIN_SHARE",
        ],
    ),
    (
        "sediment ld",
        &[
            "SEDIMENT_PROF_DIR",
            "PROF_DIR",
            "SEDIMENT_ALGORITHM",
            "SEDIMENT_VERBOSE",
            "SEDIMENT_MIN_SHARE",
            "COLLECT_GCC_OPTIONS",
        ],
    ),
];

/// Hand checks of one flag against another that clap cannot declare, each with its reason:
/// the start of the message, as it stands in `bail!("...")`.
const HAND_CHECKS: &[&str] = &[
    // clap cannot conflict with one value of `--via`, which has a default.
    "--mode {} is for --via perf only",
    "--pid and --all record with perf only",
    // clap cannot require one value of `--format` (export's `--weight` is a parquet column).
    "--weight is for --format parquet",
];

/// One argument of one verb.
struct Use {
    verb: String,
    arg: Arg,
}

/// Every verb (subcommands included, hidden ones too) with its full name.
fn verbs() -> Vec<(String, Command)> {
    fn walk(prefix: &str, cmd: &Command, out: &mut Vec<(String, Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let name = format!("{prefix} {}", sub.get_name());
            out.push((name.clone(), sub.clone()));
            walk(&name, sub, out);
        }
    }
    let mut root = cli::command();
    root.build();
    let mut out = Vec::new();
    walk("sediment", &root, &mut out);
    out
}

/// The arguments a user sees: not hidden (a hidden argument is an old spelling kept for one
/// release), not the generated help/version flags.
fn uses() -> Vec<Use> {
    let mut out = Vec::new();
    for (verb, cmd) in verbs() {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.is_hide_set() || id == "help" || id == "version" {
                continue;
            }
            out.push(Use {
                verb: verb.clone(),
                arg: arg.clone(),
            });
        }
    }
    out
}

fn value_name(arg: &Arg) -> String {
    arg.get_value_names()
        .map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
}

fn takes_value(arg: &Arg) -> bool {
    !matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count | ArgAction::Help
    )
}

fn allowed_value(verb: &str, long: &str, value: &str) -> bool {
    ALLOWED_VALUES.contains(&(verb, long, value))
}

#[test]
fn nouns_have_one_spelling() {
    let mut bad = Vec::new();
    for u in uses() {
        let (verb, arg) = (&u.verb, &u.arg);
        let (long, short, value) = (arg.get_long(), arg.get_short(), value_name(arg));
        for n in NOUNS {
            let by_long = long == Some(n.long);
            let by_short = n.short.is_some() && short == n.short;
            if !(by_long || by_short) {
                continue;
            }
            if long != Some(n.long) || short != n.short {
                bad.push(format!(
                    "{verb}: {} is spelled {:?}/{:?}, not -{:?}/--{}",
                    n.noun, short, long, n.short, n.long
                ));
            }
            if value != n.value && !allowed_value(verb, n.long, &value) {
                bad.push(format!(
                    "{verb}: --{} takes {value}, not {} ({})",
                    n.long, n.value, n.noun
                ));
            }
        }
        if arg.is_positional() {
            if arg.is_last_set() {
                continue; // held by workload_after_double_dash
            }
            let several = arg.get_num_args().is_some_and(|r| r.max_values() > 1);
            if value == "BINARY" && !several {
                bad.push(format!(
                    "{verb}: one binary is `--binary FILE`; positional BINARY... is for several"
                ));
            }
            if !POSITIONALS.contains(&value.as_str()) {
                bad.push(format!(
                    "{verb}: positional {value} is none of the nouns {POSITIONALS:?}"
                ));
            }
        } else if takes_value(arg) && SYNONYMS.contains(&value.as_str()) {
            let l = long.unwrap_or_default();
            if !allowed_value(verb, l, &value) {
                bad.push(format!(
                    "{verb}: --{l} <{value}> spells a noun another way (see the table)"
                ));
            }
        }
    }
    assert!(bad.is_empty(), "vocabulary broken:\n{}", bad.join("\n"));
}

#[test]
fn workload_after_double_dash() {
    // A verb that runs a workload takes it after `--` (clap's `last`), as ARGS, or as CMD where
    // the first word is the program itself.
    let mut bad = Vec::new();
    for u in uses() {
        if u.arg.is_last_set() {
            let v = value_name(&u.arg);
            // `stat` takes two command lines, separated by `:::`.
            if v != "ARGS" && v != "CMD" && v != "CMD_A ::: CMD_B" {
                bad.push(format!("{}: the words after -- are {v}", u.verb));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn one_meaning_per_flag_name() {
    // Same long name in several verbs: same short, same value name, same choices and default.
    type Meaning = (Option<char>, String, Vec<String>, Vec<String>);
    let mut seen: BTreeMap<String, Vec<(String, Meaning)>> = BTreeMap::new();
    let mut shorts: BTreeMap<char, Vec<(String, String)>> = BTreeMap::new();
    for u in uses() {
        let arg = &u.arg;
        let Some(long) = arg.get_long() else { continue };
        let value = if takes_value(arg) {
            value_name(arg)
        } else {
            String::new()
        };
        if allowed_value(&u.verb, long, &value) {
            continue;
        }
        let mut choices: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|p| p.get_name().to_string())
            .collect();
        choices.sort();
        let defaults = if ALLOWED_DEFAULTS.contains(&long) {
            Vec::new()
        } else {
            arg.get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect()
        };
        let meaning = (arg.get_short(), value, choices, defaults);
        seen.entry(long.to_string())
            .or_default()
            .push((u.verb.clone(), meaning));
        if let Some(s) = arg.get_short() {
            shorts
                .entry(s)
                .or_default()
                .push((u.verb.clone(), long.to_string()));
        }
    }
    let mut bad = Vec::new();
    for (long, all) in &seen {
        if ALLOWED_MEANINGS.contains(&long.as_str()) {
            continue;
        }
        let (first_verb, first) = &all[0];
        for (verb, m) in &all[1..] {
            if m != first {
                bad.push(format!("--{long}: {first_verb} {first:?} but {verb} {m:?}"));
            }
        }
    }
    for (s, all) in &shorts {
        if ALLOWED_SHORTS.contains(s) {
            continue;
        }
        let (first_verb, first) = &all[0];
        for (verb, long) in &all[1..] {
            if long != first {
                bad.push(format!(
                    "-{s}: --{first} in {first_verb}, --{long} in {verb}"
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "one flag, two meanings:\n{}",
        bad.join("\n")
    );
}

/// The long help of a verb, as `sediment VERB... --help` prints it.
fn long_help(verb: &str) -> String {
    let (_, mut cmd) = verbs()
        .into_iter()
        .find(|(v, _)| v == verb)
        .unwrap_or_else(|| panic!("no verb {verb}"));
    cmd.render_long_help().to_string()
}

#[test]
fn environment_variables_are_in_help() {
    let mut bad = Vec::new();
    for (verb, vars) in ENV {
        let help = long_help(verb);
        for v in *vars {
            if !help.contains(v) {
                bad.push(format!("{verb} --help does not name {v}"));
            }
        }
    }
    // Every variable of Sediment's own the sources name is in the table: a quoted `SEDIMENT_*`
    // or `PROF_DIR`. (The standard ones, PATH, HOME, XDG_CACHE_HOME, are not listed.)
    let listed: Vec<&str> = ENV.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    for (file, text) in sources() {
        for var in quoted_env_names(&text) {
            if !listed.contains(&var.as_str()) {
                bad.push(format!("{file} reads {var}, which no verb's help lists"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The Rust sources of the `sediment` library and binary (`src/`) and of the library crates
/// (`crates/*/src`), by path.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((
                    p.display().to_string(),
                    std::fs::read_to_string(&p).unwrap(),
                ));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    walk(&root.join("src"), &mut out);
    for e in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = e.unwrap().path().join("src");
        if src.is_dir() {
            walk(&src, &mut out);
        }
    }
    out.sort();
    out
}

/// `"SEDIMENT_X"` and `"PROF_DIR"` string literals in `text`.
fn quoted_env_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('"') {
        let rest = &text[i + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
            .collect();
        let closed = rest[name.len()..].starts_with('"');
        if closed && (name.starts_with("SEDIMENT_") || name == "PROF_DIR") {
            out.push(name);
        }
    }
    out
}

#[test]
fn flag_dependencies_are_declared_in_clap() {
    // A message like `bail!("--x needs --y")` is a dependency clap should declare
    // (requires, conflicts_with, required_unless_present); the ones it cannot are listed.
    let mut bad = Vec::new();
    for (file, text) in sources() {
        for line in text.lines() {
            for mac in ["bail!(\"", "anyhow!(\""] {
                let Some(at) = line.find(mac) else { continue };
                let msg = &line[at + mac.len()..];
                let msg = &msg[..msg.find('"').unwrap_or(msg.len())];
                let flags = msg
                    .split(|c: char| c.is_whitespace() || c == '(' || c == ',')
                    .filter(|w| w.starts_with("--") && w.len() > 2)
                    .count();
                let names_two = msg.starts_with("--") && flags >= 2;
                if names_two && !HAND_CHECKS.iter().any(|h| msg.starts_with(h)) {
                    bad.push(format!("{file}: {msg}"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "flag dependencies checked by hand (declare them in clap):\n{}",
        bad.join("\n")
    );
}

#[test]
fn ld_is_hidden_from_the_verb_list() {
    let help = cli::command().render_help().to_string();
    assert!(
        !help.lines().any(|l| l.trim_start().starts_with("ld ")),
        "{help}"
    );
    assert!(help.contains("wrappers"), "{help}");
}

#[test]
fn old_spellings_still_parse() {
    // Renamed options keep their old spelling as a hidden alias for one release.
    let ok = |args: &[&str]| {
        let mut all = vec!["sediment"];
        all.extend(args);
        if let Err(e) = cli::command().try_get_matches_from(&all) {
            panic!("{args:?}: {e}");
        }
    };
    ok(&["pgo", "--binary", "b", "-p", "cg.out", "-o", "u"]);
    ok(&["pgo", "--binary", "b", "--profile", "cg.out", "-o", "u"]);
    ok(&["blocks", "plan", "--binary", "b", "-p", "cg.out", "-o", "d"]);
    ok(&[
        "noise",
        "-n",
        "2",
        "--mode",
        "shift",
        "--shift-step",
        "64",
        "a.o",
    ]);
    ok(&["merge", "-o", "m", "-f", "a", "--file", "b"]);
    ok(&[
        "import", "--format", "gv", "--binary", "x", "a.gv", "-o", "o",
    ]);
    ok(&["structs", "prog"]);
    ok(&["blocks", "check", "--plan", "d", "prog"]);
    // And the new ones.
    ok(&["pgo", "--binary", "b", "cg.out", "cg.out.2", "-o", "u"]);
    ok(&["blocks", "plan", "--binary", "b", "cg.out", "-o", "d"]);
    ok(&[
        "noise",
        "-n",
        "2",
        "--vary",
        "shift",
        "--pad-step",
        "64",
        "a.o",
    ]);
    ok(&["merge", "-o", "m", "-p", "a", "--profile", "b"]);
    ok(&[
        "import",
        "--format",
        "gv",
        "--cluster",
        "x",
        "a.gv",
        "-o",
        "o",
    ]);
    ok(&[
        "import",
        "--format",
        "objects",
        "--program",
        "x",
        "a.o",
        "-o",
        "o",
    ]);
    ok(&["structs", "--binary", "prog"]);
    ok(&["blocks", "check", "--plan", "d", "--binary", "prog"]);
    // Both spellings of one input at once are refused.
    let both = [
        "sediment", "blocks", "plan", "--binary", "b", "x", "-p", "y", "-o", "d",
    ];
    assert!(cli::command().try_get_matches_from(both).is_err());
}

#[test]
fn the_written_table_is_this_one() {
    // docs/reference/vocabulary.md states every noun's spelling held here.
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference/vocabulary.md"),
    )
    .unwrap();
    for n in NOUNS {
        let spelling = match n.short {
            Some(s) => format!("`-{s}, --{} {}`", n.long, n.value),
            None => format!("`--{} {}`", n.long, n.value),
        };
        assert!(
            page.contains(&spelling),
            "{}: {spelling} not in vocabulary.md",
            n.noun
        );
    }
    for (_, vars) in ENV {
        for v in vars.iter().filter(|v| v.starts_with("SEDIMENT_")) {
            assert!(page.contains(v), "{v} not in vocabulary.md");
        }
    }
}

#[test]
fn prof_dir_environment_scheme() {
    // `record` takes the profile directory from SEDIMENT_PROF_DIR, else PROF_DIR; a set but
    // empty SEDIMENT_PROF_DIR means none and hides PROF_DIR (as in the linker shims). A missing
    // program is refused before any profiler runs, so no external tool is needed: the error
    // says which of the two checks was reached.
    let dir = tempfile::tempdir().unwrap();
    let record = |env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(crate::common::sediment_bin());
        cmd.current_dir(dir.path())
            .env_remove("SEDIMENT_PROF_DIR")
            .env_remove("PROF_DIR")
            .args(["record", "--", "/nonexistent/prog"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let no_output = "no output: give -o FILE or --prof-dir DIR";
    assert!(record(&[]).contains(no_output));
    for env in [
        &[("SEDIMENT_PROF_DIR", "profs")][..],
        &[("PROF_DIR", "profs")],
        &[("SEDIMENT_PROF_DIR", "profs"), ("PROF_DIR", "")],
    ] {
        let err = record(env);
        assert!(!err.contains(no_output), "{env:?}: {err}");
        assert!(err.contains("/nonexistent/prog"), "{env:?}: {err}");
    }
    let err = record(&[("SEDIMENT_PROF_DIR", ""), ("PROF_DIR", "profs")]);
    assert!(err.contains(no_output), "{err}");
}
