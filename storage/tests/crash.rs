//! Proves that a crash at any sync point (log, page file, meta flip) loses nothing acknowledged
//! and applies batches whole. How: a seeded workload with checkpoints and compaction over a
//! 16-page cache runs on the simulated backend once to count syncs, then once per sync point with
//! a crash armed there; the recovered state must equal the model after the last acknowledged
//! write, or after the write in flight when the crash hit, and the index must match it. With a
//! write history (stamped batches), the history read back must also rebuild exactly that state,
//! and with pre-images kept each replace and delete in it must carry the version it replaced.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bson::{Document, doc};
use common::{all_docs, raw, rng, seed, small_opts};
use rand::Rng;
use rand::rngs::StdRng;
use std::ops::Bound;
use storage::sim::SimBackend;

use storage::{Direction, Engine, EngineOptions, IndexSpec, WriteOp};

const OPS: usize = 120;
const RUNS_MAX: u64 = 160;

type Model = BTreeMap<u64, Document>;

/// Runs the workload until it ends or the backend crashes. Returns (acked, in-flight) models.
fn workload(sim: &SimBackend, seed: u64, opts: &EngineOptions, pre_images: bool) -> (Model, Model) {
    let mut rng: StdRng = rng(seed);
    let mut acked = Model::new();
    let Ok(engine) = Engine::open_with_backend(Arc::new(sim.clone()), opts.clone()) else {
        return (acked.clone(), acked);
    };
    let options = if pre_images {
        doc! {"changeStreamPreAndPostImages": {"enabled": true}}
    } else {
        doc! {}
    };
    let Ok(c) = engine.create_collection("db", "c", options) else {
        return (acked.clone(), acked);
    };
    let spec = IndexSpec {
        name: "u_1".into(),
        key: doc! {"u": 1},
        unique: true,
        ..IndexSpec::default()
    };
    if engine.create_index("db", "c", spec, &|_, _| {}).is_err() {
        return (acked.clone(), acked);
    }
    let mut next = 0i64;
    for _ in 0..OPS {
        let mut pending = acked.clone();
        let live: Vec<u64> = acked.keys().copied().collect();
        let ops: Vec<WriteOp> = match rng.random_range(0..10) {
            0..5 => (0..rng.random_range(1..5))
                .map(|_| {
                    next += 1;
                    WriteOp::Insert(raw(
                        &doc! {"_id": next, "u": next, "pad": "p".repeat(rng.random_range(0..400))},
                    ).into())
                })
                .collect(),
            5..7 if !live.is_empty() => {
                let rid = live[rng.random_range(0..live.len())];
                let mut d = acked[&rid].clone();
                d.insert("pad", "q".repeat(rng.random_range(0..400)));
                vec![WriteOp::Replace(rid, raw(&d))]
            }
            7..9 if !live.is_empty() => {
                vec![WriteOp::Delete(live[rng.random_range(0..live.len())])]
            }
            9 => {
                // A checkpoint: page writes, a page-file sync, the meta flip, another sync.
                if engine.checkpoint().is_err() {
                    break;
                }
                continue;
            }
            _ => {
                if engine.compact().is_err() {
                    break;
                }
                continue;
            }
        };
        let Ok(t) = c.write(ops.clone()) else { break };
        for (op, rid) in ops.iter().zip(&t.record_ids) {
            match op.document() {
                Some(d) => {
                    pending.insert(*rid, Document::try_from(d).expect("decode"));
                }
                None => {
                    pending.remove(rid);
                }
            }
        }
        if t.wait_durable_blocking().is_err() {
            return (acked, pending);
        }
        acked = pending;
    }
    let pending = acked.clone();
    (acked, pending)
}

fn recovered(sim: &SimBackend, opts: &EngineOptions, pre_images: bool) -> Model {
    let engine =
        Engine::open_with_backend(Arc::new(sim.clone()), opts.clone()).expect("recovery succeeds");
    let Some(c) = engine.collection("db", "c") else {
        return Model::new();
    };
    let docs = all_docs(&c);
    if opts.history_bytes.is_some() {
        assert_eq!(
            from_history(&engine, pre_images).0,
            docs,
            "the history rebuilds the documents"
        );
    }
    let problems = engine.check_page_accounting().expect("accounting");
    assert!(problems.is_empty(), "pages after recovery: {problems:?}");
    let report = c.validate().expect("validate");
    assert!(
        report.problems.is_empty(),
        "validate after recovery: {:?}",
        report.problems
    );
    // The unique index holds exactly one entry per document, pointing at it.
    let scan = c.index_scan(
        "u_1",
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
        None,
        100_000,
    );
    let Ok(entries) = scan else {
        assert!(docs.is_empty(), "the index is created before any insert");
        return docs;
    };
    let mut from_index: Vec<u64> = entries.iter().map(|e| e.1).collect();
    from_index.sort_unstable();
    assert_eq!(
        from_index,
        docs.keys().copied().collect::<Vec<_>>(),
        "u_1 matches the documents"
    );
    docs
}

