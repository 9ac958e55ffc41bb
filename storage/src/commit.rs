//! Group commit. Writers append their records (no sync) and get a `Ticket` holding the last
//! sequence they wrote; a sync (fdatasync of the log's current segment) publishes the highest
//! sequence now durable and wakes every waiter at or below it, so many writers share one sync.
//! At most one sync is in flight at a time (`State::syncing`), run by one of two parties:
//! - the writer itself, when it calls `Ticket::sync_if_idle` on its own (blocking) thread and no
//!   sync is running: the common case of a lone writer, which then saves two thread hand-offs
//!   (waking the commit thread and being woken by it);
//! - the commit thread, for everyone who waits (`wait_durable*`) while a sync is in flight or
//!   without leading one: when that sync ends it syncs all of them at once.
//!
//! Writes nobody waits for (w: 0, background deletes) are synced by the commit thread within
//! `UNAWAITED_SYNC_MS`. In periodic mode (`journal_commit_interval_ms`) the thread syncs on that
//! timer instead, or at once when some ticket asks to wait. A write is acknowledged only after a
//! sync covering it completed. A failed sync fails every waiter above the durable sequence and
//! damages the log (see `log`): the thread then retries on its timer, the log's repair rewrites
//! the unsynced bytes from memory, and a successful repair makes them durable and clears the
//! failure, so waiters that come later are acknowledged again.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::error::{Result, StorageError};
use crate::log::Log;

use crate::limits::UNAWAITED_SYNC_MS;

/// What the commit thread has published.
#[derive(Clone, Copy, Debug, Default)]
struct Durable {
    sequence: u64,
    /// A sync failed or the thread stopped: sequences above `sequence` are not durable (until
    /// a repair publishes a higher one).
    failed: bool,
}

/// Why the last sync failed, as waiters are told.
#[derive(Clone)]
struct Failure {
    reason: String,
    out_of_space: bool,
}

impl Failure {
    fn of(e: &StorageError) -> Failure {
        match e {
            StorageError::LogUnavailable {
                reason,
                out_of_space,
            } => Failure {
                reason: reason.clone(),
                out_of_space: *out_of_space,
            },
            other => Failure {
                reason: format!("log sync failed: {other}"),
                out_of_space: false,
            },
        }
    }

    fn error(&self) -> StorageError {
        StorageError::LogUnavailable {
            reason: self.reason.clone(),
            out_of_space: self.out_of_space,
        }
    }
}

#[derive(Default)]
struct State {
    written: u64,
    durable: u64,
    /// Highest sequence someone waits for.
    requested: u64,
    /// A sync is in flight (by the commit thread or a writer leading it).
    syncing: bool,
    /// Threads blocked in `wait_blocking`.
    blocked: usize,
    failed: Option<Failure>,
    shutdown: bool,
    /// The commit thread has exited; nothing more becomes durable.
    stopped: bool,
}

pub(crate) struct Commit {
    log: Arc<Log>,
    interval: Option<Duration>,
    state: Mutex<State>,
    cond: Condvar,
    watch: watch::Sender<Durable>,
    /// fdatasync durations (µs) and records made durable per sync, for the metrics endpoint.
    pub sync_us: crate::histogram::Histogram,
    pub sync_batch_records: crate::histogram::Histogram,
}

