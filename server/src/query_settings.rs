//! Query settings (mongod 8.0): per query shape (`crate::query_shape`), the indexes the planner
//! may use (`indexHints`), a `queryFramework` (kept and shown, nothing to choose in cairn) and
//! `reject: true`, which fails matching `find`/`aggregate` commands with
//! QueryRejectedBySettings (411). Set by `setQuerySettings`, removed by `removeQuerySettings`,
//! listed by `$querySettings` (`commands::query_settings`).
//!
//! Kept in memory by `queryShapeHash` and persisted as mongod persists its `querySettings`
//! cluster parameter: one document `{_id: "querySettings", settingsArray: [...]}` in
//! `config.clusterParameters`, rewritten whole on every change and read back at start-up.
//! Bounded by `limits::QUERY_SETTINGS_MAX` entries.
//!
//! The hot path (`for_query`) is one relaxed atomic load while no setting exists; with
//! settings, the query's shape is hashed (SHA-256) and looked up. Index hints reach the planner
//! through a thread-local scope (`hints_scope`, read by `planner::choose_plan` via
//! `crate::planner::filters::hinted`), as index filters do; they take precedence over an index filter and a
//! `hint`, as in mongod.

use crate::error::{CommandError, CommandResult, ErrorCode, err, storage_error};
use crate::query_shape::Shape;
use bson::{Bson, Document, doc};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use storage::{Collection, WriteOp};

pub const CONFIG_DB: &str = "config";
pub const PARAMETERS_COLLECTION: &str = "clusterParameters";
const DOCUMENT_ID: &str = "querySettings";

/// One shape's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub hash: String,
    pub settings: Document,
    pub representative: Option<Document>,
    /// Cairn's shape document (`$querySettings`' `debugQueryShape`), when known.
    pub shape: Option<Document>,
}

impl Entry {
    fn stored(&self) -> Document {
        let mut d = doc! { "queryShapeHash": self.hash.clone(), "settings": self.settings.clone() };
        if let Some(r) = &self.representative {
            d.insert("representativeQuery", r.clone());
        }
        if let Some(s) = &self.shape {
            d.insert("debugQueryShape", s.clone());
        }
        d
    }

    fn from_stored(d: &Document) -> Option<Entry> {
        Some(Entry {
            hash: d.get_str("queryShapeHash").ok()?.to_string(),
            settings: d.get_document("settings").ok()?.clone(),
            representative: d.get_document("representativeQuery").ok().cloned(),
            shape: d.get_document("debugQueryShape").ok().cloned(),
        })
    }

    /// Whether this entry rejects its queries.
    pub fn rejects(&self) -> bool {
        self.settings.get_bool("reject").unwrap_or(false)
    }

    /// The indexes allowed on `db.coll`, if the entry names that namespace.
    fn allowed_on(&self, db: &str, coll: &str) -> Option<Vec<Bson>> {
        self.settings
            .get_array("indexHints")
            .ok()?
            .iter()
            .filter_map(Bson::as_document)
            .find(|h| {
                h.get_document("ns").is_ok_and(|ns| {
                    ns.get_str("db").ok() == Some(db) && ns.get_str("coll").ok() == Some(coll)
                })
            })
            .and_then(|h| h.get_array("allowedIndexes").ok().cloned())
    }
}

#[derive(Default)]
pub struct QuerySettings {
    entries: RwLock<BTreeMap<String, Entry>>,
    count: AtomicUsize,
    /// Held by a command for its whole read-modify-persist of the set.
    pub change: std::sync::Mutex<()>,
}

