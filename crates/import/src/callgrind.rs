//! Importer for valgrind callgrind output (`callgrind.out.PID`): one [`Profile`] per object.
//!
//! The format is specified in the Valgrind manual, chapter "Callgrind Format Specification"
//! (`docs/manual/cl-format.html`, format version 1). A file is a list of *parts* (one per
//! dump; `--combine-dumps=yes` or `--dump-every-bb` put several in one file, and
//! `--separate-threads=yes` writes one file per thread). Each part is a header of `key: value`
//! lines followed by a body:
//!
//! - `positions: instr line` names the *subposition* columns that open every cost line
//!   (default `line`; `--dump-instr=yes` gives `instr line`), and `events: Ir ...` names the
//!   counter columns after them. A missing trailing counter is zero.
//! - `ob=`, `fl=`, `fi=`/`fe=` and `fn=` set the object, source file, inlined-code file and
//!   function that the following cost lines belong to. `cob=`, `cfi=`/`cfl=` and `cfn=` name
//!   the target of the next `calls=` line.
//! - **Name compression**: `fn=(7) main` defines id 7 and a later `fn=(7)` or `cfn=(7)` refers
//!   to it. There are three id spaces, matching what callgrind writes and KCachegrind reads:
//!   objects (`ob`, `cob`), files (`fl`, `fi`, `fe`, `cfi`, `cfl`, `jfi`) and functions (`fn`,
//!   `cfn`, `jfn`, `frfn`). A definition holds to the end of the file (a later part may
//!   define the id again); ids never carry over to another file.
//! - A cost line is the subpositions, each an absolute number (decimal or `0x` hex), `+N` or
//!   `-N` relative to the previous cost line, or `*` (unchanged), then the counters.
//! - `calls=COUNT TARGET` is followed by exactly one cost line whose counters are the
//!   **inclusive** cost of those calls. That cost is already counted in the callee's own cost
//!   lines, so it must not be added to the caller (doing so would count every callee twice).
//! - `jump=` / `jcnd=` (with `--collect-jumps=yes`) carry no cost.
//! - `totals:` closes a part with the sum of its cost lines; callgrind always writes it.
//!
//! What the importer makes of it: a function is `(object, fn name, fl base name)`. Its self
//! weight is the sum of the first event (`Ir`, instructions executed) over its cost lines, and
//! an edge `caller -> callee` weighs the exact call count summed over call sites, parts and
//! input files. An edge is kept only when both ends are in the same object: a profile
//! describes one binary, and a call into `libc.so.6` cannot be laid out by the executable's
//! linker. The callee still appears (possibly with zero weight) in its own object's profile.
//! The `fl=` base name goes into [`FuncKey::file`] as a *hint*; `bind` later keeps it only for
//! static functions. `'N` suffixes that callgrind appends to recursive activations
//! (`fib'2`) are dropped, so all levels count for the one function.
//!
//! Subposition values are checked for syntax but not decoded: a function-level profile needs
//! only which function a cost line belongs to. (Decoding them would also mean settling whether
//! the two lines of a call move the "previous position", which the spec does not say.)
//!
//! Names are kept as callgrind prints them. Valgrind demangles C++ and Rust names by default;
//! record with `--demangle=no` to get the symbol-table names the linker orders by.
//! `--separate-callers=N` context names (`a'main`) are not split and stay distinct functions.
//!
//! Hostile input: lines are capped at [`MAX_LINE_LEN`] bytes and compression ids at
//! [`MAX_ID`]; tables grow only with definitions actually present in the text, never from a
//! number read from it; counters add saturating. Every error names the file and line.
//! A file cut short is caught by the missing final newline, by a `calls=` line without its
//! cost line, by a missing `totals:` line in files whose `creator:` is callgrind, or by a
//! `totals:` that disagrees with the sum of the part's cost lines.
//!
//! Turned down: taking `meta total` from `summary:`/`totals:`. Those cover every object of the
//! run, while a profile describes one; each object's total is the sum of its own cost lines,
//! and the headers serve only as the consistency check above.

use crate::Error;
use sediment_profile::{base_name, FuncKey, Meta, Profile, ProfileBuilder};
use std::collections::{BTreeMap, HashMap};

/// Longest accepted line in bytes (C++ template names run to a few KiB; 1 MiB is far beyond).
pub const MAX_LINE_LEN: usize = 1 << 20;
/// Largest accepted name-compression id. Callgrind numbers names densely from 0 or 1 (one id per
/// distinct object, file and function of the run), so real files stay far below this.
pub const MAX_ID: u64 = 10_000_000;

