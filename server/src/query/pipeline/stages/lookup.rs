//! Stages that read other collections through `PipelineEnv`: `$lookup` (equality form, `let` +
//! `pipeline` form, and both together), `$unionWith` and `$graphLookup`.
//!
//! An equality `$lookup` asks the environment for the candidates of each input document (a
//! foreign index probe); when no index fits, the foreign collection is read once per run into
//! a hash table by the foreign field (`foreign::ForeignTable`), as is `$graphLookup`'s. A
//! sub-pipeline is parsed once: its `let` names parse as variables and their values are bound
//! per input document while it runs (`expr::outer`). `$unionWith` pulls the other collection
//! as the caller pulls results.

use super::foreign::ForeignTable;
use super::{Stage, StreamSlot, UnionSide, spec_doc};
use crate::error::CommandResult;
use crate::query::budget::Held;
use crate::query::expr::outer;
use crate::query::matcher::Filter;
use crate::query::path;
use crate::query::path::set_path;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::limits::GRAPH_LOOKUP_DEPTH_MAX;
use crate::query::pipeline::run_context::{RunCx, doc_size_bytes};
use crate::query::pipeline::values::{raw_value_key, split_field_path, to_doc, to_raw, value_key};
use crate::query::pipeline::variables::{AggExpr, check_variable_name};
use crate::query::pipeline::{DocStream, ParseContext, Pipeline, PipelineEnv};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Every value `path` reaches in `doc` as an encoded lookup key: array elements (and the
/// array itself when `include_arrays`), missing as null.
pub(super) fn keys_raw(doc: &RawDocument, path: &[String], include_arrays: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let _ = path::walk::<()>(doc, path, &mut |c| {
        match c.value {
            Some(bson::RawBsonRef::Array(_)) if !c.expanded && !include_arrays => {}
            Some(v) => {
                let mut key = Vec::new();
                raw_value_key(&mut key, v);
                out.push(key);
            }
            None => out.push(value_key(&Bson::Null)),
        }
        ControlFlow::Continue(())
    });
    out
}

/// A sub-pipeline, parsed once; its `let` variables are bound per input document.
#[derive(Debug)]
struct SubPipeline {
    stages: Vec<Document>,
    lets: Vec<(String, AggExpr)>,
    parsed: Pipeline,
}

impl SubPipeline {
    fn parse(
        stages: &Bson,
        lets: Option<&Bson>,
        ctx: &ParseContext,
        stage: &str,
    ) -> CommandResult<SubPipeline> {
        let Bson::Array(items) = stages else {
            return Err(perr(
                codes::FAILED_TO_PARSE,
                format!("'pipeline' option to {stage} must be an array"),
            ));
        };
        let stages = items
            .iter()
            .map(|s| match s {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(perr(
                    codes::FAILED_TO_PARSE,
                    format!("{stage} pipeline stages must be objects"),
                )),
            })
            .collect::<CommandResult<Vec<_>>>()?;
        let mut ctx = ctx.nested()?;
        let mut vars = Vec::new();
        if let Some(l) = lets {
            let Bson::Document(l) = l else {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    format!("'let' option to {stage} must be an object"),
                ));
            };
            for (name, spec) in l {
                check_variable_name(name)?;
                vars.push((name.clone(), AggExpr::parse(spec, &ctx)?));
            }
        }
        // A `let` name hides a command-level variable of the same name inside the pipeline.
        let names: Vec<String> = vars.iter().map(|(n, _)| n.clone()).collect();
        for name in &names {
            ctx.variables.remove(name);
        }
        let parsed = outer::parse_with_names(&names, || Pipeline::parse(&stages, &ctx))?;
        Ok(SubPipeline {
            stages,
            lets: vars,
            parsed,
        })
    }

    /// Runs over `input` with the `let` variables evaluated against `local`.
    fn run(
        &self,
        local: &RawDocument,
        input: DocStream<'_>,
        env: &dyn PipelineEnv,
    ) -> CommandResult<Vec<Document>> {
        let run = || self.parsed.run(input, env)?.collect();
        if self.lets.is_empty() {
            return run();
        }
        let mut values = Vec::with_capacity(self.lets.len());
        for (name, e) in &self.lets {
            values.push((name.clone(), e.eval(local)?.unwrap_or(Bson::Null)));
        }
        outer::run_with_values(values, run)
    }

    fn foreign_namespaces(&self, out: &mut Vec<(String, String)>) {
        self.parsed.foreign_namespaces_into(out);
    }

    fn starts_with_documents(&self) -> bool {
        self.stages
            .first()
            .is_some_and(|s| s.contains_key("$documents"))
    }
}

