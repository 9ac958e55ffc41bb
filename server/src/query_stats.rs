//! Query statistics (`$queryStats`, mongod 7.1+/8.0): per query shape of `find` and
//! `aggregate`, how often it ran, how long its commands took and how many documents they
//! returned, with the first and latest time it was seen.
//!
//! The store is bounded (`limits::QUERY_STATS_ENTRIES_MAX`, a count where mongod's
//! `internalQueryStatsCacheSize` is a share of memory): a new shape arriving at the bound
//! evicts the least recently seen entry (one pass over the map, only then). Recording is off
//! when `internalQueryStatsRateLimit` is 0 (any other value records every query: there is no
//! per-second sampling). What a record costs on the hot path: the shape (a small document built
//! from the command), a 64-bit hash of its bytes, one lock and one map update; the SHA-256 key
//! hashes are computed only when an entry is made. Measured per findOne in `docs/BENCHMARKS.md`.
//!
//! Counted per command: a cursor's later `getMore` batches are not added to `docsReturned` or
//! `totalExecMicros` (mongod adds them when the cursor ends).

use crate::limits;
use crate::query_shape::Shape;
use bson::{Bson, Document, doc};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

/// `{sum, max, min, sumOfSquares}` of one metric.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Aggregated {
    sum: i64,
    max: i64,
    min: i64,
    sum_of_squares: f64,
}

impl Aggregated {
    fn add(&mut self, v: i64, first: bool) {
        self.sum = self.sum.saturating_add(v);
        self.max = if first { v } else { self.max.max(v) };
        self.min = if first { v } else { self.min.min(v) };
        self.sum_of_squares += (v as f64) * (v as f64);
    }

    fn to_doc(self) -> Document {
        doc! { "sum": self.sum, "max": self.max, "min": self.min, "sumOfSquares": self.sum_of_squares }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    shape: Shape,
    exec_count: i64,
    total_exec_micros: Aggregated,
    docs_returned: Aggregated,
    last_exec_micros: i64,
    first_seen_ms: i64,
    latest_seen_ms: i64,
}

#[derive(Default)]
pub struct QueryStats {
    map: Mutex<HashMap<u64, Entry>>,
}

impl QueryStats {
    /// Notes one run of a query whose shape has `fingerprint` (`shape` makes it, called only
    /// for a shape not seen yet) that took `micros` and returned `docs` documents, at `now_ms`.
    pub fn record(
        &self,
        fingerprint: u64,
        shape: impl FnOnce() -> Shape,
        micros: i64,
        docs: i64,
        now_ms: i64,
    ) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(&fingerprint) && map.len() >= limits::QUERY_STATS_ENTRIES_MAX {
            let oldest = map
                .iter()
                .min_by_key(|(_, e)| e.latest_seen_ms)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        let e = map.entry(fingerprint).or_insert_with(|| Entry {
            shape: shape(),
            exec_count: 0,
            total_exec_micros: Aggregated::default(),
            docs_returned: Aggregated::default(),
            last_exec_micros: 0,
            first_seen_ms: now_ms,
            latest_seen_ms: now_ms,
        });
        let first = e.exec_count == 0;
        e.exec_count += 1;
        e.total_exec_micros.add(micros, first);
        e.docs_returned.add(docs, first);
        e.last_exec_micros = micros;
        e.latest_seen_ms = now_ms;
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `$queryStats` documents, identifiers transformed with `hmac_key` when given.
    pub fn list(&self, hmac_key: Option<&[u8]>) -> Vec<Document> {
        let entries: Vec<Entry> = {
            let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            map.values().cloned().collect()
        };
        let as_of = bson::Timestamp {
            time: u32::try_from(bson::DateTime::now().timestamp_millis() / 1000).unwrap_or(0),
            increment: 0,
        };
        let mut out: Vec<(i64, Document)> = entries
            .into_iter()
            .map(|e| (e.first_seen_ms, entry_doc(&e, hmac_key, as_of)))
            .collect();
        out.sort_by_key(|(first, _)| *first);
        out.into_iter().map(|(_, d)| d).collect()
    }
}

fn entry_doc(e: &Entry, hmac_key: Option<&[u8]>, as_of: bson::Timestamp) -> Document {
    let mut shape = e.shape.doc.clone();
    if let Some(key) = hmac_key {
        shape = transformed(&shape, key);
    }
    let key = doc! { "queryShape": shape, "collectionType": "collection" };
    let key_bytes = bson::RawDocumentBuf::try_from(&key)
        .map(|r| r.into_bytes())
        .unwrap_or_default();
    let key_hash = base64_of(&Sha256::digest(&key_bytes));
    doc! {
        "key": key,
        "keyHash": key_hash,
        "queryShapeHash": e.shape.hash_hex(),
        "metrics": {
            "lastExecutionMicros": e.last_exec_micros,
            "execCount": e.exec_count,
            "totalExecMicros": e.total_exec_micros.to_doc(),
            "firstResponseExecMicros": e.total_exec_micros.to_doc(),
            "docsReturned": e.docs_returned.to_doc(),
            "firstSeenTimestamp": bson::DateTime::from_millis(e.first_seen_ms),
            "latestSeenTimestamp": bson::DateTime::from_millis(e.latest_seen_ms),
        },
        "asOf": as_of,
    }
}

/// The shape with its identifiers (field names, database and collection names) replaced by
/// the base64 of their HMAC-SHA-256 under `key`; operators (`$...`) and placeholders stay.
fn transformed(d: &Document, key: &[u8]) -> Document {
    d.iter()
        .map(|(k, v)| {
            let name = if k.starts_with('$')
                || matches!(
                    k.as_str(),
                    "cmdNs"
                        | "command"
                        | "db"
                        | "coll"
                        | "filter"
                        | "sort"
                        | "projection"
                        | "pipeline"
                        | "collation"
                        | "skip"
                        | "limit"
                ) {
                k.clone()
            } else {
                hmac_text(key, k)
            };
            let value = match (k.as_str(), v) {
                ("db" | "coll", Bson::String(s)) => Bson::String(hmac_text(key, s)),
                (_, Bson::Document(inner)) => Bson::Document(transformed(inner, key)),
                (_, Bson::Array(items)) => Bson::Array(
                    items
                        .iter()
                        .map(|i| match i {
                            Bson::Document(inner) => Bson::Document(transformed(inner, key)),
                            other => other.clone(),
                        })
                        .collect(),
                ),
                (_, Bson::String(s)) if s.starts_with('$') && !s.starts_with("$$") => {
                    Bson::String(format!("${}", hmac_text(key, &s[1..])))
                }
                (_, other) => other.clone(),
            };
            (name, value)
        })
        .collect()
}

fn hmac_text(key: &[u8], text: &str) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        return text.to_string();
    };
    mac.update(text.as_bytes());
    base64_of(&mac.finalize().into_bytes())
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(filter: Document) -> Shape {
        Shape::find("d", "c", &doc! { "find": "c", "filter": filter })
    }

