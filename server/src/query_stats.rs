//! Query statistics (`$queryStats`, mongod 7.1+/8.0): per query shape and client of `find`
//! and `aggregate`, how often it ran, how long its commands took, how many documents they
//! returned, how many index keys and documents they examined, whether they sorted in memory,
//! spilled, ran a multi-planner trial or took their plan from the plan cache, with the first
//! and latest time it was seen.
//!
//! An entry's key is the shape plus the connection's handshake `client` document (mongod's
//! `key.client`): the same shape from two kinds of client is two entries, as in mongod.
//!
//! The store is bounded (`limits::QUERY_STATS_ENTRIES_MAX`, a count where mongod's
//! `internalQueryStatsCacheSize` is a share of memory): a new shape arriving at the bound
//! evicts the least recently seen entry (one pass over the map, only then). Recording is off
//! when `internalQueryStatsRateLimit` is 0 (any other value records every query: there is no
//! per-second sampling). What a record costs on the hot path: a 64-bit fingerprint of the
//! command's shape (the shape document is built only for a shape not seen yet), one lock and
//! one map update; the SHA-256 key hashes are computed only when `$queryStats` lists entries.
//! Measured per findOne in `docs/BENCHMARKS.md`.
//!
//! Counted per command: a cursor's later `getMore` batches are not added to `docsReturned`,
//! `keysExamined`, `docsExamined` or `totalExecMicros` (mongod adds them when the cursor ends).

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

    /// mongod writes all four as int64 (`sumOfSquares` too, saturating here).
    fn to_doc(self) -> Document {
        doc! {
            "sum": self.sum,
            "max": self.max,
            "min": self.min,
            "sumOfSquares": self.sum_of_squares as i64,
        }
    }
}

/// `{true, false}` counts of one boolean metric.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct AggregatedBool {
    true_count: i64,
    false_count: i64,
}

impl AggregatedBool {
    fn add(&mut self, v: bool) {
        if v {
            self.true_count += 1;
        } else {
            self.false_count += 1;
        }
    }

    fn to_doc(self) -> Document {
        doc! { "true": self.true_count, "false": self.false_count }
    }
}

/// A connection's handshake `client` document, with its fingerprint computed once.
#[derive(Debug)]
pub struct ClientMeta {
    pub doc: Document,
    fingerprint: u64,
}

impl ClientMeta {
    pub fn new(doc: Document) -> ClientMeta {
        use std::hash::{Hash, Hasher};
        let bytes = bson::RawDocumentBuf::try_from(&doc)
            .map(|r| r.into_bytes())
            .unwrap_or_default();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        ClientMeta {
            doc,
            fingerprint: h.finish(),
        }
    }
}

/// One finished command, as recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    pub micros: i64,
    pub docs_returned: i64,
    pub keys_examined: i64,
    pub docs_examined: i64,
    /// `crate::interrupt::plan_flags` bits.
    pub plan_flags: u8,
    pub now_ms: i64,
}

#[derive(Debug, Clone)]
struct Entry {
    shape: Shape,
    client: Option<std::sync::Arc<ClientMeta>>,
    exec_count: i64,
    total_exec_micros: Aggregated,
    docs_returned: Aggregated,
    keys_examined: Aggregated,
    docs_examined: Aggregated,
    has_sort_stage: AggregatedBool,
    used_disk: AggregatedBool,
    from_multi_planner: AggregatedBool,
    from_plan_cache: AggregatedBool,
    last_exec_micros: i64,
    first_seen_ms: i64,
    latest_seen_ms: i64,
}

impl Entry {
    fn add(&mut self, run: &Run) {
        use crate::interrupt::plan_flags::*;
        let first = self.exec_count == 0;
        self.exec_count += 1;
        self.total_exec_micros.add(run.micros, first);
        self.docs_returned.add(run.docs_returned, first);
        self.keys_examined.add(run.keys_examined, first);
        self.docs_examined.add(run.docs_examined, first);
        let flag = |bit: u8| run.plan_flags & bit != 0;
        self.has_sort_stage.add(flag(HAS_SORT_STAGE));
        self.used_disk.add(flag(USED_DISK));
        self.from_multi_planner.add(flag(FROM_MULTI_PLANNER));
        self.from_plan_cache.add(flag(FROM_PLAN_CACHE));
        self.last_exec_micros = run.micros;
        self.latest_seen_ms = run.now_ms;
    }
}

#[derive(Default)]
pub struct QueryStats {
    map: Mutex<HashMap<u64, Entry>>,
}

