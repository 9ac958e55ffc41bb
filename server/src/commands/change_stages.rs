//! The stages after `$changeStream`: `$match` alone is a filter per event; with any of the
//! shaping stages mongod allows there (`$project`, `$addFields`/`$set`, `$unset`,
//! `$replaceRoot`/`$replaceWith`, `$redact`) the whole list runs as a pipeline over each event.
//! An event whose `_id` (its resume token) the stages change or remove is mongod's 280.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::Filter;
use crate::query::pipeline::{ParseContext, Pipeline, PipelineEnv};
use bson::{Bson, Document, RawDocumentBuf};

/// Stages a change stream may carry after `$changeStream`.
const ALLOWED: &[&str] = &[
    "$match",
    "$project",
    "$addFields",
    "$set",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
    "$redact",
];

/// What a stream does with each event before returning it.
pub enum Select {
    Filters(Vec<Filter>),
    Pipeline(Box<Pipeline>),
}

struct NoCollections;

impl PipelineEnv for NoCollections {
    fn collection_docs(&self, _db: &str, _coll: &str) -> CommandResult<Vec<Document>> {
        Ok(Vec::new())
    }
}

/// Checks the stages after `$changeStream` (at open).
pub fn check(stages: &[Document], db: &str) -> CommandResult<()> {
    for s in stages {
        let name = s.keys().next().map(String::as_str).unwrap_or("");
        if s.len() != 1 || !ALLOWED.contains(&name) {
            return Err(err(
                ErrorCode::IllegalOperation,
                format!("{name} is not permitted in a $changeStream pipeline"),
            ));
        }
    }
    compile(stages, db).map(|_| ())
}

/// The selection for a stream's stages.
pub fn compile(stages: &[Document], db: &str) -> CommandResult<Select> {
    let only_match = stages.iter().all(|s| s.contains_key("$match"));
    if only_match {
        return stages
            .iter()
            .map(|s| match s.get("$match") {
                Some(Bson::Document(m)) => Filter::parse(m),
                _ => Err(err(
                    ErrorCode::Location15959,
                    "the match filter must be an expression in an object",
                )),
            })
            .collect::<CommandResult<Vec<_>>>()
            .map(Select::Filters);
    }
    let ctx = ParseContext::new(db, None, bson::DateTime::now());
    Ok(Select::Pipeline(Box::new(Pipeline::parse(stages, &ctx)?)))
}

impl Select {
    /// The event as the stream returns it (None: filtered out).
    pub fn apply(&self, event: Document) -> CommandResult<Option<RawDocumentBuf>> {
        let raw = |d: &Document| {
            RawDocumentBuf::try_from(d).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
        };
        match self {
            Select::Filters(fs) => {
                let r = raw(&event)?;
                Ok(fs.iter().all(|f| f.matches(&r)).then_some(r))
            }
            Select::Pipeline(p) => {
                let id = event.get("_id").cloned();
                let Some(out) = p.run_vec(vec![event], &NoCollections)?.pop() else {
                    return Ok(None);
                };
                if out.get("_id") != id.as_ref() {
                    return Err(err(
                        ErrorCode::ChangeStreamFatalError,
                        "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.",
                    ));
                }
                raw(&out).map(Some)
            }
        }
    }
}
