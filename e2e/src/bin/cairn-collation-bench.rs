//! `cairn-collation-bench`: a collated sort served by a collated index against the in-memory
//! collated sort and the simple sort, over a running cairn. Loads `--docs` documents
//! `{s: <word>}` (seeded words of 3 to 12 letters mixing case and accented Latin letters, the
//! same documents every run), builds `{s: 1}` with `{locale: "en", strength: 2}` and `{s: 1}`
//! simple, then times, side by side in one run, `find().sort({s: 1})` returning `s` only: under
//! the collation through its index and with `hint: {$natural: 1}` (a blocking sort), and in the
//! simple order through the simple index and with the hint. Medians of `--runs` runs. See
//! docs/BENCHMARKS.md.

use anyhow::Result;
use bson::{Document, doc};
use cairn_e2e::compare::stats::median;
use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "cairn-collation-bench",
    about = "collated index sort vs in-memory collated and simple sorts"
)]
struct Cli {
    /// The server, host:port.
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    #[arg(long, default_value_t = 100_000)]
    docs: usize,
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

const LETTERS: &[&str] = &[
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "k", "l", "m", "n", "o", "r", "s", "t", "u", "A",
    "E", "O", "S", "é", "è", "à", "ö", "ü", "ç", "É", "Ö",
];

fn word(rng: &mut StdRng) -> String {
    let n = rng.random_range(3..=12);
    (0..n)
        .map(|_| LETTERS[rng.random_range(0..LETTERS.len())])
        .collect()
}

/// Milliseconds to read the whole sorted result, its length, and its first value.
async fn timed(db: &mongodb::Database, collated: bool, natural: bool) -> Result<(f64, usize)> {
    let mut cmd = doc! {
        "find": "words", "filter": {}, "sort": { "s": 1 },
        "projection": { "s": 1, "_id": 0 }, "batchSize": 10_000,
    };
    if collated {
        cmd.insert("collation", doc! { "locale": "en", "strength": 2 });
    }
    if natural {
        cmd.insert("hint", doc! { "$natural": 1 });
    }
    let t0 = Instant::now();
    let mut reply = db.run_command(cmd).await?;
    let mut n = 0;
    loop {
        let cursor = reply.get_document("cursor")?;
        let batch = cursor
            .get_array("firstBatch")
            .or_else(|_| cursor.get_array("nextBatch"))?;
        n += batch.len();
        let id = cursor.get_i64("id")?;
        if id == 0 {
            break;
        }
        reply = db
            .run_command(doc! { "getMore": id, "collection": "words", "batchSize": 10_000 })
            .await?;
    }
    Ok((t0.elapsed().as_secs_f64() * 1e3, n))
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client = mongodb::Client::with_uri_str(format!("mongodb://{}", cli.addr)).await?;
    let db = client.database("collationbench");
    db.drop().await?;
    let c = db.collection::<Document>("words");
    let mut rng = StdRng::seed_from_u64(6);
    let mut batch = Vec::with_capacity(1000);
    for i in 0..cli.docs {
        batch.push(doc! { "_id": i as i64, "s": word(&mut rng) });
        if batch.len() == 1000 {
            c.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        c.insert_many(batch).await?;
    }
    let t0 = Instant::now();
    db.run_command(doc! { "createIndexes": "words", "indexes": [
        { "key": { "s": 1 }, "name": "s_en2", "collation": { "locale": "en", "strength": 2 } },
    ] })
    .await?;
    let collated_build = t0.elapsed();
    let t0 = Instant::now();
    db.run_command(doc! { "createIndexes": "words", "indexes": [
        { "key": { "s": 1 }, "name": "s_simple" },
    ] })
    .await?;
    let simple_build = t0.elapsed();
    println!(
        "{} docs; collated index built in {:.1} s, simple index in {:.1} s",
        cli.docs,
        collated_build.as_secs_f64(),
        simple_build.as_secs_f64()
    );
    let cases = [
        ("collated, index", true, false),
        ("collated, in memory", true, true),
        ("simple, index", false, false),
        ("simple, in memory", false, true),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..cli.runs {
        for (i, (label, collated, natural)) in cases.iter().enumerate() {
            let (t, n) = timed(&db, *collated, *natural).await?;
            anyhow::ensure!(n == cli.docs, "{label}: {n} documents");
            times[i].push(t);
        }
    }
    let base = median(&times[0]).unwrap_or(f64::NAN);
    for ((label, _, _), t) in cases.iter().zip(&times) {
        let m = median(t).unwrap_or(f64::NAN);
        println!(
            "{label}: median {m:.0} ms; / collated index = {:.2}",
            m / base
        );
    }
    Ok(())
}
