//! Proves that every acknowledged write survives SIGKILL. How: this test binary re-runs itself
//! as a child (env CAIRN_KILL_CHILD) that writes from three threads and prints an ACK line once
//! each write is durable; the parent kills it at a random moment, reopens the directory and
//! checks every acknowledged `_id`; 20+ rounds on one directory.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, doc};
use common::{raw, rng, seed};
use rand::Rng;
use storage::{Engine, EngineOptions, WriteOp};

const ROUNDS: u64 = 22;
const CHILD_THREADS: u64 = 3;
const CHILD_RUN_MAX: Duration = Duration::from_secs(10);

fn opts() -> EngineOptions {
    EngineOptions {
        segment_size_bytes: 256 << 10,
        ..EngineOptions::default()
    }
}

/// The child: writes until killed (or CHILD_RUN_MAX passes).
#[test]
fn kill_child_entry() {
    let Ok(dir) = std::env::var("CAIRN_KILL_CHILD") else {
        return;
    };
    let round: i64 = std::env::var("CAIRN_KILL_ROUND")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let engine = Arc::new(Engine::open(std::path::Path::new(&dir), opts()).expect("child open"));
    let c = match engine.collection("db", "k") {
        Some(c) => c,
        None => engine
            .create_collection("db", "k", doc! {})
            .expect("create"),
    };
    println!("READY");
    let start = Instant::now();
    let threads: Vec<_> = (0..CHILD_THREADS as i64)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                for i in 0.. {
                    if start.elapsed() > CHILD_RUN_MAX {
                        return;
                    }
                    let id = round * 10_000_000 + t * 1_000_000 + i;
                    let ops = vec![WriteOp::Insert(raw(
                        &doc! {"_id": id, "pad": "k".repeat(200)},
                    ))];
                    let ticket = c.write(ops).expect("write");
                    ticket.wait_durable_blocking().expect("durable");
                    println!("ACK {id}");
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let mut rng = rng(seed("acknowledged_writes_survive_sigkill"));
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary");
    let mut total_acks = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "kill_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CAIRN_KILL_CHILD", dir.path())
            .env("CAIRN_KILL_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let kill_after = rng.random_range(0..150);
        let mut acked = Vec::new();
        let mut ready = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("READY") {
                ready = true;
            }
            if let Some(id) = line.strip_prefix("ACK ") {
                acked.push(id.parse::<i64>().expect("id"));
            }
            if ready && acked.len() >= kill_after {
                break;
            }
        }
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        assert!(ready, "round {round}: child started");
        let engine = Engine::open(dir.path(), opts()).expect("reopen after SIGKILL");
        let c = engine.collection("db", "k").expect("collection exists");
        for id in &acked {
            let key = raw(&doc! {"x": Bson::Int64(*id)});
            let found = c
                .find_by_id(key.get("x").expect("x").expect("x"))
                .expect("lookup");
            assert!(found.is_some(), "round {round}: acknowledged _id {id} lost");
        }
        total_acks += acked.len();
        engine.close().expect("close");
    }
    assert!(total_acks > 0);
}
