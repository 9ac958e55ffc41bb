//! TEMPORARY shim until the query branch's sort lands: parses, then refuses at use.
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Document, RawDocument};
use std::cmp::Ordering;

#[derive(Debug, Clone)]
pub struct SortSpec;

impl SortSpec {
    pub fn parse(_d: &Document) -> CommandResult<SortSpec> {
        Err(err(ErrorCode::NotImplemented, "sort is being built"))
    }
    pub fn compare(&self, _a: &RawDocument, _b: &RawDocument) -> Ordering {
        Ordering::Equal
    }
}
