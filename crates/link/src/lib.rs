//! sediment-link (being written)
