//! `cairn-text-bench`: `$text` over many short documents against a running cairn. Loads `--docs`
//! sentences of 6 to 12 words drawn from a Zipf-like vocabulary of `--vocabulary` made-up words,
//! builds a text index, then times, side by side in one run, the same word looked up through
//! `$text` (TEXT_OR over the index) and through a whole-word `$regex` (a collection scan), for a
//! rare, a middling and a common word. Medians of `--runs` runs. With `--compound N`, a second
//! collection holds the same documents with a category (`_id % N`) under a compound text index
//! `{cat: 1, body: "text"}`, and `{cat, $text}` is timed on it against the same query on the plain
//! text index (which reads every entry of the word and filters the category after the fetch);
//! then an aggregate `$match $text, $sort by textScore, $limit 10` against the same `find`.
//! See docs/BENCHMARKS.md.

use anyhow::Result;
use bson::{Document, doc};
use clap::Parser;
use futures_util::TryStreamExt;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "cairn-text-bench", about = "$text search vs a collection scan")]
struct Cli {
    /// The server, host:port.
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    #[arg(long, default_value_t = 200_000)]
    docs: usize,
    #[arg(long, default_value_t = 5_000)]
    vocabulary: usize,
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Categories of the compound-index comparison (0: skip it).
    #[arg(long, default_value_t = 0)]
    compound: usize,
}

/// A small deterministic generator (xorshift64*), so every run loads the same documents.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Rank `r` with probability about 1/r (a Zipf-like draw by inverse transform).
    fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (((n as f64).ln() * u).exp() as usize).clamp(1, n) - 1
    }
}

