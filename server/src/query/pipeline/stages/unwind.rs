//! `$unwind`: one output document per element of the array at a path (read through documents
//! only, as mongod does). A non-array, non-null value counts as a one-element array; null,
//! missing and `[]` produce nothing unless `preserveNullAndEmptyArrays` (then the document
//! passes with `[]` removed). `includeArrayIndex` records the position as a long, or null.

use super::Stage;
use crate::error::CommandResult;
use crate::query::path::{get_path, remove_path, set_path};
use crate::query::pipeline::DocStream;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::run_context::RunCx;
use crate::query::pipeline::values::{split_field_path, type_name};
use bson::{Bson, Document};

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

    fn expand(&self, doc: Document) -> Vec<Document> {
        let value = get_path(&doc, &self.path).cloned();
        match value {
            Some(Bson::Array(items)) if !items.is_empty() => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    let mut d = doc.clone();
                    set_path(&mut d, &self.path, item);
                    if let Some(f) = &self.index_field {
                        set_path(&mut d, f, Bson::Int64(i64::try_from(i).unwrap_or(i64::MAX)));
                    }
                    out.push(d);
                }
                out
            }
            Some(Bson::Array(_)) | Some(Bson::Null) | None => {
                if !self.preserve {
                    return Vec::new();
                }
                let mut d = doc;
                if matches!(value, Some(Bson::Array(_))) {
                    remove_path(&mut d, &self.path);
                }
                if let Some(f) = &self.index_field {
                    set_path(&mut d, f, Bson::Null);
                }
                vec![d]
            }
            Some(_) => {
                let mut d = doc;
                if let Some(f) = &self.index_field {
                    set_path(&mut d, f, Bson::Null);
                }
                vec![d]
            }
        }
    }
}

impl Stage for Unwind {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.flat_map(
            move |item| -> Vec<CommandResult<Document>> {
                match item {
                    Ok(doc) => self.expand(doc).into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                }
            },
        )))
    }
}
