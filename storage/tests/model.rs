//! Proves the engine behaves like a plain ordered map across inserts, replaces, deletes, gets,
//! scans, index scans, checkpoints, compaction, crashes and reboots. How: a seeded random
//! sequence (CAIRN_SEED replays one) runs against the engine on the simulated backend with a
//! 16-page cache (eviction and reads back every few operations) and against a BTreeMap,
//! compared at every step.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bson::{Bson, Document, doc};
use common::{all_docs, raw, rng, seed, small_opts};
use rand::Rng;
use storage::sim::SimBackend;
use storage::{Direction, Engine, IndexSpec, WriteOp, encode_index_key};

const STEPS: usize = 1500;

fn open(sim: &SimBackend) -> Engine {
    Engine::open_with_backend(Arc::new(sim.clone()), small_opts()).expect("open")
}

fn spec_v() -> IndexSpec {
    IndexSpec {
        name: "v_1".into(),
        key: doc! {"v": 1},
        ..IndexSpec::default()
    }
}

fn check_index(c: &storage::Collection, model: &BTreeMap<u64, Document>, v: i32) {
    let k = encode_index_key(&doc! {"v": 1}, &[Bson::Int32(v)]);
    let got: Vec<u64> = c
        .index_scan(
            "v_1",
            Bound::Included(&k),
            Bound::Included(&k),
            Direction::Forward,
            None,
            1000,
        )
        .expect("index scan")
        .into_iter()
        .map(|e| e.1)
        .collect();
    let want: Vec<u64> = model
        .iter()
        .filter(|(_, d)| d.get_i32("v").ok() == Some(v))
        .map(|(r, _)| *r)
        .collect();
    assert_eq!(got, want, "index entries for v={v}");
}

#[test]
fn model_with_reboots() {
    let seed = seed("model_with_reboots");
    let mut rng = rng(seed);
    let mut sim = SimBackend::new();
    let mut engine = open(&sim);
    let mut c = engine
        .create_collection("db", "m", doc! {})
        .expect("create");
    engine
        .create_index("db", "m", spec_v(), &|_, _| {})
        .expect("index");
    let mut model: BTreeMap<u64, Document> = BTreeMap::new();
    let mut next_id = 0i64;
    let mut compactions = 0;
    // Evictions and read-backs summed over every engine the run opened: the last one alone may
    // have lived a few steps (a reboot near the end), which made this check depend on the seed.
    let (mut evicted, mut read_back) = (0u64, 0u64);
    let mut count_cache = |e: &Engine| {
        let cache = e.stats().cache;
        evicted += cache.pages_evicted;
        read_back += cache.pages_read;
    };
    for step in 0..STEPS {
        let live: Vec<u64> = model.keys().copied().collect();
        let pick = |rng: &mut rand::rngs::StdRng| live[rng.random_range(0..live.len())];
        match rng.random_range(0..100) {
            0..35 => {
                let n = rng.random_range(1..4);
                let docs: Vec<Document> = (0..n)
                    .map(|_| {
                        next_id += 1;
                        let pad = "x".repeat(rng.random_range(0..300));
                        doc! {"_id": next_id, "v": rng.random_range(0..20), "pad": pad}
                    })
                    .collect();
                let t = c
                    .write(
                        docs.iter()
                            .map(|d| WriteOp::Insert(raw(d).into()))
                            .collect(),
                    )
                    .expect("insert");
                for (rid, d) in t.record_ids.iter().zip(docs) {
                    model.insert(*rid, d);
                }
            }
            35..55 if !live.is_empty() => {
                let rid = pick(&mut rng);
                let mut d = model[&rid].clone();
                d.insert("v", rng.random_range(0..20));
                c.write(vec![WriteOp::Replace(rid, raw(&d))])
                    .expect("replace");
                model.insert(rid, d);
            }
            55..70 if !live.is_empty() => {
                let rid = pick(&mut rng);
                c.write(vec![WriteOp::Delete(rid)]).expect("delete");
                model.remove(&rid);
            }
            70..85 if !live.is_empty() => {
                let rid = pick(&mut rng);
                let got = c
                    .get(rid)
                    .expect("get")
                    .map(|d| Document::try_from(d).expect("decode"));
                assert_eq!(got.as_ref(), model.get(&rid), "step {step} get {rid}");
                let id = model[&rid].get("_id").cloned().expect("_id");
                let raw_id = raw(&doc! {"x": id});
                assert_eq!(
                    c.find_by_id(raw_id.get("x").expect("x").expect("x"))
                        .expect("find"),
                    Some(rid)
                );
            }
            85..93 => {
                let after = live.get(rng.random_range(0..live.len().max(1))).copied();
                let limit = rng.random_range(1..20);
                let dir = if rng.random_bool(0.5) {
                    Direction::Forward
                } else {
                    Direction::Backward
                };
                let got: Vec<u64> = c
                    .scan(dir, after, limit)
                    .expect("scan")
                    .into_iter()
                    .map(|x| x.0)
                    .collect();
                let want: Vec<u64> = match dir {
                    Direction::Forward => model
                        .range((
                            after.map_or(Bound::Unbounded, Bound::Excluded),
                            Bound::Unbounded,
                        ))
                        .take(limit)
                        .map(|x| *x.0)
                        .collect(),
                    Direction::Backward => model
                        .range((
                            Bound::Unbounded,
                            after.map_or(Bound::Unbounded, Bound::Excluded),
                        ))
                        .rev()
                        .take(limit)
                        .map(|x| *x.0)
                        .collect(),
                };
                assert_eq!(got, want, "step {step} scan");
                check_index(&c, &model, rng.random_range(0..20));
            }
            93..95 => {
                engine.checkpoint().expect("checkpoint");
            }
            95..97 => {
                compactions += usize::from(engine.compact().expect("compact"));
            }
            97 => {
                // Power cut after a flush: reopen from the last checkpoint plus the log tail.
                engine.flush().expect("flush");
                let image = sim.crash_image(0.0);
                drop(c);
                count_cache(&engine);
                drop(engine);
                sim = image;
                engine = open(&sim);
                c = engine
                    .collection("db", "m")
                    .expect("collection after crash");
                check_index(&c, &model, rng.random_range(0..20));
            }
            _ => {
                count_cache(&engine);
                engine.close().expect("close");
                drop(c);
                drop(engine);
                engine = open(&sim);
                c = engine
                    .collection("db", "m")
                    .expect("collection after reboot");
            }
        }
        assert_eq!(c.count(), model.len() as u64, "step {step} count");
        if step % 25 == 0 {
            assert_eq!(all_docs(&c), model, "step {step} full compare");
            let leaks = engine.check_page_accounting().expect("accounting");
            assert!(leaks.is_empty(), "step {step}: {leaks:?}");
        }
    }
    assert_eq!(all_docs(&c), model);
    assert!(compactions > 0, "the workload compacted at least once");
    count_cache(&engine);
    assert!(
        evicted > 0 && read_back > 0,
        "the cache was small enough to evict and read back: {evicted} evicted, {read_back} read"
    );
}
