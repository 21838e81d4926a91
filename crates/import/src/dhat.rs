//! DHAT's heap profile (`valgrind --tool=dhat`, file version 2, JSON): where a program's heap
//! blocks were allocated and how often each byte of them was read or written.
//!
//! For every allocation point DHAT keeps the bytes and blocks allocated and the bytes read and
//! written; when all its blocks have one size of at most 1024 bytes it also keeps an access
//! count per byte offset (`acc`, run-length encoded: `-n, c` is `n` bytes accessed `c` times
//! each). Those per-offset counts are what weighs a structure's members by use
//! (`sediment_explain::structs::weigh`): a block whose size is the structure's is taken to be
//! one. Only allocation points with per-offset counts are returned.
//!
//! DHAT keeps these counts in 16 bits: a block's count stops at 65535, and the sum over an
//! allocation point's blocks wraps past 65535. Each byte access adds one to one count, so the
//! counts sum to the bytes read and written exactly when nothing stopped or wrapped;
//! [`Site::exact`] says whether they do, and a caller must not weigh by counts that are not.
//!
//! The file may come from anyone: unknown fields are ignored, every count is checked, and a
//! run-length list that does not cover exactly the block size is an error naming the
//! allocation point.

use crate::Error;
use serde::Deserialize;

/// DHAT records per-offset counts only for blocks up to this size.
pub const MAX_BLOCK: u64 = 1024;

/// One allocation point with per-offset access counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Size of each block allocated here.
    pub block_bytes: u64,
    /// Blocks allocated here.
    pub blocks: u64,
    /// Bytes read from those blocks.
    pub read_bytes: u64,
    /// Bytes written to them.
    pub written_bytes: u64,
    /// Accesses per byte offset, summed over the blocks (`block_bytes` entries).
    pub accesses: Vec<u64>,
    /// The allocation stack, innermost first, as DHAT names the frames.
    pub stack: Vec<String>,
    /// Whether the counts sum to the bytes read and written (none stopped at 65535 or
    /// wrapped: see the module notes).
    pub exact: bool,
}

#[derive(Deserialize)]
struct File {
    #[serde(rename = "dhatFileVersion")]
    version: u64,
    mode: String,
    pps: Vec<Point>,
    ftbl: Vec<String>,
}

#[derive(Deserialize)]
struct Point {
    tb: u64,
    tbk: u64,
    #[serde(default)]
    rb: Option<u64>,
    #[serde(default)]
    wb: Option<u64>,
    #[serde(default)]
    acc: Option<Vec<i64>>,
    fs: Vec<usize>,
}

/// Reads a DHAT output file (`path` names it in errors).
pub fn read(path: &str, data: &[u8]) -> Result<Vec<Site>, Error> {
    let format = |message: String| Error::Format {
        path: path.to_string(),
        message,
    };
    let file: File = serde_json::from_slice(data)
        .map_err(|e| format(format!("not a DHAT output file (JSON): {e}")))?;
    if file.version != 2 {
        return Err(format(format!(
            "DHAT file version {} (version 2 is read)",
            file.version
        )));
    }
    if file.mode != "heap" {
        return Err(format(format!(
            "DHAT mode `{}`: per-byte access counts exist only in heap mode (valgrind --tool=dhat without --mode)",
            sediment_profile::quote(&file.mode)
        )));
    }
    let mut sites = Vec::new();
    for (i, p) in file.pps.iter().enumerate() {
        let Some(acc) = &p.acc else { continue };
        let point = |message: String| format(format!("allocation point {i}: {message}"));
        if p.tbk == 0 || p.tb % p.tbk != 0 {
            return Err(point(format!(
                "{} bytes in {} blocks is not one block size, yet per-byte counts are given",
                p.tb, p.tbk
            )));
        }
        let block_bytes = p.tb / p.tbk;
        if block_bytes == 0 || block_bytes > MAX_BLOCK {
            return Err(point(format!(
                "per-byte counts for {block_bytes}-byte blocks (DHAT keeps them for 1..{MAX_BLOCK} bytes)"
            )));
        }
        let accesses = expand(acc, block_bytes).map_err(point)?;
        let stack =
            p.fs.iter()
                .map(|&f| {
                    file.ftbl
                        .get(f)
                        .cloned()
                        .ok_or_else(|| point(format!("frame {f} is not in the frame table")))
                })
                .collect::<Result<_, _>>()?;
        let counted = accesses.iter().fold(0u64, |a, &c| a.saturating_add(c));
        let exact = match (p.rb, p.wb) {
            (Some(r), Some(w)) => r.checked_add(w) == Some(counted),
            _ => false,
        };
        sites.push(Site {
            exact,
            block_bytes,
            blocks: p.tbk,
            read_bytes: p.rb.unwrap_or(0),
            written_bytes: p.wb.unwrap_or(0),
            accesses,
            stack,
        });
    }
    Ok(sites)
}

