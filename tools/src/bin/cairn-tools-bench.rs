//! cairn-tools-bench: import, export, dump and restore of the same N generated documents against
//! a running server, each beside inserting those documents with the Rust driver's insert_many
//! in the same run (the issue's yardstick: the tools within 1.5x of it). Prints a Markdown
//! table. The tools run in-process through the same entry point as the binary.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use bson::{Document, RawDocumentBuf, doc};
use clap::Parser;
use futures_util::TryStreamExt;

#[derive(Parser)]
struct Args {
    #[arg(
        long,
        default_value = "mongodb://127.0.0.1:27017/?directConnection=true"
    )]
    uri: String,
    /// Scratch directory for the JSONL file, the export and the dump.
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, default_value_t = 1_000_000)]
    docs: u64,
    #[arg(long, default_value_t = 1)]
    rounds: u32,
}

/// One generated document (about 250 bytes of JSON), as Extended JSON text.
fn line(i: u64) -> String {
    format!(
        concat!(
            r#"{{"_id":{i},"name":"user-{i}","email":"user{i}@example.com","age":{age},"score":{score:?},"#,
            r#""active":{active},"tags":["t{t1}","t{t2}"],"created":{{"$date":{{"$numberLong":"{ms}"}}}},"#,
            r#""address":{{"city":"city-{city}","zip":"{zip:05}"}}}}"#
        ),
        i = i,
        age = i % 90,
        score = (i * 7919 % 10_000) as f64 / 100.0 + 0.5,
        active = i.is_multiple_of(2),
        t1 = i % 10,
        t2 = i % 7,
        ms = 1_600_000_000_000i64 + i as i64 * 1000,
        city = i % 100,
        zip = i % 100_000,
    )
}

struct Row {
    what: String,
    secs: f64,
    docs: u64,
    bytes: u64,
}

async fn tool(args: &[&str]) -> anyhow::Result<cairn_tools::Report> {
    let r = cairn_tools::run_args(args).await?;
    anyhow::ensure!(
        r.failed == 0,
        "{args:?}: {} failed: {:?}",
        r.failed,
        r.problems.first()
    );
    Ok(r)
}

/// Runs one tool invocation and records how long it took as the row `what`; `bytes` is
/// evaluated after the run (an export's size is known only then).
async fn timed_tool(
    rows: &mut Vec<Row>,
    what: &str,
    docs: u64,
    args: &[&str],
    bytes: impl FnOnce() -> std::io::Result<u64>,
) -> anyhow::Result<()> {
    let t = Instant::now();
    tool(args).await?;
    let secs = t.elapsed().as_secs_f64();
    rows.push(Row {
        what: what.into(),
        secs,
        docs,
        bytes: bytes()?,
    });
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    std::fs::create_dir_all(&a.dir)?;
    let file = a.dir.join("bench.jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&file)?);
    for i in 0..a.docs {
        writeln!(w, "{}", line(i))?;
    }
    w.flush()?;
    drop(w);
    let file_bytes = std::fs::metadata(&file)?.len();
    let docs: Vec<RawDocumentBuf> = (0..a.docs)
        .map(|i| {
            let d = cairn_tools::extjson::parse_document(&line(i)).map_err(anyhow::Error::msg)?;
            Ok(RawDocumentBuf::try_from(&d)?)
        })
        .collect::<anyhow::Result<_>>()?;
    let bson_bytes: u64 = docs.iter().map(|d| d.as_bytes().len() as u64).sum();
    let client = mongodb::Client::with_uri_str(&a.uri).await?;
    let db = client.database("bench");
    let (f, uri) = (file.to_str().unwrap_or_default().to_owned(), a.uri.clone());
    let export = a
        .dir
        .join("export.jsonl")
        .to_str()
        .unwrap_or_default()
        .to_owned();
    let dump = a.dir.join("dump").to_str().unwrap_or_default().to_owned();
    let mut rows: Vec<Row> = Vec::new();
    // Where import writes and export and dump read.
    let on_imp = [
        "--uri",
        uri.as_str(),
        "--db",
        "bench",
        "--collection",
        "imp",
    ];
    for _ in 0..a.rounds {
        db.collection::<Document>("base").drop().await?;
        let t = Instant::now();
        db.collection::<RawDocumentBuf>("base")
            .insert_many(docs.clone())
            .await?;
        rows.push(Row {
            what: "insert_many (Rust driver, documents in memory)".into(),
            secs: t.elapsed().as_secs_f64(),
            docs: a.docs,
            bytes: bson_bytes,
        });

        timed_tool(
            &mut rows,
            "cairn-tools import (JSONL file, -j 2)",
            a.docs,
            &[
                &["import"][..],
                &on_imp,
                &["--file", &f, "--drop", "--quiet"],
            ]
            .concat(),
            || Ok(file_bytes),
        )
        .await?;

        let t = Instant::now();
        let n = db
            .collection::<RawDocumentBuf>("imp")
            .find(doc! {})
            .await?
            .try_collect::<Vec<_>>()
            .await?
            .len() as u64;
        rows.push(Row {
            what: "find all (Rust driver, raw documents)".into(),
            secs: t.elapsed().as_secs_f64(),
            docs: n,
            bytes: bson_bytes,
        });

        timed_tool(
            &mut rows,
            "cairn-tools export (relaxed JSONL)",
            a.docs,
            &[&["export"][..], &on_imp, &["--out", &export, "--quiet"]].concat(),
            || Ok(std::fs::metadata(&export)?.len()),
        )
        .await?;

        let _ = std::fs::remove_dir_all(&dump);
        timed_tool(
            &mut rows,
            "cairn-tools dump (directory)",
            a.docs,
            &[&["dump"][..], &on_imp, &["--out", &dump, "--quiet"]].concat(),
            || Ok(bson_bytes),
        )
        .await?;

        timed_tool(
            &mut rows,
            "cairn-tools restore (--drop, -j 2)",
            a.docs,
            &["restore", "--uri", &uri, &dump, "--drop", "--quiet"],
            || Ok(bson_bytes),
        )
        .await?;
    }
    let base = rows
        .iter()
        .filter(|r| r.what.starts_with("insert_many"))
        .map(|r| r.secs)
        .fold(f64::INFINITY, f64::min);
    println!(
        "{} documents, JSONL {:.1} MB, BSON {:.1} MB; best of {} round(s)\n",
        a.docs,
        file_bytes as f64 / 1e6,
        bson_bytes as f64 / 1e6,
        a.rounds
    );
    println!("| step | seconds | docs/s | MB/s | time / insert_many |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let mut seen = Vec::new();
    for r in &rows {
        if seen.contains(&r.what) {
            continue;
        }
        seen.push(r.what.clone());
        let best = rows
            .iter()
            .filter(|x| x.what == r.what)
            .min_by(|x, y| x.secs.total_cmp(&y.secs))
            .unwrap_or(r);
        println!(
            "| {} | {:.2} | {:.0} | {:.1} | {:.2}x |",
            best.what,
            best.secs,
            best.docs as f64 / best.secs,
            best.bytes as f64 / 1e6 / best.secs,
            best.secs / base
        );
    }
    db.drop().await?;
    std::fs::remove_dir_all(&a.dir)?;
    Ok(())
}
