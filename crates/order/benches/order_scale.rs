//! Scale benchmark for the ordering algorithms (not a test: it asserts nothing about time).
//!
//! Generates a random call graph with power-law (Zipf-like) hotness deterministically from a
//! seed, then runs every algorithm on it, each in a child process of its own, and prints a
//! Markdown table: layout time (CPU and wall), peak RSS of the process (graph included), the
//! two scores, and a hash of the layout (equal hashes: the same layout, byte for byte).
//! The target recorded in `docs/design/algorithms.md` is 1,000,000 functions and 10,000,000 edges in
//! under 2 s and 1 GiB on one core.
//!
//! ```text
//! cargo bench -p sediment-order --bench order_scale -- [NODES EDGES SEED] [--algorithms a,b]
//! ```
//!
//! The graph: node `i` has rank `r = perm(i)` (a fixed bijection, so hot nodes are spread over
//! the index space as they are in a symbol-sorted profile); its self count is
//! `1_000_000 / (r + 1)` (zero for about 3/4 of the ranks beyond a threshold, as most of a
//! program never runs) and its size is 16..4096 bytes. Each edge draws its caller and callee
//! ranks as `floor(n * u^3)` for uniform `u`, which puts most calls among the hottest nodes;
//! duplicates are kept (the algorithms accept them).

use sediment_order::{
    ext_tsp_score, page_locality_score, Algorithm, CallGraph, EdgeCount, ExtTspParams, PAGE_SIZE,
};
use std::time::Instant;

/// SplitMix64 (Steele, Lea & Flood, "Fast Splittable Pseudorandom Number Generators", 2014):
/// tiny, seedable, and good enough to shape a benchmark graph.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The graph described in the module docs.
fn power_law_graph(n: usize, m: usize, seed: u64) -> (Vec<u64>, Vec<u64>, Vec<EdgeCount>) {
    let mut rng = SplitMix64(seed);
    // rank -> node: multiplication by an odd constant modulo a power of two is a bijection;
    // restrict to 0..n by cycle-walking.
    let bits = (n.max(2) - 1).ilog2() + 1;
    let mask = (1u64 << bits) - 1;
    let node_of = |r: u64| {
        let mut x = r;
        loop {
            x = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5bd1) & mask;
            if (x as usize) < n {
                return x as u32;
            }
        }
    };
    let rank_node: Vec<u32> = (0..n as u64).map(node_of).collect();
    let mut counts = vec![0u64; n];
    let mut sizes = vec![0u64; n];
    for (r, &v) in rank_node.iter().enumerate() {
        let live = r < n / 4 || rng.next() % 4 == 0;
        counts[v as usize] = if live { 1_000_000 / (r as u64 + 1) } else { 0 };
        sizes[v as usize] = 16 + rng.next() % 4080;
    }
    let draw = |rng: &mut SplitMix64| {
        let u = rng.unit();
        let r = ((n as f64) * u * u * u) as usize;
        rank_node[r.min(n - 1)]
    };
    let edges = (0..m)
        .map(|_| EdgeCount {
            src: draw(&mut rng),
            dst: draw(&mut rng),
            count: 1 + rng.next() % 1000,
        })
        .collect();
    (sizes, counts, edges)
}

/// Peak resident set size of this process in MiB (`VmHWM` in `/proc/self/status`).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU time (user + system) this process has used, in seconds, from `/proc/self/stat` (clock
/// ticks of 1/100 s). On a shared machine it is a steadier measure than wall time.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
}

