//! Results by record count, shared by `cairn-bench` and `cairn-bench sweep`: named values per N
//! (a value or the reason there is none), the Markdown table with one column per N, the plot
//! series, and per-cell medians over repeated runs. JSON keys are part of the tools' interface:
//! add, never rename.

use crate::compare::plot::Series;
use crate::compare::report::format_value;
use crate::compare::stats::median;
use crate::compare::workloads::Better;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One measured quantity at one record count.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Value {
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Value {
    pub fn new(name: &str, unit: &str, better: Better, value: Result<f64, String>) -> Value {
        let (value, error) = match value {
            Ok(v) if v.is_finite() => (Some(v), None),
            Ok(v) => (None, Some(format!("not finite ({v})"))),
            Err(e) => (None, Some(e)),
        };
        Value {
            name: name.into(),
            unit: unit.into(),
            better,
            value,
            error,
        }
    }
}

/// Every value measured at one record count.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Point {
    pub docs: u64,
    pub workloads: Vec<Value>,
}

impl Point {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.workloads.iter().find(|v| v.name == name)?.value
    }
}

/// Row names in order of first appearance over all points (a count that failed early still
/// leaves the rows measured at other counts).
fn names<'a>(points: impl IntoIterator<Item = &'a Point>) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for v in points.into_iter().flat_map(|p| &p.workloads) {
        if !out.iter().any(|(n, _)| *n == v.name) {
            out.push((&v.name, &v.unit));
        }
    }
    out
}

/// `| workload | unit | N1 | N2 | ...` with a value, `error: ...` or `n/a` per cell.
pub fn by_count(points: &[Point]) -> String {
    let mut s = String::from("| workload | unit |");
    for p in points {
        let _ = write!(s, " {} |", p.docs);
    }
    s.push_str("\n| --- | --- |");
    s.push_str(&" ---: |".repeat(points.len()));
    s.push('\n');
    for (name, unit) in names(points) {
        let _ = write!(s, "| {name} | {unit} |");
        for p in points {
            let cell = match p.workloads.iter().find(|x| x.name == name) {
                Some(Value { value: Some(v), .. }) => format_value(*v),
                Some(Value { error: Some(e), .. }) => format!("error: {}", e.replace('|', "/")),
                _ => "n/a".into(),
            };
            let _ = write!(s, " {cell} |");
        }
        s.push('\n');
    }
    s
}

/// One line per row named by `keep` that has a value at two or more counts.
pub fn series(points: &[Point], keep: impl Fn(&str) -> bool) -> Vec<Series> {
    names(points)
        .into_iter()
        .filter(|(name, _)| keep(name))
        .map(|(name, unit)| Series {
            name: format!("{name} ({unit})"),
            points: points
                .iter()
                .filter_map(|p| Some((p.docs as f64, p.get(name)?)))
                .collect(),
        })
        .filter(|s| s.points.len() >= 2)
        .collect()
}

/// Per count and row, the median over the repeats that produced a value; a row that never did
/// keeps the first repeat's error. Counts are taken from the first repeat.
pub fn medians(repeats: &[Vec<Point>]) -> Vec<Point> {
    let Some(first) = repeats.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|p| {
            let same_n: Vec<&Point> = repeats
                .iter()
                .filter_map(|r| r.iter().find(|q| q.docs == p.docs))
                .collect();
            let workloads = names(same_n.iter().copied())
                .into_iter()
                .map(|(name, _)| median_value(&same_n, name))
                .collect();
            Point {
                docs: p.docs,
                workloads,
            }
        })
        .collect()
}

fn median_value(points: &[&Point], name: &str) -> Value {
    let cells: Vec<&Value> = points
        .iter()
        .filter_map(|p| p.workloads.iter().find(|v| v.name == name))
        .collect();
    let values: Vec<f64> = cells.iter().filter_map(|v| v.value).collect();
    let mut out = cells[0].clone();
    out.value = median(&values);
    if out.value.is_some() {
        out.error = None;
    } else if out.error.is_none() {
        out.error = cells.iter().find_map(|v| v.error.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(docs: u64, values: &[(&str, Result<f64, String>)]) -> Point {
        Point {
            docs,
            workloads: values
                .iter()
                .map(|(n, v)| Value::new(n, "us/op", Better::Lower, v.clone()))
                .collect(),
        }
    }

    #[test]
    fn table_has_a_column_per_count_and_every_row() {
        let points = [
            point(10, &[("a", Ok(1.5))]),
            point(
                100,
                &[("a", Err("CommandNotFound (59)".into())), ("b", Ok(250.0))],
            ),
        ];
        let md = by_count(&points);
        assert!(md.starts_with("| workload | unit | 10 | 100 |\n| --- | --- | ---: | ---: |\n"));
        assert!(md.contains("| a | us/op | 1.50 | error: CommandNotFound (59) |"));
        assert!(md.contains("| b | us/op | n/a | 250 |"));
        let s = series(&points, |_| true);
        assert!(s.is_empty(), "no row has two values");
    }

    #[test]
    fn medians_take_values_over_errors() {
        let repeats = vec![
            vec![point(10, &[("a", Ok(3.0)), ("b", Err("x".into()))])],
            vec![point(10, &[("a", Ok(1.0)), ("b", Err("y".into()))])],
            vec![point(10, &[("a", Err("z".into())), ("b", Err("w".into()))])],
        ];
        let m = medians(&repeats);
        assert_eq!(m[0].get("a"), Some(2.0));
        assert_eq!(m[0].workloads[0].error, None);
        assert_eq!(m[0].workloads[1].error.as_deref(), Some("x"));
        assert_eq!(
            Value::new("n", "u", Better::Lower, Ok(f64::NAN)).value,
            None
        );
    }
}
