//! Catalog changes in the oplog and in change streams: the write history's command ops
//! (`record::OP_COMMAND`, whose details name the collection as it was: storage's `ddl_note`)
//! become mongod 7's `op: "c"` oplog entries (create, drop, renameCollection, dropDatabase,
//! createIndexes, dropIndexes, collMod) and its drop, rename, dropDatabase and invalidate
//! events; a stream with `showExpandedEvents` also gets create, createIndexes, dropIndexes and
//! modify events. A collection stream is invalidated by a
//! drop or rename of its collection (also through dropDatabase), a database stream by
//! dropDatabase; a cluster stream never is. After its invalidate event the stream ends.

use super::changes::{in_scope, invalidate_token, token, ts_of};
use crate::streams::{Kind, Scope, StreamCursor};
use bson::{Bson, Document, doc};
use storage::{HistoryBatch, HistoryOp};

/// Where a command op sits in the history.
pub struct Ddl<'a> {
    pub b: &'a HistoryBatch,
    pub i: usize,
    pub ts: u64,
    pub term: i64,
}

/// The oplog entries or events `op` gives this cursor, each with whether the user's `$match`
/// applies to it (an invalidate always passes); sets `c.invalidated` when the stream ends here.
pub fn entries(c: &mut StreamCursor, at: &Ddl<'_>, op: &HistoryOp) -> Vec<(Document, bool)> {
    let note = op.details.clone().unwrap_or_default();
    let what = note.get_str("op").unwrap_or("").to_string();
    let db = note.get_str("db").unwrap_or("").to_string();
    let coll = note.get_str("coll").unwrap_or("").to_string();
    let uuid = note.get("uuid").cloned();
    let id = note.get_i64("id").unwrap_or(0) as u64;
    // Later ops of the same collection id go by its new name (or by none once dropped).
    match what.as_str() {
        "rename" => {
            let to_db = note.get_str("toDb").unwrap_or("").to_string();
            let to = note.get_str("to").unwrap_or("").to_string();
            if let Some(Bson::Binary(b)) = &uuid
                && let Ok(bytes) = <[u8; 16]>::try_from(b.bytes.as_slice())
            {
                c.names
                    .insert(id, Some((to_db, to, bson::Uuid::from_bytes(bytes))));
            }
        }
        "drop" | "dropTarget" => {
            c.names.insert(id, None);
        }
        _ => {}
    }
    if db == super::changes::OPLOG_DB {
        return Vec::new();
    }
    match &c.kind {
        Kind::Oplog { .. } => oplog_entry(&what, &db, &coll, uuid, &note, at)
            .map(|e| vec![(e, true)])
            .unwrap_or_default(),
        Kind::Change {
            scope, expanded, ..
        } => {
            let scope = scope.clone();
            let expanded = *expanded;
            let mut out = events(c, &scope, &what, &db, &coll, &note, at);
            if expanded {
                for (e, _) in &mut out {
                    expand(e, &what, &note);
                }
                if in_scope(&scope, &db, &coll)
                    && let Some(e) = expanded_event(&what, &db, &coll, &note, at)
                {
                    out.push((e, true));
                }
            }
            out
        }
    }
}

/// Names the collections a drop or rename in `batches` is about, as they were, for the ops
/// before it: the catalog knows a dropped collection no more, and a renamed one by its new name.
pub fn seed_names(c: &mut StreamCursor, batches: &[HistoryBatch]) {
    for op in batches.iter().flat_map(|b| &b.ops) {
        if op.code != storage::record::OP_COMMAND {
            continue;
        }
        let Some(note) = &op.details else { continue };
        if !matches!(note.get_str("op"), Ok("drop" | "dropTarget" | "rename")) {
            continue;
        }
        let id = note.get_i64("id").unwrap_or(0) as u64;
        let (Ok(db), Ok(coll), Some(Bson::Binary(b))) =
            (note.get_str("db"), note.get_str("coll"), note.get("uuid"))
        else {
            continue;
        };
        let Ok(bytes) = <[u8; 16]>::try_from(b.bytes.as_slice()) else {
            continue;
        };
        c.names.entry(id).or_insert_with(|| {
            Some((
                db.to_string(),
                coll.to_string(),
                bson::Uuid::from_bytes(bytes),
            ))
        });
    }
}

