//! The `tune` stage.
