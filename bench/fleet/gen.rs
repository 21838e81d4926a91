//! `fleet-gen`: writes synthetic fleet profiles for `bench/fleet` (not part of `sediment`).
//!
//! `fleet-gen DIR N [FUNCTIONS] [SAMPLES] [SEED]` writes `DIR/w000000.sprof` ... : N windows of
//! one binary (build-id fixed) with FUNCTIONS functions (default 5000), each window about
//! SAMPLES samples (default 20000, varying 0.5x to 1.5x) spread over the functions with
//! Zipf-like rates (exponent 1.1 over a fixed random ranking), so a window holds a few thousand
//! distinct functions; calls follow a fixed static call graph of four callees per function.
//! Every window names a submitter (`host-K`, skewed: a few hosts send many windows) and a
//! `recorded-at` one minute after the previous window.

use sediment_profile::{FuncKey, Meta, ProfileBuilder};
use std::path::PathBuf;

/// xorshift64*: small, fast, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: fleet-gen DIR N [FUNCTIONS] [SAMPLES] [SEED]");
        std::process::exit(2);
    }
    let dir = PathBuf::from(&args[1]);
    let n: usize = args[2].parse().expect("N");
    let funcs: usize = args.get(3).map_or(5000, |v| v.parse().expect("FUNCTIONS"));
    let samples: f64 = args
        .get(4)
        .map_or(20_000.0, |v| v.parse().expect("SAMPLES"));
    let seed: u64 = args.get(5).map_or(1, |v| v.parse().expect("SEED"));
    std::fs::create_dir_all(&dir).expect("create DIR");

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
    // The binary: names like a C++ program's, one in ten a static of its source file.
    let keys: Vec<FuncKey> = (0..funcs)
        .map(|i| {
            let module = i % 97;
            let name = format!("_ZN3app7module{module}8function{i}ERKNS_7ContextE");
            if i % 10 == 0 {
                FuncKey::local(&name, &format!("src/module{module}.cc"))
            } else {
                FuncKey::global(&name)
            }
        })
        .collect();
    // Zipf rates over a random ranking of the functions.
    let mut rank: Vec<usize> = (0..funcs).collect();
    for i in (1..funcs).rev() {
        rank.swap(i, rng.below(i + 1));
    }
    let raw: Vec<f64> = (0..funcs).map(|r| ((r + 1) as f64).powf(-1.1)).collect();
    let norm: f64 = raw.iter().sum();
    let mut rate = vec![0.0; funcs];
    for (r, &f) in rank.iter().enumerate() {
        rate[f] = raw[r] / norm;
    }
    // Static call graph: four callees each, hot functions more likely.
    let callees: Vec<[usize; 4]> = (0..funcs)
        .map(|_| {
            let mut c = [0; 4];
            for x in &mut c {
                let r = (rng.unit().powi(3) * funcs as f64) as usize;
                *x = rank[r.min(funcs - 1)];
            }
            c
        })
        .collect();
    let hosts = (n / 10).max(1);
    for w in 0..n {
        let mut b = ProfileBuilder::new(Meta {
            binary: "/usr/bin/app".into(),
            build_id: Some("3f1c9a7e5b2d4c6e8f0a1b2c3d4e5f60718293a4".into()),
            arch: Some("x86_64".into()),
            source: "perf".into(),
            event: Some("cpu-clock".into()),
            ..Meta::default()
        });
        let s = samples * (0.5 + rng.unit());
        let mut total = 0u64;
        for f in 0..funcs {
            let lambda = s * rate[f];
            let weight = if lambda < 1.0 {
                u64::from(rng.unit() < lambda)
            } else {
                (lambda * (0.8 + 0.4 * rng.unit())).round() as u64
            };
            if weight == 0 {
                continue;
            }
            total += weight;
            b.add_self(&keys[f], weight);
            for &c in &callees[f] {
                if rng.unit() < 0.5 {
                    let cw = ((weight as f64) * rng.unit() / 2.0).round() as u64;
                    b.add_call(&keys[f], &keys[c], cw.max(1));
                }
            }
        }
        b.meta_mut().total = total + total / 20;
        let mut p = b.build();
        let host = (hosts as f64 * rng.unit().powi(2)) as usize;
        p.meta
            .extra
            .insert("submitter".into(), format!("host-{host}"));
        p.meta.extra.insert(
            "recorded-at".into(),
            (1_790_000_000 + 60 * w as i64).to_string(),
        );
        std::fs::write(dir.join(format!("w{w:06}.sprof")), p.to_text()).expect("write");
    }
}
