//! The shared vocabulary of the command line: the value parsers and option definitions every
//! verb that takes the same noun uses, so one noun has one flag, one value name and one meaning
//! everywhere (see `docs/reference/vocabulary.md` and the test that walks the command tree).

use sediment_order::Algorithm;

/// `--algorithm`'s value, in every verb that takes one (`order`, `blocks plan`).
pub fn parse_algorithm(name: &str) -> Result<Algorithm, String> {
    Algorithm::from_name(name).map_err(|e| e.to_string())
}
