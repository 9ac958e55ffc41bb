//! `$setWindowFields`: partitions the input by `partitionBy`, orders each partition by
//! `sortBy` (the output comes out in partition then sort order, as mongod's implicit `$sort`
//! makes it), and computes each output field over a window of the partition.
//!
//! Windows: `documents: [lo, hi]` (positions relative to the current document, or
//! "unbounded"/"current") and `range: [lo, hi]` (values relative to the current document's
//! single numeric or date sort key, with `unit` for dates up to weeks). No window means the
//! whole partition. Functions: every `$group` accumulator, `$rank`, `$denseRank`,
//! `$documentNumber`, `$shift`, `$locf`, `$derivative`, `$integral`. Windows with an
//! unbounded lower end are computed incrementally; other windows are recomputed per document
//! (O(n * w)).

use super::sort::SortKeys;
use super::{Stage, spec_doc};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::budget::Held;
use crate::query::path::set_path;
use crate::query::pipeline::accum::Acc;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::run_context::{RunCx, doc_size_bytes};
use crate::query::pipeline::values::{split_field_path, to_raw};
use crate::query::pipeline::variables::AggExpr;
use crate::query::pipeline::{DocStream, ParseContext};
use crate::query::types;
use bson::{Bson, Document, RawDocumentBuf};
use std::cmp::Ordering;
use storage::order;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Unbounded,
    Current,
    Offset(f64),
}

#[derive(Debug, Clone, Copy)]
enum Window {
    Documents(Bound, Bound),
    /// Bounds in sort-key units (milliseconds when a date unit was given).
    Range(Bound, Bound),
}

#[derive(Debug)]
enum Func {
    Acc(Acc),
    Rank {
        dense: bool,
    },
    DocumentNumber,
    Shift {
        output: AggExpr,
        by: i64,
        default: Bson,
    },
    Locf(AggExpr),
    /// `$derivative` (rate between the window's ends) and `$integral` (trapezoidal area), per
    /// `unit_ms` of a date sort key (1 for numbers).
    Slope {
        input: AggExpr,
        unit_ms: f64,
        integral: bool,
    },
}

#[derive(Debug)]
struct OutputField {
    path: Vec<String>,
    func: Func,
    window: Option<Window>,
}

/// One input document with its keys.
struct Row {
    partition: Bson,
    sort_key: Vec<Bson>,
    doc: Document,
    raw: RawDocumentBuf,
}

#[derive(Debug)]
pub struct SetWindowFields {
    partition_by: Option<AggExpr>,
    sort: Option<SortKeys>,
    outputs: Vec<OutputField>,
}

fn bad(message: impl Into<String>) -> crate::error::CommandError {
    perr(codes::WINDOW_BAD_SPEC, message)
}

fn parse_bound(v: &Bson) -> CommandResult<Bound> {
    match v {
        Bson::String(s) if s == "unbounded" => Ok(Bound::Unbounded),
        Bson::String(s) if s == "current" => Ok(Bound::Current),
        other => types::as_f64(other).map(Bound::Offset).ok_or_else(|| {
            bad(format!(
                "Window bounds must be 'unbounded', 'current', or a number, found {other}"
            ))
        }),
    }
}

/// Milliseconds in a `unit` (calendar units vary in length and are not supported).
fn unit_ms(unit: &str) -> CommandResult<f64> {
    Ok(match unit {
        "millisecond" => 1.0,
        "second" => 1e3,
        "minute" => 6e4,
        "hour" => 3.6e6,
        "day" => 8.64e7,
        "week" => 6.048e8,
        "month" | "quarter" | "year" => {
            return Err(err(
                ErrorCode::NotImplemented,
                format!("range windows in unit '{unit}' are not supported by cairn"),
            ));
        }
        other => return Err(bad(format!("unknown time unit value: {other}"))),
    })
}

