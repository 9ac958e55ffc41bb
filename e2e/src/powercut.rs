//! Power-cut rounds: a `cairn` process on a mounted `LazyFs`, clients inserting with
//! acknowledged writes, the power cut at a random moment (the filesystem freezes, the process is
//! killed, everything unsynced is dropped), the server restarted on what survived, and every
//! write acknowledged so far looked up. Used by the `e2e_powercut` test (a few rounds) and by
//! `cairn-powercut` (many rounds, a report).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use futures_util::TryStreamExt;

use crate::Server;
use crate::lazyfs::LazyFs;

const WRITERS: i64 = 4;
/// Ids of writer `w` start at `w * ID_STRIDE`, so ids never collide across rounds.
const ID_STRIDE: i64 = 1 << 40;

/// What the rounds found.
#[derive(Debug, Default)]
pub struct Report {
    pub rounds: usize,
    pub acknowledged: usize,
    /// Acknowledged writes missing after a restart (must be empty).
    pub lost: Vec<i64>,
    /// Restarts that refused to open (must be 0: a cut leaves only torn tails).
    pub refused_opens: usize,
    pub restart_ms_max: u128,
}

/// A small xorshift generator: the rounds need variety, not quality.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

async fn writer(
    uri: String,
    w: i64,
    start: i64,
    acked: Arc<Mutex<Vec<i64>>>,
    ready: Arc<Mutex<i64>>,
) -> anyhow::Result<()> {
    let client = mongodb::Client::with_uri_str(&uri).await?;
    let c = client.database("cut").collection::<Document>("c");
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await?;
    if let Ok(mut r) = ready.lock() {
        *r += 1;
    }
    let mut i = start;
    loop {
        let id = w * ID_STRIDE + i;
        if c.insert_one(doc! { "_id": id, "w": w, "pad": "p".repeat(200) })
            .await
            .is_err()
        {
            return Ok(());
        }
        if let Ok(mut a) = acked.lock() {
            a.push(id);
        }
        i += 1;
    }
}

/// Every `_id` stored now.
async fn stored_ids(server: &Server) -> anyhow::Result<BTreeSet<i64>> {
    let c = server
        .client()
        .await
        .database("cut")
        .collection::<Document>("c");
    let docs: Vec<Document> = c
        .find(doc! {})
        .projection(doc! { "_id": 1 })
        .await?
        .try_collect()
        .await?;
    Ok(docs
        .iter()
        .filter_map(|d| match d.get("_id") {
            Some(Bson::Int64(i)) => Some(*i),
            _ => None,
        })
        .collect())
}

/// Runs `rounds` power cuts against `bin` with its data directory on the mounted `fs` at `mnt`.
/// `log` receives one line per round.
pub async fn run(
    bin: &str,
    fs: &LazyFs,
    mnt: &Path,
    rounds: usize,
    seed: u64,
    log: &mut dyn FnMut(String),
) -> anyhow::Result<Report> {
    let dbpath = mnt.join("db");
    std::fs::create_dir_all(&dbpath)?;
    fs.sync_tree();
    let mut rng = Rng(seed | 1);
    let mut report = Report::default();
    let mut all_acked: BTreeSet<i64> = BTreeSet::new();
    let mut server = Server::start_at(bin, &dbpath, &[]);
    let mut next_start = 0i64;
    for round in 0..rounds {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let ready = Arc::new(Mutex::new(0i64));
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                // A writer whose server is gone must give up at once, not wait 30 s.
                let uri = format!("{}&serverSelectionTimeoutMS=500", server.uri());
                tokio::spawn(writer(uri, w, next_start, acked.clone(), ready.clone()))
            })
            .collect();
        // The clock starts once every writer is connected (bounded, in case one fails).
        let connecting = Instant::now();
        while ready.lock().map_or(0, |r| *r) < WRITERS
            && connecting.elapsed() < Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let run_ms = 20 + rng.below(1000);
        tokio::time::sleep(Duration::from_millis(run_ms)).await;
        fs.cut();
        server.kill();
        for t in tasks {
            let _ = t.await;
        }
        fs.restore();
        let got: Vec<i64> = acked.lock().map(|a| a.clone()).unwrap_or_default();
        next_start += got.len() as i64 + 1_000_000;
        all_acked.extend(&got);
        let started = Instant::now();
        let restarted = std::panic::AssertUnwindSafe(async { Server::start_at(bin, &dbpath, &[]) });
        server = match futures_util::FutureExt::catch_unwind(restarted).await {
            Ok(s) => s,
            Err(_) => {
                report.refused_opens += 1;
                anyhow::bail!("round {round}: the restart after the cut failed to open");
            }
        };
        report.restart_ms_max = report.restart_ms_max.max(started.elapsed().as_millis());
        let stored = stored_ids(&server).await?;
        let lost: Vec<i64> = all_acked.difference(&stored).copied().collect();
        log(format!(
            "round {round}: cut after {run_ms} ms, {} acknowledged this round, {} in all, {} lost",
            got.len(),
            all_acked.len(),
            lost.len()
        ));
        report.lost.extend(lost);
        report.rounds += 1;
    }
    report.acknowledged = all_acked.len();
    server.kill();
    Ok(report)
}
