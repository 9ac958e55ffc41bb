//! `$densify` and `$fill` (placeholders until implemented).

use super::Stage;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::pipeline::common::RunCx;
use crate::query::pipeline::{DocStream, ParseContext};
use bson::Bson;

#[derive(Debug)]
pub struct Densify;

impl Densify {
    pub fn parse(_spec: &Bson) -> CommandResult<Densify> {
        Err(err(
            ErrorCode::NotImplemented,
            "$densify is not supported by cairn yet",
        ))
    }
}

impl Stage for Densify {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(input)
    }
}

#[derive(Debug)]
pub struct Fill;

impl Fill {
    pub fn parse(_spec: &Bson, _ctx: &ParseContext) -> CommandResult<Fill> {
        Err(err(
            ErrorCode::NotImplemented,
            "$fill is not supported by cairn yet",
        ))
    }
}

impl Stage for Fill {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(input)
    }
}
