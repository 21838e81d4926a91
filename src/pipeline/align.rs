//! The `align` stage's capsule choice: from a recorded run and, optionally, the program's
//! objects, the inputs of `sediment_sim::align::capsules` (each unit's executed weight, the
//! weight outside the binary, where a capsule may start, where code may grow) and its choice
//! by name.
//!
//! [`apply`] writes the copies of the objects with the chosen functions' sections aligned, for
//! any linker (`sediment_elf::realign`).
//!
//! Where code grows: the function named by `--grow-after`; else, given the objects, the end of
//! each object's code (weighted by its code bytes: a change is likelier in a larger object);
//! else the end of every function (weighted by its size). A capsule may start at a function
//! whose name no other function of the binary has (a chosen name aligns every function of that
//! name) and, given the objects, that sits in a section of its own that the linker keeps with
//! the object's code (gcc's `.text.unlikely`, `.text.startup`, `.text.hot` and `.text.exit`
//! pieces are placed apart).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sediment_sim::align::{CapsuleChoice, CapsuleProblem};
use std::path::Path;

use super::measure::Recorded;

/// Input-section prefixes that GNU ld's default script places apart from the object's code.
const APART: [&str; 4] = [".text.unlikely", ".text.startup", ".text.hot", ".text.exit"];

/// The capsules chosen, by name.
#[derive(Debug, Clone)]
pub struct Capsules {
    /// Names of the functions starting a capsule, in address order.
    pub names: Vec<String>,
    /// The choice (units, padding as linked, damage before and after).
    pub choice: CapsuleChoice,
    /// Where the growth was taken to happen, for the user: a short description.
    pub growth: String,
    /// Bytes the `.text` section moves to start on the boundary (between sections: not in
    /// `size`'s text, but in the file and the memory image); 0 without capsules.
    pub section_shift: u64,
}

/// Chooses capsule boundaries (`boundary` bytes, at most `budget` bytes of padding as linked)
/// for the run `recorded` of `binary`, against growth after `grow_after` or, without it, at
/// every object's end (given `objects`) or every function's end. The padding counts from the
/// start of the binary's `.text` section (a capsule gives the section its alignment).
pub fn capsules(
    binary: &Path,
    recorded: &Recorded,
    objects: &[PathBuf],
    grow_after: Option<&str>,
    boundary: u64,
    budget: u64,
) -> Result<Capsules> {
    let _t = super::timings::stage("align");
    let rec = &recorded.recording;
    let names = &recorded.names;
    let starts = rec.starts();
    let sizes = rec.sizes();
    let hot: Vec<f64> = rec.unit_weights().iter().map(|&w| w as f64).collect();
    let inside: f64 = hot.iter().sum();
    let share = rec.outside_share().clamp(0.0, 0.999);
    let outside = inside * share / (1.0 - share);
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in names.iter().enumerate() {
        by_name.entry(n.as_str()).or_default().push(i);
    }
    let unique = |n: &str| by_name.get(n).filter(|u| u.len() == 1).map(|u| u[0]);
    let mut candidate: Vec<bool> = names.iter().map(|n| unique(n).is_some()).collect();
    let mut growth: Vec<(usize, f64)> = Vec::new();
    let mut described = String::new();
    if !objects.is_empty() {
        candidate = vec![false; names.len()];
        for o in &super::link::read_objects_of(objects)? {
            let mut last: Option<usize> = None;
            let mut bytes = 0u64;
            for f in &o.functions {
                if APART.iter().any(|p| f.section.starts_with(p)) {
                    continue;
                }
                let Some(u) = unique(&f.name) else { continue };
                bytes = bytes.saturating_add(sizes[u]);
                if !f.shared_section {
                    candidate[u] = true;
                }
                if last.map_or(true, |l| starts[u] > starts[l]) {
                    last = Some(u);
                }
            }
            if let Some(u) = last {
                growth.push((u, bytes as f64));
            }
        }
        described = format!("the end of each of {} objects' code", growth.len());
    }
    if let Some(f) = grow_after {
        let u = grow_after_index(names.iter().map(String::as_str), f)?;
        growth = vec![(u, 1.0)];
        described = format!("the end of {f}");
    } else if objects.is_empty() {
        growth = sizes
            .iter()
            .enumerate()
            .map(|(u, &z)| (u, z as f64))
            .collect();
        described = "the end of every function".into();
    }
    let origin = text_start(binary)?;
    let choice = sediment_sim::align::capsules(&CapsuleProblem {
        starts,
        origin,
        hot: &hot,
        outside,
        candidate: &candidate,
        growth: &growth,
        boundary,
        budget,
    });
    Ok(Capsules {
        names: choice.units.iter().map(|&u| names[u].clone()).collect(),
        section_shift: if choice.units.is_empty() {
            0
        } else {
            sediment_sim::align::align_up(origin, boundary) - origin
        },
        choice,
        growth: described,
    })
}

