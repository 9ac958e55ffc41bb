//! The small stages: `$match`, `$limit`, `$skip`, `$count`, `$replaceRoot`/`$replaceWith`,
//! `$sample`, `$redact`, `$documents`. All but `$count` and `$sample` stream.

use super::{Stage, spec_doc};
use crate::error::CommandResult;
use crate::query::matcher::Filter;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::run_context::RunCx;
use crate::query::pipeline::values::{integral, to_raw, type_name};
use crate::query::pipeline::variables::{AggExpr, substitute};
use crate::query::pipeline::{DocStream, Flow, ParseContext, RawStream};
use bson::{Bson, Document};
use rand::Rng;

/// `$match`: keeps the documents the filter accepts.
#[derive(Debug)]
pub struct Match {
    filter: Filter,
}

impl Match {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Match> {
        let d = match spec {
            Bson::Document(d) => d,
            _ => {
                return Err(perr(
                    codes::MATCH_NOT_OBJECT,
                    "the match filter must be an expression in an object",
                ));
            }
        };
        let resolved = match substitute(&Bson::Document(d.clone()), &ctx.variables) {
            Bson::Document(r) => r,
            _ => d.clone(),
        };
        Ok(Match {
            filter: Filter::parse(&resolved)?,
        })
    }
}

impl Stage for Match {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.filter_map(move |item| {
            let doc = match item {
                Ok(d) => d,
                Err(e) => return Some(Err(e)),
            };
            let raw = match to_raw(&doc) {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            match self.filter.try_matches(&raw) {
                Ok(Some(_)) => Some(Ok(doc)),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            }
        })))
    }

    /// Raw in, raw out: the matcher reads raw documents, so nothing is decoded or copied.
    fn run_raw<'a>(&'a self, input: RawStream<'a>, _cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        Ok(Flow::Raw(Box::new(input.filter_map(move |item| {
            let raw = match item {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            match self.filter.try_matches(&raw) {
                Ok(Some(_)) => Some(Ok(raw)),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            }
        }))))
    }
}

/// Reads a `$limit`/`$skip` count: any integral number.
fn count_arg(spec: &Bson, stage: &str, not_number: i32) -> CommandResult<i64> {
    match spec {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            integral(spec).ok_or_else(|| {
                perr(
                    not_number,
                    format!("invalid argument to {stage} stage: Cannot represent as a 64-bit integer: {spec}"),
                )
            })
        }
        other => Err(perr(
            not_number,
            format!("the {stage} must be specified as a number, got {}", type_name(other)),
        )),
    }
}

/// `$limit`.
#[derive(Debug)]
pub struct Limit {
    pub n: u64,
}

impl Limit {
    pub fn parse(spec: &Bson) -> CommandResult<Limit> {
        let n = count_arg(spec, "$limit", codes::LIMIT_NOT_NUMBER)?;
        if n <= 0 {
            return Err(perr(
                codes::LIMIT_NOT_POSITIVE,
                format!("invalid argument to $limit stage: the limit must be positive, got {n}"),
            ));
        }
        Ok(Limit {
            n: n.unsigned_abs(),
        })
    }
}

impl Stage for Limit {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(
            input.take(usize::try_from(self.n).unwrap_or(usize::MAX)),
        ))
    }

    fn run_raw<'a>(&'a self, input: RawStream<'a>, _cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        Ok(Flow::Raw(Box::new(
            input.take(usize::try_from(self.n).unwrap_or(usize::MAX)),
        )))
    }
}

/// `$skip`.
#[derive(Debug)]
pub struct Skip {
    pub n: u64,
}

impl Skip {
    pub fn parse(spec: &Bson) -> CommandResult<Skip> {
        let n = count_arg(spec, "$skip", codes::SKIP_NOT_NUMBER)?;
        if n < 0 {
            return Err(perr(
                codes::SKIP_NEGATIVE,
                format!(
                    "invalid argument to $skip stage: Cannot skip a negative number of documents: {n}"
                ),
            ));
        }
        Ok(Skip {
            n: n.unsigned_abs(),
        })
    }
}

impl Stage for Skip {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut to_skip = self.n;
        // Errors are never skipped: they must reach the caller.
        Ok(Box::new(input.filter(move |item| {
            if item.is_ok() && to_skip > 0 {
                to_skip -= 1;
                return false;
            }
            true
        })))
    }

    fn run_raw<'a>(&'a self, input: RawStream<'a>, _cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        let mut to_skip = self.n;
        Ok(Flow::Raw(Box::new(input.filter(move |item| {
            if item.is_ok() && to_skip > 0 {
                to_skip -= 1;
                return false;
            }
            true
        }))))
    }
}