/// Expands DHAT's run-length list to one count per byte; it must cover exactly `len` bytes.
fn expand(acc: &[i64], len: u64) -> Result<Vec<u64>, String> {
    let mut out = Vec::with_capacity(len as usize);
    let mut it = acc.iter();
    while let Some(&v) = it.next() {
        let (run, count) = if v < 0 {
            let Some(&c) = it.next() else {
                return Err("run length without a count at the end of `acc`".into());
            };
            (v.unsigned_abs(), c)
        } else {
            (1, v)
        };
        let count = u64::try_from(count).map_err(|_| format!("negative access count {count}"))?;
        if out.len() as u64 + run > len {
            return Err(format!("`acc` covers more than the {len}-byte block"));
        }
        out.resize(out.len() + run as usize, count);
    }
    if out.len() as u64 != len {
        return Err(format!(
            "`acc` covers {} bytes of a {len}-byte block",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(pps: &str) -> String {
        format!(
            r#"{{"dhatFileVersion":2,"mode":"heap","verb":"Allocated","pps":[{pps}],"ftbl":["[root]","0x1: calloc","0x2: main (s.c:4)"]}}"#
        )
    }

    #[test]
    fn run_lengths_expand_to_one_count_per_byte() {
        let f = file(
            r#"{"tb":24,"tbk":2,"rb":5,"wb":6,"acc":[-8,3,0,-3,7],"fs":[1,2]},{"tb":4096,"tbk":1,"fs":[1]}"#,
        );
        let sites = read("d.json", f.as_bytes()).unwrap();
        assert_eq!(sites.len(), 1, "points without per-byte counts are skipped");
        let s = &sites[0];
        assert_eq!(
            (s.block_bytes, s.blocks, s.read_bytes, s.written_bytes),
            (12, 2, 5, 6)
        );
        assert_eq!(s.accesses, vec![3, 3, 3, 3, 3, 3, 3, 3, 0, 7, 7, 7]);
        assert_eq!(s.stack, vec!["0x1: calloc", "0x2: main (s.c:4)"]);
        assert!(!s.exact, "31 counted, 11 read and written");
        let f = file(r#"{"tb":4,"tbk":1,"rb":3,"wb":2,"acc":[-2,2,1,0],"fs":[]}"#);
        assert!(read("d.json", f.as_bytes()).unwrap()[0].exact);
    }

    #[test]
    fn damaged_files_name_the_file_and_the_point() {
        let cases = [
            (
                file(r#"{"tb":12,"tbk":1,"acc":[-13,1],"fs":[]}"#),
                "allocation point 0: `acc` covers more",
            ),
            (
                file(r#"{"tb":12,"tbk":1,"acc":[-4,1],"fs":[]}"#),
                "covers 4 bytes of a 12-byte block",
            ),
            (
                file(r#"{"tb":12,"tbk":1,"acc":[-12],"fs":[]}"#),
                "without a count",
            ),
            (
                file(r#"{"tb":12,"tbk":1,"acc":[-12,-1],"fs":[]}"#),
                "negative access count",
            ),
            (
                file(r#"{"tb":13,"tbk":2,"acc":[1],"fs":[]}"#),
                "not one block size",
            ),
            (
                file(r#"{"tb":12,"tbk":0,"acc":[1],"fs":[]}"#),
                "not one block size",
            ),
            (
                file(r#"{"tb":4096,"tbk":1,"acc":[-4096,1],"fs":[]}"#),
                "4096-byte blocks",
            ),
            (file(r#"{"tb":1,"tbk":1,"acc":[1],"fs":[9]}"#), "frame 9"),
            ("{".to_string(), "not a DHAT output file"),
            (file("").replace("\"heap\"", "\"copy\""), "mode `copy`"),
            (file("").replace(":2,", ":1,"), "version 1"),
        ];
        for (text, want) in cases {
            let e = read("d.json", text.as_bytes()).unwrap_err().to_string();
            assert!(
                e.starts_with("d.json: ") && e.contains(want),
                "{e} (want {want})"
            );
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
