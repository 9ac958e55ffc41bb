//! `$facet`, `$bucket` and `$bucketAuto`: stages that hold their whole input.
//!
//! `$facet` runs each sub-pipeline over its own copy of the input and emits one document.
//! `$bucket` places each document by `boundaries[i] <= groupBy < boundaries[i + 1]` (with the
//! `default` bucket for the rest) and emits non-empty buckets ordered by `_id`. `$bucketAuto`
//! sorts by `groupBy` and cuts into `buckets` runs of about equal size, never splitting equal
//! values; each `_id.max` is the next bucket's `_id.min` (the last one's is its own maximum).

use super::group::{BUCKET_FIELD_CODES, GroupSpec};
use super::{Stage, spec_doc};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::limits::OUTPUT_DOCUMENT_BYTES_MAX;
use crate::query::pipeline::run_context::{RunCx, collect};
use crate::query::pipeline::values::{integral, to_raw, type_name};
use crate::query::pipeline::variables::AggExpr;
use crate::query::pipeline::{DocStream, ParseContext, Pipeline};
use bson::{Bson, Document};
use std::cmp::Ordering;
use storage::order;

/// `$facet`.
#[derive(Debug)]
pub struct Facet {
    facets: Vec<(String, Pipeline)>,
}

impl Facet {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Facet> {
        let d = spec_doc(spec, codes::FACET_NOT_OBJECT, "the $facet specification")?;
        if d.is_empty() {
            return Err(perr(
                codes::FACET_EMPTY,
                "the $facet specification must be a non-empty object",
            ));
        }
        let mut sub = ctx.nested()?;
        sub.in_facet = true;
        let mut facets = Vec::with_capacity(d.len());
        for (name, stages) in d {
            if name.is_empty() || name.starts_with('$') || name.contains('.') {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    format!("invalid $facet output field name '{name}'"),
                ));
            }
            let Bson::Array(items) = stages else {
                return Err(perr(
                    codes::FACET_NOT_ARRAY,
                    format!(
                        "arguments to $facet must be arrays, {name} is type {}",
                        type_name(stages)
                    ),
                ));
            };
            let docs = items
                .iter()
                .map(|s| match s {
                    Bson::Document(d) => Ok(d.clone()),
                    other => Err(perr(
                        codes::FACET_ELEMENT_NOT_OBJECT,
                        format!(
                            "subpipeline of $facet stage must be an array of objects, found {}",
                            type_name(other)
                        ),
                    )),
                })
                .collect::<CommandResult<Vec<_>>>()?;
            if docs.is_empty() {
                return Err(perr(
                    codes::FACET_SUB_EMPTY,
                    format!("sub-pipeline in $facet stage cannot be empty: {name}"),
                ));
            }
            facets.push((name.clone(), Pipeline::parse(&docs, &sub)?));
        }
        Ok(Facet { facets })
    }
}

fn facet_too_large(size_bytes: usize) -> crate::error::CommandError {
    perr(
        codes::FACET_TOO_LARGE,
        format!(
            "document constructed by $facet is {size_bytes} bytes, which exceeds the limit of {OUTPUT_DOCUMENT_BYTES_MAX} bytes"
        ),
    )
}

impl Stage for Facet {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        // Every facet reads the whole input, so the input is held (charged) once; each facet
        // reads it through a stream of copies, not a copy of it, and its results are counted
        // as they come so an oversized output fails before it is all built.
        let (docs, _held) = collect(input, cx, "$facet")?;
        let mut out = Document::new();
        let mut size_bytes = 0usize;
        for (name, pipeline) in &self.facets {
            let mut results = Vec::new();
            for d in pipeline.run(Box::new(docs.iter().cloned().map(Ok)), cx.env)? {
                let d = d?;
                size_bytes = size_bytes.saturating_add(to_raw(&d)?.as_bytes().len());
                if size_bytes > OUTPUT_DOCUMENT_BYTES_MAX {
                    return Err(facet_too_large(size_bytes));
                }
                results.push(Bson::Document(d));
            }
            out.insert(name.clone(), Bson::Array(results));
        }
        let size_bytes = to_raw(&out)?.as_bytes().len();
        if size_bytes > OUTPUT_DOCUMENT_BYTES_MAX {
            return Err(facet_too_large(size_bytes));
        }
        Ok(Box::new(std::iter::once(Ok(out))))
    }

    fn foreign_namespaces(&self, out: &mut Vec<(String, String)>) {
        for (_, p) in &self.facets {
            p.foreign_namespaces_into(out);
        }
    }
}

fn check_group_by(v: Option<&Bson>, code: i32, stage: &str) -> CommandResult<Bson> {
    match v {
        Some(Bson::String(s)) if s.starts_with('$') => Ok(Bson::String(s.clone())),
        Some(Bson::Document(d)) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            Ok(Bson::Document(d.clone()))
        }
        other => Err(perr(
            code,
            format!(
                "The {stage} 'groupBy' field must be defined as a $-prefixed path or an expression object, but found: {}",
                other.cloned().unwrap_or(Bson::Null)
            ),
        )),
    }
}

