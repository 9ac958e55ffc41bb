//! TEMPORARY shim until the query branch's projection lands.
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Document, RawDocument};

#[derive(Debug, Clone)]
pub struct Projection;

impl Projection {
    pub fn parse(_d: &Document) -> CommandResult<Projection> {
        Err(err(ErrorCode::NotImplemented, "projection is being built"))
    }
    pub fn apply(&self, _doc: &RawDocument, _pos: Option<usize>) -> CommandResult<Document> {
        Err(err(ErrorCode::NotImplemented, "projection is being built"))
    }
}
