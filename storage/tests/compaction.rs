//! Proves compaction keeps every document and bounds disk use under a steady update load, with
//! the background compactor running and after reopen. How: 200 documents rewritten 40 times on a
//! real directory with small segments; after each round compaction empties what it can and two
//! checkpoints let it delete the emptied segments; log bytes are checked against live bytes.

mod common;

use std::collections::BTreeMap;

use bson::{Document, doc};
use common::{all_docs, raw};
use storage::{Engine, EngineOptions, WriteOp};

const DOCS: i64 = 200;
const ROUNDS: i64 = 40;

fn opts() -> EngineOptions {
    EngineOptions {
        segment_size_bytes: 64 << 10,
        background_compaction: true,
        ..EngineOptions::default()
    }
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").metadata().expect("meta").len())
        .sum()
}

/// Collection `db.c` with `DOCS` documents of 500 padding bytes: (the collection, each
/// document by its RecordId).
fn load(engine: &Engine) -> (std::sync::Arc<storage::Collection>, Vec<(u64, Document)>) {
    let c = engine
        .create_collection("db", "c", doc! {})
        .expect("create");
    let docs: Vec<Document> = (0..DOCS)
        .map(|i| doc! {"_id": i, "r": 0, "pad": "c".repeat(500)})
        .collect();
    let t = c
        .write(
            docs.iter()
                .map(|d| WriteOp::Insert(raw(d).into()))
                .collect(),
        )
        .expect("insert");
    let loaded = t.record_ids.into_iter().zip(docs).collect();
    (c, loaded)
}

#[test]
fn compaction_keeps_data_and_bounds_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model: BTreeMap<u64, Document> = BTreeMap::new();
    {
        let engine = Engine::open(dir.path(), opts()).expect("open");
        let (c, loaded) = load(&engine);
        model.extend(loaded);
        let mut worst = 0f64;
        for round in 1..=ROUNDS {
            for (rid, d) in model.iter_mut() {
                d.insert("r", round);
                c.write(vec![WriteOp::Replace(*rid, raw(d))])
                    .expect("replace");
            }
            engine.flush().expect("flush");
            while engine.compact().expect("compact") {}
            // An emptied segment goes once both meta slots hold later checkpoints.
            engine.checkpoint().expect("checkpoint");
            engine.checkpoint().expect("checkpoint");
            let s = engine.stats();
            worst = worst.max(s.log_bytes as f64 / s.live_bytes.max(1) as f64);
        }
        let s = engine.stats();
        assert!(
            worst < 2.5,
            "log/live ratio stayed bounded, worst {worst:.2} ({s:?})"
        );
        let on_disk = dir_bytes(dir.path());
        let live = s.live_bytes;
        assert!(
            on_disk < 2 * live + 3 * (64 << 10),
            "directory {on_disk} bytes for {live} live bytes"
        );
        assert_eq!(all_docs(&c), model);
        engine.close().expect("close");
    }
    let engine = Engine::open(dir.path(), opts()).expect("reopen");
    assert_eq!(
        all_docs(&engine.collection("db", "c").expect("coll")),
        model
    );
}

/// `autoCompact: false`: the background pass leaves dead space alone; back on, it reclaims it.
#[test]
fn background_compaction_obeys_auto_compact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(
        dir.path(),
        EngineOptions {
            segment_size_bytes: 64 << 10,
            background_compaction: false,
            ..EngineOptions::default()
        },
    )
    .expect("open");
    let (c, docs) = load(&engine);
    for round in 1..=20 {
        for (rid, d) in &docs {
            let mut d = d.clone();
            d.insert("r", round);
            c.write(vec![WriteOp::Replace(*rid, raw(&d))])
                .expect("replace");
        }
    }
    engine.flush().expect("flush");
    engine.set_auto_compact(false);
    assert!(!engine.auto_compact());
    assert!(!engine.background_compaction_pass().expect("pass"));
    assert_eq!(engine.stats().segments_compacted, 0);
    engine.set_auto_compact(true);
    assert!(engine.background_compaction_pass().expect("pass"));
    assert!(engine.stats().segments_compacted > 0);
}