impl Commit {
    /// Starts the commit thread; everything up to `durable_sequence` is already durable.
    pub fn start(
        log: Arc<Log>,
        interval: Option<Duration>,
        durable_sequence: u64,
    ) -> Result<(Arc<Commit>, JoinHandle<()>)> {
        let (watch, _) = watch::channel(Durable {
            sequence: durable_sequence,
            failed: false,
        });
        let commit = Arc::new(Commit {
            log,
            interval,
            state: Mutex::new(State {
                written: durable_sequence,
                durable: durable_sequence,
                ..State::default()
            }),
            cond: Condvar::new(),
            watch,
            sync_us: crate::histogram::Histogram::new(crate::histogram::SYNC_US_BOUNDS),
            sync_batch_records: crate::histogram::Histogram::new(
                crate::histogram::BATCH_RECORDS_BOUNDS,
            ),
        });
        let weak = Arc::downgrade(&commit);
        commit.log.set_on_repair(Box::new(move |seq| {
            if let Some(c) = weak.upgrade() {
                c.repaired(seq);
            }
        }));
        let c = commit.clone();
        let handle = std::thread::Builder::new()
            .name("cairn-commit".into())
            .spawn(move || c.run())?;
        Ok((commit, handle))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Records that sequences up to `sequence` are written. Nobody is woken: a waiter asks
    /// (`request`), a writer may sync itself (`sync_if_idle`), and the thread's timer catches
    /// the rest.
    pub fn note_written(&self, sequence: u64) {
        let mut st = self.state();
        st.written = st.written.max(sequence);
    }

    /// Asks for a sync up to `sequence` now. A sync in flight will be followed by one for it.
    fn request(&self, sequence: u64) {
        let mut st = self.state();
        if st.requested < sequence {
            st.requested = sequence;
            if !st.syncing {
                self.cond.notify_all();
            }
        }
    }

    /// An append repaired the log: everything up to `sequence` is durable, the failure is over.
    fn repaired(&self, sequence: u64) {
        let mut st = self.state();
        st.failed = None;
        st.durable = st.durable.max(sequence);
        self.watch.send_replace(Durable {
            sequence: st.durable,
            failed: false,
        });
        self.cond.notify_all();
    }

    /// The highest durable sequence.
    pub fn durable_sequence(&self) -> u64 {
        self.state().durable
    }

    pub fn subscribe(&self) -> DurableWatch {
        DurableWatch(self.watch.subscribe())
    }

    fn run(&self) {
        self.sync_loop();
        let mut st = self.state();
        st.stopped = true;
        self.watch.send_replace(Durable {
            sequence: st.durable,
            failed: true,
        });
        self.cond.notify_all();
    }

    /// fdatasync of the log up to its last written sequence, rolled segments first (the
    /// caller holds `syncing`).
    fn sync_log(&self) -> Result<u64> {
        let started = std::time::Instant::now();
        let outcome = self.log.sync_all();
        self.sync_us.record(started.elapsed().as_micros() as u64);
        outcome
    }

    /// Publishes a sync's outcome (to async waiters through the watch) and releases `syncing`;
    /// the caller wakes blocked waiters and the thread as needed.
    fn publish(&self, st: &mut State, outcome: Result<u64>) {
        st.syncing = false;
        match outcome {
            Ok(seq) => {
                if seq > st.durable {
                    self.sync_batch_records.record(seq - st.durable);
                }
                st.durable = st.durable.max(seq);
                st.failed = None;
                self.watch.send_replace(Durable {
                    sequence: st.durable,
                    failed: false,
                });
            }
            Err(e) => {
                // The log logged the failure once (with the OS error) and keeps the bytes.
                st.failed = Some(Failure::of(&e));
                self.watch.send_replace(Durable {
                    sequence: st.durable,
                    failed: true,
                });
            }
        }
    }

    fn sync_loop(&self) {
        loop {
            if !self.wait_for_work() {
                return;
            }
            let outcome = self.sync_log();
            let mut st = self.state();
            self.publish(&mut st, outcome);
            self.cond.notify_all();
        }
    }

    /// Blocks until a sync is due and claims it (`syncing`); false when the thread should stop.
    fn wait_for_work(&self) -> bool {
        let period = self
            .interval
            .unwrap_or(Duration::from_millis(UNAWAITED_SYNC_MS));
        // A deadline, not `timed_out`: waiters' wake-ups must not postpone the timer's sync.
        let mut due = Instant::now() + period;
        let mut st = self.state();
        loop {
            let pending = st.written > st.durable;
            if st.failed.is_some() && st.shutdown {
                return false;
            }
            // After a failure only the timer retries (the log's own backoff paces repairs), so
            // waiters asking again do not spin the thread.
            let urgent = (st.requested > st.durable || st.shutdown) && st.failed.is_none();
            if pending && urgent && !st.syncing {
                st.syncing = true;
                return true;
            }
            if st.shutdown && !pending && !st.syncing {
                return false;
            }
            let left = due.saturating_duration_since(Instant::now());
            let (g, _) = self
                .cond
                .wait_timeout(st, left.max(Duration::from_millis(1)))
                .unwrap_or_else(|p| p.into_inner());
            st = g;
            if Instant::now() >= due {
                if st.written > st.durable && !st.syncing {
                    st.syncing = true;
                    return true;
                }
                due = Instant::now() + period;
            }
        }
    }

    /// The writer's own sync: when nothing is durable up to `sequence` yet and no sync is in
    /// flight, fdatasync now on this thread; otherwise ask for one and return at once.
    fn sync_if_idle(&self, sequence: u64) -> Result<()> {
        let mut st = self.state();
        if st.durable >= sequence {
            return Ok(());
        }
        if let Some(f) = &st.failed {
            return Err(f.error());
        }
        if st.syncing || st.stopped {
            st.requested = st.requested.max(sequence);
            return Ok(());
        }
        st.syncing = true;
        drop(st);
        let outcome = self.sync_log();
        let mut st = self.state();
        let result = match &outcome {
            Ok(_) => Ok(()),
            Err(e) => Err(Failure::of(e).error()),
        };
        self.publish(&mut st, outcome);
        // Wake the commit thread only when someone is left for it (or it must stop), and
        // blocked waiters only when there are some.
        let left = st.requested > st.durable && st.written > st.durable;
        if left || st.blocked > 0 || st.shutdown || st.failed.is_some() {
            self.cond.notify_all();
        }
        result
    }

    /// Stops the thread after a last sync of everything written.
    pub fn shutdown(&self) {
        self.state().shutdown = true;
        self.cond.notify_all();
    }

    fn wait_blocking(&self, sequence: u64) -> Result<()> {
        self.request(sequence);
        let mut st = self.state();
        loop {
            if st.durable >= sequence {
                return Ok(());
            }
            if let Some(f) = &st.failed {
                return Err(f.error());
            }
            if st.stopped {
                return Err(StorageError::Closed);
            }
            st.blocked += 1;
            st = self.cond.wait(st).unwrap_or_else(|p| p.into_inner());
            st.blocked -= 1;
        }
    }

    async fn wait_async(&self, sequence: u64) -> Result<()> {
        if self.durable_sequence() >= sequence {
            return Ok(());
        }
        self.request(sequence);
        let mut rx = self.watch.subscribe();
        let seen = rx
            .wait_for(|d| d.sequence >= sequence || d.failed)
            .await
            .map(|d| *d)
            .map_err(|_| StorageError::Closed)?;
        if seen.sequence >= sequence {
            return Ok(());
        }
        match self.state().failed.clone() {
            Some(f) => Err(f.error()),
            None => Err(StorageError::Closed),
        }
    }
}

/// Told whenever more of the log becomes durable (a sync completed): what change streams and
/// awaiting cursors wait on instead of polling.
pub struct DurableWatch(watch::Receiver<Durable>);

impl DurableWatch {
    /// The highest durable sequence now.
    pub fn sequence(&self) -> u64 {
        self.0.borrow().sequence
    }