/// Object name callgrind uses for code it could not attribute; also ours when a file has no
/// `ob=` line and no `cmd:` header to name the program.
const UNKNOWN: &str = "???";

/// One callgrind output file held in memory.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Path (or other name) used in error messages.
    pub path: &'a str,
    /// The whole text of the file.
    pub text: &'a str,
}

/// Reads one callgrind output file. Returns one canonical profile per object with cost, sorted
/// by object path.
pub fn read(text: &str, path_for_errors: &str) -> Result<Vec<Profile>, Error> {
    read_all(&[Input {
        path: path_for_errors,
        text,
    }])
}

/// Reads several callgrind output files of one run (for example the per-thread files of
/// `--separate-threads=yes`) and sums them. All files must count the same first event.
/// Returns one canonical profile per object with cost, sorted by object path.
pub fn read_all(inputs: &[Input<'_>]) -> Result<Vec<Profile>, Error> {
    let mut acc = Acc::default();
    for input in inputs {
        FileParser::new(input.path, &mut acc).parse(input.text)?;
    }
    Ok(acc.into_profiles())
}

/// Interned strings, so that the hot path (one cost line) works on small integers.
#[derive(Default)]
struct Interner {
    map: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.map.insert(s.to_string(), id);
        id
    }
}

/// A function as the importer keys it: interned object, name and `fl=` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FnRef {
    object: u32,
    name: u32,
    file: u32,
}

/// What all input files add up to.
#[derive(Default)]
struct Acc {
    strings: Interner,
    funcs: HashMap<FnRef, u32>,
    func_list: Vec<FnRef>,
    self_cost: Vec<u64>,
    edges: HashMap<(u32, u32), u64>,
    object_total: HashMap<u32, u64>,
    /// First event name of the first part read; every later part must agree.
    event: Option<String>,
    /// `cmd:` of the first file that has one.
    cmd: Option<String>,
}

impl Acc {
    fn func(&mut self, f: FnRef) -> u32 {
        if let Some(&i) = self.funcs.get(&f) {
            return i;
        }
        let i = self.func_list.len() as u32;
        self.func_list.push(f);
        self.self_cost.push(0);
        self.funcs.insert(f, i);
        i
    }

    fn key(&self, f: FnRef) -> FuncKey {
        let file = &self.strings.names[f.file as usize];
        FuncKey {
            name: self.strings.names[f.name as usize].clone(),
            file: if file.is_empty() || file == UNKNOWN {
                None
            } else {
                Some(base_name(file).to_string())
            },
        }
    }

    /// Groups functions and edges by object. The hash maps' iteration order does not reach
    /// the output: every [`ProfileBuilder`] sorts, and the list is sorted by object path.
    fn into_profiles(self) -> Vec<Profile> {
        // BTreeMap by object path: the returned list is sorted, whatever the input order.
        let mut builders: BTreeMap<&str, ProfileBuilder> = BTreeMap::new();
        for (&object, &total) in &self.object_total {
            if total == 0 {
                continue;
            }
            let mut meta = Meta {
                binary: self.strings.names[object as usize].clone(),
                source: "callgrind".to_string(),
                event: self.event.clone(),
                total,
                ..Meta::default()
            };
            if let Some(cmd) = &self.cmd {
                meta.extra.insert("cmd".to_string(), cmd.clone());
            }
            builders.insert(
                &self.strings.names[object as usize],
                ProfileBuilder::new(meta),
            );
        }
        for (i, f) in self.func_list.iter().enumerate() {
            let object = self.strings.names[f.object as usize].as_str();
            if let Some(b) = builders.get_mut(object) {
                b.add_self(&self.key(*f), self.self_cost[i]);
            }
        }
        for (&(caller, callee), &count) in &self.edges {
            let (a, c) = (
                self.func_list[caller as usize],
                self.func_list[callee as usize],
            );
            if a.object != c.object {
                continue;
            }
            let object = self.strings.names[a.object as usize].as_str();
            if let Some(b) = builders.get_mut(object) {
                b.add_call(&self.key(a), &self.key(c), count);
            }
        }
        builders.into_values().map(ProfileBuilder::build).collect()
    }
}

/// The three name-compression id spaces.
#[derive(Debug, Clone, Copy)]
enum Space {
    Object = 0,
    File = 1,
    Func = 2,
}

impl Space {
    fn label(self) -> &'static str {
        match self {
            Space::Object => "object",
            Space::File => "file",
            Space::Func => "function",
        }
    }
}

