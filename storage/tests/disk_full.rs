//! Proves the engine survives a full disk and failed syncs without a restart: the writes of the
//! failing batch get an error, reads keep working, writes resume once the disk has room, a failed
//! fsync's bytes are written again from memory (never trusted to a later fsync), and a crash at
//! any moment afterwards recovers every acknowledged write. How: the simulated backend's
//! `set_disk_full` (ENOSPC on every write) and `fail_syncs` (EIO that drops the unsynced bytes'
//! way to the disk, as Linux does), then crash images of the backend reopened.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Document, doc};
use common::{all_docs, raw, small_opts};
use storage::sim::SimBackend;
use storage::{Collection, Engine, EngineOptions, StorageError, Ticket, WriteOp};

fn opts() -> EngineOptions {
    EngineOptions {
        // Checkpoints write the page file, which a full disk fails for other reasons.
        checkpoint_log_bytes: 0,
        ..small_opts()
    }
}

fn insert(c: &Collection, id: i64) -> storage::Result<Ticket> {
    c.write(vec![WriteOp::Insert(
        raw(&doc! { "_id": id, "pad": "p".repeat(300) }).into(),
    )])
}

fn acked(c: &Collection, id: i64) {
    insert(c, id)
        .and_then(|t| t.wait_durable_blocking())
        .expect("acknowledged write");
}

/// Retries a write until the log's backoff has passed and it succeeds (bounded).
fn insert_when_writable(c: &Collection, id: i64) -> Ticket {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match insert(c, id) {
            Ok(t) => return t,
            Err(StorageError::LogUnavailable { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("write after the disk has room again: {e}"),
        }
    }
}

fn ids(c: &Collection) -> Vec<i64> {
    let mut v: Vec<i64> = all_docs(c)
        .values()
        .map(|d: &Document| d.get_i64("_id").expect("_id"))
        .collect();
    v.sort_unstable();
    v
}

fn reopen(image: SimBackend) -> (Engine, Arc<Collection>) {
    let e = Engine::open_with_backend(Arc::new(image), opts()).expect("recovery opens");
    let c = e.collection("db", "c").expect("collection survives");
    (e, c)
}

#[test]
fn a_full_disk_fails_the_batch_keeps_reads_and_writes_resume_when_space_returns() {
    let sim = SimBackend::new();
    let e = Engine::open_with_backend(Arc::new(sim.clone()), opts()).expect("open");
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    for id in 0..40 {
        acked(&c, id);
    }
    sim.set_disk_full(true);
    for id in 100..110 {
        match insert(&c, id) {
            Err(StorageError::LogUnavailable { out_of_space, .. }) => assert!(out_of_space),
            other => panic!("a write on a full disk must fail as out of space: {other:?}"),
        }
    }
    assert_eq!(
        ids(&c),
        (0..40).collect::<Vec<_>>(),
        "reads work, failed writes left nothing"
    );
    sim.set_disk_full(false);
    let t = insert_when_writable(&c, 200);
    t.wait_durable_blocking().expect("durable after the repair");
    for id in 201..260 {
        acked(&c, id);
    }
    let want: Vec<i64> = (0..40).chain(200..260).collect();
    assert_eq!(ids(&c), want);
    for torn in [0.0, 0.5, 1.0] {
        let (_e, c) = reopen(sim.crash_image(torn));
        assert_eq!(
            ids(&c),
            want,
            "torn {torn}: every acknowledged write, nothing failed"
        );
    }
}

#[test]
fn a_failed_fsync_is_never_trusted_its_bytes_are_written_again_from_memory() {
    let sim = SimBackend::new();
    let e = Engine::open_with_backend(Arc::new(sim.clone()), opts()).expect("open");
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    for id in 0..10 {
        acked(&c, id);
    }
    sim.fail_syncs(1);
    let lost = insert(&c, 10).expect("the append itself works");
    match lost.wait_durable_blocking() {
        Err(StorageError::LogUnavailable { out_of_space, .. }) => assert!(!out_of_space),
        other => panic!("a failed fsync must fail its batch: {other:?}"),
    }
    // A write after the backoff repairs the log first: record 10's bytes go to the disk again.
    let t = insert_when_writable(&c, 11);
    t.wait_durable_blocking().expect("durable");
    acked(&c, 12);
    let (_e, c2) = reopen(sim.crash_image(0.0));
    assert_eq!(
        ids(&c2),
        (0..13).collect::<Vec<_>>(),
        "the failed sync's record was rewritten (it was visible to reads), none after it is lost"
    );
}

#[test]
fn the_commit_thread_retries_a_failed_sync_without_new_writes() {
    let sim = SimBackend::new();
    let e = Engine::open_with_backend(Arc::new(sim.clone()), opts()).expect("open");
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    acked(&c, 0);
    sim.fail_syncs(1);
    let t = insert(&c, 1).expect("append");
    assert!(t.wait_durable_blocking().is_err());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !t.is_durable() {
        assert!(Instant::now() < deadline, "the log was never repaired");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.wait_durable_blocking()
        .expect("acknowledged once repaired");
    let (_e, c2) = reopen(sim.crash_image(0.0));
    assert_eq!(ids(&c2), vec![0, 1]);
}

#[test]
fn failures_while_full_are_logged_once_and_space_can_return_many_times() {
    // Several fill/free cycles: every cycle's acknowledged writes survive a crash.
    let sim = SimBackend::new();
    let e = Engine::open_with_backend(Arc::new(sim.clone()), opts()).expect("open");
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    let mut want = Vec::new();
    let mut next = 0;
    for cycle in 0..4 {
        for _ in 0..25 {
            acked(&c, next);
            want.push(next);
            next += 1;
        }
        sim.set_disk_full(true);
        assert!(insert(&c, 10_000 + cycle).is_err());
        sim.set_disk_full(false);
        let t = insert_when_writable(&c, next);
        t.wait_durable_blocking().expect("durable");
        want.push(next);
        next += 1;
    }
    let (_e, c2) = reopen(sim.crash_image(1.0));
    assert_eq!(ids(&c2), want);
}
