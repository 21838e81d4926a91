//! The `verify` stage: after the link, how much of an order the linked output follows.
//!
//! The output's function symbols are read and handed to [`sediment_link::check_order`]: how
//! many of the order's functions are in the output, and how many of those in the intended
//! relative order. It is the check of an LTO link (whose functions only exist once the linker
//! has run code generation), and of any link whose order should be confirmed.

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
