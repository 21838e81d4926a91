//! `sediment wrappers DIR` and `sediment ld --real LINKER -- ARGS`: the per-executable
//! link-order step for package builds.
//!
//! A distribution builds thousands of executables with build systems Sediment does not control
//! (make, CMake, Meson, autotools under rpmbuild or dpkg-buildpackage). The one place every one
//! of them passes through is the compiler driver calling the linker, and both gcc and clang
//! look for the linker (`ld`, or `ld.lld`/`ld.gold`/`ld.bfd` with `-fuse-ld=`) in the `-B`
//! directories first. `sediment wrappers DIR` writes small shell shims of those names into DIR,
//! each running `sediment ld --real /usr/bin/<name> -- "$@"`; a build adds `-BDIR/` to its link
//! flags (LDFLAGS, `CMAKE_*_LINKER_FLAGS`, `c_link_args`, `%build_ldflags`) and nothing else
//! changes. `integrations/` has the snippets for RPM, CMake, Meson and make (docs/guide/packaging.md).
//!
//! At each link `sediment ld`:
//! 1. finds the output (`-o FILE`) and the profile for it: `$SEDIMENT_PROF_DIR` (or
//!    `$PROF_DIR`) `/<output base name>.sprof`, the naming `sediment record --prof-dir` writes;
//! 2. **safe default**: no profile directory, no profile for this output, an ordering option
//!    already on the command line, or mold -> the real linker runs with exactly the arguments
//!    it was given, so a package without profiles links byte-identically to a build without
//!    the wrappers. Response files (`@file`, which CMake, Ninja and Meson use for long lines,
//!    and the compiler driver then too) are read first ([`sediment_link::response`], GNU's
//!    quoting, nested files expanded); an ordered link passes the real linker one response
//!    file of its own with the whole line and the ordering option;
//! 3. otherwise orders the profile (`$SEDIMENT_ALGORITHM`, default `c3`), resolves the order
//!    against the ELF relocatable objects and archives on the command line (every argument
//!    that is such a file; option values like the dynamic linker or the LTO plugin are shared
//!    objects and are skipped by their ELF type; a `-lNAME` or `-l:FILE` is the file the linker
//!    would take, searched in the `-L` directories and the linker's own search path, which
//!    counts when it is a static archive: [`crate::pipeline::link::link_inputs`]), emits the input of the linker the shim stands
//!    for (detected from `LINKER --version`: LLD, GNU gold or GNU ld) into a private temporary
//!    directory (0700, the file 0600), and runs the real linker with the matching option
//!    appended. One line on standard error says what was applied: how many entries the
//!    linker's input holds, of how many profiled functions, and the warnings' count; each
//!    warning follows on its own line (`sediment ld: OUT: warning: ...`; each is one counted
//!    line naming the first few entries it is about), so the build log shows them.
//!    GNU ld before 2.43 takes a full `-T` script, made from its own default script for the
//!    link's mode (`ld --verbose` with the command line's `-shared`/`-pie`/`-no-pie`, `-z` and
//!    `-m` options: [`sediment_link::cmdline::script_mode_args`]), so executables and shared
//!    libraries alike; the summary line then comes after the link and ends with what the
//!    output's symbols show ([`crate::pipeline::verify`]).
//!
//! The command line is read by [`sediment_link::cmdline`]; resolving and emitting is the `link`
//! stage ([`crate::pipeline::link::link`]), the check after an LTO link the `verify` stage
//! ([`crate::pipeline::verify::verify`]).
//!
//! **LTO** (docs/guide/packaging.md, "LTO"). Distributions build with `-flto`: then the inputs are
//! LLVM bitcode or GCC LTO objects (alone or in archives, told by their first bytes and, for
//! GCC, their `.gnu.lto_*` sections: [`sediment_elf::objects::Lto`]) and the code the linker
//! places is generated inside the link, where no check can see it beforehand. What the
//! linkers were seen to do (clang 14, gcc 12, lld 14, gold 1.16, GNU ld 2.40; the tests in
//! `tests/it/packaging.rs` repeat it):
//! - lld generates the bitcode's code with one section per function and applies
//!   `--symbol-ordering-file` afterwards, by name; gold and GNU ld with LLVMgold.so do the
//!   same, and order those sections by name, unqualified patterns included.
//! - GCC's code generation (lto-wrapper, run by the plugin in gold and GNU ld) writes
//!   `.text.NAME` sections (`.text.s.lto_priv.0` for a renamed static) only when
//!   `-ffunction-sections` is among the *link-time* options, which lto-wrapper reads from
//!   `$COLLECT_GCC_OPTIONS`; given at compile time only, it is dropped and every function of a
//!   partition lands in one `.text`. gold's `--section-ordering-file` (with globs) and a full
//!   GNU ld script (with unqualified patterns) then order them.
//!
//! So with LTO inputs the order is checked against the ordinary objects only
//! ([`sediment_link::resolve_lto`]): the other entries are written by name
//! ([`sediment_link::lto_sections`]), and once the real linker has succeeded the output's
//! symbols are read and the summary line says how many of the profiled functions are there in
//! the intended order ([`crate::pipeline::verify`], [`sediment_link::check_order`]). A profile none of whose functions is in
//! the output is the same mistake as one matching none of the objects: one line naming the
//! profile, exit 1, and the output removed, so that no build goes on with it. A GCC LTO link
//! whose link-time options lack `-ffunction-sections` cannot be ordered: it links unchanged,
//! with one line saying so.
//!
//! **Stale profiles.** A profile recorded from an older version of the program may name
//! functions the link no longer has. When less than the least share of its weight
//! ([`DEFAULT_MIN_LINK_SHARE`], `$SEDIMENT_MIN_SHARE`, `wrappers --min-share`; `main` and the C
//! start-up code not counted: [`sediment_profile::binary_share`]) is in the functions of the
//! link's objects, the link runs unchanged with one line giving the share: an order guessed
//! from code that has changed is not applied. With LTO inputs the functions exist only after
//! the link, so that check is the one after it (none found fails the link).
//!
//! A corrupt profile is an error (one line naming the file, exit 1, nothing linked), not a
//! silent fallback: a packager who ships profiles wants to know one is broken. It is read and
//! parsed before the reasons to link unordered are looked at, so it fails every route, a link
//! that would not have been ordered anyway (`-r`, `-T`, mold) included. So is anything
//! else where the profile belongs (a directory, a symbolic link to nothing), and a profile
//! directory that is not a directory: only a name that does not exist is "no profile". A
//! profile that matches none of the objects is an error naming the profile, unless an input on
//! the command line could not be read: then it names that input (the link would fail on it
//! anyway). The real linker's exit status is passed on.
//!
//! Turned down: a compiler wrapper (`CC="sediment cc gcc"`): it would have to parse every
//! driver option of two compilers to find out whether a call links; the linker's own command
//! line, as the driver hands it over, is plain. Also turned down: writing the order file next
//! to the output (build systems glob their build directories at install time).

