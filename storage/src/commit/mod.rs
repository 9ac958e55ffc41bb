//! Group commit. Writers append their records (no sync) and get a `Ticket` holding the last
//! sequence they wrote; a sync (fdatasync of the log's current segment) publishes the highest
//! sequence now durable and wakes every waiter at or below it, so many writers share one sync.
//! An async waiter is woken only by the sync that covers it (or by a failure or the stop): it
//! leaves a wake-up under its sequence (`Waiters`), and waiters above the new durable sequence
//! sleep on.
//! At most one sync is in flight at a time (`State::syncing`), run by one of two parties:
//! - the writer itself, when it calls `Ticket::sync_if_idle` on its own (blocking) thread and no
//!   sync is running: the common case of a lone writer, which then saves two thread hand-offs
//!   (waking the commit thread and being woken by it);
//! - the commit thread, for everyone who waits (`wait_durable*`) while a sync is in flight or
//!   without leading one: when that sync ends it syncs all of them at once.
//!
//! Writers on their way (`PendingWriter`, `pending`: a durable insert between the server
//! reading it and its sync request) hold the next sync back, so that it covers them too: a
//! writer leads only when nobody else is on the way, and the commit thread waits for them at
//! most as long as the last sync took (`GROUP_COMMIT_HOLD_US_MAX` at most). Without this a
//! closed loop of N clients split into a lone first writer's sync and one for the N-1 behind
//! it (docs/BENCHMARKS.md, "Group commit: who a sync covers").
//!
//! Writes nobody waits for (w: 0, background deletes) are synced by the commit thread within
//! `UNAWAITED_SYNC_MS`. In periodic mode (`journal_commit_interval_ms`) the thread syncs on that
//! timer instead, or at once when some ticket asks to wait. A write is acknowledged only after a
//! sync covering it completed. A failed sync fails every waiter above the durable sequence and
//! damages the log (see `log`): the thread then retries on its timer, the log's repair rewrites
//! the unsynced bytes from memory, and a successful repair makes them durable and clears the
//! failure, so waiters that come later are acknowledged again.

mod pending;
mod stats;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use crate::error::{Result, StorageError};
use crate::log::Log;

use crate::limits::{GROUP_COMMIT_HOLD_BACKOFF_MAX, GROUP_COMMIT_HOLD_US_MAX, UNAWAITED_SYNC_MS};

pub use pending::PendingWriter;

pub use stats::CommitStatsSnapshot;
use stats::{CommitStats, Leader};

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

/// The writers waiting for one sequence: how many (blocking ones included), and the async
/// ones' wake-ups (sent, or dropped, when a sync covers them, fails, or the thread stops).
#[derive(Default)]
struct Waiters {
    count: u32,
    wake: Vec<oneshot::Sender<()>>,
}

/// Wake-ups taken out of the state under its lock, sent after it is released (a woken task
/// may be scheduled onto another thread, which should not then wait for our lock).
type Wakes = Vec<oneshot::Sender<()>>;

