//! Response files: `@FILE` arguments on a linker command line, whose contents stand for more
//! arguments. Build systems pass long link lines that way (CMake with Ninja, Meson), and the
//! compiler driver hands the linker `@/tmp/ccXXXX` of its own when it was given one.
//!
//! The rules are GNU's (libiberty's `buildargv` and `expandargv`, which GNU ld and gold use;
//! LLVM's GNU tokenizer, which lld uses, agrees on everything written here):
//! - arguments are separated by white space (space, tab, newline, carriage return, vertical
//!   tab, form feed) outside quotes;
//! - a backslash takes the next character literally, inside quotes too;
//! - `'...'` and `"..."` quote everything up to the matching quote (white space and the other
//!   quote included); quotes join with what is around them (`a'b c'd` is `ab cd`), and `''`
//!   alone is an empty argument;
//! - an argument `@FILE` whose file can be read is replaced by the file's arguments, which are
//!   expanded in turn (a nested `@FILE` is relative to the working directory, as in GNU); one
//!   whose file cannot be read stays a literal argument, which the linker then reports as an
//!   input it cannot find.
//!
//! What may be read is the caller's decision: its reader returns the file's bytes, `None`
//! for a file that stays literal, or an error, which ends the expansion (a file too large for
//! the caller's budget, a FIFO that would make it wait for a writer).
//!
//! [`write()`] writes arguments back in a form those rules read unchanged: every white-space,
//! quote and backslash character escaped with a backslash, an empty argument as `''`.
//!
//! A file that names itself (directly or not) would expand for ever: expansion stops after
//! [`MAX_EXPANSIONS`] files, GNU's own limit, with [`Expansion::TooDeep`].
//!
//! Pure: the caller passes the function that reads a file.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// How many response files one command line may expand in all (libiberty's limit too).
pub const MAX_EXPANSIONS: usize = 2000;

/// The arguments of a response file's contents (the rules in the module documentation).
pub fn split(text: &[u8]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut word: Option<Vec<u8>> = None;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for &b in text {
        if escaped {
            word.get_or_insert_with(Vec::new).push(b);
            escaped = false;
        } else if b == b'\\' {
            word.get_or_insert_with(Vec::new);
            escaped = true;
        } else if let Some(q) = quote {
            if b == q {
                quote = None;
            } else {
                word.get_or_insert_with(Vec::new).push(b);
            }
        } else if b == b'\'' || b == b'"' {
            word.get_or_insert_with(Vec::new);
            quote = Some(b);
        } else if is_space(b) {
            if let Some(w) = word.take() {
                out.push(OsString::from_vec(w));
            }
        } else {
            word.get_or_insert_with(Vec::new).push(b);
        }
    }
    if let Some(w) = word {
        out.push(OsString::from_vec(w));
    }
    out
}

/// White space as C's `isspace` in the C locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `args` as the contents of a response file that [`split`] reads back as the same arguments,
/// one argument a line.
pub fn write(args: &[OsString]) -> Vec<u8> {
    let mut out = Vec::new();
    for a in args {
        let b = a.as_bytes();
        if b.is_empty() {
            out.extend_from_slice(b"''");
        }
        for &c in b {
            if is_space(c) || matches!(c, b'\'' | b'"' | b'\\') {
                out.push(b'\\');
            }
            out.push(c);
        }
        out.push(b'\n');
    }
    out
}

/// A command line with its response files expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expansion {
    /// No argument named a response file that could be read: the command line as it was.
    Plain,
    /// The arguments with every readable `@FILE` replaced by its contents, recursively.
    Expanded(Vec<OsString>),
    /// More than [`MAX_EXPANSIONS`] files (a file naming itself?): the first one, as given.
    TooDeep(OsString),
}

