//! The pipeline as functions: one verb-named stage function per step, typed inputs and outputs,
//! each timed with [`timings::stage`].
//!
//! ```text
//! import / record  ->  merge  ->  order  ->  link  ->  verify
//!                         measure (beside every step)
//! ```
//!
//! A stage reads and writes no file it was not handed, and prints nothing: it returns what it
//! found (warnings included) and its caller decides how to show it. The verbs in [`crate::cli`],
//! the demo, the linker shims and the bench all call these functions.

pub mod align;
pub mod bundle;
pub mod import;
pub mod link;
pub mod measure;
pub mod merge;
pub mod order;
pub mod record;
pub mod relink;
pub mod target;
pub mod timings;
pub mod tune;
pub mod verify;

/// Refuses a profile of another program: fails, naming `profile_path`, when `share` (from
/// [`sediment_profile::binary_share`]) is below [`sediment_profile::DEFAULT_MIN_SHARE`].
/// `binaries` names the file or files the share was measured on.
pub fn require_share(
    profile_path: &std::path::Path,
    binaries: &str,
    share: sediment_profile::Share,
) -> anyhow::Result<()> {
    sediment_profile::require_share(share, sediment_profile::DEFAULT_MIN_SHARE, binaries)
        .map_err(|e| anyhow::anyhow!("{}: {e}", profile_path.display()))
}
