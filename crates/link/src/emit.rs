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
//!
//! Entries left for after LTO code generation ([`Step::AfterLto`]) cannot be looked up: their
//! code does not exist yet. They are written from the profile's name, which must be a safe
//! symbol (lld) or section-name part (gold, bfd; [`crate::safe`]), so a hostile name is skipped
//! exactly like a hostile name found in an object: lld gets the name; gold gets the section
//! names and globs code generation may give the function ([`lto_sections`]); GNU ld gets the
//! same patterns unqualified, `*(...)`, since the objects code generation writes are temporary
//! files whose names nobody knows before the link. mold is refused (it has no LTO route here).

use crate::resolve::{Resolution, Step, SymRef};
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

impl PieMode {
    /// The option that makes `ld --verbose` print the default script of this mode.
    pub fn verbose_args(self) -> Vec<String> {
        vec![match self {
            PieMode::Pie => "-pie".to_string(),
            PieMode::NoPie => "-no-pie".to_string(),
        }]
    }
}

/// What to write for GNU ld.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BfdFlavor {
    /// ld < 2.43: a full script made from the stdout of `ld --verbose MODE`, where MODE are the
    /// options that choose among ld's default scripts: `-pie` or `-no-pie` for `sediment
    /// link` ([`PieMode::verbose_args`]); for a linker shim, those of the link's own command
    /// line (`-shared`, `-pie`, `-z relro`, `-z now`, `-m EMULATION`...:
    /// [`crate::cmdline::script_mode_args`]), so that a shared library gets the script of a
    /// shared library.
    FullScript {
        /// The complete stdout of `ld --verbose` run with `mode`.
        verbose_output: String,
        /// The options it was run with (recorded in the script's first line; each one made of
        /// [`is_safe_mode_arg`] characters, others are left out of that line).
        mode: Vec<String>,
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
    let matched = res.placed.len() + res.lto.len();
    let mut first_skip = None;
    let (text, written) = match linker {
        Linker::Lld => {
            let names = by_name(res, objects, false, &mut warnings, &mut first_skip, |r| {
                objects[r.object].functions[r.function].name.clone()
            });
            let n = names.len();
            (names.into_iter().map(|s| s + "\n").collect::<String>(), n)
        }
        Linker::Gold => {
            let names = by_name(res, objects, true, &mut warnings, &mut first_skip, |r| {
                objects[r.object].functions[r.function].section.clone()
            });
            let n = names.len();
            (names.into_iter().map(|s| s + "\n").collect::<String>(), n)
        }
        Linker::Bfd => {
            let body = qualified_lines(res, objects, &mut warnings, &mut first_skip);
            let n = body.len();
            let text = match bfd {
                BfdFlavor::FullScript {
                    verbose_output,
                    mode,
                } => full_script(verbose_output, mode, &body)?,
                BfdFlavor::OrderingFile => sections_block(BFD_FRAGMENT_HEADER, "", &body),
            };
            (text, n)
        }
        Linker::Mold => {
            if !res.lto.is_empty() {
                return Err(Error::Mold(
                    "the ld -r pre-link route cannot place functions that LTO generates at link time".into(),
                ));
            }
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
            let body = qualified_lines(res, objects, &mut warnings, &mut first_skip);
            let n = body.len();
            let input = format!("INPUT({})\n", inputs.join(" "));
            (sections_block(MOLD_PRELINK_HEADER, &input, &body), n)
        }
    };
    if written == 0 {
        let first = first_skip.unwrap_or_else(|| "no reason recorded".into());
        let reason = match matched.saturating_sub(1) {
            0 => first,
            more => format!("{first}; and {more} more (see the warnings)"),
        };
        return Err(Error::NothingEmitted {
            matched,
            reason,
            warnings,
        });
    }
    Ok(Emitted {
        text,
        warnings,
        written,
    })
}

/// Records why `key` (in `objects[r.object]`) was skipped, when it is the first skip: the
/// message of [`Error::NothingEmitted`]. Names and paths are shown escaped.
fn note_skip(
    first: &mut Option<String>,
    key: &FuncKey,
    objects: &[ObjectFile],
    r: &SymRef,
    why: &str,
) {
    if first.is_none() {
        let object = sediment_profile::escape(&objects[r.object].display_name());
        *first = Some(format!("{} in {object}: {why}", list_some([key], 1)));
    }
}