/// The made-up word of rank `i`: letters only, so stemming leaves most of them alone.
fn word(i: usize) -> String {
    const LETTERS: &[u8] = b"bcdfghjklmnpqrstvwxz";
    const VOWELS: &[u8] = b"aeiou";
    let mut s = String::new();
    let mut n = i + 1;
    while n > 0 {
        s.push(LETTERS[n % LETTERS.len()] as char);
        s.push(VOWELS[(n / LETTERS.len()) % VOWELS.len()] as char);
        n /= LETTERS.len() * VOWELS.len();
    }
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median time of `runs` runs of `op` and the number of documents it returned.
async fn median_of<F, Fut>(runs: usize, mut op: F) -> Result<(Duration, usize)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(Duration, usize)>>,
{
    let mut times = Vec::with_capacity(runs);
    let mut n = 0;
    for _ in 0..runs {
        let (t, hits) = op().await?;
        times.push(t);
        n = hits;
    }
    Ok((median(times), n))
}

/// A find or an aggregate, timed to its last document.
async fn timed_agg(
    c: &mongodb::Collection<Document>,
    pipeline: Vec<Document>,
) -> Result<(Duration, usize)> {
    let t0 = Instant::now();
    let docs: Vec<Document> = c.aggregate(pipeline).await?.try_collect().await?;
    Ok((t0.elapsed(), docs.len()))
}

async fn timed_sorted_find(
    c: &mongodb::Collection<Document>,
    filter: Document,
) -> Result<(Duration, usize)> {
    let score = doc! { "s": { "$meta": "textScore" } };
    let t0 = Instant::now();
    let docs: Vec<Document> = c
        .find(filter)
        .projection(score.clone())
        .sort(score)
        .limit(10)
        .await?
        .try_collect()
        .await?;
    Ok((t0.elapsed(), docs.len()))
}

/// The compound text index against the plain one for `{cat, $text}`, and an aggregate's
/// `$text` against find's.
async fn compound_section(
    cli: &Cli,
    db: &mongodb::Database,
    plain: &mongodb::Collection<Document>,
) -> Result<()> {
    let cats = cli.compound as i64;
    let c = db.collection::<Document>("cdocs");
    let mut cursor = plain.find(doc! {}).await?;
    let mut batch = Vec::with_capacity(1000);
    while let Some(mut d) = cursor.try_next().await? {
        let id = d.get_i64("_id")?;
        d.insert("cat", id % cats);
        batch.push(d);
        if batch.len() == 1000 {
            c.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        c.insert_many(batch).await?;
    }
    let t0 = Instant::now();
    db.run_command(doc! { "createIndexes": "cdocs", "indexes": [{ "key": { "cat": 1, "body": "text" }, "name": "cat_body" }] })
        .await?;
    println!(
        "compound {{cat: 1, body: \"text\"}} over {cats} categories built in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let words = [("middling", word(100)), ("common", word(3))];
    let mut compound = Vec::new();
    for (_, w) in &words {
        let filter = doc! { "cat": 1_i64, "$text": { "$search": w.clone() } };
        compound.push(median_of(cli.runs, || timed(&c, filter.clone())).await?);
    }
    // The same documents under a plain text index: every entry of the word, then the filter.
    db.run_command(doc! { "dropIndexes": "cdocs", "index": "cat_body" })
        .await?;
    db.run_command(doc! { "createIndexes": "cdocs", "indexes": [{ "key": { "body": "text" }, "name": "body_text" }] })
        .await?;
    for ((label, w), (k, kh)) in words.iter().zip(compound) {
        let filter = doc! { "cat": 1_i64, "$text": { "$search": w.clone() } };
        let (p, ph) = median_of(cli.runs, || timed(&c, filter.clone())).await?;
        println!(
            "{label} word {w:?} in one category: plain text index {ph} hits, median {:.2} ms; compound {kh} hits, median {:.2} ms; plain/compound = {:.1}",
            p.as_secs_f64() * 1e3,
            k.as_secs_f64() * 1e3,
            p.as_secs_f64() / k.as_secs_f64()
        );
        let text = doc! { "$text": { "$search": w.clone() } };
        let pipeline = vec![
            doc! { "$match": text.clone() },
            doc! { "$sort": { "s": { "$meta": "textScore" } } },
            doc! { "$limit": 10 },
            doc! { "$project": { "s": { "$meta": "textScore" } } },
        ];
        let (a, ah) = median_of(cli.runs, || timed_agg(plain, pipeline.clone())).await?;
        let (f, fh) = median_of(cli.runs, || timed_sorted_find(plain, text.clone())).await?;
        println!(
            "{label} word {w:?}, top 10 by score: aggregate {ah} docs, median {:.2} ms; find {fh} docs, median {:.2} ms; aggregate/find = {:.2}",
            a.as_secs_f64() * 1e3,
            f.as_secs_f64() * 1e3,
            a.as_secs_f64() / f.as_secs_f64()
        );
    }
    Ok(())
}

async fn timed(c: &mongodb::Collection<Document>, filter: Document) -> Result<(Duration, usize)> {
    let t0 = Instant::now();
    let docs: Vec<Document> = c
        .find(filter)
        .projection(doc! { "_id": 1 })
        .await?
        .try_collect()
        .await?;
    Ok((t0.elapsed(), docs.len()))
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client = mongodb::Client::with_uri_str(format!("mongodb://{}", cli.addr)).await?;
    let db = client.database("textbench");
    db.drop().await?;
    let c = db.collection::<Document>("docs");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let t0 = Instant::now();
    let mut batch = Vec::with_capacity(1000);
    for i in 0..cli.docs {
        let n = 6 + (rng.next() % 7) as usize;
        let body: Vec<String> = (0..n).map(|_| word(rng.zipf(cli.vocabulary))).collect();
        batch.push(doc! { "_id": i as i64, "body": body.join(" ") });
        if batch.len() == 1000 {
            c.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        c.insert_many(batch).await?;
    }
    let load = t0.elapsed();
    let t0 = Instant::now();
    db.run_command(doc! { "createIndexes": "docs", "indexes": [{ "key": { "body": "text" }, "name": "body_text" }] })
        .await?;
    let build = t0.elapsed();
    println!(
        "{} docs loaded in {:.1} s; text index built in {:.1} s ({:.0} docs/s)",
        cli.docs,
        load.as_secs_f64(),
        build.as_secs_f64(),
        cli.docs as f64 / build.as_secs_f64()
    );
    for (label, rank) in [
        ("rare", cli.vocabulary / 2),
        ("middling", 100),
        ("common", 3),
    ] {
        let w = word(rank);
        let mut text = Vec::new();
        let mut scan = Vec::new();
        let mut hits = (0, 0);
        for _ in 0..cli.runs {
            let (t, n) = timed(&c, doc! { "$text": { "$search": w.clone() } }).await?;
            text.push(t);
            hits.0 = n;
            let regex = format!("\\b{w}\\b");
            let (t, n) = timed(&c, doc! { "body": { "$regex": regex } }).await?;
            scan.push(t);
            hits.1 = n;
        }
        let (t, s) = (median(text), median(scan));
        println!(
            "{label} word {w:?}: $text {} hits, median {:.2} ms; $regex scan {} hits, median {:.2} ms; scan/text = {:.1}",
            hits.0,
            t.as_secs_f64() * 1e3,
            hits.1,
            s.as_secs_f64() * 1e3,
            s.as_secs_f64() / t.as_secs_f64()
        );
    }
    if cli.compound > 0 {
        compound_section(&cli, &db, &c).await?;
    }
    Ok(())
}
