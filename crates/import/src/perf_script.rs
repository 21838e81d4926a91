//! Importer for the text that `perf script` prints, for users who only have that text (a
//! recording made elsewhere, or a `perf.data` this build's reader rejects).
//!
//! Two shapes are read, also mixed in one file (the output format is described in the Linux
//! tree, `tools/perf/Documentation/perf-script.txt`):
//!
//! 1. **Call graphs**, the default output for `perf record -g`: a header line per sample,
//!    `comm pid [cpu] time: period event:`, then one indented line per frame, leaf first,
//!    `addr sym+0xoff (dso)`, and a blank line after the sample. Without `-g` the one frame
//!    follows the event on the header line. A header is recognised by its time field (a token
//!    `seconds.micros:`); the event is the next token ending in `:`. Header-less output
//!    (`-F ip,sym,dso`) works when samples are separated by blank lines, as perf prints them
//!    with call chains.
//! 2. **Branch stacks**, `-F brstacksym` (optionally with `ip,sym`, `dso`): tokens
//!    `FROM/TO/P/-/-/0`, where each of FROM and TO is `sym+0xoff`, optionally followed by
//!    `(dso)` when the `dso` field is selected, and the third field is `M`, `P` or `-`; perf may
//!    append further fields, which are ignored. Raw-address entries (`-F brstack`, `0xFROM/0xTO`)
//!    cannot be attributed without the binary and its mappings and are counted as
//!    unsymbolized; a file whose entries are all raw is refused with a message saying what to
//!    print instead. An entry without `(dso)` belongs to the dso of its line's `ip sym (dso)`
//!    prefix, or else to a profile named [`UNKNOWN_DSO`]. perf 6.1 prints the first entry of a
//!    line glued to the field before it (`ADDRleft+0x4/...`, `(dso)left+0x4/...`); `unglue`
//!    puts the space back, and refuses `-F ip,sym,brstacksym`, where two symbol names touch.
//!    A line holding only the `ip` is a sample with an empty stack. Side-band lines
//!    (`PERF_RECORD_MMAP2 ...` of `--show-mmap-events`) are skipped.
//!
//! Weights. Call-graph samples follow the [`perf`](crate::perf) importer exactly, by [`Mode`]:
//! one unit of self weight to the leaf function per sample (the period is ignored), plus one on
//! the edge from its first caller ([`Mode::Leaf`]) or on every adjacent pair of the chain
//! ([`Mode::Chain`]); only pairs within one dso count, recursion is kept as a self edge, and a
//! sample whose leaf is in the kernel is not attributed (see the perf importer for why). The
//! leaf's `+0xoff`, where perf prints it, is also a per-instruction sample of weight 1
//! (`Profile::samples`, for `export --format fdata`), as the perf importer records the IP.
//! Branch entries follow the [`fdata`](crate::fdata) rule: one unit of self weight to the
//! target's function, and a branch to offset 0 of a function is a call edge.
//!
//! Function keys are names only (`perf script` does not say which file a static came from), so
//! every key is global; [`crate::bind`] can rewrite them against the binary. Symbols are taken
//! as perf printed them: record them with `perf script --no-demangle` so that C++ names are the
//! linker's names (a demangled name with spaces or parentheses cannot be read in a branch entry,
//! which has no delimiter around the symbol).
//!
//! Turned down: resolving raw `brstack` addresses through `--show-mmap-events` output. That is
//! re-implementing the perf.data importer on a lossy text form; use the perf.data file instead.

use crate::perf::Mode;
use crate::Error;
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};
use std::collections::BTreeMap;

/// Value of `meta source` in profiles read from `perf script` text.
pub const SOURCE: &str = "perf-script";

/// Binary name of the profile that receives branch entries whose dso is not printed.
pub const UNKNOWN_DSO: &str = "[unknown]";

