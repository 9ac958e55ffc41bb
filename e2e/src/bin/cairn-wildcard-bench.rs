//! `cairn-wildcard-bench`: a wildcard index against a collection scan, over a running cairn.
//! Loads `--docs` attribute bags (`{attrs: {<5 of 50 names>: 0..1000}, tags: [...]}`, the same
//! documents every run), builds `{"attrs.$**": 1}`, then times, side by side in one run, the
//! same filter through the index and with `hint: {$natural: 1}`: a selective equality, an `$in`
//! and a range over a tenth of one attribute's values. Medians of `--runs` runs. See
//! docs/BENCHMARKS.md.

use anyhow::Result;
use bson::{Document, doc};
use cairn_e2e::compare::stats::median;
use clap::Parser;
use futures_util::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "cairn-wildcard-bench",
    about = "wildcard index vs a collection scan"
)]
struct Cli {
    /// The server, host:port.
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    #[arg(long, default_value_t = 100_000)]
    docs: usize,
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

const ATTRIBUTES: usize = 50;

/// Milliseconds to read every `_id` the filter finds, and how many.
async fn timed(
    c: &mongodb::Collection<Document>,
    filter: Document,
    natural: bool,
) -> Result<(f64, usize)> {
    let t0 = Instant::now();
    let mut find = c.find(filter).projection(doc! { "_id": 1 });
    if natural {
        find = find.hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }));
    }
    let docs: Vec<Document> = find.await?.try_collect().await?;
    Ok((t0.elapsed().as_secs_f64() * 1e3, docs.len()))
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client = mongodb::Client::with_uri_str(format!("mongodb://{}", cli.addr)).await?;
    let db = client.database("wildcardbench");
    db.drop().await?;
    let c = db.collection::<Document>("bags");
    let mut rng = StdRng::seed_from_u64(18);
    let t0 = Instant::now();
    let mut batch = Vec::with_capacity(1000);
    for i in 0..cli.docs {
        let mut attrs = Document::new();
        while attrs.len() < 5 {
            let name = format!("k{}", rng.random_range(0..ATTRIBUTES));
            attrs.insert(name, rng.random_range(0..1000));
        }
        let tags: Vec<i32> = (0..3).map(|_| rng.random_range(0..100)).collect();
        batch.push(doc! { "_id": i as i64, "attrs": attrs, "tags": tags });
        if batch.len() == 1000 {
            c.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        c.insert_many(batch).await?;
    }
    let load = t0.elapsed();
    let t0 = Instant::now();
    db.run_command(doc! { "createIndexes": "bags", "indexes": [{ "key": { "attrs.$**": 1 }, "name": "attrs_wild" }] })
        .await?;
    let build = t0.elapsed();
    println!(
        "{} docs loaded in {:.1} s; wildcard index built in {:.1} s ({:.0} docs/s)",
        cli.docs,
        load.as_secs_f64(),
        build.as_secs_f64(),
        cli.docs as f64 / build.as_secs_f64()
    );
    for (label, filter) in [
        ("equality", doc! { "attrs.k7": 123 }),
        ("$in of 3", doc! { "attrs.k7": { "$in": [1, 500, 999] } }),
        (
            "range 10%",
            doc! { "attrs.k7": { "$gte": 100, "$lt": 200 } },
        ),
    ] {
        let (mut index, mut scan, mut hits) = (Vec::new(), Vec::new(), (0, 0));
        for _ in 0..cli.runs {
            let (t, n) = timed(&c, filter.clone(), false).await?;
            index.push(t);
            hits.0 = n;
            let (t, n) = timed(&c, filter.clone(), true).await?;
            scan.push(t);
            hits.1 = n;
        }
        anyhow::ensure!(
            hits.0 == hits.1,
            "{label}: index {} hits, scan {}",
            hits.0,
            hits.1
        );
        let (i, s) = (
            median(&index).unwrap_or(f64::NAN),
            median(&scan).unwrap_or(f64::NAN),
        );
        println!(
            "{label} {filter}: {} hits; index median {i:.2} ms; scan median {s:.2} ms; scan/index = {:.1}",
            hits.0,
            s / i
        );
    }
    Ok(())
}