fn output_spec(
    d: &Document,
    code: i32,
    stage: &str,
    ctx: &ParseContext,
) -> CommandResult<GroupSpec> {
    match d.get("output") {
        None => GroupSpec::count_only(ctx),
        Some(Bson::Document(o)) => GroupSpec::parse(o, &[], &BUCKET_FIELD_CODES, ctx),
        Some(other) => Err(perr(
            code,
            format!(
                "The {stage} 'output' field must be an object, but found type: {}",
                type_name(other)
            ),
        )),
    }
}

/// `$bucket`.
#[derive(Debug)]
pub struct Bucket {
    group_by: AggExpr,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: GroupSpec,
}

impl Bucket {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Bucket> {
        let d = spec_doc(spec, codes::BUCKET_NOT_OBJECT, "the $bucket specification")?;
        if let Some(k) = d
            .keys()
            .find(|k| !matches!(k.as_str(), "groupBy" | "boundaries" | "default" | "output"))
        {
            return Err(perr(
                codes::BUCKET_UNKNOWN_FIELD,
                format!("Unrecognized option to $bucket: {k}."),
            ));
        }
        if !d.contains_key("groupBy") || !d.contains_key("boundaries") {
            return Err(perr(
                codes::BUCKET_MISSING,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        }
        let group_by = AggExpr::parse(
            &check_group_by(d.get("groupBy"), codes::BUCKET_GROUP_BY, "$bucket")?,
            ctx,
        )?;
        let boundaries = match d.get("boundaries") {
            Some(Bson::Array(b)) => b.clone(),
            _ => {
                return Err(perr(
                    codes::BUCKET_BOUNDARIES_NOT_ARRAY,
                    "The $bucket 'boundaries' field must be an array",
                ));
            }
        };
        check_boundaries(&boundaries)?;
        let default = d.get("default").cloned();
        if let Some(def) = &default {
            let rank = order::canonical_type_rank_bson;
            let (lo, hi) = (&boundaries[0], &boundaries[boundaries.len() - 1]);
            if rank(def) == rank(lo)
                && order::compare_bson(def, lo) != Ordering::Less
                && order::compare_bson(def, hi) == Ordering::Less
            {
                return Err(perr(
                    codes::BUCKET_DEFAULT_RANGE,
                    "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.",
                ));
            }
        }
        Ok(Bucket {
            group_by,
            boundaries,
            default,
            output: output_spec(d, codes::BUCKET_OUTPUT_NOT_OBJECT, "$bucket", ctx)?,
        })
    }

    fn place(&self, v: &Bson) -> CommandResult<Bson> {
        let rank = order::canonical_type_rank_bson;
        let b = &self.boundaries;
        if rank(v) == rank(&b[0]) {
            for w in b.windows(2) {
                if order::compare_bson(&w[0], v) != Ordering::Greater
                    && order::compare_bson(v, &w[1]) == Ordering::Less
                {
                    return Ok(w[0].clone());
                }
            }
        }
        self.default.clone().ok_or_else(|| {
            perr(
                codes::BUCKET_NO_MATCH,
                "$switch could not find a matching branch for an input, and no default was specified.",
            )
        })
    }
}

fn check_boundaries(b: &[Bson]) -> CommandResult<()> {
    if b.len() < 2 {
        return Err(perr(
            codes::BUCKET_BOUNDARIES_COUNT,
            format!(
                "The $bucket 'boundaries' field must have at least 2 values, but found {} value(s).",
                b.len()
            ),
        ));
    }
    let rank = order::canonical_type_rank_bson;
    for (i, w) in b.windows(2).enumerate() {
        if rank(&w[0]) != rank(&w[1]) {
            return Err(perr(
                codes::BUCKET_BOUNDARIES_TYPE,
                format!(
                    "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types {} and {}.",
                    type_name(&w[0]),
                    type_name(&w[1])
                ),
            ));
        }
        if order::compare_bson(&w[0], &w[1]) != Ordering::Less {
            return Err(perr(
                codes::BUCKET_BOUNDARIES_ORDER,
                format!(
                    "The 'boundaries' option to $bucket must be sorted in ascending order, but elements {} and {} are not in ascending order ({} is not less than {}).",
                    i,
                    i + 1,
                    w[0],
                    w[1]
                ),
            ));
        }
    }
    Ok(())
}

impl Stage for Bucket {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut groups = self.output.fold(input, cx, "$bucket", &mut |_, raw| {
            self.place(&self.group_by.eval(raw)?.unwrap_or(Bson::Null))
        })?;
        groups.sort_by(|a, b| order::compare_bson(&a.0, &b.0));
        let docs: Vec<Document> = groups
            .into_iter()
            .map(|(key, states)| {
                let mut out = Document::new();
                out.insert("_id", key);
                self.output.finish_into(&mut out, &states)?;
                Ok(out)
            })
            .collect::<CommandResult<_>>()?;
        Ok(Box::new(docs.into_iter().map(Ok)))
    }
}

/// `$bucketAuto`.
#[derive(Debug)]
pub struct BucketAuto {
    group_by: AggExpr,
    buckets: usize,
    output: GroupSpec,
}

impl BucketAuto {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<BucketAuto> {
        let d = spec_doc(
            spec,
            codes::BUCKET_AUTO_NOT_OBJECT,
            "the $bucketAuto specification",
        )?;
        if let Some(k) = d
            .keys()
            .find(|k| !matches!(k.as_str(), "groupBy" | "buckets" | "output" | "granularity"))
        {
            return Err(perr(
                codes::BUCKET_AUTO_UNKNOWN_FIELD,
                format!("Unrecognized option to $bucketAuto: {k}."),
            ));
        }
        if !d.contains_key("groupBy") || !d.contains_key("buckets") {
            return Err(perr(
                codes::BUCKET_AUTO_MISSING,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        }
        if d.contains_key("granularity") {
            return Err(err(
                ErrorCode::NotImplemented,
                "$bucketAuto 'granularity' is not supported by cairn",
            ));
        }
        let raw_buckets = d.get("buckets").cloned().unwrap_or(Bson::Null);
        if !crate::query::types::is_number(&raw_buckets) {
            return Err(perr(
                codes::BUCKET_AUTO_BUCKETS_NOT_NUMBER,
                format!(
                    "The $bucketAuto 'buckets' field must be a numeric value, but found type: {}",
                    type_name(&raw_buckets)
                ),
            ));
        }
        let Some(buckets) = integral(&raw_buckets).filter(|n| i32::try_from(*n).is_ok()) else {
            return Err(perr(
                codes::BUCKET_AUTO_BUCKETS_NOT_INT32,
                format!(
                    "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found {raw_buckets}"
                ),
            ));
        };
        let buckets = Some(buckets).filter(|n| *n > 0);
        let Some(buckets) = buckets else {
            return Err(perr(
                codes::BUCKET_AUTO_BUCKETS,
                format!(
                    "The $bucketAuto 'buckets' field must be greater than 0, but found: {}",
                    d.get("buckets").cloned().unwrap_or(Bson::Null)
                ),
            ));
        };
        Ok(BucketAuto {
            group_by: AggExpr::parse(
                &check_group_by(d.get("groupBy"), codes::BUCKET_AUTO_GROUP_BY, "$bucketAuto")?,
                ctx,
            )?,
            buckets: usize::try_from(buckets).unwrap_or(usize::MAX),
            output: output_spec(d, codes::BUCKET_AUTO_OUTPUT_NOT_OBJECT, "$bucketAuto", ctx)?,
        })
    }

    fn cut(&self, rows: Vec<(Bson, Document)>, cx: RunCx<'_>) -> CommandResult<Vec<Document>> {
        let n = rows.len();
        let approx = ((n as f64) / (self.buckets as f64)).round().max(1.0) as usize;
        let mut out = Vec::new();
        let mut start = 0usize;
        while start < n {
            let last_bucket = out.len() + 1 >= self.buckets;
            let mut end = if last_bucket {
                n
            } else {
                (start + approx).min(n)
            };
            while end < n && order::compare_bson(&rows[end].0, &rows[end - 1].0) == Ordering::Equal
            {
                end += 1;
            }
            let min = rows[start].0.clone();
            let max = if end < n {
                rows[end].0.clone()
            } else {
                rows[end - 1].0.clone()
            };
            let slice = rows[start..end].iter().map(|(_, d)| Ok(d.clone()));
            let groups = self
                .output
                .fold(Box::new(slice), cx, "$bucketAuto", &mut |_, _| {
                    Ok(Bson::Null)
                })?;
            let mut doc = Document::new();
            doc.insert("_id", bson::doc! {"min": min, "max": max});
            if let Some((_, states)) = groups.first() {
                self.output.finish_into(&mut doc, states)?;
            }
            out.push(doc);
            start = end;
        }
        Ok(out)
    }
}

impl Stage for BucketAuto {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let (docs, _held) = collect(input, cx, "$bucketAuto")?;
        let mut rows = Vec::with_capacity(docs.len());
        for d in docs {
            let v = self.group_by.eval(&to_raw(&d)?)?.unwrap_or(Bson::Null);
            rows.push((v, d));
        }
        rows.sort_by(|a, b| order::compare_bson(&a.0, &b.0));
        Ok(Box::new(self.cut(rows, cx)?.into_iter().map(Ok)))
    }
}