fn parse_window(w: &Bson) -> CommandResult<Window> {
    let Bson::Document(d) = w else {
        return Err(bad("'window' field must be an object"));
    };
    let pair = |key: &str| -> CommandResult<(Bound, Bound)> {
        match d.get(key) {
            Some(Bson::Array(b)) if b.len() == 2 => Ok((parse_bound(&b[0])?, parse_bound(&b[1])?)),
            _ => Err(bad(format!(
                "Window bounds must be a 2-element array: {key}"
            ))),
        }
    };
    if let Some(k) = d
        .keys()
        .find(|k| !matches!(k.as_str(), "documents" | "range" | "unit"))
    {
        return Err(bad(format!(
            "'window' field that is not documents or range: {k}"
        )));
    }
    let window = match (d.contains_key("documents"), d.contains_key("range")) {
        (true, false) => {
            let (lo, hi) = pair("documents")?;
            let integral = |b: Bound| !matches!(b, Bound::Offset(x) if x.fract() != 0.0);
            if !integral(lo) || !integral(hi) {
                return Err(bad("Numeric document-based bounds must be an integer"));
            }
            Window::Documents(lo, hi)
        }
        (false, true) => {
            let (lo, hi) = pair("range")?;
            let scale = match d.get("unit") {
                Some(Bson::String(u)) => unit_ms(u)?,
                None => 1.0,
                Some(_) => return Err(bad("'unit' must be a string")),
            };
            let scaled = |b: Bound| match b {
                Bound::Offset(x) => Bound::Offset(x * scale),
                other => other,
            };
            Window::Range(scaled(lo), scaled(hi))
        }
        _ => {
            return Err(bad(
                "'window' field must specify exactly one of 'documents' or 'range'",
            ));
        }
    };
    let ordered = match window {
        Window::Documents(Bound::Offset(a), Bound::Offset(b))
        | Window::Range(Bound::Offset(a), Bound::Offset(b)) => a <= b,
        Window::Documents(Bound::Current, Bound::Offset(b))
        | Window::Range(Bound::Current, Bound::Offset(b)) => b >= 0.0,
        Window::Documents(Bound::Offset(a), Bound::Current)
        | Window::Range(Bound::Offset(a), Bound::Current) => a <= 0.0,
        Window::Documents(_, Bound::Unbounded) | Window::Range(_, Bound::Unbounded) => true,
        Window::Documents(Bound::Unbounded, _) | Window::Range(Bound::Unbounded, _) => true,
        _ => true,
    };
    if !ordered {
        return Err(bad("Lower bound must not exceed upper bound"));
    }
    Ok(window)
}

fn parse_func(op: &str, arg: &Bson, ctx: &ParseContext) -> CommandResult<Func> {
    match op {
        "$rank" | "$denseRank" | "$documentNumber" => {
            if !matches!(arg, Bson::Document(d) if d.is_empty()) {
                return Err(bad(format!("{op} takes no arguments, i.e. {op}: {{}}")));
            }
            Ok(match op {
                "$rank" => Func::Rank { dense: false },
                "$denseRank" => Func::Rank { dense: true },
                _ => Func::DocumentNumber,
            })
        }
        "$shift" => {
            let d = spec_doc(arg, codes::WINDOW_BAD_SPEC, "$shift")?;
            let output = d
                .get("output")
                .ok_or_else(|| bad("$shift requires an 'output' expression"))?;
            let by = d
                .get("by")
                .and_then(crate::query::pipeline::values::integral)
                .ok_or_else(|| bad("$shift requires 'by' as an integer value"))?;
            let default = match d.get("default") {
                None => Bson::Null,
                Some(v) => AggExpr::parse(v, ctx)?
                    .eval_on(&Document::new())?
                    .unwrap_or(Bson::Null),
            };
            Ok(Func::Shift {
                output: AggExpr::parse(output, ctx)?,
                by,
                default,
            })
        }
        "$locf" => Ok(Func::Locf(AggExpr::parse(arg, ctx)?)),
        "$derivative" | "$integral" => {
            let d = spec_doc(arg, codes::WINDOW_BAD_SPEC, op)?;
            if let Some(k) = d.keys().find(|k| !matches!(k.as_str(), "input" | "unit")) {
                return Err(bad(format!("{op} got unexpected argument: {k}")));
            }
            let input = d
                .get("input")
                .ok_or_else(|| bad(format!("{op} requires an 'input' expression")))?;
            let unit_ms = match d.get("unit") {
                None => 1.0,
                Some(Bson::String(u)) => unit_ms(u)?,
                Some(_) => return Err(bad(format!("{op} 'unit' must be a string"))),
            };
            Ok(Func::Slope {
                input: AggExpr::parse(input, ctx)?,
                unit_ms,
                integral: op == "$integral",
            })
        }
        _ => match Acc::parse(op, arg, ctx)? {
            Some(acc) => Ok(Func::Acc(acc)),
            None => Err(bad(format!("Unrecognized window function, {op}"))),
        },
    }
}

