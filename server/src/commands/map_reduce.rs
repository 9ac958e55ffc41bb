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
use super::args;
use super::argspec;
use super::{Reply, Request, off_thread};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::state::ServerState;
use bson::{Bson, Document, RawArrayBuf, RawDocumentBuf, cstr, doc};
use std::sync::Arc;

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

fn bad_value(message: impl Into<String>) -> CommandError {
    err(ErrorCode::BadValue, message)
}

/// A code field the table has already typed (a string or JavaScript code), or null.
fn code(body: &Document, field: &str) -> Option<String> {
    match body.get(field) {
        Some(Bson::String(s)) | Some(Bson::JavaScriptCode(s)) => Some(s.clone()),
        _ => None,
    }
}

fn opt_doc(body: &Document, field: &str) -> Option<Document> {
    body.get_document(field).ok().cloned()
}

/// `out`'s options document, as mongod's `MapReduceOutOptions` reads it: `inline` alone
/// (InvalidOptions otherwise), else the first of `replace`, `merge`, `reduce` naming a
/// collection, with optional `db`, `sharded: true` and `nonAtomic: true`; any other field, or
/// two modes, leaves a field over and is BadValue.
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
        _ => return Err(bad_value("'out' must be either a string or an object")),
    };
    if let Some(inline) = d.get("inline") {
        if d.len() != 1 {
            return Err(err(
                ErrorCode::InvalidOptions,
                "'inline' must be specified alone",
            ));
        }
        if crate::query::types::as_f64(inline) != Some(1.0) {
            return Err(bad_value("'inline' takes only numeric '1'"));
        }
        return Ok(Out::Inline);
    }
    let mut fields_allowed = 4;
    for flag in ["sharded", "nonAtomic"] {
        match d.get(flag) {
            None => fields_allowed -= 1,
            Some(Bson::Boolean(true)) => {}
            Some(Bson::Boolean(false)) => {
                return Err(bad_value(format!("{flag} field value must be true")));
            }
            Some(_) => return Err(bad_value(format!("{flag} field value must be boolean"))),
        }
    }
    let Some((mode, name)) = [
        ("replace", Mode::Replace),
        ("merge", Mode::Merge),
        ("reduce", Mode::Reduce),
    ]
    .into_iter()
    .find_map(|(k, m)| d.get(k).map(|v| (m, (k, v)))) else {
        return Err(bad_value("'out' requires 'replace', 'merge' or 'reduce'"));
    };
    let Bson::String(coll) = name.1 else {
        return Err(bad_value(format!(
            "'{}' supports only string consisting of output collection name",
            name.0
        )));
    };
    let db = match d.get("db") {
        None => {
            fields_allowed -= 1;
            None
        }
        Some(Bson::String(db)) => {
            if matches!(db.as_str(), "admin" | "local" | "config") {
                return Err(err(
                    ErrorCode::CommandNotSupported,
                    "cannot target internal database as output",
                ));
            }
            Some(db.clone())
        }
        Some(_) => return Err(bad_value("db field value must be string")),
    };
    if d.len() != fields_allowed {
        return Err(bad_value(
            "'out' supports only output type with collection name, optional 'sharded' and optional 'db'",
        ));
    }
    Ok(Out::Collection {
        mode,
        coll: coll.clone(),
        db,
    })
}