/// Reads `from`/`coll`: a name, or `{db, coll}`.
fn namespace(v: &Bson, ctx: &ParseContext, stage: &str) -> CommandResult<(String, String)> {
    match v {
        Bson::String(c) => Ok((ctx.db.clone(), c.clone())),
        Bson::Document(d) => match (d.get("db"), d.get("coll")) {
            (Some(Bson::String(db)), Some(Bson::String(c))) => Ok((db.clone(), c.clone())),
            _ => Err(perr(
                codes::FAILED_TO_PARSE,
                format!("{stage} 'from' must name both 'db' and 'coll'"),
            )),
        },
        _ => Err(perr(
            codes::LOOKUP_FROM_TYPE,
            format!("'from' option to {stage} must be a string or an object"),
        )),
    }
}

/// `$lookup`.
#[derive(Debug)]
pub struct Lookup {
    from: Option<(String, String)>,
    as_path: Vec<String>,
    fields: Option<(Vec<String>, Vec<String>)>,
    pipeline: Option<SubPipeline>,
}

impl Lookup {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Lookup> {
        let d = spec_doc(
            spec,
            codes::LOOKUP_NOT_OBJECT,
            "the $lookup stage specification",
        )?;
        let get_str = |key: &str| -> CommandResult<Option<String>> {
            match d.get(key) {
                None => Ok(None),
                Some(Bson::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(perr(
                    codes::FAILED_TO_PARSE,
                    format!("$lookup argument '{key}' must be a string"),
                )),
            }
        };
        for k in d.keys() {
            if !matches!(
                k.as_str(),
                "from" | "as" | "localField" | "foreignField" | "let" | "pipeline"
            ) {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    format!("unknown argument to $lookup: {k}"),
                ));
            }
        }
        let as_field = get_str("as")?.ok_or_else(|| {
            perr(
                codes::FAILED_TO_PARSE,
                "must specify 'as' field for a $lookup",
            )
        })?;
        let fields = match (get_str("localField")?, get_str("foreignField")?) {
            (Some(l), Some(f)) => Some((split_field_path(&l)?, split_field_path(&f)?)),
            (None, None) => None,
            _ => {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    "$lookup requires both or neither of 'localField' and 'foreignField' to be specified",
                ));
            }
        };
        let pipeline = match d.get("pipeline") {
            Some(p) => Some(SubPipeline::parse(p, d.get("let"), ctx, "$lookup")?),
            None if d.contains_key("let") => {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    "$lookup with 'let' must also specify 'pipeline'",
                ));
            }
            None => None,
        };
        if fields.is_none() && pipeline.is_none() {
            return Err(perr(
                codes::FAILED_TO_PARSE,
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified",
            ));
        }
        let from = match d.get("from") {
            Some(f) => Some(namespace(f, ctx, "$lookup")?),
            None if pipeline
                .as_ref()
                .is_some_and(SubPipeline::starts_with_documents) =>
            {
                None
            }
            None => {
                return Err(perr(
                    codes::LOOKUP_NO_FROM,
                    "missing 'from' option to $lookup stage specification",
                ));
            }
        };
        Ok(Lookup {
            from,
            as_path: split_field_path(&as_field)?,
            fields,
            pipeline,
        })
    }

    /// The foreign documents matching `doc`'s local keys: through the environment's index when
    /// it has one (`index_usable` turns false at its first refusal), else through `table`
    /// (built on first use).
    fn candidates(
        &self,
        raw: &RawDocument,
        state: &mut JoinState,
        cx: RunCx<'_>,
    ) -> CommandResult<Vec<Document>> {
        let (Some((local, far)), Some((db, coll))) = (&self.fields, &self.from) else {
            return Ok(Vec::new());
        };
        let keys = keys_raw(raw, local, false);
        if state.index_usable {
            let values: Vec<Bson> = local_values(raw, local);
            match cx
                .env
                .lookup_candidates(db, coll, &far.join("."), &values)?
            {
                Some(found) => {
                    let mut out = Vec::new();
                    for d in found {
                        let r = to_raw(&d)?;
                        if keys_raw(&r, far, true).iter().any(|k| keys.contains(k)) {
                            out.push(d);
                        }
                    }
                    return Ok(out);
                }
                None => state.index_usable = false,
            }
        }
        if state.table.is_none() {
            state.table = Some(ForeignTable::build(
                cx.env,
                (db, coll),
                far,
                None,
                cx.memory_max_bytes,
            )?);
        }
        let Some(table) = &state.table else {
            return Ok(Vec::new());
        };
        table
            .matching(cx.env, &keys, None)?
            .into_iter()
            .map(|(_, d)| to_doc(&d))
            .collect()
    }

    /// The pipeline-only form's input: the whole foreign collection, kept from the first
    /// document on while it fits in an eighth of the memory bound (charged to the budget), else
    /// read again for every document (a bound on what a suspended cursor holds, at the price
    /// of one foreign scan per input document).
    fn whole<'e>(&self, state: &mut JoinState, cx: RunCx<'e>) -> CommandResult<DocStream<'e>> {
        let Some((db, coll)) = &self.from else {
            return Ok(Box::new(std::iter::empty()));
        };
        if matches!(state.whole, Whole::Unread) {
            let held_bytes_max = cx.memory_max_bytes / super::foreign::HELD_SHARE_DIVISOR;
            let (mut docs, mut bytes) = (Vec::new(), 0usize);
            state.whole = Whole::TooLarge;
            for item in cx.env.scan_raw(db, coll)? {
                let (_, raw) = item?;
                bytes = bytes.saturating_add(raw.as_bytes().len());
                if bytes > held_bytes_max {
                    docs.clear();
                    break;
                }
                docs.push(to_doc(&raw)?);
            }
            if bytes <= held_bytes_max {
                let mut held = Held::global();
                if !held.set(bytes) {
                    return Err(crate::query::budget::exhausted("$lookup", bytes));
                }
                state.whole = Whole::Held {
                    docs,
                    _charge: held,
                };
            }
        }
        match &state.whole {
            Whole::Held { docs, .. } => Ok(Box::new(docs.clone().into_iter().map(Ok))),
            _ => Ok(Box::new(
                cx.env.scan_raw(db, coll)?.map(|item| to_doc(&item?.1)),
            )),
        }
    }

    /// `doc` with its matches set at `as`; `raw` is the same document encoded (the keys and
    /// `let` values are read from it).
    fn join(
        &self,
        mut doc: Document,
        raw: &RawDocument,
        state: &mut JoinState,
        cx: RunCx<'_>,
    ) -> CommandResult<Document> {
        let joined = match (&self.fields, &self.pipeline) {
            (Some(_), None) => self.candidates(raw, state, cx)?,
            (Some(_), Some(p)) => {
                let matched = self.candidates(raw, state, cx)?;
                p.run(raw, Box::new(matched.into_iter().map(Ok)), cx.env)?
            }
            (None, Some(p)) => {
                let input = self.whole(state, cx)?;
                p.run(raw, input, cx.env)?
            }
            (None, None) => Vec::new(),
        };
        let total_bytes: usize = joined.iter().map(doc_size_bytes).sum();
        if total_bytes > cx.memory_max_bytes {
            return Err(perr(
                codes::LOOKUP_TOO_LARGE,
                format!(
                    "Total size of documents in {} matching pipeline's $lookup stage exceeds {} bytes",
                    self.from.as_ref().map_or("", |f| f.1.as_str()),
                    cx.memory_max_bytes
                ),
            ));
        }
        set_path(
            &mut doc,
            &self.as_path,
            Bson::Array(joined.into_iter().map(Bson::Document).collect()),
        );
        Ok(doc)
    }
}

