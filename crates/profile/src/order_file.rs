//! The function order: the result of `sediment order`, input of `sediment link`.
//!
//! It is linker-neutral: a list of [`FuncKey`]s, hottest layout position first. The linker
//! emitters turn it into what each linker reads (symbol names for lld, input-section names for
//! gold, a script for GNU ld) after checking every entry against the real object files.
//!
//! ```text
//! sediment-order 1
//! meta binary demo
//! meta algorithm c3
//! main -
//! helper unit07.c
//! ```
//!
//! Entries use the escaping of the profile format, so a name can never span lines.

use crate::format::{escape, unescape};
use crate::{Error, FuncKey};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// First token of an order file.
pub const ORDER_MAGIC: &str = "sediment-order";

/// An ordered list of functions with its metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionOrder {
    /// `meta` lines (`binary`, `algorithm`, ...), in key order.
    pub meta: BTreeMap<String, String>,
    /// The functions, first placed first. No key appears twice.
    pub functions: Vec<FuncKey>,
}

impl FunctionOrder {
    /// Writes the text form.
    pub fn to_text(&self) -> String {
        let mut out = format!("{ORDER_MAGIC} 1\n");
        for (k, v) in &self.meta {
            let _ = writeln!(out, "meta {} {}", escape(k), escape(v));
        }
        for f in &self.functions {
            let file = f.file.as_deref().map_or_else(|| "-".to_string(), escape);
            let _ = writeln!(out, "{} {}", escape(&f.name), file);
        }
        out
    }

    /// Parses the text form.
    pub fn from_text(text: &str) -> Result<FunctionOrder, Error> {
        let mut lines = text.split('\n').enumerate();
        match lines.next().map(|(_, l)| l.trim_end_matches('\r')) {
            Some(l) if l == format!("{ORDER_MAGIC} 1") => {}
            Some(l) if l.starts_with(ORDER_MAGIC) => {
                return Err(Error::UnsupportedVersion(
                    l[ORDER_MAGIC.len()..].trim().to_string(),
                ))
            }
            _ => {
                return Err(Error::Parse {
                    line: 1,
                    message: format!(
                        "not a sediment order file (first line must be `{ORDER_MAGIC} 1`)"
                    ),
                })
            }
        }
        let mut order = FunctionOrder::default();
        let mut seen = std::collections::HashSet::new();
        let mut last = 1;
        for (i, raw) in lines {
            last = i + 1;
            let err = |message: String| Error::Parse {
                line: i + 1,
                message,
            };
            let line = raw.trim_end_matches('\r');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let toks: Vec<&str> = line.split(' ').collect();
            if toks[0] == "meta" {
                if toks.len() != 3 || !order.functions.is_empty() {
                    return Err(err("`meta KEY VALUE` lines must come first".into()));
                }
                order.meta.insert(
                    unescape(toks[1]).map_err(&err)?,
                    unescape(toks[2]).map_err(&err)?,
                );
                continue;
            }
            if toks.len() != 2 {
                return Err(err("expected `NAME FILE`".into()));
            }
            let name = unescape(toks[0]).map_err(&err)?;
            if name.is_empty() {
                return Err(err("empty function name".into()));
            }
            let file = if toks[1] == "-" {
                None
            } else {
                Some(unescape(toks[1]).map_err(&err)?)
            };
            let key = FuncKey { name, file };
            if !seen.insert(key.clone()) {
                return Err(err(format!("`{key}` is listed twice")));
            }
            order.functions.push(key);
        }
        if !text.ends_with('\n') {
            return Err(Error::Parse {
                line: last,
                message: "file ends in the middle of a line (truncated?)".into(),
            });
        }
        Ok(order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let mut o = FunctionOrder::default();
        o.meta.insert("binary".into(), "demo".into());
        o.functions.push(FuncKey::global("main"));
        o.functions.push(FuncKey::local("helper x", "a.c"));
        let t = o.to_text();
        assert_eq!(
            t,
            "sediment-order 1\nmeta binary demo\nmain -\nhelper%20x a.c\n"
        );
        assert_eq!(FunctionOrder::from_text(&t).unwrap(), o);
        let dup = format!("{t}main -\n");
        assert!(matches!(
            FunctionOrder::from_text(&dup),
            Err(Error::Parse { line: 5, .. })
        ));
        assert!(FunctionOrder::from_text("garbage\n").is_err());
        assert!(FunctionOrder::from_text(&t[..t.len() - 1]).is_err());
    }
}