impl QueryStats {
    /// Notes one `run` of a query whose shape has `fingerprint` (`shape` makes it, called only
    /// for a key not seen yet), sent by a connection whose handshake said `client`.
    pub fn record(
        &self,
        fingerprint: u64,
        shape: impl FnOnce() -> Shape,
        client: Option<&std::sync::Arc<ClientMeta>>,
        run: &Run,
    ) {
        // The key is the shape and the client: mix the client's fingerprint in.
        let key = client.map_or(fingerprint, |c| {
            fingerprint
                ^ c.fingerprint
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .rotate_left(17)
        });
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(&key) && map.len() >= limits::QUERY_STATS_ENTRIES_MAX {
            let oldest = map
                .iter()
                .min_by_key(|(_, e)| e.latest_seen_ms)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        map.entry(key)
            .or_insert_with(|| Entry {
                shape: shape(),
                client: client.cloned(),
                exec_count: 0,
                total_exec_micros: Aggregated::default(),
                docs_returned: Aggregated::default(),
                keys_examined: Aggregated::default(),
                docs_examined: Aggregated::default(),
                has_sort_stage: AggregatedBool::default(),
                used_disk: AggregatedBool::default(),
                from_multi_planner: AggregatedBool::default(),
                from_plan_cache: AggregatedBool::default(),
                last_exec_micros: 0,
                first_seen_ms: run.now_ms,
                latest_seen_ms: run.now_ms,
            })
            .add(run);
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
    let mut key = doc! { "queryShape": shape };
    if let Some(client) = &e.client {
        key.insert("client", client.doc.clone());
    }
    key.insert("collectionType", "collection");
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
            "keysExamined": e.keys_examined.to_doc(),
            "docsExamined": e.docs_examined.to_doc(),
            "hasSortStage": e.has_sort_stage.to_doc(),
            "usedDisk": e.used_disk.to_doc(),
            "fromMultiPlanner": e.from_multi_planner.to_doc(),
            "fromPlanCache": e.from_plan_cache.to_doc(),
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
        let rec = |f: Document, micros, docs, now_ms| {
            let shape = find(f);
            let run = Run {
                micros,
                docs_returned: docs,
                keys_examined: docs,
                docs_examined: 3,
                plan_flags: if micros > 20 {
                    crate::interrupt::plan_flags::HAS_SORT_STAGE
                } else {
                    0
                },
                now_ms,
            };
            s.record(shape.fingerprint, || shape, None, &run)
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
            &doc! { "sum": 40_i64, "max": 30_i64, "min": 10_i64, "sumOfSquares": 1000_i64 }
        );
        assert_eq!(
            m.get_document("keysExamined").unwrap(),
            &doc! { "sum": 2_i64, "max": 2_i64, "min": 0_i64, "sumOfSquares": 4_i64 }
        );
        assert_eq!(
            m.get_document("docsExamined").unwrap(),
            &doc! { "sum": 6_i64, "max": 3_i64, "min": 3_i64, "sumOfSquares": 18_i64 }
        );
        assert_eq!(
            m.get_document("hasSortStage").unwrap(),
            &doc! { "true": 1_i64, "false": 1_i64 }
        );
        assert_eq!(
            m.get_document("usedDisk").unwrap(),
            &doc! { "true": 0_i64, "false": 2_i64 }
        );
        assert!(
            !listed[0]
                .get_document("key")
                .unwrap()
                .contains_key("client")
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
            let run = Run {
                micros: 1,
                docs_returned: 1,
                now_ms: i as i64,
                ..Run::default()
            };
            s.record(shape.fingerprint, || shape, None, &run);
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
    fn the_client_is_part_of_the_key() {
        let s = QueryStats::default();
        let app = |name: &str| {
            std::sync::Arc::new(ClientMeta::new(
                doc! { "driver": { "name": "d", "version": "1" }, "application": { "name": name } },
            ))
        };
        let (a, b) = (app("a"), app("b"));
        let run = Run {
            now_ms: 1,
            ..Run::default()
        };
        for client in [Some(&a), Some(&b), Some(&a), None] {
            let shape = find(doc! { "x": 1 });
            s.record(shape.fingerprint, || shape, client, &run);
        }
        let listed = s.list(None);
        assert_eq!(listed.len(), 3, "one entry per client, one without");
        let counts: Vec<(Option<String>, i64)> = listed
            .iter()
            .map(|e| {
                let key = e.get_document("key").unwrap();
                let keys: Vec<&str> = key.keys().map(String::as_str).collect();
                let name = key.get_document("client").ok().map(|c| {
                    assert_eq!(keys, ["queryShape", "client", "collectionType"]);
                    c.get_document("application")
                        .unwrap()
                        .get_str("name")
                        .unwrap()
                        .to_string()
                });
                let n = e
                    .get_document("metrics")
                    .unwrap()
                    .get_i64("execCount")
                    .unwrap();
                (name, n)
            })
            .collect();
        assert!(counts.contains(&(Some("a".to_string()), 2)), "{counts:?}");
        assert!(counts.contains(&(Some("b".to_string()), 1)), "{counts:?}");
        assert!(counts.contains(&(None, 1)), "{counts:?}");
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
