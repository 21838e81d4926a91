//! The side-by-side text table of `sediment compare`.
//!
//! One row per metric, one column per binary (the first is the base), then one ratio column
//! per other binary: its value divided by the base's, three decimals, `-` when the base is 0.
//! Columns are right-aligned to the widest cell, so the table is stable and diffable.

use sediment_sim::geometry::{ITLB_128_8WAY, ITLB_64_8WAY, L1I_16K_4WAY, L1I_32K_8WAY};

use crate::Metrics;

/// One table row: its JSON key (the metric's one name), its label and how to read its value
/// from [`Metrics`].
pub type Row = (&'static str, &'static str, fn(&Metrics) -> u64);

/// The rows, in display order. Cache and iTLB labels are those of `sediment_sim::GEOMETRIES`;
/// footprint labels say what they count: callgrind gives per-instruction counts, so these
/// footprints weigh executed instructions (`sediment sim`'s weigh executed bytes).
pub const ROWS: [Row; 11] = [
    ("instructions", "instructions", |m| m.instructions),
    (L1I_32K_8WAY.key, L1I_32K_8WAY.label, |m| {
        m.i1_misses_32k_8way
    }),
    (L1I_16K_4WAY.key, L1I_16K_4WAY.label, |m| {
        m.i1_misses_16k_4way
    }),
    (ITLB_64_8WAY.key, ITLB_64_8WAY.label, |m| m.itlb_misses_64),
    (ITLB_128_8WAY.key, ITLB_128_8WAY.label, |m| {
        m.itlb_misses_128
    }),
    (
        "pages_99",
        "4K pages for 99% (executed instructions)",
        |m| m.pages_99,
    ),
    (
        "pages_99_9",
        "4K pages for 99.9% (executed instructions)",
        |m| m.pages_99_9,
    ),
    (
        "lines_99",
        "64B lines for 99% (executed instructions)",
        |m| m.lines_99,
    ),
    (
        "lines_99_9",
        "64B lines for 99.9% (executed instructions)",
        |m| m.lines_99_9,
    ),
    (
        "pages_touched",
        "4K pages touched (executed instructions)",
        |m| m.pages_touched,
    ),
    (
        "lines_touched",
        "64B lines touched (executed instructions)",
        |m| m.lines_touched,
    ),
];

/// Formats `columns` (label, metrics), the first being the base, as a text table.
pub fn format_table(columns: &[(String, Metrics)]) -> String {
    format_table_without(columns, &[])
}

/// [`format_table`] without the rows whose JSON key is in `skip` (`sediment compare --shifts`
/// replaces the I1 and footprint rows of one layout by their spread over shifted layouts).
pub fn format_table_without(columns: &[(String, Metrics)], skip: &[&str]) -> String {
    let Some((base_label, base)) = columns.first() else {
        return String::new();
    };
    let mut header: Vec<String> = vec!["metric".into()];
    header.extend(columns.iter().map(|(l, _)| l.clone()));
    for (l, _) in &columns[1..] {
        header.push(format!("{l}/{base_label}"));
    }
    let mut rows = vec![header];
    for (key, label, get) in ROWS {
        if skip.contains(&key) {
            continue;
        }
        // Footprint labels name what the base's footprints weigh (the one-pass measurement
        // weighs executed bytes).
        let instr = sediment_sim::FootprintWeight::ExecutedInstructions.label();
        let label = match label.strip_suffix(instr) {
            Some(stem) => format!("{stem}{}", base.weighed_by.label()),
            None => label.to_string(),
        };
        let mut row = vec![label];
        row.extend(columns.iter().map(|(_, m)| get(m).to_string()));
        for (_, m) in &columns[1..] {
            row.push(ratio(get(m), get(base)));
        }
        rows.push(row);
    }
    let ncol = rows[0].len();
    let widths: Vec<usize> = (0..ncol)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = format!("{:<w$}", r[0], w = widths[0]);
        for c in 1..ncol {
            line.push_str(&format!("  {:>w$}", r[c], w = widths[c]));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One column of the JSON output.
#[derive(Debug, serde::Serialize)]
pub struct JsonColumn<'a> {
    /// The column's label.
    pub label: &'a str,
    /// Its metrics.
    pub metrics: &'a Metrics,
}

/// The JSON report of [`format_json`]: `{"base": "<label>", "columns": [{"label": ...,
/// "metrics": {...}}, ...]}`, base first.
#[derive(Debug, serde::Serialize)]
pub struct Report<'a> {
    /// The base column's label.
    pub base: &'a str,
    /// Every column, base first.
    pub columns: Vec<JsonColumn<'a>>,
}

