//! Applying a collection's validator on the write paths (insert, update, upsert, findAndModify,
//! bulkWrite): strict checks every new version, moderate skips documents that already failed,
//! off checks nothing; `error` refuses with 121 DocumentValidationFailure and mongod's
//! `errInfo`, `warn` writes and logs the same details. `bypassDocumentValidation` turns it off
//! for one command. Existing documents are never re-checked when the validator changes.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::validation::{Action, Level, Validator};
use bson::{RawDocument, doc};
use storage::Collection;

/// The validation one write command applies to one collection.
pub struct Checker {
    validator: Option<Validator>,
    ns: String,
}

impl Checker {
    /// Nothing to check (no collection yet, no validator, or bypassed).
    pub fn none() -> Checker {
        Checker {
            validator: None,
            ns: String::new(),
        }
    }

    pub fn new(coll: Option<&Collection>, bypass: bool) -> CommandResult<Checker> {
        let Some(coll) = coll.filter(|_| !bypass) else {
            return Ok(Checker::none());
        };
        let (db, name) = coll.namespace();
        Ok(Checker {
            validator: Validator::from_options(&coll.options())?.filter(|v| v.level != Level::Off),
            ns: format!("{db}.{name}"),
        })
    }

    /// A new document (insert or upsert).
    pub fn insert(&self, new: &RawDocument) -> CommandResult<()> {
        match &self.validator {
            Some(v) => self.verdict(v, new),
            None => Ok(()),
        }
    }

    /// A new version of `old`.
    pub fn update(&self, old: &RawDocument, new: &RawDocument) -> CommandResult<()> {
        match &self.validator {
            Some(v) if v.level == Level::Moderate && !v.passes(old) => Ok(()),
            Some(v) => self.verdict(v, new),
            None => Ok(()),
        }
    }

    fn verdict(&self, v: &Validator, d: &RawDocument) -> CommandResult<()> {
        if v.passes(d) {
            return Ok(());
        }
        let info = v.error_info(d);
        match v.action {
            Action::Error => Err(err(
                ErrorCode::DocumentValidationFailure,
                "Document failed validation",
            )
            .with_extra(doc! { "errInfo": info })),
            Action::Warn => {
                let document = bson::Document::try_from(d).unwrap_or_default();
                tracing::warn!(
                    namespace = %self.ns,
                    document = %document,
                    errInfo = %info,
                    "Document would fail validation"
                );
                Ok(())
            }
        }
    }
}
