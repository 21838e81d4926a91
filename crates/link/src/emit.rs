//! The emitters: one linker input per [`Linker`], from a [`Resolution`].
//!
//! Every emitter walks the resolved order hottest first and writes each placeable unit once,
//! at its first (hottest) occurrence. What a "unit" is depends on how the linker names things:
//!
//! | linker | unit written                          | file option                        |
//! |--------|---------------------------------------|------------------------------------|
//! | lld    | symbol name                           | `--symbol-ordering-file`           |
//! | gold   | input-section name                    | `--section-ordering-file`          |
//! | bfd    | (object pattern, input-section name)  | `-T` script / `--section-ordering-file` (>= 2.43) |
//! | mold   | (object pattern, input-section name)  | none: `ld -r -T` pre-link script   |
//!
//! lld and gold cannot tell same-named static functions of two objects apart; both are placed
//! at the hottest position of the name (a counted warning says how many entries were merged).
//! GNU ld scripts can: patterns are qualified with the object's shortest unique path suffix,
//! written twice, `*/dir/a.o(...)` for when the linker sees a longer path and `[d]ir/a.o(...)`
//! for the exact one. The bracket makes the name a wildcard pattern: a file name *without*
//! wildcards in an input-section description makes ld open that file as an extra input (ld
//! manual, "Input Section Basics"), which is never what we want.
//!
//! Sections that hold several functions (objects built without `-ffunction-sections`) are not
//! written for gold, bfd and mold: moving `.text` of an object would move everything in it. lld
//! gets the name anyway; it moves the section at the position of its hottest symbol.

use crate::resolve::{Resolution, SymRef};
use crate::safe::{is_safe_path, is_safe_section, is_safe_symbol};
use crate::{list_some, Error, Linker};
use sediment_elf::objects::ObjectFile;
use sediment_profile::FuncKey;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// Whether the final link makes a position-independent executable (GNU ld's default script
/// differs). Debian's and most distributions' gcc default to PIE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PieMode {
    /// `-pie` (the default of the compiler driver).
    #[default]
    Pie,
    /// `-no-pie`.
    NoPie,
}

/// What to write for GNU ld.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BfdFlavor {
    /// ld < 2.43: a full script made from the stdout of `ld --verbose [-pie|-no-pie]`.
    FullScript {
        /// The complete stdout of `ld --verbose` run in the mode below.
        verbose_output: String,
        /// The mode it was run in (recorded in the script's first line).
        pie: PieMode,
    },
    /// ld >= 2.43: a `--section-ordering-file` fragment.
    OrderingFile,
}

/// First line of a full GNU ld script (PIE), of one for `-no-pie`, of a 2.43 fragment and of a
/// mold pre-link script: [`flags`] reads them back.
pub const BFD_SCRIPT_HEADER: &str =
    "/* sediment: GNU ld default script (ld --verbose -pie) with ordered .text input sections */";
/// See [`BFD_SCRIPT_HEADER`].
pub const BFD_SCRIPT_HEADER_NO_PIE: &str = "/* sediment: GNU ld default script (ld --verbose -no-pie) with ordered .text input sections */";
/// See [`BFD_SCRIPT_HEADER`].
pub const BFD_FRAGMENT_HEADER: &str =
    "/* sediment: GNU ld --section-ordering-file fragment (binutils >= 2.43) */";
/// See [`BFD_SCRIPT_HEADER`].
pub const MOLD_PRELINK_HEADER: &str = "/* sediment: ld -r pre-link script for mold: ld -r -T THIS -o THIS.o, then link THIS.o with mold */";

/// A linker input ready to be written, with the warnings met while making it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emitted {
    /// The file contents.
    pub text: String,
    /// One line each: the resolution's warnings followed by the emitter's own.
    pub warnings: Vec<String>,
    /// Number of lines (symbols, sections or patterns) written.
    pub written: usize,
}