/// mongod 7's `op: "c"` entry for a catalog change (None: it has none of its own).
fn oplog_entry(
    what: &str,
    db: &str,
    coll: &str,
    uuid: Option<Bson>,
    note: &Document,
    at: &Ddl<'_>,
) -> Option<Document> {
    let mut o2 = None;
    let o = match what {
        "create" => {
            let mut o = doc! { "create": coll };
            o.extend(create_description(note));
            o
        }
        "createIndexes" => {
            let mut o = doc! { "createIndexes": coll };
            o.extend(index_of(note, "spec"));
            o
        }
        "dropIndexes" => {
            let spec = index_of(note, "spec");
            let name = spec.get_str("name").unwrap_or("").to_string();
            o2 = Some(spec);
            doc! { "dropIndexes": coll, "index": name }
        }
        "collMod" => {
            let (change, before) = modification(note);
            let mut o = doc! { "collMod": coll };
            o.extend(change);
            let mut old = Document::new();
            if let Ok(c) = before.get_document("collectionOptions") {
                old.insert("collectionOptions_old", c.clone());
            }
            if let Ok(i) = before.get_document("indexOptions") {
                old.insert("indexOptions_old", i.clone());
            }
            o2 = Some(old);
            o
        }
        "drop" => doc! { "drop": coll },
        "rename" => {
            let mut o = doc! {
                "renameCollection": format!("{db}.{coll}"),
                "to": format!("{}.{}", note.get_str("toDb").unwrap_or(""), note.get_str("to").unwrap_or("")),
                "stayTemp": false,
            };
            if let Some(t) = note.get("dropTarget") {
                o.insert("dropTarget", t.clone());
            }
            o
        }
        "dropDatabase" => doc! { "dropDatabase": 1 },
        _ => return None,
    };
    let mut e = doc! { "op": "c", "ns": format!("{db}.$cmd") };
    if let Some(u) = uuid.filter(|_| what != "dropDatabase") {
        e.insert("ui", u);
    }
    e.insert("o", o);
    if what == "drop" {
        o2 = Some(doc! { "numRecords": note.get_i64("count").unwrap_or(0) });
    }
    if let Some(o2) = o2 {
        e.insert("o2", o2);
    }
    e.insert("ts", ts_of(at.ts));
    e.insert("t", at.term);
    e.insert("v", 2_i64);
    e.insert("wall", bson::DateTime::from_millis(at.b.wall_ms));
    Some(e)
}

fn event_head(kind: &str, id: Document, at: &Ddl<'_>) -> Document {
    doc! {
        "_id": id,
        "operationType": kind,
        "clusterTime": ts_of(at.ts),
        "wallTime": bson::DateTime::from_millis(at.b.wall_ms),
    }
}

fn events(
    c: &mut StreamCursor,
    scope: &Scope,
    what: &str,
    db: &str,
    coll: &str,
    note: &Document,
    at: &Ddl<'_>,
) -> Vec<(Document, bool)> {
    let skip = at.i as u32 + 1;
    let id = token(at.ts, at.b.pos, skip);
    let mut out = Vec::new();
    let watched = matches!(scope, Scope::Collection { db: d, coll: n } if d == db && n == coll);
    let invalidates = match what {
        "drop" if in_scope(scope, db, coll) => {
            let mut e = event_head("drop", id, at);
            e.insert("ns", doc! { "db": db, "coll": coll });
            out.push((e, true));
            watched
        }
        "rename" if in_scope(scope, db, coll) => {
            let mut e = event_head("rename", id, at);
            e.insert("ns", doc! { "db": db, "coll": coll });
            e.insert(
                "to",
                doc! { "db": note.get_str("toDb").unwrap_or(""), "coll": note.get_str("to").unwrap_or("") },
            );
            out.push((e, true));
            watched
        }
        "dropDatabase" => match scope {
            Scope::Database { db: d } if d == db => {
                let mut e = event_head("dropDatabase", id, at);
                e.insert("ns", doc! { "db": db });
                out.push((e, true));
                true
            }
            Scope::Cluster if in_scope(scope, db, "") => {
                let mut e = event_head("dropDatabase", id, at);
                e.insert("ns", doc! { "db": db });
                out.push((e, true));
                false
            }
            _ => false,
        },
        _ => false,
    };
    if invalidates {
        let e = event_head("invalidate", invalidate_token(at.ts, at.b.pos, skip), at);
        out.push((e, false));
        c.invalidated = true;
    }
    out
}

