//! A reader for the totals of a `cachegrind.out` file.
//!
//! Format (Valgrind manual, "Cachegrind: the output file"): header lines `desc:`, `cmd:`,
//! `events: Ir I1mr ILmr Dr ...` naming the counters, then per-file/function/line cost lines,
//! and a final `summary: N N N ...` line holding the whole-run total of each event, in the
//! order of `events:`. Only `events:` and `summary:` are read; the per-line body is skipped.

use std::collections::BTreeMap;

/// A parse failure: 1-based line number and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number in the cachegrind output.
    pub line: usize,
    /// What was wrong with it.
    pub message: String,
}

/// Event name -> whole-run total, from the `events:` and `summary:` lines.
pub fn totals(text: &str) -> Result<BTreeMap<String, u64>, ParseError> {
    let mut events: Option<(usize, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        if let Some(rest) = line.strip_prefix("events:") {
            events = Some((lineno, rest.split_ascii_whitespace().collect()));
        } else if let Some(rest) = line.strip_prefix("summary:") {
            let Some((_, names)) = &events else {
                return Err(ParseError {
                    line: lineno,
                    message: "`summary:` before `events:`".into(),
                });
            };
            let values: Vec<&str> = rest.split_ascii_whitespace().collect();
            if values.len() != names.len() {
                return Err(ParseError {
                    line: lineno,
                    message: format!(
                        "`summary:` has {} values for {} events",
                        values.len(),
                        names.len()
                    ),
                });
            }
            let mut out = BTreeMap::new();
            for (name, v) in names.iter().zip(values) {
                let n: u64 = v.parse().map_err(|_| ParseError {
                    line: lineno,
                    message: format!("bad `summary:` value `{v}`"),
                })?;
                out.insert((*name).to_string(), n);
            }
            return Ok(out);
        }
    }
    Err(ParseError {
        line: text.lines().count().max(1),
        message: match events {
            None => "no `events:` line: not a cachegrind output".into(),
            Some(_) => "no `summary:` line (truncated output?)".into(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_values_follow_event_order() {
        // The totals are matched to the names of the `events:` line, in order.
        let t = totals("desc: x\nevents: Ir I1mr\nfl=a.c\n1 5 1\nsummary: 5 1\n").unwrap();
        assert_eq!(t.get("Ir"), Some(&5));
        assert_eq!(t.get("I1mr"), Some(&1));
    }

    #[test]
    fn truncated_file_is_an_error() {
        // A file cut before its summary names the last line.
        let e = totals("events: Ir I1mr\nfl=a.c\n1 5 1\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("summary"));
    }
}
