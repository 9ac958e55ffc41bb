//! The PostgreSQL side of the two write rows, through `tokio-postgres`: the same documents as
//! `jsonb` in `(id bigint primary key, doc jsonb)` with expression indexes on the same two keys
//! cairn indexes (so both maintain three trees per document), `synchronous_commit = on`. Bulk
//! insert: batches of 1,000 rows per statement (one commit each), as many in flight as cairn's
//! load; durable single insert: one row per statement, sequential, one connection.

use crate::compare::limits::BULK_BATCH_COUNT;
use crate::compare::sweep::docs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls, Statement};

const TABLE: &str = "cairn_sweep";
/// Settings reported beside the figures (they decide what a commit costs).
const SETTINGS: &[&str] = &[
    "server_version",
    "synchronous_commit",
    "fsync",
    "wal_sync_method",
    "full_page_writes",
    "shared_buffers",
];

type Outcome<T> = Result<T, String>;

fn fail(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// A connection with `synchronous_commit = on` (its driver task runs until the client drops).
pub async fn connect(uri: &str) -> Outcome<Client> {
    let (client, connection) = tokio_postgres::connect(uri, NoTls).await.map_err(fail)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
        .batch_execute("SET synchronous_commit = on")
        .await
        .map_err(fail)?;
    Ok(client)
}

/// `name = value` of the settings that matter here.
pub async fn settings(client: &Client) -> Outcome<Vec<(String, String)>> {
    let mut out = Vec::new();
    for name in SETTINGS {
        let row = client
            .query_one(&format!("SHOW {name}"), &[])
            .await
            .map_err(fail)?;
        out.push((name.to_string(), row.get::<_, String>(0)));
    }
    Ok(out)
}

/// Drop and create the table and its two expression indexes.
pub async fn recreate(client: &Client) -> Outcome<()> {
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {TABLE};
             CREATE TABLE {TABLE} (id bigint PRIMARY KEY, doc jsonb NOT NULL);
             CREATE INDEX {TABLE}_k ON {TABLE} (((doc->>'k')::bigint));
             CREATE INDEX {TABLE}_s ON {TABLE} ((doc->>'s'));"
        ))
        .await
        .map_err(fail)
}

pub async fn drop_table(client: &Client) -> Outcome<()> {
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {TABLE}"))
        .await
        .map_err(fail)
}

/// Load rows `0..n` in batches of `BULK_BATCH_COUNT` over `clients` (one batch in flight on
/// each); the wall time from the first batch sent to the last committed.
pub async fn bulk_load(clients: &[Arc<Client>], n: u64) -> Outcome<Duration> {
    let sql =
        format!("INSERT INTO {TABLE} (id, doc) SELECT * FROM unnest($1::bigint[], $2::jsonb[])");
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let (client, next, sql) = (client.clone(), next.clone(), sql.clone());
        tasks.push(tokio::spawn(async move {
            let stmt = client.prepare(&sql).await.map_err(fail)?;
            loop {
                let first = next.fetch_add(BULK_BATCH_COUNT as u64, Ordering::Relaxed);
                if first >= n {
                    return Ok::<(), String>(());
                }
                let last = (first + BULK_BATCH_COUNT as u64).min(n);
                let ids: Vec<i64> = (first..last).map(|i| i as i64).collect();
                let rows: Vec<serde_json::Value> =
                    (first..last).map(|i| docs::json(i, n)).collect();
                client.execute(&stmt, &[&ids, &rows]).await.map_err(fail)?;
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| format!("load task: {e}"))??;
    }
    Ok(start.elapsed())
}

/// The single-row insert statement.
pub async fn prepare_single(client: &Client) -> Outcome<Statement> {
    client
        .prepare(&format!("INSERT INTO {TABLE} (id, doc) VALUES ($1, $2)"))
        .await
        .map_err(fail)
}

/// Sequential single-row inserts of rows `first..first + count`, each its own durable commit;
/// microseconds each.
pub async fn single_block(
    client: &Client,
    stmt: &Statement,
    n: u64,
    first: u64,
    count: usize,
) -> Outcome<Vec<f64>> {
    let mut out = Vec::with_capacity(count);
    for id in first..first + count as u64 {
        let (key, doc) = (id as i64, docs::json(id, n));
        let start = Instant::now();
        client.execute(stmt, &[&key, &doc]).await.map_err(fail)?;
        out.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(out)
}
