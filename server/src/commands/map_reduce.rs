//! `mapReduce`, run as the aggregation mongod 4.4+ turns it into: `$match` (query), `$sort`,
//! `$limit`, a `$project` calling `map` with `emit` bound (`$_internalJsEmit`), `$unwind`, a
//! `$group` reducing each key's values (`$_internalJsReduce`), `finalize` in a `$project`, then
//! `$out` (replace) or `$merge` (merge; reduce with a `whenMatched` pipeline that reduces the
//! existing value with the new one). `scope` travels inside the internal operators, so every
//! function sees it. The reply is mongod 7's: `{results: [...]}` inline, or `{result: name}`
//! (`{result: {db, collection}}` when `out.db` is given); 4.4 dropped the counts and timing, so
//! `verbose` is accepted and adds nothing. `collation` applies to the whole aggregate: the
//! query, the grouping of emitted keys and the order of the results.

use super::aggregate::{Ran, Spec, run_spec};
use super::args::{self, check_fields};
use super::{Reply, Request, off_thread};
use crate::error::{CommandResult, ErrorCode, err};
use crate::state::ServerState;
use bson::{Bson, Document, RawArrayBuf, RawDocumentBuf, cstr, doc};
use std::sync::Arc;

const FIELDS: &[&str] = &[
    "map",
    "reduce",
    "out",
    "query",
    "sort",
    "limit",
    "finalize",
    "scope",
    "verbose",
    "jsMode",
    "bypassDocumentValidation",
    "collation",
];

/// Where the results go.
#[derive(Debug, PartialEq)]
enum Out {
    Inline,
    Collection {
        mode: Mode,
        coll: String,
        /// `out.db` when given (it changes the reply's shape).
        db: Option<String>,
    },
}

#[derive(Debug, PartialEq, Clone, Copy)]
enum Mode {
    Replace,
    Merge,
    Reduce,
}

/// A parsed `mapReduce`.
#[derive(Debug)]
struct MapReduce {
    coll: String,
    map: String,
    reduce: String,
    finalize: Option<String>,
    query: Option<Document>,
    sort: Option<Document>,
    limit: Option<i64>,
    scope: Option<Document>,
    out: Out,
}

fn field_error(field: &str, v: &Bson, expected: &str) -> crate::error::CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field 'mapReduce.{field}' is the wrong type '{}', expected types '[{expected}]'",
            args::type_name(v)
        ),
    )
}

fn code(body: &Document, field: &str) -> CommandResult<Option<String>> {
    match body.get(field) {
        None => Ok(None),
        Some(Bson::String(s)) | Some(Bson::JavaScriptCode(s)) => Ok(Some(s.clone())),
        Some(Bson::JavaScriptCodeWithScope(c)) => Ok(Some(c.code.clone())),
        Some(v) => Err(field_error(field, v, "javascript, string")),
    }
}

fn required<T>(v: Option<T>, field: &str) -> CommandResult<T> {
    v.ok_or_else(|| {
        err(
            ErrorCode::Location40414,
            format!("BSON field 'mapReduce.{field}' is missing but a required field"),
        )
    })
}

fn opt_doc(body: &Document, field: &str) -> CommandResult<Option<Document>> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d.clone())),
        Some(v) => Err(field_error(field, v, "object")),
    }
}

fn parse_out(v: &Bson) -> CommandResult<Out> {
    let d = match v {
        Bson::String(s) => {
            return Ok(Out::Collection {
                mode: Mode::Replace,
                coll: s.clone(),
                db: None,
            });
        }
        Bson::Document(d) => d,
        other => return Err(field_error("out", other, "string, object")),
    };
    let mut chosen: Option<(Mode, String)> = None;
    let mut inline = false;
    let mut db = None;
    for (k, v) in d {
        let mode = match k.as_str() {
            "inline" => {
                if super::as_i64(v) != Some(1) {
                    return Err(err(ErrorCode::BadValue, "'inline' takes only 1"));
                }
                inline = true;
                continue;
            }
            "db" => {
                let Bson::String(s) = v else {
                    return Err(field_error("out.db", v, "string"));
                };
                db = Some(s.clone());
                continue;
            }
            // Accepted for old clients; one node has nothing to shard or to make atomic.
            "sharded" | "nonAtomic" => continue,
            "replace" => Mode::Replace,
            "merge" => Mode::Merge,
            "reduce" => Mode::Reduce,
            other => {
                return Err(err(
                    ErrorCode::Location40415,
                    format!("BSON field 'mapReduce.out.{other}' is an unknown field."),
                ));
            }
        };
        let Bson::String(name) = v else {
            return Err(field_error(&format!("out.{k}"), v, "string"));
        };
        if chosen.is_some() || inline {
            return Err(err(
                ErrorCode::BadValue,
                "'out' takes exactly one of 'inline', 'replace', 'merge' or 'reduce'",
            ));
        }
        chosen = Some((mode, name.clone()));
    }
    match (inline, chosen) {
        (true, None) if db.is_none() => Ok(Out::Inline),
        (true, None) => Err(err(
            ErrorCode::BadValue,
            "'db' cannot be used with inline output",
        )),
        (false, Some((mode, coll))) => Ok(Out::Collection { mode, coll, db }),
        _ => Err(err(
            ErrorCode::BadValue,
            "'out' requires one of 'inline', 'replace', 'merge' or 'reduce'",
        )),
    }
}

