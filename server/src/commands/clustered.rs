//! Clustered collections: `create` with `clusteredIndex: {key: {_id: 1}, unique: true, name?,
//! v?}` (and `expireAfterSeconds`), checked with mongod 7.0's codes; the option's stored form
//! (`{v: 2, key, name, unique}`, name `_id_` by default), how listCollections and listIndexes
//! show it, the collection-level TTL (`expireAfterSeconds`, applied to `_id` dates by
//! `crate::ttl`) and its `collMod`.
//!
//! The order itself is not here: cairn keeps every record tree keyed by RecordId and reads a
//! clustered collection through its `_id` index (`planner` turns `_id` plans into
//! `Plan::Clustered`, `exec::scan` reads a collection scan in `_id` order), so the `_id` index
//! stays a real index under the clustered name (docs/ARCHITECTURE.md, "Clustered collections").

use super::argspec::{self, CommandSpec, Ty, opt, req};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document, doc};
use storage::{Collection, ID_INDEX_NAME};

/// `clusteredIndex` as mongod's IDL (`ClusteredIndexSpec`) has it.
const SPEC: CommandSpec = CommandSpec {
    name: "clusteredIndex",
    strict: true,
    target: None,
    fields: &[
        req("key", Ty::Object),
        req("unique", Ty::SafeBool),
        opt("name", Ty::String),
        opt("v", Ty::SafeInt64),
    ],
};

/// The option's name in a collection's options (and in `create`).
pub const OPTION: &str = "clusteredIndex";
/// The collection-level TTL option.
pub const EXPIRE: &str = "expireAfterSeconds";

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        v => crate::query::types::as_f64(v).is_some_and(|f| f != 0.0),
    }
}

/// The stored spec of a clustered collection's options (None: not clustered, or the legacy
/// `clusteredIndex: true` of time-series buckets).
pub fn spec_of(options: &Document) -> Option<&Document> {
    options.get_document(OPTION).ok()
}

/// The clustered index's name when `coll` is clustered.
pub fn index_name(coll: &Collection) -> Option<String> {
    coll.is_clustered().then(|| {
        spec_of(&coll.options())
            .and_then(|s| s.get_str("name").ok())
            .unwrap_or(ID_INDEX_NAME)
            .to_string()
    })
}

/// The TTL of a clustered collection, in seconds.
pub fn expire_after_seconds(options: &Document) -> Option<i64> {
    spec_of(options)?;
    options.get(EXPIRE).and_then(crate::query::types::as_i64)
}

/// `expireAfterSeconds` as `create` and `collMod` take it: a number from 0 up.
fn parse_expire(v: &Bson) -> CommandResult<i64> {
    match crate::query::types::as_i64(v) {
        Some(n) if n >= 0 => Ok(n),
        Some(_) => Err(err(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option cannot be less than 0",
        )),
        None => Err(err(
            ErrorCode::InvalidOptions,
            format!("'expireAfterSeconds' must be a number, not {v}"),
        )),
    }
}

/// Check the clustered options of a `create` body and put their stored form into `options`.
/// Runs before the capped checks: mongod refuses `size` and `max` on a clustered collection
/// with codes of its own. `test_commands`: whether `enableTestCommands` is on (mongod allows
/// a capped clustered collection only then).
pub fn create_options(
    body: &Document,
    options: &mut Document,
    test_commands: bool,
) -> CommandResult<()> {
    let expire = body.get(EXPIRE).filter(|v| !matches!(v, Bson::Null));
    let spec = match body.get(OPTION) {
        None | Some(Bson::Null) | Some(Bson::Boolean(false)) => None,
        Some(Bson::Boolean(true)) => {
            return Err(err(
                ErrorCode::Location5979703,
                "The 'clusteredIndex' legacy format {clusteredIndex: <bool>} is only supported for specific internal collections",
            ));
        }
        Some(Bson::Document(d)) => Some(d),
        Some(_) => {
            return Err(err(
                ErrorCode::Location5979702,
                "'clusteredIndex' has to be a boolean or object.",
            ));
        }
    };
    let Some(spec) = spec else {
        if expire.is_some() {
            return Err(err(
                ErrorCode::InvalidOptions,
                "'expireAfterSeconds' requires clustering to be enabled",
            ));
        }
        return Ok(());
    };
    let stored = check_spec(spec)?;
    check_companions(body, test_commands)?;
    options.insert(OPTION, stored);
    if let Some(v) = expire {
        options.insert(EXPIRE, parse_expire(v)?);
    }
    Ok(())
}

