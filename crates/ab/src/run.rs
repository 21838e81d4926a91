//! Running the two commands: interleaving, pinning, and measuring one run.
//!
//! Each run is a direct `fork`+`exec` of the command (no shell; write `sh -c '...'` for one),
//! optionally prefixed by `taskset -c CPU` and, when the CPU has hardware counters, by
//! `perf stat -x, -o FILE -e EVENTS --`. The parent reaps the child with `wait4(2)`, whose
//! `struct rusage` gives exactly that child's (and its reaped descendants') user and system
//! time, maximum resident set and page faults, with no race against other children of this
//! process (the `getrusage(RUSAGE_CHILDREN)`-delta alternative would also count any other
//! child reaped meanwhile). Wall time is a monotonic `Instant` around spawn and reap.
//!
//! When perf wraps the command, the rusage numbers include perf's own start-up (a few
//! milliseconds of CPU and its resident set); both A and B pay it equally, and `task-clock`
//! from perf is the command's own CPU time. When no hardware counter is supported (virtual
//! machines, containers without `perf_event_paranoid` access) perf is not used at all and the
//! rusage numbers are the command's alone.
//!
//! The command's standard output is discarded and its standard error goes to a temporary
//! file, so that a failure can quote its last line.

use crate::{Error, Metric, Samples, Side};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The perf events asked for, with the metric each becomes. `task-clock` is always available
/// where perf runs at all; the four hardware/cache events are what the CPU may lack.
pub const PERF_EVENTS: [(&str, Metric); 5] = [
    ("task-clock", Metric::TaskClock),
    ("cycles", Metric::Cycles),
    ("instructions", Metric::Instructions),
    ("L1-icache-load-misses", Metric::L1iMisses),
    ("iTLB-load-misses", Metric::ItlbMisses),
];

/// What [`detect_perf`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerfSupport {
    /// Events perf counted in a trial run; empty when perf is not used.
    pub events: Vec<&'static str>,
    /// Perf metrics that are not measured (unsupported, or perf unusable).
    pub unavailable: Vec<Metric>,
}

