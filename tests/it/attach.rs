//! `sediment record --pid` and `record --all`: real processes started by the test (a loopback
//! server under load, a CPU loop, short-lived programs, a JIT), recorded while they run; the
//! profiles they give, and an order from one of them applied to a real link.

use crate::common::{fixture, sediment, sediment_ok};
use object::{Object as _, ObjectSymbol as _};
use sediment_profile::{FuncKey, Profile};
use std::io::{BufRead as _, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs gcc in `dir`, asserting success.
fn gcc(dir: &Path, args: &[&str]) {
    let out = Command::new("gcc")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_profile(path: &Path) -> Profile {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Profile::from_text(&text).expect("valid profile")
}

fn self_weight(p: &Profile, key: &FuncKey) -> u64 {
    p.find(key)
        .map_or(0, |i| p.functions[i as usize].self_weight)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The loopback server of `tests/fixtures/live`, compiled to objects (`server.o`, `hot.o`,
/// with `-ffunction-sections` and frame pointers) and linked by gcc as `dir/server`.
fn build_server(dir: &Path) {
    for f in ["server.c", "hot.c"] {
        std::fs::copy(fixture(&format!("live/{f}")), dir.join(f)).unwrap();
    }
    gcc(
        dir,
        &[
            "-O2",
            "-fno-omit-frame-pointer",
            "-ffunction-sections",
            "-c",
            "server.c",
            "hot.c",
        ],
    );
    gcc(dir, &["-o", "server", "server.o", "hot.o"]);
}

/// A running server, killed when dropped, and a client thread sending it requests until then.
struct Server {
    child: Child,
    stop: Arc<AtomicBool>,
    client: Option<std::thread::JoinHandle<u64>>,
}

impl Server {
    /// Starts `dir/server` and a client that keeps it busy.
    fn start(dir: &Path) -> Server {
        let mut child = Command::new(dir.join("server"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the server prints its port");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let client = std::thread::spawn(move || {
            let mut answered = 0;
            while !flag.load(Ordering::Relaxed) {
                let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                let _ = c.write_all(b"GET /some/path HTTP/1.0\r\n");
                let mut answer = String::new();
                if c.read_to_string(&mut answer).is_ok() && !answer.is_empty() {
                    answered += 1;
                }
            }
            answered
        });
        Server {
            child,
            stop,
            client: Some(client),
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Stops the client and returns how many requests were answered.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.client.take().unwrap().join().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Records the busy server of `dir` for 3 seconds with `record --pid PID -o server.sprof` and
/// returns its profile, checked: the server's binary, and its three hot functions holding most
/// samples.
fn record_server(dir: &Path) -> Profile {
    build_server(dir);
    let server = Server::start(dir);
    let out = sediment(
        dir,
        &[
            "record",
            "--pid",
            &server.pid(),
            "--duration",
            "3",
            "-o",
            "server.sprof",
        ],
    );
    let answered = server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        answered > 10,
        "the server answered only {answered} requests"
    );
    let p = read_profile(&dir.join("server.sprof"));
    assert!(p.meta.binary.ends_with("/server"), "{}", p.meta.binary);
    assert_eq!(p.meta.event.as_deref(), Some("cpu-clock"));
    let hot: u64 = ["parse", "digest", "render"]
        .iter()
        .map(|f| {
            let w = self_weight(&p, &FuncKey::global(*f));
            assert!(w > 0, "{f} got no samples: {}", p.to_text());
            w
        })
        .sum();
    assert!(p.self_total() >= 50, "too few samples: {}", p.to_text());
    assert!(hot * 10 >= p.self_total() * 8, "{}", p.to_text());
    p
}

// A server started by the test, under load from a client, recorded by attaching to its PID for
// a few seconds: a profile of the server binary whose hot functions are the request handlers.
#[test]
fn record_pid_profiles_a_loaded_server() {
    require!("perf", "gcc");
    let dir = tempfile::tempdir().unwrap();
    let p = record_server(dir.path());
    // The handler calls all three: leaf-mode edges from `handle`.
    let handle = p.find(&FuncKey::global("handle")).expect("handle seen");
    assert!(
        p.edges.iter().filter(|e| e.caller == handle).count() >= 3,
        "{}",
        p.to_text()
    );
}

// Two processes of two programs in one `--pid` list with `--prof-dir`: one profile per binary,
// named as `record -- CMD` names them; the recording ends when both processes have ended.
#[test]
fn record_pid_list_writes_a_profile_per_binary() {
    require!("perf", "gcc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build_server(d);
    gcc(
        d,
        &[
            "-O2",
            "-fno-omit-frame-pointer",
            "-o",
            "hot",
            fixture("perf/hot.c").to_str().unwrap(),
        ],
    );
    let server = Server::start(d);
    // Some 2 s of `spin` on an idle machine; the recording stops when it ends or at 6 s.
    let mut hot = Command::new(d.join("hot"))
        .arg("2000")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pids = format!("{},{}", server.pid(), hot.id());
    let out = sediment(
        d,
        &[
            "record",
            "--pid",
            &pids,
            "--duration",
            "6",
            "--prof-dir",
            "pd",
        ],
    );
    let _ = hot.kill();
    let _ = hot.wait();
    server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    let srv = read_profile(&d.join("pd/server.sprof"));
    assert!(
        self_weight(&srv, &FuncKey::global("digest")) > 0,
        "{}",
        srv.to_text()
    );
    let h = read_profile(&d.join("pd/hot.sprof"));
    assert!(
        self_weight(&h, &FuncKey::local("spin", "hot.c")) > 10,
        "{}",
        h.to_text()
    );
}

// A process that is gone, in a list with a live one: one line naming it, nothing written.
#[test]
fn record_pid_of_a_dead_process_is_one_line() {
    require!("perf");
    let dir = tempfile::tempdir().unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let pids = format!("{},{dead}", std::process::id());
    crate::common::fails_one_line(
        dir.path(),
        &["record", "--pid", &pids, "-o", "x.sprof"],
        &[&format!("PID {dead}: no such process")],
    );
    assert!(!dir.path().join("x.sprof").exists());
}

/// `sediment ARGS` started in `dir` with standard error piped and SIGINT at its default
/// action: a test suite run from a shell's background job (or `nohup`) passes SIGINT on
/// ignored, and Sediment keeps a signal that was ignored at start ignored, so the SIGINT a test
/// sends would never arrive.
fn spawn_interruptible(dir: &Path, args: &[&str]) -> Child {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(crate::common::sediment_bin());
    cmd.args(args).current_dir(dir).stderr(Stdio::piped());
    // SAFETY: signal(2) is async-signal-safe, as a pre_exec hook must be.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// Sends SIGINT to `rec` (started by [`spawn_interruptible`]) and waits for it to end, two
/// minutes at most (then it is killed and the test fails); its status and standard error.
fn interrupt(rec: &mut Child) -> (std::process::ExitStatus, String) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) };
    let mut pipe = rec.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = pipe.read_to_string(&mut err);
        err
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = rec.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            let _ = rec.kill();
            let _ = rec.wait();
            panic!("sediment did not stop on SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (status, reader.join().unwrap())
}

/// Perf events the process `pid` holds open (`anon_inode:[perf_event]` descriptors).
fn perf_events_open(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |fds| {
        fds.flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.as_os_str() == "anon_inode:[perf_event]")
            })
            .count()
    })
}

/// Waits until a process descended from `sediment` (PID `pid`: its `perf record`) holds at
/// least `events` perf events open: the recording has started, whatever the machine's load.
/// Fails after two minutes.
fn wait_for_perf(pid: u32, events: usize) {
    let start = std::time::Instant::now();
    while crate::common::descendants(pid)
        .into_iter()
        .map(perf_events_open)
        .max()
        .unwrap_or(0)
        < events
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "perf did not start recording"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The CPUs online (`/sys/devices/system/cpu/online`: `0-3,6`), on each of which `perf record
/// -a` opens an event.
fn online_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    text.trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// CPU time `pid` has used so far (user and system), in clock ticks (`/proc/PID/stat`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    // After the name: state is field 3; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Builds `dir/NAME` from one C file whose hot function is `FUNC`. Each run spends at least
/// 200 ms of CPU time in `FUNC` (measured by the program itself), however loaded the machine:
/// short-lived, yet sampled for sure.
fn build_short(dir: &Path, name: &str, func: &str, salt: u32) {
    let src = format!(
        "#include <time.h>\n\
         __attribute__((noinline)) unsigned long {func}(unsigned long n) {{\n\
         volatile unsigned long s = {salt};\n\
         for (unsigned long i = 0; i < n; i++) s += i ^ (s >> 3);\n\
         return s; }}\n\
         static double cpu(void) {{ struct timespec t;\n\
         clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }}\n\
         int main(void) {{ unsigned long s = 0;\n\
         do s += {func}(1000000); while (cpu() < 0.2);\n\
         return (int)(s & 1); }}\n"
    );
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    gcc(
        dir,
        &[
            "-O2",
            "-fno-omit-frame-pointer",
            "-o",
            name,
            c.to_str().unwrap(),
        ],
    );
}

// The whole machine for a few seconds while short-lived test programs run one after another:
// a profile for each of them in the profile directory, and two builds of one name kept apart
// by build-id. Robust under load: the programs start once perf has its events open, each run
// spends 200 ms of CPU time, every program runs at least twice and the recording lasts at
// least 4 s after perf started (Sediment's own samples are counted), and it is stopped with
// SIGINT once the programs are done (a fixed `--duration` could end before a loaded machine
// ran them; the long one here only bounds a failed test).
#[test]
fn record_all_profiles_short_lived_programs() {
    require!("perf", "gcc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("a")).unwrap();
    std::fs::create_dir_all(d.join("b")).unwrap();
    build_short(d, "alpha", "alpha_work", 1);
    build_short(d, "beta", "beta_work", 2);
    build_short(&d.join("a"), "tool", "tool_a", 3);
    build_short(&d.join("b"), "tool", "tool_b", 4);
    let mut rec = spawn_interruptible(
        d,
        &["record", "--all", "--duration", "300", "--prof-dir", "pd"],
    );
    // perf needs a moment to start on every CPU.
    wait_for_perf(rec.id(), online_cpus());
    let start = std::time::Instant::now();
    let mut runs = 0;
    while runs < 8 || start.elapsed() < std::time::Duration::from_secs(4) {
        for prog in ["alpha", "beta", "a/tool", "b/tool"] {
            Command::new(d.join(prog)).status().unwrap();
            runs += 1;
        }
    }
    let (status, err) = interrupt(&mut rec);
    assert!(status.success(), "{err}");
    assert!(runs >= 4, "{runs}");
    assert!(err.contains("ran outside any binary"), "{err}");
    for (file, func) in [("alpha.sprof", "alpha_work"), ("beta.sprof", "beta_work")] {
        let p = read_profile(&d.join("pd").join(file));
        assert!(p.meta.binary.ends_with(&file[..file.len() - 6]));
        assert!(
            self_weight(&p, &FuncKey::global(func)) > 0,
            "{}",
            p.to_text()
        );
    }
    // Two builds named `tool`: one file each, by build-id, each with its own function.
    let mut tools: Vec<String> = std::fs::read_dir(d.join("pd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tool."))
        .collect();
    tools.sort();
    assert_eq!(tools.len(), 2, "{tools:?}");
    let mut funcs = Vec::new();
    for t in &tools {
        let p = read_profile(&d.join("pd").join(t));
        let id = p.meta.build_id.clone().expect("gcc writes a build-id");
        assert_eq!(*t, format!("tool.{id}.sprof"));
        funcs.extend(
            ["tool_a", "tool_b"]
                .into_iter()
                .filter(|f| self_weight(&p, &FuncKey::global(*f)) > 0),
        );
    }
    funcs.sort();
    assert_eq!(funcs, ["tool_a", "tool_b"]);
    // perf itself (and Sediment) ran too: their samples are counted in one line, naming them,
    // and left out. (Whether a `perf.sprof` appeared cannot be asserted here: other tests run
    // perf and Sediment at the same time, and those are fair targets.)
    let left_out: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("came from processes that were not targets"))
        .collect();
    assert_eq!(left_out.len(), 1, "{err}");
    assert!(left_out[0].contains("perf record, PID "), "{err}");
    assert!(left_out[0].contains("sediment, PID "), "{err}");
}

// Code run from anonymous executable memory (what a JIT does) is counted in one line with its
// share, and attributed to no binary.
#[test]
fn jit_samples_are_counted_not_attributed() {
    require!("perf", "gcc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    gcc(
        d,
        &["-O2", "-o", "jit", fixture("live/jit.c").to_str().unwrap()],
    );
    let out = sediment_ok(d, &["record", "-o", "jit.sprof", "--", "./jit"]);
    let err = stderr(&out);
    let line: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("outside any binary"))
        .collect();
    assert_eq!(line.len(), 1, "{err}");
    // `anonymous memory (JIT) NN.N%`, the largest share.
    let share: f64 = line[0]
        .split("anonymous memory (JIT) ")
        .nth(1)
        .and_then(|s| s.split('%').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no JIT share in {err}"));
    assert!(share > 50.0, "{err}");
    let p = read_profile(&d.join("jit.sprof"));
    assert!(p.self_total() * 10 < share as u64, "{}", p.to_text());
}

/// Address and size of each function symbol of a linked program, by name.
fn symbols(exe: &Path) -> std::collections::HashMap<String, (u64, u64)> {
    let data = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition())
        .map(|s| (s.name().unwrap().to_string(), (s.address(), s.size())))
        .collect()
}

/// The bytes from the first to the end of the last of `names` in `exe`.
fn span(exe: &Path, names: &[&str]) -> u64 {
    let syms = symbols(exe);
    let at: Vec<(u64, u64)> = names
        .iter()
        .map(|n| {
            *syms
                .get(*n)
                .unwrap_or_else(|| panic!("{n} in {}", exe.display()))
        })
        .collect();
    let lo = at.iter().map(|a| a.0).min().unwrap();
    let hi = at.iter().map(|a| a.0 + a.1).max().unwrap();
    hi - lo
}

// A profile recorded with `--pid` orders a real link: `order`, `link --linker lld`,
// `link-flags`, and gcc with lld put the server's hot functions together, where the default
// link keeps 2 KiB cold functions between them.
#[test]
fn pid_profile_orders_a_real_link() {
    require!("perf", "gcc", "ld.lld");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    record_server(d);
    sediment_ok(d, &["order", "-p", "server.sprof", "-o", "server.order"]);
    sediment_ok(
        d,
        &[
            "link",
            "--linker",
            "lld",
            "--order",
            "server.order",
            "-o",
            "server.symorder",
            "server.o",
            "hot.o",
        ],
    );
    let flags = sediment_ok(d, &["link-flags", "--linker", "lld", "server.symorder"]);
    let flags = String::from_utf8(flags.stdout).unwrap();
    let mut args: Vec<&str> = flags.split_whitespace().collect();
    args.extend(["-o", "ordered", "server.o", "hot.o"]);
    gcc(d, &args);
    gcc(d, &["-fuse-ld=lld", "-o", "default", "server.o", "hot.o"]);
    let hot = ["handle", "parse", "digest", "render"];
    let (ordered, default) = (
        span(&d.join("ordered"), &hot),
        span(&d.join("default"), &hot),
    );
    assert!(default > 4 * 2048, "default link span {default}");
    assert!(ordered < 1024, "ordered span {ordered} (default {default})");
}

// A callgrind recording of a long run under a shell (children traced, `--prof-dir`) prints its
// progress and, capped by `--duration`, stops the shell and its child and keeps the profile
// they collected so far.
#[test]
fn callgrind_duration_caps_a_long_run_and_keeps_the_profile() {
    require!("valgrind", "callgrind_control", "gcc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    gcc(
        d,
        &["-O2", "-o", "hot", fixture("perf/hot.c").to_str().unwrap()],
    );
    let start = std::time::Instant::now();
    // Uncapped, this runs for many minutes under callgrind.
    let out = sediment(
        d,
        &[
            "record",
            "--via",
            "callgrind",
            "--duration",
            "12",
            "--prof-dir",
            "pd",
            "--",
            "sh",
            "-c",
            "./hot 100000; true",
        ],
    );
    let took = start.elapsed().as_secs();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(took < 60, "took {took} s");
    assert!(err.contains("stopped after --duration 12 s"), "{err}");
    let progress = err
        .lines()
        .find(|l| l.starts_with("sediment: callgrind: ") && l.contains(" instructions in "))
        .unwrap_or_else(|| panic!("no progress line: {err}"));
    assert!(progress.contains("after 1"), "{progress}");
    let p = read_profile(&d.join("pd/hot.sprof"));
    assert_eq!(p.meta.source, "callgrind");
    assert!(
        self_weight(&p, &FuncKey::local("spin", "hot.c")) > 100_000_000,
        "{}",
        p.to_text()
    );
}

// A program whose hot code changes half-way (f1, f2, then f3, f4) gets the one-line advice to
// record longer or merge; a steady hot loop does not.
#[test]
fn halves_check_flags_a_recording_whose_hot_code_changes() {
    require!("perf", "gcc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, src) in [("phases", "live/phases.c"), ("hot", "perf/hot.c")] {
        gcc(
            d,
            &[
                "-O2",
                "-fno-omit-frame-pointer",
                "-o",
                name,
                fixture(src).to_str().unwrap(),
            ],
        );
    }
    let out = sediment_ok(d, &["record", "-o", "ph.sprof", "--", "./phases"]);
    let err = stderr(&out);
    let advice: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("two halves of the recording disagree"))
        .collect();
    assert_eq!(advice.len(), 1, "{err}");
    assert!(advice[0].contains("phases +"), "{err}");
    assert!(advice[0].contains("sediment merge"), "{err}");
    let out = sediment_ok(d, &["record", "-o", "hot.sprof", "--", "./hot", "200"]);
    let err = stderr(&out);
    assert!(!err.contains("disagree"), "{err}");
}

/// `cmd` run as user and group `nobody` (65534), through `setpriv`.
fn as_nobody(prog: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(prog);
    cmd
}

// The real permission paths, where the machine allows testing them (the test runs as root and
// `perf_event_paranoid` is above 0): as `nobody`, `--all` and `--pid` of root's process are
// one line saying what to change, and `--pid` of nobody's own process records.
#[test]
fn permission_problems_are_one_line_for_an_unprivileged_user() {
    require!("perf", "setpriv", "gcc");
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 || !(1..=2).contains(&paranoid) {
        eprintln!("skipped: needs root and perf_event_paranoid 1 or 2 (it is {paranoid})");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sed = crate::common::sediment_bin();
    let one_line = |args: &[&str], needles: &[&str]| {
        let out = as_nobody(&sed).args(args).current_dir(d).output().unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: `{n}` not in {err}");
        }
    };
    one_line(
        &["record", "--all", "--duration", "1", "--prof-dir", "pd"],
        &[
            &format!("kernel.perf_event_paranoid <= 0 (it is {paranoid})"),
            "sudo sysctl kernel.perf_event_paranoid=0",
        ],
    );
    let mine = std::process::id().to_string();
    one_line(
        &["record", "--pid", &mine, "-o", "x.sprof"],
        &[&format!("PID {mine} belongs to user 0")],
    );
    assert!(!d.join("pd").exists() && !d.join("x.sprof").exists());

    // nobody's own process: perf records its user code.
    gcc(
        d,
        &[
            "-O2",
            "-fno-omit-frame-pointer",
            "-o",
            "hot",
            fixture("perf/hot.c").to_str().unwrap(),
        ],
    );
    std::fs::set_permissions(d.join("hot"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut hot = as_nobody(&d.join("hot"))
        .arg("3000")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // setpriv execs the program: the pid is the program's once it has started.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = hot.id().to_string();
    let out = as_nobody(&sed)
        .args([
            "record",
            "--pid",
            &pid,
            "--duration",
            "2",
            "-o",
            "hot.sprof",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    let _ = hot.kill();
    let _ = hot.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let p = read_profile(&d.join("hot.sprof"));
    assert!(
        self_weight(&p, &FuncKey::local("spin", "hot.c")) > 10,
        "{}",
        p.to_text()
    );
}

// `--pid` without `--duration` ends on Ctrl-C (SIGINT to sediment alone here): the recording
// stops, and the profile is written. Robust under load: SIGINT is sent once perf has its
// event open (Sediment has armed its handler before it starts perf) and the program has spent
// another half second of CPU time since, not after a fixed sleep; the program runs until
// killed; and sediment is started with SIGINT at its default action whatever the test
// runner's (a background job's SIGINT is ignored).
#[test]
fn record_pid_stops_on_sigint_and_writes() {
    require!("perf", "gcc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    gcc(
        d,
        &[
            "-O2",
            "-fno-omit-frame-pointer",
            "-o",
            "hot",
            fixture("perf/hot.c").to_str().unwrap(),
        ],
    );
    let mut hot = Command::new(d.join("hot"))
        .arg("1000000")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut rec = spawn_interruptible(
        d,
        &["record", "--pid", &hot.id().to_string(), "-o", "hot.sprof"],
    );
    wait_for_perf(rec.id(), 1);
    // Half a second of CPU time recorded (clock ticks are 1/100 s on Linux).
    let from = cpu_ticks(hot.id());
    let start = std::time::Instant::now();
    while cpu_ticks(hot.id()) < from + 50 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "the program got no CPU time"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (status, err) = interrupt(&mut rec);
    let _ = hot.kill();
    let _ = hot.wait();
    assert!(status.success(), "{status}: {err}");
    let p = read_profile(&d.join("hot.sprof"));
    assert!(
        self_weight(&p, &FuncKey::local("spin", "hot.c")) > 10,
        "{}",
        p.to_text()
    );
}
