//! The timed phases against one loaded cairn, through the official driver as an application
//! would: the bulk load (insertMany batches, several in flight), point reads by `_id` and by the
//! int key, range scans by the int key, and durable single inserts with and without a stream of
//! `{fsync: 1}` (a forced checkpoint) on another connection.

use crate::compare::limits::{BULK_BATCH_COUNT, SWEEP_INSERT_PHASE_COUNT_MAX, SWEEP_RANGE_DOCS};
use crate::compare::sweep::docs::{self, INDEX_INT, INDEX_STRING};
use crate::compare::workloads::describe;
use bson::{Document, doc};
use mongodb::{Client, Collection, IndexModel};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// mongod's "no such command": the server has no `fsync` (no forced checkpoint) yet.
pub const COMMAND_NOT_FOUND: i32 = 59;

type Outcome<T> = Result<T, String>;

fn fail(e: mongodb::error::Error) -> String {
    describe(&e)
}

/// The two secondary indexes, created on the empty collection before the load.
pub async fn create_indexes(coll: &Collection<Document>) -> Outcome<()> {
    let models = [INDEX_INT, INDEX_STRING].map(|f| IndexModel::builder().keys(doc! {f: 1}).build());
    coll.create_indexes(models).await.map_err(fail)?;
    Ok(())
}

/// Load documents `0..n` in batches of `BULK_BATCH_COUNT`, `in_flight` batches at a time;
/// returns the wall time from the first batch sent to the last acknowledged.
pub async fn bulk_load(coll: &Collection<Document>, n: u64, in_flight: usize) -> Outcome<Duration> {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..in_flight.max(1) {
        let (coll, next) = (coll.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let first = next.fetch_add(BULK_BATCH_COUNT as u64, Ordering::Relaxed);
                if first >= n {
                    return Ok::<(), String>(());
                }
                let last = (first + BULK_BATCH_COUNT as u64).min(n);
                let batch: Vec<Document> = (first..last).map(|id| docs::document(id, n)).collect();
                coll.insert_many(batch).await.map_err(fail)?;
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| format!("load task: {e}"))??;
    }
    Ok(start.elapsed())
}

/// Insert documents `first..first + count` in acknowledged batches, one after the other.
pub async fn burst(coll: &Collection<Document>, first: u64, count: u64, n: u64) -> Outcome<()> {
    let mut id = first;
    while id < first + count {
        let last = (id + BULK_BATCH_COUNT as u64).min(first + count);
        let batch: Vec<Document> = (id..last).map(|i| docs::document(i, n)).collect();
        coll.insert_many(batch).await.map_err(fail)?;
        id = last;
    }
    Ok(())
}

/// Which key a point read looks up.
#[derive(Clone, Copy, Debug)]
pub enum Key {
    Id,
    Int,
}

/// Per-operation latencies of one kind of read, grouped by run (µs for point reads, ms for
/// range scans).
pub struct Runs {
    pub per_run: Vec<Vec<f64>>,
}

impl Runs {
    /// Mean of each run.
    pub fn means(&self) -> Vec<f64> {
        self.per_run
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| r.iter().sum::<f64>() / r.len() as f64)
            .collect()
    }

    pub fn all(&self) -> Vec<f64> {
        self.per_run.iter().flatten().copied().collect()
    }
}

/// `findOne` of random documents of `0..n`, `runs` runs of `ops` reads; each must find one.
pub async fn point_reads(
    coll: &Collection<Document>,
    n: u64,
    key: Key,
    runs: usize,
    ops: usize,
) -> Outcome<Runs> {
    let mut out = Runs {
        per_run: Vec::new(),
    };
    for run in 0..runs {
        let mut rng = crate::compare::dataset::Rng::new(0xBEEF ^ run as u64 ^ ((key as u64) << 8));
        let mut lat = Vec::with_capacity(ops);
        for _ in 0..ops {
            let id = rng.below(n);
            let filter = match key {
                Key::Id => doc! {"_id": id as i64},
                Key::Int => doc! {INDEX_INT: docs::scramble(id, n) as i64},
            };
            let start = Instant::now();
            let found = coll.find_one(filter).await.map_err(fail)?;
            lat.push(start.elapsed().as_secs_f64() * 1e6);
            if found.is_none() {
                return Err(format!("{key:?} read of document {id} found nothing"));
            }
        }
        out.per_run.push(lat);
    }
    Ok(out)
}

/// `find({k: {$gte: lo, $lt: lo + 1000}})` read to the end, from random `lo`; ms per scan.
pub async fn range_scans(
    coll: &Collection<Document>,
    n: u64,
    runs: usize,
    ops: usize,
) -> Outcome<Runs> {
    let width = SWEEP_RANGE_DOCS.min(n as i64);
    let mut out = Runs {
        per_run: Vec::new(),
    };
    for run in 0..runs {
        let mut rng = crate::compare::dataset::Rng::new(0x5CA7 ^ run as u64);
        let mut lat = Vec::with_capacity(ops);
        for _ in 0..ops {
            let lo = rng.below(n - width as u64 + 1) as i64;
            let start = Instant::now();
            let filter = doc! {INDEX_INT: {"$gte": lo, "$lt": lo + width}};
            let mut cursor = coll.find(filter).await.map_err(fail)?;
            let mut got = 0i64;
            while cursor.advance().await.map_err(fail)? {
                got += 1;
            }
            lat.push(start.elapsed().as_secs_f64() * 1e3);
            if got != width {
                return Err(format!("range scan from {lo} returned {got}, not {width}"));
            }
        }
        out.per_run.push(lat);
    }
    Ok(out)
}

