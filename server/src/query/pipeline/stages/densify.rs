//! `$densify` and `$fill`: filling gaps in series.
//!
//! `$densify` adds documents so that `field` takes every value `start + k * step` within the
//! bounds ("full": the input's min..max, "partition": each partition's min..max, or `[lo, hi)`),
//! per partition of `partitionByFields`; generated documents hold only the field and the
//! partition fields. Output is ordered by partition then field; documents whose field is not a
//! number (or date) pass through first. `$fill` sets null or missing fields by a constant
//! expression (`value`), last observation carried forward (`locf`) or linear interpolation over
//! the single `sortBy` field (`linear`).

use super::sort::SortKeys;
use super::{Stage, spec_doc};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::path::{get_path, set_path};
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::limits::DENSIFY_GENERATED_MAX;
use crate::query::pipeline::run_context::{RunCx, collect};
use crate::query::pipeline::values::{split_field_path, to_raw};
use crate::query::pipeline::variables::AggExpr;
use crate::query::pipeline::{DocStream, ParseContext};
use crate::query::types;
use bson::{Bson, Document};
use std::cmp::Ordering;
use storage::order;

fn bad(stage: &str, message: impl Into<String>) -> crate::error::CommandError {
    perr(
        codes::FAILED_TO_PARSE,
        format!("{stage}: {}", message.into()),
    )
}

#[derive(Debug, Clone, Copy)]
enum Bounds {
    Full,
    Partition,
    Explicit(f64, f64),
}

#[derive(Debug)]
pub struct Densify {
    field: Vec<String>,
    partition_fields: Vec<Vec<String>>,
    step: f64,
    /// Dates are densified in milliseconds; `Some` holds nothing else but marks the mode.
    dates: bool,
    bounds: Bounds,
}

/// A number or date as f64 (dates in milliseconds).
fn numeric(v: &Bson) -> Option<f64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis() as f64),
        other => types::as_f64(other).filter(|f| f.is_finite()),
    }
}

impl Densify {
    pub fn parse(spec: &Bson) -> CommandResult<Densify> {
        let d = spec_doc(spec, codes::FAILED_TO_PARSE, "the $densify specification")?;
        if let Some(k) = d
            .keys()
            .find(|k| !matches!(k.as_str(), "field" | "partitionByFields" | "range"))
        {
            return Err(perr(
                codes::UNKNOWN_FIELD,
                format!("BSON field '$densify.{k}' is an unknown field."),
            ));
        }
        let Some(Bson::String(field)) = d.get("field") else {
            return Err(perr(
                codes::MISSING_FIELD,
                "BSON field '$densify.field' is missing but a required field",
            ));
        };
        let partition_fields = match d.get("partitionByFields") {
            None => Vec::new(),
            Some(Bson::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Bson::String(s) => split_field_path(s),
                    _ => Err(bad("$densify", "partitionByFields must be strings")),
                })
                .collect::<CommandResult<_>>()?,
            Some(_) => return Err(bad("$densify", "partitionByFields must be an array")),
        };
        let Some(Bson::Document(range)) = d.get("range") else {
            return Err(perr(
                codes::MISSING_FIELD,
                "BSON field '$densify.range' is missing but a required field",
            ));
        };
        let step = range
            .get("step")
            .and_then(types::as_f64)
            .filter(|s| *s > 0.0 && s.is_finite());
        let Some(mut step) = step else {
            return Err(bad(
                "$densify",
                "the step parameter in a range statement must be a strictly positive numeric value",
            ));
        };
        let dates = match range.get("unit") {
            None => false,
            Some(Bson::String(u)) => {
                step *= match u.as_str() {
                    "millisecond" => 1.0,
                    "second" => 1e3,
                    "minute" => 6e4,
                    "hour" => 3.6e6,
                    "day" => 8.64e7,
                    "week" => 6.048e8,
                    _ => {
                        return Err(err(
                            ErrorCode::NotImplemented,
                            format!("$densify in unit '{u}' is not supported by cairn"),
                        ));
                    }
                };
                true
            }
            Some(_) => return Err(bad("$densify", "unit must be a string")),
        };
        let bounds = match range.get("bounds") {
            Some(Bson::String(s)) if s == "full" => Bounds::Full,
            Some(Bson::String(s)) if s == "partition" => Bounds::Partition,
            Some(Bson::Array(b)) if b.len() == 2 => match (numeric(&b[0]), numeric(&b[1])) {
                (Some(lo), Some(hi)) if lo <= hi => Bounds::Explicit(lo, hi),
                _ => {
                    return Err(bad(
                        "$densify",
                        "explicit bounds must be two ascending numbers or dates",
                    ));
                }
            },
            _ => {
                return Err(bad(
                    "$densify",
                    "bounds must be 'full', 'partition' or an array of two values",
                ));
            }
        };
        Ok(Densify {
            field: split_field_path(field)?,
            partition_fields,
            step,
            dates,
            bounds,
        })
    }

    fn partition_key(&self, d: &Document) -> Bson {
        Bson::Array(
            self.partition_fields
                .iter()
                .map(|p| get_path(d, p).cloned().unwrap_or(Bson::Null))
                .collect(),
        )
    }

    fn make(&self, v: f64, partition: &Document) -> Document {
        let mut d = partition.clone();
        let value = if self.dates {
            Bson::DateTime(bson::DateTime::from_millis(v as i64))
        } else if v.fract() == 0.0 && v.abs() < 2f64.powi(31) {
            Bson::Int32(v as i32)
        } else {
            Bson::Double(v)
        };
        set_path(&mut d, &self.field, value);
        d
    }

    /// Emits one partition (sorted by value) with its gaps filled between `start` and `end`.
    fn fill_partition(
        &self,
        rows: Vec<(f64, Document)>,
        start: f64,
        end: f64,
        out: &mut Vec<Document>,
        made: &mut usize,
    ) -> CommandResult<()> {
        let mut partition = Document::new();
        if let Some((_, first)) = rows.first() {
            for p in &self.partition_fields {
                if let Some(v) = get_path(first, p) {
                    set_path(&mut partition, p, v.clone());
                }
            }
        }
        let mut next = start;
        let mut emit_until =
            |limit: f64, next: &mut f64, out: &mut Vec<Document>| -> CommandResult<()> {
                while *next < limit && *next < end {
                    *made += 1;
                    if *made > DENSIFY_GENERATED_MAX {
                        return Err(perr(
                            codes::FAILED_TO_PARSE,
                            "$densify generated too many documents",
                        ));
                    }
                    out.push(self.make(*next, &partition));
                    *next += self.step;
                }
                Ok(())
            };
        for (v, doc) in rows {
            if v >= start {
                emit_until(v, &mut next, out)?;
                if next == v {
                    next += self.step;
                }
            }
            out.push(doc);
        }
        emit_until(end, &mut next, out)
    }
}

