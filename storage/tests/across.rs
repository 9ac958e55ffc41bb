//! Proves `write_across`: one batch over two collections is applied whole or not at all: a
//! unique-index failure in the second collection leaves the first untouched, a crash at any sync
//! point recovers both collections at the same batch boundary, and the write history shows each
//! batch once with both collections' ops. How: a seeded workload of transfers (one update in
//! each collection, the sum of `v` over both kept at zero) with deliberate duplicates, run on the
//! simulated backend and checked against a model of two maps, once per crash point.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bson::{Document, doc};
use common::{all_docs, raw, rng, seed, small_opts, try_all_docs};
use rand::Rng;
use storage::sim::SimBackend;
use storage::{EngineOptions, IndexSpec, StorageError, WriteOp, write_across};

type Model = BTreeMap<u64, Document>;
type Pair = (Model, Model);

const ACCOUNTS: i64 = 6;
const ROUNDS: usize = 60;
const RUNS_MAX: u64 = 40;

fn opts() -> EngineOptions {
    EngineOptions {
        history_bytes: Some(8 << 20),
        ..small_opts()
    }
}

fn unique_u() -> IndexSpec {
    IndexSpec {
        name: "u_1".into(),
        key: doc! {"u": 1},
        unique: true,
        ..IndexSpec::default()
    }
}

fn sum(p: &Pair) -> i64 {
    p.0.values()
        .chain(p.1.values())
        .map(|d| d.get_i64("v").expect("v"))
        .sum()
}

/// Runs the workload until it ends or the backend crashes: (acked, in-flight) models.
fn workload(sim: &SimBackend, seed: u64, rounds_done: &mut usize) -> (Pair, Pair) {
    let mut acked: Pair = Default::default();
    let Ok(e) = storage::Engine::open_with_backend(Arc::new(sim.clone()), opts()) else {
        return (acked.clone(), acked);
    };
    let (Ok(a), Ok(b)) = (
        e.create_collection("db", "a", doc! {}),
        e.create_collection("other", "b", doc! {}),
    ) else {
        return (acked.clone(), acked);
    };
    if e.create_index("other", "b", unique_u(), &|_, _| {})
        .is_err()
    {
        return (acked.clone(), acked);
    }
    // One account per collection and number, `u` unique in b.
    let seed_ops = |i: i64| WriteOp::Insert(raw(&doc! {"_id": i, "u": i, "v": 0i64}).into());
    let Ok(t) = write_across(vec![
        (&a, (0..ACCOUNTS).map(seed_ops).collect()),
        (&b, (0..ACCOUNTS).map(seed_ops).collect()),
    ]) else {
        return (acked.clone(), acked);
    };
    let n = ACCOUNTS as usize;
    let mut pending = acked.clone();
    for (i, rid) in t.record_ids.iter().enumerate() {
        let m = if i < n {
            &mut pending.0
        } else {
            &mut pending.1
        };
        m.insert(
            *rid,
            doc! {"_id": (i % n) as i64, "u": (i % n) as i64, "v": 0i64},
        );
    }
    if t.wait_durable_blocking().is_err() {
        return (acked, pending);
    }
    acked = pending;
    let mut rng = rng(seed);
    for round in 0..ROUNDS {
        if round % 15 == 14 && e.checkpoint().is_err() {
            break;
        }
        let ra = *acked
            .0
            .keys()
            .nth(rng.random_range(0..n))
            .expect("a account");
        let rb = *acked
            .1
            .keys()
            .nth(rng.random_range(0..n))
            .expect("b account");
        let amount = rng.random_range(1..100i64);
        let mut da = acked.0[&ra].clone();
        let mut db = acked.1[&rb].clone();
        da.insert("v", da.get_i64("v").expect("v") - amount);
        da.insert("pad", "p".repeat(rng.random_range(0..300)));
        db.insert("v", db.get_i64("v").expect("v") + amount);
        // Every fifth transfer also moves b's account onto a `u` another account holds.
        let clash = round % 5 == 4;
        if clash {
            let other = (db.get_i64("u").expect("u") + 1) % ACCOUNTS;
            db.insert("u", other);
        }
        let r = write_across(vec![
            (&a, vec![WriteOp::Update(ra, raw(&da))]),
            (&b, vec![WriteOp::Update(rb, raw(&db))]),
        ]);
        let t = match r {
            Ok(t) => t,
            Err(StorageError::DuplicateKey { .. }) if clash => {
                *rounds_done += 1;
                continue;
            }
            Err(_) => break,
        };
        assert!(!clash, "a duplicate `u` in b fails the whole batch");
        let mut pending = acked.clone();
        pending.0.insert(ra, da);
        pending.1.insert(rb, db);
        if t.wait_durable_blocking().is_err() {
            return (acked, pending);
        }
        acked = pending;
        *rounds_done += 1;
        // A background sync (a checkpoint) may hit the crash point after the round was
        // durable; page reads fail from then on, and the run ends there.
        match (try_all_docs(&a), try_all_docs(&b)) {
            (Ok(da), Ok(db)) => {
                assert_eq!(da, acked.0, "a after round {round}");
                assert_eq!(db, acked.1, "b after round {round}");
            }
            _ if sim.has_crashed() => return (acked.clone(), acked),
            (Err(e), _) | (_, Err(e)) => panic!("scan after round {round}: {e}"),
        }
    }
    let pending = acked.clone();
    (acked, pending)
}

