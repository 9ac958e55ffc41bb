//! Group commit. Writers append their records (no sync) and get a `Ticket` holding the last
//! sequence they wrote; one commit thread fdatasyncs the log's current segment and publishes the
//! highest sequence now durable, waking every writer at or below it, so many writers share one
//! sync. In periodic mode (`journal_commit_interval_ms`) the thread syncs on a timer, or at once
//! when some ticket asks to wait. A failed sync poisons the engine: after fsync fails the page
//! cache may have dropped the data, so nothing written since may be acknowledged.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{Result, StorageError};
use crate::log::Log;

/// What the commit thread has published.
#[derive(Clone, Copy, Debug, Default)]
struct Durable {
    sequence: u64,
    /// A sync failed or the thread stopped: sequences above `sequence` never become durable.
    failed: bool,
}

#[derive(Default)]
struct State {
    written: u64,
    durable: u64,
    requested: u64,
    failed: Option<String>,
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
        });
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

    /// Records that sequences up to `sequence` are written and want syncing.
    pub fn note_written(&self, sequence: u64) {
        let mut st = self.state();
        st.written = st.written.max(sequence);
        if self.interval.is_none() {
            self.cond.notify_all();
        }
    }

    /// Asks for a sync up to `sequence` now (periodic mode's `j: true`).
    fn request(&self, sequence: u64) {
        let mut st = self.state();
        if st.requested < sequence {
            st.requested = sequence;
            self.cond.notify_all();
        }
    }

    /// The highest durable sequence.
    pub fn durable_sequence(&self) -> u64 {
        self.state().durable
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

    fn sync_loop(&self) {
        loop {
            if !self.wait_for_work() {
                return;
            }
            let outcome = self.log.sync_all();
            let mut st = self.state();
            match outcome {
                Ok(seq) => {
                    st.durable = st.durable.max(seq);
                    self.watch.send_replace(Durable {
                        sequence: st.durable,
                        failed: false,
                    });
                }
                Err(e) => {
                    let why = format!("log sync failed: {e}");
                    tracing::error!("{why}");
                    self.log.poison(why.clone());
                    st.failed = Some(why);
                    self.watch.send_replace(Durable {
                        sequence: st.durable,
                        failed: true,
                    });
                }
            }
            self.cond.notify_all();
        }
    }

    /// Blocks until a sync is due; false when the thread should stop.
    fn wait_for_work(&self) -> bool {
        let mut st = self.state();
        loop {
            if st.failed.is_some() {
                return false;
            }
            let pending = st.written > st.durable;
            let urgent = self.interval.is_none() || st.requested > st.durable || st.shutdown;
            if pending && urgent {
                return true;
            }
            if st.shutdown {
                return false;
            }
            match self.interval {
                None => st = self.cond.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let (g, timeout) = self
                        .cond
                        .wait_timeout(st, d)
                        .unwrap_or_else(|p| p.into_inner());
                    st = g;
                    if timeout.timed_out() && st.written > st.durable {
                        return true;
                    }
                }
            }
        }
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
            if let Some(why) = &st.failed {
                return Err(StorageError::Poisoned(why.clone()));
            }
            if st.stopped {
                return Err(StorageError::Closed);
            }
            st = self.cond.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    async fn wait_async(&self, sequence: u64) -> Result<()> {
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
            Some(why) => Err(StorageError::Poisoned(why)),
            None => Err(StorageError::Closed),
        }
    }
}

/// Proof that a write was applied, and the way to wait until it is durable.
pub struct Ticket {
    /// The last log sequence of the write (0 when nothing was written).
    pub sequence: u64,
    /// One RecordId per op of the write, in op order.
    pub record_ids: Vec<u64>,
    pub(crate) commit: Arc<Commit>,
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
