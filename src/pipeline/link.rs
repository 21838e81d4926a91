//! The `link` stage.
