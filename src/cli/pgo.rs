//! `sediment pgo --binary BIN -o PROFILE callgrind.out...`: the training run of a binary as
//! `llvm-profgen`'s unsymbolized profile, the first step of clang's sample PGO (AutoFDO)
//! without LBR hardware (docs/design/blocks.md, "Sample PGO from a VM profile"):
//!
//! ```sh
//! clang-16 -O2 -gline-tables-only -fdebug-info-for-profiling *.c -o app
//! valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes --callgrind-out-file=cg.out ./app ARGS
//! sediment pgo --binary app -o app.unsym cg.out
//! llvm-profgen --binary=app --unsymbolized-profile=app.unsym --output=app.afdo
//! clang-16 -O2 -gline-tables-only -fdebug-info-for-profiling -fprofile-sample-use=app.afdo *.c
//! ```
//!
//! Why a subcommand of its own rather than an `export` format: `export` rewrites Sediment
//! profiles (functions and call edges, no addresses) in other tools' formats, while this needs
//! the instruction-level counts of a callgrind file and the binary they were recorded on (the
//! same inputs as `blocks plan`), and its output feeds the compiler's optimizer rather than a
//! layout. It is one stage, "compiler profile from a VM training run", so one verb.
//!
//! This module reads the files, calls `sediment_import::callgrind::instr_counts` and
//! `sediment_import::llvm_unsymbolized::write`, and writes the result atomically.

use crate::fsio;
use anyhow::{bail, Result};
use sediment_elf::Binary;
use sediment_import::{callgrind, llvm_unsymbolized};
use std::path::PathBuf;

/// Arguments of `sediment pgo`.
#[derive(clap::Args)]
pub struct Args {
    /// The profiled binary, built with `-gline-tables-only -fdebug-info-for-profiling` (or
    /// `-g`) so that llvm-profgen can map addresses to source lines.
    #[arg(long, value_name = "FILE")]
    pub binary: PathBuf,
    /// callgrind.out of that binary, recorded with `--dump-instr=yes --collect-jumps=yes`
    /// (several for the parts of one run, e.g. `--dump-every-bb` or several threads).
    #[arg(value_name = "INPUT", required_unless_present = "profile_option")]
    pub inputs: Vec<PathBuf>,
    /// The old spelling of INPUT (`-p, --profile` names a Sediment profile in every other verb).
    #[arg(short = 'p', long = "profile", value_name = "FILE", hide = true)]
    pub profile_option: Vec<PathBuf>,
    /// Every callgrind.out given, INPUTs first (`Args::with_inputs` fills it).
    #[arg(skip)]
    pub profile: Vec<PathBuf>,
    /// Where to write the unsymbolized profile (input of `llvm-profgen
    /// --unsymbolized-profile`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
}

impl Args {
    /// The arguments with `profile` holding every input, under either spelling.
    fn with_inputs(mut self) -> Self {
        self.profile = std::mem::take(&mut self.inputs);
        self.profile.append(&mut self.profile_option);
        self
    }
}

/// Runs `sediment pgo`.
pub fn run(args: Args) -> Result<()> {
    let args = args.with_inputs();
    let bin_path = args.binary.display().to_string();
    let bytes = fsio::read_bytes(&args.binary)?;
    let binary = Binary::parse(&bin_path, &bytes)?;

    let mut texts = Vec::with_capacity(args.profile.len());
    for p in &args.profile {
        texts.push((p.display().to_string(), fsio::read_text(p)?));
    }
    let inputs: Vec<callgrind::Input<'_>> = texts
        .iter()
        .map(|(path, text)| callgrind::Input { path, text })
        .collect();
    // callgrind names the object by the path it was run as: matched by that path, else by a
    // unique base name.
    let counts = callgrind::instr_counts(&inputs, &bin_path, &binary, &bytes)?;
    if counts.jumps.is_empty() {
        bail!(
            "{}: no jump counts: record with valgrind --tool=callgrind --dump-instr=yes \
             --collect-jumps=yes (the taken branches LBR would have recorded)",
            args.profile[0].display()
        );
    }
    let written = llvm_unsymbolized::write(&bin_path, &binary.segments, &counts)?;
    // A recording of the binary itself has every address in its code (PLT stubs included).
    // callgrind names the object by path and base name only, so another build of the same name
    // gets this far; its addresses fall mostly outside (or anywhere), and the counts would
    // steer the compiler wrong. Most outside: refused; a few: left out with a warning.
    let kept = written.ranges + written.branches;
    if written.outside > kept {
        bail!(
            "{}: {} of the {} executed addresses recorded lie outside {bin_path}'s code: \
             recorded on another build of it? (record again on {bin_path})",
            args.profile[0].display(),
            written.outside,
            written.outside + kept
        );
    }
    if !sediment_elf::has_section(&bytes, ".debug_line") {
        eprintln!(
            "sediment: warning: {bin_path} has no .debug_line: llvm-profgen cannot map its \
             addresses to source lines (build with -gline-tables-only -fdebug-info-for-profiling)"
        );
    }
    if written.outside > 0 {
        eprintln!(
            "sediment: warning: {} addresses outside {bin_path}'s code were left out",
            written.outside
        );
    }
    fsio::write_atomic(&args.output, written.text.as_bytes())?;
    eprintln!(
        "sediment: wrote {} ({} instructions executed {} times, {} taken branches and calls; \
         offsets from {:#x})",
        args.output.display(),
        written.ranges,
        written.instructions,
        written.branches,
        written.base
    );
    eprintln!(
        "sediment: next: llvm-profgen --binary={bin_path} --unsymbolized-profile={} \
         --output=PROFILE, then clang -fprofile-sample-use=PROFILE",
        args.output.display()
    );
    Ok(())
}
