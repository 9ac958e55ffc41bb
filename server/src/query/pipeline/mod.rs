//! The aggregation pipeline: parsing a list of stage documents into [`Pipeline`] (strictly, with
//! mongod's error codes) and running it over a stream of documents.
//!
//! The engine is pure: it never touches storage or the network. Documents come in as an
//! iterator and go out as one; the only outside data it reads (foreign collections for
//! `$lookup`, `$unionWith`, `$graphLookup`) comes through [`PipelineEnv`]. `$out` and `$merge`
//! do not write: the pipeline passes their input through and [`Pipeline::output_target`] tells
//! the caller where and how to write it ([`output::merge_documents`] computes each `$merge`
//! result document). Streaming stages (`$match`, `$project`, `$addFields`, `$unset`, `$limit`,
//! `$skip`, `$unwind`, `$replaceRoot`, `$redact`, `$unionWith`, `$lookup`) stay lazy; blocking
//! stages hold at most `memory_max_bytes` unless `allowDiskUse` is set; then a full `$sort`
//! spills sorted runs to temporary files and merges them (`spill`), the others keep going in
//! memory.
//!
//! Expressions are `crate::query::expr::Expr`; variables the expression module does not know
//! (`$$NOW`, `$$CLUSTER_TIME`, `$$REMOVE`, `let` variables) are substituted into the expression
//! text before it is parsed (see [`variables::AggExpr`]).

mod accum;
mod codes;
mod js_accum;
pub mod limits;
pub(crate) mod numeric;
pub mod output;
mod raw_items;
pub mod run_context;
mod spill;
mod stages;
mod suspend;
#[cfg(test)]
mod tests;
pub mod values;
pub mod variables;

/// Every mongod error code the pipeline can return (see `codes`).
pub use codes::ALL as ERROR_CODES_USED;
pub use output::{OutputMode, OutputTarget, WhenMatched, WhenNotMatched};

use crate::error::CommandResult;
use crate::query::meta;
use bson::{Bson, Document, RawDocumentBuf};
use codes::perr;
use run_context::RunCx;
pub use stages::GeoNear;
pub use stages::SOURCE_ONLY;
use stages::Stage;
pub(crate) use stages::TopK;
pub use stages::{Group, GroupTable, Mergeable};
pub use suspend::{Input, Suspended};

/// A stream of documents flowing between stages.
pub type DocStream<'a> = Box<dyn Iterator<Item = CommandResult<Document>> + 'a>;

/// A stream of raw documents (as stored, or as a raw stage built them).
pub type RawStream<'a> = Box<dyn Iterator<Item = CommandResult<RawDocumentBuf>> + 'a>;

/// A foreign collection read raw: `(id, document)` pairs (see [`PipelineEnv::scan_raw`]).
pub type RawScan<'e> = Box<dyn Iterator<Item = CommandResult<(u64, RawDocumentBuf)>> + 'e>;

/// What flows between two stages: raw documents until a stage needs decoded ones (a stage that
/// reads raw input says so by implementing `Stage::run_raw`), decoded documents after that.
pub enum Flow<'a> {
    Raw(RawStream<'a>),
    Docs(DocStream<'a>),
}

impl<'a> Flow<'a> {
    /// The documents decoded (each one as it is pulled).
    pub fn into_docs(self) -> DocStream<'a> {
        match self {
            Flow::Docs(s) => s,
            Flow::Raw(s) => Box::new(s.map(|r| values::to_doc(&r?))),
        }
    }

    /// The documents encoded (each one as it is pulled).
    pub fn into_raw(self) -> RawStream<'a> {
        match self {
            Flow::Raw(s) => s,
            Flow::Docs(s) => Box::new(s.map(|d| values::to_raw(&d?))),
        }
    }
}

/// Where a streamed run (a segment of [`Pipeline::suspend`], through `Pipeline::step`)
/// stands: the stages the input already did, the documents each `$skip`/`$limit` has counted,
/// and whether a `$limit` is used up.
pub struct StreamState {
    skip: usize,
    /// The stage the run stops before (the pipeline's length, or a suspended segment's end).
    end: usize,
    counts: Vec<u64>,
    finished: bool,
    /// The state of each stage that streams with state (`$lookup`, `$graphLookup`), by
    /// position; `None` for the others.
    slots: Vec<Option<stages::StreamSlot>>,
}

