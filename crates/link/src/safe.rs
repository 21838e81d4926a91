//! The character sets allowed to reach a linker input.
//!
//! Linker scripts are a language (`INCLUDE`, `SECTIONS`, `/* */`, quoted names, wildcards),
//! and order files treat `*?[]` as globs. Rather than quote or escape, which each linker parses
//! differently, only names made of plain characters are ever written; everything else is
//! skipped by the caller with one counted warning. The sets cover what C and Itanium-mangled
//! C++ compilers emit, including GCC's clone suffixes (`.constprop.0`, `.part.1`, `.cold`).
//!
//! Turned down: escaping with quotes in ld scripts. ld accepts `"name"` for a section, but a
//! quoted name is not a wildcard pattern, quoting rules differ between ld and gold, and it
//! would still leave newlines to handle. Skipping is simpler to get right.

/// A symbol name safe for an lld symbol-ordering file: `[A-Za-z0-9_.$@]+`.
pub fn is_safe_symbol(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$' | b'@'))
}

/// An input-section name safe inside a linker script or gold's ordering file:
/// `[A-Za-z0-9_.$]+` (no `@`, no wildcard, no parenthesis, no comment opener).
pub fn is_safe_section(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$'))
}

/// One path component (file or archive member name) safe inside a linker-script file pattern:
/// `[A-Za-z0-9_.+-]+`, and not starting with `-` (it could read as an option in `INPUT`).
pub fn is_safe_path_component(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'+' | b'-'))
}

/// A path safe for an ld script: components joined by single `/`, each safe, optionally
/// absolute. `.` and `..` components are fine; empty ones (`a//b`) are not.
pub fn is_safe_path(p: &str) -> bool {
    let rest = p.strip_prefix('/').unwrap_or(p);
    !rest.is_empty() && rest.split('/').all(is_safe_path_component)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Script syntax, whitespace and globs are rejected; compiler-made names pass.
    #[test]
    fn charsets() {
        for ok in [
            "main",
            "foo.cold",
            "cp.constprop.0",
            "_ZN3foo3barEv",
            "f$x",
            "memcpy@@GLIBC_2.14",
        ] {
            assert!(is_safe_symbol(ok), "{ok}");
        }
        for bad in [
            "", "a b", "a\nb", "x*", "x?", "[x]", "f()", "}", "a/*", "\"q\"", "{", "a;b",
        ] {
            assert!(!is_safe_symbol(bad), "{bad:?}");
            assert!(!is_safe_section(bad), "{bad:?}");
        }
        assert!(is_safe_section(".text.unlikely.foo"));
        assert!(!is_safe_section(".text.f@x"));
        assert!(is_safe_path("/tmp/x-1/a+b.o"));
        assert!(is_safe_path("../a.o"));
        for bad in [
            "", "/", "a//b.o", "a b.o", "a/*b.o", "-a.o", "x/-T", "a\n.o", "a(b).o",
        ] {
            assert!(!is_safe_path(bad), "{bad:?}");
        }
    }
}
