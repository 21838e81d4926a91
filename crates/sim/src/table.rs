//! The metrics of simulated runs ([`Metrics`]) and their one table and JSON form, shared by
//! `sediment sim`, `sediment compare --shifts` and `sediment order --simulate`.
//!
//! A column is one layout over K shifts; a cell is the value, or `median [min-max]` over the
//! shifts. The median of an even count is the mean of the two middle values.

use std::fmt::Write as _;

use crate::{geometry::GEOMETRIES, Metrics};

/// One value of the table: a count, or a ratio `num / den` (printed with three decimals).
#[derive(Clone, Copy)]
enum Cell {
    Count(u64),
    Ratio(u64, u64),
}

impl Cell {
    fn value(self) -> Option<f64> {
        match self {
            Cell::Count(n) => Some(n as f64),
            Cell::Ratio(_, 0) => None,
            Cell::Ratio(n, d) => Some(n as f64 / d as f64),
        }
    }
}

/// The rows: (JSON key, label, value).
fn rows(m: &Metrics) -> Vec<(String, String, Cell)> {
    let mut r = vec![
        (
            "instructions".into(),
            "instructions".into(),
            Cell::Count(m.instructions),
        ),
        (
            "object_instructions".into(),
            "instructions in binary".into(),
            Cell::Count(m.object_instructions),
        ),
    ];
    let misses = m.misses();
    for (i, g) in GEOMETRIES.iter().enumerate() {
        r.push((
            g.key.into(),
            g.label.into(),
            Cell::Count(misses.get(i).copied().unwrap_or(0)),
        ));
    }
    let b = m.bounds.unwrap_or_default();
    let weighed = m.weighed_by.label();
    for (unit, key, rows) in [
        (
            "4K pages",
            "pages",
            [
                ("for 99%", "99", m.pages_99, b.pages_99),
                ("for 99.9%", "99_9", m.pages_99_9, b.pages_99_9),
                ("touched", "touched", m.pages_touched, b.pages_touched),
            ],
        ),
        (
            "64B lines",
            "lines",
            [
                ("for 99%", "99", m.lines_99, b.lines_99),
                ("for 99.9%", "99_9", m.lines_99_9, b.lines_99_9),
                ("touched", "touched", m.lines_touched, b.lines_touched),
            ],
        ),
    ] {
        for (what, k, actual, bound) in rows {
            r.push((
                format!("{key}_{k}"),
                format!("{unit} {what} {weighed}"),
                Cell::Count(actual),
            ));
            r.push((
                format!("{key}_{k}_bound"),
                format!("{unit} {what} {weighed}, lower bound"),
                Cell::Count(bound),
            ));
            r.push((
                format!("{key}_{k}_to_bound"),
                format!("{unit} {what} {weighed} / bound"),
                Cell::Ratio(actual, bound),
            ));
        }
    }
    r
}

/// One cell of the table over K shifts: median, minimum and maximum of the row's values
/// (`None` when no shift had a value, e.g. a ratio to a bound of 0). The median of an even
/// count is the mean of the two middle values, as in `sediment_measure::spread`.
#[derive(Clone, Copy)]
struct Summary {
    count: bool,
    values: Option<(f64, f64, f64)>,
}

impl Summary {
    fn of(cells: &[Cell]) -> Self {
        let mut v: Vec<f64> = cells.iter().filter_map(|c| c.value()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let values = (n > 0).then(|| {
            let med = if n % 2 == 1 {
                v[n / 2]
            } else {
                v[n / 2 - 1] / 2.0 + v[n / 2] / 2.0
            };
            (med, v[0], v[n - 1])
        });
        Self {
            count: cells.first().is_some_and(|c| matches!(c, Cell::Count(_))),
            values,
        }
    }

    fn median(self) -> Option<f64> {
        self.values.map(|(m, ..)| m)
    }

    fn num(self, v: f64) -> String {
        if !self.count {
            format!("{v:.3}")
        } else if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    }

    /// `value`, or `median [min-max]` when the shifts disagree.
    fn text(self) -> String {
        match self.values {
            None => "-".into(),
            Some((m, lo, hi)) if lo == hi => self.num(m),
            Some((m, lo, hi)) => format!("{} [{}-{}]", self.num(m), self.num(lo), self.num(hi)),
        }
    }
}

/// Every row of a column summarised over its shifts: (JSON key, label, summary).
fn summarise(shifted: &[Metrics]) -> Vec<(String, String, Summary)> {
    let per_shift: Vec<Vec<(String, String, Cell)>> = shifted.iter().map(rows).collect();
    let Some(first) = per_shift.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, (key, label, _))| {
            let cells: Vec<Cell> = per_shift.iter().map(|r| r[i].2).collect();
            (key.clone(), label.clone(), Summary::of(&cells))
        })
        .collect()
}

