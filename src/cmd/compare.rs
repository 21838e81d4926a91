//! `sediment compare` (being written).

/// Arguments of `sediment compare`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `sediment compare`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("sediment compare: being written")
}
