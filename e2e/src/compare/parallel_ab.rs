//! `cairn-bench parallel`: the scans a parallel collection scan serves (an unindexed count, a
//! `$group` by key whose accumulators merge, a `$group` with a double `$avg` that falls back to
//! serial, a top-k `$sort` + `$limit`), each timed with cairn's `parallelScanThreads` at 1
//! (serial) and 0 (one part per core), alternating within every run so both see the same
//! machine load. Reported per document scanned (median over runs), with the load average.

use super::dataset;
use anyhow::{Context, Result};
use bson::{Document, doc};
use futures_util::TryStreamExt;
use mongodb::{Client, Collection, Database};
use std::time::Instant;

const USERS: &str = "users";
/// insertMany batch while loading.
const LOAD_BATCH_COUNT: i64 = 1_000;

/// One workload at one record count: ns per document, serial and parallel (medians).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub docs: u64,
    pub workload: &'static str,
    pub serial_ns_per_doc: f64,
    pub parallel_ns_per_doc: f64,
}

/// The workloads: a name and the operation.
const WORKLOADS: &[&str] = &[
    "count (unindexed range)",
    "countDocuments (unindexed filter)",
    "$group by key (n, int sum, min, max)",
    "$group by key, $avg of a double (serial fallback)",
    "$sort+$limit 10 (top-k)",
];

async fn run_one(db: &Database, users: &Collection<Document>, i: usize) -> Result<()> {
    match i {
        0 => {
            db.run_command(doc! {"count": USERS, "query": {"age": {"$gte": 30, "$lt": 40}}})
                .await?;
        }
        1 => {
            users.count_documents(doc! {"score": {"$lt": 50.0}}).await?;
        }
        2 => {
            let p = [doc! {"$group": {"_id": "$age", "n": {"$sum": 1},
            "logins": {"$sum": "$login_count"}, "lo": {"$min": "$balance"},
            "hi": {"$max": "$balance"}}}];
            let _: Vec<Document> = users.aggregate(p).await?.try_collect().await?;
        }
        3 => {
            let p = [doc! {"$group": {"_id": "$age", "n": {"$sum": 1},
            "balance": {"$avg": "$balance"}}}];
            let _: Vec<Document> = users.aggregate(p).await?.try_collect().await?;
        }
        _ => {
            let p = [doc! {"$sort": {"score": -1}}, doc! {"$limit": 10}];
            let _: Vec<Document> = users.aggregate(p).await?.try_collect().await?;
        }
    }
    Ok(())
}

async fn set_threads(client: &Client, n: i32) -> Result<()> {
    client
        .database("admin")
        .run_command(doc! {"setParameter": 1, "parallelScanThreads": n})
        .await
        .context("setParameter parallelScanThreads (is the server cairn?)")?;
    Ok(())
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Loads `docs` users into `db_name`, then times every workload `runs` times each way.
pub async fn run(client: &Client, db_name: &str, docs: u64, runs: usize) -> Result<Vec<Row>> {
    let db = client.database(db_name);
    let users: Collection<Document> = db.collection(USERS);
    load(&users, docs).await?;
    let mut rows = Vec::new();
    for (i, name) in WORKLOADS.iter().enumerate() {
        let (mut serial, mut parallel) = (Vec::new(), Vec::new());
        for run in 0..runs.max(1) {
            // Alternate which goes first, so neither always follows the other.
            let order = if run % 2 == 0 { [1, 0] } else { [0, 1] };
            for threads in order {
                set_threads(client, threads).await?;
                let start = Instant::now();
                run_one(&db, &users, i).await?;
                let ns = start.elapsed().as_secs_f64() * 1e9 / docs as f64;
                if threads == 1 {
                    serial.push(ns);
                } else {
                    parallel.push(ns);
                }
            }
        }
        let row = Row {
            docs,
            workload: name,
            serial_ns_per_doc: median(&mut serial),
            parallel_ns_per_doc: median(&mut parallel),
        };
        eprintln!(
            "cairn-bench parallel: {docs} {name}: serial {:.0} ns/doc, parallel {:.0} ns/doc",
            row.serial_ns_per_doc, row.parallel_ns_per_doc
        );
        rows.push(row);
    }
    set_threads(client, 0).await?;
    let _ = db.drop().await;
    Ok(rows)
}

/// The machine's load average (1, 5, 15 minutes) as /proc/loadavg gives it, or "unknown".
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[Row], runs: usize, load_before: &str, load_after: &str) -> String {
    let mut out = format!(
        "median of {runs} runs; load average before {load_before}, after {load_after}\n\n\
         | records | workload | serial ns/doc | parallel ns/doc | serial / parallel |\n\
         |---:|---|---:|---:|---:|\n"
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.2} |\n",
            r.docs,
            r.workload,
            r.serial_ns_per_doc,
            r.parallel_ns_per_doc,
            r.serial_ns_per_doc / r.parallel_ns_per_doc
        ));
    }
    out
}