/// Text table: one row per metric (only the rows whose JSON key is in `only`, if given), one
/// column per layout, then NEW/BASE ratio columns of the medians (three decimals, `-` when
/// the base is 0). A cell is the value, or `median [min-max]` over the column's shifts.
/// Right-aligned to the widest cell.
pub fn format_table(columns: &[(String, Vec<Metrics>)], only: Option<&[&str]>) -> String {
    let Some((base_label, _)) = columns.first() else {
        return String::new();
    };
    let mut header: Vec<String> = vec!["metric".into()];
    header.extend(columns.iter().map(|(l, _)| l.clone()));
    for (l, _) in &columns[1..] {
        header.push(format!("{l}/{base_label}"));
    }
    let all: Vec<Vec<(String, String, Summary)>> =
        columns.iter().map(|(_, m)| summarise(m)).collect();
    let mut table = vec![header];
    for (i, (key, label, base_cell)) in all[0].iter().enumerate() {
        if only.is_some_and(|keys| !keys.contains(&key.as_str())) {
            continue;
        }
        let mut row = vec![label.clone()];
        row.extend(all.iter().map(|r| r[i].2.text()));
        for r in &all[1..] {
            row.push(match (r[i].2.median(), base_cell.median()) {
                (Some(n), Some(b)) if b != 0.0 => format!("{:.3}", n / b),
                _ => "-".into(),
            });
        }
        table.push(row);
    }
    let ncol = table[0].len();
    let widths: Vec<usize> = (0..ncol)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &table {
        let mut line = format!("{:<w$}", r[0], w = widths[0]);
        for c in 1..ncol {
            let _ = write!(line, "  {:>w$}", r[c], w = widths[c]);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One JSON value of a report: a count (an integer, or a number with one decimal when two
/// middle values were averaged), a ratio rounded to three decimals, a string, or null.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Count(u64),
    Number(f64),
    Text(String),
    Null,
}

impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Count(n) => s.serialize_u64(*n),
            Value::Number(v) => s.serialize_f64(*v),
            Value::Text(t) => s.serialize_str(t),
            Value::Null => s.serialize_none(),
        }
    }
}

/// A JSON object whose keys keep the table's row order.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields(Vec<(String, Value)>);

impl serde::Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Summary {
    /// The JSON value of `v` (one of this summary's numbers).
    fn value(self, v: Option<f64>) -> Value {
        match v {
            None => Value::Null,
            Some(v) if self.count && v.fract() == 0.0 && v >= 0.0 => Value::Count(v as u64),
            Some(v) if self.count => Value::Number(v),
            Some(v) => Value::Number((v * 1000.0).round() / 1000.0),
        }
    }
}

/// One column of [`Report`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Column {
    /// The column's label.
    pub label: String,
    /// Every metric's median over the shifts, then `fetches` and `stdout_fnv1a`.
    pub metrics: Fields,
    /// With more than one shift: the minimum of every metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<Fields>,
    /// With more than one shift: the maximum of every metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<Fields>,
    /// With more than one shift: every metric at each shift, in shift order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_shift: Option<Vec<Fields>>,
}

/// The JSON report of simulated columns: `{"base": LABEL, "shifts": [BYTES...], "columns":
/// [{"label", "metrics", "min", "max", "per_shift"}]}`, base first, keys in table order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    /// The base column's label.
    pub base: String,
    /// The shifts in bytes, the first 0.
    pub shifts: Vec<u64>,
    /// One per layout.
    pub columns: Vec<Column>,
}

