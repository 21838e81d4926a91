//! `sediment import`: a profiler's output file -> Sediment profiles.
//!
//! The `import` stage ([`crate::pipeline::import`]) reads the input: `perf.data` goes through
//! `sediment_import::perf::read`, which asks for the bytes of each binary that got samples
//! (read from the path perf recorded, or from `--binary` for the binary of that base name).
//! `callgrind.out` goes through `sediment_import::callgrind::import`, which gets each object's
//! binary the same way and attributes costs by instruction address (captures made with
//! `--dump-instr=yes`, as `sediment record` makes them) or, failing that, binds names to the
//! binary's symbols.
//!
//! Output, shared with `sediment record`: the main executable's profile goes to `-o FILE`, every
//! other binary that got samples to `FILE.<basename>.sprof` beside it (FILE without its `.sprof`). All files are written
//! atomically, and only after every input was read, so a failed import writes nothing.

use crate::fsio;
use crate::pipeline::import;
use anyhow::Result;
use sediment_import::perf::Mode;
use std::path::PathBuf;

/// Input formats `sediment import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `perf.data` from `perf record -e cpu-clock -g`, or with LBR branch stacks from
    /// `perf record -e branches:u -j any_call` (see docs/design/branch-stacks.md).
    Perf,
    /// `callgrind.out` from `valgrind --tool=callgrind`.
    Callgrind,
    /// Text output of `perf script` (call graphs, or `-F ip,sym,brstacksym`): the fallback
    /// when only text was shared. Names are bound to `--binary` (or the recorded dso paths).
    PerfScript,
    /// BOLT `.fdata` (LBR or `no_lbr` form). Needs `--binary`: the file does not name it.
    Fdata,
    /// gprof `gmon.out` (call arcs and histogram) of a `-pg` build. Needs `--binary`.
    Gprof,
    /// pprof `profile.proto` (gzip or raw), as exported by Go, Parca, Pyroscope and Cloud
    /// Profiler; the first mapping is the main executable.
    Pprof,
    /// GCC `-fcallgraph-info` `.ci` files, one per translation unit (give them all): a static
    /// call graph without counts, low confidence. Needs `--program`.
    GccCallgraph,
    /// Relocatable objects (`.o`, `.a`; give them all): a static call graph from their
    /// relocations (calls and functions whose address is taken), from any compiler, low
    /// confidence. Needs `--program`.
    Objects,
    /// The historical Sediment `.gv` call graph (Graphviz DOT, one cluster per executable);
    /// the first cluster is the main executable unless `--cluster` names another.
    Gv,
    /// Sediment's Parquet table (docs/design/parquet.md): one profile per binary (build-id,
    /// else base name), several submissions of one binary merged with their `weight`; the
    /// binary of the first profile row is the main executable unless `--cluster` names one.
    Parquet,
}

/// Arguments of `sediment import`.
#[derive(clap::Args)]
pub struct Args {
    /// Format of INPUT.
    #[arg(long, value_enum)]
    pub format: Format,
    /// The binary the input describes, read from FILE: for perf, perf-script and callgrind,
    /// instead of the path the profiler recorded, and only the binary of this base name is
    /// imported; fdata and gprof need it (their files name no binary).
    #[arg(long, value_name = "FILE")]
    pub binary: Option<PathBuf>,
    /// gcc-callgraph and objects: the program the static call graph is for, as it will be
    /// linked (its profile's binary name; its symbols are used when the file exists already).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["binary", "cluster"])]
    pub program: Option<PathBuf>,
    /// gv and parquet: import only the executable of this base name (gv: its cluster; parquet:
    /// its profile, or one per build-id); default: every one, the first being the main one.
    #[arg(long, value_name = "NAME", conflicts_with = "binary")]
    pub cluster: Option<PathBuf>,
    /// perf, perf-script and pprof only: `leaf` (default; one caller -> sampled-function edge
    /// per sample, hfsort) or `chain` (every adjacent pair of the call chain). Refused for the
    /// other formats, which hold counted calls or a static graph, not sampled chains.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub mode: Option<Mode>,
    /// Who sent the input (a host name, a user id): written as `meta submitter` of every
    /// profile, for `sediment merge --per-submitter` and the Parquet `submitter` column.
    #[arg(long, value_name = "NAME")]
    pub submitter: Option<String>,
    /// When the input was recorded, in integer Unix seconds UTC: written as `meta recorded-at`
    /// of every profile, for `sediment merge --half-life`.
    #[arg(long, value_name = "UNIX_SECONDS", allow_negative_numbers = true)]
    pub recorded_at: Option<i64>,
    /// The profiler's output file (several only for `gcc-callgraph`, one `.ci` per
    /// translation unit, `objects`, every object of the program, `callgrind`, one file per
    /// thread or process, summed, and `pprof`, one file per host or time window, each
    /// binary's windows merged as `sediment merge` merges inputs of weight 1).
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the main executable's profile; others go to `FILE.<basename>.sprof` with FILE's `.sprof` dropped (`app.sprof` -> `app.libz.so.1.sprof`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// The bytes this run may read, the inputs and every binary they name together (each
    /// file is also held to 1 GiB); an input or binary that would pass it is refused, naming
    /// it and the limit. Default: `SEDIMENT_MAX_INPUT_BYTES`, else 4 GiB.
    #[arg(long, value_name = "BYTES")]
    pub max_input_bytes: Option<u64>,
    /// The memory this run may hold while it imports, every input and every binary they name
    /// together; an import that needs more stops with one line naming the input being read and
    /// the limit, and writes nothing. Default: `SEDIMENT_MAX_MEMORY`, else three quarters of
    /// the machine's memory.
    #[arg(long, value_name = "BYTES")]
    pub max_memory: Option<u64>,
}

/// Clap parser for `--mode`.
pub fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

impl From<Format> for import::Format {
    fn from(f: Format) -> Self {
        match f {
            Format::Perf => import::Format::Perf,
            Format::Callgrind => import::Format::Callgrind,
            Format::PerfScript => import::Format::PerfScript,
            Format::Fdata => import::Format::Fdata,
            Format::Gprof => import::Format::Gprof,
            Format::Pprof => import::Format::Pprof,
            Format::GccCallgraph => import::Format::GccCallgraph,
            Format::Objects => import::Format::Objects,
            Format::Gv => import::Format::Gv,
            Format::Parquet => import::Format::Parquet,
        }
    }
}

/// Runs `sediment import`.
pub fn run(args: Args) -> Result<()> {
    // One binary option per meaning (`--binary` still names any of them, its old use).
    let binary = args.binary.or(args.program).or(args.cluster);
    let options = import::Options {
        binary,
        mode: args.mode,
        max_input_bytes: args.max_input_bytes,
        max_memory: args.max_memory,
        ..import::Options::default()
    };
    let mut imported = import::import(args.format.into(), &args.inputs, &options)?;
    import::label(&mut imported, args.submitter.as_deref(), args.recorded_at);
    let out = import::outputs(&args.output, imported)?;
    fsio::write_profiles(&out.as_set(), &out.warnings)
}
