//! The historical Sediment call graph (`.gv`): Graphviz DOT with one cluster per executable,
//! read into [`Profile`]s and written back, so users of the old tool can carry their graphs over
//! and anybody can look at a profile with `dot -Tsvg`.
//!
//! No specification of the old files survives, so this module defines the format, as the
//! subset of the DOT language (graphviz.org, "The DOT Language") that a Sediment writer emits,
//! one statement per line. `docs/design/profile-format.md` ("The historical .gv call graph") describes
//! it field by field:
//!
//! ```text
//! // sediment call graph: one cluster per executable, edge labels are shares of its call weight
//! digraph "sediment" {
//!   subgraph "cluster_0" {
//!     label="/usr/bin/demo";
//!     build_id="3f2a9c"; arch="x86_64"; event="cpu-clock"; total="12873";   (one per line)
//!     "0:main" [label="main", self="0", size="38"];
//!     "0:helper unit07.c" [label="helper", file="unit07.c", self="5210"];
//!     "0:main" -> "0:helper unit07.c" [label="0.600000000"];
//!   }
//! }
//! ```
//!
//! - A **cluster** is one executable or shared library: its `label` is the profile's `meta
//!   binary`; `build_id`, `arch`, `event` and `total` are the other metadata (optional).
//! - A **node** is a function. Its id is unique in the whole graph (DOT node ids are global, so
//!   two executables' `main` must differ): the cluster's number, `:`, the escaped name, and for
//!   a local function a space and the escaped file. The reader never takes the id apart; it only
//!   matches edge ends against declared nodes. `label` is the symbol name, or, when the writer
//!   demangles ([`write_with`]), the demangled name for people to read with the symbol name in
//!   `symbol` (the reader takes `symbol` when present), `file` the source file
//!   of a local (static) function, `self` the integer self weight, `size` the code bytes.
//! - An **edge** `caller -> callee` has `label` = the edge's share of the cluster's total call
//!   weight, a decimal fraction in `[0, 1]`.
//!
//! **Fractions and integers.** The writer turns weights into shares of exactly [`EDGE_SCALE`]
//! (10^9) units per cluster, written as `0.` and nine digits: each edge gets `weight * 10^9 /
//! total` rounded by the largest-remainder method (Hamilton apportionment; ties go to the edge
//! that comes first in canonical (caller, callee) order), so the units of a cluster always add
//! up to exactly 10^9. An edge whose share rounds to zero still gets one unit, taken from the
//! largest edge (first in canonical order on a tie), so no observed call disappears. The reader
//! reads a label's decimal digits exactly, as an integer number of 10^-9 units (digits beyond the
//! ninth are rounded half up), and that integer is the imported edge weight. So a cluster
//! written by Sediment imports with edge weights summing to 10^9, and writing that profile again
//! reproduces every label digit for digit: export -> import -> export is byte-identical. Self
//! weights and sizes are integers and travel unchanged. A label of zero (from other writers)
//! makes no edge, only the two functions.
//!
//! **Strings.** Every string is written in DOT double quotes, %-escaped as in the Sediment
//! profile format ([`sediment_profile::escape`]: bytes outside printable ASCII, space, `%`, `#`
//! become `%XX`), with `"` and `\` escaped the same way. So no name can end a string, break a
//! line, or reach Graphviz as an escape sequence (`\N`, `\l`), and the reader takes any `%XX`
//! back. The reader also accepts DOT's `\"` inside strings and bare identifiers.
//!
//! Hostile input: lines longer than [`MAX_LINE_LEN`] bytes are refused, nothing is allocated
//! from a number read in the file, every error names the file and the 1-based line, and an
//! unclosed cluster or graph is reported as a truncated file.
//!
//! Turned down: writing raw integer edge weights beside the fractions. It would make the round
//! trip trivial, but the old files have only fractions, and a reader that preferred a second
//! attribute would treat old and new files differently. Self weight, which the old files also
//! kept, was an integer attribute from the start.

use crate::Error;
use sediment_profile::{escape, unescape, FuncKey, Meta, Profile, ProfileBuilder};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