impl std::fmt::Debug for StreamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamState")
            .field("skip", &self.skip)
            .field("end", &self.end)
            .field("counts", &self.counts)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl StreamState {
    /// True once no further input can produce output (a `$limit` is used up).
    pub fn finished(&self) -> bool {
        self.finished
    }
}

/// What the pipeline may ask of the outside world.
pub trait PipelineEnv {
    /// Every document of `db.coll` in natural order (empty when the collection does not exist).
    fn collection_docs(&self, db: &str, coll: &str) -> CommandResult<Vec<Document>>;

    /// Every document of `db.coll` in natural order, raw, each with a number that
    /// [`PipelineEnv::fetch_raw`] finds it by (its RecordId), read as the caller pulls them.
    /// The default reads `collection_docs` and numbers them by position.
    fn scan_raw<'e>(&'e self, db: &str, coll: &str) -> CommandResult<RawScan<'e>> {
        let docs = self.collection_docs(db, coll)?;
        Ok(Box::new(docs.into_iter().zip(0u64..).map(|(d, i)| {
            let raw = values::to_raw(&d)?;
            Ok((i, raw))
        })))
    }

    /// The document numbered `id` by [`PipelineEnv::scan_raw`] (`None`: gone since).
    fn fetch_raw(&self, db: &str, coll: &str, id: u64) -> CommandResult<Option<RawDocumentBuf>> {
        for item in self.scan_raw(db, coll)? {
            let (i, raw) = item?;
            if i == id {
                return Ok(Some(raw));
            }
        }
        Ok(None)
    }

    /// The documents of `db.coll` whose `field` may equal one of `values` (a superset is fine:
    /// the pipeline filters again), typically through an index; `None` when no index fits,
    /// and the pipeline then reads the whole collection once. Used by equality `$lookup`.
    fn lookup_candidates(
        &self,
        _db: &str,
        _coll: &str,
        _field: &str,
        _values: &[Bson],
    ) -> CommandResult<Option<Vec<Document>>> {
        Ok(None)
    }

    /// A read of `db.coll` in natural order that a suspended run keeps between batches and
    /// pulls one document at a time (`$unionWith` in a cursor). The default reads
    /// `collection_docs` at once and hands them out.
    fn open_scan(&self, db: &str, coll: &str) -> CommandResult<Box<dyn ForeignScan>> {
        let docs = self.collection_docs(db, coll)?;
        let raw = docs
            .iter()
            .map(values::to_raw)
            .collect::<CommandResult<std::collections::VecDeque<_>>>()?;
        Ok(Box::new(BufferedScan(raw)))
    }

    /// Called as blocking stages consume documents; an error (e.g. MaxTimeMSExpired or
    /// Interrupted) stops the pipeline. The default never interrupts.
    fn check_interrupt(&self) -> CommandResult<()> {
        Ok(())
    }
}

/// A foreign collection read that can stop between two documents and go on in a later
/// batch (see [`PipelineEnv::open_scan`]): owned and `Send`, it lives in a cursor.
pub trait ForeignScan: Send {
    /// The next document (`None`: no more); `env` is the environment of the current batch.
    fn next(&mut self, env: &dyn PipelineEnv) -> CommandResult<Option<RawDocumentBuf>>;
}

/// Documents read ahead, handed out one at a time.
struct BufferedScan(std::collections::VecDeque<RawDocumentBuf>);

impl ForeignScan for BufferedScan {
    fn next(&mut self, _env: &dyn PipelineEnv) -> CommandResult<Option<RawDocumentBuf>> {
        Ok(self.0.pop_front())
    }
}

/// Everything parsing needs to know about the command around the pipeline.
#[derive(Debug, Clone)]
pub struct ParseContext {
    /// The database the `aggregate` command runs in (`$lookup`'s default database).
    pub db: String,
    /// The collection aggregated; `None` for `aggregate: 1` (then `$documents` must lead).
    pub coll: Option<String>,
    /// `allowDiskUse`: blocking stages may exceed `memory_max_bytes`.
    pub allow_disk_use: bool,
    /// Memory bound of one blocking stage, in bytes.
    pub memory_max_bytes: usize,
    /// The value of `$$NOW` (and the seconds of `$$CLUSTER_TIME`) for this command.
    pub now: bson::DateTime,
    /// Resolved constants of the command's `let` plus the system variables.
    pub(crate) variables: Document,
    /// How deep inside sub-pipelines this pipeline sits.
    pub(crate) depth: usize,
    /// Set while parsing a `$facet` sub-pipeline (some stages are refused there).
    pub(crate) in_facet: bool,
    /// The pipeline starts with a `$text` search: its documents carry a score
    /// (`query::meta`) that reshaping stages must keep.
    pub(crate) text_score: bool,
}