impl QuerySettings {
    /// Reads what `config.clusterParameters` holds (at start-up).
    pub fn load(&self, engine: &storage::Engine) {
        let Some(c) = engine.collection(CONFIG_DB, PARAMETERS_COLLECTION) else {
            return;
        };
        let Some(d) = stored_document(&c) else {
            return;
        };
        let mut map = self.write();
        for e in d.get_array("settingsArray").into_iter().flatten() {
            if let Some(e) = e.as_document().and_then(Entry::from_stored) {
                map.insert(e.hash.clone(), e);
            }
        }
        self.count.store(map.len(), Relaxed);
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_empty(&self) -> bool {
        self.count.load(Relaxed) == 0
    }

    pub fn get(&self, hash: &str) -> Option<Entry> {
        self.read().get(hash).cloned()
    }

    pub fn list(&self) -> Vec<Entry> {
        self.read().values().cloned().collect()
    }

    /// Replaces the whole set with `entries` after persisting it (the caller holds the change
    /// lock, `commands::query_settings`). Returns the write's ticket.
    pub fn replace_all(
        &self,
        engine: &storage::Engine,
        entries: BTreeMap<String, Entry>,
    ) -> CommandResult<storage::Ticket> {
        let ticket = persist(engine, &entries)?;
        self.count.store(entries.len(), Relaxed);
        *self.write() = entries;
        Ok(ticket)
    }

    /// The entries as a map, to change and hand back to `replace_all`.
    pub fn snapshot(&self) -> BTreeMap<String, Entry> {
        self.read().clone()
    }

    /// The settings that apply to a query of `shape`: Err(411) when they reject it, else the
    /// guard that makes their index hints the planner's for this thread.
    pub fn for_query(&self, shape: impl FnOnce() -> Shape) -> CommandResult<Option<HintsGuard>> {
        if self.is_empty() {
            return Ok(None);
        }
        let shape = shape();
        let Some(entry) = self.get(&shape.hash_hex()) else {
            return Ok(None);
        };
        if entry.rejects() {
            return Err(rejected());
        }
        Ok(Some(crate::planner::filters::hints_scope(Arc::new(entry))))
    }
}

pub fn rejected() -> CommandError {
    err(
        ErrorCode::QueryRejectedBySettings,
        "Query rejected by admin query settings",
    )
}

fn stored_document(c: &Collection) -> Option<Document> {
    let id = Bson::String(DOCUMENT_ID.into());
    let raw = bson::RawBson::try_from(id).ok()?;
    let rid = c.find_by_id(raw.as_raw_bson_ref()).ok()??;
    let raw = c.get(rid).ok()??;
    Document::try_from(raw.as_ref()).ok()
}

fn persist(
    engine: &storage::Engine,
    entries: &BTreeMap<String, Entry>,
) -> CommandResult<storage::Ticket> {
    let fail = |e| storage_error(e, CONFIG_DB, PARAMETERS_COLLECTION);
    let c = match engine.collection(CONFIG_DB, PARAMETERS_COLLECTION) {
        Some(c) => c,
        None => match engine.create_collection(CONFIG_DB, PARAMETERS_COLLECTION, Document::new()) {
            Ok(c) => c,
            Err(storage::StorageError::NamespaceExists(_)) => engine
                .collection(CONFIG_DB, PARAMETERS_COLLECTION)
                .ok_or_else(|| {
                    err(
                        ErrorCode::InternalError,
                        "config.clusterParameters vanished",
                    )
                })?,
            Err(e) => return Err(fail(e)),
        },
    };
    let array: Vec<Bson> = entries
        .values()
        .map(|e| Bson::Document(e.stored()))
        .collect();
    let d = doc! {
        "_id": DOCUMENT_ID,
        "settingsArray": array,
        "clusterParameterTime": bson::Timestamp { time: now_seconds(), increment: 1 },
    };
    let raw = bson::RawDocumentBuf::try_from(&d)
        .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
    let id = bson::RawBson::String(DOCUMENT_ID.into());
    let op = match c.find_by_id(id.as_raw_bson_ref()).map_err(fail)? {
        Some(rid) => WriteOp::Replace(rid, raw),
        None => WriteOp::Insert(raw.into()),
    };
    c.write(vec![op]).map_err(fail)
}

fn now_seconds() -> u32 {
    u32::try_from(bson::DateTime::now().timestamp_millis() / 1000).unwrap_or(u32::MAX)
}

/// Keeps a query's settings current for the planner on this thread.
pub type HintsGuard = crate::planner::filters::HintsGuard;

impl crate::planner::filters::AllowedIndexes for Entry {
    fn allowed_on(&self, db: &str, coll: &str) -> Option<Vec<Bson>> {
        Entry::allowed_on(self, db, coll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hash: &str, settings: Document) -> Entry {
        Entry {
            hash: hash.into(),
            settings,
            representative: None,
            shape: None,
        }
    }

    #[test]
    fn entries_round_trip_their_stored_form() {
        let e = Entry {
            representative: Some(doc! { "find": "c", "$db": "d" }),
            shape: Some(doc! { "command": "find" }),
            ..entry("AB", doc! { "reject": true })
        };
        assert_eq!(Entry::from_stored(&e.stored()), Some(e.clone()));
        assert!(e.rejects());
    }

    #[test]
    fn hints_are_found_by_namespace() {
        let e = entry(
            "AB",
            doc! { "indexHints": [
                { "ns": { "db": "d", "coll": "c" }, "allowedIndexes": ["a_1"] },
                { "ns": { "db": "d", "coll": "x" }, "allowedIndexes": [{ "b": 1 }] },
            ] },
        );
        assert_eq!(
            e.allowed_on("d", "c"),
            Some(vec![Bson::String("a_1".into())])
        );
        assert_eq!(
            e.allowed_on("d", "x"),
            Some(vec![Bson::Document(doc! { "b": 1 })])
        );
        assert_eq!(e.allowed_on("d", "y"), None);
        assert!(!e.rejects());
    }

    #[test]
    fn no_settings_means_nothing_to_compute() {
        let s = QuerySettings::default();
        let r = s.for_query(|| panic!("the shape is not computed while no setting exists"));
        assert!(matches!(r, Ok(None)));
    }
}