/// The spec's own checks; its stored form with mongod's defaults filled in.
fn check_spec(spec: &Document) -> CommandResult<Document> {
    argspec::check_entry(&SPEC, spec)?;
    if !spec.get("unique").is_some_and(truthy) {
        return Err(err(
            ErrorCode::Location5979700,
            "The clusteredIndex option requires unique: true to be specified",
        ));
    }
    let key = spec.get_document("key").cloned().unwrap_or_default();
    let on_id = key.len() == 1
        && key
            .get("_id")
            .and_then(crate::query::types::as_f64)
            .is_some_and(|f| f == 1.0);
    if !on_id {
        return Err(err(
            ErrorCode::InvalidIndexSpecificationOption,
            format!("The clusteredIndex option is only supported for key: {{_id: 1}}, not {key}"),
        ));
    }
    if let Some(v) = spec.get("v").and_then(crate::query::types::as_i64)
        && v != 2
    {
        return Err(err(
            ErrorCode::Location5979704,
            format!("Invalid clusteredIndex version {v}: only version 2 is supported"),
        ));
    }
    let name = spec.get_str("name").unwrap_or(ID_INDEX_NAME);
    Ok(doc! { "v": 2, "key": { "_id": 1 }, "name": name, "unique": true })
}

/// `create` options mongod refuses next to `clusteredIndex`, in mongod's order of checks.
fn check_companions(body: &Document, test_commands: bool) -> CommandResult<()> {
    let given = |k: &str| body.get(k).is_some_and(|v| !matches!(v, Bson::Null));
    if given("viewOn") || given("pipeline") {
        return Err(err(
            ErrorCode::Location6026500,
            "The 'clusteredIndex' option is not supported with views",
        ));
    }
    if body.get("autoIndexId").is_some_and(|v| !truthy(v)) {
        return Err(err(
            ErrorCode::Location6026501,
            "The 'clusteredIndex' option does not support {autoIndexId: false}",
        ));
    }
    if given("size") {
        return Err(err(
            ErrorCode::Location6049200,
            "'size' field for capped collections is not allowed on clustered collections. Did you mean 'capped: true' with 'expireAfterSeconds'?",
        ));
    }
    if given("max") {
        return Err(err(
            ErrorCode::Location6049204,
            "'max' field for capped collections is not allowed on clustered collections. Did you mean 'capped: true' with 'expireAfterSeconds'?",
        ));
    }
    if body.get("capped").is_some_and(truthy) {
        if !test_commands {
            return Err(err(
                ErrorCode::Location6127800,
                "Clustered capped collection only available with 'enableTestCommands' server parameter",
            ));
        }
        if !given(EXPIRE) {
            return Err(err(
                ErrorCode::Location6049201,
                "A capped clustered collection requires the 'expireAfterSeconds' field",
            ));
        }
        return Err(err(
            ErrorCode::CommandNotSupported,
            "create: capped clustered collections are not supported by cairn yet",
        ));
    }
    Ok(())
}

/// The clustered index as listIndexes shows it, first: the stored spec, the collection's
/// collation and TTL, and `clustered: true`.
pub fn list_entry(options: &Document) -> Option<Document> {
    let mut d = spec_of(options)?.clone();
    if let Ok(c) = options.get_document("collation") {
        d.insert("collation", c.clone());
    }
    if let Some(e) = expire_after_seconds(options) {
        d.insert(EXPIRE, e);
    }
    d.insert("clustered", true);
    Some(d)
}

/// `collMod`'s `expireAfterSeconds` on a clustered collection: a number from 0 up, or `"off"`
/// to end the TTL. Whether the body had it (and `options` changed).
pub fn coll_mod(body: &Document, options: &mut Document) -> CommandResult<bool> {
    let Some(v) = body.get(EXPIRE) else {
        return Ok(false);
    };
    if spec_of(options).is_none() {
        return Err(err(
            ErrorCode::InvalidOptions,
            "collMod: 'expireAfterSeconds' is only supported on clustered and time-series collections",
        ));
    }
    match v {
        Bson::String(s) if s == "off" => {
            options.remove(EXPIRE);
        }
        Bson::String(s) => {
            return Err(err(
                ErrorCode::InvalidOptions,
                format!(
                    "Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: '{s}'. Accepted value is 'off'"
                ),
            ));
        }
        v => {
            options.insert(EXPIRE, parse_expire(v)?);
        }
    }
    Ok(true)
}

/// createIndexes' view of a clustered collection: a spec on the cluster key `{_id: 1}` (with
/// or without `clustered: true`) names the clustered index that exists, so it is left out
/// (`false`); `clustered` on any other key, or on a collection that is not clustered, is
/// 6243700. Other specs go on to `index_spec::parse_spec` (`true`).
pub fn keep_index_spec(coll: Option<&Collection>, spec: &Document) -> CommandResult<bool> {
    let clustered_coll = coll.is_some_and(Collection::is_clustered);
    let on_key = spec.get_document("key").is_ok_and(|k| {
        k.len() == 1 && k.get("_id").and_then(crate::query::types::as_f64) == Some(1.0)
    });
    let asks_clustered = spec.get("clustered").is_some_and(truthy);
    if asks_clustered && !(clustered_coll && on_key) {
        return Err(err(
            ErrorCode::Location6243700,
            format!(
                "Cannot create index with option 'clustered' for a key other than the collection's cluster key: {spec}"
            ),
        ));
    }
    Ok(!(clustered_coll && on_key))
}