/// Parser state for one input file.
struct FileParser<'p> {
    path: &'p str,
    acc: &'p mut Acc,
    /// Compression id -> interned string, per [`Space`].
    names: [HashMap<u32, u32>; 3],
    line: usize,
    /// Subposition columns per cost line; `None` until the `events:` header of the first part.
    npos: usize,
    nevents: Option<usize>,
    /// True once the current part has a body line (a header line after it opens a new part).
    in_body: bool,
    /// Sum of the first event over the current part's cost lines, for the `totals:` check.
    part_cost: u64,
    part_has_totals: bool,
    /// The creator is callgrind, which always ends a part with `totals:`.
    expect_totals: bool,
    object: Option<u32>,
    fn_file: Option<u32>,
    pos_file: Option<u32>,
    func: Option<u32>,
    /// Index of the current function in [`Acc`], resolved lazily after a context change.
    cur: Option<u32>,
    call_object: Option<u32>,
    call_file: Option<u32>,
    call_func: Option<u32>,
    /// Line of a `calls=` whose inclusive cost line must come next.
    pending_call: Option<usize>,
}

impl<'p> FileParser<'p> {
    fn new(path: &'p str, acc: &'p mut Acc) -> Self {
        FileParser {
            path,
            acc,
            names: Default::default(),
            line: 0,
            npos: 1,
            nevents: None,
            in_body: false,
            part_cost: 0,
            part_has_totals: false,
            expect_totals: false,
            object: None,
            fn_file: None,
            pos_file: None,
            func: None,
            cur: None,
            call_object: None,
            call_file: None,
            call_func: None,
            pending_call: None,
        }
    }

    fn err(&self, message: impl Into<String>) -> Error {
        Error::Syntax {
            path: self.path.to_string(),
            line: self.line,
            message: message.into(),
        }
    }

    fn parse(mut self, text: &str) -> Result<(), Error> {
        if text.is_empty() {
            return Err(Error::Format {
                path: self.path.to_string(),
                message: "empty file, not callgrind output".to_string(),
            });
        }
        let complete = text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(text);
        let mut lines = body.split('\n').peekable();
        while let Some(raw) = lines.next() {
            self.line += 1;
            if !complete && lines.peek().is_none() {
                // Checked before parsing: a cut line would otherwise read as a bad token.
                return Err(self.err("file ends in the middle of a line (truncated?)"));
            }
            if raw.len() > MAX_LINE_LEN {
                return Err(self.err(format!("line longer than {MAX_LINE_LEN} bytes")));
            }
            if let Some(call_line) = self.pending_call.take() {
                let line = raw.strip_suffix('\r').unwrap_or(raw);
                if !is_cost_line(line) {
                    return Err(self.err(format!(
                        "expected the inclusive cost line of the `calls=` on line {call_line}"
                    )));
                }
                self.cost_line(line, true)?;
                continue;
            }
            self.parse_line(raw.strip_suffix('\r').unwrap_or(raw))?;
        }
        if let Some(call_line) = self.pending_call {
            return Err(self.err(format!(
                "file ends after the `calls=` on line {call_line} without its cost line (truncated?)"
            )));
        }
        if self.nevents.is_none() {
            return Err(Error::Format {
                path: self.path.to_string(),
                message: "no `events:` header (not callgrind output, or truncated)".to_string(),
            });
        }
        self.end_part()
    }

    /// Checks that a part that had to end with `totals:` did.
    fn end_part(&self) -> Result<(), Error> {
        if self.in_body && self.expect_totals && !self.part_has_totals {
            return Err(
                self.err("part has no `totals:` line, which callgrind always writes (truncated?)")
            );
        }
        Ok(())
    }