/// The [`Report`] of `columns` (label, metrics), the first being the base.
pub fn report(columns: &[(String, Metrics)]) -> Report<'_> {
    Report {
        base: columns.first().map_or("", |(l, _)| l.as_str()),
        columns: columns
            .iter()
            .map(|(label, metrics)| JsonColumn { label, metrics })
            .collect(),
    }
}

/// Formats `columns` (label, metrics) as pretty-printed JSON ([`Report`]).
pub fn format_json(columns: &[(String, Metrics)]) -> String {
    // Serialising plain structs of strings and integers cannot fail.
    let mut s = serde_json::to_string_pretty(&report(columns)).unwrap_or_default();
    s.push('\n');
    s
}

/// Reads back the output of [`format_json`]: (label, metrics) per column, base first.
pub fn parse_json(text: &str) -> Result<Vec<(String, Metrics)>, crate::Error> {
    #[derive(serde::Deserialize)]
    struct Column {
        label: String,
        metrics: Metrics,
    }
    #[derive(serde::Deserialize)]
    struct Doc {
        columns: Vec<Column>,
    }
    let doc: Doc = serde_json::from_str(text).map_err(|e| crate::Error::Json(e.to_string()))?;
    Ok(doc
        .columns
        .into_iter()
        .map(|c| (c.label, c.metrics))
        .collect())
}

fn ratio(new: u64, base: u64) -> String {
    if base == 0 {
        "-".into()
    } else {
        format!("{:.3}", new as f64 / base as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pages: u64) -> Metrics {
        Metrics {
            binary: "b".into(),
            instructions: 1000,
            i1_misses_32k_8way: 0,
            i1_misses_16k_4way: 10,
            itlb_misses_64: 0,
            itlb_misses_128: 0,
            object_instructions: 900,
            pages_99: pages,
            pages_99_9: pages,
            lines_99: 4,
            lines_99_9: 4,
            pages_touched: pages,
            lines_touched: 4,
            stdout_fnv1a: String::new(),
            ..Metrics::default()
        }
    }

    #[test]
    fn ratio_column_and_zero_base() {
        // Halving the pages shows 0.500; a zero base shows `-` instead of dividing by zero.
        let t = format_table(&[("base".into(), m(4)), ("new".into(), m(2))]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "metric                                       base   new  new/base"
        );
        assert_eq!(
            lines[2],
            "I1 misses 32K/8-way                             0     0         -"
        );
        assert_eq!(
            lines[6],
            "4K pages for 99% (executed instructions)        4     2     0.500"
        );
        assert_eq!(lines.len(), 12);
    }

    #[test]
    fn json_round_trips_metrics() {
        // The JSON holds the base label and every column's metrics, field for field.
        let j = format_json(&[("base".into(), m(4)), ("new".into(), m(2))]);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["base"], "base");
        let back: Metrics = serde_json::from_value(v["columns"][1]["metrics"].clone()).unwrap();
        assert_eq!(back, m(2));
        assert_eq!(
            parse_json(&j).unwrap(),
            vec![("base".to_string(), m(4)), ("new".to_string(), m(2))]
        );
    }
}