use crate::cli::vocab;
use crate::fsio;
use crate::pipeline::link::{self as link_stage, Bfd, SplitInputs};
use crate::pipeline::verify::{verify, Verified};
use anyhow::{anyhow, bail, Context, Result};
use sediment_link::cmdline::{
    has_plugin, output_of, script_mode_args, why_not_after_lto, why_not_ordered,
};
use sediment_link::response::{Expansion, MAX_EXPANSIONS};
use sediment_link::{BfdFlavor, Linker};
use sediment_order::{Algorithm, CallGraph};
use sediment_profile::FuncKey;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Linker names a shim is written for, with the Debian path they usually have.
const SHIMS: [&str; 4] = ["ld", "ld.bfd", "ld.gold", "ld.lld"];

/// Arguments of `sediment wrappers`.
#[derive(clap::Args)]
pub struct WrappersArgs {
    /// Directory to write the linker shims into (created if missing).
    pub dir: PathBuf,
    /// Profile directory baked into the shims (else `$SEDIMENT_PROF_DIR`/`$PROF_DIR` at link time).
    #[arg(long, value_name = "DIR")]
    pub prof_dir: Option<PathBuf>,
    /// Least share (0 to 1) of a profile's weight that must be in the functions of the link it
    /// is for, baked into the shims (else `$SEDIMENT_MIN_SHARE` at link time, default 0.5);
    /// below it the link is left unordered as one of a stale profile.
    #[arg(long, value_name = "SHARE", value_parser = vocab::parse_share)]
    pub min_share: Option<f64>,
}

