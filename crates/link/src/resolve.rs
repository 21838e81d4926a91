//! Matching order entries against the functions of the object files.
//!
//! A [`FuncKey`] with a file (`helper`, `a.c`) matches the *local* symbols named `helper` whose
//! `STT_FILE` base name is `a.c` (several objects compiled from same-named sources in different
//! directories all match; they are indistinguishable to the profile); when there is none, the
//! global or weak `helper` of the objects compiled from `a.c`: a shared library's version
//! script or hidden visibility makes its internal functions local in the library a profile is
//! recorded from, while they are global in its objects. A key without a file
//! matches the global and weak definitions of that name; if there is none, the single local of
//! that name when it is unique. A file-less name that matches several locals and no global is
//! *ambiguous* and skipped: placing an arbitrary one would be a guess. Except when those locals
//! are the copies of one COMDAT function's local, all in groups of one signature (the `.cold`
//! and `.__part.N` parts clang splits off an inline function or template instance in every
//! object that defines it): the linker keeps one copy, and all are placed.
//!
//! Matches of one key are listed in inventory order (objects in command-line order, symbols in
//! symbol-table order), which makes the result deterministic.
//!
//! With LTO inputs in the link ([`resolve_lto`]) an entry found in no object is not missing: it
//! may be defined by the bitcode, whose functions only exist once the linker has run code
//! generation. Such entries are kept, in their place in the order, for the emitters to write
//! by name ([`Step::AfterLto`]); whether they were there is checked on the linked output
//! ([`crate::verify`]).

use crate::{list_some, Error};
use sediment_elf::objects::{Binding, ObjectFile};
use sediment_profile::{FuncKey, FunctionOrder};
use std::collections::HashMap;

/// A function in the inventory: `objects[object].functions[function]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SymRef {
    /// Index into the object list.
    pub object: usize,
    /// Index into that object's functions.
    pub function: usize,
}

/// The order, resolved against the objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution {
    /// The entries that matched, in order (hottest first), each with its matches (never empty).
    pub placed: Vec<(FuncKey, Vec<SymRef>)>,
    /// Entries found in no object.
    pub missing: Vec<FuncKey>,
    /// Entries found in no object that are the C runtime's start-up code
    /// ([`sediment_profile::C_RUNTIME`]: `_start`, `frame_dummy`, ...): they live in the objects
    /// the compiler driver adds to every link (`crt1.o`, `crtbeginS.o`), which no order file
    /// can name, so they are counted apart from [`Resolution::missing`] and warned about by
    /// no one.
    pub runtime: Vec<FuncKey>,
    /// File-less entries matching several locals and no global.
    pub ambiguous: Vec<FuncKey>,
    /// Number of entries in the order.
    pub total: usize,
    /// One line per problem worth telling the user (counted, never one line per name).
    pub warnings: Vec<String>,
    /// With LTO inputs in the link ([`resolve_lto`]): the entries found in no object, left for
    /// the linker to find by name in the code LTO generates, each with its place: it comes just
    /// before `placed[place]` (after all of `placed` when `place == placed.len()`). Empty
    /// after [`resolve`].
    pub lto: Vec<(usize, FuncKey)>,
}

/// One entry of a [`Resolution`], in order: see [`Resolution::steps`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// An entry found in the objects, with its matches (never empty).
    Placed(&'a FuncKey, &'a [SymRef]),
    /// An entry for the linker to find by name after LTO code generation.
    AfterLto(&'a FuncKey),
}

impl Resolution {
    /// The placed and the after-LTO entries merged back into the order, hottest first.
    pub fn steps(&self) -> impl Iterator<Item = Step<'_>> {
        let mut lto = self.lto.iter().peekable();
        let mut next = 0;
        std::iter::from_fn(move || {
            if let Some((_, key)) = lto.next_if(|(place, _)| *place <= next) {
                return Some(Step::AfterLto(key));
            }
            let (key, refs) = self.placed.get(next)?;
            next += 1;
            Some(Step::Placed(key, refs))
        })
    }
}

/// Matches every entry of `order` against `objects`. Fails when nothing matches.
pub fn resolve(order: &FunctionOrder, objects: &[ObjectFile]) -> Result<Resolution, Error> {
    let res = match_entries(order, objects, false);
    if res.placed.is_empty() {
        return Err(Error::NothingMatches { total: res.total });
    }
    Ok(res)
}