/// Counts of what the importer saw and could not attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Call-graph samples.
    pub samples: u64,
    /// Samples whose leaf frame was in the kernel.
    pub kernel_samples: u64,
    /// Samples whose leaf frame was in no file (`[unknown]`, `[vdso]`, JIT code).
    pub unmapped_samples: u64,
    /// Samples in a file whose leaf had no symbol.
    pub unsymbolized_samples: u64,
    /// Branch-stack entries.
    pub branches: u64,
    /// Branch entries whose target had no symbol (raw addresses, `[unknown]`).
    pub unsymbolized_branches: u64,
}

/// The result of [`read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfScriptImport {
    /// One profile per dso that got weight, sorted by dso path.
    pub profiles: Vec<Profile>,
    /// What could not be attributed.
    pub stats: Stats,
}

/// One frame: symbol (None for `[unknown]`) and dso.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    sym: Option<String>,
    /// The frame's offset in its symbol (`sym+0xoff`), when printed.
    offset: Option<u64>,
    dso: String,
}

/// One end of a branch entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct End {
    sym: Option<String>,
    offset: Option<u64>,
    dso: Option<String>,
}

/// Per-dso accumulation.
#[derive(Default)]
struct Acc {
    builder: ProfileBuilder,
    total: u64,
}

struct State<'n> {
    mode: Mode,
    event: Option<String>,
    dsos: BTreeMap<String, Acc>,
    stats: Stats,
    /// One name per dso ([`read_with_names`]).
    dso_names: &'n mut dyn FnMut(&str) -> String,
}

impl State<'_> {
    fn acc(&mut self, dso: &str) -> &mut Acc {
        let dso = (self.dso_names)(dso);
        self.dsos.entry(dso).or_default()
    }

    fn finish_sample(&mut self, frames: &[Frame]) {
        let Some(leaf) = frames.first() else {
            return;
        };
        self.stats.samples += 1;
        if is_kernel(&leaf.dso) {
            self.stats.kernel_samples += 1;
            return;
        }
        if is_file(&leaf.dso) {
            let acc = self.acc(&leaf.dso);
            acc.total += 1;
            match &leaf.sym {
                Some(s) => {
                    let key = FuncKey::global(s.as_str());
                    acc.builder.add_self(&key, 1);
                    // The leaf's `+0xoff` is where the sample hit, as the perf.data importer
                    // records it (`Profile::samples`).
                    if let Some(offset) = leaf.offset {
                        acc.builder.add_sample(&key, offset, 1);
                    }
                }
                None => self.stats.unsymbolized_samples += 1,
            }
        } else {
            self.stats.unmapped_samples += 1;
        }
        let pairs = match self.mode {
            Mode::Leaf => frames.len().min(2).saturating_sub(1),
            Mode::Chain => frames.len() - 1,
        };
        for i in 0..pairs {
            // Frame i+1 called frame i.
            let (callee, caller) = (&frames[i], &frames[i + 1]);
            if callee.dso != caller.dso || !is_file(&caller.dso) {
                continue;
            }
            let (Some(a), Some(b)) = (&caller.sym, &callee.sym) else {
                continue;
            };
            let (a, b) = (FuncKey::global(a.as_str()), FuncKey::global(b.as_str()));
            self.acc(&caller.dso).builder.add_call(&a, &b, 1);
        }
    }

    fn branch(&mut self, from: &End, to: &End, line_dso: Option<&str>) {
        self.stats.branches += 1;
        let Some(to_sym) = &to.sym else {
            self.stats.unsymbolized_branches += 1;
            return;
        };
        let to_dso = to
            .dso
            .as_deref()
            .or(line_dso)
            .unwrap_or(UNKNOWN_DSO)
            .to_string();
        let from_dso = from.dso.as_deref().or(line_dso).unwrap_or(UNKNOWN_DSO);
        let from_key = from
            .sym
            .as_deref()
            .filter(|_| from_dso == to_dso)
            .map(FuncKey::global);
        let to_key = FuncKey::global(to_sym.as_str());
        // A missing offset cannot prove a call: it gets self weight only.
        let offset = to.offset.unwrap_or(1);
        let acc = self.acc(&to_dso);
        acc.total += 1;
        if let Some((a, b)) = crate::fdata::branch(
            &mut acc.builder,
            from_key.as_ref(),
            Some(&to_key),
            offset,
            1,
        ) {
            acc.builder.add_call(&a, &b, 1);
        }
    }
}