/// The values `path` reaches in `doc` (as [`keys_raw`] without arrays), for an index probe.
fn local_values(doc: &RawDocument, path: &[String]) -> Vec<Bson> {
    let mut out = Vec::new();
    let _ = path::walk::<()>(doc, path, &mut |c| {
        match c.value {
            Some(bson::RawBsonRef::Array(_)) if !c.expanded => {}
            Some(v) => out.push(crate::query::types::to_owned(v)),
            None => out.push(Bson::Null),
        }
        ControlFlow::Continue(())
    });
    out
}

/// What one run of a `$lookup` keeps between input documents (in a suspended run, between
/// batches too: see `StreamSlot`).
struct JoinState {
    index_usable: bool,
    table: Option<ForeignTable>,
    whole: Whole,
}

/// The pipeline-only form's foreign documents.
enum Whole {
    Unread,
    /// The documents, and their charge to the budget (given back with them).
    Held {
        docs: Vec<Document>,
        _charge: Held,
    },
    /// Past the bound: read again for every input document.
    TooLarge,
}

impl JoinState {
    fn new() -> JoinState {
        JoinState {
            index_usable: true,
            table: None,
            whole: Whole::Unread,
        }
    }
}

/// A slot handed to a stage that did not make it: our bug, never the client's.
fn slot_mismatch(stage: &str) -> crate::error::CommandError {
    crate::error::err(
        crate::error::ErrorCode::InternalError,
        format!("{stage} was given another stage's state"),
    )
}

