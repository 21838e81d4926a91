//! C++ through every linker route, on real g++ and clang++ output: inline functions and
//! template instances defined (COMDAT) in several objects, GCC's `.text.hot.` /
//! `.text.unlikely.` / `.text.startup.` sections, `.cold` parts, and exception tables. An order
//! of every function of the objects, reversed, is written by `sediment link` for lld, gold and
//! GNU ld, linked by the compiler driver, run (its exceptions must still be caught), and checked
//! with the post-link check the linker shims use (`sediment_link::check_order`, the `verify`
//! stage), against the addresses read independently from the output.

use crate::common::{run, sediment_ok};
use sediment_elf::objects::{read_objects, Binding};
use sediment_profile::{FuncKey, FunctionOrder};
use std::path::Path;

const H: &str = r#"#include <stdexcept>
inline __attribute__((noinline)) int shared(int x) { return x * 3 + 1; }
template <class T> __attribute__((noinline)) T twice(T x) { return x + x; }
int in_b(int);
"#;

const A_CC: &str = r#"#include "h.h"
#include <cstdio>
__attribute__((hot, noinline)) int hotter(int x) { return shared(x) + twice<int>(x); }
__attribute__((cold, noinline)) int colder(int x) { return x - 7; }
__attribute__((noinline)) int checked(int x) {
    if (__builtin_expect(x < 0, 0)) {
        std::fprintf(stderr, "negative %d\n", x);
        throw std::runtime_error("negative");
    }
    return x + 1;
}
int main(int argc, char **) {
    long s = 0;
    for (int i = 0; i < 1000; i++) s += hotter(i) + in_b(i) + checked(i);
    if (argc > 3) s += colder(argc);
    try { s += checked(-argc); } catch (const std::runtime_error &e) { s += 5; }
    std::printf("%ld\n", s);
    return 0;
}
"#;

const B_CC: &str = r#"#include "h.h"
static __attribute__((noinline)) int local_b(int x) { return twice<long>(x) > 10 ? 1 : 0; }
int in_b(int x) {
    try {
        if (x == 999) throw std::logic_error("last");
        return shared(x) + local_b(x);
    } catch (const std::logic_error &) {
        return -1;
    }
}
"#;

/// The program's output with `compiler`'s default link (the reference).
fn reference(d: &Path, compiler: &str) -> String {
    run(d, compiler, &["a.o", "b.o", "-o", "ref"]);
    crate::common::sh(d, "./ref", &[])
}

/// Every function the objects define, as order keys (one per COMDAT name), reversed by name.
fn reversed_order(d: &Path) -> Vec<FuncKey> {
    let mut keys = Vec::new();
    for o in ["a.o", "b.o"] {
        let data = std::fs::read(d.join(o)).unwrap();
        for obj in read_objects(o, &data).unwrap() {
            for f in obj.functions {
                let key = match (f.binding, &f.file) {
                    (Binding::Local, Some(file)) => FuncKey::local(&f.name, file),
                    _ => FuncKey::global(&f.name),
                };
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    keys.sort();
    keys.reverse();
    keys
}

/// Function names and addresses of a linked output (symbol table).
fn functions(exe: &Path) -> Vec<(String, u64)> {
    let data = std::fs::read(exe).unwrap();
    let b = sediment_elf::Binary::parse("out", &data).unwrap();
    b.functions
        .iter()
        .map(|f| (f.key.name.clone(), f.address))
        .collect()
}

#[test]
fn cxx_orders_through_every_linker() {
    require!("g++", "clang++", "ld.lld", "ld.gold", "ld.bfd");
    for compiler in ["g++", "clang++"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (name, src) in [("h.h", H), ("a.cc", A_CC), ("b.cc", B_CC)] {
            std::fs::write(d.join(name), src).unwrap();
        }
        run(
            d,
            compiler,
            &["-O2", "-ffunction-sections", "-c", "a.cc", "b.cc"],
        );
        // The premises: COMDAT functions in both objects; with g++, the prefixed sections and
        // a `.cold` part.
        let data = std::fs::read(d.join("a.o")).unwrap();
        let a = read_objects("a.o", &data).unwrap().remove(0);
        let data = std::fs::read(d.join("b.o")).unwrap();
        let b = read_objects("b.o", &data).unwrap().remove(0);
        for name in ["_Z6sharedi", "_Z5twiceIiET_S0_"] {
            assert!(
                a.functions.iter().any(|f| f.name == name),
                "{compiler}: {name} in a.o"
            );
        }
        assert!(
            b.functions.iter().any(|f| f.name == "_Z6sharedi"),
            "{compiler}: shared in b.o"
        );
        if compiler == "g++" {
            let section = |n: &str| {
                a.functions
                    .iter()
                    .find(|f| f.name == n)
                    .map(|f| f.section.clone())
                    .unwrap_or_else(|| panic!("{n}: {:?}", a.functions))
            };
            assert_eq!(section("_Z6hotteri"), ".text.hot._Z6hotteri");
            assert_eq!(section("_Z6colderi"), ".text.unlikely._Z6colderi");
            assert_eq!(section("main"), ".text.startup.main");
            assert!(
                a.functions.iter().any(|f| f.name.ends_with(".cold")),
                "a .cold part: {:?}",
                a.functions.iter().map(|f| &f.name).collect::<Vec<_>>()
            );
        }
        let want = reference(d, compiler);
        let keys = reversed_order(d);
        let order = FunctionOrder {
            functions: keys.clone(),
            ..Default::default()
        };
        std::fs::write(d.join("order.txt"), order.to_text()).unwrap();
        for linker in ["lld", "gold", "bfd"] {
            let file = format!("{linker}.order");
            let out = sediment_ok(
                d,
                &[
                    "link",
                    "--linker",
                    linker,
                    "--order",
                    "order.txt",
                    "-o",
                    &file,
                    "a.o",
                    "b.o",
                ],
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("warning"), "{compiler} {linker}: {err}");
            let flags = sediment_ok(d, &["link-flags", "--linker", linker, &file]);
            let flags = String::from_utf8(flags.stdout).unwrap();
            let exe = format!("prog_{linker}");
            let fuse = format!("-fuse-ld={linker}");
            let mut args = vec![fuse.as_str(), "a.o", "b.o", "-o", &exe];
            args.extend(flags.split_whitespace());
            run(d, compiler, &args);
            assert_eq!(
                crate::common::sh(d, &format!("./{exe}"), &[]),
                want,
                "{compiler} {linker}"
            );
            // The verify stage's check, and the order as read from the addresses.
            let funcs = functions(&d.join(&exe));
            let pairs: Vec<(&str, u64)> = funcs.iter().map(|(n, a)| (n.as_str(), *a)).collect();
            let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
            let check = sediment_link::check_order(&names, &pairs);
            assert_eq!(check.found, keys.len(), "{compiler} {linker}: {check:?}");
            let addr = |n: &str| {
                pairs
                    .iter()
                    .filter(|p| p.0 == n)
                    .map(|p| p.1)
                    .min()
                    .unwrap()
            };
            let sorted = names.windows(2).all(|w| addr(w[0]) <= addr(w[1]));
            assert!(
                sorted,
                "{compiler} {linker}: not in order: {:?}",
                names.iter().map(|n| (n, addr(n))).collect::<Vec<_>>()
            );
            assert_eq!(check.in_order, keys.len(), "{compiler} {linker}: {check:?}");
        }
    }
}