impl MapReduce {
    fn parse(req: &Request) -> CommandResult<MapReduce> {
        let body = &req.body;
        check_fields(body, "mapReduce", FIELDS)?;
        args::opt_doc(body, "mapReduce", "collation")?;
        let coll = match body.get(&req.name) {
            Some(Bson::String(s)) if !s.is_empty() => s.clone(),
            Some(v) => {
                return Err(err(
                    ErrorCode::InvalidNamespace,
                    format!("collection name has invalid type {}", args::type_name(v)),
                ));
            }
            None => return Err(err(ErrorCode::InvalidNamespace, "no collection name")),
        };
        let map = required(code(body, "map")?, "map")?;
        let reduce = required(code(body, "reduce")?, "reduce")?;
        let out = parse_out(required(body.get("out"), "out")?)?;
        let finalize = match body.get("finalize") {
            Some(Bson::Null) | Some(Bson::Undefined) => None,
            _ => code(body, "finalize")?,
        };
        let limit = match body.get("limit") {
            None | Some(Bson::Null) => None,
            Some(v) => match super::as_i64(v) {
                Some(n) if n < 0 => {
                    return Err(err(ErrorCode::BadValue, "Limit must be non-negative"));
                }
                Some(0) => None,
                Some(n) => Some(n),
                None => return Err(field_error("limit", v, "long, int, decimal, double")),
            },
        };
        for flag in ["verbose", "jsMode", "bypassDocumentValidation"] {
            args::opt_bool(body, "mapReduce", flag)?;
        }
        Ok(MapReduce {
            coll,
            map,
            reduce,
            finalize,
            query: opt_doc(body, "query")?,
            sort: opt_doc(body, "sort")?,
            limit,
            scope: opt_doc(body, "scope")?,
            out,
        })
    }

    /// The pipeline this mapReduce runs.
    fn stages(&self, db: &str) -> Vec<Document> {
        let scope = self.scope.clone().map_or(Bson::Null, Bson::Document);
        let mut stages = Vec::new();
        if let Some(q) = &self.query {
            stages.push(doc! {"$match": q.clone()});
        }
        if let Some(s) = &self.sort {
            stages.push(doc! {"$sort": s.clone()});
        }
        if let Some(n) = self.limit {
            stages.push(doc! {"$limit": n});
        }
        stages.push(
            doc! {"$project": {"_id": false, "emits": {"$_internalJsEmit": {
                "eval": self.map.clone(), "this": "$$ROOT", "scope": scope.clone(),
            }}}},
        );
        stages.push(doc! {"$unwind": "$emits"});
        stages.push(
            doc! {"$group": {"_id": "$emits.k", "value": {"$_internalJsReduce": {
                "data": "$emits", "eval": self.reduce.clone(), "scope": scope.clone(),
            }}}},
        );
        if let Some(f) = &self.finalize {
            stages.push(doc! {"$project": {"value": {"$_internalJsCall": {
                "eval": f.clone(), "args": ["$_id", "$value"], "scope": scope.clone(),
            }}}});
        }
        stages.push(doc! {"$sort": {"_id": 1}});
        if let Out::Collection {
            mode,
            coll,
            db: out_db,
        } = &self.out
        {
            let into =
                doc! {"db": out_db.clone().unwrap_or_else(|| db.to_string()), "coll": coll.clone()};
            stages.push(match mode {
                Mode::Replace => doc! {"$out": into},
                Mode::Merge => doc! {"$merge": {"into": into, "on": "_id",
                "whenMatched": "replace", "whenNotMatched": "insert"}},
                // The existing value and the new one, reduced together (as mongod does).
                Mode::Reduce => doc! {"$merge": {"into": into, "on": "_id",
                "whenMatched": [{"$project": {"value": {"$_internalJsCall": {
                    "eval": self.reduce.clone(),
                    "args": ["$_id", ["$value", "$$new.value"]],
                    "scope": scope,
                }}}}],
                "whenNotMatched": "insert"}},
            });
        }
        stages
    }

