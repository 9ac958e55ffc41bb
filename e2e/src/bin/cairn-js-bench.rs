//! `cairn-js-bench`: server-side JavaScript against its native equivalent, side by side in one
//! run on one seeded collection (the modes take turns round by round): `mapReduce` (sum per key)
//! against `$group` with `$sum` and with `$accumulator`; and a filter over every document as
//! `$expr`, `$where` and `$function`, through `$match` + `$count` so that no documents travel.
//! Each mode's answer is checked against the native one before it is timed. Prints the median
//! per mode, its cost per document and its ratio to the native mode. See docs/BENCHMARKS.md.

use anyhow::{Result, bail};
use bson::{Bson, Document, doc};
use clap::Parser;
use futures_util::TryStreamExt;
use mongodb::{Client, Database};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cairn-js-bench",
    about = "server-side JavaScript vs native operators"
)]
struct Cli {
    /// The server's connection string.
    #[arg(
        long,
        default_value = "mongodb://127.0.0.1:27017/?directConnection=true"
    )]
    server: String,
    /// Documents seeded.
    #[arg(long, default_value_t = 100_000)]
    docs: i64,
    /// Rounds (each mode runs once per round).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

const DB: &str = "jsbench";

/// What one mode returns, reduced to something comparable: sorted `(key, sum)` or a count.
type Answer = Vec<(i64, i64)>;

fn int(v: Option<&Bson>) -> i64 {
    match v {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) => *d as i64,
        _ => i64::MIN,
    }
}

async fn aggregate(db: &Database, pipeline: Vec<Document>) -> Result<Vec<Document>> {
    Ok(db
        .collection::<Document>("c")
        .aggregate(pipeline)
        .await?
        .try_collect()
        .await?)
}

fn pairs(docs: &[Document], value: &str) -> Answer {
    let mut out: Answer = docs
        .iter()
        .map(|d| (int(d.get("_id")), int(d.get(value))))
        .collect();
    out.sort();
    out
}

async fn run_mode(db: &Database, mode: &str) -> Result<Answer> {
    let count = |filter: Document| vec![doc! {"$match": filter}, doc! {"$count": "n"}];
    let counted = |docs: Vec<Document>| vec![(0, docs.first().map_or(0, |d| int(d.get("n"))))];
    Ok(match mode {
        "mapReduce" => {
            let reply = db
                .run_command(doc! {"mapReduce": "c",
                "map": "function() { emit(this.k, this.v); }",
                "reduce": "function(k, vs) { return Array.sum(vs); }",
                "out": {"inline": 1}})
                .await?;
            let docs: Vec<Document> = reply
                .get_array("results")?
                .iter()
                .filter_map(|d| d.as_document().cloned())
                .collect();
            pairs(&docs, "value")
        }
        "$group $sum" => pairs(
            &aggregate(
                db,
                vec![doc! {"$group": {"_id": "$k", "s": {"$sum": "$v"}}}],
            )
            .await?,
            "s",
        ),
        "$group $accumulator" => pairs(
            &aggregate(
                db,
                vec![doc! {"$group": {"_id": "$k", "s": {"$accumulator": {
                "init": "function() { return 0; }",
                "accumulate": "function(s, v) { return s + v; }",
                "accumulateArgs": ["$v"],
                "merge": "function(a, b) { return a + b; }",
                "lang": "js"}}}}],
            )
            .await?,
            "s",
        ),
        "$expr" => counted(aggregate(db, count(doc! {"$expr": {"$gt": ["$v", "$w"]}})).await?),
        "$where" => counted(aggregate(db, count(doc! {"$where": "this.v > this.w"})).await?),
        "$function" => counted(
            aggregate(
                db,
                count(doc! {"$expr": {"$function": {
                "body": "function(v, w) { return v > w; }",
                "args": ["$v", "$w"], "lang": "js"}}}),
            )
            .await?,
        ),
        other => bail!("unknown mode {other}"),
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client = Client::with_uri_str(&cli.server).await?;
    let db = client.database(DB);
    db.drop().await?;
    let c = db.collection::<Document>("c");
    let mut batch = Vec::new();
    for i in 0..cli.docs {
        batch.push(doc! {"_id": i, "k": i % 100, "v": (i * 7919) % 1000, "w": (i * 31) % 1000});
        if batch.len() == 10_000 {
            c.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        c.insert_many(batch).await?;
    }
    // (mode, the native mode it is compared with)
    let modes = [
        ("$group $sum", "$group $sum"),
        ("mapReduce", "$group $sum"),
        ("$group $accumulator", "$group $sum"),
        ("$expr", "$expr"),
        ("$where", "$expr"),
        ("$function", "$expr"),
    ];
    for (mode, native) in modes {
        let (a, b) = (run_mode(&db, mode).await?, run_mode(&db, native).await?);
        if a != b || a.is_empty() {
            bail!("{mode} disagrees with {native}");
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); modes.len()];
    for _ in 0..cli.rounds {
        for (i, (mode, _)) in modes.iter().enumerate() {
            let t = Instant::now();
            run_mode(&db, mode).await?;
            times[i].push(t.elapsed());
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    println!(
        "| mode | ms (median of {}) | µs / document | time / native |",
        cli.rounds
    );
    println!("| --- | ---: | ---: | ---: |");
    for (i, (mode, native)) in modes.iter().enumerate() {
        let base = modes.iter().position(|(m, _)| m == native).unwrap_or(i);
        let ms = medians[i].as_secs_f64() * 1e3;
        println!(
            "| {mode} | {ms:.0} | {:.2} | {:.2} |",
            ms * 1e3 / cli.docs as f64,
            medians[i].as_secs_f64() / medians[base].as_secs_f64()
        );
    }
    db.drop().await?;
    Ok(())
}
