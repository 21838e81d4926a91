//! `sediment link` (being written).

/// Arguments of `sediment link`.
#[derive(clap::Args)]
pub struct Args {}

/// Arguments of `sediment link-flags`.
#[derive(clap::Args)]
pub struct FlagsArgs {}

/// Runs `sediment link`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("sediment link: being written")
}

/// Runs `sediment link-flags`.
pub fn run_flags(_args: FlagsArgs) -> anyhow::Result<()> {
    anyhow::bail!("sediment link-flags: being written")
}