/// Value of `meta source` in profiles read from a `.gv` file.
pub const SOURCE: &str = "gv";
/// Units per cluster that edge labels are fractions of (nine decimal digits).
pub const EDGE_SCALE: u64 = 1_000_000_000;
/// Decimal digits written after `0.` in an edge label (`EDGE_SCALE` = 10^`LABEL_DIGITS`).
const LABEL_DIGITS: usize = 9;
/// Longest accepted line in bytes.
pub const MAX_LINE_LEN: usize = 1 << 20;
/// Longest string [`write()`] writes, in bytes between the quotes once escaped: Graphviz's
/// `dot` refuses a quoted string longer than 16384 bytes, so a name that would pass this is
/// refused ([`Error::NameTooLong`]) rather than written into a file `dot` cannot read. Lines
/// hold at most two strings, so a written line stays far below [`MAX_LINE_LEN`].
pub const MAX_STRING_LEN: usize = 16_000;

/// Escapes a string for use inside DOT double quotes: the profile escape plus `"` and `\`.
fn esc(s: &str) -> String {
    escape(s).replace('"', "%22").replace('\\', "%5C")
}

/// A DOT quoted string holding `s`, escaped.
fn quote(s: &str) -> String {
    format!("\"{}\"", esc(s))
}

/// The node id of `key` in cluster `cluster` (see the module docs).
fn node_id(cluster: usize, key: &FuncKey) -> String {
    match &key.file {
        Some(file) => format!("\"{cluster}:{} {}\"", esc(&key.name), esc(file)),
        None => format!("\"{cluster}:{}\"", esc(&key.name)),
    }
}

/// Splits `EDGE_SCALE` units over `weights` by the largest-remainder method, every positive
/// weight getting at least one unit (see the module docs for the tie-breaks).
pub fn apportion(weights: &[u64]) -> Vec<u64> {
    let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let scale = u128::from(EDGE_SCALE);
    let mut units: Vec<u64> = Vec::with_capacity(weights.len());
    let mut rema: Vec<(u128, usize)> = Vec::with_capacity(weights.len());
    for (i, &w) in weights.iter().enumerate() {
        let exact = u128::from(w) * scale;
        units.push((exact / total) as u64);
        rema.push((exact % total, i));
    }
    let given: u64 = units.iter().sum();
    let left = EDGE_SCALE - given;
    // Largest remainder first; on equal remainders the earlier edge.
    rema.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rema.iter().take(left as usize) {
        units[i] += 1;
    }
    // Every observed edge keeps at least one unit, taken from the currently largest edge (a
    // heap, so a graph of many tiny edges costs O(n log n), not O(n^2)).
    let mut heap: std::collections::BinaryHeap<(u64, std::cmp::Reverse<usize>)> = units
        .iter()
        .enumerate()
        .map(|(i, &u)| (u, std::cmp::Reverse(i)))
        .collect();
    for i in 0..units.len() {
        if weights[i] > 0 && units[i] == 0 {
            match heap.pop() {
                Some((u, std::cmp::Reverse(big))) if u > 1 => {
                    units[big] = u - 1;
                    heap.push((u - 1, std::cmp::Reverse(big)));
                    units[i] = 1;
                }
                // Cannot happen below 10^9 edges; leave the rest at zero then.
                _ => break,
            }
        }
    }
    units
}

/// Formats `units` (of `EDGE_SCALE`) as a decimal fraction: `0.012300000`, or `1.000000000`.
fn fraction(units: u64) -> String {
    format!(
        "{}.{:0width$}",
        units / EDGE_SCALE,
        units % EDGE_SCALE,
        width = LABEL_DIGITS
    )
}

/// A DOT quoted string holding a label for people to read (a demangled name): printable ASCII
/// other than `"`, `\\` and `%` as it is (spaces included, so Graphviz shows `f(int, char)`),
/// everything else %-escaped. Never read back as a name.
fn quote_shown(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if (' '..='~').contains(&c) && !matches!(c, '"' | '\\' | '%') {
            out.push(c);
        } else {
            out.push_str(&esc(c.encode_utf8(&mut [0; 4])));
        }
    }
    out.push('"');
    out
}

/// Writes the profiles as one `.gv` graph, one cluster per profile, in the order given, with
/// the symbol names as labels ([`write_with`] without demangling).
/// A name longer than [`MAX_STRING_LEN`] once escaped is refused ([`Error::NameTooLong`]).
pub fn write(profiles: &[Profile]) -> Result<String, Error> {
    write_with(profiles, false)
}