    fn parse_line(&mut self, line: &str) -> Result<(), Error> {
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(());
        }
        if is_cost_line(line) {
            return self.cost_line(line, false);
        }
        let key_len = line
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let (key, rest) = line.split_at(key_len);
        if key_len > 0 && rest.starts_with(':') {
            return self.header(key, rest[1..].trim_matches([' ', '\t']));
        }
        if key_len > 0 && rest.starts_with('=') {
            return self.body_spec(key, &rest[1..]);
        }
        Err(self.err(format!("not a callgrind line: `{}`", clip(line))))
    }

    fn header(&mut self, key: &str, value: &str) -> Result<(), Error> {
        if key == "totals" {
            return self.totals(value);
        }
        if self.in_body {
            // A header line after a body opens the next part (`--combine-dumps=yes`).
            self.end_part()?;
            self.in_body = false;
            self.part_cost = 0;
            self.part_has_totals = false;
            self.object = None;
            self.fn_file = None;
            self.pos_file = None;
            self.func = None;
            self.cur = None;
        }
        match key {
            "version" if value != "1" && value != "0" => {
                return Err(self.err(format!(
                    "unsupported callgrind format version `{}` (this reader knows 1)",
                    clip(value)
                )));
            }
            "creator" => self.expect_totals = value.starts_with("callgrind"),
            "cmd" if self.acc.cmd.is_none() && !value.is_empty() => {
                self.acc.cmd = Some(value.to_string());
            }
            "positions" => {
                let mut n = 0;
                for tok in value.split_ascii_whitespace() {
                    if !matches!(tok, "instr" | "bb" | "line") {
                        return Err(self.err(format!("unknown position kind `{}`", clip(tok))));
                    }
                    n += 1;
                }
                if n == 0 {
                    return Err(self.err("`positions:` names no position kind"));
                }
                self.npos = n;
            }
            "events" => {
                let mut names = value.split_ascii_whitespace();
                let first = names
                    .next()
                    .ok_or_else(|| self.err("`events:` names no event"))?;
                match &self.acc.event {
                    Some(e) if e != first => {
                        return Err(self.err(format!(
                            "first event is `{}`, but earlier input counted `{e}`",
                            clip(first)
                        )))
                    }
                    Some(_) => {}
                    None => self.acc.event = Some(first.to_string()),
                }
                self.nevents = Some(1 + names.count());
            }
            // pid, thread, part, desc, summary, event and unknown keys carry nothing we use;
            // the spec says unknown header keys are to be ignored.
            _ => {}
        }
        Ok(())
    }

    fn totals(&mut self, value: &str) -> Result<(), Error> {
        let first = value.split_ascii_whitespace().next().unwrap_or("0");
        let total = parse_number(first)
            .ok_or_else(|| self.err(format!("bad `totals:` value `{}`", clip(first))))?;
        if total != self.part_cost {
            return Err(self.err(format!(
                "`totals:` says {total} but the part's cost lines sum to {} (truncated or corrupt?)",
                self.part_cost
            )));
        }
        self.part_has_totals = true;
        self.in_body = true;
        Ok(())
    }

    fn require_events(&self) -> Result<usize, Error> {
        self.nevents
            .ok_or_else(|| self.err("body line before the `events:` header"))
    }

    fn body_spec(&mut self, key: &str, value: &str) -> Result<(), Error> {
        self.require_events()?;
        self.in_body = true;
        match key {
            "ob" => {
                self.object = Some(self.name(Space::Object, value)?);
                self.cur = None;
            }
            "fl" => {
                let f = self.name(Space::File, value)?;
                self.fn_file = Some(f);
                self.pos_file = Some(f);
                self.cur = None;
            }
            "fi" | "fe" => self.pos_file = Some(self.name(Space::File, value)?),
            "fn" => {
                self.func = Some(self.name(Space::Func, value)?);
                // Callgrind writes `fl=` before `fn=` when the file changes, so the
                // position file is the function's own file again.
                self.pos_file = self.fn_file;
                self.cur = None;
            }
            "cob" => self.call_object = Some(self.name(Space::Object, value)?),
            "cfi" | "cfl" => self.call_file = Some(self.name(Space::File, value)?),
            "cfn" => self.call_func = Some(self.name(Space::Func, value)?),
            // Jump targets and the caller of a context: only their name definitions matter.
            "jfi" => {
                self.name(Space::File, value)?;
            }
            "jfn" | "frfn" => {
                self.name(Space::Func, value)?;
            }
            "calls" => self.calls(value)?,
            "jump" => {
                let (count, target) = split_first(value);
                self.number(count, "jump count")?;
                self.subpositions(target, "jump target")?;
            }
            "jcnd" => {
                // Callgrind writes `jcnd=EXE/JUMPS TARGET`; the spec's grammar has a space.
                let (counts, mut target) = split_first(value);
                let (exe, jumps) = match counts.split_once('/') {
                    Some(pair) => pair,
                    None => {
                        let (jumps, t) = split_first(target);
                        target = t;
                        (counts, jumps)
                    }
                };
                self.number(exe, "jcnd execution count")?;
                self.number(jumps, "jcnd jump count")?;
                self.subpositions(target, "jcnd target")?;
            }
            // `ln=` (with --dump-bbs) and `rec=` (recursion level) carry no cost.
            "ln" | "rec" => {}
            _ => return Err(self.err(format!("unknown body line `{}=`", clip(key)))),
        }
        Ok(())
    }

    /// `calls=COUNT TARGET`: records the edge; the next line is its inclusive cost.
    fn calls(&mut self, value: &str) -> Result<(), Error> {
        let (count, target) = split_first(value);
        let count = self.number(count, "call count")?;
        self.subpositions(target, "call target")?;
        let caller = self.current()?;
        let callee_name = self
            .call_func
            .take()
            .ok_or_else(|| self.err("`calls=` without a `cfn=` naming the callee"))?;
        let object = self.call_object.take().or(self.object);
        let file = self.call_file.take().or(self.pos_file);
        let callee = FnRef {
            object: self.object_or_default(object),
            name: callee_name,
            file: self.file_or_empty(file),
        };
        let callee = self.acc.func(callee);
        let slot = self.acc.edges.entry((caller, callee)).or_insert(0);
        *slot = slot.saturating_add(count);
        self.pending_call = Some(self.line);
        Ok(())
    }

    /// A cost line; `inclusive` is true for the line after `calls=`, whose cost is skipped.
    fn cost_line(&mut self, line: &str, inclusive: bool) -> Result<(), Error> {
        let nevents = self.require_events()?;
        self.in_body = true;
        let mut toks = line.split_ascii_whitespace();
        for _ in 0..self.npos {
            let tok = toks.next().ok_or_else(|| {
                self.err(format!("cost line has fewer than {} positions", self.npos))
            })?;
            if !is_subposition(tok) {
                return Err(self.err(format!("bad position `{}`", clip(tok))));
            }
        }
        let mut first = 0;
        let mut n = 0;
        for tok in toks {
            let v = self.number(tok, "cost")?;
            if n == 0 {
                first = v;
            }
            n += 1;
            if n > nevents {
                return Err(self.err(format!(
                    "cost line has more counters than the {nevents} events"
                )));
            }
        }
        if inclusive {
            return Ok(());
        }
        let f = self.current()?;
        let slot = &mut self.acc.self_cost[f as usize];
        *slot = slot.saturating_add(first);
        let object = self.acc.func_list[f as usize].object;
        let total = self.acc.object_total.entry(object).or_insert(0);
        *total = total.saturating_add(first);
        self.part_cost = self.part_cost.saturating_add(first);
        Ok(())
    }

    /// The function the current context (`ob=`, `fl=`, `fn=`) names.
    fn current(&mut self) -> Result<u32, Error> {
        if let Some(c) = self.cur {
            return Ok(c);
        }
        let name = self
            .func
            .ok_or_else(|| self.err("cost or call before any `fn=` line"))?;
        let f = FnRef {
            object: self.object_or_default(self.object),
            name,
            file: self.file_or_empty(self.fn_file),
        };
        let c = self.acc.func(f);
        self.cur = Some(c);
        Ok(c)
    }

    fn object_or_default(&mut self, object: Option<u32>) -> u32 {
        match object {
            Some(o) => o,
            None => {
                // No `ob=` (cachegrind-style input): the program of `cmd:` is the object.
                let program = self
                    .acc
                    .cmd
                    .as_deref()
                    .and_then(|c| c.split_ascii_whitespace().next())
                    .unwrap_or(UNKNOWN)
                    .to_string();
                self.acc.strings.intern(&program)
            }
        }
    }

    fn file_or_empty(&mut self, file: Option<u32>) -> u32 {
        match file {
            Some(f) => f,
            None => self.acc.strings.intern(""),
        }
    }

    /// Resolves a position name: `(ID) name` defines, `(ID)` refers, anything else is literal.
    fn name(&mut self, space: Space, value: &str) -> Result<u32, Error> {
        let value = value.trim_start_matches([' ', '\t']);
        let compressed =
            value.starts_with('(') && value[1..].starts_with(|c: char| c.is_ascii_digit());
        if !compressed {
            return self.define_literal(space, value);
        }
        let close = value
            .find(')')
            .ok_or_else(|| self.err(format!("unclosed `(` in {} name", space.label())))?;
        let digits = &value[1..close];
        let id = digits
            .parse::<u64>()
            .ok()
            .filter(|&id| id <= MAX_ID)
            .ok_or_else(|| {
                self.err(format!(
                    "bad {} id `({})` (ids are decimal, at most {MAX_ID})",
                    space.label(),
                    clip(digits)
                ))
            })? as u32;
        let rest = value[close + 1..].trim_matches([' ', '\t']);
        if rest.is_empty() {
            return self.names[space as usize].get(&id).copied().ok_or_else(|| {
                self.err(format!(
                    "unknown {} id ({id}) (used before its definition)",
                    space.label()
                ))
            });
        }
        let interned = self.define_literal(space, rest)?;
        self.names[space as usize].insert(id, interned);
        Ok(interned)
    }

    fn define_literal(&mut self, space: Space, name: &str) -> Result<u32, Error> {
        let name = name.trim_end_matches([' ', '\t']);
        if name.is_empty() {
            return Err(self.err(format!("empty {} name", space.label())));
        }
        let name = match space {
            Space::Func => strip_recursion_suffix(name),
            _ => name,
        };
        Ok(self.acc.strings.intern(name))
    }

    fn number(&self, tok: &str, what: &str) -> Result<u64, Error> {
        parse_number(tok).ok_or_else(|| self.err(format!("bad {what} `{}`", clip(tok))))
    }

    fn subpositions(&self, list: &str, what: &str) -> Result<(), Error> {
        let mut any = false;
        for tok in list.split_ascii_whitespace() {
            if !is_subposition(tok) {
                return Err(self.err(format!("bad {what} position `{}`", clip(tok))));
            }
            any = true;
        }
        if !any {
            return Err(self.err(format!("missing {what} position")));
        }
        Ok(())
    }
}

