//! What every import returns ([`Imported`]: the profiles of one recording, which of them is the
//! main executable's, and counted warnings), and the pieces of it every caller of the format
//! readers would otherwise write again: the warnings each reader's statistics call for
//! ([`perf_warnings`], [`callgrind_warnings`], [`bind_warning`], [`stripped_warning`]) and how
//! the main executable is told ([`callgrind_command`], [`heaviest_binary`]).
//!
//! Warnings are one line each, counted (never one per function), naming the first instance;
//! the caller prints them.

use crate::bind::BindReport;
use crate::{callgrind, perf};
use sediment_profile::{base_name, Profile};

/// Profiles of one recording, and which of them is the main executable's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The importer (`meta source` of a profile written for a binary that got no samples).
    pub source: &'static str,
    /// One profile per binary, sorted by binary path.
    pub profiles: Vec<Profile>,
    /// `meta binary` of the main executable, when known.
    pub main: Option<String>,
    /// One-line warnings to print (counted, never one per function).
    pub warnings: Vec<String>,
}

/// The warning for binaries left out of a whole-package recording because they have no symbol
/// table (`skipped`, their paths in the order met).
pub fn stripped_warning(skipped: &[String]) -> Option<String> {
    skipped.first().map(|first| {
        format!(
            "{} binaries have no symbol table and get no profile (first: {first})",
            skipped.len()
        )
    })
}

/// The warnings a perf import's statistics call for. `one_binary`: only the binary the user
/// named was imported, so the others that could not be read are no loss.
pub fn perf_warnings(s: &perf::Stats, one_binary: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    warnings.extend(outside_warning(s));
    if !s.missing_binaries.is_empty() && !one_binary {
        let n: u64 = s.missing_binaries.iter().map(|(_, n)| n).sum();
        warnings.push(format!(
            "{} binaries with {n} samples could not be read (first: {})",
            s.missing_binaries.len(),
            s.missing_binaries[0].0
        ));
    }
    if s.plt_samples > 0 {
        warnings.push(format!(
            "{} of {} samples ({:.1}%) were in PLT stubs (calls on their way into a shared \
             library): counted as PLT, attributed to no function",
            s.plt_samples,
            s.samples,
            100.0 * s.plt_samples as f64 / s.samples.max(1) as f64
        ));
    }
    if s.unsymbolized_samples > 0 {
        warnings.push(unsymbolized_warning(
            s.unsymbolized_samples,
            &s.unsymbolized_by_binary,
        ));
    }
    if s.branches > 0 && s.branch_calls == 0 {
        warnings.push(format!(
            "none of the {} branch-stack entries was a call between two functions of one \
             binary (see docs/design/branch-stacks.md)",
            s.branches
        ));
    }
    warnings
}

/// Binaries named in [`unsymbolized_warning`]; the rest are counted.
const UNSYMBOLIZED_NAMED: usize = 3;

/// "N samples matched no function symbol", with the binaries they were in and each one's share
/// of them, most first (`by_binary` sorted so, as [`perf::Stats::unsymbolized_by_binary`]).
fn unsymbolized_warning(total: u64, by_binary: &[(String, u64)]) -> String {
    let mut line = format!("{total} samples matched no function symbol");
    let share = |n: u64| n as f64 * 100.0 / total.max(1) as f64;
    for (i, (path, n)) in by_binary.iter().take(UNSYMBOLIZED_NAMED).enumerate() {
        line.push_str(if i == 0 { ": " } else { ", " });
        line.push_str(&format!(
            "{:.0}% in {}",
            share(*n),
            sediment_profile::escape(path)
        ));
    }
    if by_binary.len() > UNSYMBOLIZED_NAMED {
        let rest: u64 = by_binary[UNSYMBOLIZED_NAMED..].iter().map(|(_, n)| n).sum();
        line.push_str(&format!(
            ", {:.0}% in {} other binaries",
            share(rest),
            by_binary.len() - UNSYMBOLIZED_NAMED
        ));
    }
    line
}

/// The one line for samples that ran outside every binary (kernel, idle CPUs, `[vdso]`, JIT
/// code in anonymous memory or `memfd:` files, deleted files), with each kind's share of all
/// samples; they are never attributed to a binary.
pub fn outside_warning(s: &perf::Stats) -> Option<String> {
    let outside = s.kernel_samples + s.unmapped_samples;
    if outside == 0 || s.samples == 0 {
        return None;
    }
    let share = |n: u64| format!("{:.1}%", n as f64 * 100.0 / s.samples as f64);
    let mut kinds: Vec<(&str, u64)> = Vec::new();
    kinds.push(("kernel", s.kernel_samples - s.idle_samples));
    kinds.push(("idle", s.idle_samples));
    kinds.extend(s.unmapped_kinds.iter().map(|(k, n)| (*k, *n)));
    // Largest share first, ties by name.
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = kinds
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {}", share(*n)))
        .collect();
    Some(format!(
        "{outside} of {} samples ({}) ran outside any binary and are not attributed: {}",
        s.samples,
        share(outside),
        parts.join(", ")
    ))
}

