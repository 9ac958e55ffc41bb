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
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Bytes of the probe file (written and synced once first, like a preallocated log segment);
/// appends wrap around to its start.
const FILE_BYTES: u64 = 16 << 20;
/// Bytes of one record (about one small document in a log record).
const RECORD_BYTES: usize = 512;

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
}

/// Acknowledgements in the measured window and their latencies (µs).
pub struct FloorRun {
    pub acks: u64,
    pub seconds: f64,
    pub latency_us: Histogram<u64>,
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
            let result = s.file.sync_data();
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

/// `writers` threads appending for `warmup` unmeasured, then `measure`.
pub fn run(dir: &Path, writers: usize, warmup: Duration, measure: Duration) -> Result<FloorRun, String> {
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
    });
    let start = Instant::now();
    let (from, to) = (start + warmup, start + warmup + measure);
    let threads: Vec<_> = (0..writers.max(1))
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || -> Result<(u64, Histogram<u64>), String> {
                let record = [0x5Au8; RECORD_BYTES];
                let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                let mut acks = 0;
                loop {
                    let t = Instant::now();
                    if t >= to {
                        return Ok((acks, hist));
                    }
                    append(&s, &record)?;
                    if t >= from {
                        acks += 1;
                        hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
                    }
                }
            })
        })
        .collect();
    let mut out = FloorRun {
        acks: 0,
        seconds: measure.as_secs_f64(),
        latency_us: Histogram::new(3).map_err(|e| e.to_string())?,
    };
    for t in threads {
        let (acks, hist) = t.join().map_err(|_| "floor thread panicked".to_string())??;
        out.acks += acks;
        out.latency_us.add(&hist).map_err(|e| e.to_string())?;
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
        let r = run(dir.path(), 4, Duration::ZERO, Duration::from_millis(200)).expect("floor");
        assert!(r.acks > 0);
        assert_eq!(r.latency_us.len(), r.acks);
        assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
    }
}
