//! Two builds compared over several layouts of each: is the difference between the builds
//! larger than what moving the code alone does?
//!
//! A build's cache metrics depend on where its code landed (`docs/design/statistics.md`): a
//! change of a few bytes in an early object moves every later function and can swing a miss
//! count by 30% without any change in the code that runs. So one layout of A against one of
//! B compares two draws from two distributions whose spread is unknown. Here each build is
//! measured in `K` layouts (the same objects relinked with the code moved by a pad), and per
//! metric the *between-build* difference is judged against the *within-build* spread across
//! those layouts: a comparison in the spirit of a mixed-effects model where the layout is the
//! random effect and the build the fixed one, each layout contributing one value (the metrics
//! are simulated, so a layout measured twice gives the same value: all the variance is the
//! layouts').
//!
//! Per metric: the median and range of each side, the ratio of means B/A with its 95% interval
//! ([`stats::ratio_ci`], the layout-to-layout variance as the error), the difference in
//! pooled layout standard deviations ([`stats::sigmas`]), and the two-sided permutation p-value
//! over the layouts ([`stats::permutation_p`]), which assumes no distribution. The verdict is
//! [`Verdict::Real`] when that p-value is below [`ALPHA`], [`Verdict::Same`] when every layout
//! of both builds gave one value, and [`Verdict::LayoutNoise`] otherwise: the difference is
//! within what the layouts alone produce.

use serde::Serialize;

use crate::stats;

/// Significance level of the verdict.
pub const ALPHA: f64 = 0.05;

/// Fewest layouts a side for which the permutation test can reach [`ALPHA`] (with 3 a side
/// its smallest p-value is 2/20 = 0.1).
pub const MIN_LAYOUTS_FOR_VERDICT: usize = 4;

/// What a metric's difference is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Permutation p below [`ALPHA`]: the builds differ beyond the layout spread.
    Real,
    /// Within what the layouts alone produce.
    LayoutNoise,
    /// Every layout of both builds gave the same value.
    Same,
}

impl Verdict {
    /// The word printed in the table.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Real => "real",
            Verdict::LayoutNoise => "layout noise",
            Verdict::Same => "same",
        }
    }
}

/// One metric over the layouts of both builds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayoutSummary {
    /// The metric's key.
    pub metric: String,
    /// A's value in each layout, in layout order.
    pub a: Vec<f64>,
    /// B's value in each layout.
    pub b: Vec<f64>,
    /// Median of A over its layouts.
    pub median_a: Option<f64>,
    /// Median of B.
    pub median_b: Option<f64>,
    /// `max / min` of A over its layouts (1: no layout changed it); `None` when the minimum is 0.
    pub spread_a: Option<f64>,
    /// The same for B.
    pub spread_b: Option<f64>,
    /// mean_b / mean_a.
    pub ratio: Option<f64>,
    /// Lower end of its 95% interval, the layout variance as the error.
    pub ratio_ci_low: Option<f64>,
    /// Upper end.
    pub ratio_ci_high: Option<f64>,
    /// (mean_b - mean_a) / pooled layout sd.
    pub sigmas: Option<f64>,
    /// Two-sided permutation p-value over the layouts.
    pub p_layouts: Option<f64>,
    /// What the difference is.
    pub verdict: Verdict,
}

/// Summarizes one metric measured in every layout of A and of B; the permutation draws (only
/// for more than 10 layouts a side) use `seed`.
pub fn summarize_layouts(metric: &str, a: &[f64], b: &[f64], seed: u64) -> LayoutSummary {
    let ci = stats::ratio_ci(a, b);
    let p = stats::permutation_p(a, b, seed);
    let constant = |xs: &[f64]| xs.windows(2).all(|w| w[0] == w[1]);
    let verdict = if constant(a) && constant(b) && a.first() == b.first() {
        Verdict::Same
    } else if p.is_some_and(|p| p < ALPHA) {
        Verdict::Real
    } else {
        Verdict::LayoutNoise
    };
    LayoutSummary {
        metric: metric.to_string(),
        a: a.to_vec(),
        b: b.to_vec(),
        median_a: stats::median(a),
        median_b: stats::median(b),
        spread_a: spread(a),
        spread_b: spread(b),
        ratio: ci.map(|c| c.ratio),
        ratio_ci_low: ci.map(|c| c.low),
        ratio_ci_high: ci.map(|c| c.high),
        sigmas: stats::sigmas(a, b),
        p_layouts: p,
        verdict,
    }
}

/// `max / min`, `None` when empty or the minimum is not positive.
fn spread(xs: &[f64]) -> Option<f64> {
    let min = xs.iter().copied().reduce(f64::min)?;
    let max = xs.iter().copied().reduce(f64::max)?;
    (min > 0.0).then(|| max / min)
}

/// The comparison over layouts, as printed by `--json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayoutReport {
    /// How A was built, one line.
    pub build_a: String,
    /// How B was built.
    pub build_b: String,
    /// How the layouts differ, one line.
    pub layouts: String,
    /// Layout labels, in order (the same for both builds).
    pub labels: Vec<String>,
    /// One entry per metric, in display order.
    pub metrics: Vec<LayoutSummary>,
}