/// Durable single inserts of one phase, and the forced checkpoints that ran beside them.
#[derive(Default)]
pub struct InsertPhase {
    /// (start, end) of each insert, from the phase's start.
    pub inserts: Vec<(Duration, Duration)>,
    /// (start, end) of each completed `{fsync: 1}`.
    pub checkpoints: Vec<(Duration, Duration)>,
    /// Why checkpoints stopped early (an error reply), if they did.
    pub checkpoint_error: Option<String>,
}

impl InsertPhase {
    /// Microseconds of the inserts that overlapped a checkpoint (`true`) or none (`false`).
    pub fn latencies_us(&self, during: bool) -> Vec<f64> {
        self.inserts
            .iter()
            .filter(|(a, b)| overlaps(*a, *b, &self.checkpoints) == during)
            .map(|(a, b)| (*b - *a).as_secs_f64() * 1e6)
            .collect()
    }

    pub fn checkpoint_ms(&self) -> Vec<f64> {
        self.checkpoints
            .iter()
            .map(|(a, b)| (*b - *a).as_secs_f64() * 1e3)
            .collect()
    }
}

/// True when [a, b) intersects any of the intervals.
pub fn overlaps(a: Duration, b: Duration, intervals: &[(Duration, Duration)]) -> bool {
    intervals.iter().any(|(c, d)| a < *d && *c < b)
}

/// Run `{fsync: 1}` once: Ok(None) when it worked, Ok(Some(reason)) when the server has no such
/// command, Err for any other failure.
pub async fn fsync_once(client: &Client) -> Outcome<Option<String>> {
    match client
        .database("admin")
        .run_command(doc! {"fsync": 1})
        .await
    {
        Ok(_) => Ok(None),
        Err(e) if crate::error_code(&e) == COMMAND_NOT_FOUND => Ok(Some(describe(&e))),
        Err(e) => Err(describe(&e)),
    }
}

/// Sequential `insertOne` (default write concern) of documents `first..first + count`;
/// microseconds each.
pub async fn insert_block(
    coll: &Collection<Document>,
    n: u64,
    first: u64,
    count: usize,
) -> Outcome<Vec<f64>> {
    let mut out = Vec::with_capacity(count);
    for id in first..first + count as u64 {
        let d = docs::document(id, n);
        let start = Instant::now();
        coll.insert_one(d).await.map_err(fail)?;
        out.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(out)
}

/// Sequential `insertOne` (default write concern) of documents from `*next_id` on, for
/// `budget`; with `checkpoints`, that client issues `{fsync: 1}` back to back meanwhile.
pub async fn insert_phase(
    coll: &Collection<Document>,
    n: u64,
    next_id: &mut u64,
    budget: Duration,
    checkpoints: Option<Client>,
) -> Outcome<InsertPhase> {
    let origin = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let fsyncs = checkpoints.map(|client| {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut done = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let a = origin.elapsed();
                if let Err(e) = client
                    .database("admin")
                    .run_command(doc! {"fsync": 1})
                    .await
                {
                    return (done, Some(describe(&e)));
                }
                done.push((a, origin.elapsed()));
            }
            (done, None)
        })
    });
    let mut phase = InsertPhase::default();
    let mut result = Ok(());
    while origin.elapsed() < budget && phase.inserts.len() < SWEEP_INSERT_PHASE_COUNT_MAX {
        let d = docs::document(*next_id, n);
        let a = origin.elapsed();
        if let Err(e) = coll.insert_one(d).await {
            result = Err(fail(e));
            break;
        }
        phase.inserts.push((a, origin.elapsed()));
        *next_id += 1;
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(task) = fsyncs {
        let (done, error) = task.await.map_err(|e| format!("fsync task: {e}"))?;
        phase.checkpoints = done;
        phase.checkpoint_error = error;
    }
    result.map(|()| phase)
}

/// The collection's document count (the driver sends the `count` command).
pub async fn count(coll: &Collection<Document>) -> Outcome<u64> {
    coll.estimated_document_count().await.map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn inserts_are_split_by_overlap_with_checkpoints() {
        let phase = InsertPhase {
            inserts: vec![
                (ms(0), ms(1)),
                (ms(9), ms(11)),
                (ms(12), ms(13)),
                (ms(20), ms(24)),
            ],
            checkpoints: vec![(ms(10), ms(12)), (ms(23), ms(30))],
            checkpoint_error: None,
        };
        assert_eq!(phase.latencies_us(true), vec![2_000.0, 4_000.0]);
        assert_eq!(phase.latencies_us(false), vec![1_000.0, 1_000.0]);
        assert_eq!(phase.checkpoint_ms(), vec![2.0, 7.0]);
        // Touching ends do not overlap.
        assert!(!overlaps(ms(0), ms(10), &[(ms(10), ms(12))]));
    }

    #[test]
    fn run_means_skip_empty_runs() {
        let r = Runs {
            per_run: vec![vec![1.0, 3.0], vec![], vec![4.0]],
        };
        assert_eq!(r.means(), vec![2.0, 4.0]);
        assert_eq!(r.all().len(), 3);
    }
}
