//! `$out` and `$merge`: the pipeline does not write. These stages pass their input through
//! unchanged and describe the target ([`OutputTarget`]); the caller writes the documents the
//! pipeline yields. For `$merge`, [`merge_documents`] computes what to store for each document
//! given the existing one matched on `on` (the caller looks that one up).

use super::codes::{self, perr};
use super::run_context::RunCx;
use super::stages::{Stage, spec_doc};
use super::values::to_raw;
use super::{DocStream, ParseContext, Pipeline, PipelineEnv};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document};
use std::sync::Arc;

/// Where and how the output of a pipeline ending in `$out`/`$merge` is written.
#[derive(Debug, Clone)]
pub struct OutputTarget {
    pub db: String,
    pub coll: String,
    pub mode: OutputMode,
}

#[derive(Debug, Clone)]
pub enum OutputMode {
    /// Replace the target collection atomically with the output (indexes kept).
    Out,
    Merge {
        /// Fields identifying the matching target document (`["_id"]` by default); the
        /// target needs a unique index on them unless it is `_id`.
        on: Vec<String>,
        when_matched: WhenMatched,
        when_not_matched: WhenNotMatched,
    },
}

#[derive(Debug, Clone)]
pub enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    /// An update pipeline run on the existing document with `$$new` bound to the new one.
    Pipeline(Arc<MergePipeline>),
}

/// A `whenMatched` pipeline; it is parsed for each document since `$$new` changes.
#[derive(Debug)]
pub struct MergePipeline {
    stages: Vec<Document>,
    ctx: ParseContext,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

/// What `$merge` stores for `new` given the `existing` target document, or `None` to store
/// nothing. Errors are mongod's: 11000 for `whenMatched: "fail"`, 13113 for
/// `whenNotMatched: "fail"`, 66 when the result would change `_id`.
pub fn merge_documents(
    existing: Option<&Document>,
    new: &Document,
    when_matched: &WhenMatched,
    when_not_matched: WhenNotMatched,
) -> CommandResult<Option<Document>> {
    let Some(existing) = existing else {
        return match when_not_matched {
            WhenNotMatched::Insert => Ok(Some(new.clone())),
            WhenNotMatched::Discard => Ok(None),
            WhenNotMatched::Fail => Err(perr(
                codes::MERGE_FAIL_NOT_MATCHED,
                "$merge could not find a matching document in the target collection for at least one document in the source collection",
            )),
        };
    };
    let result = match when_matched {
        WhenMatched::Replace => new.clone(),
        WhenMatched::KeepExisting => return Ok(None),
        WhenMatched::Merge => {
            let mut out = existing.clone();
            for (k, v) in new {
                out.insert(k.clone(), v.clone());
            }
            out
        }
        WhenMatched::Fail => {
            return Err(perr(
                codes::MERGE_FAIL_MATCHED,
                "$merge with whenMatched: fail found an existing document with the same values for the 'on' field",
            ));
        }
        WhenMatched::Pipeline(p) => {
            let ctx = p.ctx.with_variable("new", Bson::Document(new.clone()));
            let pipeline = Pipeline::parse(&p.stages, &ctx)?;
            let mut out = pipeline.run_vec(vec![existing.clone()], &NoCollections)?;
            out.pop().unwrap_or_default()
        }
    };
    if let Some(id) = existing.get("_id")
        && result
            .get("_id")
            .is_some_and(|r| storage::order::compare_bson(r, id).is_ne())
    {
        return Err(perr(
            codes::MERGE_NEW_ID,
            "$merge failed to update the matching document, did you attempt to modify the _id or the shard key?",
        ));
    }
    Ok(Some(result))
}

/// An environment with no collections (for `whenMatched` pipelines, which read none).
struct NoCollections;

impl PipelineEnv for NoCollections {
    fn collection_docs(&self, _db: &str, _coll: &str) -> CommandResult<Vec<Document>> {
        Ok(Vec::new())
    }
}

/// The `$out`/`$merge` stage itself: a pass-through carrying its target.
#[derive(Debug)]
pub struct OutStage {
    target: OutputTarget,
}

impl OutStage {
    pub fn parse_out(spec: &Bson, ctx: &ParseContext) -> CommandResult<OutStage> {
        let (db, coll) = match spec {
            Bson::String(c) => (ctx.db.clone(), c.clone()),
            Bson::Document(d) => namespace_doc(d, "$out", ctx, "db")?,
            _ => {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    "$out stage requires a string or object argument",
                ));
            }
        };
        Ok(OutStage {
            target: OutputTarget {
                db,
                coll: check_coll(coll)?,
                mode: OutputMode::Out,
            },
        })
    }

    pub fn parse_merge(spec: &Bson, ctx: &ParseContext) -> CommandResult<OutStage> {
        let d = match spec {
            Bson::String(c) => &bson::doc! {"into": c.clone()},
            other => spec_doc(other, codes::FAILED_TO_PARSE, "$merge specification")?,
        };
        for k in d.keys() {
            if !matches!(
                k.as_str(),
                "into" | "on" | "let" | "whenMatched" | "whenNotMatched"
            ) {
                return Err(perr(
                    codes::UNKNOWN_FIELD,
                    format!("BSON field '$merge.{k}' is an unknown field."),
                ));
            }
        }
        let (db, coll) = match d.get("into") {
            Some(Bson::String(c)) => (ctx.db.clone(), c.clone()),
            Some(Bson::Document(i)) => namespace_doc(i, "$merge.into", ctx, "db")?,
            _ => {
                return Err(perr(
                    codes::MISSING_FIELD,
                    "BSON field '$merge.into' is missing but a required field",
                ));
            }
        };
        let on = match d.get("on") {
            None => vec!["_id".to_string()],
            Some(Bson::String(s)) => vec![s.clone()],
            Some(Bson::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|i| match i {
                    Bson::String(s) => Ok(s.clone()),
                    _ => Err(perr(
                        codes::MERGE_ON_MISSING,
                        "$merge 'on' array elements must be strings",
                    )),
                })
                .collect::<CommandResult<_>>()?,
            Some(_) => {
                return Err(perr(
                    codes::MERGE_ON_MISSING,
                    "$merge 'on' field must be a string or an array of strings",
                ));
            }
        };
        let mut sub_ctx = ctx.nested()?;
        if let Some(Bson::Document(l)) = d.get("let") {
            sub_ctx = sub_ctx.with_let(l)?;
        }
        let when_matched = match d.get("whenMatched") {
            None => WhenMatched::Merge,
            Some(Bson::String(s)) => match s.as_str() {
                "replace" => WhenMatched::Replace,
                "keepExisting" => WhenMatched::KeepExisting,
                "merge" => WhenMatched::Merge,
                "fail" => WhenMatched::Fail,
                other => {
                    return Err(err(
                        ErrorCode::BadValue,
                        format!(
                            "Enumeration value '{other}' for field '$merge.whenMatched' is not a valid value."
                        ),
                    ));
                }
            },
            Some(Bson::Array(stages)) => {
                let stages = stages
                    .iter()
                    .map(|s| match s {
                        Bson::Document(d) => Ok(d.clone()),
                        _ => Err(err(
                            ErrorCode::TypeMismatch,
                            "$merge whenMatched pipeline stages must be objects",
                        )),
                    })
                    .collect::<CommandResult<Vec<_>>>()?;
                // Parse once now (with $$new as null) so that mistakes fail the command early.
                Pipeline::parse(&stages, &sub_ctx.with_variable("new", Bson::Null))?;
                WhenMatched::Pipeline(Arc::new(MergePipeline {
                    stages,
                    ctx: sub_ctx,
                }))
            }
            Some(_) => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    "$merge whenMatched must be a string or an array",
                ));
            }
        };
        let when_not_matched = match d.get("whenNotMatched") {
            None => WhenNotMatched::Insert,
            Some(Bson::String(s)) if s == "insert" => WhenNotMatched::Insert,
            Some(Bson::String(s)) if s == "discard" => WhenNotMatched::Discard,
            Some(Bson::String(s)) if s == "fail" => WhenNotMatched::Fail,
            Some(other) => {
                return Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "Enumeration value '{other}' for field '$merge.whenNotMatched' is not a valid value."
                    ),
                ));
            }
        };
        Ok(OutStage {
            target: OutputTarget {
                db,
                coll: check_coll(coll)?,
                mode: OutputMode::Merge {
                    on,
                    when_matched,
                    when_not_matched,
                },
            },
        })
    }
}