impl ParseContext {
    pub fn new(db: &str, coll: Option<&str>, now: bson::DateTime) -> ParseContext {
        let mut variables = Document::new();
        variables.insert("NOW", Bson::DateTime(now));
        let secs = u32::try_from(now.timestamp_millis().max(0) / 1000).unwrap_or(u32::MAX);
        variables.insert(
            "CLUSTER_TIME",
            Bson::Timestamp(bson::Timestamp {
                time: secs,
                increment: 1,
            }),
        );
        for (name, word) in [("DESCEND", "descend"), ("PRUNE", "prune"), ("KEEP", "keep")] {
            variables.insert(name, Bson::String(format!("$${word}")));
        }
        ParseContext {
            db: db.to_string(),
            coll: coll.map(str::to_string),
            allow_disk_use: false,
            memory_max_bytes: limits::BLOCKING_STAGE_MEMORY_BYTES_MAX,
            now,
            variables,
            depth: 0,
            in_facet: false,
            text_score: false,
        }
    }

    /// Adds the command's `let` document: each value is an expression over no document,
    /// and may use the variables defined before it.
    pub fn with_let(mut self, let_spec: &Document) -> CommandResult<ParseContext> {
        for (name, spec) in let_spec {
            variables::check_variable_name(name)?;
            let expr = variables::AggExpr::parse(spec, &self)?;
            let value = expr.eval_on(&Document::new())?.unwrap_or(Bson::Null);
            self.variables.insert(name.clone(), value);
        }
        Ok(self)
    }

    /// The same context with one more variable (used for `$lookup`'s `let` per document).
    pub(crate) fn with_variable(&self, name: &str, value: Bson) -> ParseContext {
        let mut out = self.clone();
        out.variables.insert(name.to_string(), value);
        out
    }

    pub(crate) fn nested(&self) -> CommandResult<ParseContext> {
        if self.depth + 1 > limits::PIPELINE_DEPTH_MAX {
            return Err(perr(
                codes::MAX_SUB_PIPELINE_DEPTH,
                format!(
                    "Maximum number of nested sub-pipelines exceeded. Limit is {}",
                    limits::PIPELINE_DEPTH_MAX
                ),
            ));
        }
        let mut out = self.clone();
        out.depth += 1;
        Ok(out)
    }
}

/// One parsed stage with the specification it came from.
#[derive(Debug)]
struct ParsedStage {
    name: String,
    spec: Bson,
    stage: Box<dyn Stage>,
}

/// A parsed pipeline, ready to run any number of times.
#[derive(Debug)]
pub struct Pipeline {
    stages: Vec<ParsedStage>,
    /// A leading `$match`'s filter with the pipeline's variables substituted (what its stage
    /// evaluates), for a scan that applies it instead.
    leading_filter: Option<Document>,
    output: Option<OutputTarget>,
    allow_disk_use: bool,
    memory_max_bytes: usize,
    /// Documents carry a text score (`query::meta`), to strip from the output.
    text_score: bool,
}

/// Whether a `$match` spec has `$text` in its top-level conjunction.
fn mentions_text(spec: &Bson) -> bool {
    let Bson::Document(d) = spec else {
        return false;
    };
    d.contains_key("$text")
        || matches!(d.get("$and"), Some(Bson::Array(items)) if items.iter().any(mentions_text))
}

