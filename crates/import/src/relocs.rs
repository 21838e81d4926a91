//! A static call graph from the relocations of relocatable objects: what `-fcallgraph-info`
//! gives for GCC builds ([`crate::gcc_callgraph`]), for objects from any compiler, with no
//! extra build flag.
//!
//! [`sediment_elf::objects::read_object`] lists, per function, the functions its code refers
//! to: calls, and functions whose address it takes (a callback handed to another function runs
//! around the same time as the code that hands it over, which a `.ci` graph does not show).
//! Each such reference becomes a caller -> callee edge weighted by its number of sites; self
//! weights are 0, `meta event` is `static` and `meta confidence` `low`, as for `.ci` graphs,
//! so `sediment order --fill-from` treats both alike. Function keys are the symbols': a local
//! function keyed with the base name of its object's `STT_FILE`, a global by name alone, and a
//! call to an undefined symbol names the global defined in another object.
//!
//! Not seen: calls through pointers loaded from data (a `luaL_Reg` table of library
//! functions): their callers are unknown, so such functions are entry points of the graph.

use crate::Error;
use sediment_elf::objects::{Callee, ObjectFile};
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};

/// Value of `meta source` in profiles read from object files.
pub const SOURCE: &str = "relocations";

/// The call graph of `objects` (all the objects of one program), for the program `binary`
/// (`meta binary`). An error when no object defines a function.
pub fn read(objects: &[ObjectFile], binary: &str) -> Result<Profile, Error> {
    let mut builder = ProfileBuilder::new(Meta::default());
    let mut functions = 0usize;
    for obj in objects {
        let key = |i: usize| {
            let f = &obj.functions[i];
            match &f.file {
                Some(file) => FuncKey::local(&f.name, file),
                None => FuncKey::global(&f.name),
            }
        };
        for i in 0..obj.functions.len() {
            builder.touch(&key(i));
        }
        functions += obj.functions.len();
        for (from, callee, sites) in &obj.references {
            let to = match callee {
                Callee::Here(i) => key(*i),
                Callee::Elsewhere(name) => FuncKey::global(name),
            };
            builder.add_call(&key(*from), &to, u64::from(*sites));
        }
    }
    if functions == 0 {
        // The caller knows the input files; here only the objects read from them are known.
        let path = match objects {
            [] => "(the inputs)".to_string(),
            [o] => o.display_name(),
            [o, rest @ ..] => format!("{} (and {} other objects)", o.display_name(), rest.len()),
        };
        let message = if objects.is_empty() {
            "no objects in them (empty archives?), so no object defines a function"
        } else {
            "no object defines a function"
        };
        return Err(Error::Format {
            path,
            message: message.into(),
        });
    }
    let mut meta = Meta {
        binary: binary.to_string(),
        source: SOURCE.to_string(),
        event: Some(crate::gcc_callgraph::EVENT.to_string()),
        ..Meta::default()
    };
    meta.extra.insert("confidence".into(), "low".into());
    meta.extra
        .insert("objects".into(), objects.len().to_string());
    *builder.meta_mut() = meta;
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Regression: with no objects (an empty or cut archive) the error named an empty file
    // (`: no object defines a function`).
    #[test]
    fn no_functions_never_names_an_empty_file() {
        let e = read(&[], "prog").unwrap_err().to_string();
        assert!(e.starts_with("(the inputs): no objects"), "{e}");
        let empty = ObjectFile {
            path: "lib.a".into(),
            member: Some("x\x1b.o".into()),
            file_symbol: None,
            functions: Vec::new(),
            function_sections: true,
            references: Vec::new(),
            lto: None,
        };
        let e = read(&[empty], "prog").unwrap_err().to_string();
        assert_eq!(e, "lib.a(x%1B.o): no object defines a function");
    }
}
