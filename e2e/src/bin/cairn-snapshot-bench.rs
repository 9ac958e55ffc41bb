//! `cairn-snapshot-bench`: what readConcern "snapshot" costs a read, against a running
//! `cairn --replSet` (initiated). Loads `--docs` documents, then times a full `find` drained
//! through its cursor three ways, `--runs` times each, interleaved, and prints the median:
//! plain (local), snapshot at the newest commit, and snapshot at an `atClusterTime` taken
//! before `--updated` of the documents were updated (so that read rebuilds those from the
//! before-images). See docs/BENCHMARKS.md.

use anyhow::{Result, bail};
use bson::{Document, Timestamp, doc};
use clap::Parser;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "cairn-snapshot-bench",
    about = "Plain find against snapshot find"
)]
struct Cli {
    /// The server, host:port (an initiated replica-set member).
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    /// Documents in the collection.
    #[arg(long, default_value_t = 20_000)]
    docs: u32,
    /// Documents updated after the atClusterTime of the third read.
    #[arg(long, default_value_t = 2_000)]
    updated: u32,
    /// Timed runs of each read.
    #[arg(long, default_value_t = 7)]
    runs: usize,
}

/// Drains one find (raw commands, so the read concern is exactly what is asked); returns
/// (documents, documents with `v: 1`, milliseconds).
async fn drain(db: &mongodb::Database, read_concern: Option<Document>) -> Result<(u64, u64, f64)> {
    let started = Instant::now();
    let mut cmd = doc! { "find": "c", "batchSize": 1000 };
    if let Some(rc) = read_concern {
        cmd.insert("readConcern", rc);
    }
    let mut reply = db.run_command(cmd).await?;
    let (mut n, mut updated) = (0u64, 0u64);
    loop {
        let cursor = reply.get_document("cursor")?;
        let batch = cursor
            .get_array("firstBatch")
            .or_else(|_| cursor.get_array("nextBatch"))?;
        n += batch.len() as u64;
        updated += batch
            .iter()
            .filter(|d| d.as_document().and_then(|d| d.get_i32("v").ok()) == Some(1))
            .count() as u64;
        let id = cursor.get_i64("id")?;
        if id == 0 {
            break;
        }
        reply = db
            .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 1000 })
            .await?;
    }
    Ok((n, updated, started.elapsed().as_secs_f64() * 1e3))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client =
        mongodb::Client::with_uri_str(format!("mongodb://{}/?directConnection=true", cli.addr))
            .await?;
    let db = client.database("snapbench");
    let coll = db.collection::<Document>("c");
    coll.drop().await?;
    let docs: Vec<Document> = (0..cli.docs)
        .map(|i| doc! { "_id": i, "v": 0, "pad": "x".repeat(100) })
        .collect();
    for chunk in docs.chunks(1000) {
        coll.insert_many(chunk.to_vec()).await?;
    }
    let ping = db.run_command(doc! { "ping": 1 }).await?;
    let Ok(at) = ping.get_timestamp("operationTime") else {
        bail!("no operationTime: is the server an initiated --replSet member?");
    };
    let at: Timestamp = at;
    coll.update_many(
        doc! { "_id": { "$lt": cli.updated } },
        doc! { "$set": { "v": 1 } },
    )
    .await?;
    let kinds: [(&str, Option<Document>); 3] = [
        ("plain find", None),
        ("snapshot find (newest)", Some(doc! { "level": "snapshot" })),
        (
            "snapshot find (atClusterTime before the updates)",
            Some(doc! { "level": "snapshot", "atClusterTime": at }),
        ),
    ];
    let mut times = vec![Vec::new(); kinds.len()];
    for _ in 0..cli.runs {
        for (i, (_, rc)) in kinds.iter().enumerate() {
            let (n, updated, ms) = drain(&db, rc.clone()).await?;
            // The read before the updates must see none of them; the others all.
            let want = if i == 2 { 0 } else { cli.updated.min(cli.docs) };
            if n != u64::from(cli.docs) || updated != u64::from(want) {
                bail!(
                    "read {n} documents ({updated} updated), expected {} ({want})",
                    cli.docs
                );
            }
            times[i].push(ms);
        }
    }
    println!(
        "{} documents, {} updated after the atClusterTime, median of {} runs:",
        cli.docs, cli.updated, cli.runs
    );
    for ((name, _), t) in kinds.iter().zip(times) {
        println!("  {name:<50} {:>8.1} ms", median(t));
    }
    Ok(())
}