/// Reads `perf script` output held in `text`; `path` names it in errors.
pub fn read(path: &str, text: &str, mode: Mode) -> Result<PerfScriptImport, Error> {
    read_with_names(path, text, mode, &mut |dso: &str| dso.to_string())
}

/// [`read`], with every dso path passed through `dso_names`: dsos it maps to one string are
/// one profile. The caller maps the spellings of one file (`./lib.so`, `././lib.so`) to one
/// name, so that a stranger's text cannot make one binary many profiles, each read and bound
/// on its own.
pub fn read_with_names(
    path: &str,
    text: &str,
    mode: Mode,
    dso_names: &mut dyn FnMut(&str) -> String,
) -> Result<PerfScriptImport, Error> {
    let mut st = State {
        mode,
        event: None,
        dsos: BTreeMap::new(),
        stats: Stats::default(),
        dso_names,
    };
    let mut frames: Vec<Frame> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            st.finish_sample(&frames);
            frames.clear();
            continue;
        }
        // Side-band events (`--show-mmap-events`, `--show-task-events`...): nothing to weigh.
        if tokens(line)
            .take(8)
            .any(|(_, t)| t.starts_with("PERF_RECORD_"))
        {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(f) = parse_frame(line.trim()) {
                frames.push(f);
                continue;
            }
        }
        if let Some((event, rest)) = parse_header(line) {
            st.finish_sample(&frames);
            frames.clear();
            if st.event.is_none() && !event.is_empty() {
                st.event = Some(event.to_string());
            }
            let rest = rest.trim();
            if rest.is_empty() {
                continue;
            }
            if let Some(f) = parse_frame(rest) {
                frames.push(f);
                continue;
            }
            match branch_line(&mut st, &unglue(rest, false)) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(syntax(
                        path,
                        line_no,
                        "sample header followed by neither a frame nor branch entries",
                    ))
                }
                Err(message) => return Err(syntax(path, line_no, message)),
            }
            continue;
        }
        match branch_line(&mut st, &unglue(line, true)) {
            Ok(true) => {}
            Ok(false) => {
                return Err(syntax(
                    path,
                    line_no,
                    "not a sample header, a frame (`addr sym (dso)`) or branch entries (`from/to/P/...`)",
                ))
            }
            Err(message) => return Err(syntax(path, line_no, message)),
        }
    }
    st.finish_sample(&frames);
    if st.stats.samples == 0 && st.stats.branches == 0 {
        return Err(Error::Format {
            path: path.to_string(),
            message: "no samples or branch entries (not `perf script` output?)".into(),
        });
    }
    if st.stats.branches > 0 && st.stats.unsymbolized_branches == st.stats.branches {
        return Err(Error::Format {
            path: path.to_string(),
            message: "every branch entry is a raw address (`-F brstack`), which Sediment does not \
                      resolve from text: print `-F ip,sym,dso,brstacksym` instead, or import the \
                      perf.data itself (`--format perf`)"
                .into(),
        });
    }
    let event = st.event.clone();
    let profiles = st
        .dsos
        .into_iter()
        .filter(|(_, acc)| !acc.builder.is_empty())
        .map(|(dso, mut acc)| {
            let mut meta = Meta {
                binary: dso,
                source: SOURCE.to_string(),
                event: event.clone(),
                total: acc.total,
                ..Meta::default()
            };
            meta.extra.insert("mode".into(), mode.name().into());
            *acc.builder.meta_mut() = meta;
            acc.builder.build()
        })
        .collect();
    Ok(PerfScriptImport {
        profiles,
        stats: st.stats,
    })
}

fn syntax(path: &str, line: usize, message: &str) -> Error {
    Error::Syntax {
        path: path.to_string(),
        line,
        message: message.to_string(),
    }
}