fn wake_all(wakes: Wakes) {
    for w in wakes {
        let _ = w.send(());
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
    /// Sequences writers wait for, above `durable`: counted into the writers-per-sync
    /// statistics when a sync covers them, and the async ones woken then. Bounded by the
    /// writers waiting at once (a cancelled async wait leaves its entry until the next sync
    /// removes it).
    waiting: BTreeMap<u64, Waiters>,
    /// Writers on their way (live `PendingWriter`s).
    pending: usize,
    /// Until when the commit thread holds a requested sync back for writers on their way.
    hold_until: Option<Instant>,
    /// Holds still to skip, and how many the next expired hold makes us skip: a hold that
    /// ran out means writers arrive spread out, not in a burst, and holding only idles the
    /// disk; after `hold_backoff` skipped holds we try again (doubling while they keep
    /// running out, reset when a hold ends by arrivals).
    hold_skip: u32,
    hold_backoff: u32,
    /// Writers the last sync covered: one means writers come one at a time, and a lone writer
    /// on a request-serving thread leaves its sync to its own wait (see `sync_if_idle`).
    last_writers: u64,
    failed: Option<Failure>,
    shutdown: bool,
    /// The commit thread has exited; nothing more becomes durable.
    stopped: bool,
}

impl State {
    /// How a wait for `sequence` ends now: durable, failed (until a repair), or the thread
    /// stopped; None while it must wait on.
    fn settled(&self, sequence: u64) -> Option<Result<()>> {
        if self.durable >= sequence {
            return Some(Ok(()));
        }
        if let Some(f) = &self.failed {
            return Some(Err(f.error()));
        }
        if self.stopped {
            return Some(Err(StorageError::Closed));
        }
        None
    }
}

pub(crate) struct Commit {
    log: Arc<Log>,
    interval: Option<Duration>,
    state: Mutex<State>,
    cond: Condvar,
    /// The durable sequence for `DurableWatch`es (change streams, awaiting cursors), sent at
    /// every sync, failure and the stop; write waiters are woken through `State::waiting`.
    watch: watch::Sender<u64>,
    stats: CommitStats,
    /// How long the last fdatasync took (µs): the longest the thread holds a sync back.
    last_sync_us: AtomicU64,
    /// Tests fix the hold (µs; 0: the rule above) to order events without timing them.
    hold_fixed_us: AtomicU64,
}

impl Commit {
    /// Starts the commit thread; everything up to `durable_sequence` is already durable.
    pub fn start(
        log: Arc<Log>,
        interval: Option<Duration>,
        durable_sequence: u64,
    ) -> Result<(Arc<Commit>, JoinHandle<()>)> {
        let (watch, _) = watch::channel(durable_sequence);
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
            stats: CommitStats::new(),
            last_sync_us: AtomicU64::new(0),
            hold_fixed_us: AtomicU64::new(0),
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

    /// Registers a writer that waits for `sequence` (above `durable`), with its wake-up when it
    /// waits async, and asks for a sync up to it now. A sync in flight will be followed by one
    /// for it.
    fn register(&self, st: &mut State, sequence: u64, wake: Option<oneshot::Sender<()>>) {
        let w = st.waiting.entry(sequence).or_default();
        w.count += 1;
        w.wake.extend(wake);
        self.ask(st, sequence);
    }

    /// Raises `requested` to `sequence` and wakes the commit thread when it has something to
    /// start: the first request since the last sync (it then syncs, or holds for writers on
    /// their way with a timeout), or the last writer on the way arrived. Later requests need no
    /// wake-up: the thread is holding, or a sync is in flight whose end looks again.
    fn ask(&self, st: &mut State, sequence: u64) {
        let first = st.requested <= st.durable;
        st.requested = st.requested.max(sequence);
        if st.requested > st.durable && !st.syncing && (first || st.pending == 0) {
            self.cond.notify_all();
        }
    }

    /// An append repaired the log: everything up to `sequence` is durable, the failure is over.
    fn repaired(&self, sequence: u64) {
        let mut st = self.state();
        st.failed = None;
        let records = sequence.saturating_sub(st.durable);
        let (writers, wakes) = covered_writers(&mut st, sequence);
        self.stats.covered(records, writers);
        st.durable = st.durable.max(sequence);
        self.watch.send_replace(st.durable);
        self.cond.notify_all();
        drop(st);
        wake_all(wakes);
    }

    /// The highest durable sequence.
    pub fn durable_sequence(&self) -> u64 {
        self.state().durable
    }

    pub fn stats(&self) -> CommitStatsSnapshot {
        let waiting = self
            .state()
            .waiting
            .values()
            .map(|w| u64::from(w.count))
            .sum();
        CommitStatsSnapshot {
            writers_waiting: waiting,
            ..self.stats.snapshot()
        }
    }

    pub fn subscribe(&self) -> DurableWatch {
        DurableWatch(self.watch.subscribe())
    }

    fn run(&self) {
        self.sync_loop();
        let mut st = self.state();
        st.stopped = true;
        self.watch.send_replace(st.durable);
        self.cond.notify_all();
        // Async waiters look again and find the thread stopped.
        let left = std::mem::take(&mut st.waiting);
        drop(st);
        drop(left);
    }

    /// fdatasync of the log up to its last written sequence, rolled segments first (the
    /// caller holds `syncing`).
    fn sync_log(&self, leader: Leader) -> Result<u64> {
        self.stats.sync_started(leader);
        let started = std::time::Instant::now();
        let outcome = self.log.sync_all();
        let took_us = started.elapsed().as_micros() as u64;
        self.stats.sync_us.record(took_us);
        self.last_sync_us.store(took_us, Relaxed);
        outcome
    }

    /// Publishes a sync's outcome (to `DurableWatch`es) and releases `syncing`; returns the
    /// async waiters to wake (those it covered, or all of them when it failed). The caller
    /// wakes blocked waiters and the thread as needed, and the returned ones after releasing
    /// the lock. `leader` is 1 when the sync was a writer's own (it waited without being
    /// registered), else 0.
    #[must_use]
    fn publish(&self, st: &mut State, outcome: Result<u64>, leader: u64) -> Wakes {
        st.syncing = false;
        // A hold still set when its sync ran ended by arrivals (an expired one is cleared):
        // holding pays here. The next hold is measured from when the next sync is asked for.
        if st.hold_until.take().is_some() {
            st.hold_backoff = 0;
        }
        match outcome {
            Ok(seq) => {
                let (covered, wakes) = covered_writers(st, seq);
                let writers = covered + leader;
                self.stats.covered(seq.saturating_sub(st.durable), writers);
                st.last_writers = writers;
                st.durable = st.durable.max(seq);
                st.failed = None;
                self.watch.send_replace(st.durable);
                wakes
            }
            Err(e) => {
                // The log logged the failure once (with the OS error) and keeps the bytes.
                self.stats.sync_failed();
                st.failed = Some(Failure::of(&e));
                self.watch.send_replace(st.durable);
                // Every registered waiter is above `durable` and fails with this sync.
                let failed = std::mem::take(&mut st.waiting);
                failed.into_values().flat_map(|w| w.wake).collect()
            }
        }
    }

    fn sync_loop(&self) {
        loop {
            let Some(leader) = self.wait_for_work() else {
                return;
            };
            let outcome = self.sync_log(leader);
            let mut st = self.state();
            let wakes = self.publish(&mut st, outcome, 0);
            self.cond.notify_all();
            drop(st);
            wake_all(wakes);
            // Outside the lock: the idle hook may flush this thread's allocator cache.
            crate::thread_idle::thread_idle();
        }
    }

    /// Blocks until a sync is due and claims it (`syncing`), saying why; None when the thread
    /// should stop.
    fn wait_for_work(&self) -> Option<Leader> {
        let period = self
            .interval
            .unwrap_or(Duration::from_millis(UNAWAITED_SYNC_MS));
        // A deadline, not `timed_out`: waiters' wake-ups must not postpone the timer's sync.
        let mut due = Instant::now() + period;
        let mut st = self.state();
        loop {
            let pending = st.written > st.durable;
            if st.failed.is_some() && st.shutdown {
                return None;
            }
            // After a failure only the timer retries (the log's own backoff paces repairs), so
            // waiters asking again do not spin the thread.
            let urgent = (st.requested > st.durable || st.shutdown) && st.failed.is_none();
            if pending && urgent && !st.syncing {
                match self.hold(&mut st) {
                    None => {
                        st.syncing = true;
                        return Some(Leader::Requested);
                    }
                    Some(left) => {
                        let (g, _) = self
                            .cond
                            .wait_timeout(st, left)
                            .unwrap_or_else(|p| p.into_inner());
                        st = g;
                        continue;
                    }
                }
            }
            if st.shutdown && !pending && !st.syncing {
                return None;
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
                    return Some(Leader::Timer);
                }
                // Nothing to sync for a whole period: the idle hook may flush this thread's
                // allocator cache. It runs under the state lock, so only on an idle log.
                if !st.syncing && st.written <= st.durable {
                    crate::thread_idle::thread_idle();
                }
                due = Instant::now() + period;
            }
        }
    }

    /// How much longer a requested sync waits for writers on their way (None: sync now): the
    /// hold starts at the first look and lasts the last sync's duration, capped.
    fn hold(&self, st: &mut State) -> Option<Duration> {
        if st.pending == 0 || st.shutdown || Self::skip_hold(st) {
            return None;
        }
        let now = Instant::now();
        let hold_us = match self.hold_fixed_us.load(Relaxed) {
            0 => self
                .last_sync_us
                .load(Relaxed)
                .min(GROUP_COMMIT_HOLD_US_MAX),
            fixed => fixed,
        };
        let until = *st
            .hold_until
            .get_or_insert_with(|| now + Duration::from_micros(hold_us));
        if now >= until {
            self.stats.hold_expired();
            st.hold_until = None;
            st.hold_backoff = (st.hold_backoff * 2).clamp(1, GROUP_COMMIT_HOLD_BACKOFF_MAX);
            st.hold_skip = st.hold_backoff;
            return None;
        }
        Some(until - now)
    }

    /// Whether holds are in their backoff (see `State::hold_skip`); counts one skipped.
    fn skip_hold(st: &mut State) -> bool {
        if st.hold_skip == 0 || st.hold_until.is_some() {
            return false;
        }
        st.hold_skip -= 1;
        true
    }

    /// The writer's own sync: when nothing is durable up to the ticket's sequence yet, no sync
    /// is in flight and no other writer is on its way, fdatasync now on this thread; otherwise
    /// ask for one and return at once. `arriving`: the caller was one of the writers on the way.
    ///
    /// A thread that serves requests (a write tried in a no-wait scope) never syncs itself. A
    /// lone writer there (nobody else waits or is on the way, no sync in flight, and the last
    /// sync covered one writer) does not ask either: it leaves the sync to its wait, which
    /// leads it off the thread's other work rather than wake the commit thread and be woken by
    /// it (`Ticket::take_lead`). With more writers at once the commit thread's syncs cover them.
    fn sync_if_idle(&self, ticket: &Ticket, arriving: bool) -> Result<()> {
        let sequence = ticket.sequence;
        let mut st = self.state();
        if arriving {
            st.pending = st.pending.saturating_sub(1);
        }
        if st.durable >= sequence {
            self.ask(&mut st, 0);
            return Ok(());
        }
        if let Some(f) = &st.failed {
            return Err(f.error());
        }
        let hold = st.pending > 0 && !Self::skip_hold(&mut st);
        if crate::nowait::in_scope() {
            let lone = !(st.syncing || st.stopped)
                && st.pending == 0
                && st.waiting.is_empty()
                && st.last_writers <= 1;
            if lone {
                ticket.lead.store(true, Relaxed);
            } else {
                self.ask(&mut st, sequence);
            }
            return Ok(());
        }
        if st.syncing || st.stopped || hold {
            // The sync in flight is followed by one for this write; writers on their way will
            // ask too, and the last of them (or the thread when its hold ends) syncs for all.
            self.ask(&mut st, sequence);
            return Ok(());
        }
        st.syncing = true;
        drop(st);
        let outcome = self.sync_log(Leader::Writer);
        let mut st = self.state();
        let result = match &outcome {
            Ok(_) => Ok(()),
            Err(e) => Err(Failure::of(e).error()),
        };
        let wakes = self.publish(&mut st, outcome, 1);
        // Wake the commit thread only when someone is left for it (or it must stop), and
        // blocked waiters only when there are some.
        let left = st.requested > st.durable && st.written > st.durable;
        if left || st.blocked > 0 || st.shutdown || st.failed.is_some() {
            self.cond.notify_all();
        }
        drop(st);
        wake_all(wakes);
        result
    }

    /// Stops the thread after a last sync of everything written.
    pub fn shutdown(&self) {
        self.state().shutdown = true;
        self.cond.notify_all();
    }

    fn wait_blocking(&self, sequence: u64) -> Result<()> {
        let mut st = self.state();
        let mut registered = false;
        loop {
            if let Some(outcome) = st.settled(sequence) {
                return outcome;
            }
            // Once: a wake-up that finds the write not durable yet leaves its entry in place.
            if !std::mem::replace(&mut registered, true) {
                self.register(&mut st, sequence, None);
            }
            st.blocked += 1;
            st = self.cond.wait(st).unwrap_or_else(|p| p.into_inner());
            st.blocked -= 1;
        }
    }

    async fn wait_async(&self, sequence: u64) -> Result<()> {
        let mut woken = false;
        loop {
            let woke = {
                let mut st = self.state();
                if let Some(outcome) = st.settled(sequence) {
                    return outcome;
                }
                // Only the sync covering `sequence` sends (or a failure or the stop drops)
                // this wake-up; finding the write not durable after one would be a bug, and
                // is counted.
                if std::mem::replace(&mut woken, true) {
                    self.stats.woken_early();
                }
                let (tx, rx) = oneshot::channel();
                self.register(&mut st, sequence, Some(tx));
                rx
            };
            // An error only says the wake-up was dropped rather than sent: look again.
            let _ = woke.await;
        }
    }
}

/// Removes the waiting writers at or below `durable`: how many there were, and the async
/// ones' wake-ups.
fn covered_writers(st: &mut State, durable: u64) -> (u64, Wakes) {
    let above = st.waiting.split_off(&durable.saturating_add(1));
    let covered = std::mem::replace(&mut st.waiting, above);
    let mut count = 0;
    let mut wakes = Vec::new();
    for w in covered.into_values() {
        count += u64::from(w.count);
        wakes.extend(w.wake);
    }
    (count, wakes)
}

/// Told whenever more of the log becomes durable (a sync completed): what change streams and
/// awaiting cursors wait on instead of polling.
pub struct DurableWatch(watch::Receiver<u64>);

impl DurableWatch {
    /// The highest durable sequence now.
    pub fn sequence(&self) -> u64 {
        *self.0.borrow()
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
    /// `sync_if_idle` left this write's sync to its waiter (see `take_lead`).
    pub(crate) lead: std::sync::atomic::AtomicBool,
}

impl Ticket {
    /// The ticket of a write whose last log sequence is `sequence` (no RecordIds, no stamp).
    pub(crate) fn new(commit: &Arc<Commit>, sequence: u64) -> Ticket {
        Ticket {
            sequence,
            record_ids: Vec::new(),
            commit: commit.clone(),
            timestamp: 0,
            lead: Default::default(),
        }
    }

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
        self.commit.sync_if_idle(self, false)
    }

    /// Whether `sync_if_idle`, called on a thread that serves requests (inside a no-wait
    /// scope) for a lone writer, left the sync to this ticket's waiter (and clears it). The
    /// waiter should then call `sync_if_idle` where it may block (which leads the sync when
    /// none is in flight, else asks for one) before `wait_durable`; a waiter that does not
    /// still gets its sync, `wait_durable` asks the commit thread for it.
    pub fn take_lead(&self) -> bool {
        self.lead.swap(false, Relaxed)
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
mod tests;