/// Generates the graph, runs one algorithm, prints one table row: name, generate time, layout
/// time, peak RSS of the process, share of edge weight within a page, ExtTSP score.
fn run_one(name: &str, n: usize, m: usize, seed: u64) {
    let t = Instant::now();
    let g = {
        let (sizes, counts, edges) = power_law_graph(n, m, seed);
        CallGraph {
            sizes,
            counts,
            edges,
            startup: Vec::new(),
        }
    };
    let gen_time = t.elapsed().as_secs_f64();
    let algorithm = Algorithm::from_name(name).expect("known algorithm");
    let (t, cpu) = (Instant::now(), cpu_seconds());
    let layout = algorithm.layout(&g).expect("valid graph");
    let (time, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let rss = peak_rss_mib();
    let total: u64 = g
        .edges
        .iter()
        .filter(|e| e.src != e.dst)
        .map(|e| e.count)
        .sum();
    let page = page_locality_score(&g.sizes, &g.edges, &layout, PAGE_SIZE).expect("permutation");
    let tsp =
        ext_tsp_score(&g.sizes, &g.edges, &layout, &ExtTspParams::default()).expect("permutation");
    // FNV-1a over the layout: two runs (or two versions of an algorithm) gave the same layout
    // exactly when the hashes match.
    let hash = layout.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &v| {
        v.to_le_bytes()
            .iter()
            .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
    });
    println!(
        "| {name} | {gen_time:.2} s | {cpu:.2} s | {time:.2} s | {rss:.0} MiB | {:.2}% | {tsp:.3e} | {hash:016x} |",
        100.0 * page as f64 / total as f64
    );
}

/// Writes the graph for lld (`--dump-lld DIR`): `DIR/funcs.s`, one function `fN` per node in a
/// section `.text.fN` of a sixteenth of its size (so that a million functions stay a small
/// object; sizes only steer C3's density and cluster limits), and `DIR/cg.txt`, lld's
/// `--call-graph-ordering-file` (`caller callee count` per edge). `lld_c3.sh` beside this file
/// times lld with and without it.
fn dump_lld(dir: &std::path::Path, n: usize, m: usize, seed: u64) {
    use std::io::Write;
    let (sizes, _counts, edges) = power_law_graph(n, m, seed);
    std::fs::create_dir_all(dir).expect("create dir");
    let mut s = std::io::BufWriter::new(std::fs::File::create(dir.join("funcs.s")).expect("s"));
    writeln!(
        s,
        ".section .text._start,\"ax\",@progbits\n.globl _start\n_start:\n\tret"
    )
    .unwrap();
    for (v, size) in sizes.iter().enumerate() {
        writeln!(
            s,
            ".section .text.f{v},\"ax\",@progbits\n.globl f{v}\n.type f{v},@function\nf{v}:\n\tret\n\t.skip {}\n.size f{v}, .-f{v}",
            (size / 16).max(1)
        )
        .unwrap();
    }
    let mut cg = std::io::BufWriter::new(std::fs::File::create(dir.join("cg.txt")).expect("cg"));
    for e in &edges {
        writeln!(cg, "f{} f{} {}", e.src, e.dst, e.count).unwrap();
    }
}

fn main() {
    // `cargo bench` passes `--bench`; positional numbers override the defaults, and
    // `--only NAME` runs one algorithm in this process (the parent runs each in a child so that
    // every row's peak RSS is that algorithm's own).
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nums: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let n = nums.first().copied().unwrap_or(1_000_000) as usize;
    let m = nums.get(1).copied().unwrap_or(10_000_000) as usize;
    let seed = nums.get(2).copied().unwrap_or(42);
    if let Some(i) = args.iter().position(|a| a == "--dump-lld") {
        dump_lld(std::path::Path::new(&args[i + 1]), n, m, seed);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--only") {
        run_one(&args[i + 1], n, m, seed);
        return;
    }
    let names: Vec<&str> = match args.iter().position(|a| a == "--algorithms") {
        Some(i) => args[i + 1].split(',').collect(),
        None => vec!["hot", "c3", "pettis-hansen", "ext-tsp", "cdsort", "bp"],
    };
    println!("{n} nodes, {m} edges, seed {seed}");
    println!(
        "| algorithm | generate (wall) | layout (CPU) | layout (wall) | peak RSS | same-page weight | ExtTSP score | layout hash |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe().expect("own path");
    for name in names {
        let status = std::process::Command::new(&exe)
            .args([n.to_string(), m.to_string(), seed.to_string()])
            .args(["--only", name])
            .status()
            .expect("run child");
        assert!(status.success(), "{name} failed");
    }
}
