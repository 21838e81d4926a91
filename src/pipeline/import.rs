//! The `import` stage.
