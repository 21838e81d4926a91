//! Scale benchmark for the ordering algorithms (not a test: it asserts nothing about time).
//!
//! Generates a random call graph with power-law (Zipf-like) hotness deterministically from a
//! seed, then times C3 and the hot order on it and prints one line per algorithm. The target
//! recorded in `docs/algorithms.md` is 1,000,000 functions and 10,000,000 edges in under 2 s
//! and 1 GiB on one core; measure peak memory with
//!
//! ```text
//! cargo bench -p sediment-order --bench order_scale --no-run
//! /usr/bin/time -v target/release/deps/order_scale-* [NODES EDGES SEED]
//! ```
//!
//! The graph: node `i` has rank `r = perm(i)` (a fixed bijection, so hot nodes are spread over
//! the index space as they are in a symbol-sorted profile); its self count is
//! `1_000_000 / (r + 1)` (zero for about 3/4 of the ranks beyond a threshold, as most of a
//! program never runs) and its size is 16..4096 bytes. Each edge draws its caller and callee
//! ranks as `floor(n * u^3)` for uniform `u`, which puts most calls among the hottest nodes;
//! duplicates are kept (the algorithms accept them).

use sediment_order::{c3_layout, hot_layout, page_locality_score, C3Params, EdgeCount, PAGE_SIZE};
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

fn main() {
    // `cargo bench` passes `--bench`; positional numbers override the defaults.
    let nums: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = nums.first().copied().unwrap_or(1_000_000) as usize;
    let m = nums.get(1).copied().unwrap_or(10_000_000) as usize;
    let seed = nums.get(2).copied().unwrap_or(42);

    let t = Instant::now();
    let (sizes, counts, edges) = power_law_graph(n, m, seed);
    println!(
        "generate: {n} nodes, {m} edges, seed {seed}: {:.3} s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let c3 = c3_layout(&sizes, &counts, &edges, &C3Params::default()).expect("valid graph");
    let c3_time = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let hot = hot_layout(&sizes, &counts, &edges).expect("valid graph");
    let hot_time = t.elapsed().as_secs_f64();

    let page = |l: &[u32]| page_locality_score(&sizes, &edges, l, PAGE_SIZE).expect("permutation");
    let total: u64 = edges
        .iter()
        .filter(|e| e.src != e.dst)
        .map(|e| e.count)
        .sum();
    println!(
        "c3:  {c3_time:.3} s, same-page edge weight {:.2}%",
        100.0 * page(&c3) as f64 / total as f64
    );
    println!(
        "hot: {hot_time:.3} s, same-page edge weight {:.2}%",
        100.0 * page(&hot) as f64 / total as f64
    );
}