/// Writes `linker`'s input for a resolved order.
pub fn emit(
    linker: Linker,
    res: &Resolution,
    objects: &[ObjectFile],
    bfd: &BfdFlavor,
) -> Result<Emitted, Error> {
    let mut warnings = res.warnings.clone();
    let matched = res.placed.len();
    let (text, written) = match linker {
        Linker::Lld => {
            let names = by_name(res, objects, false, &mut warnings, |r| {
                objects[r.object].functions[r.function].name.clone()
            });
            let n = names.len();
            (names.into_iter().map(|s| s + "\n").collect::<String>(), n)
        }
        Linker::Gold => {
            let names = by_name(res, objects, true, &mut warnings, |r| {
                objects[r.object].functions[r.function].section.clone()
            });
            let n = names.len();
            (names.into_iter().map(|s| s + "\n").collect::<String>(), n)
        }
        Linker::Bfd => {
            let body = qualified_lines(res, objects, &mut warnings);
            let n = body.len();
            let text = match bfd {
                BfdFlavor::FullScript {
                    verbose_output,
                    pie,
                } => full_script(verbose_output, *pie, &body)?,
                BfdFlavor::OrderingFile => sections_block(BFD_FRAGMENT_HEADER, "", &body),
            };
            (text, n)
        }
        Linker::Mold => {
            let mut inputs: Vec<&str> = Vec::new();
            for o in objects {
                if o.member.is_some() {
                    return Err(Error::Mold(format!(
                        "{}: the ld -r pre-link route takes object files only (extract the archive with `ar x`)",
                        o.path
                    )));
                }
                if !is_safe_path(&o.path) {
                    return Err(Error::Mold(format!(
                        "{}: path has characters that cannot go into an ld script (use [A-Za-z0-9_.+-/])",
                        sediment_profile::escape(&o.path)
                    )));
                }
                if !inputs.contains(&o.path.as_str()) {
                    inputs.push(&o.path);
                }
            }
            let body = qualified_lines(res, objects, &mut warnings);
            let n = body.len();
            let input = format!("INPUT({})\n", inputs.join(" "));
            (sections_block(MOLD_PRELINK_HEADER, &input, &body), n)
        }
    };
    if written == 0 {
        return Err(Error::NothingEmitted { matched });
    }
    Ok(Emitted {
        text,
        warnings,
        written,
    })
}

/// The unit names for lld (symbols) or gold (sections), deduplicated, first occurrence wins.
fn by_name(
    res: &Resolution,
    objects: &[ObjectFile],
    sections: bool,
    warnings: &mut Vec<String>,
    unit: impl Fn(&SymRef) -> String,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut merged: Vec<FuncKey> = Vec::new();
    let mut unsafe_keys: Vec<FuncKey> = Vec::new();
    let mut shared: usize = 0;
    for (key, refs) in &res.placed {
        let mut wrote = false;
        let mut dup = false;
        for r in refs {
            let f = &objects[r.object].functions[r.function];
            if sections && (f.shared_section || is_generic_section(&f.section)) {
                shared += 1;
                continue;
            }
            let u = unit(r);
            let ok = if sections {
                is_safe_section(&u)
            } else {
                is_safe_symbol(&u)
            };
            if !ok {
                if !unsafe_keys.contains(key) {
                    unsafe_keys.push(key.clone());
                }
                continue;
            }
            if seen.insert(u.clone()) {
                out.push(u);
                wrote = true;
            } else {
                dup = true;
            }
        }
        if dup && !wrote {
            merged.push(key.clone());
        }
    }
    let what = if sections { "section" } else { "symbol" };
    if !merged.is_empty() {
        warnings.push(format!(
            "{} order entries share their {what} name with a hotter entry (same-named static functions); {} cannot tell them apart and places them together: {}",
            merged.len(),
            if sections { "gold" } else { "lld" },
            list_some(&merged, merged.len())
        ));
    }
    unsafe_warning(warnings, &unsafe_keys);
    if shared > 0 {
        warnings.push(format!(
            "{shared} ordered functions skipped: their section holds other functions too (no -ffunction-sections)"
        ));
    }
    out
}

/// Section names gold would match in every object at once.
fn is_generic_section(s: &str) -> bool {
    matches!(
        s,
        ".text" | ".text.hot" | ".text.unlikely" | ".text.startup" | ".text.exit"
    )
}

