//! `$unwind`: one output document per element of the array at a path (read through documents
//! only, as mongod does). A non-array, non-null value counts as a one-element array; null,
//! missing and `[]` produce nothing unless `preserveNullAndEmptyArrays` (then the document
//! passes with `[]` removed). `includeArrayIndex` records the position as a long, or null.

use super::{Drain, Stage};
use crate::error::CommandResult;
use crate::query::path::{get_path, remove_path, set_path};
use crate::query::pipeline::DocStream;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::run_context::RunCx;
use crate::query::pipeline::values::{split_field_path, to_doc, to_raw, type_name};
use bson::{Bson, Document, RawDocumentBuf};

#[derive(Debug)]
pub struct Unwind {
    path: Vec<String>,
    index_field: Option<Vec<String>>,
    preserve: bool,
}

impl Unwind {
    pub fn parse(spec: &Bson) -> CommandResult<Unwind> {
        let (path, index, preserve) = match spec {
            Bson::String(p) => (p.as_str(), None, false),
            Bson::Document(d) => {
                if let Some(extra) = d.keys().find(|k| {
                    !matches!(
                        k.as_str(),
                        "path" | "includeArrayIndex" | "preserveNullAndEmptyArrays"
                    )
                }) {
                    return Err(perr(
                        codes::UNWIND_UNKNOWN_OPTION,
                        format!("unrecognized option to $unwind stage: {extra}"),
                    ));
                }
                let path = match d.get("path") {
                    None => {
                        return Err(perr(
                            codes::UNWIND_NO_PATH,
                            "no path specified to $unwind stage",
                        ));
                    }
                    Some(Bson::String(p)) => p.as_str(),
                    Some(other) => {
                        return Err(perr(
                            codes::UNWIND_PATH_NOT_STRING,
                            format!(
                                "expected a string as the path for $unwind stage, got {}",
                                type_name(other)
                            ),
                        ));
                    }
                };
                let index = match d.get("includeArrayIndex") {
                    None => None,
                    Some(Bson::String(s)) => Some(s.as_str()),
                    Some(other) => {
                        return Err(perr(
                            codes::UNWIND_INDEX_NOT_STRING,
                            format!(
                                "expected a non-empty string for the includeArrayIndex option to $unwind stage, got {}",
                                type_name(other)
                            ),
                        ));
                    }
                };
                let preserve = match d.get("preserveNullAndEmptyArrays") {
                    None => false,
                    Some(Bson::Boolean(b)) => *b,
                    Some(other) => {
                        return Err(perr(
                            codes::UNWIND_PRESERVE_NOT_BOOL,
                            format!(
                                "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got {}",
                                type_name(other)
                            ),
                        ));
                    }
                };
                (path, index, preserve)
            }
            other => {
                return Err(perr(
                    codes::UNWIND_BAD_SPEC,
                    format!(
                        "expected either a string or an object as specification for $unwind stage, got {}",
                        type_name(other)
                    ),
                ));
            }
        };
        if path.is_empty() {
            return Err(perr(
                codes::UNWIND_NO_PATH,
                "no path specified to $unwind stage",
            ));
        }
        let Some(stripped) = path.strip_prefix('$') else {
            return Err(perr(
                codes::UNWIND_PATH_DOLLAR,
                format!("path option to $unwind stage should be prefixed with a '$': {path}"),
            ));
        };
        let index_field = match index {
            Some("") => {
                return Err(perr(
                    codes::UNWIND_INDEX_NOT_STRING,
                    "expected a non-empty string for the includeArrayIndex option to $unwind stage",
                ));
            }
            Some(s) if s.starts_with('$') => {
                return Err(perr(
                    codes::UNWIND_INDEX_DOLLAR,
                    format!(
                        "includeArrayIndex option to $unwind stage should not be prefixed with a '$': {s}"
                    ),
                ));
            }
            Some(s) => Some(split_field_path(s)?),
            None => None,
        };
        Ok(Unwind {
            path: split_field_path(stripped)?,
            index_field,
            preserve,
        })
    }

    /// The documents one input becomes, produced as they are consumed: unwinding a large array
    /// of a large document holds one copy at a time, not one per element. Owned (the path is
    /// copied per input document), so a suspended run can keep it between pulls.
    fn expand(&self, doc: Document) -> Box<dyn Iterator<Item = Document> + Send> {
        let value = get_path(&doc, &self.path).cloned();
        match value {
            Some(Bson::Array(items)) if !items.is_empty() => {
                // Each output copies the document without the array (copying it whole made
                // unwinding n elements cost n² in time).
                let mut base = doc;
                set_path(&mut base, &self.path, Bson::Null);
                let (path, index_field) = (self.path.clone(), self.index_field.clone());
                Box::new(items.into_iter().enumerate().map(move |(i, item)| {
                    let mut d = base.clone();
                    set_path(&mut d, &path, item);
                    if let Some(f) = &index_field {
                        set_path(&mut d, f, Bson::Int64(i64::try_from(i).unwrap_or(i64::MAX)));
                    }
                    d
                }))
            }
            Some(Bson::Array(_)) | Some(Bson::Null) | None => {
                if !self.preserve {
                    return Box::new(std::iter::empty());
                }
                let mut d = doc;
                if matches!(value, Some(Bson::Array(_))) {
                    remove_path(&mut d, &self.path);
                }
                if let Some(f) = &self.index_field {
                    set_path(&mut d, f, Bson::Null);
                }
                Box::new(std::iter::once(d))
            }
            Some(_) => {
                let mut d = doc;
                if let Some(f) = &self.index_field {
                    set_path(&mut d, f, Bson::Null);
                }
                Box::new(std::iter::once(d))
            }
        }
    }
}

impl Stage for Unwind {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.flat_map(
            move |item| -> Box<dyn Iterator<Item = CommandResult<Document>> + 'a> {
                match item {
                    Ok(doc) => Box::new(self.expand(doc).map(Ok)),
                    Err(e) => Box::new(std::iter::once(Err(e))),
                }
            },
        )))
    }

    fn expand_lazily(&self, doc: &RawDocumentBuf) -> Option<CommandResult<Drain>> {
        let expanded =
            to_doc(doc).map(|d| -> Drain { Box::new(self.expand(d).map(|d| to_raw(&d))) });
        Some(expanded)
    }
}
