//! What group commit promises: a lone writer syncs itself, concurrent writers share syncs and
//! all end durable, unawaited writes are synced by the timer. Engine-level tests on real files,
//! and log-level ones on the simulated backend whose gate holds a sync in flight, which count syncs.

use crate::{Engine, EngineOptions, WriteOp};
use bson::{RawDocumentBuf, doc};
use std::time::{Duration, Instant};

fn engine(dir: &std::path::Path, periodic_ms: Option<u64>) -> Engine {
    let opts = EngineOptions {
        segment_size_bytes: 64 << 10,
        background_compaction: false,
        journal_commit_interval_ms: periodic_ms,
        ..EngineOptions::default()
    };
    Engine::open(dir, opts).expect("open")
}

fn insert(i: i32) -> Vec<WriteOp<'static>> {
    let d = RawDocumentBuf::try_from(&doc! { "_id": i }).expect("doc");
    vec![WriteOp::Insert(d.into())]
}

#[test]
fn a_lone_writer_syncs_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = engine(dir.path(), None);
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    let t = c.write(insert(1)).expect("write");
    t.sync_if_idle().expect("sync");
    assert!(
        t.is_durable(),
        "no sync was in flight: the writer's own sync covers it"
    );
}

#[test]
fn concurrent_writers_share_syncs_and_all_become_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = engine(dir.path(), None);
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    std::thread::scope(|s| {
        for w in 0..8 {
            let c = c.clone();
            s.spawn(move || {
                for i in 0..200 {
                    let t = c.write(insert(w * 1000 + i)).expect("write");
                    // Half lead when idle, half only wait: both must end durable.
                    if i % 2 == 0 {
                        t.sync_if_idle().expect("sync");
                    }
                    t.wait_durable_blocking().expect("durable");
                }
            });
        }
    });
    assert_eq!(c.count(), 1600);
}

#[test]
fn writes_nobody_waits_for_are_synced_by_the_timer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = engine(dir.path(), None);
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    let t = c.write(insert(1)).expect("write");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !t.is_durable() {
        assert!(
            Instant::now() < deadline,
            "an unawaited write stayed unsynced"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_waiter_behind_a_leader_is_woken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = engine(dir.path(), None);
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    for i in 0..200 {
        let first = c.write(insert(2 * i)).expect("write");
        let second = c.write(insert(2 * i + 1)).expect("write");
        let leader = tokio::task::spawn_blocking(move || first.sync_if_idle().map(|()| first));
        second.wait_durable().await.expect("durable");
        let first = leader.await.expect("join").expect("sync");
        first.wait_durable().await.expect("durable");
    }
}

#[test]
fn periodic_mode_still_waits_for_its_timer_or_a_waiter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = engine(dir.path(), Some(60_000));
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    let t = c.write(insert(1)).expect("write");
    assert!(!t.is_durable());
    t.wait_durable_blocking().expect("j: true waits");
    assert!(t.is_durable());
}

mod counted {
    //! Log-level: one log and its commit thread over the simulated backend, no engine threads.
    use super::super::{Commit, Ticket};
    use crate::log::{Log, OutRecord};
    use crate::record::Kind;
    use crate::sim::SimBackend;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    struct Rig {
        sim: SimBackend,
        log: Arc<Log>,
        commit: Arc<Commit>,
    }

    fn rig() -> Rig {
        rig_with(None)
    }

    /// `interval`: periodic mode's timer (a long one keeps the timer out of a test).
    fn rig_with(interval: Option<Duration>) -> Rig {
        let sim = SimBackend::new();
        let log = Log::open(Arc::new(sim.clone()), 1 << 20, BTreeMap::new(), None, 0);
        let log = Arc::new(log.expect("log"));
        let (commit, _thread) = Commit::start(log.clone(), interval, 0).expect("commit");
        Rig { sim, log, commit }
    }

    /// A rig whose commit thread holds a requested sync for writers on their way until they
    /// all arrived (an hour's hold) and whose timer never fires within a test.
    fn holding_rig() -> Rig {
        let r = rig_with(Some(Duration::from_secs(3600)));
        r.commit.hold_fixed_us.store(3_600_000_000, Relaxed);
        r
    }

    impl Rig {
        fn append(&self) -> Ticket {
            let rec = OutRecord::whole(Kind::Put, vec![7; 64]);
            let (sequence, _) = self.log.append(&[rec], false).expect("append");
            self.commit.note_written(sequence);
            Ticket::new(&self.commit, sequence)
        }

        /// Spins (no sleep) until `n` writers are registered as waiting.
        fn until_waiting(&self, n: u64) {
            while self.commit.stats().writers_waiting < n {
                std::thread::yield_now();
            }
        }
    }

    const WRITERS: u64 = 16;

