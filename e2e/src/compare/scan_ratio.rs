//! `cairn-bench ratio`: two `cairn` builds side by side on the same users (`dataset`), each
//! timing the count scan (an unindexed range `count`), `$project` of 3 fields with every result
//! read, and a top-k `$sort` + `$limit` 10 — the rows of issue 11's goals "≤ 1.5× the count
//! scan". Runs alternate between the builds (and which goes first), serial scans
//! (`parallelScanThreads` 1) and parallel ones (0), so every figure of one run saw the same
//! machine. Besides wall time, each sample records the CPU the server and this client used
//! (`/proc/<pid>/stat`, all threads, ended ones included), which splits a `$project` between
//! the server and the client reading its results.
//!
//! How the client reads a `$project`'s results: `project` drains the driver's `Cursor` with
//! `advance` (the driver copies each document out of the reply into its own buffer, decodes
//! none); `project raw` takes the driver's raw batches (`aggregate(..).batch()`) and walks every
//! element of every document in place, as a client that reads raw BSON does. Both read every
//! result; neither decodes into `Document`.

use super::dataset;
use super::stats::median;
use anyhow::{Context, Result};
use bson::{Document, doc};
use futures_util::StreamExt;
use mongodb::{Client, Collection, Database};
use std::time::Instant;

const USERS: &str = "users";
const LOAD_BATCH_COUNT: i64 = 1_000;

/// The workloads, in the order each run times them.
pub const WORKLOADS: &[&str] = &[
    "count scan (unindexed range count)",
    "$project 3 fields (driver cursor)",
    "$project 3 fields (raw batches)",
    "$sort+$limit 10 (top-k)",
];

/// One timed repetition: wall and CPU milliseconds per operation.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    wall_ms: f64,
    server_cpu_ms: f64,
    client_cpu_ms: f64,
}

/// Medians of one workload on one build in one scan mode.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub build: String,
    pub mode: &'static str,
    pub workload: &'static str,
    pub wall_ms: f64,
    pub server_cpu_ms: f64,
    pub client_cpu_ms: f64,
    /// Wall time over the count scan's in the same build and mode.
    pub ratio_to_count: f64,
}

