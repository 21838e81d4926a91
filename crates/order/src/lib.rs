//! sediment-order (being written)
