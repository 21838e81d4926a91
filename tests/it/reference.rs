//! The reference pages `docs/reference/<verb>.md`, generated from the clap command tree (one
//! page per verb, its subcommands included: usage, arguments, options with their help,
//! defaults, choices; a verb's environment variables are in its notes). The test fails when the checked-in pages drift from the
//! command line; `SEDIMENT_UPDATE_REFERENCE=1 cargo test --test it reference` rewrites them.
//! Hidden verbs and options (internal verbs, old spellings) are not documented.
//! `docs/reference/vocabulary.md` is written by hand and left alone. Quick tier.

use clap::{Arg, ArgAction, Command};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The page written by hand, beside the generated ones.
const HAND_WRITTEN: &[&str] = &["vocabulary.md"];

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference")
}

/// Every generated page, by file name.
pub fn pages() -> BTreeMap<String, String> {
    let mut root = sediment::cli::command();
    root.build();
    let mut pages = BTreeMap::new();
    let mut index = String::from(
        "# Command reference\n\n\
         Generated from the command line by `tests/it/reference.rs`; do not edit by hand \
         (regenerate: `SEDIMENT_UPDATE_REFERENCE=1 cargo test --test it reference`). The nouns \
         every verb shares are in [vocabulary.md](vocabulary.md).\n\n",
    );
    let _ = writeln!(index, "```text\n{}\n```\n", usage(&root));
    index.push_str("| verb | what it does |\n|---|---|\n");
    for verb in visible_subcommands(&root) {
        let file = format!("{}.md", verb.get_name());
        let _ = writeln!(
            index,
            "| [`{}`]({file}) | {} |",
            verb.get_name(),
            one_line(verb.get_about().map(|a| a.to_string()).unwrap_or_default())
        );
        let mut page = String::new();
        write_verb(&mut page, verb, 1);
        pages.insert(file, page);
    }
    let globals: Vec<&Arg> = root
        .get_arguments()
        .filter(|a| a.is_global_set() && !a.is_hide_set())
        .collect();
    if !globals.is_empty() {
        index.push_str("\n## Options of every verb\n\n");
        for a in globals {
            write_arg(&mut index, a);
        }
    }
    pages.insert("README.md".to_string(), index);
    pages
}

fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

fn usage(cmd: &Command) -> String {
    let u = cmd.clone().render_usage().to_string();
    u.strip_prefix("Usage: ")
        .unwrap_or(&u)
        .trim_end()
        .to_string()
}

/// Text on one line (for a table cell).
fn one_line(s: String) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn write_verb(out: &mut String, cmd: &Command, depth: usize) {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    let _ = writeln!(out, "{} `{name}`\n", "#".repeat(depth));
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    if !about.is_empty() {
        let _ = writeln!(out, "{}\n", about.trim_end());
    }
    let _ = writeln!(out, "```text\n{}\n```\n", usage(cmd));
    let h = "#".repeat(depth + 1);
    let subs: Vec<&Command> = visible_subcommands(cmd).collect();
    if !subs.is_empty() {
        let _ = writeln!(out, "{h} Subcommands\n");
        for s in &subs {
            let about = s.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(out, "- `{}`: {}", s.get_name(), one_line(about));
        }
        out.push('\n');
    }
    let shown = |a: &&Arg| {
        let id = a.get_id().as_str();
        !a.is_hide_set() && !a.is_global_set() && id != "help" && id != "version"
    };
    let positionals: Vec<&Arg> = cmd.get_positionals().filter(shown).collect();
    if !positionals.is_empty() {
        let _ = writeln!(out, "{h} Arguments\n");
        for a in positionals {
            write_arg(out, a);
        }
        out.push('\n');
    }
    let options: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_positional())
        .filter(shown)
        .collect();
    if !options.is_empty() {
        let _ = writeln!(out, "{h} Options\n");
        for a in options {
            write_arg(out, a);
        }
        out.push('\n');
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = writeln!(
            out,
            "{h} Notes\n\n```text\n{}\n```\n",
            after.to_string().trim_end()
        );
    }
    for s in subs {
        write_verb(out, s, depth + 1);
    }
}

fn value_names(a: &Arg) -> Vec<String> {
    a.get_value_names()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .unwrap_or_else(|| vec![a.get_id().as_str().to_uppercase()])
}

fn write_arg(out: &mut String, a: &Arg) {
    let takes_value = !matches!(
        a.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count | ArgAction::Help
    );
    let many = a.get_num_args().is_some_and(|r| r.max_values() > 1)
        || matches!(a.get_action(), ArgAction::Append);
    let dots = if many { "..." } else { "" };
    let spelling = if a.is_positional() {
        let v = value_names(a).join(" ");
        if a.is_last_set() {
            format!("-- {v}{dots}")
        } else {
            format!("{v}{dots}")
        }
    } else {
        let mut s = String::new();
        if let Some(c) = a.get_short() {
            let _ = write!(s, "-{c}");
        }
        if let Some(l) = a.get_long() {
            if !s.is_empty() {
                s.push_str(", ");
            }
            let _ = write!(s, "--{l}");
        }
        if takes_value {
            let _ = write!(s, " {}", value_names(a).join(" "));
        }
        s
    };
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let _ = write!(out, "- `{spelling}`");
    if a.is_required_set() {
        out.push_str(" (required)");
    }
    let _ = write!(out, ": {}", one_line(help));
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    if takes_value && !defaults.is_empty() {
        let _ = write!(out, " (default: `{}`)", defaults.join(" "));
    }
    out.push('\n');
    let values: Vec<_> = a
        .get_possible_values()
        .into_iter()
        .filter(|p| !p.is_hide_set())
        .collect();
    if takes_value && !values.is_empty() {
        for p in values {
            let _ = write!(out, "  - `{}`", p.get_name());
            match p.get_help() {
                Some(h) => {
                    let _ = writeln!(out, ": {}", one_line(h.to_string()));
                }
                None => out.push('\n'),
            }
        }
    }
}

#[test]
fn reference_pages_match_the_command_line() {
    let dir = reference_dir();
    let want = pages();
    let update = std::env::var_os("SEDIMENT_UPDATE_REFERENCE").is_some_and(|v| v == "1");
    let on_disk: BTreeMap<String, String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .map(|p| {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    (name, std::fs::read_to_string(&p).unwrap())
                })
                .filter(|(name, _)| !HAND_WRITTEN.contains(&name.as_str()))
                .collect()
        })
        .unwrap_or_default();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &want {
            if on_disk.get(name) != Some(text) {
                std::fs::write(dir.join(name), text).unwrap();
            }
        }
        for name in on_disk.keys().filter(|n| !want.contains_key(*n)) {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        return;
    }
    let mut drift = Vec::new();
    for (name, text) in &want {
        match on_disk.get(name) {
            None => drift.push(format!("{name}: missing")),
            Some(t) if t != text => drift.push(format!("{name}: differs")),
            Some(_) => {}
        }
    }
    for name in on_disk.keys().filter(|n| !want.contains_key(*n)) {
        drift.push(format!("{name}: no such verb (stale page)"));
    }
    assert!(
        drift.is_empty(),
        "docs/reference is out of date with the command line:\n{}\n\
         regenerate: SEDIMENT_UPDATE_REFERENCE=1 cargo test --test it reference",
        drift.join("\n")
    );
}

#[test]
fn hidden_verbs_and_options_are_not_documented() {
    let pages = pages();
    assert!(!pages.contains_key("ld.md"));
    let pgo = &pages["pgo.md"];
    assert!(pgo.contains("INPUT"), "{pgo}");
    assert!(!pgo.contains("--profile"), "{pgo}");
}
