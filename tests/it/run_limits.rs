//! Limits of one run (issue 34): an import that writes thousands of profiles holds no
//! descriptor per file, the paths a stranger's profile names are read once per file, and the
//! bytes one run reads are bounded.

use crate::common::sediment_bin;
use std::path::Path;
use std::process::{Command, Output};

/// `perf script` text with one sample in each of `dsos` (a frame `f+0x1 (DSO)` each).
fn perf_script_naming(dsos: &[String]) -> String {
    let mut s = String::new();
    for (i, dso) in dsos.iter().enumerate() {
        s.push_str(&format!(
            "a.out 123 [000] {}.000001: 1 cpu-clock:\n\t    1130 f{i}+0x10 ({dso})\n\n",
            i + 1
        ));
    }
    s
}

/// Runs `sediment args` in `dir` under a shell that first sets `ulimit -n LIMIT`.
fn sediment_with_fd_limit(dir: &Path, limit: u32, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(sediment_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run sh")
}

// Regression (issue 34): an import writing more profiles than the process may open files
// failed with EMFILE, because every temporary file stayed open until the renames. 300
// profiles under `ulimit -n 64`.
#[test]
fn regress_import_of_many_profiles_holds_no_descriptor_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dsos: Vec<String> = (0..300)
        .map(|i| format!("/nonexistent/lib{i:03}.so"))
        .collect();
    std::fs::write(d.join("many.ps"), perf_script_naming(&dsos)).unwrap();
    std::fs::create_dir(d.join("out")).unwrap();
    let out = sediment_with_fd_limit(
        d,
        64,
        &[
            "import",
            "--format",
            "perf-script",
            "-o",
            "out/p.sprof",
            "many.ps",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}", err.lines().last().unwrap_or(""));
    let written = std::fs::read_dir(d.join("out")).unwrap().count();
    assert_eq!(written, 300);
}
