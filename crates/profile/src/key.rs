//! Function identity.

use std::fmt;

/// Identifies a function across tools: its symbol name, plus the source file for functions with
/// local (static) binding, so that `helper` in `a.c` and `helper` in `b.c` stay apart.
///
/// `file` is the base name of the translation unit as the compiler recorded it in the ELF
/// `STT_FILE` symbol (`unit07.c`), never a full path: a profile recorded on one machine must match
/// objects built in another directory. It is `None` for global symbols and whenever the source
/// could not be told. Ordering is by name first, so a profile lists same-named functions together.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FuncKey {
    /// Symbol name as it appears in the symbol table (mangled for C++).
    pub name: String,
    /// Base name of the source file, for local symbols.
    pub file: Option<String>,
}

impl FuncKey {
    /// A global function.
    pub fn global(name: impl Into<String>) -> Self {
        FuncKey {
            name: name.into(),
            file: None,
        }
    }

    /// A local (static) function of the given source file; the file is reduced to its base name.
    pub fn local(name: impl Into<String>, file: &str) -> Self {
        FuncKey {
            name: name.into(),
            file: Some(base_name(file).to_string()),
        }
    }
}

/// `name` or `name (file)`; the alternate form (`{:#}`) shows the name demangled
/// ([`crate::demangle`]), for reports.
impl fmt::Display for FuncKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if f.alternate() {
            crate::demangle(&self.name)
        } else {
            std::borrow::Cow::Borrowed(self.name.as_str())
        };
        match &self.file {
            Some(file) => write!(f, "{name} ({file})"),
            None => f.write_str(&name),
        }
    }
}

/// The part of a path after the last `/`.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_keeps_base_name_only() {
        assert_eq!(
            FuncKey::local("f", "/src/x/unit07.c").file.as_deref(),
            Some("unit07.c")
        );
        assert_eq!(FuncKey::local("f", "a.c").to_string(), "f (a.c)");
    }
}
