//! Binding a profile's function keys to a binary's symbols.
//!
//! Some importers do not know a function's canonical [`FuncKey`]: callgrind names a function and
//! the source file it thinks the function came from (`fl=`), for globals and statics alike, with
//! whatever path the debug information held. The canonical key carries a file *only* for local
//! (static) functions, as the base name of the `STT_FILE` symbol (see `sediment-profile`). This
//! module rewrites keys to that form with the binary's symbol table, and fills in code sizes.
//!
//! For each profile function, the candidates are the binary's function symbols of that name:
//! 1. a local symbol whose file equals the base name of the hint wins;
//! 2. else the global symbol of that name, if there is one;
//! 3. else a single local symbol of that name (the hint was missing or spelled differently);
//! 4. else the function is left as it was and counted as *unmatched* (no symbol of that name) or
//!    *ambiguous* (several statics of that name and a hint that picks none of them).
//!
//! Several profile functions can bind to one key (say `helper` hinted `/a/x.c` and `helper`
//! hinted `x.c`); their weights and edges are then summed, which is what they are.

use sediment_elf::Binary;
use sediment_profile::{base_name, FuncKey, Profile, ProfileBuilder};
use std::collections::BTreeMap;

/// How well a profile matched a binary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindReport {
    /// Functions bound to a symbol.
    pub matched: usize,
    /// Functions with no symbol of that name in the binary.
    pub unmatched: usize,
    /// Functions with several same-named static symbols and no hint choosing one.
    pub ambiguous: usize,
    /// Self weight of the unmatched and ambiguous functions.
    pub unmatched_weight: u64,
}

/// Rewrites `profile`'s keys to their canonical form against `binary` (see the module docs).
/// Metadata is kept; the result is canonical.
pub fn bind(profile: &Profile, binary: &Binary) -> (Profile, BindReport) {
    // name -> (global symbol index, local symbol indices); BTreeMap keeps this deterministic.
    let mut by_name: BTreeMap<&str, (Option<usize>, Vec<usize>)> = BTreeMap::new();
    for (i, s) in binary.functions.iter().enumerate() {
        let e = by_name.entry(s.key.name.as_str()).or_default();
        if s.key.file.is_some() {
            e.1.push(i);
        } else if e.0.is_none() {
            e.0 = Some(i);
        }
    }
    let mut report = BindReport::default();
    let mut keys: Vec<FuncKey> = Vec::with_capacity(profile.functions.len());
    let mut sizes: Vec<u64> = Vec::with_capacity(profile.functions.len());
    for f in &profile.functions {
        let hint = f.key.file.as_deref().map(base_name);
        let chosen = match by_name.get(f.key.name.as_str()) {
            None => {
                report.unmatched += 1;
                None
            }
            Some((global, locals)) => {
                let by_hint = locals
                    .iter()
                    .copied()
                    .find(|&i| hint.is_some() && binary.functions[i].key.file.as_deref() == hint);
                let pick = by_hint
                    .or(*global)
                    .or_else(|| (locals.len() == 1).then(|| locals[0]));
                if pick.is_none() {
                    report.ambiguous += 1;
                }
                pick
            }
        };
        match chosen {
            Some(i) => {
                report.matched += 1;
                keys.push(binary.functions[i].key.clone());
                sizes.push(binary.functions[i].size);
            }
            None => {
                report.unmatched_weight = report.unmatched_weight.saturating_add(f.self_weight);
                keys.push(f.key.clone());
                sizes.push(0);
            }
        }
    }
    let mut b = ProfileBuilder::new(profile.meta.clone());
    for (i, f) in profile.functions.iter().enumerate() {
        b.add_self(&keys[i], f.self_weight);
        if let Some(size) = f.size {
            b.set_size(&keys[i], size);
        }
        if sizes[i] > 0 {
            b.set_size(&keys[i], sizes[i]);
        }
    }
    for e in &profile.edges {
        b.add_call(&keys[e.caller as usize], &keys[e.callee as usize], e.weight);
    }
    // Binding renames functions, never moves code: offsets stay valid.
    for smp in &profile.samples {
        b.add_sample(&keys[smp.func as usize], smp.offset, smp.weight);
    }
    (b.build(), report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sediment_elf::Symbol;
    use sediment_profile::Meta;

    fn binary() -> Binary {
        let sym = |key: FuncKey, address: u64| Symbol {
            key,
            address,
            size: 16,
        };
        Binary {
            build_id: None,
            arch: "x86_64".into(),
            segments: Vec::new(),
            functions: vec![
                sym(FuncKey::global("main"), 0x1000),
                sym(FuncKey::local("helper", "a.c"), 0x1010),
                sym(FuncKey::local("helper", "b.c"), 0x1020),
                sym(FuncKey::local("lonely", "c.c"), 0x1030),
                sym(FuncKey::global("work"), 0x1040),
                sym(FuncKey::local("work", "d.c"), 0x1050),
            ],
            from_dynsym: false,
            plt: Vec::new(),
        }
    }

    // Hints pick statics, globals lose their hint, a lone static needs no hint,
    // unknown and ambiguous names are counted and kept.
    #[test]
    fn binds_by_hint_then_global_then_lone_local() {
        let mut b = ProfileBuilder::new(Meta::default());
        b.add_self(&FuncKey::local("main", "/src/m.c"), 1);
        b.add_self(&FuncKey::local("helper", "/src/b.c"), 2);
        b.add_self(&FuncKey::local("lonely", "elsewhere.c"), 4);
        b.add_self(&FuncKey::local("work", "/x/hot.c"), 8);
        b.add_self(&FuncKey::local("work", "d.c"), 16);
        b.add_self(&FuncKey::global("helper"), 32);
        b.add_self(&FuncKey::global("gone"), 64);
        b.add_call(
            &FuncKey::local("main", "/src/m.c"),
            &FuncKey::local("helper", "/src/b.c"),
            5,
        );
        let (p, r) = bind(&b.build(), &binary());
        let got: Vec<(String, u64, Option<u64>)> = p
            .functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight, f.size))
            .collect();
        assert_eq!(
            got,
            vec![
                ("gone".to_string(), 64, None),
                ("helper".to_string(), 32, None),
                ("helper (b.c)".to_string(), 2, Some(16)),
                ("lonely (c.c)".to_string(), 4, Some(16)),
                ("main".to_string(), 1, Some(16)),
                ("work".to_string(), 8, Some(16)),
                ("work (d.c)".to_string(), 16, Some(16)),
            ]
        );
        assert_eq!(
            r,
            BindReport {
                matched: 5,
                unmatched: 1,
                ambiguous: 1,
                unmatched_weight: 96
            }
        );
        assert_eq!(p.edges.len(), 1);
        assert_eq!(p.functions[p.edges[0].caller as usize].key.name, "main");
        assert_eq!(
            p.functions[p.edges[0].callee as usize].key,
            FuncKey::local("helper", "b.c")
        );
    }
}
