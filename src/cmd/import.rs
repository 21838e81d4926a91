//! `sediment import` (being written).

/// Arguments of `sediment import`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `sediment import`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("sediment import: being written")
}
