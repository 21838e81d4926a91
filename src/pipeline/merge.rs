//! The `merge` stage.
