//! `sediment`: profile-guided code layout for Linux binaries. The command line lives in
//! [`sediment::cli`]; the stages it calls in [`sediment::pipeline`].

fn main() {
    sediment::cli::main()
}
