//! The group-commit floor: how many durable acknowledgements per second this disk allows to
//! `writers` concurrent writers when nothing but the sync costs anything. Each writer thread
//! appends a small record to one shared preallocated file and waits until a sync covers it; the
//! first waiter with no sync in flight becomes the syncer (fdatasync, then it wakes everyone its
//! sync covered). That is an ideal group commit with no network, no parsing, no index: a server's
//! durable single inserts at the same connection count are held against it.

use hdrhistogram::Histogram;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Bytes of the probe file (written and synced once first, like a preallocated log segment);
/// appends wrap around to its start.
const FILE_BYTES: u64 = 16 << 20;
/// Bytes of one record when the caller does not say (about one small document in a log
/// record). `cairn-load` appends one insert's document size (`Shape::document_bytes`), so that
/// the floor makes as many bytes durable per acknowledgement as the servers must.
pub const RECORD_BYTES_DEFAULT: usize = 512;

struct Log {
    written: u64,
    durable: u64,
    syncing: bool,
    failed: Option<String>,
}

struct Shared {
    file: File,
    log: Mutex<Log>,
    synced: Condvar,
    /// Syncs, appends and time in fdatasync over the whole run (warm-up included).
    syncs: AtomicU64,
    appends: AtomicU64,
    sync_us: AtomicU64,
}

/// Acknowledgements in the measured window and their latencies (µs).
pub struct FloorRun {
    pub acks: u64,
    pub seconds: f64,
    pub latency_us: Histogram<u64>,
    /// Appends per sync and mean fdatasync time over the whole run: what a server's own
    /// group-commit counters are held against.
    pub writers_per_sync: f64,
    pub sync_us_mean: f64,
}

fn lock(m: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One durable append: write, then wait for (or do) the sync that covers it.
fn append(s: &Shared, record: &[u8]) -> Result<(), String> {
    let mut log = lock(&s.log);
    let end = log.written + record.len() as u64;
    let offset = log.written % (FILE_BYTES - record.len() as u64);
    s.file
        .write_all_at(record, offset)
        .map_err(|e| e.to_string())?;
    log.written = end;
    s.appends.fetch_add(1, Ordering::Relaxed);
    loop {
        if let Some(e) = &log.failed {
            return Err(e.clone());
        }
        if log.durable >= end {
            return Ok(());
        }
        if !log.syncing {
            log.syncing = true;
            let target = log.written;
            drop(log);
            let started = Instant::now();
            let result = s.file.sync_data();
            s.syncs.fetch_add(1, Ordering::Relaxed);
            let took = started.elapsed().as_micros() as u64;
            s.sync_us.fetch_add(took, Ordering::Relaxed);
            log = lock(&s.log);
            log.syncing = false;
            match result {
                Ok(()) => log.durable = log.durable.max(target),
                Err(e) => log.failed = Some(e.to_string()),
            }
            s.synced.notify_all();
            continue;
        }
        log = s.synced.wait(log).unwrap_or_else(|p| p.into_inner());
    }
}

/// `writers` threads appending for `warmup` unmeasured, then `measure` (or until `acks_max`
/// appends were measured, when given).
pub fn run(
    dir: &Path,
    writers: usize,
    warmup: Duration,
    measure: Duration,
    acks_max: Option<u64>,
    record_bytes: usize,
) -> Result<FloorRun, String> {
    let record_bytes = record_bytes.clamp(1, (FILE_BYTES / 4) as usize);
    let path = dir.join(format!("cairn-load-floor-{}.bin", std::process::id()));
    let mut file = File::create(&path).map_err(|e| e.to_string())?;
    file.write_all(&vec![0u8; FILE_BYTES as usize])
        .and_then(|()| file.sync_all())
        .map_err(|e| e.to_string())?;
    let shared = Arc::new(Shared {
        file,
        log: Mutex::new(Log {
            written: 0,
            durable: 0,
            syncing: false,
            failed: None,
        }),
        synced: Condvar::new(),
        syncs: AtomicU64::new(0),
        appends: AtomicU64::new(0),
        sync_us: AtomicU64::new(0),
    });
    let start = Instant::now();
    let (from, to) = (start + warmup, start + warmup + measure);
    let measured = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..writers.max(1))
        .map(|_| {
            let (s, measured) = (shared.clone(), measured.clone());
            std::thread::spawn(move || -> Result<(u64, Histogram<u64>, Instant), String> {
                let record = vec![0x5Au8; record_bytes];
                let mut hist = crate::load::histogram();
                let (mut acks, mut last) = (0, from);
                loop {
                    let t = Instant::now();
                    let enough = acks_max.is_some_and(|m| measured.load(Ordering::Relaxed) >= m);
                    if t >= to || enough {
                        return Ok((acks, hist, last));
                    }
                    append(&s, &record)?;
                    if t >= from {
                        acks += 1;
                        last = Instant::now();
                        hist.saturating_record(last.duration_since(t).as_micros().max(1) as u64);
                        measured.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let mut out = FloorRun {
        acks: 0,
        seconds: measure.as_secs_f64(),
        latency_us: crate::load::histogram(),
        writers_per_sync: 0.0,
        sync_us_mean: 0.0,
    };
    let mut last_done = from;
    for t in threads {
        let (acks, hist, last) = t
            .join()
            .map_err(|_| "floor thread panicked".to_string())??;
        last_done = last_done.max(last);
        out.acks += acks;
        out.latency_us.add(&hist).map_err(|e| e.to_string())?;
    }
    let syncs = shared.syncs.load(Ordering::Relaxed).max(1) as f64;
    out.writers_per_sync = shared.appends.load(Ordering::Relaxed) as f64 / syncs;
    out.sync_us_mean = shared.sync_us.load(Ordering::Relaxed) as f64 / syncs;
    if acks_max.is_some() {
        out.seconds = last_done.duration_since(from).as_secs_f64();
    }
    let _ = std::fs::remove_file(&path);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_share_syncs_and_all_are_acknowledged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = run(
            dir.path(),
            4,
            Duration::ZERO,
            Duration::from_secs(60),
            Some(100),
            RECORD_BYTES_DEFAULT,
        )
        .expect("floor");
        assert!(r.acks >= 100 && r.seconds < 60.0);
        assert_eq!(r.latency_us.len(), r.acks);
        // Each append waits for an fdatasync: far above the histogram's first buckets.
        assert!(r.latency_us.max() > 2, "{}", r.latency_us.max());
        assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
    }
}
