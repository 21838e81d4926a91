//! Stage timings, the way mold's `--perf` prints its passes: every stage function opens a
//! [`stage`] guard, the guard adds its wall time to a process-wide table when dropped, and
//! `--timings` prints the table on stderr when the verb ends.
//!
//! Stages may nest (the record stage runs the import stage); the table keeps first-seen order
//! and indents a stage by how many stages were open on its thread when it started. A stage
//! run several times (one link per linker) is one row with its count and total time.

use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Row {
    name: &'static str,
    depth: usize,
    count: u32,
    total: Duration,
}

struct Table {
    rows: Vec<Row>,
}

static TABLE: Mutex<Table> = Mutex::new(Table { rows: Vec::new() });

thread_local! {
    /// Stages open on this thread: a stage's depth counts only the stages that enclose it on
    /// its own thread, not those other threads have open at the same time.
    static OPEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// An open stage; its wall time is recorded when it is dropped.
#[must_use = "a stage is timed until the guard is dropped"]
pub struct Stage {
    name: &'static str,
    depth: usize,
    start: Instant,
}

/// Starts timing the stage `name` until the returned guard is dropped.
pub fn stage(name: &'static str) -> Stage {
    let depth = OPEN.with(|o| o.replace(o.get() + 1));
    Stage {
        name,
        depth,
        start: Instant::now(),
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let elapsed = self.start.elapsed();
        OPEN.with(|o| o.set(o.get().saturating_sub(1)));
        let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        match t
            .rows
            .iter_mut()
            .find(|r| r.name == self.name && r.depth == self.depth)
        {
            Some(r) => {
                r.count += 1;
                r.total += elapsed;
            }
            None => t.rows.push(Row {
                name: self.name,
                depth: self.depth,
                count: 1,
                total: elapsed,
            }),
        }
    }
}

/// The table of every stage finished so far: name (indented by nesting), runs, total seconds.
/// Rows are listed in the order their stages first finished, inner stages before outer ones.
pub fn report() -> String {
    let t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::from("stage                          runs    seconds\n");
    for r in &t.rows {
        let name = format!("{}{}", "  ".repeat(r.depth), r.name);
        out.push_str(&format!(
            "{name:<30} {:>5} {:>10.3}\n",
            r.count,
            r.total.as_secs_f64()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Nested stages are recorded with their depth, repeated ones as one row with a count.
    #[test]
    fn nested_and_repeated_stages_make_one_row_each() {
        {
            let _outer = stage("test-outer");
            for _ in 0..3 {
                let _inner = stage("test-inner");
            }
        }
        let r = report();
        let inner = r.lines().find(|l| l.contains("test-inner")).unwrap();
        assert!(inner.starts_with("  test-inner"), "{r}");
        assert!(inner.split_whitespace().nth(1) == Some("3"), "{r}");
        assert!(r.lines().any(|l| l.starts_with("test-outer")), "{r}");
    }
}