/// Runs `perf stat -x, -e <all PERF_EVENTS> true` once and keeps the events it counted.
/// If none of the hardware events is supported, perf is not used at all (the rusage numbers
/// cover CPU time) and every perf metric is reported unavailable.
pub fn detect_perf() -> PerfSupport {
    let all: Vec<&str> = PERF_EVENTS.iter().map(|(e, _)| *e).collect();
    let unusable = PerfSupport {
        events: Vec::new(),
        unavailable: PERF_EVENTS.iter().map(|(_, m)| *m).collect(),
    };
    let Ok(dir) = tempfile::tempdir() else {
        return unusable;
    };
    let out = dir.path().join("perf-stat.csv");
    let ok = Command::new("perf")
        .args(["stat", "-x,", "-o"])
        .arg(&out)
        .args(["-e", &all.join(","), "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let Ok(text) = std::fs::read_to_string(&out) else {
        return unusable;
    };
    if !ok {
        return unusable;
    }
    let counted = parse_perf_csv(&text);
    let events: Vec<&'static str> = PERF_EVENTS
        .iter()
        .filter(|(e, _)| counted.iter().any(|(name, _)| name == e))
        .map(|(e, _)| *e)
        .collect();
    if !events.iter().any(|e| *e != "task-clock") {
        return unusable;
    }
    let unavailable = PERF_EVENTS
        .iter()
        .filter(|(e, _)| !events.contains(e))
        .map(|(_, m)| *m)
        .collect();
    PerfSupport {
        events,
        unavailable,
    }
}

/// Parses `perf stat -x,` output: `value,unit,event,...` lines; comments (`#`), blank lines
/// and `<not supported>`/`<not counted>` values are skipped. Returns (event, value) pairs.
pub fn parse_perf_csv(text: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut fields = line.split(',');
        let (Some(value), Some(_unit), Some(event)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if let Ok(v) = value.trim().parse::<f64>() {
            // perf may suffix the event with modifiers (`cycles:u`); keep the base name.
            let name = event.split(':').next().unwrap_or(event).trim();
            out.push((name.to_string(), v));
        }
    }
    out
}

/// One command to compare: the program and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine(pub Vec<String>);

impl CommandLine {
    /// The command as one line, for messages and reports (arguments with spaces quoted).
    pub fn display(&self) -> String {
        self.0
            .iter()
            .map(|a| {
                if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                    format!("'{}'", a.replace('\'', r"'\''"))
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How to run the comparison.
#[derive(Clone, Debug)]
pub struct Options {
    /// Measured runs of each command.
    pub runs: usize,
    /// Unmeasured runs of each command first (interleaved the same way).
    pub warmup: usize,
    /// Pin every run to this CPU with `taskset -c`.
    pub pin: Option<usize>,
    /// Alternate the order of each pair (A B, B A, A B, ...) to cancel linear drift
    /// (thermal throttling, a background job starting) instead of always A B.
    pub alternate: bool,
    /// Perf events to count (from [`detect_perf`]); empty = no perf.
    pub perf_events: Vec<&'static str>,
}

/// The schedule of runs: `(side, index among the measured runs or None for warm-up)`.
/// Pair `i` is A then B, or B then A for odd `i` when `alternate` is set (ABBA order).
pub fn schedule(opts: &Options) -> Vec<(Side, Option<usize>)> {
    let mut out = Vec::with_capacity(2 * (opts.warmup + opts.runs));
    for i in 0..opts.warmup + opts.runs {
        let measured = i.checked_sub(opts.warmup);
        let pair = if opts.alternate && i % 2 == 1 {
            [Side::B, Side::A]
        } else {
            [Side::A, Side::B]
        };
        out.extend(pair.into_iter().map(|s| (s, measured)));
    }
    out
}

/// Runs A and B according to [`schedule`], calling `progress(done, total)` after every run.
/// Fails at the first run whose exit status is not 0, naming the command and the run.
pub fn run_ab(
    a: &CommandLine,
    b: &CommandLine,
    opts: &Options,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Samples, Error> {
    let dir = tempfile::tempdir().map_err(Error::TempDir)?;
    let mut samples = Samples::default();
    let plan = schedule(opts);
    for (done, (side, measured)) in plan.iter().enumerate() {
        let cmd = match side {
            Side::A => a,
            Side::B => b,
        };
        let run_label = match measured {
            Some(i) => format!("run {}", i + 1),
            None => format!("warm-up run {}", done / 2 + 1),
        };
        let values = run_once(cmd, opts, dir.path()).map_err(|detail| Error::CommandFailed {
            side: *side,
            command: cmd.display(),
            run: run_label,
            detail,
        })?;
        if measured.is_some() {
            let dst = match side {
                Side::A => &mut samples.a,
                Side::B => &mut samples.b,
            };
            for (m, v) in values {
                dst.entry(m).or_default().push(v);
            }
        }
        progress(done + 1, plan.len());
    }
    Ok(samples)
}

/// Runs the command once and returns its metrics, or a one-line description of the failure.
fn run_once(cmd: &CommandLine, opts: &Options, dir: &Path) -> Result<Vec<(Metric, f64)>, String> {
    let perf_out = dir.join("perf-stat.csv");
    let stderr_path = dir.join("stderr");
    let mut argv: Vec<String> = Vec::new();
    if let Some(cpu) = opts.pin {
        argv.extend(["taskset".into(), "-c".into(), cpu.to_string()]);
    }
    if !opts.perf_events.is_empty() {
        argv.extend(["perf".into(), "stat".into(), "-x,".into(), "-o".into()]);
        argv.push(perf_out.to_string_lossy().into_owned());
        argv.extend(["-e".into(), opts.perf_events.join(","), "--".into()]);
    }
    argv.extend(cmd.0.iter().cloned());
    let stderr_file = std::fs::File::create(&stderr_path)
        .map_err(|e| format!("cannot create {}: {e}", stderr_path.display()))?;

    let start = Instant::now();
    let mut command = Command::new(&argv[0]);
    // Killed with us (PR_SET_PDEATHSIG): a stopped `sediment stat` leaves no run behind.
    // SAFETY: prctl between fork and exec is async-signal-safe and allocates nothing.
    unsafe {
        command.pre_exec(
            || match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            },
        );
    }
    let child = command
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr_file)
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", argv[0]))?;
    let (status, usage) = wait4(child.id())?;
    let wall = start.elapsed().as_secs_f64();
    // `child` was reaped by wait4 above; dropping a std Child never waits or kills.
    drop(child);

    if !status.success() {
        let how = match (status.code(), status.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => "abnormal exit".to_string(),
        };
        let last = last_line(&stderr_path);
        return Err(if last.is_empty() {
            how
        } else {
            format!("{how}: {last}")
        });
    }

    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let (user, sys) = (tv(usage.ru_utime), tv(usage.ru_stime));
    let mut values = vec![
        (Metric::WallTime, wall),
        (Metric::CpuTime, user + sys),
        (Metric::UserTime, user),
        (Metric::SysTime, sys),
        (Metric::MaxRss, usage.ru_maxrss as f64),
        (Metric::MinorFaults, usage.ru_minflt as f64),
        (Metric::MajorFaults, usage.ru_majflt as f64),
    ];
    if !opts.perf_events.is_empty() {
        let text = std::fs::read_to_string(&perf_out)
            .map_err(|e| format!("cannot read perf stat output: {e}"))?;
        let counted = parse_perf_csv(&text);
        for (event, metric) in PERF_EVENTS {
            if !opts.perf_events.contains(&event) {
                continue;
            }
            let Some((_, v)) = counted.iter().find(|(n, _)| n == event) else {
                return Err(format!("perf stat did not count {event}"));
            };
            values.push((metric, *v));
        }
    }
    Ok(values)
}

/// Reaps `pid` with `wait4(2)`, retrying on EINTR.
fn wait4(pid: u32) -> Result<(std::process::ExitStatus, libc::rusage), String> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; all-zero is a valid value that wait4 overwrites.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; pid is our own unreaped child.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if r == pid as libc::pid_t {
            return Ok((std::process::ExitStatus::from_raw(status), usage));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4 failed: {err}"));
        }
    }
}

/// Last non-empty line of the command's standard error (first 200 characters), read from
/// at most its final 64 KiB.
fn last_line(path: &Path) -> String {
    const TAIL: u64 = 64 * 1024;
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = Vec::new();
    use std::io::Seek;
    if f.seek(std::io::SeekFrom::Start(len.saturating_sub(TAIL)))
        .is_err()
        || f.take(TAIL).read_to_end(&mut buf).is_err()
    {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    line.trim().chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(runs: usize, warmup: usize, alternate: bool) -> Options {
        Options {
            runs,
            warmup,
            pin: None,
            alternate,
            perf_events: Vec::new(),
        }
    }

    // ABBA: odd pairs swap, warm-up pairs come first and are unnumbered.
    #[test]
    fn schedule_alternates_pairs() {
        use Side::{A, B};
        let s = schedule(&opts(2, 1, true));
        assert_eq!(
            s,
            vec![
                (A, None),
                (B, None),
                (B, Some(0)),
                (A, Some(0)),
                (A, Some(1)),
                (B, Some(1))
            ]
        );
        let s = schedule(&opts(2, 0, false));
        assert_eq!(
            s,
            vec![(A, Some(0)), (B, Some(0)), (A, Some(1)), (B, Some(1))]
        );
    }

    // perf's CSV: comments and <not supported> lines are skipped, modifiers dropped.
    #[test]
    fn parses_perf_csv() {
        let text = "# started on Sun\n\n0.81,msec,task-clock,807619,100.00,0.210,CPUs utilized\n\
                    <not supported>,,cycles,0,100.00,,\n1234,,instructions:u,5,100.00,,\n";
        assert_eq!(
            parse_perf_csv(text),
            vec![
                ("task-clock".to_string(), 0.81),
                ("instructions".to_string(), 1234.0)
            ]
        );
    }

    // Arguments with spaces or quotes are quoted for the shell.
    #[test]
    fn displays_command() {
        let c = CommandLine(vec!["sh".into(), "-c".into(), "echo it's".into()]);
        assert_eq!(c.display(), r"sh -c 'echo it'\''s'");
    }
}
