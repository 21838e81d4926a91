//! From samples to the report: one [`MetricSummary`] per metric, printed as a text table or
//! JSON.
//!
//! The table has one row per metric, in [`Metric`] declaration order: the two medians, the
//! ratio of means B/A with its 95% interval, the bootstrap interval of the ratio of medians,
//! the paired ratio (geometric mean of the per-pair ratios) with its interval and p-value, the
//! difference in pooled standard deviations, and Welch's two-sided p-value. Numbers are
//! printed with four significant digits, `-` where a statistic is undefined (no variance, a
//! zero mean). The JSON carries every number at full precision with `null` for undefined ones,
//! and lists the metrics that could not be measured on this machine.

use crate::{stats, Metric, Samples};
use serde::Serialize;

/// The statistics of one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricSummary {
    /// Stable metric name ([`Metric::name`]).
    pub metric: &'static str,
    /// Runs of A and of B.
    pub n_a: usize,
    /// Runs of B.
    pub n_b: usize,
    /// Median of A.
    pub median_a: Option<f64>,
    /// Median of B.
    pub median_b: Option<f64>,
    /// Mean of A.
    pub mean_a: Option<f64>,
    /// Mean of B.
    pub mean_b: Option<f64>,
    /// Sample standard deviation of A.
    pub sd_a: Option<f64>,
    /// Sample standard deviation of B.
    pub sd_b: Option<f64>,
    /// mean_b / mean_a.
    pub ratio: Option<f64>,
    /// Lower end of the 95% CI of the ratio of means (log-ratio delta method).
    pub ratio_ci_low: Option<f64>,
    /// Upper end of that interval.
    pub ratio_ci_high: Option<f64>,
    /// median_b / median_a.
    pub median_ratio: Option<f64>,
    /// Lower end of the 95% seeded percentile-bootstrap CI of the ratio of medians.
    pub median_ratio_ci_low: Option<f64>,
    /// Upper end of that interval.
    pub median_ratio_ci_high: Option<f64>,
    /// Geometric mean of the per-pair ratios `b_i / a_i` (run `i` of each side ran next to
    /// each other), the ratio the pairs see once the machine's drift cancels.
    pub paired_ratio: Option<f64>,
    /// Lower end of its 95% CI (paired t on the log-ratios).
    pub paired_ratio_ci_low: Option<f64>,
    /// Upper end of that interval.
    pub paired_ratio_ci_high: Option<f64>,
    /// Two-sided p-value of the paired t-test.
    pub paired_p: Option<f64>,
    /// Welch's t statistic (positive when B is larger).
    pub welch_t: Option<f64>,
    /// Welch–Satterthwaite degrees of freedom.
    pub welch_df: Option<f64>,
    /// Two-sided p-value of Welch's test.
    pub p_value: Option<f64>,
    /// (mean_b - mean_a) / pooled sd.
    pub sigmas: Option<f64>,
}

/// The whole comparison, as printed by `--json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Command A, as one line.
    pub command_a: String,
    /// Command B, as one line.
    pub command_b: String,
    /// Measured runs of each command.
    pub runs: usize,
    /// Unmeasured warm-up runs of each command.
    pub warmup: usize,
    /// `"abba"` (pairs alternate) or `"ab"`.
    pub order: &'static str,
    /// CPU the runs were pinned to, if any.
    pub pinned_cpu: Option<usize>,
    /// Seed of the bootstrap.
    pub seed: u64,
    /// perf events counted (empty when perf was not used).
    pub perf_events: Vec<&'static str>,
    /// Metrics that could not be measured on this machine.
    pub unavailable: Vec<&'static str>,
    /// One entry per measured metric, in display order.
    pub metrics: Vec<MetricSummary>,
}

/// Computes the statistics of one metric. The bootstrap uses `seed` as given; callers that
/// summarize several metrics derive one seed per metric (see [`summarize`]).
pub fn summarize_metric(metric: Metric, a: &[f64], b: &[f64], seed: u64) -> MetricSummary {
    let ci = stats::ratio_ci(a, b);
    let boot = stats::bootstrap_median_ratio(a, b, seed);
    let welch = stats::welch(a, b);
    let paired = stats::paired_ratio(a, b);
    let (median_a, median_b) = (stats::median(a), stats::median(b));
    MetricSummary {
        metric: metric.name(),
        n_a: a.len(),
        n_b: b.len(),
        median_a,
        median_b,
        mean_a: stats::mean(a),
        mean_b: stats::mean(b),
        sd_a: stats::sample_sd(a),
        sd_b: stats::sample_sd(b),
        ratio: ci.map(|c| c.ratio).or_else(|| {
            let (ma, mb) = (stats::mean(a)?, stats::mean(b)?);
            (ma > 0.0).then(|| mb / ma)
        }),
        ratio_ci_low: ci.map(|c| c.low),
        ratio_ci_high: ci.map(|c| c.high),
        median_ratio: boot.map(|c| c.ratio),
        median_ratio_ci_low: boot.map(|c| c.low),
        median_ratio_ci_high: boot.map(|c| c.high),
        paired_ratio: paired.map(|p| p.ratio.ratio),
        paired_ratio_ci_low: paired.map(|p| p.ratio.low),
        paired_ratio_ci_high: paired.map(|p| p.ratio.high),
        paired_p: paired.and_then(|p| p.p),
        welch_t: welch.map(|w| w.t),
        welch_df: welch.map(|w| w.df),
        p_value: welch.map(|w| w.p),
        sigmas: stats::sigmas(a, b),
    }
}