impl Stage for Densify {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let (docs, _held) = collect(input, cx, "$densify")?;
        let mut out = Vec::with_capacity(docs.len());
        let mut rows: Vec<(Bson, f64, Document)> = Vec::new();
        for d in docs {
            match get_path(&d, &self.field).and_then(numeric) {
                Some(v) => rows.push((self.partition_key(&d), v, d)),
                None => out.push(d),
            }
        }
        rows.sort_by(|a, b| {
            order::compare_bson(&a.0, &b.0).then(a.1.partial_cmp(&b.1).unwrap_or(Ordering::Equal))
        });
        let global = (
            rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min),
            rows.iter().map(|r| r.1).fold(f64::NEG_INFINITY, f64::max),
        );
        let mut made = 0usize;
        let mut i = 0;
        while i < rows.len() {
            let mut j = i + 1;
            while j < rows.len() && order::compare_bson(&rows[i].0, &rows[j].0) == Ordering::Equal {
                j += 1;
            }
            let part: Vec<(f64, Document)> =
                rows[i..j].iter().map(|(_, v, d)| (*v, d.clone())).collect();
            let (start, end) = match self.bounds {
                Bounds::Full => global,
                Bounds::Partition => (part[0].0, part[part.len() - 1].0),
                Bounds::Explicit(lo, hi) => (lo, hi),
            };
            self.fill_partition(part, start, end, &mut out, &mut made)?;
            i = j;
        }
        Ok(Box::new(out.into_iter().map(Ok)))
    }
}

#[derive(Debug)]
enum FillMethod {
    Value(AggExpr),
    Locf,
    Linear,
}

#[derive(Debug)]
pub struct Fill {
    partition_by: Option<AggExpr>,
    sort: Option<SortKeys>,
    outputs: Vec<(Vec<String>, FillMethod)>,
}