/// The documents of `db.c` rebuilt from the write history alone; timestamps must increase.
/// With `pre_images`, every replace and delete must carry exactly the version it replaced and
/// an insert none. Also returns how many pre-images it checked.
fn from_history(engine: &Engine, pre_images: bool) -> (Model, usize) {
    let mut model = Model::new();
    let mut images = 0;
    let mut last_ts = 0;
    let mut coll_id = None;
    let mut pos = engine.history_start();
    loop {
        let read = engine
            .history_read(pos, 100, 1 << 20)
            .expect("history read");
        for b in &read.batches {
            for (i, op) in b.ops.iter().enumerate() {
                let ts = b.timestamp + i as u64;
                assert!(ts > last_ts, "timestamps increase");
                last_ts = ts;
                if op.code == storage::record::OP_COMMAND {
                    let note = op.details.as_ref().expect("note");
                    if note.get_str("op").ok() == Some("create")
                        && note.get_str("coll").ok() == Some("c")
                    {
                        coll_id = Some(op.collection_id);
                    }
                    continue;
                }
                if Some(op.collection_id) != coll_id {
                    continue;
                }
                let before = model.get(&op.record_id);
                let image = op
                    .pre_image
                    .as_ref()
                    .map(|d| Document::try_from(d.clone()).expect("pre-image"));
                if pre_images {
                    assert_eq!(image.as_ref(), before, "pre-image of {}", op.record_id);
                    images += usize::from(image.is_some());
                } else {
                    assert!(image.is_none(), "no pre-images unless the option is on");
                }
                match &op.document {
                    Some(d) => {
                        model.insert(op.record_id, Document::try_from(d.clone()).expect("doc"));
                    }
                    None => {
                        model.remove(&op.record_id);
                    }
                }
            }
        }
        if read.batches.is_empty() {
            return (model, images);
        }
        pos = read.next;
    }
}

#[test]
fn crash_at_every_sync_point() {
    crash_at_every_sync_point_with(small_opts(), false, "crash_at_every_sync_point");
}

#[test]
fn crash_at_every_sync_point_with_history() {
    let opts = EngineOptions {
        history_bytes: Some(8 << 20),
        ..small_opts()
    };
    crash_at_every_sync_point_with(opts, false, "crash_at_every_sync_point_with_history");
}

/// Pre-image records (`Kind::PreImage`) ride in the same batches as the writes they describe:
/// a crash keeps or drops both.
#[test]
fn crash_at_every_sync_point_with_pre_images() {
    let opts = EngineOptions {
        history_bytes: Some(8 << 20),
        ..small_opts()
    };
    crash_at_every_sync_point_with(opts, true, "crash_at_every_sync_point_with_pre_images");
}

fn crash_at_every_sync_point_with(opts: EngineOptions, pre_images: bool, name: &str) {
    let seed = seed(name);
    let clean = SimBackend::new();
    let (full, _) = workload(&clean, seed, &opts, pre_images);
    if pre_images {
        let engine =
            Engine::open_with_backend(Arc::new(clean.clone()), opts.clone()).expect("open");
        let (_, images) = from_history(&engine, true);
        assert!(
            images > 10,
            "the workload's history holds pre-images ({images})"
        );
    }
    let syncs = clean.sync_count();
    assert!(syncs > 20, "workload syncs {syncs} times");
    let step = syncs.div_ceil(RUNS_MAX).max(1);
    eprintln!("{syncs} sync points, every {step}th crashed");
    let mut torn_rng = rng(seed ^ 0x5eed);
    for k in (1..=syncs).step_by(step as usize) {
        let sim = SimBackend::new();
        sim.crash_at_sync(k);
        let (acked, pending) = workload(&sim, seed, &opts, pre_images);
        if !sim.has_crashed() {
            // Sync counts vary a little with commit-thread timing; this point was not reached.
            assert_eq!(acked, full, "uncrashed run matches the clean run");
            continue;
        }
        let torn = [0.0, 0.3, 1.0][torn_rng.random_range(0..3)];
        let image = sim.crash_image(torn);
        eprintln!("crash point {k} torn {torn}");
        let got = recovered(&image, &opts, pre_images);
        assert!(
            got == acked || got == pending,
            "crash at sync {k} (torn {torn}): recovered {} docs, acked {}, in flight {}",
            got.len(),
            acked.len(),
            pending.len()
        );
        // Recovery must leave a log that opens again and takes writes.
        let engine = Engine::open_with_backend(Arc::new(image.clone()), opts.clone())
            .expect("second recovery");
        if let Some(c) = engine.collection("db", "c") {
            c.write(vec![WriteOp::Insert(
                raw(&doc! {"_id": -1, "u": -1}).into(),
            )])
            .expect("write after recovery")
            .wait_durable_blocking()
            .expect("durable");
        }
    }
    assert!(!full.is_empty());
}
