//! The JavaScript accumulators. `$accumulator` runs the user's `init` once per group (with
//! `initArgs` evaluated on the group's first document), buffers each document's
//! `accumulateArgs` and folds a batch into the state with one script call (a loop over
//! `accumulate` in JS), then `finalize`. `merge` is parsed and required as mongod requires it;
//! cairn never splits a group into partial states (see `stages/group.rs`), so it is not called.
//!
//! `$_internalJsReduce` is mapReduce's reduce (the name is mongod's): it collects a group's
//! emitted values and calls `reduce(key, values)`. A group with one value is not reduced (as
//! mongod); once a batch fills, its values are reduced to one that starts the next batch, which
//! is the re-reduce mapReduce's contract allows and keeps the held values bounded.
//!
//! The state and the buffered values count against the stage's memory bound: a group reports
//! growth past the most it has held before.

use super::ParseContext;
use super::codes::{self, perr};
use super::limits::{JS_BATCH_BYTES_MAX, JS_BATCH_COUNT_MAX};
use super::run_context::value_size_bytes;
use super::variables::AggExpr;
use crate::error::CommandResult;
use crate::query::js;
use bson::{Bson, Document, RawDocument};

/// A parsed `$accumulator`.
#[derive(Debug, Clone)]
pub struct JsAccumulator {
    init: String,
    init_args: Option<AggExpr>,
    accumulate: String,
    accumulate_args: AggExpr,
    finalize: Option<String>,
}

/// A parsed `$_internalJsReduce: {data, eval, scope?}`; `data` gives `{k, v}`.
#[derive(Debug, Clone)]
pub struct JsReduce {
    data: AggExpr,
    reduce: String,
    scope: Option<Document>,
}

/// One group's state: for `$accumulator` the JS state and the buffered argument arrays, for
/// reduce the key and the values not yet reduced.
#[derive(Debug, Clone, Default)]
pub struct JsState {
    state: Option<Bson>,
    state_bytes: usize,
    pending: Vec<Bson>,
    pending_bytes: usize,
    charged_bytes: usize,
}

impl JsState {
    fn push(&mut self, v: Bson) {
        self.pending_bytes += value_size_bytes(&v);
        self.pending.push(v);
    }

    fn batch_full(&self) -> bool {
        self.pending.len() >= JS_BATCH_COUNT_MAX || self.pending_bytes > JS_BATCH_BYTES_MAX
    }

    /// The bytes held beyond the most reported so far.
    fn growth(&mut self) -> usize {
        let held = self.state_bytes + self.pending_bytes;
        let grown = held.saturating_sub(self.charged_bytes);
        self.charged_bytes = self.charged_bytes.max(held);
        grown
    }
}

/// A function field: a string or Code (mongod's 4544702).
fn function(d: &Document, name: &str) -> CommandResult<Option<String>> {
    match d.get(name) {
        None => Ok(None),
        Some(Bson::String(s)) | Some(Bson::JavaScriptCode(s)) => Ok(Some(s.clone())),
        Some(_) => Err(perr(
            codes::JS_ACC_NOT_CODE,
            format!("$accumulator '{name}' must be a String or Code"),
        )),
    }
}

impl JsAccumulator {
    pub fn parse(arg: &Bson, ctx: &ParseContext) -> CommandResult<JsAccumulator> {
        js::require_enabled(crate::error::ErrorCode::Location31264)?;
        let Bson::Document(d) = arg else {
            return Err(perr(
                codes::JS_ACC_NOT_OBJECT,
                format!(
                    "$accumulator expects an object as an argument; found: {}",
                    super::values::type_name(arg)
                ),
            ));
        };
        for (name, value) in d {
            match name.as_str() {
                "init" | "accumulate" | "merge" | "finalize" | "initArgs" | "accumulateArgs" => {}
                "lang" => match value {
                    Bson::String(l) if l == "js" => {}
                    Bson::String(_) => {
                        return Err(perr(
                            codes::JS_ACC_LANG,
                            "$accumulator only supports lang: 'js'",
                        ));
                    }
                    other => {
                        return Err(perr(
                            codes::JS_ACC_LANG_TYPE,
                            format!(
                                "$accumulator lang must be a string; found: {}",
                                super::values::type_name(other)
                            ),
                        ));
                    }
                },
                other => {
                    return Err(perr(
                        codes::JS_ACC_UNKNOWN_FIELD,
                        format!("$accumulator got an unexpected field: {other}"),
                    ));
                }
            }
        }
        let required = |name: &str, code: i32| -> CommandResult<String> {
            function(d, name)?.ok_or_else(|| {
                perr(
                    code,
                    format!("$accumulator missing required argument '{name}'"),
                )
            })
        };
        let init = required("init", codes::JS_ACC_NO_INIT)?;
        let accumulate = required("accumulate", codes::JS_ACC_NO_ACCUMULATE)?;
        required("merge", codes::JS_ACC_NO_MERGE)?;
        let finalize = function(d, "finalize")?;
        let init_args = d
            .get("initArgs")
            .map(|a| AggExpr::parse(a, ctx))
            .transpose()?;
        let accumulate_args = d.get("accumulateArgs").ok_or_else(|| {
            perr(
                codes::JS_ACC_NO_ARGS,
                "$accumulator missing required argument 'accumulateArgs'",
            )
        })?;
        Ok(JsAccumulator {
            init,
            init_args,
            accumulate,
            accumulate_args: AggExpr::parse(accumulate_args, ctx)?,
            finalize,
        })
    }

