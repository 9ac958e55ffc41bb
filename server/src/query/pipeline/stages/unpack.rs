//! `$_internalUnpackBucket`: the first stage of every read of a time-series collection. Its
//! input is the bucket documents of `system.buckets.<name>`, its output their measurements
//! (see `crate::query::timeseries`). Users do not write it; the collection's view does.

use super::{Stage, spec_doc};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::pipeline::DocStream;
use crate::query::pipeline::codes;
use crate::query::pipeline::run_context::RunCx;
use crate::query::timeseries::unpack;
use bson::Bson;

#[derive(Debug)]
pub struct UnpackBucket {
    time_field: String,
    meta_field: Option<String>,
}

impl UnpackBucket {
    pub fn parse(spec: &Bson) -> CommandResult<UnpackBucket> {
        let d = spec_doc(
            spec,
            codes::FAILED_TO_PARSE,
            "$_internalUnpackBucket specification",
        )?;
        let field = |k: &str| match d.get(k) {
            None => Ok(None),
            Some(Bson::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(err(
                ErrorCode::FailedToParse,
                format!("$_internalUnpackBucket: '{k}' must be a string"),
            )),
        };
        let time_field = field("timeField")?.ok_or_else(|| {
            err(
                ErrorCode::FailedToParse,
                "$_internalUnpackBucket requires 'timeField'",
            )
        })?;
        Ok(UnpackBucket {
            time_field,
            meta_field: field("metaField")?,
        })
    }
}

impl Stage for UnpackBucket {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.flat_map(move |item| {
            let out: Vec<CommandResult<bson::Document>> = match item {
                Ok(bucket) => unpack(&self.time_field, self.meta_field.as_deref(), &bucket)
                    .into_iter()
                    .map(Ok)
                    .collect(),
                Err(e) => vec![Err(e)],
            };
            out
        })))
    }
}