impl Stage for Lookup {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut state = JoinState::new();
        Ok(Box::new(input.map(move |item| {
            let doc = item?;
            let raw = to_raw(&doc)?;
            self.join(doc, &raw, &mut state, cx)
        })))
    }

    fn open_slot(&self) -> Option<StreamSlot> {
        Some(Box::new(JoinState::new()))
    }

    fn push_slot(
        &self,
        slot: &mut StreamSlot,
        doc: RawDocumentBuf,
        cx: RunCx<'_>,
    ) -> CommandResult<RawDocumentBuf> {
        let state = slot
            .downcast_mut::<JoinState>()
            .ok_or_else(|| slot_mismatch("$lookup"))?;
        to_raw(&self.join(to_doc(&doc)?, &doc, state, cx)?)
    }

    fn foreign_namespaces(&self, out: &mut Vec<(String, String)>) {
        out.extend(self.from.iter().cloned());
        if let Some(p) = &self.pipeline {
            p.foreign_namespaces(out);
        }
    }
}

/// `$unionWith`: the input, then the other collection through an optional pipeline.
#[derive(Debug)]
pub struct UnionWith {
    coll: Option<(String, String)>,
    pipeline: Option<SubPipeline>,
}

impl UnionWith {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<UnionWith> {
        let (coll, pipeline) = match spec {
            Bson::String(c) => (Some((ctx.db.clone(), c.clone())), None),
            Bson::Document(d) => {
                if let Some(k) = d
                    .keys()
                    .find(|k| !matches!(k.as_str(), "coll" | "pipeline"))
                {
                    return Err(perr(
                        codes::UNKNOWN_FIELD,
                        format!("BSON field '$unionWith.{k}' is an unknown field."),
                    ));
                }
                let pipeline = d
                    .get("pipeline")
                    .map(|p| SubPipeline::parse(p, None, ctx, "$unionWith"))
                    .transpose()?;
                let coll = match d.get("coll") {
                    Some(Bson::String(c)) => Some((ctx.db.clone(), c.clone())),
                    Some(_) => {
                        return Err(perr(
                            codes::TYPE_MISMATCH,
                            "BSON field '$unionWith.coll' must be a string",
                        ));
                    }
                    None if pipeline
                        .as_ref()
                        .is_some_and(SubPipeline::starts_with_documents) =>
                    {
                        None
                    }
                    None => {
                        return Err(perr(
                            codes::MISSING_FIELD,
                            "BSON field '$unionWith.coll' is missing but a required field",
                        ));
                    }
                };
                (coll, pipeline)
            }
            _ => {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    "the $unionWith stage specification must be an object or string",
                ));
            }
        };
        Ok(UnionWith { coll, pipeline })
    }

    /// The other collection, decoded as it is pulled, through the pipeline if there is one.
    fn other<'a>(&'a self, env: &'a dyn PipelineEnv) -> CommandResult<DocStream<'a>> {
        let docs: DocStream<'a> = match &self.coll {
            Some((db, c)) => Box::new(env.scan_raw(db, c)?.map(|item| to_doc(&item?.1))),
            None => Box::new(std::iter::empty()),
        };
        match &self.pipeline {
            Some(p) => p.parsed.run(docs, env),
            None => Ok(docs),
        }
    }
}