/// Kernel (or guest kernel) code, as perf names it.
fn is_kernel(dso: &str) -> bool {
    dso.starts_with("[kernel") || dso.starts_with("[guest")
}

/// A file on disk, as opposed to perf's bracketed pseudo-dsos (`[unknown]`, `[vdso]`...).
fn is_file(dso: &str) -> bool {
    !dso.is_empty() && !dso.starts_with('[')
}

/// `sym+0xoff` -> (sym, Some(off)); a bare `sym` -> (sym, None).
fn split_offset(s: &str) -> (&str, Option<u64>) {
    if let Some(at) = s.rfind("+0x") {
        if let Ok(off) = u64::from_str_radix(&s[at + 3..], 16) {
            return (&s[..at], Some(off));
        }
    }
    (s, None)
}

/// Parses a trimmed frame `addr sym+0xoff (dso)`; the symbol may contain spaces.
fn parse_frame(s: &str) -> Option<Frame> {
    let (addr, rest) = s.split_once(' ')?;
    if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let rest = rest.trim_start().strip_suffix(')')?;
    let open = rest.rfind(" (")?;
    let dso = &rest[open + 2..];
    let sym = rest[..open].trim();
    if sym.is_empty() {
        return None;
    }
    let (name, offset) = split_offset(sym);
    let sym = (name != "[unknown]" && !name.is_empty()).then(|| name.to_string());
    Some(Frame {
        sym,
        offset,
        dso: dso.to_string(),
    })
}

/// Recognises a header by its `secs.micros:` time token; returns the event name and the text
/// after the event token.
fn parse_header(line: &str) -> Option<(&str, &str)> {
    let mut tokens = tokens(line);
    tokens.by_ref().find(|(_, t)| is_time(t))?;
    for (at, t) in tokens {
        if let Some(ev) = t.strip_suffix(':') {
            return Some((ev, &line[at + t.len()..]));
        }
        if !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
    }
    Some(("", ""))
}

fn is_time(t: &str) -> bool {
    let Some(t) = t.strip_suffix(':') else {
        return false;
    };
    let Some((s, us)) = t.split_once('.') else {
        return false;
    };
    !s.is_empty()
        && !us.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit())
        && us.bytes().all(|b| b.is_ascii_digit())
}

/// Whitespace-separated tokens with their byte offsets.
fn tokens(line: &str) -> impl Iterator<Item = (usize, &str)> {
    line.split([' ', '\t'])
        .scan(0usize, |pos, t| {
            let at = *pos;
            *pos += t.len() + 1;
            Some((at, t))
        })
        .filter(|(_, t)| !t.is_empty())
}

/// Width of the `ip` field at the start of a line as perf prints it (`" %16lx"`: a separator
/// space, then the address right-aligned in 16 columns).
const IP_WIDTH: usize = 17;

/// A line with the separators perf 6.1 leaves out put back, and whether the `ip` field was
/// glued to the first entry.
struct Unglued {
    line: String,
    ip_split: bool,
}

impl std::ops::Deref for Unglued {
    type Target = str;
    fn deref(&self) -> &str {
        &self.line
    }
}

/// perf 6.1 prints the first branch entry right after the field before it, without a space:
/// `5555555551e8left+0x4/...` (`-F ip,brstacksym`: the `ip` field, split off when
/// `line_start`), `(/bin/prog)left+0x4(/bin/prog)/...` (any `dso` field before
/// `brstacksym`: split after a `)` that is followed by a symbol), and `leafleft+0x4/...`
/// (`-F ip,sym,brstacksym`: cannot be split, see [`branch_line`]).
fn unglue(line: &str, line_start: bool) -> Unglued {
    let mut out = String::with_capacity(line.len() + 8);
    let mut ip_split = false;
    let mut rest = line;
    if line_start && line.starts_with(' ') {
        if let (Some(field), Some(next)) = (line.get(..IP_WIDTH), line.get(IP_WIDTH..)) {
            let digits = field.trim_start();
            if !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_hexdigit())
                && next.starts_with(|c: char| !c.is_whitespace())
            {
                out.push_str(field);
                out.push(' ');
                rest = next;
                ip_split = true;
            }
        }
    }
    let mut chars = rest.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        out.push(c);
        if c == ')' {
            if let Some(&(_, n)) = chars.peek() {
                if !n.is_whitespace() && n != '/' && n != ')' {
                    out.push(' ');
                }
            }
        }
    }
    Unglued {
        line: out.trim().to_string(),
        ip_split,
    }
}