/// [`write()`], and with `demangle` a node whose name demangles ([`sediment_profile::demangle`])
/// gets the demangled name as its `label` and the symbol name in `symbol`, which the reader
/// takes as the name. A demangled label is at most [`sediment_profile::MAX_DEMANGLED`] bytes,
/// within [`MAX_STRING_LEN`].
pub fn write_with(profiles: &[Profile], demangle: bool) -> Result<String, Error> {
    for (index, p) in profiles.iter().enumerate() {
        let too_long = |what: &'static str, name: &str| {
            let len = quote(name).len() - 2;
            (len > MAX_STRING_LEN).then(|| Error::NameTooLong {
                index,
                what,
                name: sediment_profile::quote(name),
                len,
                limit: MAX_STRING_LEN,
            })
        };
        let m = &p.meta;
        let meta = [
            ("binary", Some(&m.binary)),
            ("build-id", m.build_id.as_ref()),
            ("architecture", m.arch.as_ref()),
            ("event", m.event.as_ref()),
        ];
        for (what, v) in meta {
            if let Some(e) = v.and_then(|v| too_long(what, v)) {
                return Err(e);
            }
        }
        for f in &p.functions {
            let file = f.key.file.as_deref().and_then(|v| too_long("file name", v));
            if let Some(e) = too_long("function name", &f.key.name).or(file) {
                return Err(e);
            }
        }
    }
    Ok(write_unchecked(profiles, demangle))
}

/// [`write_with`] without the length check.
fn write_unchecked(profiles: &[Profile], demangle: bool) -> String {
    let mut out = String::new();
    out.push_str(
        "// sediment call graph: one cluster per executable, edge labels are shares of its call weight\n",
    );
    out.push_str("digraph \"sediment\" {\n");
    for (c, p) in profiles.iter().enumerate() {
        let _ = writeln!(out, "  subgraph \"cluster_{c}\" {{");
        let _ = writeln!(out, "    label={};", quote(&p.meta.binary));
        let m = &p.meta;
        for (k, v) in [
            ("build_id", m.build_id.as_deref()),
            ("arch", m.arch.as_deref()),
            ("event", m.event.as_deref()),
        ] {
            if let Some(v) = v {
                let _ = writeln!(out, "    {k}={};", quote(v));
            }
        }
        let _ = writeln!(out, "    total=\"{}\";", m.total);
        let ids: Vec<String> = p.functions.iter().map(|f| node_id(c, &f.key)).collect();
        for (f, id) in p.functions.iter().zip(&ids) {
            match demangle.then(|| sediment_profile::demangle(&f.key.name)) {
                Some(std::borrow::Cow::Owned(shown)) => {
                    let _ = write!(
                        out,
                        "    {id} [label={}, symbol={}",
                        quote_shown(&shown),
                        quote(&f.key.name)
                    );
                }
                _ => {
                    let _ = write!(out, "    {id} [label={}", quote(&f.key.name));
                }
            }
            if let Some(file) = &f.key.file {
                let _ = write!(out, ", file={}", quote(file));
            }
            let _ = write!(out, ", self=\"{}\"", f.self_weight);
            if let Some(size) = f.size {
                let _ = write!(out, ", size=\"{size}\"");
            }
            out.push_str("];\n");
        }
        let weights: Vec<u64> = p.edges.iter().map(|e| e.weight).collect();
        for (e, units) in p.edges.iter().zip(apportion(&weights)) {
            let _ = writeln!(
                out,
                "    {} -> {} [label=\"{}\"];",
                ids[e.caller as usize],
                ids[e.callee as usize],
                fraction(units)
            );
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

/// One lexical token of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// A quoted string (DOT `\"` resolved) or a bare identifier/number.
    Str(String),
    /// One of `{ } [ ] = , ;`, or `->` as `>`.
    Punct(char),
}

/// Splits one line into tokens; `//` starts a comment.
fn lex(line: &str) -> Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '/' if line[i..].starts_with("//") => break,
            '#' if toks.is_empty() => break,
            '{' | '}' | '[' | ']' | '=' | ',' | ';' => {
                toks.push(Tok::Punct(c));
                chars.next();
            }
            '-' if line[i..].starts_with("->") => {
                toks.push(Tok::Punct('>'));
                chars.next();
                chars.next();
            }
            '"' => {
                chars.next();
                let mut s = String::new();
                let mut closed = false;
                while let Some((_, c)) = chars.next() {
                    match c {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' if chars.peek().map(|p| p.1) == Some('"') => {
                            s.push('"');
                            chars.next();
                        }
                        c => s.push(c),
                    }
                }
                if !closed {
                    return Err("unterminated string (strings cannot span lines)".into());
                }
                toks.push(Tok::Str(s));
            }
            c if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' => {
                let mut s = String::new();
                while let Some(&(_, c)) = chars.peek() {
                    if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' {
                        s.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                toks.push(Tok::Str(s));
            }
            c => return Err(format!("unexpected character `{}`", c.escape_default())),
        }
    }
    Ok(toks)
}

