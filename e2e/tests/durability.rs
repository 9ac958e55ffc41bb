//! Proves that an acknowledged write survives `kill -9` of the server, and that a clean restart
//! keeps everything. How: concurrent writers insert and record every acknowledged `_id`; the
//! server process is SIGKILLed at a random moment; after a restart on the same data directory
//! every acknowledged document must be there (repeated several times with random timings).

use bson::{Document, doc};
use cairn_e2e::Server;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// The `count` command (the driver's countDocuments needs aggregation).
async fn count(db: &mongodb::Database, coll: &str, query: Document) -> i64 {
    let r = db
        .run_command(doc! { "count": coll, "query": query })
        .await
        .unwrap();
    r.get("n")
        .and_then(bson::Bson::as_i64)
        .or_else(|| r.get_i32("n").ok().map(i64::from))
        .unwrap()
}
const ROUNDS: usize = 5;
const WRITERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CAIRN_SEED={seed}");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let mut server = Server::start(BIN, &[]);
    let acked: Arc<Mutex<Vec<i64>>> = Arc::default();
    let mut next_id = 0i64;
    for round in 0..ROUNDS {
        let client = server
            .client_with(&["retryWrites=false", "maxPoolSize=8"])
            .await;
        let coll = client.database("dur").collection::<Document>("c");
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let coll = coll.clone();
            let acked = acked.clone();
            let base = next_id + (w as i64) * 1_000_000;
            tasks.push(tokio::spawn(async move {
                for i in 0..100_000i64 {
                    let id = base + i;
                    let r = if i % 10 == 0 {
                        let docs: Vec<Document> = (0..10)
                            .map(|k| doc! { "_id": id * 100 + k, "batch": true })
                            .collect();
                        coll.insert_many(docs)
                            .await
                            .map(|_| (0..10).map(|k| id * 100 + k).collect::<Vec<_>>())
                    } else {
                        coll.insert_one(doc! { "_id": id * 100, "pad": "x".repeat(200) })
                            .await
                            .map(|_| vec![id * 100])
                    };
                    match r {
                        Ok(ids) => acked.lock().unwrap().extend(ids),
                        Err(_) => return,
                    }
                }
            }));
        }
        next_id += WRITERS as i64 * 1_000_000;
        // Kill at a random moment after this round's writers have had some writes acknowledged.
        let before = acked.lock().unwrap().len();
        for _ in 0..600 {
            if acked.lock().unwrap().len() >= before + 50 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let wait_ms = rand::Rng::random_range(&mut rng, 0..300);
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
        server.restart_after_kill();
        for t in tasks {
            let _ = t.await;
        }
        let client = server.client().await;
        let db = client.database("dur");
        let ids = acked.lock().unwrap().clone();
        let mut missing = Vec::new();
        for chunk in ids.chunks(5000) {
            let found = count(&db, "c", doc! { "_id": { "$in": chunk.to_vec() } }).await;
            if found as usize != chunk.len() {
                missing.push(chunk.len() - found as usize);
            }
        }
        assert!(
            missing.is_empty(),
            "round {round} (seed {seed}): {missing:?} acknowledged documents lost of {}",
            ids.len()
        );
        assert!(
            !ids.is_empty() || round > 0,
            "round {round}: no write was acknowledged before the kill"
        );
        println!(
            "round {round}: {} acknowledged documents all present after SIGKILL",
            ids.len()
        );
    }
}

#[tokio::test]
async fn clean_restart_keeps_data_and_indexes() {
    let mut server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("keep");
    db.collection::<Document>("c")
        .insert_many((0..500).map(|i| doc! { "_id": i, "k": i % 10 }))
        .await
        .unwrap();
    db.run_command(
        doc! { "createIndexes": "c", "indexes": [ { "key": { "k": 1 }, "name": "k_1" } ] },
    )
    .await
    .unwrap();
    db.collection::<Document>("gone")
        .insert_one(doc! { "x": 1 })
        .await
        .unwrap();
    db.collection::<Document>("gone").drop().await.unwrap();
    client
        .database("admin")
        .run_command(doc! { "shutdown": 1 })
        .await
        .ok();
    assert!(
        server
            .wait_exit(Duration::from_secs(30))
            .expect("exit")
            .success()
    );
    server.restart_after_kill();
    let client = server.client().await;
    let db = client.database("keep");
    assert_eq!(count(&db, "c", doc! {}).await, 500);
    assert_eq!(count(&db, "c", doc! { "k": 3 }).await, 50);
    assert_eq!(db.list_collection_names().await.unwrap(), ["c"]);
    let names = db
        .collection::<Document>("c")
        .list_index_names()
        .await
        .unwrap();
    assert_eq!(names, ["_id_", "k_1"]);
}