/// Records why the after-LTO entry `key` was skipped, when it is the first skip.
fn note_skip_lto(first: &mut Option<String>, key: &FuncKey, why: &str) {
    if first.is_none() {
        *first = Some(format!("{} (after LTO): {why}", list_some([key], 1)));
    }
}

/// The input-section names and globs (the same text is a gold section-ordering line and a GNU
/// ld input-section pattern) under which LTO code generation with function sections may put
/// function `name`, hottest variants first. `name` must be safe ([`is_safe_section`]); the
/// wildcards are ours. What the compilers were seen to write (`-flto -ffunction-sections`, the
/// temporary objects kept with `-save-temps` or read back from the output's symbols):
///
/// | compiler, LTO mode         | function                                   | section                         |
/// |----------------------------|--------------------------------------------|---------------------------------|
/// | gcc 12, clang 14           | `f`                                        | `.text.f`                       |
/// | gcc 12 `-O2`               | `main`, run once                           | `.text.startup.main`            |
/// | gcc 12                     | hot (`__attribute__((hot))`, profile use)  | `.text.hot.f`                   |
/// | gcc 12                     | `static s`, made global across partitions or clashing with another `s` | `.text.s.lto_priv.0` |
/// | clang 14 full LTO          | `static s` clashing with another `s`       | `.text.s.1`                     |
/// | clang 14 ThinLTO           | `static s` imported into another module    | `.text.s.llvm.1002628665616604530` |
///
/// Left out: `.text.unlikely.f`, which also holds the split-off cold part of `f`; ordering `f`
/// must not drag that along (docs/design/linkers.md); and the catch-all names of objects built without
/// `-ffunction-sections` (`.text.hot` for a function named `hot`), which would move those
/// objects' code. A renamed static matches the globs of every static of its name: like lld and
/// gold without LTO, same-named statics are placed together, at the hottest position.
pub fn lto_sections(name: &str) -> Vec<String> {
    [
        format!(".text.{name}"),
        format!(".text.hot.{name}"),
        format!(".text.startup.{name}"),
        format!(".text.{name}.lto_priv.*"),
        format!(".text.{name}.llvm.*"),
        format!(".text.{name}.[0-9]*"),
    ]
    .into_iter()
    .filter(|s| !is_generic_section(s))
    .collect()
}

/// Why a function in a section shared with other functions is skipped.
const SHARED_SECTION: &str =
    "its section holds other functions too (object not built with -ffunction-sections)";
/// Why a function whose name, section or path could inject linker syntax is skipped.
const UNSAFE_NAME: &str =
    "its name, section or object path has characters that could inject linker syntax";