/// True for lines that start like a cost line: a subposition (digit, `+`, `-` or `*`).
fn is_cost_line(line: &str) -> bool {
    line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*'))
}

/// `Number | +Number | -Number | *`.
fn is_subposition(tok: &str) -> bool {
    if tok == "*" {
        return true;
    }
    let digits = tok
        .strip_prefix('+')
        .or_else(|| tok.strip_prefix('-'))
        .unwrap_or(tok);
    parse_number(digits).is_some()
}

/// Decimal digits or `0x` followed by hex digits, fitting in a u64.
fn parse_number(tok: &str) -> Option<u64> {
    if let Some(hex) = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    tok.parse().ok()
}

/// Splits off the first whitespace-separated token.
fn split_first(s: &str) -> (&str, &str) {
    let s = s.trim_start_matches([' ', '\t']);
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// `fib'2` -> `fib`: callgrind's marker for a recursion level (with `--separate-recs`).
fn strip_recursion_suffix(name: &str) -> &str {
    match name.rsplit_once('\'') {
        Some((base, level))
            if !base.is_empty()
                && !level.is_empty()
                && level.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// At most 60 characters of untrusted text for an error message.
fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` (named `t.out`) and returns the profiles' text forms by object.
    fn profiles(text: &str) -> BTreeMap<String, Profile> {
        read(text, "t.out")
            .unwrap()
            .into_iter()
            .map(|p| (p.meta.binary.clone(), p))
            .collect()
    }

    fn weight(p: &Profile, name: &str) -> u64 {
        let f = p.functions.iter().find(|f| f.key.name == name).unwrap();
        f.self_weight
    }

    fn call(p: &Profile, caller: &str, callee: &str) -> Option<u64> {
        let index = |n: &str| p.functions.iter().position(|f| f.key.name == n).unwrap() as u32;
        let (a, c) = (index(caller), index(callee));
        p.edges
            .iter()
            .find(|e| e.caller == a && e.callee == c)
            .map(|e| e.weight)
    }

    fn err(text: &str) -> String {
        read(text, "t.out").unwrap_err().to_string()
    }

    // The spec's compressed example: `(id)` refers back, file and function ids are separate
    // spaces (file 2 and function 2 differ), and inclusive costs stay out of self weights.
    #[test]
    fn name_compression_and_inclusive_cost() {
        let text = "events: Instructions\nob=/bin/x\nfl=(1) file1.c\nfn=(1) main\n16 20\n\
                    cfn=(2) func1\ncalls=1 50\n16 400\ncfi=(2) file2.c\ncfn=(3) func2\n\
                    calls=3 20\n16 400\nfn=(2)\n51 100\ncfi=(2)\ncfn=(3)\ncalls=2 20\n51 300\n\
                    fl=(2)\nfn=(3)\n20 700\n";
        let ps = profiles(text);
        let p = &ps["/bin/x"];
        assert_eq!(weight(p, "main"), 20);
        assert_eq!(weight(p, "func1"), 100);
        assert_eq!(weight(p, "func2"), 700);
        assert_eq!(p.meta.total, 820);
        assert_eq!(p.meta.event.as_deref(), Some("Instructions"));
        assert_eq!(call(p, "main", "func1"), Some(1));
        assert_eq!(call(p, "main", "func2"), Some(3));
        assert_eq!(call(p, "func1", "func2"), Some(2));
        let func2 = &p.functions[p
            .functions
            .iter()
            .position(|f| f.key.name == "func2")
            .unwrap()];
        assert_eq!(func2.key.file.as_deref(), Some("file2.c"));
        // func1 had no cfi=, so it lives in the caller's file.
        let func1 = &p.functions[p
            .functions
            .iter()
            .position(|f| f.key.name == "func1")
            .unwrap()];
        assert_eq!(func1.key.file.as_deref(), Some("file1.c"));
        assert_eq!(p.functions.len(), 3);
    }

    // Relative and `*` subpositions with two position columns: the cost is the third token.
    #[test]
    fn relative_positions_with_instr_and_line() {
        let text = "positions: instr line\nevents: ticks Dr\nob=/bin/x\nfl=a.c\nfn=func\n\
                    0x80001234 90 1 7\n+3 * 5\n-1 +1 6 2\n* -2\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(weight(p, "func"), 12);
        assert_eq!(p.meta.total, 12);
    }

    // A call's inclusive cost line is skipped even when it is the only cost of the caller.
    #[test]
    fn inclusive_cost_after_calls_is_not_self_cost() {
        let text = "events: Ir\nob=/bin/x\nfl=a.c\nfn=caller\ncfn=callee\ncalls=5 3\n1 1000\n\
                    fn=callee\n3 10\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(weight(p, "caller"), 0);
        assert_eq!(weight(p, "callee"), 10);
        assert_eq!(p.meta.total, 10);
        assert_eq!(call(p, "caller", "callee"), Some(5));
    }

    // A call into another object is not an edge of either profile, but the callee shows up in
    // its own object; an object without cost has no profile.
    #[test]
    fn cross_object_calls_are_dropped() {
        let text = "events: Ir\nob=(1) /bin/x\nfl=a.c\nfn=main\n1 5\ncob=(2) /lib/libc.so\n\
                    cfi=p.c\ncfn=printf\ncalls=2 0\n1 50\ncob=(3) /lib/empty.so\ncfn=nothing\n\
                    calls=1 0\n1 0\nob=(2)\nfl=p.c\nfn=printf\n0 50\n";
        let ps = profiles(text);
        assert_eq!(ps.keys().collect::<Vec<_>>(), ["/bin/x", "/lib/libc.so"]);
        assert!(ps["/bin/x"].edges.is_empty());
        assert_eq!(ps["/bin/x"].functions.len(), 1);
        assert_eq!(weight(&ps["/lib/libc.so"], "printf"), 50);
    }

    // Recursion levels (`fib'2`) fold into one function; a call between levels is a self call.
    #[test]
    fn recursion_suffix_is_dropped() {
        let text = "events: Ir\nob=/bin/x\nfl=a.c\nfn=(1) fib\n1 3\ncfn=(2) fib'2\ncalls=1 1\n\
                    1 9\nfn=(2)\n1 9\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(p.functions.len(), 1);
        assert_eq!(weight(p, "fib"), 12);
        assert_eq!(call(p, "fib", "fib"), Some(1));
    }

    // Unknown source files (`???`) give no file hint; names keep inner spaces.
    #[test]
    fn unknown_file_gives_no_hint() {
        let text = "events: Ir\nob=/bin/x\nfl=(1) ???\nfn=(1) operator new(unsigned long)\n0 4\n";
        let p = &profiles(text)["/bin/x"];
        assert_eq!(
            p.functions[0].key,
            FuncKey::global("operator new(unsigned long)")
        );
    }

    // Several parts in one file, each checked against its `totals:`, sum up.
    #[test]
    fn parts_sum_and_totals_are_checked() {
        let part = "events: Ir\nob=(1) /bin/x\nfl=(1) a.c\nfn=(1) f\n1 7\ntotals: 7\n";
        let text = format!("creator: callgrind-3.19.0\npart: 1\n{part}part: 2\n{part}");
        assert_eq!(weight(&profiles(&text)["/bin/x"], "f"), 14);
        let bad = "creator: callgrind-3.19.0\nevents: Ir\nob=/bin/x\nfn=f\n1 7\ntotals: 8\n";
        assert_eq!(
            err(bad),
            "t.out: line 6: `totals:` says 8 but the part's cost lines sum to 7 (truncated or corrupt?)"
        );
    }

    // A file written by callgrind and cut at a line boundary lacks its `totals:`.
    #[test]
    fn missing_totals_from_callgrind_is_truncation() {
        let text = "creator: callgrind-3.19.0\nevents: Ir\nob=/bin/x\nfn=f\n1 7\n";
        assert!(
            err(text).starts_with("t.out: line 5: part has no `totals:`"),
            "{}",
            err(text)
        );
    }

    // Every malformed input names the file and line.
    #[test]
    fn errors_name_file_and_line() {
        assert_eq!(err(""), "t.out: empty file, not callgrind output");
        assert_eq!(
            err("ob=/bin/x\n"),
            "t.out: line 1: body line before the `events:` header"
        );
        assert_eq!(
            err("events: Ir\nob=/bin/x\nfn=f\n1 2"),
            "t.out: line 4: file ends in the middle of a line (truncated?)"
        );
        assert_eq!(
            err("events: Ir\nfn=(4)\n"),
            "t.out: line 2: unknown function id (4) (used before its definition)"
        );
        assert_eq!(
            err("events: Ir\nfn=(99999999999) f\n"),
            "t.out: line 2: bad function id `(99999999999)` (ids are decimal, at most 10000000)"
        );
        assert_eq!(
            err("events: Ir\nfn=f\ncfn=g\ncalls=1 2\nfn=g\n"),
            "t.out: line 5: expected the inclusive cost line of the `calls=` on line 4"
        );
        assert_eq!(
            err("events: Ir\nfn=f\ncfn=g\ncalls=1 2\n"),
            "t.out: line 4: file ends after the `calls=` on line 4 without its cost line (truncated?)"
        );
        assert_eq!(
            err("events: Ir\nfn=f\n1 2 3\n"),
            "t.out: line 3: cost line has more counters than the 1 events"
        );
        assert_eq!(
            err("events: Ir\nfn=f\n1 x\n"),
            "t.out: line 3: bad cost `x`"
        );
        assert_eq!(
            err("events: Ir\n1 5\n"),
            "t.out: line 2: cost or call before any `fn=` line"
        );
        assert_eq!(
            err("hello world\n"),
            "t.out: line 1: not a callgrind line: `hello world`"
        );
        assert_eq!(
            err("# only a comment\n"),
            "t.out: no `events:` header (not callgrind output, or truncated)"
        );
    }

    // Files of one run must agree on the event they count.
    #[test]
    fn inputs_must_count_the_same_event() {
        let a = Input {
            path: "a.out",
            text: "events: Ir\nfn=f\n1 1\n",
        };
        let b = Input {
            path: "b.out",
            text: "events: Dr\nfn=f\n1 1\n",
        };
        assert_eq!(
            read_all(&[a, b]).unwrap_err().to_string(),
            "b.out: line 1: first event is `Dr`, but earlier input counted `Ir`"
        );
    }

    // Hex counters, tabs and CRLF line ends are accepted.
    #[test]
    fn hex_tabs_and_crlf() {
        let text = "events: Ir\r\nob=/bin/x\r\nfn=f\r\n0x10\t0x20\r\n";
        assert_eq!(weight(&profiles(text)["/bin/x"], "f"), 32);
    }

    const FIXTURE: &str = include_str!("../../../tests/fixtures/callgrind/threads.out-02");

    // The small real capture reads as expected before it is mutated below.
    #[test]
    fn fixture_reads() {
        let ps = read(FIXTURE, "threads.out-02").unwrap();
        let p = ps
            .iter()
            .find(|p| p.meta.binary.ends_with("/threads"))
            .unwrap();
        assert_eq!(call(p, "worker", "work"), Some(500));
        assert_eq!(call(p, "work", "leaf"), Some(1500));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        // Random byte edits of a real capture never panic: they parse or fail with an error.
        #[test]
        fn mutations_never_panic(
            edits in proptest::collection::vec((0usize..4096, 0u8..=255, 0u8..3), 1..8),
            cut in 0usize..4200,
        ) {
            let mut bytes = FIXTURE.as_bytes().to_vec();
            for (pos, byte, kind) in edits {
                let pos = pos % (bytes.len() + 1);
                match kind {
                    0 if pos < bytes.len() => bytes[pos] = byte,
                    1 => bytes.insert(pos, byte),
                    _ if pos < bytes.len() => { bytes.remove(pos); }
                    _ => {}
                }
            }
            bytes.truncate(cut.max(1));
            let text = String::from_utf8_lossy(&bytes);
            let _ = read(&text, "fuzz.out");
        }
    }
}
