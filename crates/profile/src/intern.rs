//! Dense ids for function keys, shared by [`crate::ProfileBuilder`] and [`crate::Merger`].
//!
//! Both accumulate weights for keys met in any order and must end in the canonical order (keys
//! sorted, edges by the pair of sorted positions). Storing each distinct key once and keying
//! everything else by a `u32` id keeps a call edge at a few dozen bytes whatever the names'
//! length; [`Interner::into_sorted`] turns the ids into [`FuncId`]s at the end, where the order
//! is needed.

use crate::{Edge, FuncId, FuncKey, Function, Meta, Profile, Sample};
use std::collections::HashMap;

/// Distinct keys and their ids (the order of first sight, `0..len`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Interner {
    /// The map owns the keys.
    ids: HashMap<FuncKey, u32>,
    /// Bytes of all keys' names and files, for memory estimates.
    key_bytes: u64,
}

impl Interner {
    /// The id of `key` and whether it is new (ids of new keys are `len()` before the call).
    pub(crate) fn id(&mut self, key: &FuncKey) -> (u32, bool) {
        match self.ids.get(key) {
            Some(&id) => (id, false),
            None => (self.insert(key.clone()), true),
        }
    }

    /// [`Interner::id`] for an owned key, which is moved in when new.
    pub(crate) fn id_owned(&mut self, key: FuncKey) -> (u32, bool) {
        match self.ids.get(&key) {
            Some(&id) => (id, false),
            None => (self.insert(key), true),
        }
    }

    fn insert(&mut self, key: FuncKey) -> u32 {
        // Ids are u32 like FuncId: 4 billion keys would take hundreds of gigabytes first.
        let id = self.ids.len() as u32;
        let file = key.file.as_ref().map_or(0, String::len);
        self.key_bytes += (key.name.len() + file) as u64;
        self.ids.insert(key, id);
        id
    }

    /// Every key with its id, in no particular order.
    pub(crate) fn into_pairs(self) -> impl Iterator<Item = (FuncKey, u32)> {
        self.ids.into_iter()
    }

    /// Bytes of all keys' names and files.
    pub(crate) fn key_bytes(&self) -> u64 {
        self.key_bytes
    }

    /// The canonical profile of these keys: `function(id)` gives each key's self weight and
    /// size, `edges` the calls by (caller, callee) id, each pair at most once, `samples` the
    /// per-offset weights by (function id, offset), each pair at most once; calls and samples
    /// of weight zero are dropped (their functions stay). The keys are moved, not copied.
    ///
    /// The keys are sorted once; an id's rank in that order is its [`FuncId`], so sorting the
    /// edges by the pair of ranks sorts them by key pair. Keys and pairs are distinct, so the
    /// unstable sorts are deterministic whatever the hash maps' iteration order.
    pub(crate) fn into_profile(
        self,
        meta: Meta,
        function: impl Fn(u32) -> (u64, Option<u64>),
        edges: impl Iterator<Item = ((u32, u32), u64)>,
        samples: impl Iterator<Item = ((u32, u64), u64)>,
    ) -> Profile {
        let mut keys: Vec<(FuncKey, u32)> = self.ids.into_iter().collect();
        keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut rank = vec![0 as FuncId; keys.len()];
        for (i, (_, id)) in keys.iter().enumerate() {
            rank[*id as usize] = i as FuncId;
        }
        let functions = keys
            .into_iter()
            .map(|(key, id)| {
                let (self_weight, size) = function(id);
                Function {
                    key,
                    self_weight,
                    size,
                }
            })
            .collect();
        let mut edges: Vec<Edge> = edges
            .filter(|&(_, weight)| weight > 0)
            .map(|((a, c), weight)| Edge {
                caller: rank[a as usize],
                callee: rank[c as usize],
                weight,
            })
            .collect();
        edges.sort_unstable_by_key(|e| (e.caller, e.callee));
        let mut samples: Vec<Sample> = samples
            .filter(|&(_, weight)| weight > 0)
            .map(|((f, offset), weight)| Sample {
                func: rank[f as usize],
                offset,
                weight,
            })
            .collect();
        samples.sort_unstable_by_key(|s| (s.func, s.offset));
        Profile {
            meta,
            functions,
            edges,
            samples,
        }
    }
}
