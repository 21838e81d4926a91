//! The `measure` stage.
