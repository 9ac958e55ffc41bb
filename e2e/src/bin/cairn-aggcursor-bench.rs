//! `cairn-aggcursor-bench`: two `cairn` builds side by side on the same data: the time to the
//! first batch of an aggregate (`--pipeline sort`: `$sort` over the whole collection then
//! `$project`; `--pipeline lookup`: a `$lookup` of every document in a foreign collection of a
//! tenth the size, through its hash table or, with `--foreign-index`, the foreign index, then
//! `$project`; default batch size), the server's RSS while that cursor is open, and the time to
//! read the whole result. Both servers are started and loaded first; the runs then alternate
//! between them, so both see the same machine load. See docs/BENCHMARKS.md (issues 11/12).

use anyhow::{Context, Result};
use bson::{Document, doc};
use cairn_e2e::Server;
use clap::Parser;
use mongodb::Database;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cairn-aggcursor-bench",
    about = "aggregate cursors: first batch time and RSS, two builds"
)]
struct Cli {
    /// The build measured first (e.g. main's `cairn`).
    #[arg(long)]
    before: String,
    /// The build compared with it.
    #[arg(long)]
    after: String,
    /// Documents in the collection.
    #[arg(long, default_value_t = 200_000)]
    docs: usize,
    /// Runs per build (medians reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// What the aggregate does: `sort` or `lookup`.
    #[arg(long, default_value = "sort")]
    pipeline: String,
    /// With `--pipeline lookup`: index the foreign field, so the join probes the index.
    #[arg(long)]
    foreign_index: bool,
}

impl Cli {
    fn stages(&self) -> Result<Vec<Document>> {
        match self.pipeline.as_str() {
            "sort" => Ok(vec![
                doc! { "$sort": { "k": 1 } },
                doc! { "$project": { "k": 1 } },
            ]),
            "lookup" => Ok(vec![
                doc! { "$lookup": { "from": "f", "localField": "fk", "foreignField": "k", "as": "j" } },
                doc! { "$project": { "k": 1, "pad": 1, "j": 1 } },
            ]),
            other => anyhow::bail!("--pipeline {other}: sort or lookup"),
        }
    }
}

/// What one run measured on one build.
struct Sample {
    first_batch: Duration,
    rss_open_bytes: u64,
    whole: Duration,
}

fn rss_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .context("VmRSS")?;
    Ok(kb * 1024)
}

async fn load(db: &Database, cli: &Cli) -> Result<()> {
    let n = cli.docs;
    let lookup = cli.pipeline == "lookup";
    let foreign = (n / 10).max(1);
    let c = db.collection::<Document>("c");
    let docs: Vec<Document> = (0..n)
        .map(|i| {
            let mut d =
                doc! { "_id": i as i64, "k": ((i * 7919) % n) as i64, "pad": "p".repeat(100) };
            if lookup {
                d.insert("fk", (i % foreign) as i64);
            }
            d
        })
        .collect();
    for chunk in docs.chunks(10_000) {
        c.insert_many(chunk.to_vec()).await?;
    }
    if lookup {
        let f = db.collection::<Document>("f");
        let docs: Vec<Document> = (0..foreign)
            .map(|j| doc! { "_id": j as i64, "k": j as i64, "name": format!("n{j}"), "pad": "q".repeat(100) })
            .collect();
        for chunk in docs.chunks(10_000) {
            f.insert_many(chunk.to_vec()).await?;
        }
        if cli.foreign_index {
            db.run_command(
                doc! { "createIndexes": "f", "indexes": [{ "key": { "k": 1 }, "name": "k_1" }] },
            )
            .await?;
        }
    }
    Ok(())
}

/// One aggregate: its first batch timed, RSS read with the cursor open, then the rest read.
async fn one_run(db: &Database, pid: u32, pipeline: Vec<Document>) -> Result<Sample> {
    let start = Instant::now();
    let reply = db
        .run_command(doc! { "aggregate": "c", "pipeline": pipeline, "cursor": {} })
        .await?;
    let first_batch = start.elapsed();
    let rss_open_bytes = rss_bytes(pid)?;
    let mut id = reply.get_document("cursor")?.get_i64("id")?;
    while id != 0 {
        let more = db
            .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 1000 })
            .await?;
        id = more.get_document("cursor")?.get_i64("id")?;
    }
    Ok(Sample {
        first_batch,
        rss_open_bytes,
        whole: start.elapsed(),
    })
}

fn median<T: Copy + Ord>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    cli.stages()?;
    let builds = [cli.before.as_str(), cli.after.as_str()];
    let servers: Vec<Server> = builds.iter().map(|b| Server::start(b, &[])).collect();
    let mut dbs = Vec::new();
    for s in &servers {
        let db = s.client().await.database("aggcursor");
        load(&db, &cli).await?;
        dbs.push(db);
    }
    let idle: Vec<u64> = servers
        .iter()
        .map(|s| rss_bytes(s.pid()))
        .collect::<Result<_>>()?;
    let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
    for run in 0..cli.runs {
        // Alternate which build goes first, so neither always runs on a warmer machine.
        for k in 0..2 {
            let b = (k + run) % 2;
            samples[b].push(one_run(&dbs[b], servers[b].pid(), cli.stages()?).await?);
        }
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let rows: Vec<(f64, f64, f64, f64)> = (0..2)
        .map(|b| {
            let s = &samples[b];
            (
                ms(median(s.iter().map(|x| x.first_batch).collect())),
                mib(s.first().map_or(0, |x| x.rss_open_bytes)),
                mib(s.iter().map(|x| x.rss_open_bytes).max().unwrap_or(0)),
                ms(median(s.iter().map(|x| x.whole).collect())),
            )
        })
        .collect();
    let shown: Vec<String> = cli.stages()?.iter().map(|s| s.to_string()).collect();
    println!(
        "{} documents{}, pipeline [{}], {} runs per build\n",
        cli.docs,
        if cli.foreign_index {
            ", foreign index"
        } else {
            ""
        },
        shown.join(", "),
        cli.runs
    );
    println!(
        "| build | first batch, ms (median) | RSS idle after load, MiB | RSS with the cursor open, first run, MiB | same, max over runs, MiB | whole result, ms (median) |"
    );
    println!("|---|---|---|---|---|---|");
    for (b, name) in ["before", "after"].iter().enumerate() {
        let (f, r1, rmax, w) = rows[b];
        println!(
            "| {name} | {f:.1} | {:.1} | {r1:.1} | {rmax:.1} | {w:.1} |",
            mib(idle[b])
        );
    }
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    println!(
        "| after / before | {:.2} | | {:.2} | {:.2} | {:.2} |",
        ratio(rows[1].0, rows[0].0),
        ratio(rows[1].1, rows[0].1),
        ratio(rows[1].2, rows[0].2),
        ratio(rows[1].3, rows[0].3)
    );
    Ok(())
}