/// Reads a line of branch entries, optionally after an `ip sym (dso)` prefix. `Ok(false)` when
/// it holds no entry at all; `Err` when the first entry cannot be told from the field before it.
fn branch_line(st: &mut State, line: &Unglued) -> Result<bool, &'static str> {
    let toks: Vec<(usize, &str)> = tokens(line).collect();
    let Some(first) = toks.iter().position(|(_, t)| parse_entry(t).is_some()) else {
        // `-F ip,brstacksym` of a sample whose stack is empty: the ip alone.
        let lone_ip =
            matches!(toks.as_slice(), [(_, ip)] if ip.bytes().all(|b| b.is_ascii_hexdigit()));
        return Ok(lone_ip);
    };
    let prefix = line[..toks[first].0].trim();
    // `ADDR symENTRY`: perf 6.1's `-F ip,sym,brstacksym` glues the sample's symbol to the first
    // entry's source symbol, and no rule can split two names.
    let ip_only = !prefix.is_empty() && prefix.bytes().all(|b| b.is_ascii_hexdigit());
    if ip_only && !line.ip_split && parse_entry(toks[first].1).is_some_and(|(f, _)| f.sym.is_some())
    {
        return Err(
            "the sample's symbol is glued to the first branch entry (perf prints \
                    `-F ip,sym,brstacksym` without a space): add the `dso` field \
                    (`-F ip,sym,dso,brstacksym`) or print `-F brstacksym` alone",
        );
    }
    let line_dso = if prefix.is_empty() {
        None
    } else {
        parse_frame(prefix).map(|f| f.dso)
    };
    for (_, t) in &toks[first..] {
        match parse_entry(t) {
            Some((from, to)) => st.branch(&from, &to, line_dso.as_deref()),
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// One end of an entry: `sym+0xoff`, `0xaddr` or `[unknown]`, then optional `(dso)`, then `/`.
fn parse_end(s: &str) -> Option<(End, &str)> {
    let cut = s.find(['(', '/'])?;
    let (sym, mut rest) = s.split_at(cut);
    if sym.is_empty() {
        return None;
    }
    let mut dso = None;
    if let Some(r) = rest.strip_prefix('(') {
        let close = r.find(')')?;
        dso = Some(r[..close].to_string());
        rest = &r[close + 1..];
    }
    let rest = rest.strip_prefix('/')?;
    let raw = sym
        .strip_prefix("0x")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()));
    let end = if raw || sym == "[unknown]" {
        End {
            sym: None,
            offset: None,
            dso,
        }
    } else {
        let (name, offset) = split_offset(sym);
        End {
            sym: Some(name.to_string()),
            offset,
            dso,
        }
    };
    Some((end, rest))
}

