//! The spread of each metric over several layouts of one program: `sediment noise`.
//!
//! Two builds of one program that differ only in where the linker put its code can differ in
//! every cache metric, because which functions share a cache set, a line or a page is decided
//! by addresses, not by the source (Mytkowicz, Diwan, Hauswirth and Sweeney, "Producing Wrong
//! Data Without Doing Anything Obviously Wrong!", ASPLOS 2009; Curtsinger and Berger,
//! "STABILIZER: Statistically Sound Performance Evaluation", ASPLOS 2013). Measuring N
//! layouts that should be equivalent gives the size of that noise: an A/B difference smaller
//! than the range seen here is not evidence that an ordering helped.
//!
//! [`spread`] summarises one metric's values as median, minimum, maximum and the relative
//! range `(max - min) / median`; [`spreads`] does it for every row of [`crate::ROWS`]. Both
//! are pure functions of their inputs: the values are sorted, so the order of the variants
//! does not matter.
//!
//! Turned down: mean and standard deviation. With a handful of layouts and metrics that jump
//! when one hot loop straddles a line, the median and the full range are the honest summary;
//! a standard deviation would suggest a normal distribution nobody measured.

use crate::{Metrics, ROWS};

/// Median, minimum and maximum of one metric over several layouts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    /// The middle value; for an even count, the mean of the two middle values.
    pub median: f64,
    /// The smallest value.
    pub min: u64,
    /// The largest value.
    pub max: u64,
    /// `(max - min) / median`; `None` when the median is 0 (every value small enough that
    /// a ratio means nothing).
    pub relative_range: Option<f64>,
}

/// The spread of `values`; `None` when there are none.
pub fn spread(values: &[u64]) -> Option<Spread> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let (&min, &max) = (v.first()?, v.last()?);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        // Halves first, so that two values near u64::MAX do not overflow.
        v[n / 2 - 1] as f64 / 2.0 + v[n / 2] as f64 / 2.0
    };
    let relative_range = (median > 0.0).then(|| (max - min) as f64 / median);
    Some(Spread {
        median,
        min,
        max,
        relative_range,
    })
}

/// The spread of every [`ROWS`] metric over `metrics`, as (JSON key, label, spread) in table
/// order; empty when `metrics` is.
pub fn spreads(metrics: &[Metrics]) -> Vec<(&'static str, &'static str, Spread)> {
    ROWS.iter()
        .filter_map(|&(key, label, get)| {
            let values: Vec<u64> = metrics.iter().map(get).collect();
            spread(&values).map(|s| (key, label, s))
        })
        .collect()
}

/// The JSON report of `sediment noise`: `{"mode", "layouts", "variants": [{"label",
/// "metrics"}], "spread": [{"metric", "median", "min", "max", "relative_range"}]}`, variants
/// in the order given, metrics in [`ROWS`] order, each named by its JSON key. `layouts` is a free-text description.
pub fn format_json(mode: &str, layouts: &str, variants: &[(String, Metrics)]) -> String {
    #[derive(serde::Serialize)]
    struct Variant<'a> {
        label: &'a str,
        metrics: &'a Metrics,
    }
    #[derive(serde::Serialize)]
    struct Row {
        metric: &'static str,
        #[serde(flatten)]
        spread: Spread,
    }
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        mode: &'a str,
        layouts: &'a str,
        variants: Vec<Variant<'a>>,
        spread: Vec<Row>,
    }
    let metrics: Vec<Metrics> = variants.iter().map(|(_, m)| m.clone()).collect();
    let doc = Doc {
        mode,
        layouts,
        variants: variants
            .iter()
            .map(|(label, metrics)| Variant { label, metrics })
            .collect(),
        spread: spreads(&metrics)
            .into_iter()
            .map(|(metric, _, spread)| Row { metric, spread })
            .collect(),
    };
    // Serialising plain structs of strings and numbers cannot fail.
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_count_median_is_middle_value() {
        // 10, 12, 30 in any order: median 12, range 20, relative range 20/12.
        let s = spread(&[30, 10, 12]).unwrap();
        assert_eq!(s.median, 12.0);
        assert_eq!((s.min, s.max), (10, 30));
        assert_eq!(s.relative_range, Some(20.0 / 12.0));
    }

    #[test]
    fn even_count_median_is_mean_of_middle_pair() {
        // 1, 2, 5, 9: median (2 + 5) / 2 = 3.5.
        let s = spread(&[9, 1, 5, 2]).unwrap();
        assert_eq!(s.median, 3.5);
        assert_eq!((s.min, s.max), (1, 9));
        assert_eq!(s.relative_range, Some(8.0 / 3.5));
    }

    #[test]
    fn zero_median_has_no_relative_range_and_empty_has_no_spread() {
        // A ratio to 0 is undefined, and nothing to summarise gives nothing.
        assert_eq!(spread(&[0, 0, 4]).unwrap().relative_range, None);
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn huge_values_do_not_overflow() {
        // The even median of two maximal values is that value, not an overflow.
        let s = spread(&[u64::MAX, u64::MAX]).unwrap();
        assert_eq!(s.median, u64::MAX as f64);
        assert_eq!(s.relative_range, Some(0.0));
    }

    #[test]
    fn json_lists_variants_then_spread_rows() {
        // Two variants with 1000 and 1010 instructions: median 1005, and a metric that is 0
        // everywhere has a null relative range.
        let m = |instructions| Metrics {
            binary: "b".into(),
            instructions,
            ..Metrics::default()
        };
        let j = format_json(
            "shift",
            "two",
            &[("a".into(), m(1000)), ("b".into(), m(1010))],
        );
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["mode"], "shift");
        assert_eq!(v["variants"][1]["label"], "b");
        assert_eq!(v["variants"][1]["metrics"]["instructions"], 1010);
        assert_eq!(v["spread"].as_array().unwrap().len(), ROWS.len());
        assert_eq!(v["spread"][0]["metric"], "instructions");
        assert_eq!(v["spread"][0]["median"], 1005.0);
        // serde_json's default float parsing may be off by one unit in the last place.
        let rel = v["spread"][0]["relative_range"].as_f64().unwrap();
        assert!((rel - 10.0 / 1005.0).abs() < 1e-15, "{rel}");
        assert_eq!(v["spread"][1]["relative_range"], serde_json::Value::Null);
    }
}