/// Least share of a profile's weight that must be in the link's functions for the link to be
/// ordered, unless `$SEDIMENT_MIN_SHARE` or `wrappers --min-share` say otherwise. A profile of
/// the build it is used with finds all of its weight there (it was recorded from that
/// build), another version of the program most of it; when more than half of the weight
/// names functions the link does not have, the profile describes another program or a much
/// older version, and its order is a guess about code that has changed: linking unordered is
/// never worse than that (Go's promise for a stale PGO profile). `main` and the C start-up
/// code are not counted ([`sediment_profile::binary_share`]).
pub const DEFAULT_MIN_LINK_SHARE: f64 = 0.5;

/// The environment variable of the least share ([`DEFAULT_MIN_LINK_SHARE`]).
const MIN_SHARE_ENV: &str = "SEDIMENT_MIN_SHARE";

/// Arguments of `sediment ld`.
#[derive(clap::Args)]
pub struct LdArgs {
    /// The real linker to run.
    #[arg(long, value_name = "LINKER")]
    pub real: PathBuf,
    /// The linker's arguments, as the compiler driver passed them (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// Runs `sediment wrappers`: finds the linkers, then writes their shims as one set
/// (`fsio::replace_files`, executable), in DIR created if missing (`fsio::in_dir`), so a
/// failure (no linker on PATH, a directory in the way of a shim) leaves DIR as it was.
pub fn run_wrappers(args: WrappersArgs) -> Result<()> {
    let me = std::env::current_exe().context("cannot find the sediment executable")?;
    let prof_dir = match &args.prof_dir {
        Some(p) => {
            check_prof_dir(p, "--prof-dir")?;
            Some(
                std::path::absolute(p)
                    .with_context(|| format!("{}: cannot resolve", p.display()))?,
            )
        }
        None => None,
    };
    // The shim directory itself is skipped on PATH. One that does not exist yet cannot be on
    // PATH: its absolute path, which no existing directory resolves to, skips nothing.
    let skip = args
        .dir
        .canonicalize()
        .or_else(|_| std::path::absolute(&args.dir))
        .with_context(|| format!("{}: cannot resolve", args.dir.display()))?;
    let mut scripts = Vec::new();
    for name in SHIMS {
        let Some(real) = find_in_path(name, &skip) else {
            continue;
        };
        let mut script = String::from("#!/bin/sh\n# Written by `sediment wrappers`: orders this link from the profile of its output\n# when one exists (docs/guide/packaging.md); otherwise runs the real linker unchanged.\n");
        if let Some(p) = &prof_dir {
            script.push_str(&format!(
                "SEDIMENT_PROF_DIR={}\nexport SEDIMENT_PROF_DIR\n",
                sh_quote(p)
            ));
        }
        if let Some(share) = args.min_share {
            script.push_str(&format!(
                "{MIN_SHARE_ENV}={share}\nexport {MIN_SHARE_ENV}\n"
            ));
        }
        script.push_str(&format!(
            "exec {} ld --real {} -- \"$@\"\n",
            sh_quote(&me),
            sh_quote(&real)
        ));
        scripts.push((name, script));
    }
    if scripts.is_empty() {
        bail!(
            "{}: no linker (ld, ld.bfd, ld.gold, ld.lld) found on PATH; nothing written",
            args.dir.display()
        );
    }
    let dir = fsio::in_dir(&args.dir, || {
        let dir = args
            .dir
            .canonicalize()
            .with_context(|| format!("{}: cannot resolve", args.dir.display()))?;
        let paths: Vec<PathBuf> = scripts.iter().map(|(name, _)| dir.join(name)).collect();
        let set: Vec<fsio::Replacement<'_>> = paths
            .iter()
            .zip(&scripts)
            .map(|(path, (_, script))| {
                fsio::Replacement::write(path, script.as_bytes()).with_mode(0o755)
            })
            .collect();
        fsio::replace_files(&set)?;
        Ok(dir)
    })?;
    let written: Vec<&str> = scripts.iter().map(|(name, _)| *name).collect();
    eprintln!(
        "sediment wrappers: wrote {} to {}",
        written.join(", "),
        dir.display()
    );
    println!("-B{}/", dir.display());
    Ok(())
}

/// Refuses a profile directory that exists as something else (a regular file, say): every
/// link would look up `<it>/<output>.sprof` and fail. One that does not exist yet is fine, the
/// safe default: a package without profiles links unchanged (the RPM macros point at
/// `%{_sourcedir}/sediment-profiles` whether or not the package ships any). `what` names where
/// the directory came from.
fn check_prof_dir(dir: &Path, what: &str) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!(
            "{}: not a directory ({what} names the directory of <output>.sprof profiles)",
            dir.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => bail!("{}: cannot read ({what}): {e}", dir.display()),
    }
}