/// `$count`: one document `{name: n}`, or nothing for empty input.
#[derive(Debug)]
pub struct Count {
    field: String,
}

impl Count {
    pub fn parse(spec: &Bson) -> CommandResult<Count> {
        let Bson::String(name) = spec else {
            return Err(perr(
                codes::COUNT_NOT_STRING,
                "the count field must be a non-empty string",
            ));
        };
        if name.is_empty() {
            return Err(perr(
                codes::COUNT_EMPTY,
                "the count field must be a non-empty string",
            ));
        }
        if name.starts_with('$') {
            return Err(perr(
                codes::COUNT_DOLLAR,
                "the count field cannot be a $-prefixed path",
            ));
        }
        if name.contains('.') {
            return Err(perr(codes::COUNT_DOT, "the count field cannot contain '.'"));
        }
        Ok(Count {
            field: name.clone(),
        })
    }
}

impl Stage for Count {
    fn mergeable(&self) -> Option<super::Mergeable<'_>> {
        Some(super::Mergeable::Count(&self.field))
    }

    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut n: i64 = 0;
        for item in input {
            item?;
            n += 1;
        }
        if n == 0 {
            return Ok(Box::new(std::iter::empty()));
        }
        let value = i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32);
        let mut out = Document::new();
        out.insert(self.field.clone(), value);
        Ok(Box::new(std::iter::once(Ok(out))))
    }

    /// Counts raw documents without decoding them.
    fn run_raw<'a>(&'a self, input: RawStream<'a>, cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        let counted = input.map(|r| r.map(|_| Document::new()));
        Ok(Flow::Docs(self.run(Box::new(counted), cx)?))
    }
}

/// `$replaceRoot` / `$replaceWith`.
#[derive(Debug)]
pub struct ReplaceRoot {
    new_root: AggExpr,
    /// The pipeline has a text score: the new root carries the old one's (`query::meta`).
    keep_score: bool,
}

impl ReplaceRoot {
    pub fn parse(name: &str, spec: &Bson, ctx: &ParseContext) -> CommandResult<ReplaceRoot> {
        let expr_spec = if name == "$replaceWith" {
            spec.clone()
        } else {
            let d = spec_doc(spec, codes::REPLACE_ROOT_SPEC_NOT_OBJECT, "$replaceRoot")?;
            if let Some(extra) = d.keys().find(|k| *k != "newRoot") {
                return Err(perr(
                    codes::UNKNOWN_FIELD,
                    format!("BSON field '$replaceRoot.{extra}' is an unknown field."),
                ));
            }
            d.get("newRoot").cloned().ok_or_else(|| {
                perr(
                    codes::REPLACE_ROOT_MISSING,
                    "no newRoot specified for the $replaceRoot stage",
                )
            })?
        };
        Ok(ReplaceRoot {
            new_root: AggExpr::parse(&expr_spec, ctx)?,
            keep_score: ctx.text_score,
        })
    }

    fn apply(&self, doc: Document) -> CommandResult<Document> {
        match self.new_root.eval_on(&doc)? {
            Some(Bson::Document(mut d)) => {
                let field = crate::query::meta::TEXT_SCORE_FIELD;
                if self.keep_score
                    && let Some(score) = doc.get(field)
                {
                    d.insert(field, score.clone());
                }
                Ok(d)
            }
            other => {
                let shown = other.clone().unwrap_or(Bson::Null);
                let ty = other.as_ref().map_or("missing", type_name);
                Err(perr(
                    codes::REPLACE_ROOT_NOT_OBJECT,
                    format!(
                        "'newRoot' expression must evaluate to an object, but resulting value was: {shown}. Type of resulting value: '{ty}'. Input document: {doc}"
                    ),
                ))
            }
        }
    }
}

impl Stage for ReplaceRoot {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.map(move |item| self.apply(item?))))
    }
}

/// `$sample {size}`: a uniform sample without replacement, in random order.
#[derive(Debug)]
pub struct Sample {
    size: usize,
}

