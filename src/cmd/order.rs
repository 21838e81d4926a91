//! `sediment order` (being written).

/// Arguments of `sediment order`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `sediment order`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("sediment order: being written")
}
