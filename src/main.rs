//! `sediment`: profile-guided code layout for Linux binaries. The command line lives in
//! [`sediment::cli`]; the stages it calls in [`sediment::pipeline`].

/// Counts what the process holds, for the import's memory limit (`sediment::membudget`).
#[global_allocator]
static ALLOCATOR: sediment::membudget::Counting = sediment::membudget::Counting;

fn main() {
    sediment::cli::main()
}
