//! The `verify` stage: after the link, how much of an order the linked output follows.
//!
//! The output's function symbols are read and handed to [`sediment_link::check_order`]: how
//! many of the order's functions are in the output, and how many of those in the intended
//! relative order. It is the check of an LTO link (whose functions only exist once the linker
//! has run code generation), and of any link whose order should be confirmed.
//!
//! `sediment verify` uses [`held`] instead, which also weighs and names what is missing,
//! measures the distance from the intended order and counts the renames it recognised
//! ([`sediment_link::held()`]), and fails on a binary without a symbol table; the intended order
//! is an order file or the one the shims compute from a profile ([`Intended`]). Its pre-build
//! check, [`applies`], finds the outputs of build trees each profile of a directory would
//! order and the share of the profile's weight they define.

use super::timings;
use crate::fsio;
use sediment_link::OrderCheck;
use std::path::Path;

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// The output's symbols were read and the order checked against them.
    Checked(OrderCheck),
    /// The output could not be checked: no symbol table (only dynamic symbols), or it could
    /// not be read or parsed. The text says why (naming the output).
    Unchecked(String),
}

/// The `verify` stage: checks `order` (function names, hottest first) against the function
/// symbols of the linked `output`. An output that cannot be read or has no symbol table is
/// [`Verified::Unchecked`], not an error: the link itself succeeded.
pub fn verify(output: &Path, order: &[String]) -> Verified {
    let _t = timings::stage("verify");
    let out = output.display();
    let read = fsio::read_bytes(output).and_then(|data| {
        sediment_elf::Binary::parse(&out.to_string(), &data).map_err(anyhow::Error::from)
    });
    let binary = match read {
        Ok(b) if b.from_dynsym => {
            return Verified::Unchecked(format!(
                "{out}: no symbol table (stripped?), only dynamic symbols"
            ))
        }
        Ok(b) => b,
        Err(e) => return Verified::Unchecked(format!("{e:#}")),
    };
    let functions: Vec<(&str, u64)> = binary
        .functions
        .iter()
        .map(|f| (f.key.name.as_str(), f.address))
        .collect();
    let names: Vec<&str> = order.iter().map(String::as_str).collect();
    Verified::Checked(sediment_link::check_order(&names, &functions))
}

/// The order `sediment verify` holds an output to: functions, first placed first, and, from a
/// profile, each one's self weight (parallel to `keys`).
#[derive(Debug, Clone, Default)]
pub struct Intended {
    /// The order's functions (name, and the source file of a static).
    pub keys: Vec<sediment_profile::FuncKey>,
    /// The profile's self weight of each name; `None` for an order file.
    pub weights: Option<Vec<u64>>,
}

impl Intended {
    /// The order of an order file (`sediment order`'s output): names only.
    pub fn from_order(order: &sediment_profile::FunctionOrder) -> Intended {
        Intended {
            keys: order.functions.clone(),
            weights: None,
        }
    }

    /// The order the linker shims would give `profile` (`algorithm`, as `SEDIMENT_ALGORITHM`),
    /// with each entry's self weight. `path` names the profile in errors.
    pub fn from_profile(
        profile: &sediment_profile::Profile,
        path: &Path,
        algorithm: sediment_order::Algorithm,
    ) -> anyhow::Result<Intended> {
        let graph = sediment_order::CallGraph::from_profile(profile);
        let order = super::order::order(profile, path, &graph, algorithm)?;
        let weights = order
            .functions
            .iter()
            .map(|k| {
                profile
                    .find(k)
                    .map_or(0, |id| profile.functions[id as usize].self_weight)
            })
            .collect();
        Ok(Intended {
            keys: order.functions,
            weights: Some(weights),
        })
    }
}

/// The `verify` stage of `sediment verify`: reads `binary`'s function symbols and measures how
/// much of `intended` they hold ([`sediment_link::held()`]). A binary without a symbol table
/// (stripped: only dynamic symbols) is an error naming it: its layout cannot be told.
pub fn held(binary: &Path, intended: &Intended) -> anyhow::Result<sediment_link::Held> {
    let _t = timings::stage("verify");
    let b = fsio::read_binary(binary)?;
    if b.from_dynsym {
        anyhow::bail!(
            "{}: no symbol table (stripped?), only dynamic symbols: cannot tell where functions are",
            binary.display()
        );
    }
    let functions: Vec<(sediment_link::held::Named<'_>, u64)> = b
        .functions
        .iter()
        .map(|f| ((f.key.name.as_str(), f.key.file.as_deref()), f.address))
        .collect();
    let order: Vec<sediment_link::held::Named<'_>> = intended
        .keys
        .iter()
        .map(|k| (k.name.as_str(), k.file.as_deref()))
        .collect();
    Ok(sediment_link::held(
        &order,
        intended.weights.as_deref(),
        &functions,
    ))
}

/// A profile of a profile directory and the outputs of a build it would order ([`applies`]).
#[derive(Debug, Clone)]
pub struct Applies {
    /// The profile (`DIR/NAME.sprof`).
    pub profile: std::path::PathBuf,
    /// The linked outputs named `NAME` in the build trees, in path order.
    pub outputs: Vec<Applied>,
}

/// One output a profile applies to, and how much of the profile it holds.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The output (an ELF executable or shared object).
    pub path: std::path::PathBuf,
    /// Its function symbols.
    pub functions: usize,
    /// Stripped: only its dynamic symbols could be compared.
    pub stripped: bool,
    /// The share of the profile's weight on its functions
    /// ([`sediment_profile::binary_share`]).
    pub share: sediment_profile::Share,
}

