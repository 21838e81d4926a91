//! Where a binary's code is in a running process.
//!
//! Lackey prints run-time addresses, and under valgrind a PIE is loaded at a base of
//! valgrind's choosing (0x108000 on amd64 with valgrind 3.19). Valgrind and the program are one
//! process, so once the trace's first instruction line arrives (the dynamic loader's, before
//! any of the program's) the executable is mapped and `/proc/PID/maps` shows where: for each
//! executable `PT_LOAD` segment of the ELF file, the mapping of the same file at the segment's
//! page offset gives its run-time start, `map_start + (p_offset - map_offset)`, and the range is
//! `p_memsz` bytes from there (the hull of all executable segments). Turned down: guessing the
//! base from the lowest executed address in a window (wrong when the program's first executed
//! code is not at the segment start) and valgrind's `-v` messages (they do not print load
//! addresses).

use std::path::{Path, PathBuf};

use crate::Error;

/// The run-time `[start, end)` hull of the executable segments of `binary` (its canonical path,
/// as the maps file names it) in process `pid`. `segments` are the executable `PT_LOAD`
/// segments as (`p_offset`, `p_memsz`).
pub fn exec_range(pid: u32, binary: &Path, segments: &[(u64, u64)]) -> Result<(u64, u64), Error> {
    let maps_path = PathBuf::from(format!("/proc/{pid}/maps"));
    let maps = std::fs::read_to_string(&maps_path).map_err(|source| Error::Io {
        path: maps_path.clone(),
        source,
    })?;
    exec_range_in(&maps, &maps_path, binary, segments)
}

/// [`exec_range`] over the text of a maps file (`maps_path` names it in errors).
pub fn exec_range_in(
    maps: &str,
    maps_path: &Path,
    binary: &Path,
    segments: &[(u64, u64)],
) -> Result<(u64, u64), Error> {
    let mut maps_of_file = Vec::new();
    for line in maps.lines() {
        // start-end perms offset dev inode path (the path may contain spaces).
        let mut f = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), _, _, Some(path)) =
            (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        // Only executable mappings: a read-only mapping of the preceding segment can cover
        // the code segment's file offset too (lld leaves the code at a vaddr one page past
        // its file offset, so the read-only mapping's last page holds the same file bytes).
        if Path::new(path.trim_start()) != binary || !perms.contains('x') {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let hex = |t: &str| u64::from_str_radix(t, 16).ok();
        if let (Some(s), Some(e), Some(o)) = (hex(s), hex(e), hex(off)) {
            maps_of_file.push((s, e, o));
        }
    }
    let mut hull: Option<(u64, u64)> = None;
    for &(offset, mem_size) in segments {
        let found = maps_of_file
            .iter()
            .find(|&&(s, e, o)| offset >= o && offset - o < e - s);
        let Some(&(s, _, o)) = found else {
            return Err(Error::NotMapped {
                binary: binary.to_path_buf(),
                offset,
                maps: maps_path.to_path_buf(),
            });
        };
        let start = s + (offset - o);
        let end = start.saturating_add(mem_size);
        hull = Some(match hull {
            None => (start, end),
            Some((a, b)) => (a.min(start), b.max(end)),
        });
    }
    hull.ok_or_else(|| Error::NoExecutableSegment(binary.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A PIE loaded at 0x108000: the read-only first mapping also covers the code's file page,
    // but only the executable mapping counts; the range is p_memsz from the segment's start.
    #[test]
    fn pie_code_range() {
        let maps = "\
00108000-00109000 r--p 00000000 08:01 42 /tmp/a b/app
00109000-0010a000 r-xp 00001000 08:01 42 /tmp/a b/app
04000000-04001000 r-xp 00000000 08:01 7 /usr/lib/valgrind/lackey
";
        let r = exec_range_in(
            maps,
            Path::new("m"),
            Path::new("/tmp/a b/app"),
            &[(0x1000, 0x123)],
        );
        assert_eq!(r.unwrap(), (0x109000, 0x109123));
        let e = exec_range_in(
            maps,
            Path::new("m"),
            Path::new("/tmp/other"),
            &[(0x1000, 1)],
        );
        assert!(e.unwrap_err().to_string().contains("not mapped in m"));
    }
}
