//! `$setWindowFields` (placeholder until implemented).

use super::Stage;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::pipeline::common::RunCx;
use crate::query::pipeline::{DocStream, ParseContext};
use bson::Bson;

#[derive(Debug)]
pub struct SetWindowFields;

impl SetWindowFields {
    pub fn parse(_spec: &Bson, _ctx: &ParseContext) -> CommandResult<SetWindowFields> {
        Err(err(
            ErrorCode::NotImplemented,
            "$setWindowFields is not supported by cairn yet",
        ))
    }
}

impl Stage for SetWindowFields {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(input)
    }
}