fn unsafe_warning(warnings: &mut Vec<String>, keys: &[FuncKey]) {
    if !keys.is_empty() {
        warnings.push(format!(
            "{} order entries skipped: their name, section or object path has characters that could inject linker syntax (allowed: A-Z a-z 0-9 _ . $ and @ in symbols): {}",
            keys.len(),
            list_some(keys, keys.len())
        ));
    }
}

/// File-qualified input-section lines (`*/a.o(.text.f) [a].o(.text.f)`), one per (object,
/// section), hottest first.
fn qualified_lines(
    res: &Resolution,
    objects: &[ObjectFile],
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let patterns = object_patterns(objects);
    let mut out = Vec::new();
    let mut seen: HashSet<(usize, &str)> = HashSet::new();
    let mut unsafe_keys: Vec<FuncKey> = Vec::new();
    let mut shared = 0usize;
    for (key, refs) in &res.placed {
        for r in refs {
            let f = &objects[r.object].functions[r.function];
            if f.shared_section {
                shared += 1;
                continue;
            }
            let Some(pats) = &patterns[r.object] else {
                if !unsafe_keys.contains(key) {
                    unsafe_keys.push(key.clone());
                }
                continue;
            };
            if !is_safe_section(&f.section) {
                if !unsafe_keys.contains(key) {
                    unsafe_keys.push(key.clone());
                }
                continue;
            }
            if !seen.insert((r.object, f.section.as_str())) {
                continue;
            }
            let line = pats
                .iter()
                .map(|p| format!("{p}({})", f.section))
                .collect::<Vec<_>>()
                .join(" ");
            out.push(line);
        }
    }
    unsafe_warning(warnings, &unsafe_keys);
    if shared > 0 {
        warnings.push(format!(
            "{shared} ordered functions skipped: their section holds other functions too (no -ffunction-sections)"
        ));
    }
    out
}

/// Per object, the ld file patterns naming it (or `None` when its path or member name is not
/// safe). The shortest path suffix that no other input path shares is used, with a `*/` form
/// and an exact form; a path that is a suffix of another gets the exact form only.
fn object_patterns(objects: &[ObjectFile]) -> Vec<Option<Vec<String>>> {
    let comps = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_string)
            .collect()
    };
    let mut distinct: Vec<&str> = Vec::new();
    for o in objects {
        if !distinct.contains(&o.path.as_str()) {
            distinct.push(&o.path);
        }
    }
    let all: Vec<Vec<String>> = distinct.iter().map(|p| comps(p)).collect();
    let mut per_path: HashMap<&str, Option<Vec<String>>> = HashMap::new();
    for (i, p) in distinct.iter().enumerate() {
        if !is_safe_path(p) {
            per_path.insert(p, None);
            continue;
        }
        let me = &all[i];
        let mut chosen = None;
        for k in 1..=me.len() {
            let suffix = &me[me.len() - k..];
            let clash = all.iter().enumerate().any(|(j, other)| {
                j != i && other.len() >= k && &other[other.len() - k..] == suffix
            });
            if !clash {
                chosen = Some(k);
                break;
            }
        }
        let pats = match chosen {
            Some(k) => {
                let s = me[me.len() - k..].join("/");
                let exact = if k == me.len() && p.starts_with('/') {
                    format!("/{s}")
                } else {
                    s.clone()
                };
                vec![format!("*/{s}"), bracket_first(&exact)]
            }
            None => {
                let s = me.join("/");
                let exact = if p.starts_with('/') {
                    format!("/{s}")
                } else {
                    s
                };
                vec![bracket_first(&exact)]
            }
        };
        per_path.insert(p, Some(pats));
    }
    objects
        .iter()
        .map(|o| {
            let pats = per_path.get(o.path.as_str()).cloned().flatten()?;
            match &o.member {
                None => Some(pats),
                Some(m) => {
                    if !crate::safe::is_safe_path_component(m) {
                        return None;
                    }
                    let m = bracket_first(m);
                    Some(pats.into_iter().map(|p| format!("{p}:{m}")).collect())
                }
            }
        })
        .collect()
}

/// `a.o` -> `[a].o`: a wildcard pattern that matches exactly the name.
fn bracket_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => format!("[{c}]{}", chars.as_str()),
        None => String::new(),
    }
}

