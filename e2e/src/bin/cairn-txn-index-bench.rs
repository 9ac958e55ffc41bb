//! `cairn-txn-index-bench`: what an index is worth to a read inside a transaction (issue 17),
//! against a running `cairn --replSet` (initiated here if it is not yet). Loads `--docs`
//! documents with an indexed `a`, then per run opens a transaction, reads once (the snapshot),
//! lets another client update `--changed` documents (so the transaction's reads must also
//! look at those), and times a point query (`a` equality) and a range query (`--range` values
//! of `a`) inside it, each as planned (IXSCAN) and hinted `$natural` (the collection scan every
//! transaction read was before), side by side; prints the medians of `--runs` and the ratios.
//! Every answer is checked against the other. See docs/BENCHMARKS.md.

use anyhow::{Result, bail};
use bson::{Document, doc};
use clap::Parser;
use mongodb::options::Hint;
use mongodb::{ClientSession, Collection};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "cairn-txn-index-bench",
    about = "Indexed reads inside a transaction against collection scans"
)]
struct Cli {
    /// The server, host:port (a `--replSet` member).
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    /// Documents in the collection.
    #[arg(long, default_value_t = 100_000)]
    docs: i32,
    /// Documents another client updates after each transaction's snapshot.
    #[arg(long, default_value_t = 100)]
    changed: i32,
    /// Values of `a` the range query spans.
    #[arg(long, default_value_t = 100)]
    range: i32,
    /// Timed runs (one transaction each).
    #[arg(long, default_value_t = 7)]
    runs: usize,
}

/// The ids a find returns in the session's transaction, and its milliseconds.
async fn timed(
    coll: &Collection<Document>,
    s: &mut ClientSession,
    filter: Document,
    natural: bool,
) -> Result<(Vec<i32>, f64)> {
    let started = Instant::now();
    let mut find = coll.find(filter).batch_size(1000).session(&mut *s);
    if natural {
        find = find.hint(Hint::Keys(doc! { "$natural": 1 }));
    }
    let mut cursor = find.await?;
    let mut ids = Vec::new();
    while let Some(d) = cursor.next(&mut *s).await {
        ids.push(d?.get_i32("_id")?);
    }
    let ms = started.elapsed().as_secs_f64() * 1e3;
    ids.sort_unstable();
    Ok((ids, ms))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let uri = format!("mongodb://{}/?directConnection=true", cli.addr);
    let client = mongodb::Client::with_uri_str(&uri).await?;
    let other = mongodb::Client::with_uri_str(&uri).await?;
    // Already initiated is fine; anything else shows at the first transaction.
    let _ = client
        .database("admin")
        .run_command(doc! { "replSetInitiate": {} })
        .await;
    let coll = client.database("txnindexbench").collection::<Document>("c");
    let theirs = other.database("txnindexbench").collection::<Document>("c");
    coll.drop().await?;
    let docs: Vec<Document> = (0..cli.docs)
        .map(|i| doc! { "_id": i, "a": i, "pad": "x".repeat(100) })
        .collect();
    for chunk in docs.chunks(1000) {
        coll.insert_many(chunk.to_vec()).await?;
    }
    coll.create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await?;
    let span = cli.docs.max(1);
    let mut times = vec![Vec::new(); 4];
    for run in 0..cli.runs {
        let k = (run as i32 * 7919) % span;
        let mut s = client.start_session().await?;
        s.start_transaction().await?;
        timed(&coll, &mut s, doc! { "_id": 0 }, false).await?;
        // Changed after the snapshot: the transaction still sees their old `a`.
        let lo = (k + span / 2) % span;
        theirs
            .update_many(
                doc! { "_id": { "$gte": lo, "$lt": lo + cli.changed } },
                doc! { "$inc": { "a": 1 } },
            )
            .await?;
        let queries = [
            doc! { "a": k },
            doc! { "a": { "$gte": k, "$lt": k + cli.range } },
        ];
        for (q, filter) in queries.iter().enumerate() {
            let (ixscan, ix_ms) = timed(&coll, &mut s, filter.clone(), false).await?;
            let (collscan, coll_ms) = timed(&coll, &mut s, filter.clone(), true).await?;
            if ixscan != collscan || ixscan.is_empty() {
                bail!(
                    "{filter}: IXSCAN read {} documents, COLLSCAN {}",
                    ixscan.len(),
                    collscan.len()
                );
            }
            times[2 * q].push(ix_ms);
            times[2 * q + 1].push(coll_ms);
        }
        s.commit_transaction().await?;
        // Put `a` back so that every run starts from the same data.
        theirs
            .update_many(
                doc! { "_id": { "$gte": lo, "$lt": lo + cli.changed } },
                doc! { "$inc": { "a": -1 } },
            )
            .await?;
    }
    println!(
        "{} documents, {} changed after each snapshot, median of {} runs (ms):",
        cli.docs, cli.changed, cli.runs
    );
    let names = [
        "point (a: k)",
        &format!("range ({} values of a)", cli.range),
    ];
    for (q, name) in names.iter().enumerate() {
        let (ix, cs) = (
            median(times[2 * q].clone()),
            median(times[2 * q + 1].clone()),
        );
        println!(
            "  {name:<26} IXSCAN {ix:>9.2}  COLLSCAN {cs:>9.2}  COLLSCAN/IXSCAN {:>7.1}x",
            cs / ix
        );
    }
    Ok(())
}
