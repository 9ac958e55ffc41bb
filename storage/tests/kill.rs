//! Proves that every acknowledged write survives SIGKILL while checkpoints and compaction run.
//! How: this test binary re-runs itself as a child (env CAIRN_KILL_CHILD) with a small cache,
//! checkpoints every few tens of milliseconds and background compaction; three threads insert
//! (printing an ACK line once each insert is durable), update, and insert-then-delete scratch
//! documents (dead space for compaction). The parent kills it at a random moment, reopens the
//! directory and checks every acknowledged `_id` once, no `_id` twice, and a clean `validate`
//! (every B+tree's invariants, indexes equal to the documents); 22 rounds on one directory.

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
        cache_size_bytes: 64 * (4096 + storage::pager::FRAME_OVERHEAD_BYTES),
        checkpoint_interval_ms: 30,
        checkpoint_log_bytes: 256 << 10,
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
        None => {
            let c = engine
                .create_collection("db", "k", doc! {})
                .expect("create");
            let spec = storage::IndexSpec {
                name: "v_1".into(),
                key: doc! {"v": 1},
                ..storage::IndexSpec::default()
            };
            engine
                .create_index("db", "k", spec, &|_, _| {})
                .expect("index");
            c
        }
    };
    println!("READY");
    let start = Instant::now();
    let watch = engine.clone();
    std::thread::spawn(move || {
        loop {
            let s = watch.stats();
            println!("STAT {} {}", s.checkpoints, s.segments_compacted);
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let threads: Vec<_> = (0..CHILD_THREADS as i64)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0.. {
                    if start.elapsed() > CHILD_RUN_MAX {
                        return;
                    }
                    let id = round * 10_000_000 + t * 1_000_000 + i;
                    let ops = vec![
                        WriteOp::Insert(
                            raw(&doc! {"_id": id, "v": i % 97, "pad": "k".repeat(200)}).into(),
                        ),
                        WriteOp::Insert(
                            raw(&doc! {"_id": -id - 1, "v": -1, "pad": "s".repeat(400)}).into(),
                        ),
                    ];
                    let ticket = c.write(ops).expect("write");
                    let rids = ticket.record_ids.clone();
                    ticket.wait_durable_blocking().expect("durable");
                    println!("ACK {id}");
                    mine.push((rids[0], id));
                    // The scratch document goes again (dead bytes), and an earlier one changes.
                    let mut ops = vec![WriteOp::Delete(rids[1])];
                    if let Some(&(rid, old)) = mine.get(i as usize / 2) {
                        ops.push(WriteOp::Replace(
                            rid,
                            raw(&doc! {"_id": old, "v": i % 89, "pad": "u".repeat(220)}),
                        ));
                    }
                    c.write(ops)
                        .expect("write")
                        .wait_durable_blocking()
                        .expect("durable");
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
    let (mut checkpoints, mut compacted) = (0u64, 0u64);
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
        let kill_after = rng.random_range(0..400);
        let mut acked = Vec::new();
        let mut ready = false;
        // Odd rounds are killed only after this child's first checkpoint, so that every run
        // kills writers with checkpoints going on however fast the machine writes (even
        // rounds may be killed before any).
        let (mut round_checkpoints, want_checkpoint) = (0u64, round % 2 == 1);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("READY") {
                ready = true;
            }
            if let Some(stat) = line.strip_prefix("STAT ") {
                let n: Vec<u64> = stat.split(' ').filter_map(|x| x.parse().ok()).collect();
                if let [c, s] = n[..] {
                    round_checkpoints = round_checkpoints.max(c);
                    checkpoints = checkpoints.max(c);
                    compacted = compacted.max(s);
                }
            }
            if let Some(id) = line.strip_prefix("ACK ") {
                acked.push(id.parse::<i64>().expect("id"));
            }
            if ready && acked.len() >= kill_after && (!want_checkpoint || round_checkpoints > 0) {
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
        let mut ids = std::collections::HashSet::new();
        let mut after = None;
        loop {
            let page = c
                .scan(storage::Direction::Forward, after, 500)
                .expect("scan");
            let Some(last) = page.last() else { break };
            after = Some(last.0);
            for (_, d) in &page {
                let id = d
                    .get("_id")
                    .expect("_id")
                    .expect("_id")
                    .as_i64()
                    .expect("long");
                assert!(ids.insert(id), "round {round}: _id {id} stored twice");
            }
        }
        let report = c.validate().expect("validate");
        assert!(
            report.problems.is_empty(),
            "round {round}: {:?}",
            report.problems
        );
        total_acks += acked.len();
        engine.close().expect("close");
    }
    assert!(total_acks > 0);
    eprintln!(
        "{total_acks} acknowledged; child saw up to {checkpoints} checkpoints and {compacted} compacted segments in a round"
    );
    assert!(checkpoints > 0, "checkpoints ran while the child wrote");
}
