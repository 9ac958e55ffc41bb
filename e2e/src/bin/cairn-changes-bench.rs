//! `cairn-changes-bench`: change streams against a running `cairn --replSet` (initiated).
//! Latency: one writer inserts one document at a time; every open stream (1, then `--streams`)
//! waits in an awaitData getMore, and the time from the insert's start to the event's arrival
//! is recorded per stream (median, p99 in microseconds). Throughput: `--writers` concurrent
//! writers insert for `--secs` seconds with 0, 1 and 10 streams open and reading, reported as
//! inserts per second and as a ratio to 0 streams. Reading back: the whole oplog by a `find` on
//! `local.oplog.rs`, and every event of the `bench` database by a change stream started at the
//! beginning of the history, in entries (events) per second. See docs/BENCHMARKS.md.

use anyhow::Result;
use bson::{Document, doc};
use clap::Parser;
use futures_util::StreamExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cairn-changes-bench",
    about = "Change-stream latency and write throughput"
)]
struct Cli {
    /// The server, host:port (an initiated replica-set member).
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    /// Events measured per latency run.
    #[arg(long, default_value_t = 300)]
    ops: usize,
    /// Streams of the second latency run.
    #[arg(long, default_value_t = 100)]
    streams: usize,
    /// Concurrent writers of the throughput runs.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Seconds of each throughput run.
    #[arg(long, default_value_t = 5)]
    secs: u64,
}

fn quantile_us(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

async fn latency(client: &mongodb::Client, streams: usize, ops: usize) -> Result<Vec<Duration>> {
    let coll = client.database("bench").collection::<Document>("lat");
    let start: Arc<std::sync::Mutex<Vec<Instant>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let mut s = coll.watch().max_await_time(Duration::from_secs(10)).await?;
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(ops);
            for i in 0..ops {
                let Some(Ok(_)) = s.next().await else { break };
                let t0 = start
                    .lock()
                    .map(|v| v[i])
                    .unwrap_or_else(|_| Instant::now());
                out.push(t0.elapsed());
            }
            out
        }));
    }
    // Let every stream reach its waiting getMore.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..ops {
        start.lock().map(|mut v| v.push(Instant::now())).ok();
        coll.insert_one(doc! { "i": i as i64 }).await?;
        // One event in flight at a time: wait for the first stream to see it.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await?);
    }
    all.sort();
    Ok(all)
}

async fn throughput(
    client: &mongodb::Client,
    streams: usize,
    writers: usize,
    secs: u64,
) -> Result<f64> {
    let coll = client
        .database("bench")
        .collection::<Document>(&format!("tp{streams}"));
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..streams {
        let mut s = coll
            .watch()
            .max_await_time(Duration::from_millis(500))
            .await?;
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if tokio::time::timeout(Duration::from_millis(600), s.next())
                    .await
                    .is_err()
                {
                    continue;
                }
            }
        }));
    }
    let done = Arc::new(AtomicU64::new(0));
    let began = Instant::now();
    let mut ws = Vec::new();
    for w in 0..writers {
        let coll = coll.clone();
        let done = done.clone();
        ws.push(tokio::spawn(async move {
            let mut i = 0i64;
            while began.elapsed() < Duration::from_secs(secs) {
                if coll
                    .insert_one(doc! { "w": w as i64, "i": i })
                    .await
                    .is_ok()
                {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        }));
    }
    for w in ws {
        w.await?;
    }
    let rate = done.load(Ordering::Relaxed) as f64 / began.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let _ = r.await;
    }
    Ok(rate)
}

/// Reads the whole oplog: (entries, seconds).
async fn oplog_read(client: &mongodb::Client) -> Result<(u64, f64)> {
    let oplog = client.database("local").collection::<Document>("oplog.rs");
    let began = Instant::now();
    let mut cursor = oplog.find(doc! {}).batch_size(1000).await?;
    let mut n = 0u64;
    while let Some(e) = cursor.next().await {
        e?;
        n += 1;
    }
    Ok((n, began.elapsed().as_secs_f64()))
}

/// Reads every event of the `bench` database from the start of the history until caught up:
/// (events, seconds).
async fn stream_catch_up(client: &mongodb::Client) -> Result<(u64, f64)> {
    let db = client.database("bench");
    let began = Instant::now();
    let mut s = db
        .watch()
        .start_at_operation_time(bson::Timestamp {
            time: 0,
            increment: 1,
        })
        .batch_size(1000)
        .max_await_time(Duration::from_millis(200))
        .await?;
    let (mut n, mut empty) = (0u64, 0);
    // Two empty replies in a row (each after an awaitData wait): the stream is caught up.
    while empty < 2 {
        match s.next_if_any().await? {
            Some(_) => {
                n += 1;
                empty = 0;
            }
            None => empty += 1,
        }
    }
    Ok((n, began.elapsed().as_secs_f64()))
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    // Initiate the set when it is not yet (AlreadyInitialized, 23, is fine).
    let direct =
        mongodb::Client::with_uri_str(format!("mongodb://{}/?directConnection=true", cli.addr))
            .await?;
    if let Err(e) = direct
        .database("admin")
        .run_command(doc! { "replSetInitiate": {} })
        .await
        && !e.to_string().contains("already initialized")
    {
        return Err(e.into());
    }
    let uri = format!("mongodb://{}/?replicaSet=rs0&maxPoolSize=200", cli.addr);
    let client = mongodb::Client::with_uri_str(&uri).await?;
    for n in [1, cli.streams] {
        let l = latency(&client, n, cli.ops).await?;
        println!(
            "latency insert->event, {n} stream(s): {} events, median {:.0} us, p99 {:.0} us",
            l.len(),
            quantile_us(&l, 0.5),
            quantile_us(&l, 0.99)
        );
    }
    let base = throughput(&client, 0, cli.writers, cli.secs).await?;
    println!("throughput, 0 streams: {base:.0} inserts/s");
    for n in [1, 10] {
        let r = throughput(&client, n, cli.writers, cli.secs).await?;
        println!(
            "throughput, {n} stream(s): {r:.0} inserts/s ({:.2} of 0 streams)",
            r / base
        );
    }
    let (n, secs) = oplog_read(&client).await?;
    println!(
        "oplog read (find on local.oplog.rs): {n} entries in {secs:.2} s, {:.0} entries/s",
        n as f64 / secs
    );
    let (n, secs) = stream_catch_up(&client).await?;
    println!(
        "change stream from the start of the history: {n} events in {secs:.2} s, {:.0} events/s",
        n as f64 / secs
    );
    Ok(())
}
