//! `sediment demo` (being written).

/// Arguments of `sediment demo`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `sediment demo`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("sediment demo: being written")
}