    #[test]
    fn writers_queued_behind_a_sync_share_the_next_one() {
        let r = rig();
        r.sim.hold_syncs();
        let first = r.append();
        std::thread::scope(|s| {
            let leader = s.spawn(|| first.sync_if_idle());
            r.sim.wait_for_held_syncs(1);
            let waiters: Vec<_> = (0..WRITERS)
                .map(|_| {
                    let t = r.append();
                    s.spawn(move || t.wait_durable_blocking())
                })
                .collect();
            r.until_waiting(WRITERS);
            r.sim.release_syncs();
            leader.join().expect("leader").expect("leader's sync");
            for w in waiters {
                w.join().expect("waiter").expect("durable");
            }
        });
        let st = r.commit.stats();
        assert_eq!(
            st.syncs(),
            2,
            "the leader's sync, then one for all who queued"
        );
        assert_eq!((st.syncs_by_writer, st.syncs_requested), (1, 1));
        assert_eq!(st.writers_covered, WRITERS + 1);
        assert_eq!(st.batch_writers.count(), 2);
        assert_eq!(st.writers_waiting, 0);
    }

    /// A writer's sync held in flight, led from a blocking thread (`hold_syncs`; the caller
    /// releases it).
    async fn held_leader(r: &Arc<Rig>) -> tokio::task::JoinHandle<crate::error::Result<()>> {
        r.sim.hold_syncs();
        let first = r.append();
        let leader = tokio::task::spawn_blocking(move || first.sync_if_idle());
        let sim = r.sim.clone();
        tokio::task::spawn_blocking(move || sim.wait_for_held_syncs(1))
            .await
            .expect("held");
        leader
    }

    async fn until_waiting_async(r: &Arc<Rig>, n: u64) {
        let rig = r.clone();
        tokio::task::spawn_blocking(move || rig.until_waiting(n))
            .await
            .expect("waiting");
    }

