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

pub mod import;
pub mod link;
pub mod measure;
pub mod merge;
pub mod order;
pub mod timings;
pub mod tune;
pub mod verify;