/// Runs `sediment ld`: plans the ordering, runs the real linker, checks an LTO link's output,
/// exits with the linker's status.
pub fn run_ld(args: LdArgs) -> Result<()> {
    let line = match link_stage::expand_response_files(&args.args) {
        Expansion::Plain => None,
        Expansion::Expanded(line) => Some(line),
        Expansion::TooDeep(first) => {
            eprintln!(
                "sediment ld: not ordered: the response file {} expands more than {MAX_EXPANSIONS} response files (does one name itself?)",
                Path::new(&first).display()
            );
            return run_unchanged(&args);
        }
    };
    let plan = plan(&args.real, line.as_deref().unwrap_or(&args.args))?;
    let Some(p) = &plan else {
        return run_unchanged(&args);
    };
    let mut command = Command::new(&args.real);
    match &line {
        // The linker gets the expanded line and the options in one response file of its own,
        // as long command lines are meant to be passed.
        Some(line) => {
            let all: Vec<OsString> = line.iter().chain(&p.extra).cloned().collect();
            command.arg(link_stage::write_response_file(p._dir.path(), &all)?)
        }
        None => command.args(&args.args).args(&p.extra),
    };
    let status = command
        .status()
        .with_context(|| format!("{}: cannot run the linker", args.real.display()))?;
    if let Some(p) = &plan {
        match &p.after {
            After::Nothing => {}
            After::Lto(check) if status.success() => check_after_lto(check)?,
            After::Lto(_) => {}
            After::Script(line) => report_script(line, status.success()),
        }
    }
    drop(plan);
    // The binary, not a library, ends the process: the exit code is the linker's.
    std::process::exit(status.code().unwrap_or(1));
}

/// Runs the real linker with exactly the arguments it was given and exits with its status.
fn run_unchanged(args: &LdArgs) -> Result<()> {
    let status = Command::new(&args.real)
        .args(&args.args)
        .status()
        .with_context(|| format!("{}: cannot run the linker", args.real.display()))?;
    std::process::exit(status.code().unwrap_or(1));
}

/// What to add to the link: the options, and the directory holding the file they name.
struct Plan {
    extra: Vec<OsString>,
    /// What is printed or checked once the linker has run.
    after: After,
    _dir: tempfile::TempDir,
}

/// What [`run_ld`] does once the linker has run.
enum After {
    /// Nothing: the summary line was printed before the link.
    Nothing,
    /// A link with LTO inputs: the output is checked once the linker has succeeded.
    Lto(AfterLto),
    /// A link through a full GNU ld script (ld before 2.43): the summary line is printed after
    /// the link, with what the output shows.
    Script(AfterScript),
}

