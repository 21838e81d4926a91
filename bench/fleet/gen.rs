//! `fleet-gen`: writes synthetic fleet profiles for `bench/fleet` (not part of `sediment`).
//!
//! `fleet-gen DIR N [FUNCTIONS] [SAMPLES] [SEED]` writes `DIR/w000000.sprof` ... : N windows of
//! one binary (build-id fixed) with FUNCTIONS functions (default 5000), each window about
//! SAMPLES samples (default 20000, varying 0.5x to 1.5x) spread over the functions with
//! Zipf-like rates (exponent 1.1 over a fixed random ranking), so a window holds a few thousand
//! distinct functions; calls follow a fixed static call graph of four callees per function.
//! Every window names a submitter (`host-K`, skewed: a few hosts send many windows) and a
//! `recorded-at` one minute after the previous window.
//!
//! `fleet-gen --pprof DIR N [FUNCTIONS] [SAMPLES] [BUILDS] [SEED]` writes the same windows as a
//! continuous profiler exports them: `DIR/host-K.T.pb.gz`, gzip-compressed pprof, each sample a
//! call stack (a function and up to two callers from the static call graph) in `/usr/bin/app`
//! (one of BUILDS builds, default 3, told apart by build-id: host K runs build K mod BUILDS)
//! or in `libc.so.6` (one build, a tenth of the samples), symbolized.

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
    let mut args: Vec<String> = std::env::args().collect();
    let pprof = args.get(1).is_some_and(|a| a == "--pprof");
    if pprof {
        args.remove(1);
    }
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
    let (builds, seed_arg) = if pprof {
        (args.get(5).map_or(3, |v| v.parse().expect("BUILDS")), 6)
    } else {
        (1, 5)
    };
    let seed: u64 = args.get(seed_arg).map_or(1, |v| v.parse().expect("SEED"));
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
    if pprof {
        let graph = Graph {
            keys: &keys,
            rate: &rate,
            callees: &callees,
        };
        for w in 0..n {
            let host = (hosts as f64 * rng.unit().powi(2)) as usize;
            let t = 1_790_000_000 + 60 * w as i64;
            let bytes = pprof_window(&graph, &mut rng, samples, host % builds);
            let path = dir.join(format!("host-{host}.{t}.pb.gz"));
            std::fs::write(path, bytes).expect("write");
        }
        return;
    }
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

/// The binary's functions and how they run (see `main`).
struct Graph<'a> {
    keys: &'a [FuncKey],
    rate: &'a [f64],
    callees: &'a [[usize; 4]],
}

/// One window as gzip-compressed pprof: about `samples` stacks drawn from the Zipf rates, in
/// build `build` of the app (and a tenth in libc).
fn pprof_window(g: &Graph<'_>, rng: &mut Rng, samples: f64, build: usize) -> Vec<u8> {
    use prost::Message as _;
    use sediment_import::pprof::pb as proto;
    use std::io::Write as _;
    const LIBC_FUNCS: usize = 200;
    let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
    let string = |s: &str, strings: &mut Vec<Vec<u8>>| -> i64 {
        strings.push(s.as_bytes().to_vec());
        (strings.len() - 1) as i64
    };
    let mut p = proto::Profile::default();
    let samples_s = string("samples", &mut strings);
    let count = string("count", &mut strings);
    let cpu = string("cpu", &mut strings);
    let ns = string("nanoseconds", &mut strings);
    p.sample_type = vec![
        proto::ValueType {
            r#type: samples_s,
            unit: count,
        },
        proto::ValueType {
            r#type: cpu,
            unit: ns,
        },
    ];
    let app = string("/usr/bin/app", &mut strings);
    let app_id = string(
        &format!("{:040x}", 0x3f1c_9a7e_u64 + build as u64),
        &mut strings,
    );
    let libc = string("/usr/lib/x86_64-linux-gnu/libc.so.6", &mut strings);
    let libc_id = string("8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b", &mut strings);
    p.mapping = vec![
        proto::Mapping {
            id: 1,
            memory_start: 0x40_0000,
            memory_limit: 0x40_0000 + 64 * g.keys.len() as u64 + 0x1000,
            filename: app,
            build_id: app_id,
            ..Default::default()
        },
        proto::Mapping {
            id: 2,
            memory_start: 0x7f00_0000_0000,
            memory_limit: 0x7f00_0000_0000 + 64 * LIBC_FUNCS as u64 + 0x1000,
            filename: libc,
            build_id: libc_id,
            ..Default::default()
        },
    ];
    // Functions and locations are declared as the samples use them: id = index + 1.
    let mut loc_of: std::collections::HashMap<(u64, usize), u64> = Default::default();
    let mut location =
        |mapping: u64, f: usize, p: &mut proto::Profile, strings: &mut Vec<Vec<u8>>| {
            if let Some(&id) = loc_of.get(&(mapping, f)) {
                return id;
            }
            let (name, file) = if mapping == 1 {
                let k = &g.keys[f];
                (k.name.clone(), k.file.clone().unwrap_or_default())
            } else {
                (format!("__libc_function_{f}"), String::new())
            };
            let fid = p.function.len() as u64 + 1;
            let name = string(&name, strings);
            let filename = if file.is_empty() {
                0
            } else {
                string(&file, strings)
            };
            p.function.push(proto::Function {
                id: fid,
                name,
                system_name: name,
                filename,
            });
            let id = p.location.len() as u64 + 1;
            let base = if mapping == 1 {
                0x40_0000
            } else {
                0x7f00_0000_0000
            };
            p.location.push(proto::Location {
                id,
                mapping_id: mapping,
                address: base + 64 * f as u64 + 8,
                line: vec![proto::Line {
                    function_id: fid,
                    line: 0,
                }],
            });
            loc_of.insert((mapping, f), id);
            id
        };
    let n = (samples * (0.5 + rng.unit())) as usize;
    // Inverse-CDF draws over the rates.
    let mut cdf = Vec::with_capacity(g.rate.len());
    let mut acc = 0.0;
    for r in g.rate {
        acc += r;
        cdf.push(acc);
    }
    let mut stacks: std::collections::BTreeMap<Vec<u64>, i64> = Default::default();
    for _ in 0..n {
        // A call path: a function drawn from the rates, then two calls down the static graph;
        // pprof lists it leaf first. A tenth of the samples end in libc.
        let u = rng.unit() * acc;
        let mut f = cdf.partition_point(|&c| c < u).min(g.rate.len() - 1);
        let mut stack = vec![location(1, f, &mut p, &mut strings)];
        for _ in 0..2 {
            f = g.callees[f][rng.below(4)];
            stack.push(location(1, f, &mut p, &mut strings));
        }
        if rng.below(10) == 0 {
            stack.push(location(2, rng.below(LIBC_FUNCS), &mut p, &mut strings));
        }
        stack.reverse();
        *stacks.entry(stack).or_default() += 1;
    }
    p.sample = stacks
        .into_iter()
        .map(|(location_id, c)| proto::Sample {
            location_id,
            value: vec![c, c * 10_000_000],
        })
        .collect();
    p.string_table = strings;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&p.encode_to_vec()).expect("gzip");
    gz.finish().expect("gzip")
}