/// The parse context for `stages` when it differs from `ctx`: with `text_score` set when a
/// top-level pipeline starts with a `$text` search. `$text` anywhere else (a sub-pipeline's
/// first stage included) and a score asked of a pipeline without one fail as in mongod.
fn text_context(stages: &[Document], ctx: &ParseContext) -> CommandResult<Option<ParseContext>> {
    let leading = stages
        .first()
        .and_then(|s| s.get("$match"))
        .is_some_and(mentions_text);
    if !leading {
        if ctx.depth == 0 && !ctx.text_score {
            let wants = stages
                .iter()
                .flat_map(|s| s.values())
                .any(meta::wants_text_score);
            if wants {
                return Err(meta::unavailable());
            }
        }
        return Ok(None);
    }
    if ctx.in_facet {
        return Err(perr(
            codes::FACET_STAGE_NOT_ALLOWED,
            "$match with $text is not allowed to be used within a $facet stage",
        ));
    }
    if ctx.depth > 0 {
        return Err(crate::error::err(
            crate::error::ErrorCode::Location17313,
            "$match with $text is only allowed as the first pipeline stage",
        ));
    }
    let mut out = ctx.clone();
    out.text_score = true;
    Ok(Some(out))
}

impl Pipeline {
    /// Parses `stages` with mongod's checks (one field per stage, known stage names, `$out` and
    /// `$merge` only last, stage-specific argument errors).
    pub fn parse(stages: &[Document], ctx: &ParseContext) -> CommandResult<Pipeline> {
        if stages.len() > limits::PIPELINE_STAGES_MAX {
            return Err(perr(
                codes::PIPELINE_TOO_LONG,
                format!(
                    "Pipeline length must be no longer than {} stages.",
                    limits::PIPELINE_STAGES_MAX
                ),
            ));
        }
        let with_score = text_context(stages, ctx)?;
        let ctx = with_score.as_ref().unwrap_or(ctx);
        let mut parsed = Vec::with_capacity(stages.len());
        let mut output = None;
        for (i, stage_doc) in stages.iter().enumerate() {
            let mut fields = stage_doc.iter();
            let (name, spec) = match (fields.next(), fields.next()) {
                (Some(first), None) => first,
                _ => {
                    return Err(perr(
                        codes::STAGE_ONE_FIELD,
                        "A pipeline stage specification object must contain exactly one field.",
                    ));
                }
            };
            if i > 0 && name == "$match" && mentions_text(spec) {
                return Err(crate::error::err(
                    crate::error::ErrorCode::Location17313,
                    "$match with $text is only allowed as the first pipeline stage",
                ));
            }
            let is_last = i + 1 == stages.len();
            let following = &stages[i + 1..];
            let stage = stages::parse_stage(name, spec, ctx, i, is_last, following)?;
            if let Some(target) = stage.output_target() {
                output = Some(target);
            }
            parsed.push(ParsedStage {
                name: name.clone(),
                spec: spec.clone(),
                stage,
            });
        }
        let leading_filter = match parsed.first() {
            Some(ParsedStage {
                name,
                spec: spec @ Bson::Document(_),
                ..
            }) if name == "$match" => match variables::substitute(spec, &ctx.variables) {
                Bson::Document(d) => Some(d),
                _ => None,
            },
            _ => None,
        };
        Ok(Pipeline {
            stages: parsed,
            leading_filter,
            output,
            allow_disk_use: ctx.allow_disk_use,
            memory_max_bytes: ctx.memory_max_bytes,
            text_score: ctx.text_score,
        })
    }

    /// True when the pipeline starts with a `$text` search whose scores its documents carry;
    /// its output must then go through `query::meta::strip`.
    pub fn has_text_score(&self) -> bool {
        self.text_score
    }

    /// Parses the pipeline of a pipeline-style update (`update`, `findAndModify`): only
    /// `$addFields`/`$set`, `$project`, `$unset` and `$replaceRoot`/`$replaceWith` may appear.
    pub fn parse_update(stages: &[Document], ctx: &ParseContext) -> CommandResult<Pipeline> {
        const ALLOWED: &[&str] = &[
            "$addFields",
            "$set",
            "$project",
            "$unset",
            "$replaceRoot",
            "$replaceWith",
        ];
        for stage in stages {
            if let Some(name) = stage.keys().next()
                && stage.len() == 1
                && !ALLOWED.contains(&name.as_str())
            {
                return Err(crate::error::err(
                    crate::error::ErrorCode::InvalidOptions,
                    format!("{name} is not allowed to be used within an update"),
                ));
            }
        }
        Pipeline::parse(stages, ctx)
    }

    /// Applies an update pipeline (see [`Pipeline::parse_update`]) to one document.
    pub fn apply_update(&self, doc: Document) -> CommandResult<Document> {
        struct NoEnv;
        impl PipelineEnv for NoEnv {
            fn collection_docs(&self, _db: &str, _coll: &str) -> CommandResult<Vec<Document>> {
                Ok(Vec::new())
            }
        }
        let mut out = self.run_vec(vec![doc], &NoEnv)?;
        Ok(out.pop().unwrap_or_default())
    }

