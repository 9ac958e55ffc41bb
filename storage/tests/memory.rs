//! Proves the buffer pool holds the engine's page memory to the cache setting: index and record
//! trees several times larger than a 1 MiB cache are loaded, read at random and scanned while a
//! sampler thread reads the pool's own accounting; it never exceeds the setting by more than the
//! pages concurrent operations pin. How: a temp directory, `EngineStats::cache` sampled every
//! millisecond.

mod common;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bson::doc;
use common::{raw, rng, seed};
use rand::Rng;
use storage::{Direction, Engine, EngineOptions, IndexSpec, WriteOp};

const CACHE_BYTES: u64 = 1 << 20;
/// Pages pinned at once by one operation (a root-to-leaf path, a split's new pages) times the
/// threads using the engine here, as bytes.
const SLACK_BYTES: u64 = 64 * 4096;

#[test]
fn page_memory_stays_within_the_cache_setting() {
    let mut rng = rng(seed("page_memory_stays_within_the_cache_setting"));
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(
        Engine::open(
            dir.path(),
            EngineOptions {
                cache_size_bytes: CACHE_BYTES,
                checkpoint_interval_ms: 200,
                ..EngineOptions::default()
            },
        )
        .expect("open"),
    );
    let c = engine
        .create_collection("db", "m", doc! {})
        .expect("create");
    for (name, field) in [("a_1", "a"), ("b_1", "b")] {
        let spec = IndexSpec {
            name: name.into(),
            key: doc! {field: 1},
            ..IndexSpec::default()
        };
        engine
            .create_index("db", "m", spec, &|_, _| {})
            .expect("index");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (engine, stop, peak) = (engine.clone(), stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                peak.fetch_max(engine.stats().cache.bytes_current, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let n = 30_000i64;
    for chunk in 0..n / 500 {
        let ops = (chunk * 500..(chunk + 1) * 500)
            .map(|i| {
                WriteOp::Insert(
                    raw(&doc! {
                        "_id": i,
                        "a": format!("user-{:08}", (i * 7919) % n),
                        "b": (i * 104_729) % 1_000_003,
                    })
                    .into(),
                )
            })
            .collect();
        c.write(ops).expect("load");
    }
    let tree_bytes: u64 =
        c.indexes().iter().map(|i| i.size_bytes).sum::<u64>() + c.record_tree_bytes();
    assert!(
        tree_bytes > 4 * CACHE_BYTES,
        "trees of {tree_bytes} bytes are not much larger than the cache"
    );
    for _ in 0..2000 {
        let id = rng.random_range(0..n);
        let holder = raw(&doc! {"x": id});
        let rid = c
            .find_by_id(holder.get("x").expect("x").expect("x"))
            .expect("find");
        assert!(c.get(rid.expect("present")).expect("get").is_some());
    }
    let mut after = None;
    let mut seen = 0;
    loop {
        let page = c
            .index_scan(
                "b_1",
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
                after
                    .as_ref()
                    .map(|(k, r): &(Vec<u8>, u64)| (k.as_slice(), *r)),
                1000,
            )
            .expect("scan");
        let Some(last) = page.last().cloned() else {
            break;
        };
        seen += page.len();
        after = Some(last);
    }
    assert_eq!(seen as i64, n);
    stop.store(true, Ordering::Release);
    sampler.join().expect("sampler");
    let s = engine.stats();
    let peak = peak.load(Ordering::Relaxed);
    eprintln!(
        "cache max {} B, peak {peak} B, trees {tree_bytes} B, read {} evicted {}",
        s.cache.bytes_max, s.cache.pages_read, s.cache.pages_evicted
    );
    assert!(s.cache.bytes_max <= CACHE_BYTES);
    assert!(
        peak <= s.cache.bytes_max + SLACK_BYTES,
        "pool held {peak} bytes with a setting of {}",
        s.cache.bytes_max
    );
    assert!(s.cache.pages_evicted > 0 && s.cache.pages_read > 0);
}