    /// Waits until the durable sequence changes; false once the engine has stopped.
    pub async fn changed(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }
}

/// Proof that a write was applied, and the way to wait until it is durable.
pub struct Ticket {
    /// The last log sequence of the write (0 when nothing was written).
    pub sequence: u64,
    /// One RecordId per op of the write, in op order.
    pub record_ids: Vec<u64>,
    pub(crate) commit: Arc<Commit>,
    /// The batch's timestamp (seconds << 32 | increment) when the engine stamps writes, else 0.
    pub timestamp: u64,
}

impl Ticket {
    /// Waits (async) until the write is durable.
    pub async fn wait_durable(&self) -> Result<()> {
        self.commit.wait_async(self.sequence).await
    }

    /// Waits (blocking the thread) until the write is durable.
    pub fn wait_durable_blocking(&self) -> Result<()> {
        self.commit.wait_blocking(self.sequence)
    }

    /// Makes the write durable on the calling thread if no sync is in flight (one fdatasync: a
    /// blocking call), saving the commit thread's round trip; otherwise returns at once and the
    /// sync in flight is followed by one covering this write. `wait_durable` afterwards says
    /// when it is durable (at once in the first case). Periodic mode's timer is bypassed, so
    /// call it only for writes that will be waited for.
    pub fn sync_if_idle(&self) -> Result<()> {
        self.commit.sync_if_idle(self.sequence)
    }

    /// Whether the write is durable already.
    pub fn is_durable(&self) -> bool {
        self.commit.durable_sequence() >= self.sequence
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("sequence", &self.sequence)
            .field("record_ids", &self.record_ids)
            .finish()
    }
}

#[cfg(test)]
mod tests {
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
}