    pub fn add(&self, s: &mut JsState, doc: &RawDocument) -> CommandResult<usize> {
        if s.state.is_none() {
            let args = match &self.init_args {
                None => Vec::new(),
                Some(e) => match e.eval(doc)? {
                    Some(Bson::Array(a)) => a,
                    other => {
                        return Err(perr(
                            codes::JS_ACC_INIT_ARGS,
                            format!(
                                "$accumulator initArgs must evaluate to an array: {}",
                                other.unwrap_or(Bson::Undefined)
                            ),
                        ));
                    }
                },
            };
            let state = js::call(&self.init, None, &args)?;
            s.state_bytes = value_size_bytes(&state);
            s.state = Some(state);
        }
        match self.accumulate_args.eval(doc)? {
            Some(a @ Bson::Array(_)) => s.push(a),
            other => {
                return Err(perr(
                    codes::JS_ACC_ARGS,
                    format!(
                        "$accumulator accumulateArgs must evaluate to an array: {}",
                        other.unwrap_or(Bson::Undefined)
                    ),
                ));
            }
        }
        let grown = s.growth();
        if s.batch_full() {
            let state = self.folded(s)?;
            s.state_bytes = value_size_bytes(&state);
            s.state = Some(state);
            s.pending.clear();
            s.pending_bytes = 0;
        }
        Ok(grown)
    }

    /// The state with every buffered call applied.
    fn folded(&self, s: &JsState) -> CommandResult<Bson> {
        let state = s.state.clone().unwrap_or(Bson::Null);
        if s.pending.is_empty() {
            return Ok(state);
        }
        let fold = format!(
            "function(state, calls) {{ var f = ({}); \
             for (var i = 0; i < calls.length; i++) state = f.apply(null, [state].concat(calls[i])); \
             return state; }}",
            self.accumulate
        );
        js::call(&fold, None, &[state, Bson::Array(s.pending.clone())])
    }

    pub fn finish(&self, s: &JsState) -> CommandResult<Bson> {
        let state = self.folded(s)?;
        match &self.finalize {
            Some(f) => js::call(f, None, &[state]),
            None => Ok(state),
        }
    }
}

impl JsReduce {
    pub fn parse(arg: &Bson, ctx: &ParseContext) -> CommandResult<JsReduce> {
        js::require_enabled(crate::error::ErrorCode::Location16395)?;
        let bad = |m: &str| perr(codes::FAILED_TO_PARSE, format!("$_internalJsReduce {m}"));
        let Bson::Document(d) = arg else {
            return Err(bad("requires an object"));
        };
        let reduce = match d.get("eval") {
            Some(Bson::String(s)) | Some(Bson::JavaScriptCode(s)) => s.clone(),
            _ => {
                return Err(perr(
                    codes::JS_REDUCE_EVAL,
                    "$_internalJsReduce requires the 'eval' argument to be of type string, or code",
                ));
            }
        };
        let data = d.get("data").ok_or_else(|| {
            perr(
                codes::JS_REDUCE_NO_DATA,
                "$_internalJsReduce requires 'data' argument",
            )
        })?;
        let scope = match d.get("scope") {
            None | Some(Bson::Null) => None,
            Some(Bson::Document(s)) => Some(s.clone()),
            Some(_) => return Err(bad("requires 'scope' to be an object")),
        };
        Ok(JsReduce {
            data: AggExpr::parse(data, ctx)?,
            reduce,
            scope,
        })
    }

    pub fn add(&self, s: &mut JsState, doc: &RawDocument) -> CommandResult<usize> {
        let mut pair = match self.data.eval(doc)? {
            None => return Ok(0),
            Some(Bson::Document(d))
                if d.len() == 2 && d.contains_key("k") && d.contains_key("v") =>
            {
                d
            }
            _ => {
                return Err(perr(
                    codes::JS_REDUCE_DATA,
                    "$_internalJsReduce requires 'data' to be an object with 'k' and 'v' fields",
                ));
            }
        };
        if s.state.is_none() {
            s.state = pair.remove("k");
        }
        s.push(pair.remove("v").unwrap_or(Bson::Null));
        let grown = s.growth();
        if s.batch_full() {
            let one = self.reduced(s)?;
            s.pending.clear();
            s.pending_bytes = 0;
            s.push(one);
        }
        Ok(grown)
    }

