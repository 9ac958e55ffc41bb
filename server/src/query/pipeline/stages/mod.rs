//! The stage trait and the table from stage name to parser. Each family of stages lives in its
//! own file; this one only dispatches and enforces placement rules (`$out`/`$merge` last,
//! `$documents` first, what `$facet` refuses).

mod basic;
mod bucket;
mod densify;
mod foreign;
mod geo_near;
mod group;
mod lookup;
mod shape;
mod sort;
mod unpack;
mod unwind;
mod window;

pub use geo_near::GeoNear;
pub use group::{Group, GroupTable};
pub(crate) use sort::{SortKeys, TopK};

use super::codes::{self, perr};
use super::output::{self, OutputTarget};
use super::run_context::RunCx;
use super::{DocStream, Flow, ParseContext, RawStream};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};

/// A blocking stage's output once it has consumed its input: owned and `Send`, so a suspended
/// pipeline (`super::suspend`) keeps it in a cursor between batches and hands it out one
/// document at a time. Dropping it frees what it holds (memory charges, spill files).
pub type Drain = Box<dyn Iterator<Item = CommandResult<RawDocumentBuf>> + Send>;

/// What a stage that streams but keeps state between documents (`$lookup`'s hash table or
/// index choice, `$graphLookup`'s table) carries through a suspended run: owned and `Send`,
/// kept in the cursor between batches, dropped (with its memory charge) with the run.
pub type StreamSlot = Box<dyn std::any::Any + Send>;

/// `$unionWith`'s other side, for a suspended run that reads it after its input.
pub struct UnionSide<'p> {
    pub coll: Option<(&'p str, &'p str)>,
    pub pipeline: Option<&'p super::Pipeline>,
}

/// One executable stage.
pub trait Stage: std::fmt::Debug + Send + Sync {
    /// Wraps `input` in this stage's transformation.
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>>;

    /// The same over raw input. Stages that read raw documents (`$match`, `$group`, `$limit`,
    /// `$skip`, `$project` of field paths, ...) override this; the default decodes each
    /// document as it is pulled and runs [`Stage::run`].
    fn run_raw<'a>(&'a self, input: RawStream<'a>, cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        Ok(Flow::Docs(self.run(Flow::Raw(input).into_docs(), cx)?))
    }

    /// Consumes all of `input` now and returns the output to hand out later (see [`Drain`]).
    /// `$sort` and `$group` override it to keep only their sorted buffer, spilled runs or
    /// group table; the default runs the stage to the end and holds its whole output: small by
    /// nature for `$count`, `$facet` and `$bucket`, and no more than the stage's own buffer for
    /// `$bucketAuto`, `$setWindowFields`, `$sample`, `$sortByCount`, `$densify` and `$fill`.
    fn drain(&self, input: RawStream<'_>, cx: RunCx<'_>) -> CommandResult<Drain> {
        let out = self
            .run_raw(input, cx)?
            .into_raw()
            .collect::<CommandResult<Vec<_>>>()?;
        Ok(Box::new(out.into_iter().map(Ok)))
    }

    /// One raw document through a stage that makes exactly one raw document of each input
    /// (`$project` without computed sub-fields), with no stream built around it: `None` when
    /// this stage has no such path and [`Stage::run_raw`] must be used.
    fn push_one(&self, _doc: &RawDocument) -> Option<CommandResult<RawDocumentBuf>> {
        None
    }

    /// For a stage that streams with state (see [`StreamSlot`]): its state for a new run.
    fn open_slot(&self) -> Option<StreamSlot> {
        None
    }

    /// Runs one document through a stage that gave a slot ([`Stage::open_slot`]).
    fn push_slot(
        &self,
        _slot: &mut StreamSlot,
        _doc: RawDocumentBuf,
        _cx: RunCx<'_>,
    ) -> CommandResult<RawDocumentBuf> {
        Err(err(ErrorCode::InternalError, "this stage keeps no slot"))
    }

    /// For a stage that may make many documents of one (`$unwind`): the outputs of `doc`
    /// as an owned iterator that makes each as it is pulled, so a suspended run holds one of
    /// them at a time (`Pipeline::step`). `None` (the default): the stage's outputs of one
    /// document are few and made at once by [`Stage::run_raw`].
    fn expand_lazily(&self, _doc: &RawDocumentBuf) -> Option<CommandResult<Drain>> {
        None
    }

    /// For `$unionWith`: the collection and pipeline it appends.
    fn union_side(&self) -> Option<UnionSide<'_>> {
        None
    }

    /// Adds the collections this stage (and its sub-pipelines) reads besides its input, as
    /// `(db, coll)`: a cursor that suspends the stage dies with them (see `crate::cursors`).
    fn foreign_namespaces(&self, _out: &mut Vec<(String, String)>) {}

    /// For `$out`/`$merge`: where the output goes.
    fn output_target(&self) -> Option<OutputTarget> {
        None
    }

    /// For `$geoNear`: its options (the executor produces its output).
    fn geo_near(&self) -> Option<&GeoNear> {
        None
    }

    /// For a stage whose work over parts of its input merges exactly (`$count`, a `$group`
    /// whose accumulators merge, a top-k `$sort`): what a parallel scan runs per part.
    fn mergeable(&self) -> Option<Mergeable<'_>> {
        None
    }
}

