//! The `verify` stage.