impl Stage for UnionWith {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        // The other collection is read only once the input is exhausted, then as it is pulled.
        let tail = std::iter::once(()).flat_map(move |()| -> DocStream<'a> {
            match self.other(cx.env) {
                Ok(docs) => docs,
                Err(e) => Box::new(std::iter::once(Err(e))),
            }
        });
        Ok(Box::new(input.chain(tail)))
    }

    fn union_side(&self) -> Option<UnionSide<'_>> {
        Some(UnionSide {
            coll: self.coll.as_ref().map(|(d, c)| (d.as_str(), c.as_str())),
            pipeline: self.pipeline.as_ref().map(|p| &p.parsed),
        })
    }

    fn foreign_namespaces(&self, out: &mut Vec<(String, String)>) {
        out.extend(self.coll.iter().cloned());
        if let Some(p) = &self.pipeline {
            p.foreign_namespaces(out);
        }
    }
}

/// `$graphLookup`: a breadth-first search over the other collection.
#[derive(Debug)]
pub struct GraphLookup {
    from: (String, String),
    start_with: AggExpr,
    connect_from: Vec<String>,
    connect_to: Vec<String>,
    as_path: Vec<String>,
    max_depth: Option<usize>,
    depth_field: Option<Vec<String>>,
    restrict: Option<Filter>,
}