impl Sample {
    pub fn parse(spec: &Bson) -> CommandResult<Sample> {
        let d = spec_doc(spec, codes::SAMPLE_NOT_OBJECT, "the argument to $sample")?;
        if let Some(extra) = d.keys().find(|k| *k != "size") {
            return Err(perr(
                codes::SAMPLE_UNKNOWN_OPTION,
                format!("unrecognized option to $sample: {extra}"),
            ));
        }
        let size = d
            .get("size")
            .ok_or_else(|| perr(codes::SAMPLE_NO_SIZE, "$sample stage must specify a size"))?;
        let n = integral(size)
            .or_else(|| crate::query::types::as_f64(size).map(|f| f as i64))
            .ok_or_else(|| {
                perr(
                    codes::SAMPLE_NOT_NUMBER,
                    "size argument to $sample must be a number",
                )
            })?;
        if n < 0 {
            return Err(perr(
                codes::SAMPLE_NEGATIVE,
                "size argument to $sample must not be negative",
            ));
        }
        Ok(Sample {
            size: usize::try_from(n).unwrap_or(usize::MAX),
        })
    }
}

impl Stage for Sample {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        // Reservoir sampling keeps memory at `size` documents whatever the input length.
        let mut rng = rand::rng();
        let mut reservoir: Vec<Document> = Vec::new();
        let mut used_bytes = 0usize;
        let mut held = crate::query::budget::Held::global();
        for (seen, item) in input.enumerate() {
            let doc = item?;
            if reservoir.len() < self.size {
                used_bytes += crate::query::pipeline::run_context::doc_size_bytes(&doc);
                cx.charge(&mut held, used_bytes, "$sample")?;
                reservoir.push(doc);
            } else {
                let j = rng.random_range(0..=seen);
                if j < self.size {
                    reservoir[j] = doc;
                }
            }
        }
        // Shuffle so that the output order carries no information about the input order.
        for i in (1..reservoir.len()).rev() {
            let j = rng.random_range(0..=i);
            reservoir.swap(i, j);
        }
        Ok(Box::new(reservoir.into_iter().map(Ok)))
    }
}

/// `$redact`: the expression decides at each document level to keep, prune or descend.
#[derive(Debug)]
pub struct Redact {
    expr: AggExpr,
}

impl Redact {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Redact> {
        Ok(Redact {
            expr: AggExpr::parse(spec, ctx)?,
        })
    }

    /// `None` means pruned. `$$ROOT` inside the expression sees the current level (the
    /// expression module has one root), which differs from mongod only for `$$ROOT` paths.
    fn redact(&self, doc: Document) -> CommandResult<Option<Document>> {
        match self.expr.eval_on(&doc)? {
            Some(Bson::String(s)) if s == "$$keep" => Ok(Some(doc)),
            Some(Bson::String(s)) if s == "$$prune" => Ok(None),
            Some(Bson::String(s)) if s == "$$descend" => {
                let mut out = Document::new();
                for (k, v) in doc {
                    if let Some(kept) = self.redact_value(v)? {
                        out.insert(k, kept);
                    }
                }
                Ok(Some(out))
            }
            other => Err(perr(
                codes::REDACT_BAD_RESULT,
                format!(
                    "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                    other.unwrap_or(Bson::Null)
                ),
            )),
        }
    }

    fn redact_value(&self, v: Bson) -> CommandResult<Option<Bson>> {
        match v {
            Bson::Document(d) => Ok(self.redact(d)?.map(Bson::Document)),
            Bson::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Bson::Document(d) => {
                            if let Some(kept) = self.redact(d)? {
                                out.push(Bson::Document(kept));
                            }
                        }
                        other => out.push(other),
                    }
                }
                Ok(Some(Bson::Array(out)))
            }
            other => Ok(Some(other)),
        }
    }
}

impl Stage for Redact {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.filter_map(move |item| match item {
            Ok(doc) => self.redact(doc).transpose(),
            Err(e) => Some(Err(e)),
        })))
    }
}

/// `$documents`: a constant array of documents replacing the input.
#[derive(Debug)]
pub struct Documents {
    docs: Vec<Document>,
}

impl Documents {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Documents> {
        let expr = AggExpr::parse(spec, ctx)?;
        let bad = || {
            perr(
                codes::DOCUMENTS_BAD,
                "error during evaluation of the $documents stage: the expression must evaluate to an array of objects",
            )
        };
        let Some(Bson::Array(items)) = expr.eval_on(&Document::new())? else {
            return Err(bad());
        };
        let docs = items
            .into_iter()
            .map(|i| match i {
                Bson::Document(d) => Ok(d),
                _ => Err(bad()),
            })
            .collect::<CommandResult<Vec<_>>>()?;
        Ok(Documents { docs })
    }
}

impl Stage for Documents {
    fn run<'a>(&'a self, _input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(self.docs.iter().cloned().map(Ok)))
    }
}