/// Parses an attribute list `[k=v, k=v]` (the tokens after `[`, up to and with `]`).
fn attrs(toks: &[Tok]) -> Result<(BTreeMap<String, String>, usize), String> {
    let mut map = BTreeMap::new();
    let mut i = 0;
    loop {
        match toks.get(i) {
            Some(Tok::Punct(']')) => return Ok((map, i + 1)),
            Some(Tok::Punct(',' | ';')) => i += 1,
            Some(Tok::Str(k)) => {
                let (Some(Tok::Punct('=')), Some(Tok::Str(v))) = (toks.get(i + 1), toks.get(i + 2))
                else {
                    return Err(format!("attribute `{k}` has no `=VALUE`"));
                };
                if map.insert(k.clone(), v.clone()).is_some() {
                    return Err(format!("attribute `{k}` given twice"));
                }
                i += 3;
            }
            _ => return Err("unterminated attribute list (missing `]`)".into()),
        }
    }
}

/// Reads an edge label as units of `1 / EDGE_SCALE`: exact decimal, extra digits rounded half up.
fn parse_fraction(s: &str) -> Result<u64, String> {
    let bad = || format!("edge label `{s}` is not a fraction between 0 and 1");
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let int = int.trim_start_matches('0');
    if !(int.is_empty() || int == "1") || (int == "1" && frac.bytes().any(|b| b != b'0')) {
        return Err(bad());
    }
    let mut units = if int == "1" { EDGE_SCALE } else { 0 };
    let digits = frac.as_bytes();
    let mut place = EDGE_SCALE / 10;
    for &d in digits.iter().take(LABEL_DIGITS) {
        units += u64::from(d - b'0') * place;
        place /= 10;
    }
    if digits.get(LABEL_DIGITS).is_some_and(|&d| d >= b'5') {
        units += 1;
    }
    Ok(units.min(EDGE_SCALE))
}

/// Decodes a %-escaped string value.
fn decode(v: &str, what: &str) -> Result<String, String> {
    unescape(v).map_err(|e| format!("{what}: {e}"))
}

/// A cluster being read.
struct Cluster {
    meta: Meta,
    /// Whether the cluster's `label` (the binary) was given.
    labelled: bool,
    builder: ProfileBuilder,
    /// Node id -> function.
    keys: HashMap<String, FuncKey>,
    /// Functions declared so far (a function may not be declared under two ids).
    declared: HashSet<FuncKey>,
}