    fn reduced(&self, s: &JsState) -> CommandResult<Bson> {
        let key = s.state.clone().unwrap_or(Bson::Null);
        js::call_scoped(
            &self.reduce,
            self.scope.as_ref(),
            None,
            &[key, Bson::Array(s.pending.clone())],
        )
    }

    pub fn finish(&self, s: &JsState) -> CommandResult<Bson> {
        match s.pending.as_slice() {
            [] => Ok(Bson::Null),
            [one] => Ok(one.clone()),
            _ => self.reduced(s),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves `$accumulator` gives what the equivalent built-in accumulator gives (across
    //! several batches, with `initArgs` and `finalize`), fails with mongod's codes, counts its
    //! state against the memory bound, and that mapReduce's reduce leaves single values alone
    //! and re-reduces long groups to the same answer.
    use crate::query::pipeline::Pipeline;
    use crate::query::pipeline::tests::{MapEnv, code_of, ctx, fails, run, stages_of};
    use bson::{Bson, Document, bson, doc};

    fn docs(n: i32) -> Vec<Document> {
        (0..n)
            .map(|i| doc! {"_id": i, "k": i % 3, "v": i})
            .collect()
    }

    fn avg_acc() -> Bson {
        bson!({"$accumulator": {
            "init": "function(start) { return {n: 0, s: start}; }",
            "initArgs": [0],
            "accumulate": "function(st, v) { return {n: st.n + 1, s: st.s + v}; }",
            "accumulateArgs": ["$v"],
            "merge": "function(a, b) { return {n: a.n + b.n, s: a.s + b.s}; }",
            "finalize": "function(st) { return st.s / st.n; }",
            "lang": "js",
        }})
    }

    fn by_id(mut out: Vec<Document>) -> Vec<Document> {
        out.sort_by(|a, b| {
            storage::order::compare_bson(
                a.get("_id").unwrap_or(&Bson::Null),
                b.get("_id").unwrap_or(&Bson::Null),
            )
        });
        out
    }

    #[test]
    fn accumulator_matches_builtin_across_batches() {
        // 3 groups of ~1,700 documents: each crosses the batch bound.
        let input = docs(5000);
        let js = by_id(run(
            bson!([{"$group": {"_id": "$k", "a": avg_acc()}}]),
            input.clone(),
        ));
        let builtin = by_id(run(
            bson!([{"$group": {"_id": "$k", "a": {"$avg": "$v"}}}]),
            input,
        ));
        assert_eq!(js.len(), 3);
        let num = |d: &Document| crate::query::types::as_f64(d.get("a").unwrap_or(&Bson::Null));
        for (j, b) in js.iter().zip(&builtin) {
            let (x, y) = (num(j).unwrap(), num(b).unwrap());
            assert!((x - y).abs() < 1e-9, "{j} vs {b}");
        }
        // Also in $bucket.
        let out = run(
            bson!([{"$bucket": {"groupBy": "$v", "boundaries": [0, 10, 20],
                "output": {"a": avg_acc()}}}]),
            docs(20),
        );
        assert_eq!(out[0].get_f64("a").unwrap(), 4.5);
        assert_eq!(out[1].get_f64("a").unwrap(), 14.5);
    }

    #[test]
    fn init_args_come_from_the_groups_first_document() {
        let spec = bson!({"$accumulator": {
            "init": "function(k) { return [k]; }",
            "initArgs": ["$k"],
            "accumulate": "function(st, v) { st.push(v); return st; }",
            "accumulateArgs": ["$v"],
            "merge": "function(a, b) { return a.concat(b); }",
            "lang": "js",
        }});
        let out = by_id(run(bson!([{"$group": {"_id": "$k", "a": spec}}]), docs(6)));
        assert_eq!(out[0], doc! {"_id": 0, "a": [0, 0, 3]});
        assert_eq!(out[2], doc! {"_id": 2, "a": [2, 2, 5]});
    }

    #[test]
    fn bad_specs_get_mongods_codes() {
        let base = doc! {"init": "function() { return 0; }", "accumulate": "function(s) { return s; }",
        "accumulateArgs": [], "merge": "function(a, b) { return a; }", "lang": "js"};
        let with = |f: &dyn Fn(&mut Document)| {
            let mut d = base.clone();
            f(&mut d);
            fails(
                bson!([{"$group": {"_id": null, "a": {"$accumulator": d}}}]),
                docs(1),
            )
        };
        assert_eq!(
            fails(
                bson!([{"$group": {"_id": null, "a": {"$accumulator": 1}}}]),
                docs(1)
            ),
            4544703
        );
        assert_eq!(
            with(&|d| {
                d.insert("init", 1);
            }),
            4544702
        );
        assert_eq!(
            with(&|d| {
                d.insert("lang", 1);
            }),
            4544704
        );
        assert_eq!(
            with(&|d| {
                d.insert("lang", "python");
            }),
            4544705
        );
        assert_eq!(
            with(&|d| {
                d.insert("extra", 1);
            }),
            4544706
        );
        assert_eq!(
            with(&|d| {
                d.remove("init");
            }),
            4544707
        );
        assert_eq!(
            with(&|d| {
                d.remove("accumulate");
            }),
            4544708
        );
        assert_eq!(
            with(&|d| {
                d.remove("merge");
            }),
            4544709
        );
        assert_eq!(
            with(&|d| {
                d.remove("accumulateArgs");
            }),
            4544710
        );
        assert_eq!(
            with(&|d| {
                d.insert("initArgs", 5);
            }),
            4544711
        );
        assert_eq!(
            with(&|d| {
                d.insert("accumulateArgs", "$_id");
            }),
            4544712
        );
        assert_eq!(
            with(&|d| {
                d.insert("accumulate", "function() { throw new Error('x'); }");
            }),
            139
        );
        // Not a window function, as in mongod: the same error as an unknown one.
        let window =
            |f: Bson| bson!([{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"a": f}}}]);
        assert_eq!(
            fails(window(bson!({"$accumulator": base.clone()})), docs(1)),
            fails(window(bson!({"$nope": 1})), docs(1))
        );
    }

    #[test]
    fn state_counts_against_the_memory_bound() {
        let grow = || {
            stages_of(bson!([{"$group": {"_id": null, "a": {"$accumulator": {
                "init": "function() { return []; }",
                "accumulate": "function(st, s) { st.push(s); return st; }",
                "accumulateArgs": ["$s"],
                "merge": "function(a, b) { return a.concat(b); }",
                "lang": "js",
            }}}}]))
        };
        let input: Vec<Document> = (0..3000)
            .map(|i| doc! {"_id": i, "s": "x".repeat(100)})
            .collect();
        let mut c = ctx();
        c.memory_max_bytes = 100_000;
        let p = Pipeline::parse(&grow(), &c).expect("parses");
        let e = p
            .run_vec(input.clone(), &MapEnv::default())
            .expect_err("over the bound");
        assert_eq!(code_of(&e), 292);
        c.memory_max_bytes = 10_000_000;
        let p = Pipeline::parse(&grow(), &c).expect("parses");
        let out = p
            .run_vec(input, &MapEnv::default())
            .expect("under the bound");
        assert_eq!(out[0].get_array("a").unwrap().len(), 3000);
    }

    #[test]
    fn reduce_skips_single_values_and_re_reduces_long_groups() {
        // The reduce marks what it produced: a lone value passes through unmarked.
        let reduce = "function(k, vs) { var n = 0; for (var i = 0; i < vs.length; i++) n += vs[i].n; \
                      return {n: n, reduced: true}; }";
        let pipeline = |scope: Bson| {
            bson!([
                {"$project": {"_id": 0, "e": {"k": "$k", "v": {"$literal": {"n": 1}}}}},
                {"$group": {"_id": "$e.k", "value": {"$_internalJsReduce": {
                    "data": "$e", "eval": reduce, "scope": scope}}}},
            ])
        };
        let mut input: Vec<Document> = (0..4500).map(|i| doc! {"k": i % 2}).collect();
        input.push(doc! {"k": "lone"});
        let out = by_id(run(pipeline(Bson::Null), input));
        assert_eq!(
            out[0],
            doc! {"_id": 0, "value": {"n": 2250, "reduced": true}}
        );
        assert_eq!(
            out[1],
            doc! {"_id": 1, "value": {"n": 2250, "reduced": true}}
        );
        assert_eq!(out[2], doc! {"_id": "lone", "value": {"n": 1}});
        // Scope variables are visible to reduce.
        let scoped = bson!([
            {"$project": {"_id": 0, "e": {"k": "$k", "v": "$k"}}},
            {"$group": {"_id": "$e.k", "value": {"$_internalJsReduce": {
                "data": "$e", "eval": "function(k, vs) { return vs.length * factor; }",
                "scope": {"factor": 10}}}}},
        ]);
        let out = by_id(run(scoped, (0..4).map(|i| doc! {"k": i % 2}).collect()));
        assert_eq!(out[0].get("value"), Some(&Bson::Int32(20)));
        assert_eq!(
            fails(
                bson!([{"$group": {"_id": null, "v": {"$_internalJsReduce": {"data": {"k": 1}, "eval": reduce}}}}]),
                docs(1)
            ),
            31251
        );
    }
}
