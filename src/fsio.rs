//! File handling shared by every subcommand: bounded reads and atomic writes.
//!
//! Outputs are written to a temporary file in the destination directory and renamed into place,
//! so a failed or interrupted run never leaves a half-written profile, order file or script.
//! Inputs are read with a size cap, so a stranger's file cannot exhaust memory.

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::path::Path;

/// Largest input file any subcommand reads into memory (1 GiB).
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Reads a whole file as bytes, refusing files larger than [`MAX_INPUT_BYTES`].
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX_INPUT_BYTES {
        bail!(
            "{}: file is {len} bytes, larger than the {MAX_INPUT_BYTES}-byte limit",
            path.display()
        );
    }
    let mut buf = Vec::with_capacity(len as usize);
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("{}: read failed", path.display()))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        bail!(
            "{}: larger than the {MAX_INPUT_BYTES}-byte limit",
            path.display()
        );
    }
    Ok(buf)
}

/// Reads a whole UTF-8 text file (size-capped like [`read_bytes`]).
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Writes `contents` to `path` atomically: a temporary file beside it, then a rename.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| {
        format!(
            "{}: cannot create a temporary file in {}",
            path.display(),
            dir.display()
        )
    })?;
    tmp.write_all(contents)
        .and_then(|()| tmp.flush())
        .with_context(|| format!("{}: write failed", path.display()))?;
    tmp.persist(path).map_err(|e| {
        anyhow::anyhow!("{}: cannot rename into place: {}", path.display(), e.error)
    })?;
    Ok(())
}

/// Writes a profile atomically and says so on stderr with its counts (and, for a profile merged
/// from several recordings, how many).
pub fn write_profile(path: &Path, p: &sediment_profile::Profile) -> Result<()> {
    write_atomic(path, p.to_text().as_bytes())?;
    let recordings = p
        .meta
        .extra
        .get(sediment_profile::META_RECORDINGS)
        .map_or(String::new(), |n| format!(", {n} recordings"));
    eprintln!(
        "sediment: wrote {} ({}: {} {}, {} functions, {} calls{recordings})",
        path.display(),
        p.meta.binary,
        p.meta.total,
        p.meta.event.as_deref().unwrap_or("weight"),
        p.functions.len(),
        p.edges.len()
    );
    Ok(())
}

/// Reads and parses a Sediment profile; errors name the file.
pub fn read_profile(path: &Path) -> Result<sediment_profile::Profile> {
    let text = read_text(path)?;
    sediment_profile::Profile::from_text(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Reads a linked ELF file's function symbols; errors name the file.
pub fn read_binary(path: &Path) -> Result<sediment_elf::Binary> {
    let data = read_bytes(path)?;
    // The crate's errors already name the file.
    Ok(sediment_elf::Binary::parse(
        &path.display().to_string(),
        &data,
    )?)
}
