//! Stages that read other collections through `PipelineEnv`: `$lookup` (equality form, `let` +
//! `pipeline` form, and both together), `$unionWith` and `$graphLookup`.
//!
//! The foreign collection is read once per run, on the first input document, and indexed in
//! memory by the key encoding of the foreign field (array fields index each element and the
//! array itself; missing indexes as null), so an equality `$lookup` costs O(n + m) instead of
//! O(n * m). A `let` sub-pipeline is parsed per input document, because its variables are
//! substituted into the expression text (see `common`).

use super::{Stage, spec_doc};
use crate::error::CommandResult;
use crate::query::matcher::Filter;
use crate::query::path;
use crate::query::path::set_path;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::limits::GRAPH_LOOKUP_DEPTH_MAX;
use crate::query::pipeline::run_context::{RunCx, doc_size_bytes};
use crate::query::pipeline::values::{split_field_path, to_raw, value_key};
use crate::query::pipeline::variables::{AggExpr, check_variable_name};
use crate::query::pipeline::{DocStream, ParseContext, Pipeline, PipelineEnv};
use crate::query::types;
use bson::{Bson, Document, RawDocument};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

/// Every value `path` reaches in `doc` as a lookup key: array elements and the array itself,
/// missing as null.
fn keys_at(doc: &RawDocument, path: &[String], include_arrays: bool) -> Vec<Bson> {
    let mut out = Vec::new();
    let _ = path::walk::<()>(doc, path, &mut |c| {
        match c.value {
            Some(bson::RawBsonRef::Array(_)) if !c.expanded && !include_arrays => {}
            Some(v) => out.push(types::to_owned(v)),
            None => out.push(Bson::Null),
        }
        ControlFlow::Continue(())
    });
    out
}

/// A foreign collection indexed by one field.
struct Indexed {
    docs: Vec<Document>,
    by_key: HashMap<Vec<u8>, Vec<usize>>,
}

impl Indexed {
    fn build(docs: Vec<Document>, field: &[String]) -> CommandResult<Indexed> {
        let mut by_key: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            let raw = to_raw(d)?;
            let mut seen = HashSet::new();
            for k in keys_at(&raw, field, true) {
                let key = value_key(&k);
                if seen.insert(key.clone()) {
                    by_key.entry(key).or_default().push(i);
                }
            }
        }
        Ok(Indexed { docs, by_key })
    }

    /// Positions of the documents matching any of `values`, in collection order.
    fn matching(&self, values: &[Bson]) -> Vec<usize> {
        let mut hits: Vec<usize> = values
            .iter()
            .filter_map(|v| self.by_key.get(&value_key(v)))
            .flatten()
            .copied()
            .collect();
        hits.sort_unstable();
        hits.dedup();
        hits
    }
}