impl SetWindowFields {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<SetWindowFields> {
        let d = spec_doc(
            spec,
            codes::WINDOW_BAD_SPEC,
            "the $setWindowFields specification",
        )?;
        if let Some(k) = d
            .keys()
            .find(|k| !matches!(k.as_str(), "partitionBy" | "sortBy" | "output"))
        {
            return Err(perr(
                codes::UNKNOWN_FIELD,
                format!("BSON field '$setWindowFields.{k}' is an unknown field."),
            ));
        }
        let sort = match d.get("sortBy") {
            None => None,
            Some(Bson::Document(s)) => Some(SortKeys::parse(s)?),
            Some(_) => return Err(bad("sortBy must be an object")),
        };
        let Some(Bson::Document(outputs)) = d.get("output") else {
            return Err(perr(
                codes::MISSING_FIELD,
                "BSON field '$setWindowFields.output' is missing but a required field",
            ));
        };
        let mut fields = Vec::with_capacity(outputs.len());
        for (name, f) in outputs {
            let Bson::Document(fd) = f else {
                return Err(bad(format!("The field '{name}' must be an object")));
            };
            let mut func = None;
            let mut window = None;
            for (k, v) in fd {
                if k == "window" {
                    window = Some(parse_window(v)?);
                } else if func.is_none() && k.starts_with('$') {
                    func = Some(parse_func(k, v, ctx)?);
                } else {
                    return Err(bad(format!(
                        "Window function found an unknown argument: {k}"
                    )));
                }
            }
            let func =
                func.ok_or_else(|| bad(format!("Expected a window function for field '{name}'")))?;
            let needs_sort = matches!(
                func,
                Func::Rank { .. } | Func::DocumentNumber | Func::Shift { .. } | Func::Locf(_)
            ) || matches!(window, Some(Window::Range(..)));
            if needs_sort && sort.is_none() {
                return Err(bad(format!(
                    "'{name}': this window function requires a sortBy"
                )));
            }
            if matches!(window, Some(Window::Range(..)))
                && sort.as_ref().and_then(SortKeys::single_path).is_none()
            {
                return Err(bad("Range-based window requires sortBy a single field"));
            }
            if matches!(
                func,
                Func::Slope {
                    integral: false,
                    ..
                }
            ) && window.is_none()
            {
                return Err(bad(format!("'{name}': $derivative requires a 'window'")));
            }
            if matches!(func, Func::Slope { .. })
                && sort.as_ref().and_then(SortKeys::single_path).is_none()
            {
                return Err(bad(format!(
                    "'{name}': $derivative and $integral require a sortBy on a single field"
                )));
            }
            if window.is_some() && !matches!(func, Func::Acc(_) | Func::Slope { .. }) {
                return Err(bad(format!(
                    "'{name}': this window function does not accept a 'window' field"
                )));
            }
            fields.push(OutputField {
                path: split_field_path(name)?,
                func,
                window,
            });
        }
        let partition_by = d
            .get("partitionBy")
            .map(|p| AggExpr::parse(p, ctx))
            .transpose()?;
        Ok(SetWindowFields {
            partition_by,
            sort,
            outputs: fields,
        })
    }

    /// The input as rows, and the charge for them (held while the windows are computed).
    fn rows(&self, input: DocStream<'_>, cx: RunCx<'_>) -> CommandResult<(Vec<Row>, Held)> {
        let mut rows = Vec::new();
        let mut used_bytes = 0usize;
        let mut held = Held::global();
        for item in input {
            let doc = item?;
            used_bytes += doc_size_bytes(&doc) * 2;
            cx.charge(&mut held, used_bytes, "$setWindowFields")?;
            let raw = to_raw(&doc)?;
            let partition = match &self.partition_by {
                Some(p) => p.eval(&raw)?.unwrap_or(Bson::Null),
                None => Bson::Null,
            };
            let sort_key = self
                .sort
                .as_ref()
                .map(|s| s.key_of(&raw))
                .unwrap_or_default();
            rows.push(Row {
                partition,
                sort_key,
                doc,
                raw,
            });
        }
        rows.sort_by(|a, b| {
            order::compare_bson(&a.partition, &b.partition).then_with(|| match &self.sort {
                Some(s) => s.compare(&a.sort_key, &b.sort_key),
                None => Ordering::Equal,
            })
        });
        Ok((rows, held))
    }

