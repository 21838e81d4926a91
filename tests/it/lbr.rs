//! perf.data with LBR branch stacks (`perf record -e branches:u -j any_call`), imported with
//! `sediment import --format perf`.
//!
//! This machine has no LBR hardware, so the recordings are written here, by [`write`], a small
//! perf.data writer, against a real binary built by GCC: the addresses are the binary's real call
//! sites (found by scanning its code for `call rel32` to each callee), mapped at a PIE base by an
//! `MMAP2` record carrying the binary's build-id. The files are checked three ways:
//! - the real `perf script -F ip,brstack` reads them and prints exactly the entries written;
//! - the committed fixtures (`tests/fixtures/perf/lbr-*.perf.data`, made from the committed
//!   `lbr` binary) are byte-identical to what the writer produces now, and import to the golden
//!   profiles beside them (regenerated only by `SEDIMENT_UPDATE_GOLDEN=1`);
//! - a fresh GCC build of `lbr.c` gets the same call graph.

use crate::common::{fixture, have_tool, sediment};
use object::{Object, ObjectSection, ObjectSymbol};
use sediment_profile::{FuncKey, Profile};
use std::path::Path;
use std::process::Command;

/// Where a PIE's first page is mapped in the written recordings (what Linux picks without ASLR).
const BASE: u64 = 0x5555_5555_4000;
const PID: u32 = 4242;
/// `sample_type` bits.
const S_IP: u64 = 1;
const S_TID: u64 = 1 << 1;
const S_TIME: u64 = 1 << 2;
const S_CALLCHAIN: u64 = 1 << 5;
const S_CPU: u64 = 1 << 7;
const S_PERIOD: u64 = 1 << 8;
const S_BRANCH_STACK: u64 = 1 << 11;
/// `branch_sample_type` bits.
const B_USER: u64 = 1;
const B_ANY: u64 = 1 << 3;
const B_ANY_CALL: u64 = 1 << 4;
const B_HW_INDEX: u64 = 1 << 17;
const B_COUNTERS: u64 = 1 << 19;
const PERF_CONTEXT_USER: u64 = (-512i64) as u64;

/// One recording shape: what `perf record` options it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// `perf record -e branches:u -j any_call`: only calls, no hw_idx.
    AnyCall,
    /// `perf record -g -e branches:u -j any,u` on a kernel that adds `hw_idx`: every taken
    /// branch (loop jumps too), a call chain before the stack, and a CPU field.
    AnyHwIdx,
    /// `perf record -e branches:u -j any_call,counter` (Linux 6.8): a counter word per entry.
    Counters,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::AnyCall, Variant::AnyHwIdx, Variant::Counters];

    fn name(self) -> &'static str {
        match self {
            Variant::AnyCall => "lbr-any-call",
            Variant::AnyHwIdx => "lbr-hw-idx",
            Variant::Counters => "lbr-counters",
        }
    }

    fn sample_type(self) -> u64 {
        let base = S_IP | S_TID | S_TIME | S_PERIOD | S_BRANCH_STACK;
        match self {
            Variant::AnyHwIdx => base | S_CALLCHAIN | S_CPU,
            _ => base,
        }
    }

    fn branch_sample_type(self) -> u64 {
        match self {
            Variant::AnyCall => B_USER | B_ANY_CALL,
            Variant::AnyHwIdx => B_USER | B_ANY | B_HW_INDEX,
            Variant::Counters => B_USER | B_ANY_CALL | B_COUNTERS,
        }
    }
}

/// Link-time addresses of the program's functions and branch sites (see `lbr.c`).
struct Sites {
    main: u64,
    left: u64,
    right: u64,
    leaf: u64,
    /// (from, to) of each branch.
    call_left: (u64, u64),
    call_right: (u64, u64),
    left_leaf: (u64, u64),
    right_leaf: (u64, u64),
    /// `main` calling a PLT stub (`printf@plt`): a target that is no function.
    plt: (u64, u64),
    /// `leaf`'s loop: a backward jump inside one function.
    loop_jump: (u64, u64),
    /// The executable `PT_LOAD`: (vaddr, file offset, file size).
    text: (u64, u64, u64),
    build_id: Vec<u8>,
}