fn namespace_doc(
    d: &Document,
    stage: &str,
    ctx: &ParseContext,
    db_key: &str,
) -> CommandResult<(String, String)> {
    let db = match d.get(db_key) {
        None => ctx.db.clone(),
        Some(Bson::String(s)) => s.clone(),
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!("BSON field '{stage}.{db_key}' must be a string"),
            ));
        }
    };
    match d.get("coll") {
        Some(Bson::String(c)) => Ok((db, c.clone())),
        _ => Err(perr(
            codes::MISSING_FIELD,
            format!("BSON field '{stage}.coll' is missing but a required field"),
        )),
    }
}

fn check_coll(coll: String) -> CommandResult<String> {
    if coll.is_empty() || coll.starts_with("system.") || coll.contains('\0') || coll.contains('$') {
        return Err(perr(
            codes::INVALID_NAMESPACE,
            format!("Invalid {} namespace: '{coll}'", "output"),
        ));
    }
    Ok(coll)
}

impl Stage for OutStage {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        // `$merge` needs every `on` field in every document; check as they pass.
        let on = match &self.target.mode {
            OutputMode::Merge { on, .. } => on.clone(),
            OutputMode::Out => Vec::new(),
        };
        Ok(Box::new(input.map(move |item| {
            let doc = item?;
            for field in &on {
                let raw = to_raw(&doc)?;
                let parts: Vec<String> = field.split('.').map(str::to_string).collect();
                match crate::query::path::get_exact(&raw, &parts) {
                    Some(bson::RawBsonRef::Array(_)) | None => {
                        return Err(perr(
                            codes::MERGE_ON_MISSING,
                            format!("$merge write error: 'on' field '{field}' cannot be missing, null, undefined or an array"),
                        ));
                    }
                    _ => {}
                }
            }
            Ok(doc)
        })))
    }

    fn output_target(&self) -> Option<OutputTarget> {
        Some(self.target.clone())
    }
}
