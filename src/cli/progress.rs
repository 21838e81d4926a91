//! Progress of measurement runs on standard error, for verbs that run binaries under valgrind
//! (`sediment compare`).
//!
//! On a terminal, one `indicatif` spinner line per binary: waiting, running with the
//! instructions measured so far, then done (with the time) or read from the cache. Elsewhere
//! (logs, pipes, tests) one plain line per finished binary, so a long run still shows that it
//! moves without filling a log with redraws. Warnings that arrive while the bars are drawn are
//! printed above them.

use std::io::IsTerminal;

use sediment_measure::onepass::Event;

/// Reports [`Event`]s of the runs of `labels` (in the order of the binaries).
pub struct Progress {
    verb: &'static str,
    labels: Vec<String>,
    bars: Option<(indicatif::MultiProgress, Vec<indicatif::ProgressBar>)>,
}

impl Progress {
    /// Bars when standard error is a terminal, plain lines otherwise; `verb` prefixes the
    /// plain lines and warnings (`sediment compare: ...`).
    pub fn new(verb: &'static str, labels: &[String]) -> Self {
        let bars = std::io::stderr().is_terminal().then(|| {
            let multi = indicatif::MultiProgress::new();
            let style = indicatif::ProgressStyle::with_template(
                "{spinner} {prefix:.bold} {msg} [{elapsed}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
            let bars = labels
                .iter()
                .map(|l| {
                    let b = multi.add(indicatif::ProgressBar::new_spinner());
                    b.set_style(style.clone());
                    b.set_prefix(l.clone());
                    b.set_message("waiting");
                    b
                })
                .collect();
            (multi, bars)
        });
        Self {
            verb,
            labels: labels.to_vec(),
            bars,
        }
    }

    /// Shows what binary `i` reported.
    pub fn event(&self, i: usize, e: Event) {
        let label = self.labels.get(i).map_or("?", String::as_str);
        if let Event::Warning(w) = &e {
            let line = format!("sediment {}: warning: {label}: {w}", self.verb);
            match &self.bars {
                Some((multi, _)) => multi.suspend(|| eprintln!("{line}")),
                None => eprintln!("{line}"),
            }
            return;
        }
        let Some((_, bars)) = &self.bars else {
            if let Event::Finished {
                instructions,
                cached,
                seconds,
            } = e
            {
                if cached {
                    eprintln!(
                        "sediment {}: {label}: {} instructions (cached)",
                        self.verb,
                        si(instructions)
                    );
                } else {
                    eprintln!(
                        "sediment {}: {label}: {} instructions measured in {seconds:.1} s",
                        self.verb,
                        si(instructions)
                    );
                }
            }
            return;
        };
        let Some(bar) = bars.get(i) else { return };
        match e {
            Event::Started => {
                bar.reset_elapsed();
                bar.enable_steady_tick(std::time::Duration::from_millis(200));
                bar.set_message("running under valgrind");
            }
            Event::Progress(n) => bar.set_message(format!("{} instructions", si(n))),
            Event::Finished {
                instructions,
                cached,
                ..
            } => {
                let how = if cached { "cached" } else { "done" };
                bar.finish_with_message(format!("{} instructions, {how}", si(instructions)));
            }
            Event::Warning(_) => {}
        }
    }

    /// Removes the bars (the table follows on standard output).
    pub fn finish(&self) {
        if let Some((multi, bars)) = &self.bars {
            for b in bars {
                b.finish_and_clear();
            }
            let _ = multi.clear();
        }
    }
}

/// `1234567` as `1.23 M`: three significant digits and a metric prefix.
fn si(n: u64) -> String {
    const UNITS: [(f64, &str); 3] = [(1e9, "G"), (1e6, "M"), (1e3, "k")];
    let x = n as f64;
    for (scale, unit) in UNITS {
        if x >= scale {
            return format!("{:.3} {unit}", x / scale);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::si;

    #[test]
    fn instruction_counts_read_at_a_glance() {
        assert_eq!(si(999), "999");
        assert_eq!(si(1_234_567), "1.235 M");
        assert_eq!(si(2_000_000_000), "2.000 G");
    }
}