/// Summarizes every metric present on both sides, in [`Metric`] order. Metric `k` (its
/// position in the declaration) bootstraps with seed `seed + k`, so metrics get independent
/// but reproducible resamples.
pub fn summarize(samples: &Samples, seed: u64) -> Vec<MetricSummary> {
    samples
        .a
        .iter()
        .filter_map(|(m, a)| {
            let b = samples.b.get(m)?;
            Some(summarize_metric(*m, a, b, seed.wrapping_add(*m as u64)))
        })
        .collect()
}

/// Four significant digits, without exponent for ordinary magnitudes; `-` for none.
pub(crate) fn num(x: Option<f64>) -> String {
    let Some(x) = x else {
        return "-".to_string();
    };
    if !x.is_finite() {
        return "-".to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-4..9).contains(&mag) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - mag).max(0) as usize;
    format!("{x:.decimals$}")
}

/// A ratio with its interval, `1.234 [1.100, 1.400]`.
fn ratio_cell(r: Option<f64>, lo: Option<f64>, hi: Option<f64>) -> String {
    match (r, lo, hi) {
        (Some(r), Some(lo), Some(hi)) => format!("{:.3} [{:.3}, {:.3}]", r, lo, hi),
        (Some(r), _, _) => format!("{r:.3}"),
        _ => "-".to_string(),
    }
}

/// The text report: a header naming the commands and the design, then the table.
pub fn format_table(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "A: {}\nB: {}\n",
        report.command_a, report.command_b
    ));
    out.push_str(&format!(
        "{} runs each ({} order{}), {} warm-up; bootstrap seed {}\n",
        report.runs,
        report.order.to_uppercase(),
        report
            .pinned_cpu
            .map(|c| format!(", pinned to CPU {c}"))
            .unwrap_or_default(),
        report.warmup,
        report.seed
    ));
    if !report.unavailable.is_empty() {
        out.push_str(&format!(
            "unavailable here: {}\n",
            report.unavailable.join(", ")
        ));
    }
    out.push('\n');
    let mut rows: Vec<Vec<String>> = vec![[
        "metric",
        "median A",
        "median B",
        "B/A means [95% CI]",
        "B/A medians [bootstrap 95%]",
        "B/A pairs [95% CI]",
        "p pairs",
        "sigmas",
        "p",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for m in &report.metrics {
        rows.push(vec![
            m.metric.to_string(),
            num(m.median_a),
            num(m.median_b),
            ratio_cell(m.ratio, m.ratio_ci_low, m.ratio_ci_high),
            ratio_cell(
                m.median_ratio,
                m.median_ratio_ci_low,
                m.median_ratio_ci_high,
            ),
            ratio_cell(
                m.paired_ratio,
                m.paired_ratio_ci_low,
                m.paired_ratio_ci_high,
            ),
            num(m.paired_p),
            m.sigmas.map_or("-".into(), |s| format!("{s:+.2}")),
            num(m.p_value),
        ]);
    }
    push_columns(&mut out, &rows, |c, _| c == 0);
    out
}

/// Appends `rows` as aligned columns two spaces apart, one line each: a column is as wide as
/// its widest cell, and `left(column, columns)` says which are aligned left (the others right).
pub(crate) fn push_columns(
    out: &mut String,
    rows: &[Vec<String>],
    left: impl Fn(usize, usize) -> bool,
) {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if left(c, row.len()) {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
}

/// The JSON report (pretty-printed, one trailing newline).
pub fn format_json(report: &Report) -> String {
    // Serializing plain structs of numbers, strings and options cannot fail.
    let mut s = serde_json::to_string_pretty(report).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // Four significant digits, dashes for undefined values.
    #[test]
    fn formats_numbers() {
        assert_eq!(num(Some(0.012345)), "0.01235");
        assert_eq!(num(Some(1234.6)), "1235");
        assert_eq!(num(Some(1.5)), "1.500");
        assert_eq!(num(Some(0.0)), "0");
        assert_eq!(num(Some(1.5e12)), "1.500e12");
        assert_eq!(num(None), "-");
        assert_eq!(num(Some(f64::NAN)), "-");
    }

    // A constant metric (no variance) has a ratio but no test, and prints dashes.
    #[test]
    fn constant_metric_has_no_test() {
        let s = summarize_metric(Metric::MajorFaults, &[2.0, 2.0, 2.0], &[3.0, 3.0, 3.0], 1);
        assert_eq!(s.ratio, Some(1.5));
        assert_eq!(s.ratio_ci_low, Some(1.5));
        assert_eq!(s.welch_t, None);
        assert_eq!(s.sigmas, None);
        let z = summarize_metric(Metric::MajorFaults, &[0.0, 0.0], &[0.0, 0.0], 1);
        assert_eq!((z.ratio, z.median_ratio, z.p_value), (None, None, None));
    }

    // Every metric present on both sides is summarized in declaration order, with seed + index.
    #[test]
    fn summarizes_in_metric_order() {
        let mut s = Samples::default();
        for m in [Metric::MinorFaults, Metric::WallTime] {
            s.a.insert(m, vec![1.0, 2.0, 3.0]);
            s.b.insert(m, vec![2.0, 4.0, 6.0]);
        }
        s.a.insert(Metric::Cycles, vec![1.0, 2.0]);
        let out = summarize(&s, 7);
        let names: Vec<_> = out.iter().map(|m| m.metric).collect();
        assert_eq!(names, vec!["wall_s", "minor_faults"]);
        assert_eq!(
            out[1],
            summarize_metric(
                Metric::MinorFaults,
                &[1.0, 2.0, 3.0],
                &[2.0, 4.0, 6.0],
                7 + 10
            )
        );
    }
}