impl Fill {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Fill> {
        let d = spec_doc(spec, codes::FAILED_TO_PARSE, "the $fill specification")?;
        if let Some(k) = d.keys().find(|k| {
            !matches!(
                k.as_str(),
                "partitionBy" | "partitionByFields" | "sortBy" | "output"
            )
        }) {
            return Err(perr(
                codes::UNKNOWN_FIELD,
                format!("BSON field '$fill.{k}' is an unknown field."),
            ));
        }
        let partition_by = match (d.get("partitionBy"), d.get("partitionByFields")) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "$fill",
                    "only one of partitionBy and partitionByFields may be given",
                ));
            }
            (Some(p), None) => Some(AggExpr::parse(p, ctx)?),
            (None, Some(Bson::Array(fields))) => {
                let mut obj = Document::new();
                for f in fields {
                    let Bson::String(s) = f else {
                        return Err(bad("$fill", "partitionByFields must be strings"));
                    };
                    obj.insert(s.replace('.', "_"), format!("${s}"));
                }
                Some(AggExpr::parse(&Bson::Document(obj), ctx)?)
            }
            (None, Some(_)) => return Err(bad("$fill", "partitionByFields must be an array")),
            (None, None) => None,
        };
        let sort = match d.get("sortBy") {
            Some(Bson::Document(s)) => Some(SortKeys::parse(s)?),
            None => None,
            Some(_) => return Err(bad("$fill", "sortBy must be an object")),
        };
        let Some(Bson::Document(output)) = d.get("output") else {
            return Err(perr(
                codes::MISSING_FIELD,
                "BSON field '$fill.output' is missing but a required field",
            ));
        };
        let mut outputs = Vec::new();
        for (name, how) in output {
            let method = match how {
                Bson::Document(h) if h.len() == 1 && h.contains_key("value") => {
                    FillMethod::Value(AggExpr::parse(h.get("value").unwrap_or(&Bson::Null), ctx)?)
                }
                Bson::Document(h)
                    if h.len() == 1 && h.get("method") == Some(&Bson::String("locf".into())) =>
                {
                    FillMethod::Locf
                }
                Bson::Document(h)
                    if h.len() == 1 && h.get("method") == Some(&Bson::String("linear".into())) =>
                {
                    FillMethod::Linear
                }
                _ => {
                    return Err(bad(
                        "$fill",
                        format!(
                            "output '{name}' must be {{value: <expr>}} or {{method: 'locf' | 'linear'}}"
                        ),
                    ));
                }
            };
            if !matches!(method, FillMethod::Value(_)) && sort.is_none() {
                return Err(bad(
                    "$fill",
                    "'sortBy' is required for the locf and linear methods",
                ));
            }
            if matches!(method, FillMethod::Linear)
                && sort.as_ref().and_then(SortKeys::single_path).is_none()
            {
                return Err(bad(
                    "$fill",
                    "linear fill requires a sortBy with exactly one field",
                ));
            }
            outputs.push((split_field_path(name)?, method));
        }
        Ok(Fill {
            partition_by,
            sort,
            outputs,
        })
    }

    fn fill_partition(&self, part: &mut [Document]) -> CommandResult<()> {
        for (path, method) in &self.outputs {
            let is_gap = |d: &Document| matches!(get_path(d, path), None | Some(Bson::Null));
            match method {
                FillMethod::Value(e) => {
                    for d in part.iter_mut() {
                        if is_gap(d)
                            && let Some(v) = e.eval_on(d)?
                        {
                            set_path(d, path, v);
                        }
                    }
                }
                FillMethod::Locf => {
                    let mut last: Option<Bson> = None;
                    for d in part.iter_mut() {
                        match (is_gap(d), &last) {
                            (true, Some(v)) => set_path(d, path, v.clone()),
                            (false, _) => last = get_path(d, path).cloned(),
                            _ => {}
                        }
                    }
                }
                FillMethod::Linear => self.linear(part, path)?,
            }
        }
        Ok(())
    }

    fn linear(&self, part: &mut [Document], path: &[String]) -> CommandResult<()> {
        let (sort_path, _) = self
            .sort
            .as_ref()
            .and_then(SortKeys::single_path)
            .unwrap_or((&[], false));
        let xs: Vec<Option<f64>> = part
            .iter()
            .map(|d| get_path(d, sort_path).and_then(numeric))
            .collect();
        let ys: Vec<Option<f64>> = part
            .iter()
            .map(|d| get_path(d, path).and_then(types::as_f64))
            .collect();
        let known: Vec<usize> = (0..part.len())
            .filter(|i| ys[*i].is_some() && xs[*i].is_some())
            .collect();
        for w in known.windows(2) {
            let (a, b) = (w[0], w[1]);
            let (Some(xa), Some(xb), Some(ya), Some(yb)) = (xs[a], xs[b], ys[a], ys[b]) else {
                continue;
            };
            for i in a + 1..b {
                let is_gap = matches!(get_path(&part[i], path), None | Some(Bson::Null));
                if let (true, Some(x)) = (is_gap, xs[i])
                    && xb != xa
                {
                    set_path(
                        &mut part[i],
                        path,
                        Bson::Double(ya + (yb - ya) * (x - xa) / (xb - xa)),
                    );
                }
            }
        }
        Ok(())
    }
}

impl Stage for Fill {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let (docs, _held) = collect(input, cx, "$fill")?;
        let mut rows = Vec::with_capacity(docs.len());
        for d in docs {
            let raw = to_raw(&d)?;
            let p = match &self.partition_by {
                Some(e) => e.eval(&raw)?.unwrap_or(Bson::Null),
                None => Bson::Null,
            };
            let k = self
                .sort
                .as_ref()
                .map(|s| s.key_of(&raw))
                .unwrap_or_default();
            rows.push((p, k, d));
        }
        if let Some(s) = &self.sort {
            rows.sort_by(|a, b| {
                order::compare_bson(&a.0, &b.0).then_with(|| s.compare(&a.1, &b.1))
            });
        } else {
            rows.sort_by(|a, b| order::compare_bson(&a.0, &b.0));
        }
        let mut out: Vec<Document> = Vec::with_capacity(rows.len());
        let mut i = 0;
        while i < rows.len() {
            let mut j = i + 1;
            while j < rows.len() && order::compare_bson(&rows[i].0, &rows[j].0) == Ordering::Equal {
                j += 1;
            }
            let mut part: Vec<Document> = rows[i..j].iter().map(|r| r.2.clone()).collect();
            self.fill_partition(&mut part)?;
            out.extend(part);
            i = j;
        }
        Ok(Box::new(out.into_iter().map(Ok)))
    }
}