/// The summary line of a full-script link, and what checking its output needs.
struct AfterScript {
    output: PathBuf,
    /// The summary line without its end (`sediment ld: OUT: ordered N of M ... from P`).
    line: String,
    /// The order's function names, hottest first.
    names: Vec<String>,
    warnings: Vec<String>,
}

/// Prints a full-script link's summary line, ending in what the output shows when the link
/// succeeded: how many of the placed functions are in the output in the intended order (GNU ld
/// takes a full script for a whole link mode, so the order is confirmed in the result), then
/// its warnings.
fn report_script(a: &AfterScript, linked: bool) {
    let end = if !linked {
        String::new()
    } else {
        match verify(&a.output, &a.names) {
            Verified::Checked(c) => format!(
                "; in the output: {} of the {} found in order",
                c.in_order, c.found
            ),
            Verified::Unchecked(why) => format!("; not checked: {why}"),
        }
    };
    eprintln!("{}{end}", a.line);
    print_warnings(&a.output, &a.warnings);
}

/// What [`check_after_lto`] needs: the output, the profile, the order's function names, and
/// the middle of the summary line (`c3, lld, 0 warnings`), and the warnings it counts.
struct AfterLto {
    output: PathBuf,
    profile: PathBuf,
    names: Vec<String>,
    how: String,
    warnings: Vec<String>,
}

/// Reads the symbols of an LTO link's output and prints the summary line: how many of the
/// profiled functions are in the output, in the intended order. None of them there means a
/// profile of another program: the output is removed and the link fails, naming the profile.
/// An output without a symbol table (`-s`) cannot be checked, which the line says.
fn check_after_lto(check: &AfterLto) -> Result<()> {
    let out = check.output.display();
    let c = match verify(&check.output, &check.names) {
        Verified::Checked(c) => c,
        Verified::Unchecked(why) => {
            eprintln!(
                "sediment ld: {out}: ordered after LTO, not checked: {why} ({}) from {}",
                check.how,
                check.profile.display()
            );
            print_warnings(&check.output, &check.warnings);
            return Ok(());
        }
    };
    if c.found == 0 {
        // Only a regular file the linker wrote is removed (never a device named by `-o`).
        if std::fs::symlink_metadata(&check.output).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&check.output).with_context(|| format!("{out}: cannot remove"))?;
        }
        bail!(
            "{}: order/profile does not match {out} after LTO (0 of {} functions in its symbol table; recorded from another program?); {out} removed",
            check.profile.display(),
            c.total
        );
    }
    eprintln!(
        "sediment ld: {out}: ordered after LTO: {} of {} profiled functions found in order in the output ({} found; {}) from {}",
        c.in_order,
        c.total,
        c.found,
        check.how,
        check.profile.display()
    );
    print_warnings(&check.output, &check.warnings);
    Ok(())
}

/// Prints the warnings the summary line of `output`'s link counts, one line each after it.
fn print_warnings(output: &Path, warnings: &[String]) {
    for w in warnings {
        eprintln!("sediment ld: {}: warning: {w}", output.display());
    }
}

