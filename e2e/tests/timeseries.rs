//! Proves time-series collections behave as mongod 7.0's: the same seeded random measurements
//! inserted into a time-series collection and into a plain one give equal results for finds,
//! aggregates, counts and distinct; a time-range filter skips buckets (explain); create's and
//! inserts' errors; listCollections / listIndexes shapes; deletes; drop; TTL of whole buckets;
//! acknowledged inserts survive SIGKILL. How: the Rust driver against a real cairn process.

use bson::{Bson, DateTime, Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
/// 2026-01-01T00:00:00Z.
const BASE_MS: i64 = 1_767_225_600_000;
const HOUR_MS: i64 = 3_600_000;

/// A small deterministic generator (xorshift64*), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` measurements over ten hours from five sensors on two sites, in random time order,
/// some without `w`, some with a double `v`.
fn measurements(seed: u64, n: usize) -> Vec<Document> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let sensor = rng.below(5) as i32;
            let mut d = doc! {
                "_id": i as i32,
                "t": DateTime::from_millis(BASE_MS + rng.below(10 * HOUR_MS as u64) as i64),
                "m": { "sensor": sensor, "site": if sensor < 2 { "a" } else { "b" } },
            };
            if rng.below(4) == 0 {
                d.insert("v", rng.below(1000) as f64 / 10.0);
            } else {
                d.insert("v", rng.below(100) as i32);
            }
            if rng.below(3) != 0 {
                d.insert("w", format!("w{}", rng.below(7)));
            }
            d
        })
        .collect()
}

/// Top-level fields in name order: a time-series read returns the time field first, then
/// the meta field (as mongod), a plain collection the fields as inserted.
fn normalized(docs: Vec<Document>) -> Vec<Vec<(String, Bson)>> {
    docs.into_iter()
        .map(|d| {
            let mut fields: Vec<(String, Bson)> = d.into_iter().collect();
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            fields
        })
        .collect()
}

async fn create_ts(db: &mongodb::Database, name: &str, extra: Document) {
    let mut cmd = doc! { "create": name, "timeseries": { "timeField": "t", "metaField": "m" } };
    cmd.extend(extra);
    db.run_command(cmd).await.unwrap();
}

async fn filled(db: &mongodb::Database, seed: u64, n: usize) {
    create_ts(db, "ts", doc! {}).await;
    let docs = measurements(seed, n);
    for chunk in docs.chunks(400) {
        db.collection::<Document>("ts")
            .insert_many(chunk.to_vec())
            .await
            .unwrap();
        db.collection::<Document>("plain")
            .insert_many(chunk.to_vec())
            .await
            .unwrap();
    }
}