/// dropIndexes of the clustered index (by its name, `_id_`, or its key) is refused.
pub fn check_drop(coll: &Collection, index: &str) -> CommandResult<()> {
    match index_name(coll) {
        Some(name) if index == name || index == ID_INDEX_NAME => Err(err(
            ErrorCode::Location5979800,
            format!("It is not possible to drop the clustered index '{name}'"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: Document) -> Option<i32> {
        let mut options = Document::new();
        create_options(&body, &mut options, false)
            .err()
            .map(|e| e.code.code())
    }

    #[test]
    fn create_checks_take_mongods_codes() {
        let ok = doc! { "key": { "_id": 1 }, "unique": true };
        assert_eq!(
            code(doc! { "create": "c", "clusteredIndex": ok.clone() }),
            None
        );
        let cases = [
            (doc! { "clusteredIndex": { "key": { "_id": 1 } } }, 40414),
            (
                doc! { "clusteredIndex": { "key": { "_id": 1 }, "unique": false } },
                5979700,
            ),
            (
                doc! { "clusteredIndex": { "key": { "a": 1 }, "unique": true } },
                197,
            ),
            (
                doc! { "clusteredIndex": { "key": { "_id": -1 }, "unique": true } },
                197,
            ),
            (
                doc! { "clusteredIndex": { "key": { "_id": 1, "b": 1 }, "unique": true } },
                197,
            ),
            (
                doc! { "clusteredIndex": { "key": { "_id": 1 }, "unique": true, "x": 1 } },
                40415,
            ),
            (
                doc! { "clusteredIndex": { "key": { "_id": 1 }, "unique": true, "v": 1 } },
                5979704,
            ),
            (doc! { "clusteredIndex": true }, 5979703),
            (doc! { "clusteredIndex": "yes" }, 5979702),
            (
                doc! { "clusteredIndex": false, "expireAfterSeconds": 5 },
                72,
            ),
            (
                doc! { "clusteredIndex": ok.clone(), "expireAfterSeconds": -10 },
                72,
            ),
            (
                doc! { "clusteredIndex": ok.clone(), "viewOn": "src" },
                6026500,
            ),
            (
                doc! { "clusteredIndex": ok.clone(), "autoIndexId": false },
                6026501,
            ),
            (doc! { "clusteredIndex": ok.clone(), "size": 10 }, 6049200),
            (doc! { "clusteredIndex": ok.clone(), "max": 10 }, 6049204),
            (
                doc! { "clusteredIndex": ok.clone(), "capped": true },
                6127800,
            ),
        ];
        for (options, want) in cases {
            let mut body = doc! { "create": "c" };
            body.extend(options.clone());
            assert_eq!(code(body), Some(want), "{options}");
        }
    }

    #[test]
    fn create_indexes_on_the_cluster_key_are_no_ops() {
        let dir = tempfile::tempdir().unwrap();
        let engine = storage::Engine::open(dir.path(), storage::EngineOptions::default()).unwrap();
        let spec = doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_", "unique": true };
        let c = engine
            .create_collection("t", "c", doc! { "clusteredIndex": spec })
            .unwrap();
        let p = engine.create_collection("t", "p", Document::new()).unwrap();
        let id = doc! { "key": { "_id": 1 }, "name": "x" };
        let id_clustered = doc! { "key": { "_id": 1 }, "clustered": true, "unique": true };
        let other = doc! { "key": { "a": 1 }, "clustered": true, "unique": true };
        assert!(!keep_index_spec(Some(&c), &id).unwrap());
        assert!(!keep_index_spec(Some(&c), &id_clustered).unwrap());
        assert!(keep_index_spec(Some(&c), &doc! { "key": { "a": 1 } }).unwrap());
        assert!(keep_index_spec(Some(&p), &id).unwrap());
        for (coll, spec) in [
            (Some(&c), &other),
            (Some(&p), &id_clustered),
            (None, &id_clustered),
        ] {
            let e = keep_index_spec(coll.map(|c| c.as_ref()), spec).unwrap_err();
            assert_eq!(e.code.code(), 6243700);
        }
    }

    #[test]
    fn stored_form_fills_mongods_defaults() {
        let mut options = Document::new();
        let body = doc! {
            "create": "c",
            "clusteredIndex": { "key": { "_id": 1 }, "unique": true },
            "expireAfterSeconds": 5,
        };
        create_options(&body, &mut options, false).unwrap();
        assert_eq!(
            options,
            doc! {
                "clusteredIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_", "unique": true },
                "expireAfterSeconds": 5_i64,
            }
        );
        assert_eq!(
            list_entry(&options),
            Some(doc! {
                "v": 2, "key": { "_id": 1 }, "name": "_id_", "unique": true,
                "expireAfterSeconds": 5_i64, "clustered": true,
            })
        );
        assert!(coll_mod(&doc! { "expireAfterSeconds": "off" }, &mut options).unwrap());
        assert_eq!(expire_after_seconds(&options), None);
        let e = coll_mod(&doc! { "expireAfterSeconds": "on" }, &mut options).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidOptions);
    }
}