    /// Async waiters behind a sync in flight: its end covers only the leader's write and
    /// wakes none of them; the next sync covers them all and wakes each once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_waiters_queued_behind_a_sync_share_the_next_one_and_wake_once() {
        let r = Arc::new(rig());
        let leader = held_leader(&r).await;
        let waiters: Vec<_> = (0..WRITERS)
            .map(|_| {
                let t = r.append();
                tokio::spawn(async move { t.wait_durable().await.map(|()| t.is_durable()) })
            })
            .collect();
        until_waiting_async(&r, WRITERS).await;
        r.sim.release_syncs();
        leader.await.expect("leader").expect("leader's sync");
        for w in waiters {
            assert!(w.await.expect("waiter").expect("durable"));
        }
        let st = r.commit.stats();
        assert_eq!(st.syncs(), 2);
        assert_eq!(st.writers_covered, WRITERS + 1);
        assert_eq!(
            st.waiter_wakeups_early, 0,
            "the leader's sync covered none of the waiters and woke none"
        );
        assert_eq!(st.writers_waiting, 0);
    }

    /// A failed sync wakes the async waiters above it with the failure (or, if the timer's
    /// repair came first, with their write durable); none is left asleep.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_sync_wakes_its_async_waiters() {
        let r = Arc::new(rig());
        let leader = held_leader(&r).await;
        r.sim.fail_syncs(1);
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let t = r.append();
                tokio::spawn(async move {
                    let outcome = t.wait_durable().await;
                    (outcome.is_ok(), t.is_durable())
                })
            })
            .collect();
        until_waiting_async(&r, 4).await;
        r.sim.release_syncs();
        assert!(leader.await.expect("leader").is_err());
        for w in waiters {
            let (acked, durable) = w.await.expect("waiter");
            assert!(!acked || durable, "acknowledged only once durable");
        }
        let st = r.commit.stats();
        assert_eq!(st.syncs_failed, 1);
        assert_eq!(st.writers_waiting, 0);
    }

    #[test]
    fn a_failed_sync_fails_every_queued_writer_and_a_repair_recovers() {
        let r = rig();
        r.sim.hold_syncs();
        let first = r.append();
        std::thread::scope(|s| {
            let leader = s.spawn(|| first.sync_if_idle());
            r.sim.wait_for_held_syncs(1);
            // The held sync fails; the queued writers are above what it covered.
            r.sim.fail_syncs(1);
            let waiters: Vec<_> = (0..4)
                .map(|_| {
                    let t = r.append();
                    s.spawn(move || t.wait_durable_blocking())
                })
                .collect();
            r.until_waiting(4);
            r.sim.release_syncs();
            assert!(leader.join().expect("leader").is_err());
            for w in waiters {
                // Acknowledged only by a later repair (the timer's retry), never by the failed sync.
                let acked = w.join().expect("waiter").is_ok();
                assert!(!acked || r.commit.stats().syncs_by_timer > 0);
            }
        });
        let st = r.commit.stats();
        assert_eq!(st.syncs_failed, 1);
        assert_eq!(st.writers_waiting, 0);
    }

    #[test]
    fn a_lone_writer_in_a_no_wait_scope_leaves_its_sync_to_its_waiter() {
        let r = holding_rig();
        // Lone (nobody waits or is on the way, no sync yet): the scope's call neither syncs
        // nor asks; the ticket says its waiter leads, once.
        let a = r.append();
        {
            let _scope = crate::nowait::enter_write();
            a.sync_if_idle().expect("left to the waiter");
        }
        assert!(!a.is_durable());
        assert_eq!(r.commit.stats().syncs(), 0, "nothing synced or asked for");
        assert!(a.take_lead() && !a.take_lead());
        a.sync_if_idle().expect("the waiter's sync");
        assert!(a.is_durable());
        assert_eq!(r.commit.stats().syncs_by_writer, 1);
        // Another writer on its way: not lone, the scope's call asks (the hold then waits for
        // the one on its way), and the waiter has nothing to lead.
        let on_way = r.commit.pending_writer();
        let b = r.append();
        {
            let _scope = crate::nowait::enter_write();
            b.sync_if_idle().expect("asked");
        }
        assert!(!b.take_lead());
        drop(on_way);
        b.wait_durable_blocking().expect("durable");
        // The last sync covered two writers (the second queued behind the held sync of the
        // first, which covers its record too): writers come together, so the commit thread's
        // syncs cover them and a scope's writer never leads.
        r.sim.hold_syncs();
        let (c, d) = (r.append(), r.append());
        std::thread::scope(|s| {
            let wc = s.spawn(|| c.wait_durable_blocking());
            r.sim.wait_for_held_syncs(1);
            let wd = s.spawn(|| d.wait_durable_blocking());
            r.until_waiting(2);
            r.sim.release_syncs();
            wc.join().expect("waiter").expect("durable");
            wd.join().expect("waiter").expect("durable");
        });
        let e = r.append();
        {
            let _scope = crate::nowait::enter_write();
            e.sync_if_idle().expect("asked");
        }
        assert!(!e.take_lead());
        e.wait_durable_blocking().expect("durable");
    }

    #[test]
    fn a_writer_on_its_way_holds_the_sync_and_the_last_arrival_syncs_for_all() {
        let r = holding_rig();
        let on_way = r.commit.pending_writer();
        let first = r.commit.pending_writer();
        let a = r.append();
        first.sync_if_idle(&a).expect("ask");
        assert!(!a.is_durable(), "another writer is on its way: no sync yet");
        assert_eq!(r.commit.stats().syncs(), 0);
        let b = r.append();
        on_way.sync_if_idle(&b).expect("sync");
        assert!(a.is_durable() && b.is_durable());
        let st = r.commit.stats();
        assert_eq!(
            (st.syncs(), st.syncs_by_writer),
            (1, 1),
            "one sync, by the last arrival"
        );
        assert_eq!(st.batch_records.sum, 2);
    }

    #[test]
    fn a_writer_that_gives_up_on_its_way_releases_the_held_sync() {
        let r = holding_rig();
        let on_way = r.commit.pending_writer();
        let a = r.append();
        a.sync_if_idle().expect("ask");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| a.wait_durable_blocking());
            r.until_waiting(1);
            assert_eq!(r.commit.stats().syncs(), 0);
            drop(on_way);
            waiter.join().expect("waiter").expect("durable");
        });
        assert_eq!(r.commit.stats().syncs_requested, 1);
    }

    #[test]
    fn a_writer_that_never_arrives_delays_a_sync_only_by_the_hold() {
        let r = rig();
        let _never = r.commit.pending_writer();
        let a = r.append();
        a.sync_if_idle().expect("ask");
        a.wait_durable_blocking()
            .expect("durable once the hold ends");
        let st = r.commit.stats();
        assert!(st.holds_expired >= 1 || st.syncs_by_timer >= 1);
    }

    #[test]
    fn after_a_hold_runs_out_the_next_writer_syncs_without_holding() {
        let r = rig();
        r.commit.hold_fixed_us.store(1, Relaxed);
        let _never = r.commit.pending_writer();
        let a = r.append();
        a.sync_if_idle().expect("ask");
        a.wait_durable_blocking()
            .expect("durable once the hold ran out");
        assert_eq!(r.commit.stats().holds_expired, 1);
        let b = r.append();
        b.sync_if_idle().expect("sync");
        assert!(
            b.is_durable(),
            "holds are in their backoff: the writer syncs itself"
        );
        assert_eq!(r.commit.stats().syncs_by_writer, 1);
    }
}
