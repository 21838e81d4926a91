//! sediment-elf (being written)