/// A stage a parallel scan (`exec::parallel`) can run over parts of its input and merge.
pub enum Mergeable<'p> {
    /// `$count` into this field.
    Count(&'p str),
    Group(&'p Group),
    /// `$sort` keeping its best `k` (a `$limit` follows).
    TopK(&'p SortKeys, u64),
}

/// Stages mongod has that cairn reports as not implemented rather than unknown.
const NOT_IMPLEMENTED: &[&str] = &[
    "$collStats",
    "$indexStats",
    "$currentOp",
    "$listLocalSessions",
    "$listSessions",
    "$querySettings",
    "$queryStats",
    "$changeStream",
    "$planCacheStats",
    "$search",
    "$searchMeta",
    "$listSearchIndexes",
];

/// Stages that only the first position of a top-level pipeline takes.
pub const SOURCE_ONLY: &[&str] = &[
    "$currentOp",
    "$listLocalSessions",
    "$listSessions",
    "$planCacheStats",
    "$querySettings",
    "$queryStats",
];

/// Stages `$facet` refuses inside its sub-pipelines.
const NOT_IN_FACET: &[&str] = &[
    "$out",
    "$merge",
    "$facet",
    "$collStats",
    "$indexStats",
    "$geoNear",
    "$changeStream",
    "$documents",
];

/// Parses one stage. `index` is its position, `following` the stages after it (for `$sort`'s
/// top-k bound).
pub fn parse_stage(
    name: &str,
    spec: &Bson,
    ctx: &ParseContext,
    index: usize,
    is_last: bool,
    following: &[Document],
) -> CommandResult<Box<dyn Stage>> {
    check_placement(name, ctx, index, is_last)?;
    let stage: Box<dyn Stage> = match name {
        "$match" => Box::new(basic::Match::parse(spec, ctx)?),
        "$project" => Box::new(shape::Project::parse(spec, ctx)?),
        "$addFields" | "$set" => Box::new(shape::AddFields::parse(name, spec, ctx)?),
        "$unset" => Box::new(shape::Project::parse_unset(spec)?),
        "$group" => Box::new(group::Group::parse(spec, ctx)?),
        "$sort" => Box::new(sort::Sort::parse(spec, sort::top_k_bound(following))?),
        "$limit" => Box::new(basic::Limit::parse(spec)?),
        "$skip" => Box::new(basic::Skip::parse(spec)?),
        "$unwind" => Box::new(unwind::Unwind::parse(spec)?),
        "$count" => Box::new(basic::Count::parse(spec)?),
        "$sortByCount" => Box::new(group::sort_by_count(spec, ctx)?),
        "$replaceRoot" | "$replaceWith" => Box::new(basic::ReplaceRoot::parse(name, spec, ctx)?),
        "$sample" => Box::new(basic::Sample::parse(spec)?),
        "$redact" => Box::new(basic::Redact::parse(spec, ctx)?),
        "$documents" => Box::new(basic::Documents::parse(spec, ctx)?),
        "$lookup" => Box::new(lookup::Lookup::parse(spec, ctx)?),
        "$unionWith" => Box::new(lookup::UnionWith::parse(spec, ctx)?),
        "$graphLookup" => Box::new(lookup::GraphLookup::parse(spec, ctx)?),
        "$facet" => Box::new(bucket::Facet::parse(spec, ctx)?),
        "$bucket" => Box::new(bucket::Bucket::parse(spec, ctx)?),
        "$bucketAuto" => Box::new(bucket::BucketAuto::parse(spec, ctx)?),
        "$setWindowFields" => Box::new(window::SetWindowFields::parse(spec, ctx)?),
        "$densify" => Box::new(densify::Densify::parse(spec)?),
        "$fill" => Box::new(densify::Fill::parse(spec, ctx)?),
        "$geoNear" => Box::new(geo_near::GeoNear::parse(spec, ctx)?),
        "$out" => Box::new(output::OutStage::parse_out(spec, ctx)?),
        "$merge" => Box::new(output::OutStage::parse_merge(spec, ctx)?),
        crate::query::timeseries::UNPACK_STAGE => Box::new(unpack::UnpackBucket::parse(spec)?),
        _ if NOT_IMPLEMENTED.contains(&name) => {
            return Err(err(
                ErrorCode::NotImplemented,
                format!("{name} is not supported by cairn"),
            ));
        }
        _ => {
            return Err(perr(
                codes::UNRECOGNIZED_STAGE,
                format!("Unrecognized pipeline stage name: '{name}'"),
            ));
        }
    };
    Ok(stage)
}

fn check_placement(
    name: &str,
    ctx: &ParseContext,
    index: usize,
    is_last: bool,
) -> CommandResult<()> {
    if ctx.in_facet && NOT_IN_FACET.contains(&name) {
        return Err(perr(
            codes::FACET_STAGE_NOT_ALLOWED,
            format!("{name} is not allowed to be used within a $facet stage"),
        ));
    }
    let is_output = matches!(name, "$out" | "$merge");
    if is_output && ctx.depth > 0 {
        return Err(perr(
            codes::LOOKUP_OUT_IN_PIPELINE,
            format!("{name} is not allowed to be used within a sub-pipeline"),
        ));
    }
    if is_output && !is_last {
        return Err(perr(
            codes::STAGE_NOT_LAST,
            format!("{name} can only be the final stage in the pipeline"),
        ));
    }
    if name == "$geoNear" && (index != 0 || ctx.depth > 0) {
        return Err(err(
            ErrorCode::Location40602,
            "$geoNear is only valid as the first stage in a pipeline",
        ));
    }
    // The stages the command layer answers from server state (`commands::aggregate`) consume
    // the first position; met here, they are somewhere else.
    if SOURCE_ONLY.contains(&name) && (index != 0 || ctx.depth > 0) {
        return Err(err(
            ErrorCode::Location40602,
            format!("{name} is only valid as the first stage in a pipeline"),
        ));
    }
    if name == "$documents" && index != 0 {
        return Err(perr(
            codes::DOCUMENTS_NOT_FIRST,
            "$documents is only valid as the first stage in a pipeline",
        ));
    }
    Ok(())
}

/// Reads a stage argument that must be a document.
pub fn spec_doc<'s>(spec: &'s Bson, code: i32, what: &str) -> CommandResult<&'s Document> {
    match spec {
        Bson::Document(d) => Ok(d),
        other => Err(perr(
            code,
            format!(
                "{what} must be an object, but found type {}",
                super::values::type_name(other)
            ),
        )),
    }
}
