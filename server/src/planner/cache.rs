//! The plan cache: the index that won a query shape's trial, so the next query of the same
//! shape skips the trial (the only part of planning that reads storage).
//!
//! A shape is the filter's structure (fields, operators, the type of each value, never the
//! value) plus the sort and the collation, as mongod's `queryHash`; `planCacheKey` adds the collection's indexes.
//! An entry names the winning index only: a hit plans that index again for the new values
//! (bounds, direction) and is used only if the index is still a candidate for them, so a cached
//! plan is always one the planner could have chosen and results never depend on the cache.
//! An entry is dropped when the collection's indexes differ from those it was made with, after
//! `WRITES_MAX` writes to the collection, by `planCacheClear`, or as the least recently used
//! once `ENTRIES_MAX` are held. Explain reads the cache and never adds to it. Only single-index
//! winners are cached (an `$or` union is planned afresh).

use bson::{Bson, Document, doc};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{LazyLock, Mutex};
use storage::{Collection, IndexInfo};

/// Entries held, over every collection.
pub const ENTRIES_MAX: usize = 5_000;
/// Writes to a collection after which an entry of it is planned afresh (mongod's 1000).
pub const WRITES_MAX: u64 = 1_000;

/// The shape of one query against one collection; the hashes explain shows are derived from it
/// when asked (a query planned through the cache never prints them).
pub struct Key {
    uuid: bson::Uuid,
    shape: String,
    index_sig: u64,
}

struct Entry {
    created_from: Document,
    query_hash: String,
    plan_cache_key: String,
    index_name: String,
    key_pattern: Document,
    works: u64,
    writes_at: u64,
    index_sig: u64,
    created: bson::DateTime,
    last_used: u64,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<(bson::Uuid, String), Entry>,
    clock: u64,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

fn with_cache<T>(f: impl FnOnce(&mut Cache) -> T) -> T {
    let mut guard = match CACHE.lock() {
        Ok(g) => g,
        // A panic elsewhere while holding it leaves only a stale cache: start afresh.
        Err(poisoned) => {
            let mut g = poisoned.into_inner();
            *g = Cache::default();
            g
        }
    };
    f(&mut guard)
}

/// `serverStatus.metrics.query.planCache` (7.2+): the entries held over every collection and an
/// estimate of their bytes (the shape, the document they were made from, the names and hashes).
pub fn totals() -> (u64, u64) {
    with_cache(|c| {
        let bytes: usize = c
            .entries
            .iter()
            .map(|((_, shape), e)| {
                let doc_bytes = |d: &Document| {
                    bson::RawDocumentBuf::try_from(d).map_or(0, |r| r.as_bytes().len())
                };
                shape.len()
                    + doc_bytes(&e.created_from)
                    + doc_bytes(&e.key_pattern)
                    + e.index_name.len()
                    + e.query_hash.len()
                    + e.plan_cache_key.len()
                    + std::mem::size_of::<Entry>()
            })
            .sum();
        (c.entries.len() as u64, bytes as u64)
    })
}

/// Eight hex digits, as mongod prints its hashes.
fn hash_hex(text: &str, extra: u64) -> String {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    extra.hash(&mut h);
    format!("{:08X}", h.finish() >> 32)
}

fn type_name(v: &Bson) -> String {
    match v {
        Bson::Array(items) => {
            let mut types: Vec<String> = items.iter().map(type_name).collect();
            types.sort();
            types.dedup();
            format!("array[{}]", types.join(","))
        }
        Bson::Document(d) => format!("object{}", if d.is_empty() { "{}" } else { "" }),
        other => format!("{:?}", other.element_type()),
    }
}

/// The filter with every value replaced by its type (operators and field names kept).
pub fn filter_shape(filter: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in filter {
        let shaped = match (k.as_str(), v) {
            ("$and" | "$or" | "$nor", Bson::Array(items)) => Bson::Array(
                items
                    .iter()
                    .map(|i| match i {
                        Bson::Document(d) => Bson::Document(filter_shape(d)),
                        other => Bson::String(type_name(other)),
                    })
                    .collect(),
            ),
            ("$comment", _) => continue,
            (_, Bson::Document(d)) if d.keys().next().is_some_and(|f| f.starts_with('$')) => {
                Bson::Document(operator_shape(d))
            }
            (_, other) => Bson::Document(doc! { "$eq": type_name(other) }),
        };
        out.insert(k.clone(), shaped);
    }
    out
}

fn operator_shape(ops: &Document) -> Document {
    let mut out = Document::new();
    for (op, arg) in ops {
        let shaped = match (op.as_str(), arg) {
            ("$elemMatch", Bson::Document(d)) => Bson::Document(filter_shape(d)),
            ("$not", Bson::Document(d)) => Bson::Document(operator_shape(d)),
            (_, other) => Bson::String(type_name(other)),
        };
        out.insert(op.clone(), shaped);
    }
    out
}

/// What of the indexes a plan depends on.
fn index_signature(indexes: &[IndexInfo]) -> u64 {
    let mut h = DefaultHasher::new();
    for ix in indexes {
        format!(
            "{}|{}|{}|{}|{}|{:?}|{:?}",
            ix.spec.name,
            ix.spec.key,
            ix.spec.hidden,
            ix.spec.sparse,
            ix.multikey,
            ix.spec.partial_filter,
            ix.spec.collation()
        )
        .hash(&mut h);
    }
    h.finish()
}

impl Key {
    pub fn of(coll: &Collection, filter: &Document, sort: Option<&Document>) -> Key {
        Key::with_indexes(coll, &coll.indexes(), filter, sort)
    }