async fn aggregate(db: &mongodb::Database, coll: &str, pipeline: &[Document]) -> Vec<Document> {
    db.collection::<Document>(coll)
        .aggregate(pipeline.to_vec())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

fn at(hours: f64) -> DateTime {
    DateTime::from_millis(BASE_MS + (hours * HOUR_MS as f64) as i64)
}

#[tokio::test]
async fn reads_equal_a_plain_collection() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("tsq");
    let seed = 0x5eed_0019;
    filled(&db, seed, 3000).await;
    let range = doc! { "t": { "$gte": at(2.5), "$lt": at(5.25) } };
    let pipelines: Vec<Vec<Document>> = vec![
        vec![doc! { "$sort": { "_id": 1 } }],
        vec![
            doc! { "$match": range.clone() },
            doc! { "$sort": { "_id": 1 } },
        ],
        vec![
            doc! { "$match": { "m.sensor": 3, "v": { "$gt": 40 } } },
            doc! { "$sort": { "_id": 1 } },
        ],
        vec![
            doc! { "$match": { "m": { "sensor": 1, "site": "a" }, "t": { "$lte": at(7.0) } } },
            doc! { "$sort": { "_id": 1 } },
        ],
        vec![
            doc! { "$match": range.clone() },
            doc! { "$group": { "_id": "$m.sensor", "n": { "$sum": 1 }, "total": { "$sum": "$v" }, "last": { "$max": "$t" } } },
            doc! { "$sort": { "_id": 1 } },
        ],
        vec![
            doc! { "$sort": { "t": -1, "_id": 1 } },
            doc! { "$limit": 25 },
            doc! { "$project": { "_id": 0, "t": 1, "v": 1, "site": "$m.site" } },
        ],
        vec![
            doc! { "$match": { "w": { "$exists": false }, "t": { "$gt": at(9.0) } } },
            doc! { "$sort": { "_id": 1 } },
            doc! { "$project": { "m": 0 } },
        ],
    ];
    for p in &pipelines {
        let got = aggregate(&db, "ts", p).await;
        let want = aggregate(&db, "plain", p).await;
        assert!(
            !want.is_empty(),
            "seed {seed}: {p:?} should select something"
        );
        assert_eq!(normalized(got), normalized(want), "seed {seed}: {p:?}");
    }
    // find with filter, sort, skip, limit and projection.
    let (ts, plain) = (
        db.collection::<Document>("ts"),
        db.collection::<Document>("plain"),
    );
    let mut results = Vec::new();
    for c in [&ts, &plain] {
        let docs: Vec<Document> = c
            .find(doc! { "m.site": "b", "t": { "$gte": at(1.0) } })
            .sort(doc! { "t": 1, "_id": 1 })
            .skip(10)
            .limit(50)
            .projection(doc! { "v": 1, "t": 1 })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        results.push(normalized(docs));
    }
    assert_eq!(results[1].len(), 50);
    assert_eq!(results[0], results[1], "seed {seed}: find");
    for filter in [doc! {}, range.clone(), doc! { "m.sensor": 0 }] {
        let got = ts.count_documents(filter.clone()).await.unwrap();
        let want = plain.count_documents(filter.clone()).await.unwrap();
        assert_eq!(got, want, "seed {seed}: count {filter:?}");
    }
    let mut got = ts.distinct("m.sensor", range.clone()).await.unwrap();
    let mut want = plain.distinct("m.sensor", range.clone()).await.unwrap();
    let key = |b: &Bson| b.as_i32().unwrap();
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want, "seed {seed}: distinct");
    // Five sensors over ten one-hour windows: far fewer buckets than measurements.
    let buckets = db
        .collection::<Document>("system.buckets.ts")
        .count_documents(doc! {})
        .await
        .unwrap();
    assert!((5..=60).contains(&buckets), "{buckets} buckets");
}

#[tokio::test]
async fn time_range_filters_skip_buckets_in_explain() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("tsx");
    filled(&db, 7, 600).await;
    let explained = db
        .run_command(doc! {
            "explain": { "aggregate": "ts", "pipeline": [
                { "$match": { "t": { "$gte": at(3.0), "$lt": at(4.0) }, "m.sensor": 2 } }
            ], "cursor": {} },
        })
        .await
        .unwrap();
    let text = format!("{explained:?}");
    assert!(text.contains("control.max.t"), "{text}");
    assert!(text.contains("control.min.t"), "{text}");
    assert!(text.contains("meta.sensor"), "{text}");
    // The bucket predicate alone keeps only the buckets the range can touch.
    let buckets = db.collection::<Document>("system.buckets.ts");
    let all = buckets.count_documents(doc! {}).await.unwrap();
    let touched = buckets
        .count_documents(doc! {
            "control.max.t": { "$gte": at(3.0) },
            "control.min.t": { "$lt": at(4.0) },
            "meta.sensor": 2,
        })
        .await
        .unwrap();
    assert!(
        touched >= 1 && touched * 4 < all,
        "{touched} of {all} buckets"
    );
}