    /// Runs the pipeline over `input`. Errors while streaming come out as `Err` items.
    pub fn run<'a>(
        &'a self,
        input: DocStream<'a>,
        env: &'a dyn PipelineEnv,
    ) -> CommandResult<DocStream<'a>> {
        self.run_skipping(0, input, env)
    }

    /// Runs all but the first `skip` stages (for a caller that executed a leading `$match`
    /// and `$sort` itself, e.g. through an index).
    pub fn run_skipping<'a>(
        &'a self,
        skip: usize,
        input: DocStream<'a>,
        env: &'a dyn PipelineEnv,
    ) -> CommandResult<DocStream<'a>> {
        Ok(self.run_flow(skip, Flow::Docs(input), env)?.into_docs())
    }

    /// Runs all but the first `skip` stages over `input`, raw or decoded: raw documents stay
    /// raw through the stages that read them raw (`Stage::run_raw`) and are decoded, one at a
    /// time, at the first stage that needs a `Document`.
    pub fn run_flow<'a>(
        &'a self,
        skip: usize,
        input: Flow<'a>,
        env: &'a dyn PipelineEnv,
    ) -> CommandResult<Flow<'a>> {
        let cx = RunCx {
            env,
            allow_disk_use: self.allow_disk_use,
            memory_max_bytes: self.memory_max_bytes,
        };
        let mut flow = input;
        for stage in self.stages.iter().skip(skip) {
            flow = match flow {
                Flow::Raw(raw) => stage.stage.run_raw(raw, cx)?,
                Flow::Docs(docs) => Flow::Docs(stage.stage.run(docs, cx)?),
            };
        }
        Ok(flow)
    }

    fn run_cx<'e>(&self, env: &'e dyn PipelineEnv) -> RunCx<'e> {
        RunCx {
            env,
            allow_disk_use: self.allow_disk_use,
            memory_max_bytes: self.memory_max_bytes,
        }
    }

    /// The state of a streamed run of all but the first `skip` stages.
    pub fn stream_state(&self, skip: usize) -> StreamState {
        StreamState {
            skip,
            end: self.stages.len(),
            counts: vec![0; self.stages.len()],
            finished: false,
            slots: Vec::new(),
        }
    }

    /// Gives each stage of `state`'s range that streams with state a fresh one.
    fn open_slots(&self, state: &mut StreamState) {
        state.slots = self
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (state.skip..state.end)
                    .contains(&i)
                    .then(|| s.stage.open_slot())
                    .flatten()
            })
            .collect();
    }

    /// Runs one document through stage `i` of a segment alone and appends what it gives to
    /// `out` (what waits for stage `i + 1`, or the segment's results): a segment keeps a queue
    /// in front of every stage rather than pushing each output on at once, and `$unwind` gives
    /// its outputs as a lazy expansion ([`Stage::expand_lazily`]), so a segment holds one
    /// output of each `$unwind` at a time; pushing each on at once held the product of every
    /// `$unwind` of one input document. `$skip`/`$limit` count in `state`, so runs over a stream's
    /// documents give what one [`Pipeline::run_flow`] over the whole stream gives.
    fn step(
        &self,
        i: usize,
        state: &mut StreamState,
        doc: RawDocumentBuf,
        cx: RunCx<'_>,
        out: &mut std::collections::VecDeque<suspend::Waiting>,
    ) -> CommandResult<()> {
        use suspend::Waiting::{Doc, Many};
        let Some(stage) = self.stages.get(i).filter(|_| i < state.end) else {
            out.push_back(Doc(doc));
            return Ok(());
        };
        let n = || {
            values::integral(&stage.spec)
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0)
        };
        match stage.name.as_str() {
            "$limit" => {
                if state.counts[i] >= n() {
                    state.finished = true;
                    return Ok(());
                }
                state.counts[i] += 1;
                if state.counts[i] >= n() {
                    // Every later output would pass this stage: the run is over after this one.
                    state.finished = true;
                }
                out.push_back(Doc(doc));
            }
            "$skip" if state.counts[i] < n() => state.counts[i] += 1,
            "$skip" => out.push_back(Doc(doc)),
            _ => {
                // A stage that keeps state between documents runs on its slot.
                if let Some(Some(slot)) = state.slots.get_mut(i) {
                    out.push_back(Doc(stage.stage.push_slot(slot, doc, cx)?));
                    return Ok(());
                }
                if let Some(many) = stage.stage.expand_lazily(&doc) {
                    out.push_back(Many(many?));
                    return Ok(());
                }
                if let Some(next) = stage.stage.push_one(&doc) {
                    out.push_back(Doc(next?));
                    return Ok(());
                }
                let one: RawStream<'_> = Box::new(std::iter::once(Ok(doc)));
                for next in stage.stage.run_raw(one, cx)?.into_raw() {
                    out.push_back(Doc(next?));
                }
            }
        }
        Ok(())
    }

    /// The stages as `{name: spec}` documents, for explain output.
    pub fn stage_documents(&self) -> Vec<Document> {
        self.stages
            .iter()
            .map(|s| {
                let mut d = Document::new();
                d.insert(s.name.clone(), s.spec.clone());
                d
            })
            .collect()
    }

    /// Runs the pipeline over a vector and collects the result (first error wins).
    pub fn run_vec(
        &self,
        input: Vec<Document>,
        env: &dyn PipelineEnv,
    ) -> CommandResult<Vec<Document>> {
        self.run(Box::new(input.into_iter().map(Ok)), env)?
            .collect()
    }

    /// The filter of a leading `$match`, variables substituted, as its stage evaluates it: a
    /// scan that applies it may run the pipeline without that stage (`run_skipping(1, ..)`).
    pub fn leading_match(&self) -> Option<&Document> {
        self.leading_filter.as_ref()
    }

    /// The options of a leading `$geoNear`.
    pub fn leading_geo_near(&self) -> Option<&GeoNear> {
        self.stages.first().and_then(|s| s.stage.geo_near())
    }

    /// The `$limit` right after a leading `$geoNear`: how many of its nearest documents the
    /// pipeline can use at most.
    pub fn geo_near_limit(&self) -> Option<usize> {
        self.leading_geo_near()?;
        match self.stages.get(1) {
            Some(ParsedStage { name, spec, .. }) if name == "$limit" => {
                crate::query::types::as_f64(spec)
                    .filter(|n| *n >= 1.0)
                    .map(|n| n as usize)
            }
            _ => None,
        }
    }

    /// The `$sort` document when the pipeline starts with one, or with `$match` then `$sort`.
    pub fn leading_sort(&self) -> Option<&Document> {
        let skip = usize::from(self.stages.first().is_some_and(|s| s.name == "$match"));
        match self.stages.get(skip) {
            Some(ParsedStage {
                name,
                spec: Bson::Document(d),
                ..
            }) if name == "$sort" => Some(d),
            _ => None,
        }
    }

    /// What one blocking stage may hold (`internalQueryMaxBlockingSortMemoryUsageBytes`).
    pub fn memory_max_bytes(&self) -> usize {
        self.memory_max_bytes
    }

    /// Stage `i` when a parallel scan can run it over parts of its input and merge exactly.
    pub fn mergeable_at(&self, i: usize) -> Option<Mergeable<'_>> {
        self.stages.get(i)?.stage.mergeable()
    }

    /// Where `$out`/`$merge` want the pipeline's output written, if the pipeline ends in one.
    pub fn output_target(&self) -> Option<&OutputTarget> {
        self.output.as_ref()
    }

    /// True when the first stage produces its own documents (`$documents`), so the caller
    /// should feed an empty input.
    pub fn is_collectionless(&self) -> bool {
        self.stages.first().is_some_and(|s| s.name == "$documents")
    }

    /// The stage names, in order (for explain and tests).
    pub fn stage_names(&self) -> Vec<&str> {
        self.stages.iter().map(|s| s.name.as_str()).collect()
    }

    /// The collections the stages read besides their input (sub-pipelines included), as
    /// `(db, coll)`, each once.
    pub fn foreign_namespaces(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        self.foreign_namespaces_into(&mut out);
        let mut seen = std::collections::HashSet::new();
        out.retain(|ns| seen.insert(ns.clone()));
        out
    }

    pub(crate) fn foreign_namespaces_into(&self, out: &mut Vec<(String, String)>) {
        for s in &self.stages {
            s.stage.foreign_namespaces(out);
        }
    }
}
