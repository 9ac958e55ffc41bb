//! `cairn-bulkwrite-bench`: one mixed list of writes (inserts, updates and deletes over two
//! collections) sent four ways against a running server, the ways taking turns round by round:
//! 8.0's `bulkWrite` through `Client::bulk_write` and as one raw command; the per-collection `insert`/`update`/`delete`
//! commands an ordered collection-level bulk sends (one command per run of consecutive ops of one
//! kind on one collection); and the same commands grouped per kind and collection (an unordered
//! bulk: at most six commands). Each round starts from the same seeded collections. Prints the
//! median time per mode and its ratio to `bulkWrite`. See docs/BENCHMARKS.md.

use anyhow::{Result, bail};
use bson::{Document, doc};
use clap::Parser;
use mongodb::Client;
use mongodb::options::{DeleteOneModel, InsertOneModel, UpdateOneModel, WriteModel};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cairn-bulkwrite-bench",
    about = "bulkWrite vs per-collection write commands"
)]
struct Cli {
    /// The server's connection string.
    #[arg(
        long,
        default_value = "mongodb://127.0.0.1:27017/?directConnection=true"
    )]
    server: String,
    /// Operations in the mixed list.
    #[arg(long, default_value_t = 10_000)]
    ops: usize,
    /// Rounds (each mode runs once per round).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

const DB: &str = "bulkbench";
const COLLS: [&str; 2] = ["a", "b"];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Insert,
    Update,
    Delete,
}

/// One write of the list: kind, collection index, and the `_id` it inserts or targets.
#[derive(Clone, Copy)]
struct Op {
    kind: Kind,
    coll: usize,
    id: i64,
}

/// A small deterministic generator (the list is the same for every mode and round).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Half inserts (new ids), a quarter updates and a quarter deletes of seeded documents (each
/// seeded id deleted at most once).
fn operations(n: usize, seeded: i64) -> Vec<Op> {
    let mut rng = Lcg(42);
    let mut next_delete = 0i64;
    (0..n)
        .map(|i| {
            let coll = (rng.next() % 2) as usize;
            match rng.next() % 4 {
                0 | 1 => Op {
                    kind: Kind::Insert,
                    coll,
                    id: seeded + i as i64,
                },
                2 => Op {
                    kind: Kind::Update,
                    coll,
                    id: (rng.next() as i64) % seeded,
                },
                _ => {
                    next_delete += 1;
                    Op {
                        kind: Kind::Delete,
                        coll,
                        id: seeded - next_delete,
                    }
                }
            }
        })
        .collect()
}

async fn seed(client: &Client, seeded: i64) -> Result<()> {
    let db = client.database(DB);
    db.drop().await?;
    for c in COLLS {
        db.collection::<Document>(c)
            .insert_many((0..seeded).map(|i| doc! { "_id": i, "v": 0 }))
            .await?;
    }
    Ok(())
}

async fn via_bulk_write(client: &Client, ops: &[Op]) -> Result<()> {
    let db = client.database(DB);
    let colls: Vec<_> = COLLS
        .iter()
        .map(|c| db.collection::<Document>(c).namespace())
        .collect();
    let models: Vec<WriteModel> = ops
        .iter()
        .map(|op| {
            let ns = colls[op.coll].clone();
            match op.kind {
                Kind::Insert => InsertOneModel::builder()
                    .namespace(ns)
                    .document(doc! { "_id": op.id, "v": 0 })
                    .build()
                    .into(),
                Kind::Update => UpdateOneModel::builder()
                    .namespace(ns)
                    .filter(doc! { "_id": op.id })
                    .update(doc! { "$inc": { "v": 1 } })
                    .build()
                    .into(),
                Kind::Delete => DeleteOneModel::builder()
                    .namespace(ns)
                    .filter(doc! { "_id": op.id })
                    .build()
                    .into(),
            }
        })
        .collect();
    client.bulk_write(models).ordered(true).await?;
    Ok(())
}

/// The same list as one raw `bulkWrite` command built like the other modes' commands (no
/// driver-side model serialization in the measurement).
async fn via_raw_bulk_write(client: &Client, ops: &[Op]) -> Result<()> {
    let list: Vec<Document> = ops
        .iter()
        .map(|o| match o.kind {
            Kind::Insert => doc! { "insert": o.coll as i32, "document": { "_id": o.id, "v": 0 } },
            Kind::Update => doc! {
                "update": o.coll as i32, "filter": { "_id": o.id },
                "updateMods": { "$inc": { "v": 1 } }, "multi": false,
            },
            Kind::Delete => {
                doc! { "delete": o.coll as i32, "filter": { "_id": o.id }, "multi": false }
            }
        })
        .collect();
    let ns: Vec<Document> = COLLS
        .iter()
        .map(|c| doc! { "ns": format!("{DB}.{c}") })
        .collect();
    let r = client
        .database("admin")
        .run_command(
            doc! { "bulkWrite": 1, "ops": list, "nsInfo": ns, "errorsOnly": true, "ordered": true },
        )
        .await?;
    if r.get_i32("nErrors").unwrap_or(1) != 0 {
        bail!("bulkWrite errors: {r}");
    }
    Ok(())
}