/// Reads a `.gv` file held in `text`; `path` names it in errors. Returns one canonical profile
/// per cluster, in the order of the clusters in the file (the first is the main executable).
pub fn read(path: &str, text: &str) -> Result<Vec<Profile>, Error> {
    let err = |line: usize, message: String| Error::Syntax {
        path: path.to_string(),
        line,
        message,
    };
    if !text.is_empty() && !text.ends_with('\n') {
        let line = text.lines().count();
        return Err(err(
            line,
            "file ends in the middle of a line (truncated?)".into(),
        ));
    }
    let mut profiles = Vec::new();
    let mut in_graph = false;
    let mut graph_done = false;
    let mut cluster: Option<Cluster> = None;
    let mut last = 0;
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        last = n;
        if line.len() > MAX_LINE_LEN {
            return Err(err(n, format!("line longer than {MAX_LINE_LEN} bytes")));
        }
        let toks = lex(line).map_err(|m| err(n, m))?;
        let toks = match toks.last() {
            Some(Tok::Punct(';')) => &toks[..toks.len() - 1],
            _ => &toks[..],
        };
        if toks.is_empty() {
            continue;
        }
        if graph_done {
            return Err(err(n, "text after the end of the graph".into()));
        }
        let word = |i: usize| match toks.get(i) {
            Some(Tok::Str(s)) => Some(s.as_str()),
            _ => None,
        };
        if !in_graph {
            if word(0) != Some("digraph") || toks.last() != Some(&Tok::Punct('{')) {
                return Err(err(
                    n,
                    "expected `digraph NAME {` (not a .gv call graph)".into(),
                ));
            }
            in_graph = true;
            continue;
        }
        if toks == [Tok::Punct('}')] {
            match cluster.take() {
                Some(c) if !c.labelled => {
                    return Err(err(
                        n,
                        "cluster has no label (the binary it describes)".into(),
                    ));
                }
                Some(c) => {
                    let mut b = c.builder;
                    *b.meta_mut() = c.meta;
                    profiles.push(b.build());
                }
                None => graph_done = true,
            }
            continue;
        }
        let Some(c) = cluster.as_mut() else {
            if word(0) == Some("subgraph") && toks.len() == 3 && toks[2] == Tok::Punct('{') {
                cluster = Some(Cluster {
                    meta: Meta {
                        source: SOURCE.to_string(),
                        ..Meta::default()
                    },
                    labelled: false,
                    builder: ProfileBuilder::default(),
                    keys: HashMap::new(),
                    declared: HashSet::new(),
                });
                continue;
            }
            // Graph-wide attributes (`rankdir=LR`, `node [shape=box]`) are allowed and ignored.
            if toks.get(1) == Some(&Tok::Punct('='))
                || matches!(word(0), Some("graph" | "node" | "edge"))
            {
                continue;
            }
            return Err(err(n, "expected `subgraph \"cluster_N\" {` or `}`".into()));
        };
        // Inside a cluster: `key=value`, a node, an edge, or ignored defaults.
        match toks {
            [Tok::Str(k), Tok::Punct('='), Tok::Str(v)] => {
                let v = decode(v, k).map_err(|m| err(n, m))?;
                let m = &mut c.meta;
                match k.as_str() {
                    "label" => {
                        m.binary = v;
                        c.labelled = true;
                    }
                    "build_id" => m.build_id = Some(v),
                    "arch" => m.arch = Some(v),
                    "event" => m.event = Some(v),
                    "total" => {
                        m.total = v
                            .parse()
                            .map_err(|_| err(n, format!("total `{v}` is not a number")))?;
                    }
                    _ => {}
                }
            }
            [Tok::Str(kw), Tok::Punct('['), ..]
                if matches!(kw.as_str(), "graph" | "node" | "edge") => {}
            [Tok::Str(id), Tok::Punct('['), rest @ ..] => {
                let (a, used) = attrs(rest).map_err(|m| err(n, m))?;
                if used != rest.len() {
                    return Err(err(n, "text after the attribute list".into()));
                }
                let (name, attr) = match a.get("symbol") {
                    Some(symbol) => (symbol, "symbol"),
                    None => (
                        a.get("label")
                            .ok_or_else(|| err(n, format!("node `{id}` has no label")))?,
                        "label",
                    ),
                };
                let name = decode(name, attr).map_err(|m| err(n, m))?;
                let key = match a.get("file") {
                    Some(f) => FuncKey::local(name, &decode(f, "file").map_err(|m| err(n, m))?),
                    None => FuncKey::global(name),
                };
                let number = |attr: &str| -> Result<Option<u64>, Error> {
                    a.get(attr)
                        .map(|v| {
                            v.parse::<u64>().map_err(|_| {
                                err(n, format!("{attr} `{v}` is not a non-negative integer"))
                            })
                        })
                        .transpose()
                };
                let self_weight = number("self")?.unwrap_or(0);
                let size = number("size")?;
                if !c.declared.insert(key.clone()) {
                    return Err(err(n, format!("function `{key}` declared twice")));
                }
                if c.keys.insert(id.clone(), key.clone()).is_some() {
                    return Err(err(n, format!("node `{id}` declared twice")));
                }
                c.builder.add_self(&key, self_weight);
                if let Some(s) = size {
                    c.builder.set_size(&key, s);
                }
            }
            [Tok::Str(a), Tok::Punct('>'), Tok::Str(b), Tok::Punct('['), rest @ ..] => {
                let (at, used) = attrs(rest).map_err(|m| err(n, m))?;
                if used != rest.len() {
                    return Err(err(n, "text after the attribute list".into()));
                }
                let end = |id: &str| {
                    c.keys
                        .get(id)
                        .cloned()
                        .ok_or_else(|| err(n, format!("edge names undeclared node `{id}`")))
                };
                let (caller, callee) = (end(a)?, end(b)?);
                let label = at
                    .get("label")
                    .ok_or_else(|| err(n, "edge has no label".into()))?;
                let units = parse_fraction(label).map_err(|m| err(n, m))?;
                c.builder.add_call(&caller, &callee, units);
            }
            _ => return Err(err(n, "expected `KEY=VALUE;`, a node or an edge".into())),
        }
    }
    if !graph_done {
        return Err(err(
            last,
            if in_graph {
                "graph not closed (missing `}`; truncated?)".into()
            } else {
                "empty file (not a .gv call graph)".into()
            },
        ));
    }
    Ok(profiles)
}