/// `SECTIONS { .text : { lines } }` with a header and optional preamble.
fn sections_block(header: &str, preamble: &str, body: &[String]) -> String {
    let mut s = format!("{header}\n{preamble}SECTIONS\n{{\n  .text :\n  {{\n");
    for l in body {
        let _ = writeln!(s, "    {l}");
    }
    s.push_str("  }\n}\n");
    s
}

/// The default script between the `=====` rulers of `ld --verbose`.
pub fn default_script(verbose_output: &str) -> Result<&str, Error> {
    let is_ruler = |l: &str| l.len() >= 10 && l.bytes().all(|b| b == b'=');
    let mut start = None;
    let mut pos = 0;
    for line in verbose_output.split_inclusive('\n') {
        let bare = line.trim_end();
        if is_ruler(bare) {
            match start {
                None => start = Some(pos + line.len()),
                Some(s) => return Ok(&verbose_output[s..pos]),
            }
        }
        pos += line.len();
    }
    Err(Error::DefaultScript(
        "`ld --verbose` printed no script between `=====` lines".into(),
    ))
}

/// ld's default script with `body` inserted at the start of the `.text` output section.
fn full_script(verbose_output: &str, pie: PieMode, body: &[String]) -> Result<String, Error> {
    let script = default_script(verbose_output)?;
    let lines: Vec<&str> = script.split_inclusive('\n').collect();
    let text_at = lines
        .iter()
        .position(|l| {
            l.trim_start()
                .strip_prefix(".text")
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .ok_or_else(|| Error::DefaultScript("no `.text` output section".into()))?;
    let open_at = (text_at..lines.len())
        .find(|&i| lines[i].contains('{'))
        .ok_or_else(|| Error::DefaultScript("`.text` output section has no `{`".into()))?;
    let mut out = String::with_capacity(script.len() + body.len() * 64);
    out.push_str(match pie {
        PieMode::Pie => BFD_SCRIPT_HEADER,
        PieMode::NoPie => BFD_SCRIPT_HEADER_NO_PIE,
    });
    out.push('\n');
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        if i == open_at {
            if !l.ends_with('\n') {
                out.push('\n');
            }
            out.push_str("    /* sediment: ordered functions, hottest first */\n");
            for b in body {
                let _ = writeln!(out, "    {b}");
            }
            out.push_str("    /* sediment: end */\n");
        }
    }
    Ok(out)
}

/// The lines `sediment link-flags` prints for `linker` and the file it wrote. For bfd the
/// file's first line says whether it is a full script (and for which PIE mode) or a 2.43
/// fragment; `contents` is `None` when the file could not be read (a full PIE script is
/// assumed). For mold the first line is a command to run, the second the driver flags that
/// replace the object files.
pub fn flags(linker: Linker, file: &str, contents: Option<&str>) -> Vec<String> {
    match linker {
        Linker::Lld => vec![format!(
            "-fuse-ld=lld -Wl,--symbol-ordering-file={file} -Wl,--no-warn-symbol-ordering"
        )],
        Linker::Gold => vec![format!("-fuse-ld=gold -Wl,--section-ordering-file={file}")],
        Linker::Bfd => {
            let first = contents.and_then(|c| c.lines().next()).unwrap_or("");
            if first == BFD_FRAGMENT_HEADER {
                vec![format!("-fuse-ld=bfd -Wl,--section-ordering-file={file}")]
            } else if first == BFD_SCRIPT_HEADER_NO_PIE {
                vec![format!("-fuse-ld=bfd -no-pie -Wl,-T,{file}")]
            } else {
                vec![format!("-fuse-ld=bfd -Wl,-T,{file}")]
            }
        }
        Linker::Mold => vec![
            format!("ld -r -T {file} -o {file}.o"),
            format!("-fuse-ld=mold {file}.o"),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::resolve;
    use crate::resolve::tests::{func, obj, two_objects};
    use sediment_elf::objects::Binding;
    use sediment_profile::FunctionOrder;

    fn order(keys: &[FuncKey]) -> FunctionOrder {
        FunctionOrder {
            functions: keys.to_vec(),
            ..Default::default()
        }
    }

    const VERBOSE: &str = "GNU ld 2.40\nusing internal linker script:\n==================================================\nSECTIONS\n{\n  .text           :\n  {\n    *(.text .text.*)\n  }\n}\n==================================================\n";

    // Same-named statics: lld and gold list the name once (hottest), bfd places both exactly.
    #[test]
    fn same_named_statics_per_linker() {
        let objs = two_objects();
        let o = order(&[
            FuncKey::local("helper", "b.c"),
            FuncKey::global("main"),
            FuncKey::local("helper", "a.c"),
        ]);
        let res = resolve(&o, &objs).unwrap();
        let lld = emit(Linker::Lld, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert_eq!(lld.text, "helper\nmain\n");
        assert_eq!(lld.warnings.len(), 1);
        assert!(lld.warnings[0].starts_with("1 order entries share their symbol name"));
        let gold = emit(Linker::Gold, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert_eq!(gold.text, ".text.helper\n.text.startup.main\n");
        let bfd = emit(
            Linker::Bfd,
            &res,
            &objs,
            &BfdFlavor::FullScript {
                verbose_output: VERBOSE.into(),
                pie: PieMode::Pie,
            },
        )
        .unwrap();
        assert_eq!(
            bfd.text,
            format!(
                "{BFD_SCRIPT_HEADER}\nSECTIONS\n{{\n  .text           :\n  {{\n    /* sediment: ordered functions, hottest first */\n    */b.o(.text.helper) [b].o(.text.helper)\n    */a.o(.text.startup.main) [a].o(.text.startup.main)\n    */a.o(.text.helper) [a].o(.text.helper)\n    /* sediment: end */\n    *(.text .text.*)\n  }}\n}}\n"
            )
        );
        let frag = emit(Linker::Bfd, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert!(frag.text.starts_with(&format!(
            "{BFD_FRAGMENT_HEADER}\nSECTIONS\n{{\n  .text :\n  {{\n    */b.o(.text.helper)"
        )));
        let mold = emit(Linker::Mold, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert!(mold.text.starts_with(&format!(
            "{MOLD_PRELINK_HEADER}\nINPUT(a.o b.o)\nSECTIONS\n"
        )));
    }

    // Linker-script syntax smuggled in a symbol or section name never reaches the output.
    #[test]
    fn injection_is_skipped() {
        let evil = "x}INCLUDE/etc/passwd;SECTIONS{";
        let objs = vec![obj(
            "a.o",
            "a.c",
            vec![
                func(evil, Binding::Global, ".text.x", None),
                func("ok", Binding::Global, ".text.ok } INCLUDE evil", None),
                func("fine", Binding::Global, ".text.fine", None),
            ],
        )];
        let res = resolve(
            &order(&[
                FuncKey::global(evil),
                FuncKey::global("ok"),
                FuncKey::global("fine"),
            ]),
            &objs,
        )
        .unwrap();
        let lld = emit(Linker::Lld, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert_eq!(lld.text, "ok\nfine\n");
        let frag = emit(Linker::Bfd, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert!(!frag.text.contains("INCLUDE"));
        assert_eq!(frag.written, 2);
        assert!(frag
            .warnings
            .iter()
            .any(|w| w.starts_with("1 order entries skipped: their name, section")));
    }

    // Colliding base names get a longer suffix; a path that is a suffix of another gets the exact form only.
    #[test]
    fn object_patterns_are_unique() {
        let mk = |p: &str| obj(p, "x.c", vec![]);
        let pats = object_patterns(&[
            mk("d1/a.o"),
            mk("d2/a.o"),
            mk("a.o"),
            mk("/abs/b.o"),
            mk("sp ace.o"),
        ]);
        assert_eq!(
            pats,
            vec![
                Some(vec!["*/d1/a.o".to_string(), "[d]1/a.o".to_string()]),
                Some(vec!["*/d2/a.o".to_string(), "[d]2/a.o".to_string()]),
                Some(vec!["[a].o".to_string()]),
                Some(vec!["*/b.o".to_string(), "[b].o".to_string()]),
                None,
            ]
        );
    }

    #[test]
    fn default_script_extraction() {
        assert!(default_script(VERBOSE).unwrap().starts_with("SECTIONS\n"));
        assert!(default_script("no script here\n").is_err());
    }
}