    fn compute(&self, field: &OutputField, part: &[Row]) -> CommandResult<Vec<Option<Bson>>> {
        let n = part.len();
        match &field.func {
            Func::DocumentNumber => Ok((1..=n).map(|i| Some(int(i))).collect()),
            Func::Rank { dense } => {
                let mut out = Vec::with_capacity(n);
                let mut rank = 0usize;
                for i in 0..n {
                    let tie = i > 0
                        && self.sort.as_ref().is_some_and(|s| {
                            s.compare(&part[i - 1].sort_key, &part[i].sort_key) == Ordering::Equal
                        });
                    if !tie {
                        rank = if *dense { rank + 1 } else { i + 1 };
                    }
                    out.push(Some(int(rank)));
                }
                Ok(out)
            }
            Func::Shift {
                output,
                by,
                default,
            } => (0..n)
                .map(|i| {
                    let j = i64::try_from(i).unwrap_or(i64::MAX).saturating_add(*by);
                    match usize::try_from(j).ok().filter(|j| *j < n) {
                        Some(j) => Ok(Some(output.eval(&part[j].raw)?.unwrap_or(Bson::Null))),
                        None => Ok(Some(default.clone())),
                    }
                })
                .collect(),
            Func::Locf(e) => {
                let mut last = Bson::Null;
                let mut out = Vec::with_capacity(n);
                for row in part {
                    if let Some(v) = e
                        .eval(&row.raw)?
                        .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                    {
                        last = v;
                    }
                    out.push(Some(last.clone()));
                }
                Ok(out)
            }
            Func::Acc(acc) => self.compute_acc(acc, field.window, part),
            Func::Slope {
                input,
                unit_ms,
                integral,
            } => {
                let points = part
                    .iter()
                    .map(|r| {
                        let x = sort_value(r).map(|x| x / unit_ms);
                        let y = input.eval(&r.raw)?.as_ref().and_then(types::as_f64);
                        Ok(x.zip(y))
                    })
                    .collect::<CommandResult<Vec<_>>>()?;
                Ok(self
                    .ranges(field.window, part)
                    .into_iter()
                    .map(|(lo, hi)| Some(slope(&points[lo..hi.max(lo)], *integral)))
                    .collect())
            }
        }
    }

    fn compute_acc(
        &self,
        acc: &Acc,
        window: Option<Window>,
        part: &[Row],
    ) -> CommandResult<Vec<Option<Bson>>> {
        let n = part.len();
        let window = window.unwrap_or(Window::Documents(Bound::Unbounded, Bound::Unbounded));
        let ranges = self.ranges(Some(window), part);
        let mut out = Vec::with_capacity(n);
        let incremental = matches!(window, Window::Documents(Bound::Unbounded, _));
        let mut state = acc.new_state();
        let mut added = 0usize;
        for (lo, hi) in ranges {
            if incremental {
                while added < hi {
                    acc.add(&mut state, &part[added].raw)?;
                    added += 1;
                }
                out.push(Some(acc.finish(&state)));
                continue;
            }
            let mut s = acc.new_state();
            for row in part.iter().take(hi).skip(lo) {
                acc.add(&mut s, &row.raw)?;
            }
            out.push(Some(acc.finish(&s)));
        }
        Ok(out)
    }

    /// The half-open row range of each row's window (the whole partition when unspecified).
    fn ranges(&self, window: Option<Window>, part: &[Row]) -> Vec<(usize, usize)> {
        let n = part.len();
        match window.unwrap_or(Window::Documents(Bound::Unbounded, Bound::Unbounded)) {
            Window::Documents(lo, hi) => (0..n)
                .map(|i| (doc_index(lo, i, n, true), doc_index(hi, i, n, false)))
                .collect(),
            Window::Range(lo, hi) => self.range_windows(lo, hi, part),
        }
    }

