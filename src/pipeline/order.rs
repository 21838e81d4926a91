//! The `order` stage.