    fn reply_target(&self) -> Bson {
        match &self.out {
            Out::Collection {
                coll, db: Some(db), ..
            } => Bson::Document(doc! {"db": db.clone(), "collection": coll.clone()}),
            Out::Collection { coll, .. } => Bson::String(coll.clone()),
            Out::Inline => Bson::Null,
        }
    }
}

pub async fn map_reduce(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    crate::query::js::require_enabled(ErrorCode::Location16395)?;
    let mr = Arc::new(MapReduce::parse(req)?);
    let run = mr.clone();
    let ran = off_thread(state, req, move |s, r| {
        s.catalog.check_not_view(&r.db, &run.coll)?;
        // The collation (or the collection's default) governs the query, the grouping of
        // emitted keys and the final order, as it does in the aggregate mongod runs.
        let coll = s.catalog.collection(&r.db, &run.coll);
        let _collation = args::collation_scope(&r.body, "mapReduce", coll.as_deref())?;
        let spec = Spec {
            coll_name: Some(run.coll.clone()),
            stages: run.stages(&r.db),
            explain: false,
            batch_size: usize::MAX,
            allow_disk_use: true,
            let_vars: None,
        };
        run_spec(s, r, spec)
    })
    .await?;
    match ran {
        Ran::Output(out) => {
            super::output::write_output(state, req, *out).await?;
            Ok(Reply::Doc(doc! {"result": mr.reply_target(), "ok": 1.0}))
        }
        Ran::Reply(reply) => inline_reply(state, reply),
    }
}

/// `{results, ok}` from the aggregate's cursor reply (all of it is in the first batch).
fn inline_reply(state: &ServerState, reply: Reply) -> CommandResult<Reply> {
    let raw = match reply {
        Reply::Raw(r) => r,
        Reply::Cursor(c) => c.to_raw(),
        Reply::Doc(d) => RawDocumentBuf::try_from(&d)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?,
        Reply::Close => return Err(err(ErrorCode::InternalError, "no reply")),
    };
    let bad = |e: bson::error::Error| err(ErrorCode::InternalError, e.to_string());
    let cursor = raw.get_document("cursor").map_err(bad)?;
    let id = cursor.get_i64("id").map_err(bad)?;
    if id != 0 {
        // More than one reply's worth: mongod fails the same way.
        state.cursors.kill(id);
        return Err(err(
            ErrorCode::BSONObjectTooLarge,
            "mapReduce inline results exceed the maximum document size",
        ));
    }
    let mut results = RawArrayBuf::new();
    for d in cursor.get_array("firstBatch").map_err(bad)? {
        results.push(bson::RawBson::from(d.map_err(bad)?));
    }
    let mut out = RawDocumentBuf::new();
    out.append(cstr!("results"), results);
    out.append(cstr!("ok"), 1.0);
    Ok(Reply::Raw(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_forms() {
        assert_eq!(
            parse_out(&Bson::Document(doc! {"inline": 1})).unwrap(),
            Out::Inline
        );
        assert_eq!(
            parse_out(&Bson::String("o".into())).unwrap(),
            Out::Collection {
                mode: Mode::Replace,
                coll: "o".into(),
                db: None
            }
        );
        assert_eq!(
            parse_out(&Bson::Document(doc! {"reduce": "o", "db": "x"})).unwrap(),
            Out::Collection {
                mode: Mode::Reduce,
                coll: "o".into(),
                db: Some("x".into())
            }
        );
        for bad in [
            doc! {},
            doc! {"inline": 2},
            doc! {"merge": "a", "reduce": "b"},
            doc! {"inline": 1, "db": "x"},
        ] {
            assert_eq!(
                parse_out(&Bson::Document(bad.clone())).unwrap_err().code,
                ErrorCode::BadValue,
                "{bad}"
            );
        }
        assert_eq!(
            parse_out(&Bson::Document(doc! {"nope": "a"}))
                .unwrap_err()
                .code,
            ErrorCode::Location40415
        );
        assert_eq!(
            parse_out(&Bson::Int32(1)).unwrap_err().code,
            ErrorCode::TypeMismatch
        );
    }
}
