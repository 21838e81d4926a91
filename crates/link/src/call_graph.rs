//! lld's `--call-graph-ordering-file`: a profile's call edges as `caller callee weight` lines,
//! so lld's own C3 (`--call-graph-profile-sort`, its default) can order a link from a Sediment
//! profile, and its order be compared with Sediment's.
//!
//! lld reads each line as two symbol names and a decimal count, looks both names up among the
//! symbols of every input object (global and local alike, by name only), and adds the count to
//! the edge between the two input sections holding them. Its C3 weighs a section by the calls
//! into it, so self weight has no line of its own.
//!
//! Names are written as the profile keeps them: mangled, the spelling in the symbol table.
//! lld cannot tell two statics of one name apart (the last object read wins), so a name that
//! belongs to more than one function of the profile (`helper` in `a.c` and in `b.c`, or a
//! global and a static) is ambiguous, and the edges that touch it are left out and counted
//! rather than merged onto whichever symbol lld picks. A static whose name is unique in the
//! profile but reused by a function the profile never saw cannot be detected here. Names
//! outside [`is_safe_symbol`]'s set are left out and counted too. Lines follow the profile's
//! canonical edge order, so equal profiles give identical files.

use crate::safe::is_safe_symbol;
use sediment_profile::Profile;
use std::collections::HashMap;

/// What [`write()`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallGraphFile {
    /// The file's text.
    pub text: String,
    /// Edges written.
    pub edges: usize,
    /// Edges left out because a name is shared by several functions of the profile.
    pub ambiguous: usize,
    /// Edges left out because a name has characters no order file may hold.
    pub unsafe_names: usize,
}

/// Writes `profile`'s call edges as an lld call-graph ordering file (see the module docs).
pub fn write(profile: &Profile) -> CallGraphFile {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for f in &profile.functions {
        *uses.entry(f.key.name.as_str()).or_default() += 1;
    }
    let mut out = CallGraphFile {
        text: String::new(),
        edges: 0,
        ambiguous: 0,
        unsafe_names: 0,
    };
    for e in &profile.edges {
        let name = |id: u32| profile.functions[id as usize].key.name.as_str();
        let (caller, callee) = (name(e.caller), name(e.callee));
        if !is_safe_symbol(caller) || !is_safe_symbol(callee) {
            out.unsafe_names += 1;
        } else if uses[caller] > 1 || uses[callee] > 1 {
            out.ambiguous += 1;
        } else {
            out.text
                .push_str(&format!("{caller} {callee} {}\n", e.weight));
            out.edges += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sediment_profile::{FuncKey, Meta, ProfileBuilder};

    #[test]
    fn edges_become_lines_and_ambiguous_statics_are_left_out() {
        // Mangled names stay mangled; a static with a unique name is written by name; edges of
        // a name two functions share, or of an unsafe name, are counted instead.
        let mut b = ProfileBuilder::new(Meta::default());
        let main = FuncKey::global("main");
        b.add_call(&main, &FuncKey::global("_ZN3foo3barEv"), 7);
        b.add_call(
            &FuncKey::global("_ZN3foo3barEv"),
            &FuncKey::local("leaf", "a.c"),
            5,
        );
        b.add_call(&main, &FuncKey::local("helper", "a.c"), 3);
        b.add_call(&main, &FuncKey::local("helper", "b.c"), 2);
        b.add_call(&main, &FuncKey::global("bad name"), 1);
        b.add_call(&main, &main, 4);
        let f = write(&b.build());
        assert_eq!(
            f.text,
            "_ZN3foo3barEv leaf 5\nmain _ZN3foo3barEv 7\nmain main 4\n"
        );
        assert_eq!((f.edges, f.ambiguous, f.unsafe_names), (3, 2, 1));
    }

    #[test]
    fn equal_profiles_give_identical_text() {
        let build = || {
            let mut b = ProfileBuilder::new(Meta::default());
            b.add_call(&FuncKey::global("b"), &FuncKey::global("c"), 2);
            b.add_call(&FuncKey::global("a"), &FuncKey::global("b"), 9);
            b.build()
        };
        assert_eq!(write(&build()).text, "a b 9\nb c 2\n");
        assert_eq!(write(&build()), write(&build()));
    }
}