/// Finds the call sites of `lbr` in its code: `e8 rel32` to each callee, the indirect
/// `ff /2` call in `main`, and the backward short `jcc` of `leaf`'s loop.
fn sites(elf: &[u8]) -> Sites {
    let file = object::File::parse(elf).expect("parse lbr");
    let sym = |name: &str| {
        let s = file
            .symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("no symbol {name}"));
        (s.address(), s.size())
    };
    let text = file.section_by_name(".text").expect(".text");
    let (text_addr, code) = (text.address(), text.data().unwrap());
    let bytes = |(addr, size): (u64, u64)| {
        let at = (addr - text_addr) as usize;
        &code[at..at + size as usize]
    };
    // Direct calls from `f`: (site, target).
    let calls = |f: (u64, u64)| -> Vec<(u64, u64)> {
        let b = bytes(f);
        (0..b.len().saturating_sub(4))
            .filter(|&i| b[i] == 0xe8)
            .map(|i| {
                let rel = i32::from_le_bytes(b[i + 1..i + 5].try_into().unwrap());
                (
                    f.0 + i as u64,
                    (f.0 + i as u64 + 5).wrapping_add(rel as i64 as u64),
                )
            })
            .collect()
    };
    let (main, left, right, leaf) = (sym("main"), sym("left"), sym("right"), sym("leaf"));
    let call_to = |f, target: u64| {
        *calls(f)
            .iter()
            .find(|c| c.1 == target)
            .unwrap_or_else(|| panic!("no call to {target:#x}"))
    };
    let plt_sec = file.section_by_name(".plt").expect(".plt");
    let in_plt = |a: u64| a >= plt_sec.address() && a < plt_sec.address() + plt_sec.size();
    let plt = *calls(main)
        .iter()
        .find(|c| in_plt(c.1))
        .expect("a PLT call in main");
    let mb = bytes(main);
    let ind = (0..mb.len() - 1)
        .find(|&i| mb[i] == 0xff && (mb[i + 1] >> 3) & 7 == 2)
        .expect("an indirect call in main");
    let lb = bytes(leaf);
    let jcc = (0..lb.len() - 1)
        .find(|&i| (0x70..0x80).contains(&lb[i]) && (lb[i + 1] as i8) < 0)
        .expect("a backward jump in leaf");
    let jump_to = (leaf.0 + jcc as u64 + 2).wrapping_add(lb[jcc + 1] as i8 as i64 as u64);
    let bin = sediment_elf::Binary::parse("lbr", elf).expect("parse lbr");
    let seg = bin
        .segments
        .iter()
        .find(|s| s.is_executable())
        .expect("executable PT_LOAD");
    Sites {
        main: main.0,
        left: left.0,
        right: right.0,
        leaf: leaf.0,
        call_left: call_to(main, left.0),
        call_right: (main.0 + ind as u64, right.0),
        left_leaf: call_to(left, leaf.0),
        right_leaf: call_to(right, leaf.0),
        plt,
        loop_jump: (leaf.0 + jcc as u64, jump_to),
        text: (seg.vaddr, seg.offset, seg.file_size),
        build_id: file.build_id().unwrap().expect("build-id").to_vec(),
    }
}

/// One sample: its IP and its branch stack, newest entry first (link-time addresses).
struct Sample {
    ip: u64,
    /// Return addresses of the call chain above the IP.
    callers: Vec<u64>,
    stack: Vec<(u64, u64)>,
}

/// The samples of every recording. Weights they imply, for `-j any_call`: main->left 3,
/// main->right 3, left->leaf 3, right->leaf 2 (the PLT call is no edge); `-j any` adds the loop
/// jump, which is no call either.
fn samples(s: &Sites, v: Variant) -> Vec<Sample> {
    let loop_jump: Vec<(u64, u64)> = if v == Variant::AnyHwIdx {
        vec![s.loop_jump, s.loop_jump]
    } else {
        vec![]
    };
    let ret = |site: (u64, u64)| site.0 + 5;
    vec![
        Sample {
            ip: s.loop_jump.1,
            callers: vec![ret(s.left_leaf), ret(s.call_left)],
            stack: vec![s.left_leaf, s.call_left],
        },
        Sample {
            ip: s.leaf + 4,
            callers: vec![ret(s.right_leaf), s.call_right.0 + 2],
            stack: vec![s.right_leaf, s.call_right, s.left_leaf, s.call_left],
        },
        Sample {
            ip: s.loop_jump.0,
            callers: vec![ret(s.left_leaf), ret(s.call_left)],
            stack: [loop_jump.as_slice(), &[s.left_leaf, s.call_left]].concat(),
        },
        Sample {
            ip: s.right + 1,
            callers: vec![s.call_right.0 + 2],
            stack: vec![s.call_right],
        },
        Sample {
            ip: s.main + 4,
            callers: vec![],
            stack: vec![s.plt, s.right_leaf, s.call_right],
        },
        Sample {
            ip: s.left + 1,
            callers: vec![ret(s.call_left)],
            stack: vec![],
        },
    ]
}

