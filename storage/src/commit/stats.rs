//! Group commit's counters: how many syncs ran and who ran them, how long they took, and how
//! many writers and log records each one covered. They are what tells a user (through
//! `serverStatus.wiredTiger.log` and the metrics endpoint) whether concurrent writers really
//! share fdatasyncs. Everything is an atomic recorded outside the commit lock's hot part; this
//! module decides nothing about syncing.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::histogram::{
    BATCH_RECORDS_BOUNDS, Histogram, HistogramSnapshot, SYNC_US_BOUNDS, WRITERS_BOUNDS,
};

/// Who ran a sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leader {
    /// A writer on its own thread (`Ticket::sync_if_idle`), nobody else syncing.
    Writer,
    /// The commit thread, because a waiter asked (or shutdown).
    Requested,
    /// The commit thread's timer (unawaited writes, periodic mode, retries after a failure).
    Timer,
}

pub(crate) struct CommitStats {
    syncs_by_writer: AtomicU64,
    syncs_requested: AtomicU64,
    syncs_by_timer: AtomicU64,
    syncs_failed: AtomicU64,
    writers_covered: AtomicU64,
    /// Times an async waiter was woken before its write was durable (or failed): wasted polls.
    waiter_wakeups_early: AtomicU64,
    /// Holds for writers on their way that ended by their timeout rather than by arrivals.
    holds_expired: AtomicU64,
    /// fdatasync durations (µs).
    pub sync_us: Histogram,
    /// Log records made durable per successful sync.
    pub batch_records: Histogram,
    /// Writers (tickets that asked for durability) made durable per successful sync.
    pub batch_writers: Histogram,
}

/// The counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct CommitStatsSnapshot {
    pub syncs_by_writer: u64,
    pub syncs_requested: u64,
    pub syncs_by_timer: u64,
    pub syncs_failed: u64,
    /// Writers made durable by syncs (summed over `batch_writers`).
    pub writers_covered: u64,
    pub waiter_wakeups_early: u64,
    pub holds_expired: u64,
    /// Writers waiting for a sync now.
    pub writers_waiting: u64,
    pub sync_us: HistogramSnapshot,
    pub batch_records: HistogramSnapshot,
    pub batch_writers: HistogramSnapshot,
}

impl CommitStatsSnapshot {
    /// Syncs run, failed ones included.
    pub fn syncs(&self) -> u64 {
        self.syncs_by_writer + self.syncs_requested + self.syncs_by_timer
    }
}

impl CommitStats {
    pub fn new() -> CommitStats {
        CommitStats {
            syncs_by_writer: AtomicU64::new(0),
            syncs_requested: AtomicU64::new(0),
            syncs_by_timer: AtomicU64::new(0),
            syncs_failed: AtomicU64::new(0),
            writers_covered: AtomicU64::new(0),
            waiter_wakeups_early: AtomicU64::new(0),
            holds_expired: AtomicU64::new(0),
            sync_us: Histogram::new(SYNC_US_BOUNDS),
            batch_records: Histogram::new(BATCH_RECORDS_BOUNDS),
            batch_writers: Histogram::new(WRITERS_BOUNDS),
        }
    }

    pub fn sync_started(&self, leader: Leader) {
        let c = match leader {
            Leader::Writer => &self.syncs_by_writer,
            Leader::Requested => &self.syncs_requested,
            Leader::Timer => &self.syncs_by_timer,
        };
        c.fetch_add(1, Relaxed);
    }

    pub fn sync_failed(&self) {
        self.syncs_failed.fetch_add(1, Relaxed);
    }

    /// A sync (or a repair) made `records` more log records and `writers` more waiting
    /// writers durable.
    pub fn covered(&self, records: u64, writers: u64) {
        if records > 0 {
            self.batch_records.record(records);
        }
        self.batch_writers.record(writers);
        self.writers_covered.fetch_add(writers, Relaxed);
    }

    pub fn hold_expired(&self) {
        self.holds_expired.fetch_add(1, Relaxed);
    }

    pub fn woken_early(&self) {
        self.waiter_wakeups_early.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> CommitStatsSnapshot {
        CommitStatsSnapshot {
            syncs_by_writer: self.syncs_by_writer.load(Relaxed),
            syncs_requested: self.syncs_requested.load(Relaxed),
            syncs_by_timer: self.syncs_by_timer.load(Relaxed),
            syncs_failed: self.syncs_failed.load(Relaxed),
            writers_covered: self.writers_covered.load(Relaxed),
            waiter_wakeups_early: self.waiter_wakeups_early.load(Relaxed),
            holds_expired: self.holds_expired.load(Relaxed),
            writers_waiting: 0,
            sync_us: self.sync_us.snapshot(),
            batch_records: self.batch_records.snapshot(),
            batch_writers: self.batch_writers.snapshot(),
        }
    }
}
