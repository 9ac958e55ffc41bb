//! Proves the pipeline stages and accumulators behave like mongod's on edge values.
//! How: runs pipelines over in-memory documents through a map-backed `PipelineEnv`.

mod accumulators;
mod bench;
mod differential;
mod lookup;
mod raw;
mod stages;
mod window;

use super::{ParseContext, Pipeline, PipelineEnv};
use crate::error::{CommandError, CommandResult, ErrorCode};
use bson::{Bson, Document};
use std::collections::HashMap;

/// Collections by name, for `$lookup`, `$unionWith` and `$graphLookup`.
#[derive(Default)]
pub struct MapEnv(pub HashMap<String, Vec<Document>>);

impl PipelineEnv for MapEnv {
    fn collection_docs(&self, _db: &str, coll: &str) -> CommandResult<Vec<Document>> {
        Ok(self.0.get(coll).cloned().unwrap_or_default())
    }
}

pub fn ctx() -> ParseContext {
    ParseContext::new(
        "db",
        Some("c"),
        bson::DateTime::from_millis(1_700_000_000_000),
    )
}

pub fn stages_of(p: Bson) -> Vec<Document> {
    match p {
        Bson::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Bson::Document(d) => d,
                other => panic!("stage is not a document: {other}"),
            })
            .collect(),
        other => panic!("pipeline is not an array: {other}"),
    }
}

pub fn run_env(pipeline: Bson, input: Vec<Document>, env: &MapEnv) -> CommandResult<Vec<Document>> {
    let p = Pipeline::parse(&stages_of(pipeline), &ctx())?;
    p.run_vec(input, env)
}

/// [`run_env`] with the input as raw documents, as a collection scan feeds it: the stages that
/// read raw documents run their raw paths.
pub fn run_env_raw(
    pipeline: Bson,
    input: Vec<Document>,
    env: &MapEnv,
) -> CommandResult<Vec<Document>> {
    let p = Pipeline::parse(&stages_of(pipeline), &ctx())?;
    let raw: Vec<bson::RawDocumentBuf> = input
        .iter()
        .map(|d| bson::RawDocumentBuf::try_from(d).expect("encodes"))
        .collect();
    p.run_flow(0, super::Flow::Raw(Box::new(raw.into_iter().map(Ok))), env)?
        .into_docs()
        .collect()
}

pub fn run(pipeline: Bson, input: Vec<Document>) -> Vec<Document> {
    match run_env(pipeline, input, &MapEnv::default()) {
        Ok(docs) => docs,
        Err(e) => panic!("pipeline failed: {e}"),
    }
}

/// mongod's numeric code of an error (see `codes::perr` for codes missing from the table).
pub fn code_of(e: &CommandError) -> i32 {
    if e.code == ErrorCode::BadValue
        && let Some(rest) = e.message.rsplit_once("(mongod code ")
        && let Some(n) = rest.1.strip_suffix(')')
        && let Ok(code) = n.parse()
    {
        return code;
    }
    e.code.code()
}

/// The code a pipeline fails with, at parse or run time.
pub fn fails(pipeline: Bson, input: Vec<Document>) -> i32 {
    match run_env(pipeline.clone(), input, &MapEnv::default()) {
        Ok(docs) => panic!("expected {pipeline} to fail, got {docs:?}"),
        Err(e) => code_of(&e),
    }
}

/// Lists the mongod codes the pipeline uses that `ErrorCode` has no row for yet (they reach
/// clients as BadValue until added); this is a report, not a failure.
#[test]
fn report_codes_missing_from_the_table() {
    let missing: Vec<i32> = super::codes::ALL
        .iter()
        .copied()
        .filter(|c| ErrorCode::from_code(*c).is_none())
        .collect();
    println!("pipeline codes missing from ErrorCode: {missing:?}");
}