    /// [`Key::of`] with the collection's indexes already read (`coll.indexes()` copies them).
    pub fn with_indexes(
        coll: &Collection,
        indexes: &[IndexInfo],
        filter: &Document,
        sort: Option<&Document>,
    ) -> Key {
        let mut shape = doc! {
            "query": filter_shape(filter),
            "sort": sort.cloned().unwrap_or_default(),
        };
        // The collation is part of the shape (mongod's queryHash): the same filter may plan
        // another index under another collation.
        if let Some(c) = crate::query::collator::current() {
            shape.insert(
                "collation",
                crate::query::collation::Spec::Locale(c.spec().clone()).to_document(),
            );
        }
        Key {
            uuid: coll.uuid(),
            shape: shape.to_string(),
            index_sig: index_signature(indexes),
        }
    }

    /// mongod's `queryHash`: the shape alone.
    pub fn query_hash(&self) -> String {
        hash_hex(&self.shape, 0)
    }

    /// mongod's `planCacheKey`: the shape and the collection's indexes.
    pub fn plan_cache_key(&self) -> String {
        hash_hex(&self.shape, self.index_sig)
    }
}

/// The cached winning index of `key` (`None`: no usable entry; a stale one is dropped).
pub fn get(key: &Key, coll: &Collection) -> Option<String> {
    let writes = coll.write_ops();
    with_cache(|c| {
        let id = (key.uuid, key.shape.clone());
        let entry = c.entries.get(&id)?;
        if entry.index_sig != key.index_sig || writes.saturating_sub(entry.writes_at) > WRITES_MAX {
            c.entries.remove(&id);
            return None;
        }
        c.clock += 1;
        let now = c.clock;
        let entry = c.entries.get_mut(&id)?;
        entry.last_used = now;
        Some(entry.index_name.clone())
    })
}

/// True when `key` has an entry [`get`] would use (read only: explain).
pub fn peek(key: &Key, coll: &Collection) -> bool {
    let writes = coll.write_ops();
    with_cache(|c| {
        c.entries
            .get(&(key.uuid, key.shape.clone()))
            .is_some_and(|e| {
                e.index_sig == key.index_sig && writes.saturating_sub(e.writes_at) <= WRITES_MAX
            })
    })
}

/// Forgets `key`'s entry (its index is no longer a candidate for some values).
pub fn remove(key: &Key) {
    with_cache(|c| c.entries.remove(&(key.uuid, key.shape.clone())));
}

/// Records the trial's winner for `key`.
pub fn put(
    key: &Key,
    coll: &Collection,
    created_from: Document,
    plan: &super::IndexPlan,
    works: u64,
) {
    let writes_at = coll.write_ops();
    with_cache(|c| {
        if c.entries.len() >= ENTRIES_MAX
            && let Some(oldest) = c
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
        {
            c.entries.remove(&oldest);
        }
        c.clock += 1;
        let entry = Entry {
            created_from,
            query_hash: key.query_hash(),
            plan_cache_key: key.plan_cache_key(),
            index_name: plan.index_name.clone(),
            key_pattern: plan.key_pattern.clone(),
            works,
            writes_at,
            index_sig: key.index_sig,
            created: bson::DateTime::now(),
            last_used: c.clock,
        };
        c.entries.insert((key.uuid, key.shape.clone()), entry);
    });
}

/// Drops the collection's entries, or only those of one shape (`query`, `sort`).
pub fn clear(coll: &Collection, shape: Option<(&Document, Option<&Document>)>) {
    let uuid = coll.uuid();
    let only = shape.map(|(q, s)| Key::of(coll, q, s).shape);
    with_cache(|c| {
        c.entries
            .retain(|(u, s), _| *u != uuid || only.as_ref().is_some_and(|o| o != s));
    });
}

/// The collection's entries in `$planCacheStats`' shape (mongod's classic-engine version 1).
pub fn stats(coll: &Collection) -> Vec<Document> {
    let uuid = coll.uuid();
    with_cache(|c| {
        let mut out: Vec<(u64, Document)> = c
            .entries
            .iter()
            .filter(|((u, _), _)| *u == uuid)
            .map(|(_, e)| {
                let cached_plan = doc! {
                    "stage": "FETCH",
                    "inputStage": {
                        "stage": "IXSCAN",
                        "keyPattern": e.key_pattern.clone(),
                        "indexName": e.index_name.clone(),
                    },
                };
                let size = e.created_from.to_string().len() + e.key_pattern.to_string().len();
                (
                    e.last_used,
                    doc! {
                        "version": "1",
                        "createdFromQuery": e.created_from.clone(),
                        "queryHash": e.query_hash.clone(),
                        "planCacheShapeHash": e.query_hash.clone(),
                        "planCacheKey": e.plan_cache_key.clone(),
                        "isActive": true,
                        "works": i64::try_from(e.works).unwrap_or(i64::MAX),
                        "timeOfCreation": e.created,
                        "cachedPlan": cached_plan,
                        "creationExecStats": [],
                        "candidatePlanScores": [],
                        "indexFilterSet": false,
                        "estimatedSizeBytes": i64::try_from(size).unwrap_or(i64::MAX),
                    },
                )
            })
            .collect();
        out.sort_by_key(|(used, _)| std::cmp::Reverse(*used));
        out.into_iter().map(|(_, d)| d).collect()
    })
}
