//! `sediment record` (being written).

/// Arguments of `sediment record`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `sediment record`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("sediment record: being written")
}