/// The position among `names` (a binary's functions) of the one function named `name`, which
/// `--grow-after` names: refused when no function or several (statics of different files) have
/// that name, since which one grows would not be the user's choice.
pub(crate) fn grow_after_index<'a>(
    names: impl IntoIterator<Item = &'a str>,
    name: &str,
) -> Result<usize> {
    let mut found = names.into_iter().enumerate().filter(|(_, n)| *n == name);
    let Some((u, _)) = found.next() else {
        bail!("--grow-after {name}: no such function in the binary");
    };
    let more = found.count();
    if more > 0 {
        bail!(
            "--grow-after {name}: {} functions of the binary have that name (statics of \
             different files); name a function whose name is unique",
            more + 1
        );
    }
    Ok(u)
}

/// Link-time start of `binary`'s `.text` section (0 when it has none: the padding then counts
/// from address 0).
fn text_start(binary: &Path) -> Result<u64> {
    let data = crate::fsio::read_bytes(binary)?;
    let shown = binary.display().to_string();
    Ok(sediment_elf::realign::section_address(&shown, &data, ".text")?.unwrap_or(0))
}

/// What [`apply`] wrote.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The copies, in the order of the objects given.
    pub copies: Vec<PathBuf>,
    /// Sections whose alignment was raised.
    pub sections: usize,
    /// Chosen names found in no object.
    pub missing: usize,
}

/// Writes into `dir` a copy of every object (`NNNN-NAME`, in the order given) with the input
/// section of every function named in `names` raised to `boundary`, when the function has its
/// section to itself. Every copy is made in memory first, so that a bad object leaves no copy
/// behind.
pub fn apply(objects: &[PathBuf], names: &[&str], boundary: u64, dir: &Path) -> Result<Applied> {
    let wanted: std::collections::HashSet<&str> = names.iter().copied().collect();
    let mut copies: Vec<(PathBuf, Vec<u8>)> = Vec::with_capacity(objects.len());
    let mut found = std::collections::HashSet::new();
    let mut sections = 0usize;
    for (i, path) in objects.iter().enumerate() {
        let data = crate::fsio::read_bytes(path)?;
        let shown = path.display().to_string();
        let files = sediment_elf::objects::read_objects(&shown, &data)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        // The sections holding a chosen function, when it has its section to itself.
        let mut chosen = std::collections::HashSet::new();
        for f in files.iter().flat_map(|o| &o.functions) {
            if wanted.contains(f.name.as_str()) {
                found.insert(f.name.clone());
                if !f.shared_section {
                    chosen.insert(f.section.clone());
                }
            }
        }
        let (bytes, changed) = sediment_elf::realign::raise_alignment(&shown, &data, |s| {
            chosen.contains(s).then_some(boundary)
        })?;
        sections += changed.len();
        let name = path.file_name().map_or_else(
            || format!("object-{i}"),
            |n| n.to_string_lossy().into_owned(),
        );
        copies.push((dir.join(format!("{i:04}-{name}")), bytes));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    for (copy, bytes) in &copies {
        crate::fsio::write_atomic(copy, bytes)?;
    }
    Ok(Applied {
        copies: copies.into_iter().map(|c| c.0).collect(),
        sections,
        missing: wanted.len() - found.len(),
    })
}
