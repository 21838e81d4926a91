//! sediment-measure (being written)
