//! Proves that an acknowledged write survives `kill -9` of the server, and that a clean restart
//! keeps everything. How: concurrent writers insert and record every acknowledged `_id`; the
//! server process is SIGKILLed at a random moment; after a restart on the same data directory
//! every acknowledged document must be there (repeated several times with random timings).
//! The same for updates, deletes, findAndModify and bulkWrite: each acknowledged change is
//! there after the kill.

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

/// The run's seed (`CAIRN_SEED`, else random; printed) and its generator.
fn seeded() -> (u64, rand::rngs::StdRng) {
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CAIRN_SEED={seed}");
    (
        seed,
        <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed),
    )
}

/// SIGKILL the server at a random moment once `acked()` has grown by `at_least` (or after
/// 6 s), then restart it on the same data directory.
async fn kill_at_random(
    server: &mut Server,
    rng: &mut rand::rngs::StdRng,
    acked: impl Fn() -> usize,
    at_least: usize,
) {
    let before = acked();
    for _ in 0..600 {
        if acked() >= before + at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let wait_ms = rand::Rng::random_range(rng, 0..300);
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    server.restart_after_kill();
}
const WRITERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let (seed, mut rng) = seeded();
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
        kill_at_random(&mut server, &mut rng, || acked.lock().unwrap().len(), 50).await;
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

/// What one writer saw acknowledged: the highest `v` written to each of its documents, and the
/// documents it deleted.
#[derive(Default)]
struct Acked {
    v: std::collections::HashMap<i64, i64>,
    deleted: Vec<i64>,
}

/// One writer's statement `k` on its own documents (`base..base + DOCS`), by kind in turn:
/// updateOne, findOneAndUpdate, an update through the `bulkWrite` command, and a delete of one
/// of its `doomed` documents. Returns what to record once it is acknowledged.
async fn change(
    client: &mongodb::Client,
    base: i64,
    k: i64,
) -> mongodb::error::Result<(Option<(i64, i64)>, Option<i64>)> {
    const DOCS: i64 = 50;
    let coll = client.database("dur2").collection::<Document>("c");
    let id = base + k % DOCS;
    let set = doc! { "$set": { "v": k } };
    match k % 4 {
        0 => {
            coll.update_one(doc! { "_id": id }, set).await?;
        }
        1 => {
            coll.find_one_and_update(doc! { "_id": id }, set).await?;
        }
        2 => {
            let r = client
                .database("admin")
                .run_command(doc! {
                    "bulkWrite": 1,
                    "ops": [{ "update": 0, "filter": { "_id": id }, "updateMods": set }],
                    "nsInfo": [{ "ns": "dur2.c" }],
                })
                .await?;
            assert_eq!(r.get_i32("nErrors").unwrap_or(0), 0, "{r}");
        }
        _ => {
            let doomed = -(base + k);
            coll.delete_one(doc! { "_id": doomed }).await?;
            return Ok((None, Some(doomed)));
        }
    }
    Ok((Some((id, k)), None))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_updates_and_deletes_survive_sigkill() {
    let (seed, mut rng) = seeded();
    let mut server = Server::start(BIN, &[]);
    for round in 0..3i64 {
        let client = server
            .client_with(&["retryWrites=false", "maxPoolSize=8"])
            .await;
        let bases: Vec<i64> = (0..WRITERS as i64)
            .map(|w| (round * 16 + w) * 1_000_000)
            .collect();
        // Each writer's documents, and the ones its deletes remove (negative ids).
        let mut seed_docs = Vec::new();
        for &base in &bases {
            seed_docs.extend((0..50).map(|i| doc! { "_id": base + i, "v": -1i64 }));
            seed_docs.extend(
                (0..20_000)
                    .step_by(4)
                    .map(|k| doc! { "_id": -(base + k + 3) }),
            );
        }
        let coll = client.database("dur2").collection::<Document>("c");
        coll.insert_many(seed_docs).await.unwrap();
        let acked: Vec<Arc<Mutex<Acked>>> = bases.iter().map(|_| Arc::default()).collect();
        let mut tasks = Vec::new();
        for (w, &base) in bases.iter().enumerate() {
            let (client, acked) = (client.clone(), acked[w].clone());
            tasks.push(tokio::spawn(async move {
                for k in 0..20_000i64 {
                    match change(&client, base, k).await {
                        Ok((set, deleted)) => {
                            let mut a = acked.lock().unwrap();
                            if let Some((id, v)) = set {
                                a.v.insert(id, v);
                            }
                            a.deleted.extend(deleted);
                        }
                        Err(_) => return,
                    }
                }
            }));
        }
        let total = |acked: &[Arc<Mutex<Acked>>]| -> usize {
            acked
                .iter()
                .map(|a| {
                    let a = a.lock().unwrap();
                    a.v.len() + a.deleted.len()
                })
                .sum()
        };
        kill_at_random(&mut server, &mut rng, || total(&acked), 100).await;
        for t in tasks {
            let _ = t.await;
        }
        let client = server.client().await;
        let coll = client.database("dur2").collection::<Document>("c");
        let mut checked = 0;
        for a in &acked {
            // Every writer has ended: take what it saw rather than hold its lock across awaits.
            let a = std::mem::take(&mut *a.lock().unwrap());
            for (&id, &v) in &a.v {
                // Only this writer writes `id`, with rising `v`: a statement in flight at the
                // kill may have landed after the last acknowledged one, never before it.
                let d = coll.find_one(doc! { "_id": id }).await.unwrap().unwrap();
                let got = d.get_i64("v").unwrap();
                assert!(
                    got >= v,
                    "round {round} (seed {seed}): {id} has v {got}, acked {v}"
                );
                checked += 1;
            }
            let left = count(
                &client.database("dur2"),
                "c",
                doc! { "_id": { "$in": &a.deleted } },
            )
            .await;
            assert_eq!(
                left, 0,
                "round {round} (seed {seed}): acknowledged deletes undone"
            );
            checked += a.deleted.len();
        }
        assert!(
            checked > 0,
            "round {round}: nothing was acknowledged before the kill"
        );
        println!("round {round}: {checked} acknowledged changes all present after SIGKILL");
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