fn recovered(sim: &SimBackend) -> Pair {
    let e = storage::Engine::open_with_backend(Arc::new(sim.clone()), opts()).expect("recovers");
    let docs = |db: &str, c: &str| {
        e.collection(db, c)
            .map(|c| all_docs(&c))
            .unwrap_or_default()
    };
    let got = (docs("db", "a"), docs("other", "b"));
    if let Some(c) = e.collection("other", "b") {
        let report = c.validate().expect("validate");
        assert!(report.problems.is_empty(), "b: {:?}", report.problems);
    }
    got
}

#[test]
fn batches_across_collections_are_whole_at_every_crash_point() {
    let seed = seed("batches_across_collections_are_whole_at_every_crash_point");
    let clean = SimBackend::new();
    let mut rounds = 0;
    let (full, _) = workload(&clean, seed, &mut rounds);
    assert_eq!(rounds, ROUNDS, "the uncrashed workload runs to its end");
    assert_eq!(full.0.len(), ACCOUNTS as usize);
    assert_eq!(sum(&full), 0, "transfers keep the total");
    history_shows_each_batch_once(&clean_engine(&clean));
    let syncs = clean.sync_count();
    let step = syncs.div_ceil(RUNS_MAX).max(1);
    let mut torn_rng = rng(seed ^ 0xacc);
    let mut crashed = 0;
    for k in (1..=syncs).step_by(step as usize) {
        let sim = SimBackend::new();
        sim.crash_at_sync(k);
        let (acked, pending) = workload(&sim, seed, &mut 0);
        if !sim.has_crashed() {
            continue;
        }
        crashed += 1;
        let torn = [0.0, 0.5, 1.0][torn_rng.random_range(0..3)];
        let got = recovered(&sim.crash_image(torn));
        assert!(
            got == acked || got == pending,
            "crash at sync {k} (torn {torn}): a and b recovered at different batches"
        );
        if !got.0.is_empty() {
            assert_eq!(sum(&got), 0, "crash at sync {k}: the total moved");
        }
    }
    assert!(
        crashed > 10,
        "only {crashed} of {syncs} sync points crashed"
    );
}

fn clean_engine(sim: &SimBackend) -> storage::Engine {
    storage::Engine::open_with_backend(Arc::new(sim.clone()), opts()).expect("reopen")
}

/// Each transfer batch still in the history appears once, with one op in each collection and
/// consecutive timestamps.
fn history_shows_each_batch_once(e: &storage::Engine) {
    let ns = |id: u64| e.collection_by_id(id).expect("collection").namespace();
    let want = vec![
        ("db".to_string(), "a".to_string()),
        ("other".into(), "b".into()),
    ];
    let mut pos = e.history_start();
    let mut transfers = 0;
    loop {
        let read = e.history_read(pos, 100, 1 << 20).expect("history");
        for batch in &read.batches {
            let updates: Vec<(String, String)> = batch
                .ops
                .iter()
                .filter(|o| o.code == storage::record::OP_UPDATE)
                .map(|o| ns(o.collection_id))
                .collect();
            if !updates.is_empty() {
                assert_eq!(updates, want, "a transfer is one batch: a's op, then b's");
                transfers += 1;
            }
        }
        if read.batches.is_empty() {
            break;
        }
        pos = read.next;
    }
    // Checkpoints let old log segments go, so only the latest transfers are still there.
    assert!(transfers > 0, "no transfer batch in the history");
}

#[test]
fn bad_batches_are_refused_and_change_nothing() {
    let sim = SimBackend::new();
    let e = clean_engine(&sim);
    let a = e.create_collection("db", "a", doc! {}).expect("a");
    let b = e.create_collection("db", "b", doc! {}).expect("b");
    let ins = |i: i64| WriteOp::Insert(raw(&doc! {"_id": i}).into());
    assert!(matches!(
        write_across(vec![]),
        Err(StorageError::InvalidDocument(_))
    ));
    assert!(matches!(
        write_across(vec![(&a, vec![ins(1)]), (&a, vec![ins(2)])]),
        Err(StorageError::InvalidNamespace(_))
    ));
    // A duplicate _id in b's part (against b's own earlier op) undoes a's part too.
    assert!(matches!(
        write_across(vec![(&a, vec![ins(1)]), (&b, vec![ins(7), ins(7)])]),
        Err(StorageError::DuplicateKey { .. })
    ));
    assert_eq!((a.count(), b.count()), (0, 0));
    // a's _id index kept nothing of the failed batch: the same insert now succeeds.
    let t = write_across(vec![(&b, vec![ins(7)]), (&a, vec![ins(1)])]).expect("write");
    t.wait_durable_blocking().expect("durable");
    assert_eq!(t.record_ids.len(), 2, "one RecordId per op, b's then a's");
    assert_eq!(
        b.get(t.record_ids[0])
            .expect("get")
            .expect("b doc")
            .get_i64("_id")
            .ok(),
        Some(7)
    );
    assert_eq!(
        a.get(t.record_ids[1])
            .expect("get")
            .expect("a doc")
            .get_i64("_id")
            .ok(),
        Some(1)
    );
    e.drop_collection("db", "b").expect("drop");
    assert!(matches!(
        write_across(vec![(&a, vec![ins(2)]), (&b, vec![ins(8)])]),
        Err(StorageError::NamespaceNotFound(_))
    ));
    assert_eq!(a.count(), 1, "a refused batch leaves a as it was");
}
