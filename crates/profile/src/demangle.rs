//! Demangled names for human-readable output. Profiles, order files and linker inputs keep the
//! symbol names as the symbol table spells them (mangled); reports show them demangled unless
//! the user asks for the symbol names (`--no-demangle`).
//!
//! Rust names (legacy `_ZN...17h<hash>E` and v0 `_R...`) go through `rustc-demangle`, shown
//! without the hash; Itanium C++ names (`_Z...`, with GCC's clone suffixes such as
//! `.constprop.0` or `.cold` shown as `[clone .cold]`) through `cpp_demangle`. Any other name,
//! a name either crate refuses, and a demangling longer than [`MAX_DEMANGLED`] bytes (a hostile
//! name can expand greatly) are shown as they are. Every control character of a result is
//! %-escaped, as [`crate::quote`] does, so a name cannot reach the terminal raw.

use std::borrow::Cow;

/// Longest demangled name shown; a longer one is shown mangled.
pub const MAX_DEMANGLED: usize = 4096;

/// `name` demangled (Rust or Itanium C++), or `name` itself when it is neither.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if !(name.starts_with("_Z") || name.starts_with("_R")) {
        return Cow::Borrowed(name);
    }
    let shown = rust(name).or_else(|| itanium(name));
    match shown {
        Some(s) if s.len() <= MAX_DEMANGLED && s != name => {
            if s.chars().any(char::is_control) {
                Cow::Owned(crate::escape(&s))
            } else {
                Cow::Owned(s)
            }
        }
        _ => Cow::Borrowed(name),
    }
}

/// A report label that starts with a symbol name (`name`, or `name (file)` as a key prints):
/// the name part demangled, the rest kept. Symbol names hold no space, so the name ends at the
/// first space.
pub fn demangle_label(label: &str) -> Cow<'_, str> {
    let (name, rest) = match label.split_once(' ') {
        Some((n, _)) => (n, &label[n.len()..]),
        None => (label, ""),
    };
    match demangle(name) {
        Cow::Borrowed(_) => Cow::Borrowed(label),
        Cow::Owned(d) => Cow::Owned(d + rest),
    }
}

/// A line of text (a warning) with every symbol name in it that demangles shown demangled: a
/// run of symbol characters (`[A-Za-z0-9_.$]`) starting with `_Z` or `_R` at the start of the
/// line or after any other character. Everything else is kept as it is.
pub fn demangle_text(line: &str) -> Cow<'_, str> {
    let symbol = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$');
    let mut out = String::new();
    let mut last = 0;
    let mut i = 0;
    let bytes = line.as_bytes();
    while i < bytes.len() {
        let at_boundary = i == 0 || !symbol(line[..i].chars().next_back().unwrap_or(' '));
        if at_boundary && (line[i..].starts_with("_Z") || line[i..].starts_with("_R")) {
            let end = line[i..]
                .find(|c: char| !symbol(c))
                .map_or(line.len(), |n| i + n);
            if let Cow::Owned(d) = demangle(&line[i..end]) {
                out.push_str(&line[last..i]);
                out.push_str(&d);
                last = end;
            }
            i = end;
        } else {
            i += line[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    if last == 0 {
        Cow::Borrowed(line)
    } else {
        out.push_str(&line[last..]);
        Cow::Owned(out)
    }
}

fn rust(name: &str) -> Option<String> {
    let d = rustc_demangle::try_demangle(name).ok()?;
    // Legacy Rust names are also valid Itanium names; only take those with Rust's hash.
    let shown = format!("{d:#}");
    let full = format!("{d}");
    (name.starts_with("_R") || full != shown).then_some(shown)
}

fn itanium(name: &str) -> Option<String> {
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    sym.demangle(&cpp_demangle::DemangleOptions::default()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itanium_rust_and_plain_names() {
        assert_eq!(demangle("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(
            demangle("_ZN3foo3barEi.constprop.0"),
            "foo::bar(int) [clone .constprop.0]"
        );
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
        assert!(matches!(demangle("helper"), Cow::Borrowed(_)));
    }

    #[test]
    fn names_inside_a_line() {
        assert_eq!(
            demangle_text("2 of 6 entries not found: _Z3fooi, main (a.c), x_Z3fooi, _Zbad"),
            "2 of 6 entries not found: foo(int), main (a.c), x_Z3fooi, _Zbad"
        );
        assert!(matches!(demangle_text("no names here"), Cow::Borrowed(_)));
        assert_eq!(demangle_text("_Z3fooi"), "foo(int)");
        assert_eq!(demangle_text("é _Z3fooi é"), "é foo(int) é");
    }

    #[test]
    fn labels_keep_their_file() {
        assert_eq!(demangle_label("_ZL6helperi (a.cc)"), "helper(int) (a.cc)");
        assert_eq!(demangle_label("plain (a.c)"), "plain (a.c)");
    }
}
