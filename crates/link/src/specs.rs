//! The GCC specs file that brings a compiler driver's links to the linker shims of
//! `sediment wrappers`, for builds that drop `-B` from a link.
//!
//! The shims are found through `-B<shims>/`: gcc and clang look for the linker in the `-B`
//! directories first. libtool links a shared library with only the compiler flags it knows
//! (`-O*`, `-g*`, some `-f*`, `-fuse-ld=*`, `-specs=*`, ...) and drops the rest, `-B` among them,
//! so a library built through libtool would link with the real linker. It passes `-specs=FILE`
//! on, and a specs file whose `self_spec` adds `-B<shims>/` makes gcc add the option to its own
//! command line, as if it had been given: [`gcc_specs`] writes that file's text.
//!
//! The text is one `*self_spec:` entry appending (`+`) the option to what gcc already has,
//! ended by a blank line. In a spec string white space separates options and `%` starts a
//! directive; a backslash makes the next byte ordinary. Every byte of the directory's path
//! other than letters, digits and `/._+-` is written after a backslash, so any path reaches
//! gcc as it is, save one: a newline ends the entry whatever comes before it, and a path with
//! one is refused ([`crate::Error::SpecsPath`]). A `:` in the path passes through the specs
//! file, but gcc cannot find programs under it with `-B` either (it hands the directories to
//! `collect2` in the colon-separated `COMPILER_PATH`).

use crate::Error;

/// The text of a GCC specs file that adds `-B<dir>/` to every gcc run reading it (`dir`: the
/// directory of the linker shims, as bytes of its path).
pub fn gcc_specs(dir: &[u8]) -> Result<Vec<u8>, Error> {
    if dir.contains(&b'\n') {
        return Err(Error::SpecsPath(dir.escape_ascii().to_string()));
    }
    let mut out = b"*self_spec:\n+ -B".to_vec();
    for &b in dir {
        if !(b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'+' | b'-')) {
            out.push(b'\\');
        }
        out.push(b);
    }
    if !dir.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(b"\n\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_path_is_written_as_it_is() {
        assert_eq!(
            gcc_specs(b"/build/pkg-1.0/debian/.sediment-ld").unwrap(),
            b"*self_spec:\n+ -B/build/pkg-1.0/debian/.sediment-ld/\n\n"
        );
        assert_eq!(
            gcc_specs(b"/shims/").unwrap(),
            b"*self_spec:\n+ -B/shims/\n\n",
            "one slash at the end"
        );
    }

    // White space, `%` and the bytes of a name that is not UTF-8 each come after a backslash,
    // so that gcc reads one option with the path unchanged.
    #[test]
    fn special_bytes_are_escaped() {
        assert_eq!(
            gcc_specs(b"/a b/50%\t\\x\xc3\xa9").unwrap(),
            b"*self_spec:\n+ -B/a\\ b/50\\%\\\t\\\\x\\\xc3\\\xa9/\n\n".to_vec()
        );
    }

    #[test]
    fn a_newline_is_refused() {
        let e = gcc_specs(b"/a\nb").unwrap_err();
        assert!(matches!(e, Error::SpecsPath(_)), "{e}");
        assert!(e.to_string().contains("newline"), "{e}");
        assert!(e.to_string().starts_with("/a\\nb: "), "one line: {e}");
    }
}
