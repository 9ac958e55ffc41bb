//! `cairn-ts-bench`: a time-series collection against a plain collection holding the same
//! measurements, side by side in one run: each batch is inserted into both (the order
//! alternates batch by batch), so both see the same machine load. Per round it reports the
//! insert rate of each, and after the last round the live bytes of each (documents and
//! indexes, from `collStats`; for the time-series collection those of its buckets) and the
//! time of a one-hour range count of one sensor on each. The plain collection gets the
//! `{m: 1, t: 1}` index the time-series collection creates for itself, so both counts are
//! served by an index on the meta value and time. See docs/BENCHMARKS.md.

use anyhow::{Result, bail};
use bson::{DateTime, Document, doc};
use clap::Parser;
use mongodb::{Client, Database};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cairn-ts-bench",
    about = "time-series vs plain collection: inserts and bytes"
)]
struct Cli {
    /// The server's connection string.
    #[arg(
        long,
        default_value = "mongodb://127.0.0.1:27017/?directConnection=true"
    )]
    server: String,
    /// Measurements per round.
    #[arg(long, default_value_t = 100_000)]
    measurements: usize,
    /// Sensors (meta values); each reports every 10 seconds.
    #[arg(long, default_value_t = 20)]
    sensors: usize,
    /// Measurements per insert command.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Rounds (both collections dropped and refilled each round).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

const DB: &str = "tsbench";
/// 2026-01-01T00:00:00Z.
const BASE_MS: i64 = 1_767_225_600_000;

fn measurement(i: usize, sensors: usize) -> Document {
    let sensor = (i % sensors) as i32;
    let tick = (i / sensors) as i64;
    doc! {
        "t": DateTime::from_millis(BASE_MS + tick * 10_000),
        "m": { "sensor": sensor, "site": format!("site{}", sensor % 4) },
        "temp": 20.0 + ((i * 7919) % 1000) as f64 / 100.0,
        "hum": ((i * 104_729) % 100) as i32,
    }
}

async fn reset(db: &Database) -> Result<()> {
    db.drop().await?;
    db.run_command(doc! {
        "create": "ts",
        "timeseries": { "timeField": "t", "metaField": "m", "granularity": "seconds" },
    })
    .await?;
    db.run_command(doc! { "create": "plain" }).await?;
    db.run_command(doc! { "createIndexes": "plain", "indexes": [{ "key": { "m": 1, "t": 1 }, "name": "m_1_t_1" }] })
        .await?;
    Ok(())
}

/// `(data bytes, index bytes)` of a collection.
async fn bytes(db: &Database, coll: &str) -> Result<(i64, i64)> {
    let s = db.run_command(doc! { "collStats": coll }).await?;
    let n = |k: &str| match s.get(k) {
        Some(bson::Bson::Int32(v)) => i64::from(*v),
        Some(bson::Bson::Int64(v)) => *v,
        Some(bson::Bson::Double(v)) => *v as i64,
        _ => 0,
    };
    Ok((n("size"), n("totalIndexSize")))
}

async fn range_count(db: &Database, coll: &str) -> Result<(u64, Duration)> {
    let from = DateTime::from_millis(BASE_MS + 3_600_000);
    let to = DateTime::from_millis(BASE_MS + 2 * 3_600_000);
    let started = Instant::now();
    let n = db
        .collection::<Document>(coll)
        .count_documents(doc! {
            "t": { "$gte": from, "$lt": to },
            "m": { "sensor": 1, "site": "site1" },
        })
        .await?;
    Ok((n, started.elapsed()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client = Client::with_uri_str(&cli.server).await?;
    let db = client.database(DB);
    let docs: Vec<Document> = (0..cli.measurements)
        .map(|i| measurement(i, cli.sensors))
        .collect();
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let names = ["ts", "plain"];
    for round in 0..cli.rounds {
        reset(&db).await?;
        let mut spent = [Duration::ZERO; 2];
        for (b, chunk) in docs.chunks(cli.batch.max(1)).enumerate() {
            let order = if b % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let started = Instant::now();
                db.collection::<Document>(names[k])
                    .insert_many(chunk.to_vec())
                    .await?;
                spent[k] += started.elapsed();
            }
        }
        for k in 0..2 {
            let rate = cli.measurements as f64 / spent[k].as_secs_f64();
            rates[k].push(rate);
            println!("round {round}: {:<5} {:>9.0} inserts/s", names[k], rate);
        }
    }
    let (ts_n, ts_t) = range_count(&db, "ts").await?;
    let (pl_n, pl_t) = range_count(&db, "plain").await?;
    if ts_n != pl_n {
        bail!("range count differs: time-series {ts_n}, plain {pl_n}");
    }
    let ts_bytes = bytes(&db, "system.buckets.ts").await?;
    let pl_bytes = bytes(&db, "plain").await?;
    let buckets = db
        .collection::<Document>("system.buckets.ts")
        .estimated_document_count()
        .await?;
    let (ts_rate, pl_rate) = (median(rates[0].clone()), median(rates[1].clone()));
    println!(
        "median inserts/s: time-series {ts_rate:.0}, plain {pl_rate:.0}, ratio {:.2}",
        ts_rate / pl_rate
    );
    println!(
        "bytes: time-series data {} + indexes {} ({buckets} buckets), plain data {} + indexes {}, ratio {:.3}",
        ts_bytes.0,
        ts_bytes.1,
        pl_bytes.0,
        pl_bytes.1,
        (ts_bytes.0 + ts_bytes.1) as f64 / (pl_bytes.0 + pl_bytes.1) as f64
    );
    println!(
        "one-hour range count ({ts_n} measurements): time-series {:.1} ms, plain {:.1} ms",
        ts_t.as_secs_f64() * 1000.0,
        pl_t.as_secs_f64() * 1000.0
    );
    Ok(())
}