/// A branch entry token `FROM/TO/FLAG[/...]`, FLAG one of `M`, `P`, `-`.
fn parse_entry(t: &str) -> Option<(End, End)> {
    let (from, rest) = parse_end(t)?;
    let (to, rest) = parse_end(rest)?;
    let flag = rest.split('/').next()?;
    matches!(flag, "M" | "P" | "-").then_some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALLGRAPH: &str =
        include_str!("../../../tests/fixtures/perf_script/prog.perf-script.txt");
    const BRSTACK: &str = include_str!("../../../tests/fixtures/perf_script/brstacksym.txt");
    const PROG: &str = "/tmp/fdw/prog";
    const LD: &str = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";

    /// (function, self weight) and (caller, callee, weight), by key.
    type Summary = (Vec<(String, u64)>, Vec<(String, String, u64)>);

    fn summary(p: &Profile) -> Summary {
        let f = p
            .functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight))
            .collect();
        (f, p.named_edges())
    }

    fn s(x: &str) -> String {
        x.to_string()
    }

    #[test]
    fn captured_callgraph_leaf_mode() {
        // 200 real samples: 197 in helper called from main (work has no frame of its own in
        // the frame-pointer chain: helper is a leaf without a frame), 2 in ld.so, 1 in the kernel.
        let r = read("prog.perf-script.txt", CALLGRAPH, Mode::Leaf).unwrap();
        let bins: Vec<&str> = r.profiles.iter().map(|p| p.meta.binary.as_str()).collect();
        assert_eq!(bins, vec![PROG, LD]);
        let prog = &r.profiles[0];
        assert_eq!(
            summary(prog),
            (
                vec![(s("helper"), 197), (s("main"), 0)],
                vec![(s("main"), s("helper"), 197)]
            )
        );
        assert_eq!(prog.meta.total, 197);
        assert_eq!(prog.meta.event.as_deref(), Some("cpu-clock"));
        assert_eq!(prog.meta.source, "perf-script");
        // Each leaf's `+0xoff`, a sample of weight 1 (as the perf.data importer keeps them).
        let helper = prog.find(&FuncKey::global("helper")).unwrap();
        let hits: Vec<(u32, u64, u64)> = prog
            .samples
            .iter()
            .map(|s| (s.func, s.offset, s.weight))
            .collect();
        assert_eq!(
            hits,
            [(helper, 0x20, 1), (helper, 0x24, 192), (helper, 0x27, 4)]
        );
        assert_eq!(
            summary(&r.profiles[1]),
            (
                vec![
                    (s("handle_intel.constprop.0"), 1),
                    (s("intel_check_word.constprop.0"), 1)
                ],
                vec![]
            )
        );
        assert_eq!(
            r.stats,
            Stats {
                samples: 200,
                kernel_samples: 1,
                ..Stats::default()
            }
        );
    }

    #[test]
    fn captured_callgraph_chain_mode() {
        // Chain mode adds no edge here: libc -> main crosses dsos and the only long ld.so
        // chain belongs to the kernel sample, which is not attributed.
        let leaf = read("p", CALLGRAPH, Mode::Leaf).unwrap();
        let chain = read("p", CALLGRAPH, Mode::Chain).unwrap();
        assert_eq!(summary(&leaf.profiles[0]), summary(&chain.profiles[0]));
        assert_eq!(chain.profiles[0].meta.extra["mode"], "chain");
    }

    #[test]
    fn chain_mode_counts_every_pair() {
        // One sample a <- b <- c in one dso: leaf gives b->a, chain gives b->a and c->b.
        let text =
            "p 1 1.000001: 1 cpu-clock:\n\t10 a+0x1 (/x)\n\t20 b+0x2 (/x)\n\t30 c+0x3 (/x)\n\n";
        let leaf = read("t", text, Mode::Leaf).unwrap();
        assert_eq!(summary(&leaf.profiles[0]).1, vec![(s("b"), s("a"), 1)]);
        let chain = read("t", text, Mode::Chain).unwrap();
        assert_eq!(
            summary(&chain.profiles[0]).1,
            vec![(s("b"), s("a"), 1), (s("c"), s("b"), 1)]
        );
    }

    #[test]
    fn header_line_frame_without_callchain() {
        // Without -g the frame follows the event on the header line; no blank lines needed.
        let text = "p 1 [000] 1.5: 250000 cpu-clock:u: 401000 work+0x10 (/bin/x)\n\
                    p 1 [000] 1.6: 250000 cpu-clock:u: 401000 work+0x10 (/bin/x)\n";
        let r = read("t", text, Mode::Leaf).unwrap();
        assert_eq!(summary(&r.profiles[0]).0, vec![(s("work"), 2)]);
        assert_eq!(r.profiles[0].meta.event.as_deref(), Some("cpu-clock:u"));
    }

    #[test]
    fn hand_made_brstacksym() {
        // Branches to offset 0 are calls; every branch gives one unit to its target function.
        let r = read("brstacksym.txt", BRSTACK, Mode::Leaf).unwrap();
        let bins: Vec<&str> = r.profiles.iter().map(|p| p.meta.binary.as_str()).collect();
        assert_eq!(bins, vec!["/bin/prog", "/lib/libc.so.6", UNKNOWN_DSO]);
        assert_eq!(
            summary(&r.profiles[0]),
            (
                vec![(s("helper"), 2), (s("main"), 1), (s("work"), 0)],
                vec![(s("work"), s("helper"), 2)]
            )
        );
        // main -> puts crosses dsos: self weight for puts, no edge.
        assert_eq!(summary(&r.profiles[1]), (vec![(s("puts"), 1)], vec![]));
        assert_eq!(
            summary(&r.profiles[2]),
            (
                vec![(s("helper"), 1), (s("main"), 2), (s("work"), 4)],
                vec![
                    (s("main"), s("work"), 1),
                    (s("work"), s("helper"), 1),
                    (s("work"), s("work"), 1)
                ]
            )
        );
        assert_eq!(r.stats.branches, 12);
        assert_eq!(r.stats.unsymbolized_branches, 1);
        assert_eq!(r.stats.samples, 0);
    }

    // perf 6.1 glues the first entry to the field before it; the space is put back, also when
    // the symbol starts with hex letters (the ip field has a fixed width).
    #[test]
    fn unglue_splits_ip_and_dso_fields() {
        let u = unglue("     555555555064add+0x4/abc+0x0/P/-/-/0/ ", true);
        assert_eq!(&*u, "555555555064 add+0x4/abc+0x0/P/-/-/0/");
        assert!(u.ip_split);
        let u = unglue("4011 f (/bin/x)g+0x1(/bin/x)/h+0x0(/bin/x)/P/-/-/0/", false);
        assert_eq!(&*u, "4011 f (/bin/x) g+0x1(/bin/x)/h+0x0(/bin/x)/P/-/-/0/");
        assert!(!u.ip_split);
        // An ip followed by a space is left alone.
        assert!(!unglue("     5555555551e8 0x1/0x2/P/-/-/0/", true).ip_split);
    }

    #[test]
    fn bad_input_names_file_and_line() {
        // A line that is nothing perf script prints is a one-line error with its number.
        let text = "p 1 1.000001: 1 cpu-clock:\n\t10 a+0x1 (/x)\ngarbage here\n";
        let e = read("bad.txt", text, Mode::Leaf).unwrap_err().to_string();
        assert!(e.starts_with("bad.txt: line 3: not a sample header"), "{e}");
        let e = read("empty.txt", "\n\n", Mode::Leaf)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "empty.txt: no samples or branch entries (not `perf script` output?)"
        );
    }

    #[test]
    fn deterministic() {
        // The same text gives the same profiles, byte for byte.
        let a = read("p", CALLGRAPH, Mode::Chain).unwrap();
        let b = read("p", CALLGRAPH, Mode::Chain).unwrap();
        let ta: Vec<String> = a.profiles.iter().map(|p| p.to_text()).collect();
        let tb: Vec<String> = b.profiles.iter().map(|p| p.to_text()).collect();
        assert_eq!(ta, tb);
    }

    proptest::proptest! {
        #[test]
        fn mutated_fixtures_never_panic(
            at in 0usize..1 << 16,
            byte in proptest::prelude::any::<u8>(),
            cut in 0usize..1 << 16,
        ) {
            // Any single-byte change or truncation gives profiles or an error, never a panic.
            for base in [CALLGRAPH, BRSTACK] {
                let mut bytes = base.as_bytes().to_vec();
                let i = at % bytes.len();
                bytes[i] = byte;
                bytes.truncate(cut.max(1).min(bytes.len()));
                let text = String::from_utf8_lossy(&bytes);
                let _ = read("m", &text, Mode::Chain);
            }
        }
    }
}
