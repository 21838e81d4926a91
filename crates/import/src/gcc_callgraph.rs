//! GCC's `-fcallgraph-info` call graphs (`.ci` files): a *static* profile, for code that cannot
//! be run under a profiler at all.
//!
//! With `-fcallgraph-info`, gcc (10 and later) writes, next to each object file, a `.ci` file
//! holding the call graph of that translation unit in the VCG text format of the old "Visualization
//! of Compiler Graphs" tool (Sander, 1995; GCC manual, "Developer Options"). What gcc 12 writes is
//! a small subset of VCG, one `graph` per file:
//!
//! ```text
//! graph: { title: "util.c"
//! node: { title: "util.c:helper" label: "helper\nutil.c:4:12\n16 bytes (static)\n0 dynamic objects" }
//! node: { title: "work" label: "work\nutil.c:11:5" }
//! edge: { sourcename: "work" targetname: "util.c:helper" label: "util.c:15:14" }
//! node: { title: "__indirect_call" label: "Indirect Call Placeholder" shape : ellipse }
//! edge: { sourcename: "work" targetname: "__indirect_call" label: "util.c:15:26" }
//! }
//! ```
//!
//! The grammar read here is VCG's: `key: value` attributes, where a value is a quoted string
//! (with `\n`, `\"` and `\\` escapes), a bare word (`ellipse`, a number) or a `{ ... }` block of
//! further attributes. Unknown attributes are ignored, so the stack-usage lines that
//! `-fcallgraph-info=su,da` adds to labels, or attributes a later gcc adds, do no harm.
//!
//! **Function identity.** A node's `title` is the function's assembler name (mangled for C++),
//! which is what the symbol table holds; the `label` starts with the printable (demangled) name
//! and is not used. The labels do not say whether a function is static, but the titles do: gcc
//! prefixes the title of a non-public function with the translation unit's main input file, as
//! given on the command line, and a colon (`util.c:helper`, `sub/ring.c:helper`), and the
//! graph's `title` is that same file name. So the rule is: a node title that starts with the
//! graph title followed by `:` is the static function named by the rest, keyed with the base
//! name of the graph title (which is also what the `STT_FILE` symbol holds, so the key matches
//! the binary's); any other title is a global. Callees defined in other translation units
//! (drawn `shape : ellipse`) are included as functions, so that `work` called from `main.c` and
//! defined in `util.c` is one function across the files.
//!
//! **Weights.** A static call graph has no counts. Each `edge` (one per call site) adds 1 to its
//! caller -> callee edge, so an edge's weight is the number of call sites; self weights are 0.
//! `meta event` is `static` and `meta confidence` is `low`, so that an ordering built from this
//! profile is known to rest on no measurement. Edges to gcc's `__indirect_call` placeholder
//! (calls through a pointer) name no callee: they are dropped and counted in
//! `meta indirect-calls`.
//!
//! Turned down: weighting call sites by loop depth (the static estimate gcc's own
//! `-fguess-branch-probability` makes). The `.ci` file does not carry it, and reading it from
//! `-fdump-ipa-profile` dumps would tie Sediment to gcc's unstable dump format.

use crate::Error;
use sediment_profile::{base_name, FuncKey, Meta, Profile, ProfileBuilder};

/// Value of `meta source` in profiles read from `.ci` files.
pub const SOURCE: &str = "gcc-callgraph";

/// Value of `meta event`: the weights count call sites, not executions.
pub const EVENT: &str = "static";

/// Title of the node gcc uses as the target of indirect calls.
pub const INDIRECT_CALL: &str = "__indirect_call";

/// Deepest `{ }` nesting accepted: gcc writes 2 (graph, then node/edge). The bound keeps hostile
/// input from exhausting the stack of the recursive parser.
const MAX_DEPTH: usize = 8;

/// One lexical token, with the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Open,
    Close,
    Colon,
    Str(String),
    Word(String),
}

/// An attribute value.
#[derive(Debug)]
enum Value {
    /// A quoted string or a bare word.
    Text(String),
    /// A `{ ... }` block.
    Block(Vec<Attr>),
}

