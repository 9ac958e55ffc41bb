//! Proves readers see whole batches only and never wait for a sync, while several writers share
//! group commits. How: writer threads insert 10-document batches into one collection while a
//! reader checks that the count and a full scan are always multiples of 10; then every write
//! must be durable and present.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bson::doc;
use common::raw;
use storage::{Direction, Engine, EngineOptions, WriteOp};

const WRITERS: i64 = 3;
const BATCHES: i64 = 40;
const BATCH_DOCS: i64 = 10;

#[test]
fn readers_see_whole_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = EngineOptions {
        segment_size_bytes: 64 << 10,
        ..EngineOptions::default()
    };
    let engine = Arc::new(Engine::open(dir.path(), opts).expect("open"));
    let c = engine
        .create_collection("db", "c", doc! {})
        .expect("create");
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (c, done) = (c.clone(), done.clone());
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !done.load(Ordering::Acquire) || checks == 0 {
                assert_eq!(
                    c.count() % BATCH_DOCS as u64,
                    0,
                    "count saw part of a batch"
                );
                let n = c
                    .scan(Direction::Forward, None, 1 << 20)
                    .expect("scan")
                    .len();
                assert_eq!(n % BATCH_DOCS as usize, 0, "scan saw part of a batch");
                checks += 1;
            }
            checks
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let c = c.clone();
            std::thread::spawn(move || {
                for b in 0..BATCHES {
                    let ops = (0..BATCH_DOCS)
                        .map(|i| {
                            WriteOp::Insert(
                                raw(&doc! {"_id": (w * BATCHES + b) * BATCH_DOCS + i}).into(),
                            )
                        })
                        .collect();
                    c.write(ops)
                        .expect("write")
                        .wait_durable_blocking()
                        .expect("durable");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    done.store(true, Ordering::Release);
    assert!(reader.join().expect("reader") > 0);
    assert_eq!(c.count(), (WRITERS * BATCHES * BATCH_DOCS) as u64);
    let stats = engine.stats();
    assert_eq!(stats.durable_sequence, stats.last_sequence);
}