/// What [`applies`] found.
#[derive(Debug, Clone)]
pub struct Prebuild {
    /// Every profile of the directory, in name order, with the outputs it applies to.
    pub profiles: Vec<Applies>,
    /// The linked outputs of the trees no profile applies to, in path order.
    pub unprofiled: Vec<std::path::PathBuf>,
}

/// The pre-build check of `sediment verify --prof-dir`: for every profile `DIR/NAME.sprof`, the
/// linked outputs named `NAME` in `trees` (directories searched recursively without following
/// symbolic links, or files), which is how the linker shims pick a link's profile (by the base
/// name of its `-o`), with the share of the profile's weight their functions define; and the
/// linked outputs no profile applies to. A profile applying to no output is listed with none.
/// Separate debug files (`*.debug`) are not outputs. A profile that cannot be read, or a tree
/// that cannot be, is an error naming it.
pub fn applies(prof_dir: &Path, trees: &[std::path::PathBuf]) -> anyhow::Result<Prebuild> {
    use anyhow::Context as _;
    use std::collections::BTreeMap;
    use std::ffi::OsString;
    let _t = timings::stage("verify");
    let mut profiles: BTreeMap<OsString, std::path::PathBuf> = BTreeMap::new();
    let entries = std::fs::read_dir(prof_dir)
        .with_context(|| format!("{}: cannot read the profile directory", prof_dir.display()))?;
    for e in entries {
        let e = e.with_context(|| format!("{}: cannot read", prof_dir.display()))?;
        let path = e.path();
        let name = e.file_name();
        let Some(stem) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".sprof"))
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        profiles.insert(OsString::from(stem), path);
    }
    let mut found: BTreeMap<OsString, Vec<std::path::PathBuf>> = BTreeMap::new();
    for tree in trees {
        let meta = std::fs::symlink_metadata(tree)
            .with_context(|| format!("{}: cannot read", tree.display()))?;
        if meta.is_dir() {
            walk(tree, &mut found)?;
        } else if let Some(name) = tree.file_name() {
            if is_output(name) && is_linked_elf(tree) {
                found
                    .entry(name.to_os_string())
                    .or_default()
                    .push(tree.clone());
            }
        }
    }
    let mut out = Vec::new();
    for (stem, path) in profiles {
        let profile = fsio::read_profile(&path)?;
        let mut outputs = Vec::new();
        let mut paths = found.remove(&stem).unwrap_or_default();
        paths.sort();
        paths.dedup();
        for p in paths {
            let b = fsio::read_binary(&p)?;
            let keys: Vec<sediment_profile::FuncKey> =
                b.functions.iter().map(|f| f.key.clone()).collect();
            outputs.push(Applied {
                share: sediment_profile::binary_share(&profile, &keys),
                functions: keys.len(),
                stripped: b.from_dynsym,
                path: p,
            });
        }
        out.push(Applies {
            profile: path,
            outputs,
        });
    }
    let mut unprofiled: Vec<std::path::PathBuf> = found.into_values().flatten().collect();
    unprofiled.sort();
    unprofiled.dedup();
    Ok(Prebuild {
        profiles: out,
        unprofiled,
    })
}

/// Whether a file of this name may be a link's output: not a separate debug file.
fn is_output(name: &std::ffi::OsStr) -> bool {
    !name.as_encoded_bytes().ends_with(b".debug")
}

/// Collects under `dir` the regular files that are linked ELF files, by name.
fn walk(
    dir: &Path,
    found: &mut std::collections::BTreeMap<std::ffi::OsString, Vec<std::path::PathBuf>>,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("{}: cannot read", dir.display()))?;
    for e in entries {
        let e = e.with_context(|| format!("{}: cannot read", dir.display()))?;
        let kind = e
            .file_type()
            .with_context(|| format!("{}: cannot read", e.path().display()))?;
        let name = e.file_name();
        if kind.is_dir() {
            walk(&e.path(), found)?;
        } else if kind.is_file() && is_output(&name) && is_linked_elf(&e.path()) {
            found.entry(name).or_default().push(e.path());
        }
    }
    Ok(())
}

/// Whether `p` starts like an ELF executable or shared object (`e_type` ET_EXEC or ET_DYN):
/// what a link writes. Scripts of the same name (libtool's wrappers) and objects are not.
fn is_linked_elf(p: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 18];
    let Ok(mut f) = std::fs::File::open(p) else {
        return false;
    };
    if f.read_exact(&mut head).is_err() || &head[..4] != b"\x7fELF" {
        return false;
    }
    let e_type = match head[5] {
        1 => u16::from_le_bytes([head[16], head[17]]),
        2 => u16::from_be_bytes([head[16], head[17]]),
        _ => return false,
    };
    matches!(e_type, 2 | 3)
}