impl MapReduce {
    fn parse(name: &str, body: &Document) -> CommandResult<MapReduce> {
        let coll = match body.get(name) {
            Some(Bson::String(s)) if !s.is_empty() => s.clone(),
            Some(v) => {
                return Err(err(
                    ErrorCode::InvalidNamespace,
                    format!("collection name has invalid type {}", args::type_name(v)),
                ));
            }
            None => return Err(err(ErrorCode::InvalidNamespace, "no collection name")),
        };
        argspec::check(&argspec::collections::MAP_REDUCE, body)?;
        let required = |field| code(body, field).ok_or_else(|| bad_value("missing code"));
        let (map, reduce) = (required("map")?, required("reduce")?);
        let out = parse_out(body.get("out").unwrap_or(&Bson::Null))?;
        // mongod turns `limit` into a `$limit` stage, which takes only a positive count.
        let limit = match body.get("limit") {
            None | Some(Bson::Null) => None,
            // A `safeInt64` (the table typed it): a double is truncated.
            Some(v) => match crate::query::types::as_f64(v).map(|f| f.trunc() as i64) {
                Some(n) if n > 0 => Some(n),
                _ => {
                    return Err(err(
                        ErrorCode::Location15958,
                        "The limit specified to mapReduce must be positive",
                    ));
                }
            },
        };
        Ok(MapReduce {
            coll,
            map,
            reduce,
            finalize: code(body, "finalize"),
            query: opt_doc(body, "query"),
            sort: opt_doc(body, "sort"),
            limit,
            scope: opt_doc(body, "scope"),
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
    let mr = Arc::new(MapReduce::parse(&req.name, &req.body)?);
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

    fn out_code(d: Document) -> i32 {
        parse_out(&Bson::Document(d)).unwrap_err().code.code()
    }

    #[test]
    fn out_forms() {
        assert_eq!(
            parse_out(&Bson::Document(doc! {"inline": 1})).unwrap(),
            Out::Inline
        );
        assert_eq!(
            parse_out(&Bson::Document(doc! {"inline": 1.0})).unwrap(),
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
            parse_out(&Bson::Document(
                doc! {"reduce": "o", "db": "x", "sharded": true, "nonAtomic": true}
            ))
            .unwrap(),
            Out::Collection {
                mode: Mode::Reduce,
                coll: "o".into(),
                db: Some("x".into())
            }
        );
        // mongod's MapReduceOutOptions: BadValue for every shape error but these two.
        assert_eq!(out_code(doc! {"inline": 1, "db": "x"}), 72);
        assert_eq!(out_code(doc! {"merge": "a", "inline": 1}), 72);
        assert_eq!(out_code(doc! {"merge": "a", "db": "admin"}), 115);
        for bad in [
            doc! {},
            doc! {"inline": 2},
            doc! {"inline": "1"},
            doc! {"merge": "a", "reduce": "b"},
            doc! {"nope": "a"},
            doc! {"merge": "a", "nope": 1},
            doc! {"merge": 1},
            doc! {"replace": "a", "db": 1},
            doc! {"replace": "a", "sharded": false},
            doc! {"replace": "a", "nonAtomic": 1},
        ] {
            assert_eq!(out_code(bad.clone()), 2, "{bad}");
        }
        assert_eq!(parse_out(&Bson::Int32(1)).unwrap_err().code.code(), 2);
    }

    fn parse_code(body: Document) -> Option<i32> {
        MapReduce::parse("mapReduce", &body)
            .err()
            .map(|e| e.code.code())
    }

    /// Each field against the table's types and mongod's custom parsers' codes.
    #[test]
    fn fields_answer_mongods_codes() {
        let base = doc! {"mapReduce": "c", "map": "f", "reduce": "g", "out": {"inline": 1}};
        let with = |k: &str, v: Bson| {
            let mut d = base.clone();
            d.insert(k, v);
            parse_code(d)
        };
        assert_eq!(parse_code(base.clone()), None);
        let js = Bson::JavaScriptCode("function() {}".into());
        for field in ["map", "reduce", "finalize"] {
            assert_eq!(with(field, js.clone()), None, "{field}");
            assert_eq!(with(field, Bson::Int32(5)), Some(2), "{field}");
            assert_eq!(with(field, Bson::Document(doc! {})), Some(2), "{field}");
        }
        assert_eq!(with("finalize", Bson::Null), None);
        assert_eq!(with("map", Bson::Null), Some(2));
        assert_eq!(with("out", Bson::Int32(1)), Some(2));
        assert_eq!(with("scope", Bson::Int32(1)), Some(2));
        assert_eq!(with("scope", Bson::Null), None);
        for field in ["query", "sort", "collation"] {
            assert_eq!(with(field, Bson::Int32(1)), Some(14), "{field}");
        }
        for field in ["verbose", "jsMode", "bypassDocumentValidation"] {
            assert_eq!(with(field, Bson::Int32(1)), Some(14), "{field}");
            assert_eq!(with(field, Bson::Boolean(true)), None, "{field}");
        }
        assert_eq!(with("limit", Bson::String("1".into())), Some(14));
        assert_eq!(with("limit", Bson::Double(2.5)), None);
        assert_eq!(with("limit", Bson::Int32(0)), Some(15958));
        assert_eq!(with("limit", Bson::Int64(-1)), Some(15958));
        assert_eq!(with("bogus", Bson::Int32(1)), Some(40415));
        for field in ["map", "reduce", "out"] {
            let mut d = base.clone();
            d.remove(field);
            assert_eq!(parse_code(d), Some(40414), "{field}");
        }
        assert_eq!(with("mapReduce", Bson::Int32(1)), Some(73));
    }
}