/// With `showExpandedEvents`, the drop and rename events also carry the collection's uuid, and
/// a rename its `operationDescription`.
fn expand(e: &mut Document, what: &str, note: &Document) {
    if !matches!(what, "drop" | "rename") || matches!(e.get_str("operationType"), Ok("invalidate"))
    {
        return;
    }
    if let Some(u) = note.get("uuid") {
        e.insert("collectionUUID", u.clone());
    }
    if what == "rename" {
        let mut desc = doc! {
            "to": { "db": note.get_str("toDb").unwrap_or(""), "coll": note.get_str("to").unwrap_or("") },
        };
        if let Some(t) = note.get("dropTarget") {
            desc.insert("dropTarget", t.clone());
        }
        e.insert("operationDescription", desc);
    }
}

/// The events only a stream with `showExpandedEvents` sees: create, createIndexes,
/// dropIndexes and modify (collMod), each with mongod 7's `operationDescription`.
fn expanded_event(
    what: &str,
    db: &str,
    coll: &str,
    note: &Document,
    at: &Ddl<'_>,
) -> Option<Document> {
    let (kind, desc, before) = match what {
        "create" => ("create", create_description(note), None),
        "createIndexes" | "dropIndexes" => {
            let desc = doc! { "indexes": [index_of(note, "spec")] };
            (what, desc, None)
        }
        "collMod" => {
            let (change, before) = modification(note);
            ("modify", change, Some(before))
        }
        _ => return None,
    };
    let id = token(at.ts, at.b.pos, at.i as u32 + 1);
    let mut e = event_head(kind, id, at);
    e.insert("ns", doc! { "db": db, "coll": coll });
    if let Some(u) = note.get("uuid") {
        e.insert("collectionUUID", u.clone());
    }
    e.insert("operationDescription", desc);
    if let Some(b) = before {
        e.insert("stateBeforeChange", b);
    }
    Some(e)
}

/// A create's options as its oplog entry and event describe them: the options given, then the
/// `_id` index (none for a clustered collection, whose `_id` order is the collection itself).
fn create_description(note: &Document) -> Document {
    let mut d = note.get_document("options").cloned().unwrap_or_default();
    if !d.contains_key("clusteredIndex") {
        d.insert(
            "idIndex",
            doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
        );
    }
    d
}

/// The index spec a note carries, in listIndexes form.
fn index_of(note: &Document, field: &str) -> Document {
    note.get_document(field)
        .map(index_options)
        .unwrap_or_default()
}

/// What a collMod changed and the state before it: for an index, `{index: {name, <changed
/// options>}}` and `{indexOptions: <their old values>}`; for the collection's options, the
/// options that changed and `{collectionOptions: <the old options and uuid>}`.
fn modification(note: &Document) -> (Document, Document) {
    let mut before_options = doc! {};
    if let Some(u) = note.get("uuid") {
        before_options.insert("uuid", u.clone());
    }
    if let (Ok(new), Ok(old)) = (note.get_document("index"), note.get_document("oldIndex")) {
        let (new, old) = (index_options(new), index_options(old));
        let mut change = doc! { "name": new.get_str("name").unwrap_or("") };
        let mut was = Document::new();
        for k in ["expireAfterSeconds", "hidden", "prepareUnique", "unique"] {
            let (n, o) = (new.get(k), old.get(k));
            if n == o {
                continue;
            }
            let falsy = |k: &str| {
                if k == "expireAfterSeconds" {
                    Bson::Null
                } else {
                    Bson::Boolean(false)
                }
            };
            change.insert(k, n.cloned().unwrap_or_else(|| falsy(k)));
            was.insert(k, o.cloned().unwrap_or_else(|| falsy(k)));
        }
        let before = doc! { "collectionOptions": before_options, "indexOptions": was };
        return (doc! { "index": change }, before);
    }
    let new = note.get_document("options").cloned().unwrap_or_default();
    let old = note.get_document("oldOptions").cloned().unwrap_or_default();
    let mut change = Document::new();
    for (k, v) in &new {
        if old.get(k) != Some(v) {
            change.insert(k, v.clone());
        }
    }
    before_options.extend(old);
    (change, doc! { "collectionOptions": before_options })
}

/// A catalog spec in listIndexes form (`{v, key, name, ...}`).
fn index_options(d: &Document) -> Document {
    match storage::IndexSpec::from_document(d) {
        Ok(spec) => super::indexes::spec_document(&spec),
        Err(_) => d.clone(),
    }
}