/// `key: value`, with the line the key is on.
#[derive(Debug)]
struct Attr {
    key: String,
    line: usize,
    value: Value,
}

/// Splits VCG text into tokens; errors are `(line, message)`.
fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, (usize, String)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '{' => out.push((line, Token::Open)),
            '}' => out.push((line, Token::Close)),
            ':' => out.push((line, Token::Colon)),
            '"' => {
                let start = line;
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err((start, "unterminated string".into())),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(other) => {
                                if other == '\n' {
                                    line += 1;
                                }
                                s.push(other)
                            }
                            None => return Err((start, "unterminated string".into())),
                        },
                        Some(ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            s.push(ch)
                        }
                    }
                }
                out.push((start, Token::Str(s)));
            }
            _ => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '{' | '}' | ':' | '"') {
                        break;
                    }
                    w.push(n);
                    chars.next();
                }
                out.push((line, Token::Word(w)));
            }
        }
    }
    Ok(out)
}

/// Parses attributes from `tokens[*i..]` until a `}` (consumed) when `depth > 0`, or the end of
/// input at depth 0.
fn parse_attrs(
    tokens: &[(usize, Token)],
    i: &mut usize,
    depth: usize,
) -> Result<Vec<Attr>, (usize, String)> {
    let last_line = tokens.last().map_or(1, |t| t.0);
    let mut attrs = Vec::new();
    loop {
        let Some((line, tok)) = tokens.get(*i) else {
            if depth == 0 {
                return Ok(attrs);
            }
            return Err((last_line, "unexpected end of file: missing `}`".into()));
        };
        let line = *line;
        *i += 1;
        let key = match tok {
            Token::Close if depth > 0 => return Ok(attrs),
            Token::Word(w) => w.clone(),
            other => {
                return Err((line, format!("expected an attribute name, found {other:?}")));
            }
        };
        match tokens.get(*i) {
            Some((_, Token::Colon)) => *i += 1,
            _ => return Err((line, format!("expected `:` after `{key}`"))),
        }
        let value = match tokens.get(*i) {
            Some((_, Token::Str(s))) | Some((_, Token::Word(s))) => {
                *i += 1;
                Value::Text(s.clone())
            }
            Some((l, Token::Open)) => {
                if depth + 1 >= MAX_DEPTH {
                    return Err((*l, format!("blocks nested deeper than {MAX_DEPTH}")));
                }
                *i += 1;
                Value::Block(parse_attrs(tokens, i, depth + 1)?)
            }
            _ => return Err((line, format!("expected a value after `{key}:`"))),
        };
        attrs.push(Attr { key, line, value });
    }
}

/// The text value of attribute `key` in a block.
fn text<'a>(attrs: &'a [Attr], key: &str) -> Option<&'a str> {
    attrs.iter().find_map(|a| match &a.value {
        Value::Text(s) if a.key == key => Some(s.as_str()),
        _ => None,
    })
}

/// The key of a node title inside the graph titled `unit` (see the module docs).
pub fn key_of(title: &str, unit: &str) -> FuncKey {
    match title
        .strip_prefix(unit)
        .and_then(|rest| rest.strip_prefix(':'))
    {
        Some(name) if !unit.is_empty() && !name.is_empty() => FuncKey::local(name, base_name(unit)),
        _ => FuncKey::global(title),
    }
}

/// Reads `.ci` files, given as `(path, text)` pairs (the paths name them in errors), into one
/// profile of the program they were compiled into; `binary` becomes `meta binary`. [`Reader`]
/// does the same one file at a time.
pub fn read(files: &[(&str, &str)], binary: &str) -> Result<Profile, Error> {
    let mut reader = Reader::default();
    for &(path, src) in files {
        reader.add(path, src)?;
    }
    Ok(reader.finish(binary))
}

/// Reads `.ci` files one at a time into one call graph: the caller may drop each file's text
/// once it is added, so a run holds the parse of one file (several times its size) and the
/// graph so far, not every file's text and parse at once.
#[derive(Default)]
pub struct Reader {
    builder: ProfileBuilder,
    indirect: u64,
    units: usize,
}