/// Matches `order` against the ordinary objects of a link that also has LTO inputs. Never
/// fails: an entry found in no object goes to [`Resolution::lto`] instead of
/// [`Resolution::missing`], and no warning counts them (the linked output tells).
pub fn resolve_lto(order: &FunctionOrder, objects: &[ObjectFile]) -> Resolution {
    match_entries(order, objects, true)
}

/// True when `refs` (several locals of one name) are the copies of one COMDAT function's
/// local (the `.cold` or `.__part.N` part of an inline function or template instance split by
/// the compiler in every object that defines it): all in sections of COMDAT groups with one
/// signature. The linker keeps one copy, so placing them all places that one.
fn one_comdat_function(refs: &[SymRef], objects: &[ObjectFile]) -> bool {
    let group = |r: &SymRef| objects[r.object].functions[r.function].group.as_deref();
    group(&refs[0]).is_some() && refs.iter().all(|r| group(r) == group(&refs[0]))
}

/// The matching behind [`resolve`] and [`resolve_lto`].
fn match_entries(order: &FunctionOrder, objects: &[ObjectFile], lto: bool) -> Resolution {
    let mut by_name: HashMap<&str, Vec<SymRef>> = HashMap::new();
    for (oi, obj) in objects.iter().enumerate() {
        for (fi, f) in obj.functions.iter().enumerate() {
            by_name.entry(f.name.as_str()).or_default().push(SymRef {
                object: oi,
                function: fi,
            });
        }
    }
    let func = |r: &SymRef| &objects[r.object].functions[r.function];
    let mut res = Resolution {
        total: order.functions.len(),
        ..Default::default()
    };
    for key in &order.functions {
        let candidates = by_name
            .get(key.name.as_str())
            .map_or(&[][..], Vec::as_slice);
        let matches: Vec<SymRef> = match &key.file {
            Some(file) => {
                let locals: Vec<SymRef> = candidates
                    .iter()
                    .filter(|r| {
                        let f = func(r);
                        f.binding == Binding::Local && f.file.as_deref() == Some(file.as_str())
                    })
                    .copied()
                    .collect();
                if locals.is_empty() {
                    // Made local by the link that was profiled (a version script, hidden
                    // visibility): the global of that name defined by that file's object.
                    candidates
                        .iter()
                        .filter(|r| {
                            func(r).binding != Binding::Local
                                && objects[r.object]
                                    .file_symbol
                                    .as_deref()
                                    .map(sediment_profile::base_name)
                                    == Some(file.as_str())
                        })
                        .copied()
                        .collect()
                } else {
                    locals
                }
            }
            None => {
                let globals: Vec<SymRef> = candidates
                    .iter()
                    .filter(|r| func(r).binding != Binding::Local)
                    .copied()
                    .collect();
                if !globals.is_empty() {
                    globals
                } else if candidates.len() > 1 && !one_comdat_function(candidates, objects) {
                    res.ambiguous.push(key.clone());
                    continue;
                } else {
                    candidates.to_vec()
                }
            }
        };
        if !matches.is_empty() {
            res.placed.push((key.clone(), matches));
        } else if sediment_profile::C_RUNTIME.contains(&key.name.as_str()) {
            res.runtime.push(key.clone());
        } else if lto {
            res.lto.push((res.placed.len(), key.clone()));
        } else {
            res.missing.push(key.clone());
        }
    }
    if !res.missing.is_empty() {
        res.warnings.push(format!(
            "{} of {} order entries not found in the objects: {}",
            res.missing.len(),
            res.total,
            list_some(&res.missing, res.missing.len())
        ));
    }
    if !res.ambiguous.is_empty() {
        res.warnings.push(format!(
            "{} order entries skipped as ambiguous (no file given, several static functions of that name): {}",
            res.ambiguous.len(),
            list_some(&res.ambiguous, res.ambiguous.len())
        ));
    }
    // Only objects that define an entry of the order: the others' layout is not asked for, and
    // every gcc link has such objects (the compiler's own `crtbeginS.o`), so counting them
    // would be a warning on every link that nobody can act on.
    let holds_entry: std::collections::HashSet<usize> = res
        .placed
        .iter()
        .flat_map(|(_, refs)| refs.iter().map(|r| r.object))
        .collect();
    let no_fs: Vec<String> = objects
        .iter()
        .enumerate()
        .filter(|&(i, o)| !o.function_sections && holds_entry.contains(&i))
        .map(|(_, o)| o.display_name())
        .collect();
    if !no_fs.is_empty() {
        let shown: Vec<&str> = no_fs
            .iter()
            .take(crate::WARN_LIST_MAX)
            .map(String::as_str)
            .collect();
        res.warnings.push(format!(
            "{} objects not built with -ffunction-sections (their functions share sections and cannot be placed one by one; rebuild with -ffunction-sections): {}{}",
            no_fs.len(),
            shown.join(", "),
            if no_fs.len() > shown.len() { " ..." } else { "" }
        ));
    }
    res
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sediment_elf::objects::ObjectFunction;

    pub(crate) fn func(
        name: &str,
        binding: Binding,
        section: &str,
        file: Option<&str>,
    ) -> ObjectFunction {
        ObjectFunction {
            name: name.into(),
            binding,
            size: 16,
            offset: 0,
            section: section.into(),
            shared_section: false,
            file: file.map(str::to_string),
            group: None,
        }
    }

    pub(crate) fn obj(path: &str, tu: &str, functions: Vec<ObjectFunction>) -> ObjectFile {
        ObjectFile {
            path: path.into(),
            member: None,
            file_symbol: Some(tu.into()),
            functions,
            function_sections: true,
            references: Vec::new(),
            lto: None,
        }
    }

    pub(crate) fn two_objects() -> Vec<ObjectFile> {
        vec![
            obj(
                "a.o",
                "a.c",
                vec![
                    func("helper", Binding::Local, ".text.helper", Some("a.c")),
                    func("main", Binding::Global, ".text.startup.main", None),
                    func("solo", Binding::Local, ".text.solo", Some("a.c")),
                ],
            ),
            obj(
                "b.o",
                "b.c",
                vec![
                    func("helper", Binding::Local, ".text.helper", Some("b.c")),
                    func("work", Binding::Weak, ".text.work", None),
                ],
            ),
        ]
    }

    fn order(keys: &[FuncKey]) -> FunctionOrder {
        FunctionOrder {
            functions: keys.to_vec(),
            ..Default::default()
        }
    }

    // Regression (issue 33, jq's libjq): a library's version script makes its internal
    // functions local in the profiled library, global in its objects; 78 of 277 entries of
    // libjq's profile were "not found in the objects". A key with a file takes the global of
    // that name defined by that file's object when no local matches, and only then.
    /// Each placed key with its (object, function) slots, for comparing whole results.
    fn placed_slots(r: &Resolution) -> Vec<(String, Vec<(usize, usize)>)> {
        r.placed
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.iter().map(|s| (s.object, s.function)).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn regress_a_local_key_matches_the_global_its_file_defines() {
        let mut objs = two_objects();
        objs[1]
            .functions
            .push(func("main", Binding::Global, ".text.main", None));
        let o = order(&[
            FuncKey::local("main", "a.c"),
            FuncKey::local("helper", "a.c"),
            FuncKey::local("work", "a.c"),
        ]);
        let r = resolve(&o, &objs).unwrap();
        let placed = placed_slots(&r);
        assert_eq!(
            placed,
            vec![
                ("main (a.c)".to_string(), vec![(0, 1)]),
                ("helper (a.c)".to_string(), vec![(0, 0)]),
            ]
        );
        assert_eq!(r.missing, vec![FuncKey::local("work", "a.c")]);
    }

    // Locals match by file, globals by name, a file-less unique local by name, duplicates are ambiguous.
    #[test]
    fn matching_rules() {
        let objs = two_objects();
        let o = order(&[
            FuncKey::local("helper", "b.c"),
            FuncKey::global("work"),
            FuncKey::global("solo"),
            FuncKey::global("helper"),
            FuncKey::global("nosuch"),
            FuncKey::local("main", "b.c"),
        ]);
        let r = resolve(&o, &objs).unwrap();
        let placed = placed_slots(&r);
        assert_eq!(
            placed,
            vec![
                ("helper (b.c)".to_string(), vec![(1, 0)]),
                ("work".to_string(), vec![(1, 1)]),
                ("solo".to_string(), vec![(0, 2)]),
            ]
        );
        assert_eq!(
            r.missing,
            vec![FuncKey::global("nosuch"), FuncKey::local("main", "b.c")]
        );
        assert_eq!(r.ambiguous, vec![FuncKey::global("helper")]);
        assert_eq!(
            r.warnings,
            vec![
                "2 of 6 order entries not found in the objects: nosuch, main (b.c)".to_string(),
                "1 order entries skipped as ambiguous (no file given, several static functions of that name): helper".to_string(),
            ]
        );
    }

    // The `.cold` part of an inline function split in two objects: two locals of one name,
    // each in a COMDAT group of the same signature, are the linker's one copy (both placed);
    // two locals of one name in different groups, or outside any, stay ambiguous.
    #[test]
    fn comdat_copies_of_a_local_are_one_function() {
        let in_group = |name: &str, group: Option<&str>, file: &str| ObjectFunction {
            group: group.map(str::to_string),
            ..func(
                name,
                Binding::Local,
                &format!(".text.split.{name}"),
                Some(file),
            )
        };
        let objs = vec![
            obj(
                "a.o",
                "a.cc",
                vec![
                    in_group("_Z3mixl.cold", Some("_Z3mixl"), "a.cc"),
                    in_group("other.cold", Some("other"), "a.cc"),
                    in_group("helper.cold", None, "a.cc"),
                ],
            ),
            obj(
                "b.o",
                "b.cc",
                vec![
                    in_group("_Z3mixl.cold", Some("_Z3mixl"), "b.cc"),
                    in_group("other.cold", Some("another"), "b.cc"),
                    in_group("helper.cold", None, "b.cc"),
                ],
            ),
        ];
        let o = order(&[
            FuncKey::global("_Z3mixl.cold"),
            FuncKey::global("other.cold"),
            FuncKey::global("helper.cold"),
        ]);
        let r = resolve(&o, &objs).unwrap();
        let placed = placed_slots(&r);
        assert_eq!(
            placed,
            vec![("_Z3mixl.cold".to_string(), vec![(0, 0), (1, 0)])]
        );
        assert_eq!(
            r.ambiguous,
            vec![
                FuncKey::global("other.cold"),
                FuncKey::global("helper.cold")
            ]
        );
    }

    // The C runtime's start-up code is in no user object: counted apart, never a warning.
    #[test]
    fn c_runtime_entries_are_counted_apart() {
        let objs = two_objects();
        let o = order(&[
            FuncKey::global("_start"),
            FuncKey::global("work"),
            FuncKey::local("frame_dummy", "crtstuff.c"),
            FuncKey::global("nosuch"),
        ]);
        let r = resolve(&o, &objs).unwrap();
        assert_eq!(
            r.runtime,
            vec![
                FuncKey::global("_start"),
                FuncKey::local("frame_dummy", "crtstuff.c")
            ]
        );
        assert_eq!(r.missing, vec![FuncKey::global("nosuch")]);
        assert_eq!(
            r.warnings,
            vec!["1 of 4 order entries not found in the objects: nosuch".to_string()]
        );
    }

    // With LTO inputs, entries found in no object stay in their place in the order, for the
    // linker to find after code generation; nothing is counted missing and nothing fails.
    #[test]
    fn lto_keeps_unfound_entries_in_place() {
        let objs = two_objects();
        let o = order(&[
            FuncKey::global("hot_in_bitcode"),
            FuncKey::global("work"),
            FuncKey::local("helper", "c.c"),
            FuncKey::global("main"),
            FuncKey::global("cold_in_bitcode"),
        ]);
        let r = resolve_lto(&o, &objs);
        assert!(r.missing.is_empty());
        let steps: Vec<String> = r
            .steps()
            .map(|s| match s {
                Step::Placed(k, _) => format!("placed {k}"),
                Step::AfterLto(k) => format!("lto {k}"),
            })
            .collect();
        assert_eq!(
            steps,
            [
                "lto hot_in_bitcode",
                "placed work",
                "lto helper (c.c)",
                "placed main",
                "lto cold_in_bitcode"
            ]
        );
        let nothing = resolve_lto(&order(&[FuncKey::global("x")]), &objs);
        assert!(nothing.placed.is_empty());
        assert_eq!(nothing.lto, [(0, FuncKey::global("x"))]);
        assert!(resolve(&o, &objs).unwrap().lto.is_empty());
    }

    // An order of which nothing exists in the objects is an error with the exact message.
    #[test]
    fn nothing_matches() {
        let o = order(&[FuncKey::global("x"), FuncKey::global("y")]);
        let e = resolve(&o, &two_objects()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "order/profile does not match these objects (0 of 2 functions found; recorded from another program?)"
        );
    }
}