/// A sub-pipeline with `let` variables bound per input document.
#[derive(Debug)]
struct SubPipeline {
    stages: Vec<Document>,
    lets: Vec<(String, AggExpr)>,
    ctx: ParseContext,
    /// Parsed once when there are no `let` variables.
    fixed: Option<Pipeline>,
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
        let ctx = ctx.nested()?;
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
        // Parse now with the variables as null so that errors surface at parse time.
        let mut probe = ctx.clone();
        for (name, _) in &vars {
            probe = probe.with_variable(name, Bson::Null);
        }
        let parsed = Pipeline::parse(&stages, &probe)?;
        Ok(SubPipeline {
            fixed: vars.is_empty().then_some(parsed),
            stages,
            lets: vars,
            ctx,
        })
    }

    fn run(
        &self,
        local: &RawDocument,
        input: Vec<Document>,
        env: &dyn PipelineEnv,
    ) -> CommandResult<Vec<Document>> {
        if let Some(p) = &self.fixed {
            return p.run_vec(input, env);
        }
        let mut ctx = self.ctx.clone();
        for (name, e) in &self.lets {
            ctx = ctx.with_variable(name, e.eval(local)?.unwrap_or(Bson::Null));
        }
        Pipeline::parse(&self.stages, &ctx)?.run_vec(input, env)
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

    fn load(&self, env: &dyn PipelineEnv) -> CommandResult<Indexed> {
        let docs = match &self.from {
            Some((db, coll)) => env.collection_docs(db, coll)?,
            None => Vec::new(),
        };
        let field = self
            .fields
            .as_ref()
            .map(|(_, f)| f.clone())
            .unwrap_or_default();
        if field.is_empty() {
            return Ok(Indexed {
                docs,
                by_key: HashMap::new(),
            });
        }
        Indexed::build(docs, &field)
    }

    fn join(
        &self,
        mut doc: Document,
        foreign: &Indexed,
        env: &dyn PipelineEnv,
        memory_max_bytes: usize,
    ) -> CommandResult<Document> {
        let raw = to_raw(&doc)?;
        let matched: Vec<Document> = match &self.fields {
            Some((local, _)) => {
                let values = keys_at(&raw, local, false);
                foreign
                    .matching(&values)
                    .into_iter()
                    .map(|i| foreign.docs[i].clone())
                    .collect()
            }
            None => foreign.docs.clone(),
        };
        let joined = match &self.pipeline {
            Some(p) => p.run(&raw, matched, env)?,
            None => matched,
        };
        let total_bytes: usize = joined.iter().map(doc_size_bytes).sum();
        if total_bytes > memory_max_bytes {
            return Err(perr(
                codes::LOOKUP_TOO_LARGE,
                format!(
                    "Total size of documents in {} matching pipeline's $lookup stage exceeds {memory_max_bytes} bytes",
                    self.from.as_ref().map_or("", |f| f.1.as_str())
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

impl Stage for Lookup {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut foreign: Option<Indexed> = None;
        let mut env_has_index = true;
        Ok(Box::new(input.map(move |item| {
            let doc = item?;
            // Ask the environment for just the candidates (an index lookup) until it declines.
            if env_has_index
                && let (Some((db, coll)), Some((local, far))) = (&self.from, &self.fields)
            {
                let values = keys_at(&to_raw(&doc)?, local, false);
                match cx
                    .env
                    .lookup_candidates(db, coll, &far.join("."), &values)?
                {
                    Some(candidates) => {
                        let index = Indexed::build(candidates, far)?;
                        return self.join(doc, &index, cx.env, cx.memory_max_bytes);
                    }
                    None => env_has_index = false,
                }
            }
            if foreign.is_none() {
                foreign = Some(self.load(cx.env)?);
            }
            match &foreign {
                Some(f) => self.join(doc, f, cx.env, cx.memory_max_bytes),
                None => Ok(doc),
            }
        })))
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

    fn other(&self, env: &dyn PipelineEnv) -> CommandResult<Vec<Document>> {
        let docs = match &self.coll {
            Some((db, c)) => env.collection_docs(db, c)?,
            None => Vec::new(),
        };
        match &self.pipeline {
            Some(p) => p.run(&to_raw(&Document::new())?, docs, env),
            None => Ok(docs),
        }
    }
}

impl Stage for UnionWith {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        // The other collection is read only once the input is exhausted.
        let tail = std::iter::once(()).flat_map(move |()| match self.other(cx.env) {
            Ok(docs) => docs.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        });
        Ok(Box::new(input.chain(tail)))
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

    fn search(&self, mut doc: Document, graph: &Indexed) -> CommandResult<Document> {
        let start = match self.start_with.eval_on(&doc)? {
            Some(Bson::Array(items)) => items,
            Some(v) => vec![v],
            None => Vec::new(),
        };
        let limit = self.max_depth.unwrap_or(GRAPH_LOOKUP_DEPTH_MAX);
        let mut visited: HashSet<usize> = HashSet::new();
        let mut found: Vec<(usize, usize)> = Vec::new();
        let mut frontier = start;
        let mut depth = 0usize;
        while !frontier.is_empty() && depth <= limit {
            let mut next = Vec::new();
            for i in graph.matching(&frontier) {
                if visited.insert(i) {
                    found.push((i, depth));
                    next.extend(keys_at(&to_raw(&graph.docs[i])?, &self.connect_from, false));
                }
            }
            frontier = next;
            depth += 1;
        }
        let results = found
            .into_iter()
            .map(|(i, depth)| {
                let mut d = graph.docs[i].clone();
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

    fn load(&self, env: &dyn PipelineEnv) -> CommandResult<Indexed> {
        let mut docs = env.collection_docs(&self.from.0, &self.from.1)?;
        if let Some(f) = &self.restrict {
            let mut kept = Vec::with_capacity(docs.len());
            for d in docs {
                if f.try_matches(&to_raw(&d)?)?.is_some() {
                    kept.push(d);
                }
            }
            docs = kept;
        }
        Indexed::build(docs, &self.connect_to)
    }
}

impl Stage for GraphLookup {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut graph: Option<Indexed> = None;
        Ok(Box::new(input.map(move |item| {
            let doc = item?;
            if graph.is_none() {
                graph = Some(self.load(cx.env)?);
            }
            match &graph {
                Some(g) => self.search(doc, g),
                None => Ok(doc),
            }
        })))
    }
}