/// The [`Report`] of `columns` over `shifts`: counts are the median over the shifts, ratios
/// rounded to three decimals (or null).
pub fn report(columns: &[(String, Vec<Metrics>)], shifts: &[u64]) -> Report {
    let fields = |summary: &[(String, String, Summary)], pick: &dyn Fn(Summary) -> Option<f64>| {
        Fields(
            summary
                .iter()
                .map(|(k, _, c)| (k.clone(), c.value(pick(*c))))
                .collect(),
        )
    };
    let base = columns.first().map_or_else(String::new, |(l, _)| l.clone());
    let columns = columns
        .iter()
        .map(|(label, shifted)| {
            let summary = summarise(shifted);
            let mut metrics = fields(&summary, &|c| c.median());
            if let Some(m) = shifted.first() {
                metrics
                    .0
                    .push(("fetches".into(), Value::Count(m.fetches.unwrap_or(0))));
                metrics
                    .0
                    .push(("stdout_fnv1a".into(), Value::Text(m.stdout_fnv1a.clone())));
            }
            let several = shifted.len() > 1;
            Column {
                label: label.clone(),
                metrics,
                min: several.then(|| fields(&summary, &|c| c.values.map(|v| v.1))),
                max: several.then(|| fields(&summary, &|c| c.values.map(|v| v.2))),
                per_shift: several.then(|| {
                    shifted
                        .iter()
                        .map(|m| fields(&summarise(std::slice::from_ref(m)), &|c| c.median()))
                        .collect()
                }),
            }
        })
        .collect();
    Report {
        base,
        shifts: shifts.to_vec(),
        columns,
    }
}

/// [`report`] as pretty-printed JSON (serde_json), ending in a newline.
pub fn format_json(columns: &[(String, Vec<Metrics>)], shifts: &[u64]) -> String {
    // Serialising strings, integers and finite numbers cannot fail.
    let mut s = serde_json::to_string_pretty(&report(columns, shifts)).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // Counts over shifts: odd count -> middle value, even -> mean of the middle two, a
    // constant row prints once; ratios keep three decimals and skip shifts with a zero bound.
    #[test]
    fn summaries_over_shifts() {
        let c = |v: &[u64]| Summary::of(&v.iter().map(|&n| Cell::Count(n)).collect::<Vec<_>>());
        assert_eq!(c(&[9, 1, 5]).text(), "5 [1-9]");
        assert_eq!(c(&[4, 1, 2, 9]).text(), "3 [1-9]");
        assert_eq!(c(&[4, 1, 3, 9]).text(), "3.5 [1-9]");
        assert_eq!(c(&[7, 7]).text(), "7");
        let r = Summary::of(&[Cell::Ratio(3, 2), Cell::Ratio(1, 0), Cell::Ratio(5, 2)]);
        assert_eq!(r.text(), "2.000 [1.500-2.500]");
        assert_eq!(Summary::of(&[Cell::Ratio(1, 0)]).text(), "-");
    }

    // The JSON keeps the table's row order (instructions first, fetches and the output hash
    // last), prints counts as integers and ratios as numbers, and has min, max and per_shift
    // only with more than one shift.
    #[test]
    fn json_report_shape() {
        let m = |i1: u64| {
            let mut m = Metrics {
                instructions: 100,
                fetches: Some(7),
                stdout_fnv1a: "ab".into(),
                weighed_by: crate::FootprintWeight::ExecutedBytes,
                ..Metrics::default()
            };
            m.set_misses(&[i1, 0, 0, 0, 0, 0]);
            m.pages_99 = 3;
            m.bounds = Some(crate::Bounds {
                pages_99: 2,
                ..Default::default()
            });
            m
        };
        let one = format_json(&[("a".into(), vec![m(5)])], &[0]);
        let v: serde_json::Value = serde_json::from_str(&one).unwrap();
        let c = &v["columns"][0];
        assert_eq!(v["base"], "a");
        assert!(c.get("min").is_none() && c.get("per_shift").is_none());
        assert_eq!(c["metrics"]["pages_99_to_bound"].as_f64(), Some(1.5));
        assert_eq!(c["metrics"]["fetches"], 7);
        let keys: Vec<&str> = one
            .lines()
            .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next())
            .collect();
        assert_eq!(keys[..4], ["base", "shifts", "columns", "label"]);
        assert_eq!(keys[5], "instructions");
        assert_eq!(keys[keys.len() - 1], "stdout_fnv1a");
        let two = format_json(&[("a".into(), vec![m(5), m(8)])], &[0, 80]);
        let v: serde_json::Value = serde_json::from_str(&two).unwrap();
        let c = &v["columns"][0];
        assert_eq!(c["metrics"]["i1_misses_32k_8way"].as_f64(), Some(6.5));
        assert_eq!(c["min"]["i1_misses_32k_8way"], 5);
        assert_eq!(c["per_shift"][1]["i1_misses_32k_8way"], 8);
    }
}
