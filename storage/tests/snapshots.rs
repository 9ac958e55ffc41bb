//! Proves snapshots: a snapshot reads every collection as it was when it was taken, whatever is
//! committed after, and a write made against a snapshot conflicts when a later commit changed
//! its document. How: a seeded model of versioned maps (one copy of the two collections per open
//! snapshot) against random interleavings of batches, snapshot opens/closes and reads; then
//! threads doing snapshot-read-then-conflict-checked transfers while readers sum balances.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bson::{Document, doc};
use common::{raw, rng, seed, small_opts};
use rand::Rng;
use storage::{
    Collection, Direction, Engine, RecordId, Snapshot, StorageError, WriteOp, write_across,
    write_across_at,
};

type Model = [BTreeMap<RecordId, Document>; 2];

const STEPS: usize = 1_500;

fn decode(d: bson::RawDocumentBuf) -> Document {
    Document::try_from(d).expect("stored document decodes")
}

/// Every document of `c` as `snap` sees it, read in small steps.
fn snapshot_docs(
    c: &Collection,
    snap: &Snapshot,
    direction: Direction,
) -> BTreeMap<RecordId, Document> {
    let mut out = BTreeMap::new();
    let mut after = None;
    loop {
        let (docs, next) = c.scan_at(snap, direction, after, 5).expect("scan_at");
        for (rid, d) in docs {
            assert!(out.insert(rid, decode(d)).is_none(), "rid {rid} twice");
        }
        match next {
            Some(rid) => after = Some(rid),
            None => return out,
        }
    }
}