/// The warnings a callgrind import's statistics call for; `unreadable` are the objects whose
/// binary could not be read (in the order met).
pub fn callgrind_warnings(s: &callgrind::Stats, unreadable: &[String]) -> Vec<String> {
    let mut warnings = Vec::new();
    if !s.no_base.is_empty() {
        warnings.push(format!(
            "{} objects have instruction positions but no load base could be established; \
             attributed by name instead (first: {})",
            s.no_base.len(),
            s.no_base[0]
        ));
    }
    let unmatched = s.bind.unmatched + s.bind.ambiguous;
    if unmatched > 0 {
        warnings.push(format!(
            "{unmatched} functions ({} Ir) matched no symbol of their binary",
            s.bind.unmatched_weight
        ));
    }
    if s.unattributed_cost > 0 || s.unattributed_calls > 0 {
        warnings.push(format!(
            "{} Ir and {} calls were at addresses in no function symbol (PLT stubs...)",
            s.unattributed_cost, s.unattributed_calls
        ));
    }
    if let Some(first) = unreadable.first() {
        warnings.push(format!(
            "{} objects could not be read to attribute their symbols (first: {first})",
            unreadable.len()
        ));
    }
    warnings
}

/// The warning for a profile bound by name to the binary at `path` ([`crate::bind::bind`])
/// when some of its functions matched no symbol.
pub fn bind_warning(path: &str, report: &BindReport) -> Option<String> {
    let unmatched = report.unmatched + report.ambiguous;
    (unmatched > 0).then(|| {
        format!(
            "{path}: {unmatched} functions (weight {}) matched no symbol",
            report.unmatched_weight
        )
    })
}

/// Whether a callgrind object is outside the program: `???` (code callgrind could not place)
/// and valgrind's own preloaded libraries get no binary and no profile.
pub fn is_foreign_object(object: &str) -> bool {
    !object.starts_with('/') || base_name(object).starts_with("vgpreload_")
}

/// The base name of the command a callgrind output ran: the first word of its `cmd:` header
/// (looked for in the first 64 lines), which names the main executable.
pub fn callgrind_command(text: &str) -> Option<String> {
    text.lines()
        .take(64)
        .find_map(|l| l.strip_prefix("cmd:"))
        .and_then(|c| c.split_whitespace().next())
        .map(|c| base_name(c).to_string())
}

/// The binary with the most self weight, ties to the smaller path: the main executable of a
/// recording that does not say which it is (`perf script` text). `profiles` are sorted by path.
pub fn heaviest_binary(profiles: &[Profile]) -> Option<String> {
    profiles
        .iter()
        .max_by(|a, b| {
            a.self_total()
                .cmp(&b.self_total())
                .then(b.meta.binary.cmp(&a.meta.binary))
        })
        .map(|p| p.meta.binary.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The `cmd:` header's first word, by base name; none without a header.
    #[test]
    fn command_from_the_header() {
        let text = "version: 1\ncreator: callgrind-3.19.0\ncmd:  /usr/bin/prog --flag x\npart: 1\n";
        assert_eq!(callgrind_command(text), Some("prog".to_string()));
        assert_eq!(callgrind_command("version: 1\n"), None);
    }

    // The binaries the unsymbolized samples were in, with their shares, the heaviest first.
    #[test]
    fn unsymbolized_samples_name_their_binaries() {
        let by = |v: &[(&str, u64)]| {
            v.iter()
                .map(|(p, n)| (p.to_string(), *n))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            unsymbolized_warning(
                4760,
                &by(&[("/lib/libc.so.6", 3808), ("/lib/libstdc++.so.6", 952)])
            ),
            "4760 samples matched no function symbol: 80% in /lib/libc.so.6, 20% in /lib/libstdc++.so.6"
        );
        assert_eq!(
            unsymbolized_warning(
                10,
                &by(&[("/a", 4), ("/b", 3), ("/c", 1), ("/d", 1), ("/e", 1)])
            ),
            "10 samples matched no function symbol: 40% in /a, 30% in /b, 10% in /c, 20% in 2 other binaries"
        );
        let s = perf::Stats {
            unsymbolized_samples: 6,
            unsymbolized_by_binary: by(&[("/usr/bin/app", 6)]),
            ..perf::Stats::default()
        };
        assert_eq!(
            perf_warnings(&s, true),
            ["6 samples matched no function symbol: 100% in /usr/bin/app"]
        );
    }

    // One line: the total share, then each kind by share; idle is told from kernel work.
    #[test]
    fn outside_samples_in_one_line() {
        let mut s = perf::Stats {
            samples: 200,
            kernel_samples: 50,
            idle_samples: 20,
            unmapped_samples: 11,
            ..perf::Stats::default()
        };
        s.unmapped_kinds.insert("[vdso]", 1);
        s.unmapped_kinds.insert("anonymous memory (JIT)", 10);
        assert_eq!(
            outside_warning(&s).unwrap(),
            "61 of 200 samples (30.5%) ran outside any binary and are not attributed: \
             kernel 15.0%, idle 10.0%, anonymous memory (JIT) 5.0%, [vdso] 0.5%"
        );
        assert_eq!(outside_warning(&perf::Stats::default()), None);
    }

    #[test]
    fn foreign_objects() {
        assert!(is_foreign_object("???"));
        assert!(is_foreign_object(
            "/usr/libexec/valgrind/vgpreload_core-amd64-linux.so"
        ));
        assert!(!is_foreign_object("/usr/bin/prog"));
    }
}