/// A whole number as it is (the simulated counts), any other with four significant digits;
/// `-` for none.
fn num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        _ => crate::report::num(x),
    }
}

/// `median [min-max]` of a side.
fn range_cell(median: Option<f64>, xs: &[f64]) -> String {
    let min = xs.iter().copied().reduce(f64::min);
    let max = xs.iter().copied().reduce(f64::max);
    match (min, max) {
        (Some(lo), Some(hi)) if lo == hi => num(median),
        (Some(lo), Some(hi)) => format!("{} [{}-{}]", num(median), num(Some(lo)), num(Some(hi))),
        _ => "-".to_string(),
    }
}

/// The text report: the two builds, the layouts, then one row per metric.
pub fn format_layout_table(report: &LayoutReport) -> String {
    let mut out = format!(
        "A: {}\nB: {}\n{}\n",
        report.build_a, report.build_b, report.layouts
    );
    let k = report.labels.len();
    if k < MIN_LAYOUTS_FOR_VERDICT {
        out.push_str(&format!(
            "note: with {k} layouts a side no difference can be called real (at least {MIN_LAYOUTS_FOR_VERDICT} are needed)\n"
        ));
    }
    out.push('\n');
    let mut rows: Vec<Vec<String>> = vec![[
        "metric",
        "A median [min-max]",
        "B median [min-max]",
        "spread A",
        "spread B",
        "B/A means [95% CI]",
        "sigmas",
        "p layouts",
        "verdict",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for m in &report.metrics {
        rows.push(vec![
            m.metric.clone(),
            range_cell(m.median_a, &m.a),
            range_cell(m.median_b, &m.b),
            m.spread_a.map_or("-".into(), |s| format!("{s:.3}")),
            m.spread_b.map_or("-".into(), |s| format!("{s:.3}")),
            match (m.ratio, m.ratio_ci_low, m.ratio_ci_high) {
                (Some(r), Some(lo), Some(hi)) => format!("{r:.3} [{lo:.3}, {hi:.3}]"),
                (Some(r), _, _) => format!("{r:.3}"),
                _ => "-".into(),
            },
            m.sigmas.map_or("-".into(), |s| format!("{s:+.2}")),
            num(m.p_layouts),
            m.verdict.word().to_string(),
        ]);
    }
    // The metric and the verdict left, the numbers right.
    crate::report::push_columns(&mut out, &rows, |c, n| c == 0 || c + 1 == n);
    out
}

/// The JSON report (pretty-printed, one trailing newline).
pub fn format_layout_json(report: &LayoutReport) -> String {
    // Serializing plain structs of numbers, strings and options cannot fail.
    let mut s = serde_json::to_string_pretty(report).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // A shifted pair: B's layouts fall among A's (misses 100..130 against 104..126): layout
    // noise, however far one pair of layouts is apart. A real difference: every layout of B
    // 30% above every layout of A: real, with the ratio's interval above 1. Constant and
    // equal: same. Constant and different (instructions with an extra loop): real.
    #[test]
    fn verdicts() {
        let a = [100.0, 130.0, 110.0, 120.0, 105.0, 125.0];
        let b = [126.0, 104.0, 118.0, 112.0, 122.0, 108.0];
        let s = summarize_layouts("i1", &a, &b, 1);
        assert_eq!(s.verdict, Verdict::LayoutNoise);
        assert!(s.p_layouts.unwrap() > 0.5);
        assert_eq!(s.spread_a, Some(1.3));
        let b: Vec<f64> = a.iter().map(|x| x * 1.3 + 40.0).collect();
        let s = summarize_layouts("i1", &a, &b, 1);
        assert_eq!(s.verdict, Verdict::Real);
        assert!(s.ratio_ci_low.unwrap() > 1.0);
        let s = summarize_layouts("instructions", &[5.0; 4], &[5.0; 4], 1);
        assert_eq!(s.verdict, Verdict::Same);
        let s = summarize_layouts("instructions", &[5.0; 4], &[6.0; 4], 1);
        assert_eq!(s.verdict, Verdict::Real);
        // Three a side cannot reach 0.05.
        let s = summarize_layouts("instructions", &[5.0; 3], &[6.0; 3], 1);
        assert_eq!(s.verdict, Verdict::LayoutNoise);
    }

    // The table: one row per metric, ranges collapsed when constant, the verdict last.
    #[test]
    fn table() {
        let r = LayoutReport {
            build_a: "a.o".into(),
            build_b: "b.o".into(),
            layouts: "2 layouts".into(),
            labels: vec!["shift-0".into(), "shift-80".into()],
            metrics: vec![summarize_layouts("i1", &[10.0, 12.0], &[11.0, 11.0], 1)],
        };
        let t = format_layout_table(&r);
        assert!(t.contains("note: with 2 layouts"), "{t}");
        let row = t.lines().last().unwrap();
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            words[..6],
            ["i1", "11", "[10-12]", "11", "1.200", "1.000"],
            "{row}"
        );
        assert!(row.ends_with("layout noise"), "{row}");
    }
}
