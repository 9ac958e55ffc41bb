//! `cairn-txn-bench`: multi-document transactions against a running `cairn --replSet`
//! (initiated). Transfers: each client runs transactions that move 1 between two random accounts
//! (two updates, then commitTransaction), retrying on TransientTransactionError, for `--secs`
//! seconds; reported as committed transfers per second and the abort rate (aborted attempts /
//! all attempts), at 1, 8 and 32 clients over many accounts, and at 32 clients over a few hot
//! ones. Readers: 8 transfer clients beside `--readers` clients that read two random accounts
//! by `_id`, in a read-only transaction (find, find, commitTransaction) or as plain finds,
//! reported as reads per second beside the transfers. Overhead: one client, one update per
//! round, inside a one-statement transaction and as a plain write, side by side. The total balance is checked after every run. See
//! docs/BENCHMARKS.md.

use anyhow::{Result, bail};
use bson::{Document, doc};
use clap::Parser;
use futures_util::TryStreamExt;
use mongodb::Collection;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cairn-txn-bench",
    about = "Transaction throughput and abort rate"
)]
struct Cli {
    /// The server, host:port (an initiated replica-set member).
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    /// Seconds of each run.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Accounts of the many-accounts runs.
    #[arg(long, default_value_t = 10_000)]
    accounts: u32,
    /// Accounts of the hot run.
    #[arg(long, default_value_t = 4)]
    hot: u32,
    /// Reader clients of the reader runs.
    #[arg(long, default_value_t = 8)]
    readers: usize,
}

/// The readers of a run: how many, and whether each read pair is one transaction.
#[derive(Clone, Copy)]
struct Readers {
    clients: usize,
    in_txn: bool,
}

const NO_READERS: Readers = Readers {
    clients: 0,
    in_txn: false,
};

