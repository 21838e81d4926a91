//! lld's placement rule for a `--symbol-ordering-file` link, applied to a linked binary's
//! function symbols without relinking: where every function would land if the binary were
//! linked again with a given order.
//!
//! The movable units are the function symbols with a size inside the executable segments,
//! except `_init` and `_fini` (they live in `.init`/`.fini`, which no ordering file moves), in
//! address order, each size clipped so that none overlaps the next ([`Units::of`]).
//!
//! An order resolves as lld resolves a symbol-ordering file, by name alone: a name's priority is
//! its first position in the file, and every function of that name (statics of other files too)
//! takes it; equal priorities keep address order (lld keeps input order). The ordered units are
//! placed first from the start of the first unit, each aligned to the given alignment, then every
//! other unit in address order (the simulator's `layout_from_order`, which the caller passes in:
//! this crate does not depend on the simulator). This is what `sediment link --linker lld` output gives, so a prediction made with
//! it can be checked against a real relink.

use std::collections::{HashMap, HashSet};

use sediment_elf::{Binary, Segment};
use sediment_profile::FunctionOrder;

/// The functions an order can move, in address order.
pub struct Units<'a> {
    elf: &'a Binary,
    /// Indices into `elf.functions`.
    index: Vec<usize>,
    start: Vec<u64>,
    size: Vec<u64>,
}

/// A proposed order in link-time addresses: every unit's old start, size and new start, and the
/// order's entries that name no function of the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Link-time start of each unit as linked.
    pub old: Vec<u64>,
    /// Size of each unit (clipped at the next unit's start).
    pub size: Vec<u64>,
    /// Link-time start of each unit under the order.
    pub new: Vec<u64>,
    /// Units the order placed (the rest follow in address order).
    pub placed: usize,
    /// The order's entries naming no function of the binary, in order-file order.
    pub missing: Vec<String>,
}

impl<'a> Units<'a> {
    /// The movable functions of `elf` whose code lies in one of the executable segments `exec`.
    pub fn of(elf: &'a Binary, exec: &[Segment]) -> Self {
        let in_exec = |a: u64, n: u64| {
            exec.iter().any(|s| {
                a >= s.vaddr && a - s.vaddr < s.mem_size && n <= s.mem_size - (a - s.vaddr)
            })
        };
        let mut u = Units {
            elf,
            index: Vec::new(),
            start: Vec::new(),
            size: Vec::new(),
        };
        for (i, f) in elf.functions.iter().enumerate() {
            if f.size == 0 || matches!(f.key.name.as_str(), "_init" | "_fini") {
                continue;
            }
            if !in_exec(f.address, f.size) {
                continue;
            }
            // `functions` is sorted by address: clip the previous one at this start.
            if let (Some(ps), Some(pz)) = (u.start.last(), u.size.last_mut()) {
                *pz = (*pz).min(f.address - ps);
            }
            u.index.push(i);
            u.start.push(f.address);
            u.size.push(f.size);
        }
        u
    }

    /// Link-time start of each unit.
    pub fn starts(&self) -> &[u64] {
        &self.start
    }

    /// Size of each unit.
    pub fn sizes(&self) -> &[u64] {
        &self.size
    }

    /// Symbol name of each unit.
    pub fn names(&self) -> Vec<String> {
        self.index
            .iter()
            .map(|&i| self.elf.functions[i].key.name.clone())
            .collect()
    }

    /// Where `order` puts every unit, placed by `place_ordered` (the simulator's
    /// `layout_from_order(ranked units, sizes, align, first unit's start)`). When no entry of
    /// the order names a function of the binary, [`Placement::placed`] is 0.
    pub fn place(
        &self,
        order: &FunctionOrder,
        place_ordered: impl FnOnce(&[u32], &[u64], u64) -> Vec<u64>,
    ) -> Placement {
        // lld's rule: a symbol name's priority is its first position in the file, and every
        // section defining a symbol of that name gets it, statics of other files included.
        let mut first: HashMap<&str, usize> = HashMap::new();
        for (pos, key) in order.functions.iter().enumerate() {
            first.entry(key.name.as_str()).or_insert(pos);
        }
        let mut ranked: Vec<(usize, u32)> = Vec::new();
        let mut found: HashSet<&str> = HashSet::new();
        for (u, &i) in self.index.iter().enumerate() {
            let name = self.elf.functions[i].key.name.as_str();
            if let Some(&pos) = first.get(name) {
                // A binary has far fewer than 2^32 function symbols.
                ranked.push((pos, u as u32));
                found.insert(name);
            }
        }
        // Equal priorities keep address order (lld keeps input order), so the sort is total.
        ranked.sort_unstable();
        let idx: Vec<u32> = ranked.into_iter().map(|(_, u)| u).collect();
        let missing: Vec<String> = order
            .functions
            .iter()
            .filter(|k| !found.contains(k.name.as_str()))
            .map(|k| k.to_string())
            .collect();
        let base = self.start.first().copied().unwrap_or(0);
        Placement {
            old: self.start.clone(),
            size: self.size.clone(),
            new: place_ordered(&idx, &self.size, base),
            placed: idx.len(),
            missing,
        }
    }
}