impl Reader {
    /// Adds the file `path` holding `src`.
    pub fn add(&mut self, path: &str, src: &str) -> Result<(), Error> {
        let builder = &mut self.builder;
        let syntax = |(line, message): (usize, String)| Error::Syntax {
            path: path.to_string(),
            line,
            message,
        };
        let tokens = tokenize(src).map_err(syntax)?;
        let top = parse_attrs(&tokens, &mut 0, 0).map_err(syntax)?;
        drop(tokens);
        let mut graphs = 0usize;
        for g in &top {
            let Value::Block(items) = &g.value else {
                return Err(syntax((g.line, format!("expected `{}: {{`", g.key))));
            };
            if g.key != "graph" {
                return Err(syntax((
                    g.line,
                    format!("expected `graph:`, found `{}:`", g.key),
                )));
            }
            graphs += 1;
            let unit = text(items, "title")
                .ok_or_else(|| syntax((g.line, "graph without a title".into())))?;
            for item in items {
                let Value::Block(attrs) = &item.value else {
                    continue;
                };
                let need = |k: &str| {
                    text(attrs, k)
                        .ok_or_else(|| syntax((item.line, format!("{} without a {k}", item.key))))
                };
                match item.key.as_str() {
                    "node" => {
                        let title = need("title")?;
                        if title != INDIRECT_CALL {
                            builder.touch(&key_of(title, unit));
                        }
                    }
                    "edge" => {
                        let from = need("sourcename")?;
                        let to = need("targetname")?;
                        if from == INDIRECT_CALL || to == INDIRECT_CALL {
                            self.indirect += 1;
                        } else {
                            builder.add_call(&key_of(from, unit), &key_of(to, unit), 1);
                        }
                    }
                    "graph" => {
                        return Err(syntax((
                            item.line,
                            "nested graphs are not supported".into(),
                        )))
                    }
                    _ => {}
                }
            }
        }
        if graphs == 0 {
            return Err(Error::Format {
                path: path.to_string(),
                message: "no `graph:` block (not a gcc -fcallgraph-info file)".into(),
            });
        }
        self.units += graphs;
        Ok(())
    }

    /// The call graph of every file added, for `binary`.
    pub fn finish(self, binary: &str) -> Profile {
        let mut builder = self.builder;
        let mut meta = Meta {
            binary: binary.to_string(),
            source: SOURCE.to_string(),
            event: Some(EVENT.to_string()),
            ..Meta::default()
        };
        meta.extra.insert("confidence".into(), "low".into());
        meta.extra
            .insert("translation-units".into(), self.units.to_string());
        if self.indirect > 0 {
            meta.extra
                .insert("indirect-calls".into(), self.indirect.to_string());
        }
        *builder.meta_mut() = meta;
        builder.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = include_str!("../../../tests/fixtures/gcc_callgraph/main.ci");
    const UTIL: &str = include_str!("../../../tests/fixtures/gcc_callgraph/util.ci");
    const RING: &str = include_str!("../../../tests/fixtures/gcc_callgraph/sub/ring.ci");

    fn fixture() -> Profile {
        read(
            &[("main.ci", MAIN), ("util.ci", UTIL), ("sub/ring.ci", RING)],
            "prog",
        )
        .unwrap()
    }

    fn edges(p: &Profile) -> Vec<(String, String, u64)> {
        p.named_edges()
    }

    #[test]
    fn fixture_edges_count_call_sites() {
        // One weight per call site; the three static helpers stay apart; ring calls its helper twice.
        let p = fixture();
        assert_eq!(
            edges(&p),
            vec![
                ("main".to_string(), "helper (main.c)".to_string(), 1),
                ("main".to_string(), "printf".to_string(), 1),
                ("main".to_string(), "work".to_string(), 1),
                ("ring".to_string(), "helper (ring.c)".to_string(), 2),
                ("work".to_string(), "helper (util.c)".to_string(), 1),
            ]
        );
    }

    #[test]
    fn fixture_functions_and_meta() {
        // External callees are functions; the indirect-call placeholder is not, and is counted.
        let p = fixture();
        let names: Vec<String> = p.functions.iter().map(|f| f.key.to_string()).collect();
        assert_eq!(
            names,
            vec![
                "helper (main.c)",
                "helper (ring.c)",
                "helper (util.c)",
                "main",
                "printf",
                "ring",
                "work"
            ]
        );
        assert!(p
            .functions
            .iter()
            .all(|f| f.self_weight == 0 && f.size.is_none()));
        assert_eq!(p.meta.source, "gcc-callgraph");
        assert_eq!(p.meta.event.as_deref(), Some("static"));
        assert_eq!(p.meta.binary, "prog");
        let extra: Vec<(&str, &str)> = p
            .meta
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            extra,
            vec![
                ("confidence", "low"),
                ("indirect-calls", "1"),
                ("translation-units", "3")
            ]
        );
    }

