//! An update statement's modification (its `u`, mongod's "update modification"): what it does to a
//! document: update operators or a replacement (the query
//! module's `Update`), or an aggregation pipeline of `$set/$addFields`, `$unset`, `$project`,
//! `$replaceRoot/$replaceWith` run on the one document (pipeline-style updates).

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::pipeline::{ParseContext, Pipeline};
use crate::query::update::{ApplyContext, Update, validate_replacement};
use bson::{Bson, Document};

pub enum Modification {
    Update(Update),
    Pipeline(Box<Pipeline>),
}

impl Modification {
    pub fn parse(
        u: &Bson,
        array_filters: Option<&[Document]>,
        db: &str,
        coll: &str,
    ) -> CommandResult<Modification> {
        match u {
            Bson::Document(d) => {
                let upd = Update::parse(d, array_filters)?;
                if let Update::Replacement(r) = &upd {
                    validate_replacement(r)?;
                }
                Ok(Modification::Update(upd))
            }
            Bson::Array(stages) => {
                if array_filters.is_some() {
                    return Err(err(
                        ErrorCode::FailedToParse,
                        "arrayFilters may not be specified for pipeline-style updates",
                    ));
                }
                let stages: Vec<Document> = stages
                    .iter()
                    .map(|s| {
                        s.as_document().cloned().ok_or_else(|| {
                            err(
                                ErrorCode::TypeMismatch,
                                "Each element of the update pipeline must be an object",
                            )
                        })
                    })
                    .collect::<CommandResult<_>>()?;
                let ctx = ParseContext::new(db, Some(coll), bson::DateTime::now());
                Ok(Modification::Pipeline(Box::new(Pipeline::parse_update(
                    &stages, &ctx,
                )?)))
            }
            _ => Err(err(
                ErrorCode::FailedToParse,
                "Update argument must be either an object or an array",
            )),
        }
    }

    pub fn is_replacement(&self) -> bool {
        matches!(self, Modification::Update(u) if u.is_replacement())
    }

    /// Apply to `doc` in place; whether anything changed.
    pub fn apply(&self, doc: &mut Document, ctx: &ApplyContext) -> CommandResult<bool> {
        let pipeline = match self {
            Modification::Update(u) => return u.apply(doc, ctx),
            Modification::Pipeline(p) => p,
        };
        let mut next = pipeline.apply_update(doc.clone())?;
        let old_id = doc.get("_id").cloned();
        match (next.get("_id"), &old_id) {
            (Some(new), Some(old)) if storage::order::compare_bson(new, old).is_ne() => {
                return Err(err(
                    ErrorCode::ImmutableField,
                    format!(
                        "After applying the update, the (immutable) field '_id' was found to have been altered to _id: {new}"
                    ),
                ));
            }
            (None, Some(old)) => {
                // `_id` stays (and stays first) even when the pipeline drops it.
                let mut with_id = Document::new();
                with_id.insert("_id", old.clone());
                with_id.extend(next);
                next = with_id;
            }
            _ => {}
        }
        let changed = next != *doc;
        *doc = next;
        Ok(changed)
    }
}