#[cfg(test)]
mod tests {

    #[test]
    fn demangled_labels_keep_the_symbol_name() {
        // With demangling, a C++ node shows `ns::f(int, char)` and carries its symbol name,
        // which the reader takes back; a C name is written as before.
        let mut b = ProfileBuilder::new(Meta::default());
        b.add_call(&FuncKey::global("main"), &FuncKey::global("_ZN2ns1fEic"), 3);
        let p = b.build();
        let text = write_with(std::slice::from_ref(&p), true).unwrap();
        assert!(
            text.contains(r#"[label="ns::f(int, char)", symbol="_ZN2ns1fEic""#),
            "{text}"
        );
        assert!(text.contains(r#""0:main" [label="main","#), "{text}");
        let back = read("d.gv", &text).unwrap();
        let names = |q: &Profile| {
            q.functions
                .iter()
                .map(|f| f.key.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&back[0]), names(&p));
        assert_eq!(
            write(std::slice::from_ref(&p)).unwrap(),
            write_with(&[p], false).unwrap()
        );
    }
    use super::*;

    fn sample() -> Profile {
        let mut b = ProfileBuilder::new(Meta {
            binary: "/bin/demo \"x\"".into(),
            arch: Some("x86_64".into()),
            event: Some("Ir".into()),
            total: 90,
            source: "callgrind".into(),
            ..Meta::default()
        });
        b.add_self(&FuncKey::global("main"), 10);
        b.add_self(&FuncKey::local("helper", "a.c"), 50);
        b.add_self(&FuncKey::global("we\nird\\N"), 5);
        b.set_size(&FuncKey::global("main"), 64);
        b.add_call(
            &FuncKey::global("main"),
            &FuncKey::local("helper", "a.c"),
            2,
        );
        b.add_call(&FuncKey::global("main"), &FuncKey::global("we\nird\\N"), 1);
        b.build()
    }

    // Shares add up to exactly 10^9, the larger remainder wins, tiny edges keep one unit.
    #[test]
    fn apportion_sums_to_scale() {
        assert_eq!(apportion(&[2, 1]), vec![666_666_667, 333_333_333]);
        assert_eq!(apportion(&[1, 1]), vec![500_000_000, 500_000_000]);
        assert_eq!(
            apportion(&[1, 1, 1]),
            vec![333_333_334, 333_333_333, 333_333_333]
        );
        assert_eq!(apportion(&[u64::MAX, 1]), vec![EDGE_SCALE - 1, 1]);
        assert_eq!(apportion(&[]), Vec::<u64>::new());
        assert_eq!(
            apportion(&[u64::MAX, 1, 1, u64::MAX]),
            vec![EDGE_SCALE / 2 - 1, 1, 1, EDGE_SCALE / 2 - 1]
        );
        // Already in units: unchanged (what makes the round trip exact).
        assert_eq!(
            apportion(&[600_000_000, 400_000_000]),
            vec![600_000_000, 400_000_000]
        );
    }

    #[test]
    fn fractions_read_exactly() {
        assert_eq!(parse_fraction("0.6"), Ok(600_000_000));
        assert_eq!(parse_fraction("0.0123"), Ok(12_300_000));
        assert_eq!(parse_fraction("1"), Ok(EDGE_SCALE));
        assert_eq!(parse_fraction("1.000"), Ok(EDGE_SCALE));
        assert_eq!(parse_fraction(".5"), Ok(500_000_000));
        assert_eq!(parse_fraction("0.0000000015"), Ok(2));
        assert!(parse_fraction("1.5").is_err());
        assert!(parse_fraction("2").is_err());
        assert!(parse_fraction("-0.1").is_err());
        assert!(parse_fraction("0.1e3").is_err());
        assert!(parse_fraction(".").is_err());
    }

    // Write, read, write again: the same bytes; names with quotes and newlines survive.
    #[test]
    fn round_trip_is_byte_identical() {
        let first = write(&[sample()]).unwrap();
        let back = read("t.gv", &first).unwrap();
        assert_eq!(back.len(), 1);
        let p = &back[0];
        assert!(p.is_canonical());
        assert_eq!(p.meta.binary, "/bin/demo \"x\"");
        assert_eq!(p.meta.source, SOURCE);
        assert_eq!(p.self_total(), 65);
        assert!(p.find(&FuncKey::global("we\nird\\N")).is_some());
        let w: Vec<u64> = p.edges.iter().map(|e| e.weight).collect();
        assert_eq!(w, vec![666_666_667, 333_333_333]);
        assert_eq!(write(&back).unwrap(), first);
        assert!(!first.contains('\\'), "{first}");
    }

    #[test]
    fn errors_name_the_line() {
        let good = write(&[sample()]).unwrap();
        let msg = |t: &str| read("x.gv", t).unwrap_err().to_string();
        // Cut after the second line.
        let cut: String = good.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            msg(&cut),
            "x.gv: line 3: graph not closed (missing `}`; truncated?)"
        );
        assert!(msg(&good[..good.len() - 3]).contains("truncated"));
        let bad = good.replace("[label=\"0.6", "[label=\"7.6");
        assert!(msg(&bad).starts_with("x.gv: line"), "{}", msg(&bad));
        assert_eq!(msg(""), "x.gv: line 0: empty file (not a .gv call graph)");
        assert!(msg("graph {\n}\n").contains("not a .gv"));
        assert!(
            msg("digraph a {\n  subgraph \"c\" {\n    \"x [label=\"a\"];\n").contains("line 3")
        );
        let edge = "digraph a {\n subgraph c {\n label=x;\n \"a\" [label=\"a\"];\n \"a\" -> \"b\" [label=\"1\"];\n }\n}\n";
        assert_eq!(msg(edge), "x.gv: line 5: edge names undeclared node `b`");
        let unlabelled = "digraph a {\n subgraph c {\n }\n}\n";
        assert_eq!(
            msg(unlabelled),
            "x.gv: line 3: cluster has no label (the binary it describes)"
        );
        let twice = "digraph a {\n subgraph c {\n a [label=\"f\"];\n b [label=\"f\"];\n }\n}\n";
        assert_eq!(msg(twice), "x.gv: line 4: function `f` declared twice");
    }

    // Hand-written DOT of the old style: bare ids, short labels, comments.
    #[test]
    fn reads_hand_written_graph() {
        let text = "digraph G {\n  rankdir=LR;\n  subgraph cluster_app {\n    label=\"app\"; // comment\n    main [label=\"main\", self=\"3\"];\n    f [label=\"f\", file=\"f.c\"];\n    main -> f [label=\"0.25\"];\n    main -> main [label=\"0\"];\n  }\n}\n";
        let ps = read("h.gv", text).unwrap();
        assert_eq!(ps[0].meta.binary, "app");
        assert_eq!(
            ps[0].named_edges(),
            vec![("main".to_string(), "f (f.c)".to_string(), 250_000_000)]
        );
    }

    // A name that a Graphviz string cannot hold is refused, naming what it is; one at the
    // limit is written, and read back.
    #[test]
    fn names_longer_than_a_graphviz_string_are_refused() {
        let mut p = sample();
        p.functions[0].key.name = "f".repeat(MAX_STRING_LEN);
        let text = write(std::slice::from_ref(&p)).unwrap();
        assert_eq!(
            read("t.gv", &text).unwrap()[0].functions.len(),
            p.functions.len()
        );
        p.functions[0].key.name.push('g');
        let e = write(&[sample(), p]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NameTooLong {
                    index: 1,
                    what: "function name",
                    ..
                }
            ),
            "{e}"
        );
    }
}