/// Little-endian byte buffer.
#[derive(Default)]
struct Buf(Vec<u8>);

impl Buf {
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend(v);
        self
    }
    /// A NUL-terminated string padded with NULs to a multiple of `align`.
    fn cstr(&mut self, s: &str, align: usize) -> &mut Self {
        self.0.extend(s.as_bytes());
        let n = (s.len() + 1).div_ceil(align) * align;
        self.0.resize(self.0.len() + n - s.len(), 0);
        self
    }
}

/// A record: `perf_event_header` (type, misc, size) then the body.
fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut b = Buf::default();
    b.u32(kind).u16(misc).u16(8 + body.len() as u16).bytes(body);
    b.0
}

/// Size of the `perf_event_attr` written (`PERF_ATTR_SIZE_VER7`).
const ATTR_SIZE: u64 = 128;
const EVENT_NAME: &str = "branches:u";

fn attr(v: Variant) -> Vec<u8> {
    let mut a = Buf::default();
    // type HARDWARE, size, config PERF_COUNT_HW_BRANCH_INSTRUCTIONS, period, sample_type,
    // read_format.
    a.u32(0).u32(ATTR_SIZE as u32).u64(4).u64(4000);
    a.u64(v.sample_type()).u64(0);
    // flags: disabled, inherit, exclude_kernel, exclude_hv, mmap, comm, enable_on_exec, task,
    // mmap2, comm_exec.
    let flags: u64 = [0, 1, 5, 6, 8, 9, 12, 13, 23, 24]
        .iter()
        .map(|b| 1u64 << b)
        .sum();
    a.u64(flags).u32(0).u32(0).u64(0).u64(0);
    a.u64(v.branch_sample_type());
    a.0.resize(ATTR_SIZE as usize, 0);
    a.0
}

/// Writes a perf.data recording of `lbr` in variant `v`; `recorded` is the binary's path as
/// the recording names it. With `crafted_nr`, the second sample's branch count is replaced.
fn write(elf: &[u8], recorded: &str, v: Variant, crafted_nr: Option<u64>) -> Vec<u8> {
    let s = sites(elf);
    let rt = |a: u64| BASE + a;
    let mut data = Vec::new();
    // COMM (exec) and the MMAP2 of the executable segment, with the build-id.
    let mut b = Buf::default();
    b.u32(PID).u32(PID).cstr("lbr", 8);
    data.extend(record(3, 1 << 13, &b.0));
    let (vaddr, off, size) = s.text;
    let page = |x: u64| x & !0xfff;
    let len = (vaddr + size - page(vaddr)).div_ceil(0x1000) * 0x1000;
    let mut b = Buf::default();
    b.u32(PID)
        .u32(PID)
        .u64(rt(page(vaddr)))
        .u64(len)
        .u64(page(off));
    let mut id = s.build_id.clone();
    id.resize(20, 0);
    b.bytes(&[s.build_id.len() as u8, 0, 0, 0]).bytes(&id);
    // prot PROT_READ|PROT_EXEC, flags MAP_PRIVATE.
    b.u32(5).u32(2).cstr(recorded, 8);
    data.extend(record(10, 2 | 1 << 14, &b.0));
    for (i, smp) in samples(&s, v).iter().enumerate() {
        let mut b = Buf::default();
        b.u64(rt(smp.ip))
            .u32(PID)
            .u32(PID)
            .u64(1_000_000 + i as u64 * 1000);
        if v.sample_type() & S_CPU != 0 {
            b.u32(1).u32(0);
        }
        b.u64(4000);
        if v.sample_type() & S_CALLCHAIN != 0 {
            b.u64(2 + smp.callers.len() as u64)
                .u64(PERF_CONTEXT_USER)
                .u64(rt(smp.ip));
            for &c in &smp.callers {
                b.u64(rt(c));
            }
        }
        let nr = match crafted_nr {
            Some(n) if i == 1 => n,
            _ => smp.stack.len() as u64,
        };
        b.u64(nr);
        if v.branch_sample_type() & B_HW_INDEX != 0 {
            b.u64(smp.stack.len().saturating_sub(1) as u64);
        }
        for &(from, to) in &smp.stack {
            // flags: predicted.
            b.u64(rt(from)).u64(rt(to)).u64(2);
        }
        if v.branch_sample_type() & B_COUNTERS != 0 {
            for k in 0..smp.stack.len() {
                b.u64(k as u64 + 1);
            }
        }
        // PERF_RECORD_MISC_USER.
        data.extend(record(9, 2, &b.0));
    }

    // Layout: header, attribute section (attr + ids section), the id, data, feature table,
    // HEADER_EVENT_DESC.
    let attr_at = 104u64;
    let entry = ATTR_SIZE + 16;
    let ids_at = attr_at + entry;
    let data_at = ids_at + 8;
    let table_at = data_at + data.len() as u64;
    let desc_at = table_at + 16;
    let mut desc = Buf::default();
    desc.u32(1).u32(ATTR_SIZE as u32).bytes(&attr(v)).u32(1);
    let name_len = (EVENT_NAME.len() + 1).div_ceil(64) * 64;
    desc.u32(name_len as u32).cstr(EVENT_NAME, 64).u64(1);

    let mut f = Buf::default();
    f.bytes(b"PERFILE2").u64(104).u64(entry);
    f.u64(attr_at).u64(entry); // attrs
    f.u64(data_at).u64(data.len() as u64); // data
    f.u64(0).u64(0); // event types
    f.u64(1 << 12).u64(0).u64(0).u64(0); // features: HEADER_EVENT_DESC
    f.bytes(&attr(v)).u64(ids_at).u64(8);
    f.u64(1);
    f.bytes(&data);
    f.u64(desc_at).u64(desc.0.len() as u64);
    f.bytes(&desc.0);
    f.0
}