/// Decides whether and how to order the link of `line` (the command line, its response files
/// expanded) by the linker `real`; `None` is the safe default (link unchanged).
fn plan(real: &Path, line: &[OsString]) -> Result<Option<Plan>> {
    let verbose = std::env::var_os("SEDIMENT_VERBOSE").is_some();
    let skip = |why: &str| {
        if verbose {
            eprintln!("sediment ld: not ordered: {why}");
        }
        Ok(None)
    };
    let Some((variable, prof_dir)) = crate::cli::vocab::prof_dir_from_env() else {
        return skip("no SEDIMENT_PROF_DIR or PROF_DIR");
    };
    let Some(output) = output_of(line) else {
        return skip("no -o on the command line");
    };
    let Some(base) = Path::new(&output).file_name() else {
        return skip("the output has no file name");
    };
    let mut profile_name = base.to_os_string();
    profile_name.push(".sprof");
    check_prof_dir(Path::new(&prof_dir), &format!("${variable}"))?;
    let profile_path = Path::new(&prof_dir).join(profile_name);
    // Only a name that is not there at all is "no profile"; anything else in its place (a
    // directory, a dangling link, a file that cannot be read) is a broken setup, and linking
    // unordered would hide it, like a corrupt profile. The profile is read and parsed before
    // any reason to skip ordering is looked at, so a broken one fails every link of its
    // output, ordered or not (`-r`, `-T`, mold). It is opened once,
    // without blocking (a FIFO there never hangs the link): [`fsio::read_profile_slot`].
    let profile = match fsio::read_profile_slot(&profile_path)? {
        fsio::ProfileSlot::Profile(p) => *p,
        fsio::ProfileSlot::Other(kind) => bail!(
            "{}: {} where the profile of {} should be; nothing linked",
            profile_path.display(),
            if kind.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            },
            Path::new(&output).display()
        ),
        fsio::ProfileSlot::Dangling => bail!(
            "{}: a symbolic link to nothing where the profile of {} should be; nothing linked",
            profile_path.display(),
            Path::new(&output).display()
        ),
        fsio::ProfileSlot::Missing => {
            return skip(&format!("no profile {}", profile_path.display()));
        }
    };
    if let Some(why) = why_not_ordered(line) {
        eprintln!(
            "sediment ld: {}: not ordered: {why}",
            Path::new(&output).display()
        );
        return Ok(None);
    }
    let min_share = match std::env::var_os(MIN_SHARE_ENV) {
        None => DEFAULT_MIN_LINK_SHARE,
        Some(v) => vocab::parse_share(&v.to_string_lossy())
            .map_err(|e| anyhow!("${MIN_SHARE_ENV}: {e}; nothing linked"))?,
    };
    let linker = link_stage::detect_linker(real)?;
    if linker == Linker::Mold {
        eprintln!(
            "sediment ld: {}: not ordered: mold cannot order functions (docs/design/linkers.md)",
            Path::new(&output).display()
        );
        return Ok(None);
    }
    let bfd = if linker == Linker::Bfd {
        link_stage::bfd_flavor(&real.to_string_lossy(), &script_mode_args(line))?
    } else {
        BfdFlavor::OrderingFile
    };

    let algorithm_name = std::env::var("SEDIMENT_ALGORITHM").unwrap_or_else(|_| "c3".to_string());
    let algorithm =
        Algorithm::from_name(&algorithm_name).map_err(|e| anyhow!("SEDIMENT_ALGORITHM: {e}"))?;
    let graph = CallGraph::from_profile(&profile);
    let order = crate::pipeline::order::order(&profile, &profile_path, &graph, algorithm)?;
    let inputs = link_stage::link_inputs(line, Path::new(real), linker)?;
    let SplitInputs { objects, lto } = link_stage::split_lto(&inputs, linker, has_plugin(line))?;
    if !lto.is_empty() {
        let collect_gcc_options = std::env::var_os("COLLECT_GCC_OPTIONS");
        if let Some(why) = why_not_after_lto(&lto, collect_gcc_options.as_deref()) {
            eprintln!(
                "sediment ld: {}: not ordered: {why}",
                Path::new(&output).display()
            );
            return Ok(None);
        }
        let linked = link_stage::link(link_stage::Request {
            linker,
            order: &order,
            objects: &objects,
            lto: true,
            bfd: Bfd::Known(&bfd),
        })
        .map_err(|e| anyhow!("{}: {e}", profile_path.display()))?;
        let (extra, dir) = link_stage::write_for_linker(linker, &bfd, &linked.emitted.text)?;
        let after_lto = AfterLto {
            output: PathBuf::from(&output),
            profile: profile_path.clone(),
            names: order.functions.iter().map(|k| k.name.clone()).collect(),
            how: format!(
                "{algorithm_name}, {linker}, {} warnings",
                linked.emitted.warnings.len()
            ),
            warnings: linked.emitted.warnings,
        };
        return Ok(Some(Plan {
            extra,
            after: After::Lto(after_lto),
            _dir: dir,
        }));
    }
    let paths: Vec<PathBuf> = inputs.into_iter().map(|(p, _)| p).collect();
    link_stage::check_defines_functions(&paths, &objects)?;
    let linked = link_stage::link(link_stage::Request {
        linker,
        order: &order,
        objects: &objects,
        lto: false,
        bfd: Bfd::Known(&bfd),
    })
    .map_err(|e| match e {
        // The objects the profile was checked against are the ones that could be read: with an
        // input missing, "the profile does not match" would blame the wrong file, and the
        // link fails on that input anyway.
        link_stage::Error::Resolve(e) => match link_stage::unreadable_inputs(line).first() {
            Some((path, why)) => anyhow!(
                "{}: input of the link of {}: {why}; nothing linked",
                path.display(),
                Path::new(&output).display()
            ),
            None => anyhow!("{}: {e}", profile_path.display()),
        },
        e => anyhow::Error::new(e),
    })?;
    let targets: Vec<FuncKey> = objects
        .iter()
        .flat_map(|o| &o.functions)
        .map(|f| FuncKey {
            name: f.name.clone(),
            file: f.file.clone(),
        })
        .collect();
    let share = sediment_profile::binary_share(&profile, &targets);
    if min_share > 0.0 && !share.is_enough(min_share) {
        eprintln!(
            "sediment ld: {}: not ordered: {:.1}% of the profile's weight is in functions of this link{}, below the least share {}% (${MIN_SHARE_ENV}); a stale profile? {}",
            Path::new(&output).display(),
            share.fraction() * 100.0,
            if share.generic_left_out { " (not counting main and the C start-up code)" } else { "" },
            min_share * 100.0,
            profile_path.display()
        );
        return Ok(None);
    }
    let (extra, dir) = link_stage::write_for_linker(linker, &bfd, &linked.emitted.text)?;
    let line = format!(
        "sediment ld: {}: ordered {} of {} profiled functions ({algorithm_name}, {linker}, {} warnings) from {}",
        Path::new(&output).display(),
        linked.emitted.written,
        linked.resolution.total,
        linked.emitted.warnings.len(),
        profile_path.display()
    );
    if matches!(bfd, BfdFlavor::FullScript { .. }) {
        return Ok(Some(Plan {
            extra,
            after: After::Script(AfterScript {
                output: PathBuf::from(&output),
                line,
                names: order.functions.iter().map(|k| k.name.clone()).collect(),
                warnings: linked.emitted.warnings,
            }),
            _dir: dir,
        }));
    }
    eprintln!("{line}");
    print_warnings(Path::new(&output), &linked.emitted.warnings);
    Ok(Some(Plan {
        extra,
        after: After::Nothing,
        _dir: dir,
    }))
}

/// `name` in `$PATH`, skipping `skip` (the wrapper directory itself).
fn find_in_path(name: &str, skip: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.canonicalize().ok().as_deref() != Some(skip))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// **Cross links**: `args` with the linker the link needs. A cross compiler driver given the
/// same `-B` reaches these shims too; the emulation it passes (`-m aarch64linux`) makes the
/// shim run that target's GNU ld or gold (`aarch64-linux-gnu-ld`) instead of the host's, and
/// lld as it is ([`crate::pipeline::target`]; docs/guide/packaging.md, "Every architecture
/// from one profile"). When the target's linker is not on `PATH`, one line says so and the
/// given linker runs.
pub fn for_target(args: LdArgs) -> LdArgs {
    let chosen = crate::pipeline::target::linker(&args.real, &args.args);
    if let Some(line) = &chosen.missing {
        eprintln!("sediment ld: {line}");
    }
    LdArgs {
        real: chosen.path,
        ..args
    }
}

/// `p` as one single-quoted shell word.
fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(sh_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