/// Random ops on the current model; `ops[i]` goes to collection `i`.
fn random_ops(r: &mut impl Rng, now: &Model, counter: &mut i64) -> [Vec<WriteOp<'static>>; 2] {
    let mut ops: [Vec<WriteOp<'static>>; 2] = Default::default();
    for _ in 0..r.random_range(1..4) {
        let c = r.random_range(0..2);
        let rids: Vec<RecordId> = now[c].keys().copied().collect();
        let touched = |ops: &Vec<WriteOp>, rid: RecordId| {
            ops.iter().any(|o| match o {
                WriteOp::Replace(x, _) | WriteOp::Update(x, _) | WriteOp::Delete(x) => *x == rid,
                WriteOp::Insert(_) => false,
            })
        };
        *counter += 1;
        let body = raw(&doc! {"_id": *counter, "pad": "x".repeat(r.random_range(0..200))});
        match r.random_range(0..4) {
            0 | 1 if !rids.is_empty() => {
                let rid = rids[r.random_range(0..rids.len())];
                if !touched(&ops[c], rid) {
                    ops[c].push(WriteOp::Replace(rid, body));
                }
            }
            2 if !rids.is_empty() => {
                let rid = rids[r.random_range(0..rids.len())];
                if !touched(&ops[c], rid) {
                    ops[c].push(WriteOp::Delete(rid));
                }
            }
            _ => ops[c].push(WriteOp::Insert(body.into())),
        }
    }
    ops
}

fn apply(model: &mut Model, ops: &[Vec<WriteOp>; 2], rids: &[RecordId]) {
    let mut rids = rids.iter();
    for (c, ops) in ops.iter().enumerate() {
        for op in ops {
            let rid = *rids.next().expect("one rid per op");
            match op.document() {
                Some(d) => {
                    model[c].insert(rid, decode(d.to_owned()));
                }
                None => {
                    model[c].remove(&rid);
                }
            }
        }
    }
}

fn parts<'a>(
    colls: &'a [Arc<Collection>; 2],
    ops: &[Vec<WriteOp<'static>>; 2],
) -> Vec<(&'a Collection, Vec<WriteOp<'static>>)> {
    colls
        .iter()
        .zip(ops)
        .filter(|(_, o)| !o.is_empty())
        .map(|(c, o)| (&**c, o.clone()))
        .collect()
}

#[test]
fn snapshots_match_a_model_of_versioned_maps() {
    let seed = seed("snapshots_match_a_model_of_versioned_maps");
    let mut r = rng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(dir.path(), small_opts()).expect("open");
    let colls = [
        e.create_collection("db", "a", doc! {}).expect("create a"),
        e.create_collection("other", "b", doc! {})
            .expect("create b"),
    ];
    let mut now: Model = Default::default();
    let mut open: Vec<(Snapshot, Model)> = Vec::new();
    let mut counter = 0i64;
    for step in 0..STEPS {
        match r.random_range(0..10) {
            0 if open.len() < 6 => open.push((e.snapshot().expect("snapshot"), now.clone())),
            1 if !open.is_empty() => drop(open.swap_remove(r.random_range(0..open.len()))),
            2 | 3 if !open.is_empty() => {
                let (snap, then) = &open[r.random_range(0..open.len())];
                let c = r.random_range(0..2);
                let dir = if r.random_bool(0.5) {
                    Direction::Forward
                } else {
                    Direction::Backward
                };
                assert_eq!(
                    snapshot_docs(&colls[c], snap, dir),
                    then[c],
                    "seed {seed} step {step}"
                );
                for _ in 0..20 {
                    let rid = r.random_range(0..counter as u64 + 2);
                    let got = colls[c].get_at(snap, rid).expect("get_at").map(decode);
                    assert_eq!(got.as_ref(), then[c].get(&rid), "seed {seed} step {step}");
                }
            }
            4 if !open.is_empty() => {
                // A write against a snapshot: it conflicts exactly when a later commit
                // changed one of the documents it replaces or deletes.
                let (snap, then) = &open[r.random_range(0..open.len())];
                let ops = random_ops(&mut r, &now, &mut counter);
                let stale = ops.iter().zip(then.iter().zip(&now)).any(|(ops, (t, n))| {
                    ops.iter().any(|o| match o {
                        WriteOp::Replace(rid, _)
                        | WriteOp::Update(rid, _)
                        | WriteOp::Delete(rid) => t.get(rid) != n.get(rid),
                        WriteOp::Insert(_) => false,
                    })
                });
                match write_across_at(parts(&colls, &ops), Some(snap), None) {
                    Ok(t) => {
                        assert!(!stale, "seed {seed} step {step}: a stale write committed");
                        apply(&mut now, &ops, &t.record_ids);
                    }
                    Err(StorageError::WriteConflict(_)) => {
                        assert!(stale, "seed {seed} step {step}: a false conflict")
                    }
                    Err(e) => panic!("seed {seed} step {step}: {e}"),
                }
            }
            _ => {
                let ops = random_ops(&mut r, &now, &mut counter);
                let t = write_across(parts(&colls, &ops)).expect("write");
                apply(&mut now, &ops, &t.record_ids);
            }
        }
    }
    drop(open);
    assert_eq!(
        e.snapshot_stats(),
        (0, 0),
        "closing every snapshot frees its images"
    );
}

const ACCOUNTS: i64 = 8;
const BALANCE: i64 = 100;
const TRANSFERS_PER_THREAD: usize = 150;

/// A transfer as a transaction does it: read both accounts in a snapshot, write both against it.
fn transfer(e: &Engine, c: &Collection, rids: &[RecordId], r: &mut impl Rng) -> bool {
    let snap = e.snapshot().expect("snapshot");
    let from = rids[r.random_range(0..rids.len())];
    let to = rids[r.random_range(0..rids.len())];
    if from == to {
        return true;
    }
    let moved = |rid, by: i64| {
        let mut d = decode(
            c.get_at(&snap, rid)
                .expect("get_at")
                .expect("account exists"),
        );
        let b = d.get_i64("b").expect("b");
        d.insert("b", b + by);
        WriteOp::Update(rid, raw(&d))
    };
    let ops = vec![moved(from, -1), moved(to, 1)];
    match write_across_at(vec![(c, ops)], Some(&snap), None) {
        Ok(_) => true,
        Err(StorageError::WriteConflict(_)) => false,
        Err(e) => panic!("transfer: {e}"),
    }
}

#[test]
fn concurrent_transfers_keep_the_total_in_every_snapshot() {
    let seed = seed("concurrent_transfers_keep_the_total_in_every_snapshot");
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Arc::new(Engine::open(dir.path(), small_opts()).expect("open"));
    let c = e
        .create_collection("bank", "accounts", doc! {})
        .expect("create");
    let inserts = (0..ACCOUNTS)
        .map(|i| WriteOp::Insert(raw(&doc! {"_id": i, "b": BALANCE}).into()))
        .collect();
    let rids = c.write(inserts).expect("accounts").record_ids;
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (e, c, done) = (e.clone(), c.clone(), done.clone());
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !done.load(Ordering::Acquire) || checks == 0 {
                let snap = e.snapshot().expect("snapshot");
                let total: i64 = snapshot_docs(&c, &snap, Direction::Forward)
                    .values()
                    .map(|d| d.get_i64("b").expect("b"))
                    .sum();
                assert_eq!(total, ACCOUNTS * BALANCE, "a snapshot saw a half transfer");
                checks += 1;
            }
            checks
        })
    };
    let writers: Vec<_> = (0..3u64)
        .map(|t| {
            let (e, c, rids) = (e.clone(), c.clone(), rids.clone());
            std::thread::spawn(move || {
                let mut r = rng(seed ^ t);
                let mut committed = 0;
                while committed < TRANSFERS_PER_THREAD {
                    committed += usize::from(transfer(&e, &c, &rids, &mut r));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    done.store(true, Ordering::Release);
    assert!(reader.join().expect("reader") > 0);
    let total: i64 = common::all_docs(&c)
        .values()
        .map(|d| d.get_i64("b").expect("b"))
        .sum();
    assert_eq!(total, ACCOUNTS * BALANCE, "a transfer was lost or doubled");
    assert_eq!(e.snapshot_stats(), (0, 0));
}