/// The committed `lbr` binary and the path its recordings name.
const RECORDED: &str = "/tmp/sediment-lbr-fixture/lbr";

fn committed_elf() -> Vec<u8> {
    std::fs::read(fixture("perf/lbr")).unwrap()
}

fn import(dir: &Path, input: &Path, binary: &Path) -> std::process::Output {
    sediment(
        dir,
        &[
            "import",
            "--format",
            "perf",
            "--binary",
            binary.to_str().unwrap(),
            input.to_str().unwrap(),
            "-o",
            "out.sprof",
        ],
    )
}

fn edge(p: &Profile, caller: &FuncKey, callee: &FuncKey) -> u64 {
    let (Some(a), Some(b)) = (p.find(caller), p.find(callee)) else {
        return 0;
    };
    p.edges
        .iter()
        .find(|e| e.caller == a && e.callee == b)
        .map_or(0, |e| e.weight)
}

// The writer is deterministic and the committed recordings are what it writes now; each imports
// to its golden profile byte for byte.
#[test]
fn committed_lbr_fixtures_match_writer_and_golden_profiles() {
    let elf = committed_elf();
    let update = std::env::var_os("SEDIMENT_UPDATE_GOLDEN").is_some();
    for v in Variant::ALL {
        let bytes = write(&elf, RECORDED, v, None);
        assert_eq!(
            bytes,
            write(&elf, RECORDED, v, None),
            "{v:?} not deterministic"
        );
        let path = fixture(&format!("perf/{}.perf.data", v.name()));
        if update {
            std::fs::write(&path, &bytes).unwrap();
        }
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "{} differs from the writer's output (SEDIMENT_UPDATE_GOLDEN=1 regenerates)",
            path.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let out = import(dir.path(), &path, &fixture("perf/lbr"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = std::fs::read_to_string(dir.path().join("out.sprof")).unwrap();
        let golden = fixture(&format!("perf/{}.sprof", v.name()));
        if update {
            std::fs::write(&golden, &got).unwrap();
        }
        assert_eq!(got, std::fs::read_to_string(&golden).unwrap(), "{v:?}");
    }
}

// The import finds the call graph of lbr.c in every variant: calls from the branch stack, the
// PLT call and the loop jump are no edges, and self weight stays with the sampled IPs.
#[test]
fn lbr_edges_are_the_calls_of_the_program() {
    let elf = committed_elf();
    for v in Variant::ALL {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.perf.data");
        std::fs::write(&input, write(&elf, RECORDED, v, None)).unwrap();
        let out = import(dir.path(), &input, &fixture("perf/lbr"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(dir.path().join("out.sprof")).unwrap();
        let p = Profile::from_text(&text).unwrap();
        let (main, left, right) = (
            FuncKey::global("main"),
            FuncKey::global("left"),
            FuncKey::global("right"),
        );
        let leaf = FuncKey::local("leaf", "lbr.c");
        assert_eq!(edge(&p, &main, &left), 3, "{v:?}\n{text}");
        assert_eq!(edge(&p, &main, &right), 3, "{v:?}\n{text}");
        assert_eq!(edge(&p, &left, &leaf), 3, "{v:?}\n{text}");
        assert_eq!(edge(&p, &right, &leaf), 2, "{v:?}\n{text}");
        assert_eq!(p.edges.len(), 4, "{v:?}: only the four calls\n{text}");
        assert_eq!(p.self_total(), 6, "{v:?}: one unit per sample\n{text}");
        assert_eq!(p.meta.event.as_deref(), Some(EVENT_NAME));
    }
}

/// Entries `perf script -F ip,brstack` prints for each sample: (ip, [(from, to)]).
fn perf_script_brstack(input: &Path) -> Vec<(u64, Vec<(u64, u64)>)> {
    let out = Command::new("perf")
        .args(["script", "--hide-call-graph", "-F", "ip,brstack", "-i"])
        .arg(input)
        .output()
        .expect("run perf");
    assert!(
        out.status.success(),
        "perf script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut toks = l.split_whitespace();
            let ip = hex(toks.next().unwrap());
            let stack = toks
                .map(|t| {
                    let mut f = t.split('/');
                    (hex(f.next().unwrap()), hex(f.next().unwrap()))
                })
                .collect();
            (ip, stack)
        })
        .collect()
}

// The real perf reads the written files and prints back exactly the IPs and entries written,
// for a fresh GCC build of lbr.c (recorded under its real path), in every variant.
#[test]
fn perf_script_reads_the_written_branch_stacks() {
    if !have_tool("perf") || !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("lbr");
    let out = Command::new("gcc")
        .args([
            "-O2",
            "-fno-omit-frame-pointer",
            "-ffunction-sections",
            "-Wl,--build-id",
            "-o",
        ])
        .arg(&bin)
        .arg(fixture("perf/lbr.c"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let elf = std::fs::read(&bin).unwrap();
    let s = sites(&elf);
    for v in Variant::ALL {
        let input = dir.path().join(format!("{}.perf.data", v.name()));
        std::fs::write(&input, write(&elf, bin.to_str().unwrap(), v, None)).unwrap();
        let want: Vec<(u64, Vec<(u64, u64)>)> = samples(&s, v)
            .iter()
            .map(|x| {
                let stack = x.stack.iter().map(|&(a, b)| (BASE + a, BASE + b)).collect();
                (BASE + x.ip, stack)
            })
            .collect();
        assert_eq!(perf_script_brstack(&input), want, "{v:?}");
        // And the import of the fresh build has the program's call graph.
        let out = import(dir.path(), &input, &bin);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let p = Profile::from_text(&std::fs::read_to_string(dir.path().join("out.sprof")).unwrap())
            .unwrap();
        let leaf = FuncKey::local("leaf", "lbr.c");
        assert_eq!(edge(&p, &FuncKey::global("left"), &leaf), 3, "{v:?}");
    }
}

// A branch count larger than its record: one line naming the file and the offset of the count,
// non-zero exit, no output file.
#[test]
fn crafted_branch_count_is_a_one_line_error_with_offset() {
    let elf = committed_elf();
    for v in Variant::ALL {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("crafted.perf.data");
        let bytes = write(&elf, RECORDED, v, Some(1 << 40));
        std::fs::write(&input, &bytes).unwrap();
        // The offset of the count: the second sample's body starts after the same fields as
        // in the honest file, so find it there.
        let honest = write(&elf, RECORDED, v, None);
        let at = bytes
            .iter()
            .zip(&honest)
            .position(|(a, b)| a != b)
            .expect("the count differs");
        let count_at = at - at % 8;
        let out = import(dir.path(), &input, &fixture("perf/lbr"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{v:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{v:?}: {err}");
        assert!(
            err.contains(&format!("crafted.perf.data: offset {count_at}: branch stack of 1099511627776 entries does not fit")),
            "{v:?}: {err}"
        );
        assert!(!dir.path().join("out.sprof").exists());
    }
}

/// Runs `sediment import --format perf-script --binary lbr` (relative, from the fixture
/// directory, so the golden files name no checkout path) on a perf_script fixture.
fn import_script(name: &str, out_dir: &Path) -> std::process::Output {
    let out = out_dir.join("out.sprof");
    sediment(
        &fixture("perf"),
        &[
            "import",
            "--format",
            "perf-script",
            "--binary",
            "lbr",
            fixture(&format!("perf_script/{name}.txt"))
                .to_str()
                .unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    )
}

// Real `perf script` text of lbr-any-call.perf.data (tests/fixtures/perf_script/README.md), in
// each form that names symbols, imports to its golden profile: the same four calls as the
// perf.data import.
#[test]
fn perf_script_brstacksym_forms_match_golden_profiles() {
    let update = std::env::var_os("SEDIMENT_UPDATE_GOLDEN").is_some();
    for name in [
        "lbr.ip-sym-dso-brstacksym",
        "lbr.default-brstacksym",
        "lbr.ip-brstacksym",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = import_script(name, dir.path());
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = std::fs::read_to_string(dir.path().join("out.sprof")).unwrap();
        let golden = fixture(&format!("perf_script/{name}.sprof"));
        if update {
            std::fs::write(&golden, &got).unwrap();
        }
        assert_eq!(got, std::fs::read_to_string(&golden).unwrap(), "{name}");
        let p = Profile::from_text(&got).unwrap();
        let leaf = FuncKey::local("leaf", "lbr.c");
        assert_eq!(
            edge(&p, &FuncKey::global("main"), &FuncKey::global("left")),
            3
        );
        assert_eq!(edge(&p, &FuncKey::global("right"), &leaf), 2);
        assert_eq!(p.edges.len(), 4, "{name}: {got}");
    }
}

// Raw `-F brstack` (even with `--show-mmap-events`) and perf 6.1's glued `-F ip,sym,brstacksym`
// are refused in one line that says what to print instead; nothing is written.
#[test]
fn perf_script_raw_and_glued_forms_are_refused() {
    for (name, needles) in [
        (
            "lbr.brstack-mmap",
            &[
                "lbr.brstack-mmap.txt: every branch entry is a raw address",
                "brstacksym",
            ][..],
        ),
        (
            "lbr.ip-sym-brstacksym",
            &[
                "lbr.ip-sym-brstacksym.txt: line 1: the sample's symbol is glued",
                "dso",
            ][..],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = import_script(name, dir.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        for n in needles {
            assert!(err.contains(n), "{name}: `{n}` missing from {err}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{name}");
    }
}

// Regression (found by the perf_data_lbr fuzz target, input
// tests/fixtures/perf/regress-lbr-pgoff-overflow.bin): an MMAP2 page offset near 2^64 made
// `address - start + pgoff` overflow, a panic with a backtrace in debug builds. Now the offset
// wraps, matches no symbol, and the import says so in counted warnings.
#[test]
fn regress_mmap_pgoff_overflow_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let found = fixture("perf/regress-lbr-pgoff-overflow.bin");
    let out = import(dir.path(), &found, &fixture("perf/lbr"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The same on a clean recording whose only change is that page offset.
    let mut bytes = std::fs::read(fixture("perf/lbr-any-call.perf.data")).unwrap();
    // The data section starts at 256 with a 24-byte COMM; the MMAP2 body follows its header:
    // pid, tid, addr, len, then pgoff.
    let pgoff_at = 256 + 24 + 8 + 24;
    assert_eq!(
        u32::from_le_bytes(bytes[280..284].try_into().unwrap()),
        10,
        "MMAP2"
    );
    bytes[pgoff_at..pgoff_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let input = dir.path().join("pgoff.perf.data");
    std::fs::write(&input, &bytes).unwrap();
    let out = import(dir.path(), &input, &fixture("perf/lbr"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("6 samples matched no function symbol"),
        "{err}"
    );
    // ... and says which binary they were in, with its share.
    assert!(
        err.contains("6 samples matched no function symbol: 100% in ") && err.contains("lbr"),
        "{err}"
    );
}

// Regression (found by the perf_data_lbr fuzz target after 58,823 executions, input
// tests/fixtures/perf/regress-attr-size-between-versions.bin): an event description whose
// attribute says it is 119 bytes (between two attr versions) left linux-perf-data reading the
// id count from the wrong bytes and allocating 29 GB by it. Now a one-line error at the offset
// of that size field, and no output.
#[test]
fn regress_attr_size_between_versions_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("perf/regress-attr-size-between-versions.bin");
    let out = import(dir.path(), &input, &fixture("perf/lbr"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // HEADER_EVENT_DESC at 976: u32 nr, u32 attr_size, then the attr whose size is at +4.
    assert!(
        err.contains("regress-attr-size-between-versions.bin: offset 988: event description"),
        "{err}"
    );
    assert!(!dir.path().join("out.sprof").exists());
}