    /// Half-open index ranges of the rows whose sort value lies within the bounds.
    fn range_windows(&self, lo: Bound, hi: Bound, part: &[Row]) -> Vec<(usize, usize)> {
        let value = sort_value;
        let descending = self
            .sort
            .as_ref()
            .and_then(SortKeys::single_path)
            .is_some_and(|(_, d)| d);
        let values: Vec<Option<f64>> = part.iter().map(value).collect();
        values
            .iter()
            .map(|cur| {
                let Some(cur) = cur else {
                    return (0, 0);
                };
                let within = |v: &Option<f64>| {
                    let Some(v) = v else { return false };
                    let d = if descending { cur - v } else { v - cur };
                    let above = match lo {
                        Bound::Unbounded => true,
                        Bound::Current => d >= 0.0,
                        Bound::Offset(x) => d >= x,
                    };
                    let below = match hi {
                        Bound::Unbounded => true,
                        Bound::Current => d <= 0.0,
                        Bound::Offset(x) => d <= x,
                    };
                    above && below
                };
                let start = values.iter().position(within).unwrap_or(values.len());
                let end = values.iter().rposition(within).map_or(start, |e| e + 1);
                (start, end.max(start))
            })
            .collect()
    }
}

/// The single sort key as a number (dates in milliseconds).
fn sort_value(r: &Row) -> Option<f64> {
    match r.sort_key.first() {
        Some(Bson::DateTime(d)) => Some(d.timestamp_millis() as f64),
        Some(v) => types::as_f64(v),
        None => None,
    }
}

/// `$derivative` (end-to-end rate) or `$integral` (trapezoids) over the window's points;
/// null when a point is not numeric or the window is too small.
fn slope(points: &[Option<(f64, f64)>], integral: bool) -> Bson {
    let Some(points) = points.iter().copied().collect::<Option<Vec<(f64, f64)>>>() else {
        return Bson::Null;
    };
    if integral {
        let area: f64 = points
            .windows(2)
            .map(|w| (w[0].1 + w[1].1) / 2.0 * (w[1].0 - w[0].0))
            .sum();
        return Bson::Double(area);
    }
    match (points.first(), points.last()) {
        (Some(a), Some(b)) if points.len() >= 2 && b.0 != a.0 => {
            Bson::Double((b.1 - a.1) / (b.0 - a.0))
        }
        _ => Bson::Null,
    }
}

fn int(i: usize) -> Bson {
    i32::try_from(i).map_or(
        Bson::Int64(i64::try_from(i).unwrap_or(i64::MAX)),
        Bson::Int32,
    )
}

/// The window edge for row `i` of `n`: `lower` gives the first index, else one past the last.
fn doc_index(b: Bound, i: usize, n: usize, lower: bool) -> usize {
    let clamp = |x: f64| x.clamp(0.0, n as f64) as usize;
    match (b, lower) {
        (Bound::Unbounded, true) => 0,
        (Bound::Unbounded, false) => n,
        (Bound::Current, true) => i,
        (Bound::Current, false) => i + 1,
        (Bound::Offset(x), true) => clamp(i as f64 + x),
        (Bound::Offset(x), false) => clamp(i as f64 + x + 1.0),
    }
}

impl Stage for SetWindowFields {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let (rows, _held) = self.rows(input, cx)?;
        let mut out = Vec::with_capacity(rows.len());
        let mut start = 0;
        while start < rows.len() {
            let mut end = start + 1;
            while end < rows.len()
                && order::compare_bson(&rows[start].partition, &rows[end].partition)
                    == Ordering::Equal
            {
                end += 1;
            }
            let part = &rows[start..end];
            let values = self
                .outputs
                .iter()
                .map(|f| self.compute(f, part))
                .collect::<CommandResult<Vec<_>>>()?;
            for (i, row) in part.iter().enumerate() {
                let mut doc = row.doc.clone();
                for (field, vals) in self.outputs.iter().zip(&values) {
                    if let Some(Some(v)) = vals.get(i) {
                        set_path(&mut doc, &field.path, v.clone());
                    }
                }
                out.push(doc);
            }
            start = end;
        }
        Ok(Box::new(out.into_iter().map(Ok)))
    }
}
