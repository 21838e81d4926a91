//! "Is this profile for this binary?": how much of a profile's weight lands on functions a
//! binary defines ([`binary_share`]), and the check every caller that binds a profile to a
//! binary by name makes with it ([`require_share`]).
//!
//! A profile of another program shares next to none of its names with a binary, another build
//! of the same program keeps most of them; so below a least share ([`DEFAULT_MIN_SHARE`]) or
//! with nothing matched at all, the profile is taken for one of another program. The share
//! leaves out the names every C program defines (`main`, `_start` and the C runtime's start-up
//! code, [`generic_name`]): they say nothing about which program a profile is of, and a profile
//! whose weight sits mostly in `main` would otherwise fit any program.
//!
//! No I/O: the caller reads the binary and passes its function keys.

use crate::{match_profile, Error, FuncKey, Profile};

/// Default least share of a profile's weight that must name functions of the binary it is
/// used with. A profile of another program shares next to none of its names (0% for the
/// audit's unrelated programs and for a libc profile against a program); another build of the
/// same program keeps most (83% in docs/design/merging.md's example, which renames and
/// clones). 10% leaves room for builds that inline or rename much (LTO) and still refuses
/// strangers.
pub const DEFAULT_MIN_SHARE: f64 = 0.1;

/// Start-up code from the C runtime's own objects (`crt1.o`, `crtbegin.o`): it runs, so it is
/// in a profile and an order, but it is not in the user's objects and the linker places it
/// where it likes.
pub const C_RUNTIME: &[&str] = &[
    "_start",
    "_init",
    "_fini",
    "__do_global_dtors_aux",
    "deregister_tm_clones",
    "register_tm_clones",
    "frame_dummy",
];

/// Whether every C program defines `name`: `main` and the start-up code of the C runtime's
/// own objects ([`C_RUNTIME`]). Finding them in a binary says nothing about which program a
/// profile is of (a profile whose weight sits mostly in `main` would otherwise fit any
/// program), so [`binary_share`] leaves them out while the profile has weight elsewhere.
pub fn generic_name(name: &str) -> bool {
    name == "main" || C_RUNTIME.contains(&name)
}

/// How much of a profile's weight lands on a binary's functions (see [`binary_share`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Weight of the profile functions counted that matched a function of the binary.
    pub found: u64,
    /// Weight of the profile functions counted.
    pub total: u64,
    /// True when functions [`generic_name`] accepts, with weight, were left out of both sums.
    pub generic_left_out: bool,
}

impl Share {
    /// `found` over `total`, from 0 to 1 (1 for a profile with nothing to count).
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            self.found as f64 / self.total as f64
        }
    }

    /// Whether the share is enough for a profile of the binary: at least `min`, with something
    /// matched (a profile with nothing to count is always enough).
    pub fn is_enough(&self, min: f64) -> bool {
        self.total == 0 || (self.found > 0 && self.fraction() >= min)
    }
}

/// The share of `profile`'s self weight whose functions `targets` (a binary's function keys)
/// define, by the rules of [`match_profile`] (same key, same name, same name without clone
/// suffixes). Functions [`generic_name`] accepts are left out when the others carry weight. A
/// profile without weights (a static call graph) counts functions instead.
pub fn binary_share(profile: &Profile, targets: &[FuncKey]) -> Share {
    let (mapping, _) = match_profile(profile, targets);
    let weightless = profile.functions.iter().all(|f| f.self_weight == 0);
    let mut all = (0u64, 0u64);
    let mut specific = (0u64, 0u64);
    for (f, m) in profile.functions.iter().zip(&mapping.matches) {
        let w = if weightless { 1 } else { f.self_weight };
        let found = if m.is_some() { w } else { 0 };
        all = (all.0.saturating_add(found), all.1.saturating_add(w));
        if !generic_name(&f.key.name) {
            specific = (
                specific.0.saturating_add(found),
                specific.1.saturating_add(w),
            );
        }
    }
    let generic_left_out = specific.1 > 0 && specific.1 < all.1;
    let (found, total) = if specific.1 > 0 { specific } else { all };
    Share {
        found,
        total,
        generic_left_out,
    }
}

/// [`Error::ForeignProfile`] when `share` is below `min` or nothing matched at all (a profile
/// of another program). `binaries` names the file or files the share was measured on (joined
/// with "or" by the caller); the caller puts the profile's name before the message.
pub fn require_share(share: Share, min: f64, binaries: &str) -> Result<(), Error> {
    if share.is_enough(min) {
        return Ok(());
    }
    Err(Error::ForeignProfile {
        share,
        min,
        binaries: binaries.to_string(),
    })
}

/// The note [`Error::ForeignProfile`] adds when generic names were left out.
pub(crate) fn generic_note(share: &Share) -> &'static str {
    if share.generic_left_out {
        " (not counting main and the C start-up code)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Meta, ProfileBuilder};

    fn profile(weights: &[(&str, u64)]) -> Profile {
        let mut b = ProfileBuilder::new(Meta {
            binary: "p".into(),
            ..Meta::default()
        });
        for &(name, w) in weights {
            b.add_self(&FuncKey::global(name), w);
        }
        b.build()
    }

    // `main` and the C start-up code are left out while other functions carry weight: a
    // profile of another program sharing only them is refused, with the note saying so.
    #[test]
    fn generic_names_do_not_make_a_profile_fit() {
        let p = profile(&[("main", 90), ("_start", 5), ("work", 5)]);
        let targets = [FuncKey::global("main"), FuncKey::global("_start")];
        let share = binary_share(&p, &targets);
        assert_eq!(
            share,
            Share {
                found: 0,
                total: 5,
                generic_left_out: true
            }
        );
        let e = require_share(share, DEFAULT_MIN_SHARE, "bin").unwrap_err();
        assert_eq!(
            e.to_string(),
            "only 0.0% of the profile's weight (not counting main and the C start-up code) is in functions bin defines, 10% needed (a profile of another program?)"
        );
        // Only generic names: they are counted.
        let only = profile(&[("main", 3)]);
        assert!(require_share(binary_share(&only, &targets), 0.5, "bin").is_ok());
    }
}