#[tokio::test]
async fn create_and_insert_errors_are_mongods() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("tse");
    let create = |ts: Document| {
        let db = db.clone();
        async move {
            db.run_command(doc! { "create": "bad", "timeseries": ts })
                .await
                .map(|_| ())
        }
    };
    let cases = [
        (doc! { "metaField": "m" }, 40414),
        (doc! { "timeField": "t", "metaField": "t" }, 72),
        (doc! { "timeField": "t", "metaField": "_id" }, 72),
        (doc! { "timeField": "t", "granularity": "days" }, 2),
        (doc! { "timeField": "t", "bucketMaxSpanSeconds": 100 }, 72),
        (
            doc! { "timeField": "t", "bucketMaxSpanSeconds": 50, "bucketRoundingSeconds": 100 },
            72,
        ),
        (
            doc! { "timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60 },
            72,
        ),
        (doc! { "timeField": "t", "extra": 1 }, 40415),
    ];
    for (spec, code) in cases {
        let e = create(spec.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{spec:?}");
    }
    let listed = db.list_collection_names().await.unwrap();
    assert!(
        listed.is_empty(),
        "a refused create leaves nothing: {listed:?}"
    );

    create_ts(&db, "ts", doc! {}).await;
    // The same create again is fine; other options for the same name are 48.
    create_ts(&db, "ts", doc! {}).await;
    let e = db
        .run_command(doc! { "create": "ts", "timeseries": { "timeField": "t" } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 48);
    let ts = db.collection::<Document>("ts");
    for bad in [
        doc! { "m": 1 },
        doc! { "t": 5, "m": 1 },
        doc! { "t": "today" },
    ] {
        let e = ts.insert_one(bad.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), 2, "{bad:?}");
    }
    let e = ts
        .update_one(doc! { "m": 1 }, doc! { "$set": { "v": 1 } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 72);
    let e = db
        .run_command(
            doc! { "createIndexes": "ts", "indexes": [{ "key": { "v": 1 }, "name": "v_1" }] },
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 67);
    assert_eq!(ts.count_documents(doc! {}).await.unwrap(), 0);
}

#[tokio::test]
async fn listing_indexes_deletes_and_drop() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("tsl");
    create_ts(&db, "ts", doc! { "expireAfterSeconds": 86_400 }).await;
    db.run_command(doc! {
        "create": "custom",
        "timeseries": { "timeField": "t", "bucketMaxSpanSeconds": 300, "bucketRoundingSeconds": 300 },
    })
    .await
    .unwrap();
    let listed = db
        .run_command(doc! { "listCollections": 1, "filter": { "name": { "$in": ["ts", "custom", "system.buckets.ts"] } } })
        .await
        .unwrap();
    let batch = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let entry = |name: &str| {
        batch
            .iter()
            .filter_map(Bson::as_document)
            .find(|d| d.get_str("name").ok() == Some(name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {batch:?}"))
    };
    let ts = entry("ts");
    assert_eq!(ts.get_str("type").unwrap(), "timeseries");
    assert_eq!(
        ts.get_document("options").unwrap(),
        &doc! {
            "timeseries": { "timeField": "t", "metaField": "m", "granularity": "seconds", "bucketMaxSpanSeconds": 3600 },
            "expireAfterSeconds": 86_400i64,
        }
    );
    assert_eq!(
        entry("custom").get_document("options").unwrap(),
        &doc! { "timeseries": { "timeField": "t", "bucketRoundingSeconds": 300, "bucketMaxSpanSeconds": 300 } }
    );
    let buckets = entry("system.buckets.ts");
    assert_eq!(buckets.get_str("type").unwrap(), "collection");
    assert!(
        buckets
            .get_document("options")
            .unwrap()
            .contains_key("timeseries")
    );

    // The meta-and-time index mongod creates, and a user index on a meta subfield.
    db.run_command(
        doc! { "createIndexes": "ts", "indexes": [{ "key": { "m.site": 1 }, "name": "site" }] },
    )
    .await
    .unwrap();
    let idx = db.run_command(doc! { "listIndexes": "ts" }).await.unwrap();
    let keys: Vec<Document> = idx
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .filter_map(Bson::as_document)
        .map(|d| d.get_document("key").unwrap().clone())
        .collect();
    assert_eq!(keys, vec![doc! { "m": 1, "t": 1 }, doc! { "m.site": 1 }]);

    // Deletes: by meta, by a measurement field (mongod 7.0 allows both), one at a time.
    let docs = measurements(99, 500);
    let c = db.collection::<Document>("ts");
    let plain = db.collection::<Document>("plain");
    c.insert_many(docs.clone()).await.unwrap();
    plain.insert_many(docs).await.unwrap();
    for filter in [
        doc! { "m.sensor": 4 },
        doc! { "v": { "$lt": 20 }, "m.site": "b" },
    ] {
        let got = c.delete_many(filter.clone()).await.unwrap().deleted_count;
        let want = plain
            .delete_many(filter.clone())
            .await
            .unwrap()
            .deleted_count;
        assert!(want > 0);
        assert_eq!(got, want, "{filter:?}");
    }
    assert_eq!(
        c.delete_one(doc! { "m.sensor": 1 })
            .await
            .unwrap()
            .deleted_count,
        1
    );
    plain.delete_one(doc! { "m.sensor": 1 }).await.unwrap();
    assert_eq!(
        c.count_documents(doc! {}).await.unwrap(),
        plain.count_documents(doc! {}).await.unwrap()
    );

    c.drop().await.unwrap();
    let names = db.list_collection_names().await.unwrap();
    assert!(
        !names.iter().any(|n| n == "ts" || n == "system.buckets.ts"),
        "{names:?}"
    );
}

#[tokio::test]
async fn ttl_removes_expired_buckets() {
    let server = Server::start(BIN, &["--setParameter", "ttlMonitorSleepSecs=1"]);
    let client = server.client().await;
    let db = client.database("tst");
    create_ts(&db, "ts", doc! { "expireAfterSeconds": 60 }).await;
    let now = DateTime::now().timestamp_millis();
    let c = db.collection::<Document>("ts");
    c.insert_many(vec![
        doc! { "t": DateTime::from_millis(now - 3 * HOUR_MS), "m": "old", "_id": 1 },
        doc! { "t": DateTime::from_millis(now), "m": "new", "_id": 2 },
    ])
    .await
    .unwrap();
    let admin = client.database("admin");
    let passes = |admin: mongodb::Database| async move {
        let st = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
        st.get_document("metrics")
            .unwrap()
            .get_document("ttl")
            .unwrap()
            .get_i64("passes")
            .unwrap()
    };
    let start = passes(admin.clone()).await;
    for _ in 0..100 {
        if passes(admin.clone()).await >= start + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<Document> = c.find(doc! {}).await.unwrap().try_collect().await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].get_i32("_id").unwrap(), 2);
}

#[tokio::test]
async fn acknowledged_inserts_survive_sigkill() {
    let mut server = Server::start(BIN, &[]);
    let docs = measurements(3, 1200);
    {
        let client = server.client().await;
        let db = client.database("tsk");
        create_ts(&db, "ts", doc! {}).await;
        for chunk in docs.chunks(300) {
            db.collection::<Document>("ts")
                .insert_many(chunk.to_vec())
                .await
                .unwrap();
        }
        db.collection::<Document>("ts")
            .insert_one(doc! { "t": at(1.0), "m": { "sensor": 9 }, "_id": 5000 })
            .await
            .unwrap();
    }
    server.restart_after_kill();
    let client = server.client().await;
    let db = client.database("tsk");
    let c = db.collection::<Document>("ts");
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1201);
    let mut got: Vec<Document> = c
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    got.pop();
    assert_eq!(normalized(got), normalized(docs));
    let listed = db.list_collection_names().await.unwrap();
    assert!(listed.contains(&"ts".to_string()), "{listed:?}");
}