    #[test]
    fn file_order_does_not_matter() {
        // The same files in another order give the identical profile text.
        let q = read(
            &[("sub/ring.ci", RING), ("util.ci", UTIL), ("main.ci", MAIN)],
            "prog",
        )
        .unwrap();
        assert_eq!(q.to_text(), fixture().to_text());
    }

    #[test]
    fn static_rule_needs_the_unit_prefix() {
        // Only the graph's own file name followed by a colon marks a static function.
        assert_eq!(
            key_of("sub/ring.c:helper", "sub/ring.c"),
            FuncKey::local("helper", "ring.c")
        );
        assert_eq!(
            key_of("k.cc:_ZL1gRN2ns1SE", "k.cc"),
            FuncKey::local("_ZL1gRN2ns1SE", "k.cc")
        );
        assert_eq!(
            key_of("other.c:helper", "x.c"),
            FuncKey::global("other.c:helper")
        );
        assert_eq!(key_of("x.c:", "x.c"), FuncKey::global("x.c:"));
        assert_eq!(key_of("work", "x.c"), FuncKey::global("work"));
    }

    #[test]
    fn bad_input_names_file_and_line() {
        // Each damage gives a one-line error with the file and the line of the failing structure.
        let cases = [
            (
                "graph: { title: \"a.c\"\nnode: { title: \"f }\n",
                2,
                "unterminated string",
            ),
            (
                "graph: { title: \"a.c\"\nnode: { label: \"f\" }\n}\n",
                2,
                "node without a title",
            ),
            (
                "graph: { title: \"a.c\"\nedge: { sourcename: \"f\" }\n}\n",
                2,
                "targetname",
            ),
            ("graph: { title: \"a.c\"\nnode { }\n}\n", 2, "expected `:`"),
            (
                "graph: { title: \"a.c\"\nnode: { title: \"f\" }\n",
                2,
                "missing `}`",
            ),
            (
                "graph: {\nnode: { title: \"f\" }\n}\n",
                1,
                "graph without a title",
            ),
            ("\n\nnode: { title: \"f\" }\n", 3, "expected `graph:`"),
            ("graph: { title: \"a.c\" } }\n", 1, "attribute name"),
        ];
        for (text, line, what) in cases {
            let e = read(&[("bad.ci", text)], "p").unwrap_err().to_string();
            assert!(e.starts_with(&format!("bad.ci: line {line}: ")), "{e}");
            assert!(e.contains(what), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = read(&[("e.ci", "  \n")], "p").unwrap_err().to_string();
        assert_eq!(
            e,
            "e.ci: no `graph:` block (not a gcc -fcallgraph-info file)"
        );
        let deep = "graph: ".to_string() + &"{ a: ".repeat(100);
        let e = read(&[("d.ci", &deep)], "p").unwrap_err().to_string();
        assert!(e.contains("nested deeper"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn mutated_fixture_never_panics(
            at in 0usize..4096,
            byte in proptest::prelude::any::<u8>(),
            cut in 0usize..4096,
        ) {
            // Any single-byte change or truncation gives a profile or an error, never a panic.
            for base in [MAIN, UTIL, RING] {
                let mut bytes = base.as_bytes().to_vec();
                let i = at % bytes.len();
                bytes[i] = byte;
                bytes.truncate(cut.min(bytes.len()));
                let text = String::from_utf8_lossy(&bytes);
                let _ = read(&[("m.ci", &text)], "p");
            }
        }
    }
}