/// Reads two random accounts per round until `end`, counting rounds in `done`.
fn spawn_reader(
    client: mongodb::Client,
    coll: Collection<Document>,
    seed: u64,
    accounts: u32,
    in_txn: bool,
    end: Instant,
    done: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<Result<()>> {
    tokio::spawn(async move {
        let mut rng = 0x2545_F491_4F6C_DD1Du64 ^ seed;
        let mut s = client.start_session().await?;
        while Instant::now() < end {
            let a = (next(&mut rng) % u64::from(accounts)) as i64;
            let b = (next(&mut rng) % u64::from(accounts)) as i64;
            if in_txn {
                s.start_transaction().await?;
                coll.find_one(doc! { "_id": a }).session(&mut s).await?;
                coll.find_one(doc! { "_id": b }).session(&mut s).await?;
                s.commit_transaction().await?;
            } else {
                coll.find_one(doc! { "_id": a }).await?;
                coll.find_one(doc! { "_id": b }).await?;
            }
            done.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    })
}

const BALANCE: i64 = 1_000;

/// A small xorshift generator: each client its own, no shared state.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

async fn reset(coll: &Collection<Document>, accounts: u32) -> Result<()> {
    coll.drop().await?;
    let docs: Vec<Document> = (0..accounts)
        .map(|i| doc! { "_id": i, "b": BALANCE })
        .collect();
    for chunk in docs.chunks(1000) {
        coll.insert_many(chunk.to_vec()).await?;
    }
    Ok(())
}

async fn total(coll: &Collection<Document>) -> Result<i64> {
    let docs: Vec<Document> = coll.find(doc! {}).await?.try_collect().await?;
    Ok(docs.iter().filter_map(|d| d.get_i64("b").ok()).sum())
}

/// (committed per second, aborted attempts / all attempts, reader rounds per second).
async fn transfers(
    client: &mongodb::Client,
    clients: usize,
    accounts: u32,
    secs: u64,
    readers: Readers,
) -> Result<(f64, f64, f64)> {
    let coll = client.database("bench").collection::<Document>("accounts");
    reset(&coll, accounts).await?;
    let (committed, aborted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let end = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    let reads = Arc::new(AtomicU64::new(0));
    for r in 0..readers.clients {
        let (client, coll, reads) = (client.clone(), coll.clone(), reads.clone());
        tasks.push(spawn_reader(
            client,
            coll,
            r as u64 + 1,
            accounts,
            readers.in_txn,
            end,
            reads,
        ));
    }
    for c in 0..clients {
        let (client, coll) = (client.clone(), coll.clone());
        let (committed, aborted) = (committed.clone(), aborted.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (c as u64 + 1);
            let mut s = client.start_session().await?;
            while Instant::now() < end {
                let from = (next(&mut rng) % u64::from(accounts)) as i64;
                let to = (next(&mut rng) % u64::from(accounts)) as i64;
                if from == to {
                    continue;
                }
                let attempt = async {
                    s.start_transaction().await?;
                    coll.update_one(doc! { "_id": from }, doc! { "$inc": { "b": -1_i64 } })
                        .session(&mut s)
                        .await?;
                    coll.update_one(doc! { "_id": to }, doc! { "$inc": { "b": 1_i64 } })
                        .session(&mut s)
                        .await?;
                    s.commit_transaction().await
                };
                match attempt.await {
                    Ok(()) => committed.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.contains_label("TransientTransactionError") => {
                        let _ = s.abort_transaction().await;
                        aborted.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(e) => return Err(anyhow::Error::from(e)),
                };
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let sum = total(&coll).await?;
    if sum != i64::from(accounts) * BALANCE {
        bail!(
            "total balance {sum}, expected {}",
            i64::from(accounts) * BALANCE
        );
    }
    let (ok, bad) = (
        committed.load(Ordering::Relaxed),
        aborted.load(Ordering::Relaxed),
    );
    Ok((
        ok as f64 / secs as f64,
        bad as f64 / (ok + bad).max(1) as f64,
        reads.load(Ordering::Relaxed) as f64 / secs as f64,
    ))
}

/// Updates per second by one client: in a one-statement transaction, and plain.
async fn overhead(client: &mongodb::Client, secs: u64) -> Result<(f64, f64)> {
    let coll = client.database("bench").collection::<Document>("one");
    reset(&coll, 1).await?;
    let mut s = client.start_session().await?;
    let mut rates = [0.0; 2];
    for (i, in_txn) in [true, false].into_iter().enumerate() {
        let end = Instant::now() + Duration::from_secs(secs);
        let mut n = 0u64;
        while Instant::now() < end {
            let update = coll.update_one(doc! { "_id": 0 }, doc! { "$inc": { "b": 1_i64 } });
            if in_txn {
                s.start_transaction().await?;
                update.session(&mut s).await?;
                s.commit_transaction().await?;
            } else {
                update.await?;
            }
            n += 1;
        }
        rates[i] = n as f64 / secs as f64;
    }
    Ok((rates[0], rates[1]))
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let uri = format!(
        "mongodb://{}/?directConnection=true&maxPoolSize=64",
        cli.addr
    );
    let client = mongodb::Client::with_uri_str(&uri).await?;
    // A fresh `--replSet` server needs initiating; an initiated one answers 23, which is fine.
    let _ = client
        .database("admin")
        .run_command(doc! { "replSetInitiate": {} })
        .await;
    println!("| run | committed transfers/s | abort rate |");
    println!("|---|---|---|");
    for clients in [1, 8, 32] {
        let (rate, aborts, _) =
            transfers(&client, clients, cli.accounts, cli.secs, NO_READERS).await?;
        println!(
            "| {clients} clients, {} accounts | {rate:.0} | {:.1}% |",
            cli.accounts,
            aborts * 100.0
        );
    }
    let (rate, aborts, _) = transfers(&client, 32, cli.hot, cli.secs, NO_READERS).await?;
    println!(
        "| 32 clients, {} hot accounts | {rate:.0} | {:.1}% |",
        cli.hot,
        aborts * 100.0
    );
    println!("\n| run | committed transfers/s | abort rate | reader rounds/s (2 finds each) |");
    println!("|---|---|---|---|");
    for in_txn in [true, false] {
        let readers = Readers {
            clients: cli.readers,
            in_txn,
        };
        let (rate, aborts, reads) = transfers(&client, 8, cli.accounts, cli.secs, readers).await?;
        let how = if in_txn {
            "read-only transactions"
        } else {
            "plain finds"
        };
        println!(
            "| 8 clients + {} readers ({how}), {} accounts | {rate:.0} | {:.1}% | {reads:.0} |",
            cli.readers,
            cli.accounts,
            aborts * 100.0
        );
    }
    let (txn, plain) = overhead(&client, cli.secs).await?;
    println!(
        "\none update per round, 1 client: in a transaction {txn:.0}/s, plain {plain:.0}/s (ratio {:.2})",
        txn / plain.max(1.0)
    );
    Ok(())
}
