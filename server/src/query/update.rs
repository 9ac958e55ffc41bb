//! TEMPORARY shim until the query branch's update operators land.
use crate::error::{CommandResult, ErrorCode, err};
use bson::Document;

pub struct ApplyContext {
    pub is_insert: bool,
    pub positional: Option<usize>,
    pub now: bson::DateTime,
}

#[derive(Debug, Clone)]
pub struct Update;

impl Update {
    pub fn parse(u: &Document, _array_filters: Option<&[Document]>) -> CommandResult<Update> {
        if u.keys().next().is_some_and(|k| k.starts_with('$')) {
            return Err(err(
                ErrorCode::NotImplemented,
                "update operators are being built",
            ));
        }
        Ok(Update)
    }
    pub fn apply(&self, _doc: &mut Document, _ctx: &ApplyContext) -> CommandResult<bool> {
        Err(err(
            ErrorCode::NotImplemented,
            "update operators are being built",
        ))
    }
}