/// User plus system CPU of process `pid` (all its threads, ended ones too), in ms.
fn cpu_ms(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = stat.rsplit_once(')').context("stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15; `rest` starts at field 3. USER_HZ is 100 on Linux.
    Ok((ticks(11) + ticks(12)) * 10.0)
}

async fn one_op(db: &Database, users: &Collection<Document>, w: usize) -> Result<()> {
    match w {
        0 => {
            db.run_command(doc! {"count": USERS, "query": {"age": {"$gte": 30, "$lt": 40}}})
                .await?;
        }
        1 => {
            let p = [doc! {"$project": {"username": 1, "age": 1, "score": 1}}];
            let mut cursor = users.aggregate(p).batch_size(1000).await?;
            while cursor.advance().await? {}
        }
        2 => {
            let p = [doc! {"$project": {"username": 1, "age": 1, "score": 1}}];
            let mut batches = users.aggregate(p).batch_size(1000).batch().await?;
            let mut elements = 0usize;
            while let Some(batch) = batches.next().await {
                let batch = batch?;
                for d in batch.doc_slices()? {
                    let d = d?.as_document().context("a batch item is not a document")?;
                    for e in d {
                        e?;
                        elements += 1;
                    }
                }
            }
            std::hint::black_box(elements);
        }
        _ => {
            let p = [
                doc! {"$sort": {"score": -1}},
                doc! {"$limit": 10},
                doc! {"$project": {"score": 1}},
            ];
            let mut cursor = users.aggregate(p).allow_disk_use(true).await?;
            while cursor.advance().await? {}
        }
    }
    Ok(())
}

/// `reps` operations of workload `w`, as one sample.
async fn sample(
    db: &Database,
    users: &Collection<Document>,
    server_pid: u32,
    w: usize,
    reps: usize,
) -> Result<Sample> {
    let me = std::process::id();
    let (s0, c0) = (cpu_ms(server_pid)?, cpu_ms(me)?);
    let start = Instant::now();
    for _ in 0..reps {
        one_op(db, users, w).await?;
    }
    let wall = start.elapsed().as_secs_f64() * 1e3;
    let (s1, c1) = (cpu_ms(server_pid)?, cpu_ms(me)?);
    let n = reps.max(1) as f64;
    Ok(Sample {
        wall_ms: wall / n,
        server_cpu_ms: (s1 - s0) / n,
        client_cpu_ms: (c1 - c0) / n,
    })
}

async fn load(users: &Collection<Document>, docs: u64) -> Result<()> {
    users.drop().await?;
    let mut first = 0i64;
    while (first as u64) < docs {
        let count = (docs - first as u64).min(LOAD_BATCH_COUNT as u64) as i64;
        users
            .insert_many(dataset::users(dataset::SEED, first, count))
            .await?;
        first += count;
    }
    Ok(())
}

/// One build under test: its name, client and server process.
pub struct Side {
    pub name: String,
    pub client: Client,
    pub pid: u32,
}

const MODES: &[(&str, i32)] = &[("serial", 1), ("parallel", 0)];

/// Loads `docs` users into each side, then `runs` alternating runs of every workload
/// (`reps` operations per sample); medians per build, mode and workload.
/// `only`: the indexes into [`WORKLOADS`] to time (empty: all), e.g. to profile one of them.
pub async fn run(
    sides: &[Side],
    docs: u64,
    runs: usize,
    reps: usize,
    only: &[usize],
) -> Result<Vec<Row>> {
    let db_name = "bench_ratio";
    for s in sides {
        load(&s.client.database(db_name).collection(USERS), docs).await?;
    }
    // samples[side][mode][workload]
    let mut samples =
        vec![vec![vec![Vec::<Sample>::new(); WORKLOADS.len()]; MODES.len()]; sides.len()];
    for run in 0..runs {
        for (m, (_, threads)) in MODES.iter().enumerate() {
            for k in 0..sides.len() {
                let b = (k + run) % sides.len();
                let side = &sides[b];
                side.client
                    .database("admin")
                    .run_command(doc! {"setParameter": 1, "parallelScanThreads": *threads})
                    .await
                    .context("setParameter parallelScanThreads")?;
                let db = side.client.database(db_name);
                let users = db.collection::<Document>(USERS);
                for w in (0..WORKLOADS.len()).filter(|w| only.is_empty() || only.contains(w)) {
                    let s = sample(&db, &users, side.pid, w, reps).await?;
                    samples[b][m][w].push(s);
                }
            }
        }
        eprintln!("cairn-bench ratio: run {} of {runs} done", run + 1);
    }
    let mut rows = Vec::new();
    for (b, side) in sides.iter().enumerate() {
        for (m, (mode, _)) in MODES.iter().enumerate() {
            let med = |w: usize, f: fn(&Sample) -> f64| {
                median(&samples[b][m][w].iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
            };
            let count_ms = med(0, |s| s.wall_ms);
            for (w, name) in WORKLOADS.iter().enumerate() {
                if samples[b][m][w].is_empty() {
                    continue;
                }
                let wall_ms = med(w, |s| s.wall_ms);
                rows.push(Row {
                    build: side.name.clone(),
                    mode,
                    workload: name,
                    wall_ms,
                    server_cpu_ms: med(w, |s| s.server_cpu_ms),
                    client_cpu_ms: med(w, |s| s.client_cpu_ms),
                    ratio_to_count: wall_ms / count_ms,
                });
            }
        }
    }
    Ok(rows)
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[Row], docs: u64, runs: usize, reps: usize, load: &str) -> String {
    let mut out = format!(
        "{docs} documents; median of {runs} runs of {reps} operations each; builds, scan modes \
         and which build goes first alternate within each run; {load}\n\n\
         | build | scan | workload | wall ms/op | ÷ count scan | server CPU ms/op | client CPU ms/op |\n\
         |---|---|---|---:|---:|---:|---:|\n"
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.2} | {:.1} | {:.1} |\n",
            r.build,
            r.mode,
            r.workload,
            r.wall_ms,
            r.ratio_to_count,
            r.server_cpu_ms,
            r.client_cpu_ms
        ));
    }
    out
}