/// One `insert`, `update` or `delete` command carrying `group` (all of one kind and collection).
async fn command(client: &Client, group: &[Op], ordered: bool) -> Result<()> {
    let Some(first) = group.first() else {
        return Ok(());
    };
    let coll = COLLS[first.coll];
    let body = match first.kind {
        Kind::Insert => {
            let docs: Vec<Document> = group.iter().map(|o| doc! { "_id": o.id, "v": 0 }).collect();
            doc! { "insert": coll, "documents": docs, "ordered": ordered }
        }
        Kind::Update => {
            let u: Vec<Document> = group
                .iter()
                .map(|o| doc! { "q": { "_id": o.id }, "u": { "$inc": { "v": 1 } } })
                .collect();
            doc! { "update": coll, "updates": u, "ordered": ordered }
        }
        Kind::Delete => {
            let d: Vec<Document> = group
                .iter()
                .map(|o| doc! { "q": { "_id": o.id }, "limit": 1 })
                .collect();
            doc! { "delete": coll, "deletes": d, "ordered": ordered }
        }
    };
    let r = client.database(DB).run_command(body).await?;
    if r.contains_key("writeErrors") {
        bail!("write errors: {r}");
    }
    Ok(())
}

/// Ordered: one command per run of consecutive ops of one kind on one collection.
async fn via_ordered_commands(client: &Client, ops: &[Op]) -> Result<usize> {
    let mut commands = 0;
    let mut start = 0;
    while start < ops.len() {
        let (k, c) = (ops[start].kind, ops[start].coll);
        let len = ops[start..]
            .iter()
            .take_while(|o| o.kind == k && o.coll == c)
            .count();
        command(client, &ops[start..start + len], true).await?;
        commands += 1;
        start += len;
    }
    Ok(commands)
}

/// Unordered: all the ops of one kind and collection in one command.
async fn via_grouped_commands(client: &Client, ops: &[Op]) -> Result<usize> {
    let mut commands = 0;
    for kind in [Kind::Insert, Kind::Update, Kind::Delete] {
        for c in 0..COLLS.len() {
            let group: Vec<Op> = ops
                .iter()
                .filter(|o| o.kind == kind && o.coll == c)
                .copied()
                .collect();
            if !group.is_empty() {
                command(client, &group, false).await?;
                commands += 1;
            }
        }
    }
    Ok(commands)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client = Client::with_uri_str(&cli.server).await?;
    let seeded = (cli.ops as i64).max(1);
    let ops = operations(cli.ops, seeded);
    let mut times: [Vec<Duration>; 4] = Default::default();
    let mut commands = [1usize, 1, 0, 0];
    for _ in 0..cli.rounds {
        for (mode, out) in times.iter_mut().enumerate() {
            seed(&client, seeded).await?;
            let t = Instant::now();
            match mode {
                0 => via_bulk_write(&client, &ops).await?,
                1 => via_raw_bulk_write(&client, &ops).await?,
                2 => commands[2] = via_ordered_commands(&client, &ops).await?,
                _ => commands[3] = via_grouped_commands(&client, &ops).await?,
            }
            out.push(t.elapsed());
        }
    }
    let names = [
        "bulkWrite (Client::bulk_write, ordered)",
        "bulkWrite (raw command, ordered, errorsOnly)",
        "insert/update/delete, ordered runs",
        "insert/update/delete, grouped per kind+collection",
    ];
    let base = median(times[0].clone()).as_secs_f64();
    println!(
        "{} mixed ops (insert 1/2, update 1/4, delete 1/4; 2 collections), {} rounds, median:",
        cli.ops, cli.rounds
    );
    println!("| mode | commands | ms | ops/s | time / bulkWrite |");
    println!("| --- | --- | --- | --- | --- |");
    for (i, name) in names.iter().enumerate() {
        let m = median(times[i].clone()).as_secs_f64();
        println!(
            "| {name} | {} | {:.0} | {:.0} | {:.2} |",
            commands[i],
            m * 1e3,
            cli.ops as f64 / m,
            m / base
        );
    }
    Ok(())
}
