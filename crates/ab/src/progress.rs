//! The progress bar of long comparisons: an `indicatif` bar on standard error, drawn only when
//! standard error is a terminal (so logs, pipes and tests see nothing).

use std::io::IsTerminal;

/// A progress reporter: call [`Progress::update`] after each run, [`Progress::finish`] at the end.
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    /// A bar of `total` runs if standard error is a terminal, otherwise a silent reporter.
    pub fn new(total: usize) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new(total as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} runs (eta {eta})",
        ) {
            bar.set_style(style);
        }
        Progress(Some(bar))
    }

    /// Records that `done` of `total` runs have finished.
    pub fn update(&mut self, done: usize, total: usize) {
        if let Some(bar) = &self.0 {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