/// Expands the response files of `args` ([`split`] on each file's contents, read with `read`,
/// which returns `None` for a file that cannot be read: then `@FILE` stays as it is). The
/// first error `read` returns is the result: no more files are read.
pub fn expand<E>(
    args: &[OsString],
    mut read: impl FnMut(&Path) -> Result<Option<Vec<u8>>, E>,
) -> Result<Expansion, E> {
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    // Arguments still to look at, last first.
    let mut todo: Vec<OsString> = args.iter().rev().cloned().collect();
    let mut expansions = 0;
    let mut first = None;
    while let Some(a) = todo.pop() {
        let Some(file) = a.as_bytes().strip_prefix(b"@").filter(|f| !f.is_empty()) else {
            out.push(a);
            continue;
        };
        // At the limit, the next file is not read: a file naming itself stops there without
        // one more read.
        if expansions == MAX_EXPANSIONS {
            return Ok(Expansion::TooDeep(first.unwrap_or(a)));
        }
        let Some(text) = read(Path::new(std::ffi::OsStr::from_bytes(file)))? else {
            out.push(a);
            continue;
        };
        first.get_or_insert_with(|| a.clone());
        expansions += 1;
        todo.extend(split(&text).into_iter().rev());
    }
    Ok(if expansions == 0 {
        Expansion::Plain
    } else {
        Expansion::Expanded(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn strs(v: &[OsString]) -> Vec<String> {
        v.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    // GNU's rules: white space separates, quotes group and join, backslash escapes anywhere.
    #[test]
    fn quoting_rules() {
        let got = split(
            b"-o out  a.o\t\"b c.o\"\n'd \"e\".o' f\\ g.o x'y z'w \"it\\\"s\" '' \\\\ -L'/a b'\r\n",
        );
        assert_eq!(
            strs(&got),
            [
                "-o",
                "out",
                "a.o",
                "b c.o",
                "d \"e\".o",
                "f g.o",
                "xy zw",
                "it\"s",
                "",
                "\\",
                "-L/a b"
            ]
        );
        assert!(split(b"  \n\t ").is_empty());
        // An unterminated quote runs to the end of the file.
        assert_eq!(strs(&split(b"a 'b c")), ["a", "b c"]);
        // Bytes that are not UTF-8 pass through.
        assert_eq!(split(b"\xff.o"), [OsString::from_vec(b"\xff.o".to_vec())]);
    }

    // What `write` writes, `split` reads back unchanged.
    #[test]
    fn written_files_read_back() {
        let args: Vec<OsString> = [
            "-o",
            "a b",
            "",
            "it's",
            "\"q\"",
            "back\\slash",
            "tab\tnew\nline",
            "@not-a-file",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(split(&write(&args)), args);
    }

    // Nested files expand in place; a file that cannot be read stays literal; a cycle stops.
    #[test]
    fn expansion() {
        let files: HashMap<&str, &[u8]> = HashMap::from([
            ("outer", &b"a.o @inner 'c d.o'"[..]),
            ("inner", &b"b.o -lx"[..]),
            ("loop", &b"x.o @loop"[..]),
        ]);
        let read = |p: &Path| Ok::<_, ()>(files.get(p.to_str().unwrap()).map(|b| b.to_vec()));
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            expand(&args(&["-o", "app", "@outer", "@missing", "e.o"]), read),
            Ok(Expansion::Expanded(args(&[
                "-o", "app", "a.o", "b.o", "-lx", "c d.o", "@missing", "e.o"
            ])))
        );
        assert_eq!(
            expand(&args(&["a.o", "@missing", "@"]), read),
            Ok(Expansion::Plain)
        );
        assert_eq!(
            expand(&args(&["@missing", "@loop"]), read),
            Ok(Expansion::TooDeep("@loop".into())),
            "the first file expanded is named"
        );
    }

    // A file naming itself is read MAX_EXPANSIONS times, not once more: the depth is capped
    // before the read, whatever the reader charges for it.
    #[test]
    fn a_cycle_stops_at_the_limit_before_reading_again() {
        let mut reads = 0;
        let got = expand(&[OsString::from("@self")], |_| {
            reads += 1;
            Ok::<_, ()>(Some(b"x.o @self @self".to_vec()))
        });
        assert_eq!(got, Ok(Expansion::TooDeep("@self".into())));
        assert_eq!(reads, MAX_EXPANSIONS);
    }

    // The reader's error ends the expansion at once, and is the result: the files after the
    // refused one are not read.
    #[test]
    fn a_refused_file_ends_the_expansion() {
        let mut read_names = Vec::new();
        let got = expand(&["@a", "@huge", "@b"].map(OsString::from), |p: &Path| {
            read_names.push(p.to_string_lossy().into_owned());
            match p.to_str() {
                Some("huge") => Err("huge: larger than the limit".to_string()),
                _ => Ok(Some(b"x.o".to_vec())),
            }
        });
        assert_eq!(got, Err("huge: larger than the limit".to_string()));
        assert_eq!(read_names, ["a", "huge"]);
    }
}