/// The unit names for lld (symbols) or gold (sections), deduplicated, first occurrence wins.
/// The first entry skipped is described in `first_skip`.
fn by_name(
    res: &Resolution,
    objects: &[ObjectFile],
    sections: bool,
    warnings: &mut Vec<String>,
    first_skip: &mut Option<String>,
    unit: impl Fn(&SymRef) -> String,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut merged: Vec<FuncKey> = Vec::new();
    let mut unsafe_keys: Vec<FuncKey> = Vec::new();
    let mut shared: usize = 0;
    for step in res.steps() {
        let (key, refs) = match step {
            Step::Placed(key, refs) => (key, refs),
            Step::AfterLto(key) => {
                let safe = if sections {
                    is_safe_section(&key.name)
                } else {
                    is_safe_symbol(&key.name)
                };
                if !safe {
                    if !unsafe_keys.contains(key) {
                        unsafe_keys.push(key.clone());
                    }
                    note_skip_lto(first_skip, key, UNSAFE_NAME);
                    continue;
                }
                let units = if sections {
                    lto_sections(&key.name)
                } else {
                    vec![key.name.clone()]
                };
                for u in units {
                    if seen.insert(u.clone()) {
                        out.push(u);
                    }
                }
                continue;
            }
        };
        let mut wrote = false;
        let mut dup = false;
        for r in refs {
            let f = &objects[r.object].functions[r.function];
            if sections && (f.shared_section || is_generic_section(&f.section)) {
                shared += 1;
                let why = if f.shared_section {
                    SHARED_SECTION.to_string()
                } else {
                    format!(
                        "its section `{}` has the same name in every object built without \
                         -ffunction-sections, and gold would move them all",
                        f.section
                    )
                };
                note_skip(first_skip, key, objects, r, &why);
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
                note_skip(first_skip, key, objects, r, UNSAFE_NAME);
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
/// section), hottest first. The first entry skipped is described in `first_skip`.
fn qualified_lines(
    res: &Resolution,
    objects: &[ObjectFile],
    warnings: &mut Vec<String>,
    first_skip: &mut Option<String>,
) -> Vec<String> {
    let patterns = object_patterns(objects);
    let mut out = Vec::new();
    let mut seen: HashSet<(usize, &str)> = HashSet::new();
    let mut unsafe_keys: Vec<FuncKey> = Vec::new();
    let mut shared = 0usize;
    let mut lto_seen: HashSet<&str> = HashSet::new();
    for step in res.steps() {
        let (key, refs) = match step {
            Step::Placed(key, refs) => (key, refs),
            Step::AfterLto(key) => {
                if !is_safe_section(&key.name) {
                    if !unsafe_keys.contains(key) {
                        unsafe_keys.push(key.clone());
                    }
                    note_skip_lto(first_skip, key, UNSAFE_NAME);
                } else if lto_seen.insert(&key.name) {
                    out.push(format!("*({})", lto_sections(&key.name).join(" ")));
                }
                continue;
            }
        };
        for r in refs {
            let f = &objects[r.object].functions[r.function];
            if f.shared_section {
                shared += 1;
                note_skip(first_skip, key, objects, r, SHARED_SECTION);
                continue;
            }
            let Some(pats) = &patterns[r.object] else {
                if !unsafe_keys.contains(key) {
                    unsafe_keys.push(key.clone());
                }
                note_skip(first_skip, key, objects, r, UNSAFE_NAME);
                continue;
            };
            if !is_safe_section(&f.section) {
                if !unsafe_keys.contains(key) {
                    unsafe_keys.push(key.clone());
                }
                note_skip(first_skip, key, objects, r, UNSAFE_NAME);
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

/// Whether `arg` may stand in the comment that opens a full script: letters, digits and
/// `-_.,=+:/` (no `*`, so no `*/` can close the comment early; no newline).
pub fn is_safe_mode_arg(arg: &str) -> bool {
    !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.,=+:/".contains(&b))
}

/// The first line of a full script made with `ld --verbose MODE`: [`BFD_SCRIPT_HEADER`] for
/// `-pie`, [`BFD_SCRIPT_HEADER_NO_PIE`] for `-no-pie`.
fn full_script_header(mode: &[String]) -> String {
    let shown: Vec<&str> = mode
        .iter()
        .map(String::as_str)
        .filter(|a| is_safe_mode_arg(a))
        .collect();
    format!(
        "/* sediment: GNU ld default script (ld --verbose {}) with ordered .text input sections */",
        shown.join(" ")
    )
}

/// ld's default script with `body` inserted at the start of the `.text` output section.
fn full_script(verbose_output: &str, mode: &[String], body: &[String]) -> Result<String, Error> {
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
    out.push_str(&full_script_header(mode));
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

/// Checks that `contents` is what [`emit`] writes for `linker`, before `sediment link-flags`
/// hands the file to a linker: for bfd and mold the first line must be one of the headers
/// above ([`BFD_SCRIPT_HEADER`], [`BFD_SCRIPT_HEADER_NO_PIE`], [`BFD_FRAGMENT_HEADER`],
/// [`MOLD_PRELINK_HEADER`]); lld and gold files have no header, so every line must be a name
/// their emitter could have written (a safe symbol, a safe section name), and there must be
/// at least one. A file meant for another linker, a truncated one or any other file is refused,
/// quoting the offending line escaped.
pub fn check_output(linker: Linker, contents: &str) -> Result<(), Error> {
    let fail = |problem: String| Error::NotLinkOutput { linker, problem };
    let first = contents.lines().next().unwrap_or("");
    let expect_header = |headers: &[&str]| {
        if headers.contains(&first) {
            Ok(())
        } else {
            Err(fail(format!(
                "its first line is `{}`, not `{}`",
                sediment_profile::quote(first),
                headers.join("` or `")
            )))
        }
    };
    let expect_names = |what: &str, ok: fn(&str) -> bool| {
        if contents.is_empty() {
            return Err(fail("the file is empty".into()));
        }
        if !contents.ends_with('\n') {
            return Err(fail("it ends in the middle of a line (truncated?)".into()));
        }
        match contents.lines().enumerate().find(|(_, l)| !ok(l)) {
            Some((i, l)) => Err(fail(format!(
                "line {} `{}` is not a {what} name",
                i + 1,
                sediment_profile::quote(l)
            ))),
            None => Ok(()),
        }
    };
    match linker {
        Linker::Lld => expect_names("symbol", is_safe_symbol),
        Linker::Gold => expect_names("section", is_safe_section),
        Linker::Bfd => expect_header(&[
            BFD_SCRIPT_HEADER,
            BFD_SCRIPT_HEADER_NO_PIE,
            BFD_FRAGMENT_HEADER,
        ]),
        Linker::Mold => expect_header(&[MOLD_PRELINK_HEADER]),
    }
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
    use sediment_elf::objects::{Binding, ObjectFunction};
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
                mode: PieMode::Pie.verbose_args(),
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

    // After-LTO entries are written in their place in the order, by name for lld and as
    // section names and globs for gold and GNU ld (unqualified: LTO's objects are temporary
    // files); names found in the objects keep their exact, file-qualified form.
    #[test]
    fn after_lto_entries_per_linker() {
        let objs = two_objects();
        let res = crate::resolve::resolve_lto(
            &order(&[
                FuncKey::global("hot"),
                FuncKey::global("main"),
                FuncKey::local("s", "c.c"),
            ]),
            &objs,
        );
        let lld = emit(Linker::Lld, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert_eq!(lld.text, "hot\nmain\ns\n");
        let gold = emit(Linker::Gold, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        // No `.text.hot` for `hot`: that is every object's catch-all section.
        assert_eq!(
            gold.text,
            ".text.hot.hot\n.text.startup.hot\n.text.hot.lto_priv.*\n\
             .text.hot.llvm.*\n.text.hot.[0-9]*\n\
             .text.startup.main\n\
             .text.s\n.text.hot.s\n.text.startup.s\n.text.s.lto_priv.*\n.text.s.llvm.*\n.text.s.[0-9]*\n"
        );
        let frag = emit(Linker::Bfd, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
        assert_eq!(
            frag.text,
            format!(
                "{BFD_FRAGMENT_HEADER}\nSECTIONS\n{{\n  .text :\n  {{\n\
                 \x20   *(.text.hot.hot .text.startup.hot .text.hot.lto_priv.* .text.hot.llvm.* .text.hot.[0-9]*)\n\
                 \x20   */a.o(.text.startup.main) [a].o(.text.startup.main)\n\
                 \x20   *(.text.s .text.hot.s .text.startup.s .text.s.lto_priv.* .text.s.llvm.* .text.s.[0-9]*)\n\
                 \x20 }}\n}}\n"
            )
        );
        assert!(emit(Linker::Mold, &res, &objs, &BfdFlavor::OrderingFile).is_err());
    }

    // A profile comes from a stranger: after-LTO names that could inject linker syntax are
    // skipped with the same counted warning as names read from objects, for every linker.
    #[test]
    fn after_lto_injection_is_skipped() {
        let evil = [
            "x)INCLUDE/etc/passwd",
            "y}SECTIONS{",
            "z*",
            "a b",
            "c\nd",
            "w/*c*/",
        ];
        let mut keys: Vec<FuncKey> = evil.iter().copied().map(FuncKey::global).collect();
        keys.push(FuncKey::global("fine"));
        let objs = two_objects();
        let res = crate::resolve::resolve_lto(&order(&keys), &objs);
        for linker in [Linker::Lld, Linker::Gold, Linker::Bfd] {
            let out = emit(linker, &res, &objs, &BfdFlavor::OrderingFile).unwrap();
            for e in evil {
                assert!(!out.text.contains(e), "{linker}: {e:?} in {}", out.text);
            }
            assert!(out.text.contains("fine"), "{linker}");
            assert!(
                out.warnings
                    .iter()
                    .any(|w| w.starts_with("6 order entries skipped: their name")),
                "{linker}: {:?}",
                out.warnings
            );
        }
        let only_evil = crate::resolve::resolve_lto(&order(&keys[..1]), &objs);
        let e = emit(Linker::Gold, &only_evil, &objs, &BfdFlavor::OrderingFile)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(after LTO): its name"), "{e}");
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

    // Regression: when every entry was skipped the error said only "(see warnings)", and the
    // warnings were lost with it; now it names the first entry, its object and the reason.
    #[test]
    fn nothing_emitted_says_why() {
        let shared = |name: &str, offset: u64| ObjectFunction {
            offset,
            shared_section: true,
            ..func(name, Binding::Global, ".text", None)
        };
        let mut nofs = obj(
            "dir/nofs.o",
            "a.c",
            vec![shared("main", 0), shared("work", 32)],
        );
        nofs.function_sections = false;
        let objs = vec![nofs];
        let res = resolve(
            &order(&[FuncKey::global("work"), FuncKey::global("main")]),
            &objs,
        )
        .unwrap();
        for linker in [Linker::Gold, Linker::Bfd, Linker::Mold] {
            let e = emit(linker, &res, &objs, &BfdFlavor::OrderingFile).unwrap_err();
            assert_eq!(
                e.to_string(),
                "nothing left to order: all 2 matching functions were skipped: work in dir/nofs.o: \
                 its section holds other functions too (object not built with -ffunction-sections); \
                 and 1 more (see the warnings)"
            );
            let Error::NothingEmitted { warnings, .. } = e else {
                panic!("{e}")
            };
            assert!(warnings.iter().any(|w| w.contains("-ffunction-sections")));
        }
        // One unsafe name: no count of others.
        let objs = vec![obj(
            "a.o",
            "a.c",
            vec![func("x\x1b[2J", Binding::Global, ".text.x", None)],
        )];
        let res = resolve(&order(&[FuncKey::global("x\x1b[2J")]), &objs).unwrap();
        let e = emit(Linker::Lld, &res, &objs, &BfdFlavor::OrderingFile)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with(": x%1B[2J in a.o: its name, section or object path has characters that could inject linker syntax"), "{e}");
    }

    // Regression: `link-flags` took any file: a bfd "script" became `-Wl,-T,FILE`, mold took a
    // GNU ld script. Every emitter's output passes its own linker's check and no other's.
    #[test]
    fn check_output_takes_only_the_emitters_files() {
        let objs = two_objects();
        let res = resolve(&order(&[FuncKey::global("main")]), &objs).unwrap();
        let full = BfdFlavor::FullScript {
            verbose_output: VERBOSE.into(),
            mode: PieMode::Pie.verbose_args(),
        };
        let outputs = [
            (Linker::Lld, BfdFlavor::OrderingFile),
            (Linker::Gold, BfdFlavor::OrderingFile),
            (Linker::Bfd, BfdFlavor::OrderingFile),
            (Linker::Bfd, full),
            (Linker::Mold, BfdFlavor::OrderingFile),
        ];
        for (made_for, flavor) in &outputs {
            let text = emit(*made_for, &res, &objs, flavor).unwrap().text;
            for linker in [Linker::Bfd, Linker::Mold] {
                assert_eq!(
                    check_output(linker, &text).is_ok(),
                    linker == *made_for,
                    "{made_for} output checked as {linker}"
                );
            }
            if matches!(made_for, Linker::Lld | Linker::Gold) {
                check_output(*made_for, &text).unwrap();
            } else {
                assert!(check_output(Linker::Lld, &text).is_err());
                assert!(check_output(Linker::Gold, &text).is_err());
            }
        }
        assert_eq!(
            check_output(Linker::Bfd, "x\x1b[2J\n")
                .unwrap_err()
                .to_string(),
            format!(
                "not written by `sediment link --linker bfd`: its first line is `x%1B[2J`, not \
                 `{BFD_SCRIPT_HEADER}` or `{BFD_SCRIPT_HEADER_NO_PIE}` or `{BFD_FRAGMENT_HEADER}`"
            )
        );
        assert!(check_output(Linker::Lld, "").is_err());
        assert!(check_output(Linker::Lld, "main\nwo").is_err());
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

    // `sediment link`'s two modes keep the headers `link-flags` reads back.
    #[test]
    fn full_script_headers_per_mode() {
        assert_eq!(
            full_script_header(&PieMode::Pie.verbose_args()),
            BFD_SCRIPT_HEADER
        );
        assert_eq!(
            full_script_header(&PieMode::NoPie.verbose_args()),
            BFD_SCRIPT_HEADER_NO_PIE
        );
        let shared = ["-shared", "-z", "relro", "-z", "now", "x*/y"].map(String::from);
        assert_eq!(
            full_script_header(&shared),
            "/* sediment: GNU ld default script (ld --verbose -shared -z relro -z now) with ordered .text input sections */"
        );
    }

    #[test]
    fn default_script_extraction() {
        assert!(default_script(VERBOSE).unwrap().starts_with("SECTIONS\n"));
        assert!(default_script("no script here\n").is_err());
    }
}
