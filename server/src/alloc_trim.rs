//! Hands the allocator's per-thread caches back, so that RSS falls back toward its baseline once
//! the load ends (issue 12 item 3).
//!
//! jemalloc gives every thread a cache of freed small objects (its tcache, up to a few MB per
//! thread with the 16-32 KiB classes). A thread that keeps allocating trims its own cache as it
//! goes, but a thread that goes idle keeps the cache it had at its last allocation for as long as
//! it sleeps, and the objects in it pin the slabs they sit in: a slab cannot be purged while one
//! cached object still lives in it. Blocking-pool threads are no concern (they exit after tokio's
//! keep-alive, and jemalloc flushes a thread's cache when it exits); the async workers and the
//! storage engine's threads never exit.
//!
//! So: [`trimmer`] raises a generation number every [`ALLOC_TRIM_INTERVAL_MS`] and wakes the
//! workers; each long-lived thread, just before it sleeps ([`on_thread_idle`]: the runtime's
//! `on_thread_park` hook for the async workers, the storage engine's idle hook for its commit,
//! checkpoint, compaction and preallocation threads), compares it with the generation it last
//! flushed at and, if it moved, hands its whole cache back to the arenas. A thread thus flushes
//! at most once per interval whatever the load, and an idle one within an interval.
//!
//! Dirty pages need no push: jemalloc's background threads purge them by decay within seconds,
//! and the soak found a few dozen dirty pages after its idle phase.
//!
//! Everything here goes through `tikv_jemalloc_ctl`'s safe calls; when the program does not
//! allocate through jemalloc (the library's own unit tests) they act on jemalloc's empty state.

use crate::state::ServerState;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tikv_jemalloc_ctl::{Access, AsName};

/// How often [`trimmer`] asks for a flush. A thread flushes at most once per interval, so this
/// also bounds what flushing costs under load.
pub const ALLOC_TRIM_INTERVAL_MS: u64 = 5_000;

/// Raised once per interval; threads flush when it moved.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// Thread caches handed back so far (`serverStatus.jemalloc.threadCacheFlushes`).
static FLUSHES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The generation this thread last flushed at.
    static FLUSHED_AT: Cell<u64> = const { Cell::new(0) };
}

/// Asks every long-lived thread to flush its cache the next time it sleeps.
pub fn request_flush() {
    GENERATION.fetch_add(1, Relaxed);
}

/// The runtime's `on_thread_park` hook and the storage engine's idle hook: an atomic load and a
/// thread-local read, and a flush when one was asked for since this thread's last one.
pub fn on_thread_idle() {
    let wanted = GENERATION.load(Relaxed);
    let stale = FLUSHED_AT.with(|at| at.replace(wanted) != wanted);
    if stale && flush_thread_cache() {
        FLUSHES.fetch_add(1, Relaxed);
    }
}

/// Hands this thread's cache back to the arenas. jemalloc's `thread.tcache.flush` takes no
/// argument, which the safe interface cannot express; turning the cache off flushes and frees
/// it, and turning it on again starts an empty one. False if the cache was off or the program
/// does not run on jemalloc.
pub fn flush_thread_cache() -> bool {
    let enabled = b"thread.tcache.enabled\0".name();
    let on: bool = enabled.read().unwrap_or(false);
    if !on || enabled.write(false).is_err() {
        return false;
    }
    let _ = enabled.write(true);
    true
}

/// Thread caches handed back by idle threads since start.
pub fn flushes() -> u64 {
    FLUSHES.load(Relaxed)
}

/// Bytes held in all threads' caches (jemalloc's merged `tcache_bytes`; arena index 4096 is
/// jemalloc's `MALLCTL_ARENAS_ALL`, all arenas merged), as of the last epoch advance; -1 when
/// unknown.
pub fn thread_cache_bytes() -> i64 {
    b"stats.arenas.4096.tcache_bytes\0"
        .name()
        .read()
        .map_or(-1, |v: usize| v as i64)
}

/// Installs [`on_thread_idle`] as the storage engine's idle hook and runs [`trimmer`].
pub fn spawn(state: Arc<ServerState>) {
    storage::set_thread_idle_hook(on_thread_idle);
    tokio::spawn(trimmer(state));
}

/// Background task: once per [`ALLOC_TRIM_INTERVAL_MS`] asks every long-lived thread to flush
/// its cache, and wakes the async workers so that parked ones do it now rather than at their
/// next request. (Unconditional: an idle thread's flush of an empty cache costs microseconds,
/// and a thread that did work between two looks, a checkpoint with no client about, is
/// covered too.) Stops at shutdown.
pub async fn trimmer(state: Arc<ServerState>) {
    let mut shutdown = state.shutdown_requested();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ALLOC_TRIM_INTERVAL_MS)) => {}
            _ = shutdown.changed() => return,
        }
        request_flush();
        // A spawned task wakes a parked worker to run (or steal) it; when the worker runs out
        // of work again it parks, and the hook flushes.
        let workers = tokio::runtime::Handle::current().metrics().num_workers();
        for _ in 0..workers {
            tokio::spawn(tokio::task::yield_now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;

    /// Parks of the test runtime's worker, counted beside the real hook.
    static PARKS: AtomicU64 = AtomicU64::new(0);

    /// Waits (bounded) until `f` holds; the worker parks on its own schedule.
    fn eventually(f: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    #[test]
    fn a_parked_worker_flushes_once_per_request() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_park(|| {
                on_thread_idle();
                PARKS.fetch_add(1, Relaxed);
            })
            .build()
            .unwrap();
        let work = || rt.block_on(async { tokio::spawn(async {}).await.unwrap() });
        // No request yet: parking flushes nothing.
        let before = flushes();
        let parks = PARKS.load(Relaxed);
        work();
        assert!(eventually(|| PARKS.load(Relaxed) > parks));
        assert_eq!(flushes(), before);

        request_flush();
        work();
        assert!(
            eventually(|| flushes() == before + 1),
            "no flush after a request"
        );
        // Parking again without a new request does not flush again.
        let parks = PARKS.load(Relaxed);
        work();
        assert!(eventually(|| PARKS.load(Relaxed) > parks));
        assert_eq!(flushes(), before + 1);
    }

    #[test]
    fn a_flushed_thread_keeps_its_cache_on() {
        let enabled = b"thread.tcache.enabled\0".name();
        assert!(flush_thread_cache());
        assert_eq!(enabled.read(), Ok(true));
    }
}