impl GraphLookup {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<GraphLookup> {
        let d = spec_doc(
            spec,
            codes::FAILED_TO_PARSE,
            "the $graphLookup specification",
        )?;
        let known = [
            "from",
            "startWith",
            "connectFromField",
            "connectToField",
            "as",
            "maxDepth",
            "depthField",
            "restrictSearchWithMatch",
        ];
        if let Some(k) = d.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(perr(
                codes::FAILED_TO_PARSE,
                format!("Unknown argument to $graphLookup: {k}"),
            ));
        }
        let required = |key: &str| {
            d.get(key).ok_or_else(|| {
                perr(
                    codes::GRAPH_LOOKUP_MISSING,
                    format!("missing '{key}' option to $graphLookup stage specification: {d}"),
                )
            })
        };
        let path_of = |key: &str| -> CommandResult<Vec<String>> {
            match required(key)? {
                Bson::String(s) => split_field_path(s),
                _ => Err(perr(
                    codes::FAILED_TO_PARSE,
                    format!("expected a string for '{key}' in $graphLookup"),
                )),
            }
        };
        let max_depth = match d.get("maxDepth") {
            None => None,
            Some(v) => match crate::query::pipeline::values::integral(v) {
                Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => {
                    return Err(perr(
                        codes::GRAPH_LOOKUP_DEPTH,
                        format!("maxDepth requires a nonnegative argument, found: {v}"),
                    ));
                }
            },
        };
        let restrict = match d.get("restrictSearchWithMatch") {
            None => None,
            Some(Bson::Document(f)) => Some(Filter::parse(f)?),
            Some(_) => {
                return Err(perr(
                    codes::FAILED_TO_PARSE,
                    "restrictSearchWithMatch must be an object",
                ));
            }
        };
        Ok(GraphLookup {
            from: namespace(required("from")?, ctx, "$graphLookup")?,
            start_with: AggExpr::parse(required("startWith")?, ctx)?,
            connect_from: path_of("connectFromField")?,
            connect_to: path_of("connectToField")?,
            as_path: path_of("as")?,
            max_depth,
            depth_field: d
                .get("depthField")
                .map(|_| path_of("depthField"))
                .transpose()?,
            restrict,
        })
    }

    fn search(
        &self,
        mut doc: Document,
        graph: &ForeignTable,
        env: &dyn PipelineEnv,
    ) -> CommandResult<Document> {
        let start = match self.start_with.eval_on(&doc)? {
            Some(Bson::Array(items)) => items,
            Some(v) => vec![v],
            None => Vec::new(),
        };
        let limit = self.max_depth.unwrap_or(GRAPH_LOOKUP_DEPTH_MAX);
        let mut visited: HashSet<usize> = HashSet::new();
        let mut found: Vec<(Document, usize)> = Vec::new();
        let mut frontier: Vec<Vec<u8>> = start.iter().map(value_key).collect();
        let mut depth = 0usize;
        while !frontier.is_empty() && depth <= limit {
            env.check_interrupt()?;
            let mut next = Vec::new();
            for (pos, d) in graph.matching(env, &frontier, self.restrict.as_ref())? {
                if visited.insert(pos) {
                    next.extend(keys_raw(&d, &self.connect_from, false));
                    found.push((to_doc(&d)?, depth));
                }
            }
            frontier = next;
            depth += 1;
        }
        let results = found
            .into_iter()
            .map(|(mut d, depth)| {
                if let Some(f) = &self.depth_field {
                    set_path(
                        &mut d,
                        f,
                        Bson::Int64(i64::try_from(depth).unwrap_or(i64::MAX)),
                    );
                }
                Bson::Document(d)
            })
            .collect();
        set_path(&mut doc, &self.as_path, Bson::Array(results));
        Ok(doc)
    }
}

impl GraphLookup {
    /// One input document's search, the table built on the run's first document.
    fn step(
        &self,
        doc: Document,
        graph: &mut Option<ForeignTable>,
        cx: RunCx<'_>,
    ) -> CommandResult<Document> {
        if graph.is_none() {
            *graph = Some(ForeignTable::build(
                cx.env,
                (&self.from.0, &self.from.1),
                &self.connect_to,
                self.restrict.as_ref(),
                cx.memory_max_bytes,
            )?);
        }
        match graph {
            Some(g) => self.search(doc, g, cx.env),
            None => Ok(doc),
        }
    }
}

impl Stage for GraphLookup {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut graph: Option<ForeignTable> = None;
        Ok(Box::new(
            input.map(move |item| self.step(item?, &mut graph, cx)),
        ))
    }

    fn open_slot(&self) -> Option<StreamSlot> {
        Some(Box::new(None::<ForeignTable>))
    }

    fn push_slot(
        &self,
        slot: &mut StreamSlot,
        doc: RawDocumentBuf,
        cx: RunCx<'_>,
    ) -> CommandResult<RawDocumentBuf> {
        let graph = slot
            .downcast_mut::<Option<ForeignTable>>()
            .ok_or_else(|| slot_mismatch("$graphLookup"))?;
        to_raw(&self.step(to_doc(&doc)?, graph, cx)?)
    }

    fn foreign_namespaces(&self, out: &mut Vec<(String, String)>) {
        out.push(self.from.clone());
    }
}