    #[test]
    fn runs_of_one_shape_aggregate() {
        let s = QueryStats::default();
        let rec = |f: Document, micros, docs, at| {
            let shape = find(f);
            s.record(shape.fingerprint, || shape, micros, docs, at)
        };
        rec(doc! { "a": 1 }, 10, 2, 1_000);
        rec(doc! { "a": 7 }, 30, 0, 2_000);
        rec(doc! { "b": 1 }, 5, 1, 3_000);
        let listed = s.list(None);
        assert_eq!(listed.len(), 2);
        let m = listed[0].get_document("metrics").unwrap();
        assert_eq!(m.get_i64("execCount").unwrap(), 2);
        assert_eq!(
            m.get_document("totalExecMicros").unwrap(),
            &doc! { "sum": 40_i64, "max": 30_i64, "min": 10_i64, "sumOfSquares": 1000.0 }
        );
        assert_eq!(
            m.get_document("docsReturned")
                .unwrap()
                .get_i64("sum")
                .unwrap(),
            2
        );
        assert_eq!(
            m.get_datetime("firstSeenTimestamp")
                .unwrap()
                .timestamp_millis(),
            1_000
        );
        assert_eq!(
            m.get_datetime("latestSeenTimestamp")
                .unwrap()
                .timestamp_millis(),
            2_000
        );
        assert_eq!(listed[0].get_str("queryShapeHash").unwrap().len(), 64);
        assert!(listed[0].get_str("keyHash").is_ok());
    }

    #[test]
    fn the_store_is_bounded_and_evicts_the_least_recent() {
        let s = QueryStats::default();
        for i in 0..limits::QUERY_STATS_ENTRIES_MAX + 5 {
            let field = format!("f{i}");
            let shape = find(doc! { field: 1 });
            s.record(shape.fingerprint, || shape, 1, 1, i as i64);
        }
        assert_eq!(s.len(), limits::QUERY_STATS_ENTRIES_MAX);
        let first = s.list(None)[0]
            .get_document("metrics")
            .unwrap()
            .get_datetime("firstSeenTimestamp")
            .unwrap()
            .timestamp_millis();
        assert_eq!(first, 5, "the five oldest went");
    }

    #[test]
    fn identifiers_are_transformed_not_operators() {
        let key = [7u8; 32];
        let shape = find(doc! { "name": { "$gt": 1 } }).doc;
        let t = transformed(&shape, &key);
        let ns = t.get_document("cmdNs").unwrap();
        assert_ne!(ns.get_str("db").unwrap(), "d");
        let filter = t.get_document("filter").unwrap();
        assert!(!filter.contains_key("name"));
        let (_, op) = filter.iter().next().unwrap();
        assert!(op.as_document().unwrap().contains_key("$gt"));
        assert_eq!(transformed(&shape, &key), t, "deterministic under one key");
    }
}
