//! Proves an aggregate with blocking stages (and a find with an in-memory sort) waits in its
//! cursor between batches: a 50k-group `$group`, a spilling `$sort` and a sorted find read in
//! small batches give the full, correct result, and killCursors after the first batch gives the
//! memory budget back and closes the spill files.
//! How: a real `cairn` process, raw aggregate/getMore/killCursors commands, `serverStatus`'s
//! `metrics.queryMemory.usedBytes`, and the server's open deleted files in /proc/<pid>/fd.

use bson::{Bson, Document, doc};
use cairn_e2e::Server;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// Groups in the large `$group` (two documents each).
const GROUPS: i64 = 50_000;

async fn fill(c: &mongodb::Collection<Document>, n: i64) {
    let docs: Vec<Document> = (0..n)
        .map(|i| doc! { "_id": i, "k": i % GROUPS, "v": i, "pad": "p".repeat(60) })
        .collect();
    for chunk in docs.chunks(10_000) {
        c.insert_many(chunk.to_vec()).await.unwrap();
    }
}

async fn used_bytes(db: &mongodb::Database) -> i64 {
    let status = db.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    status
        .get_document("metrics")
        .and_then(|m| m.get_document("queryMemory"))
        .and_then(|m| m.get_i64("usedBytes"))
        .unwrap()
}

/// Files the server holds open that have no name any more: its spill runs.
fn deleted_files_open(server: &Server) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{}/fd", server.pid())) else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("(deleted)"))
        .count()
}

/// Opens an aggregate cursor with a first batch of `batch` documents: (id, first batch).
async fn open(
    db: &mongodb::Database,
    pipeline: Vec<Document>,
    batch: i32,
    disk: bool,
) -> (i64, Vec<Document>) {
    let reply = db
        .run_command(doc! {
            "aggregate": "c", "pipeline": pipeline, "cursor": { "batchSize": batch },
            "allowDiskUse": disk,
        })
        .await
        .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    (cursor.get_i64("id").unwrap(), docs_of(cursor, "firstBatch"))
}

fn docs_of(cursor: &Document, field: &str) -> Vec<Document> {
    cursor
        .get_array(field)
        .unwrap()
        .iter()
        .filter_map(|b| b.as_document().cloned())
        .collect()
}

/// Reads the rest of cursor `id` in batches of `batch`.
async fn read_rest(db: &mongodb::Database, mut id: i64, batch: i32) -> Vec<Document> {
    let mut out = Vec::new();
    while id != 0 {
        let reply = db
            .run_command(doc! { "getMore": id, "collection": "c", "batchSize": batch })
            .await
            .unwrap();
        let cursor = reply.get_document("cursor").unwrap();
        out.extend(docs_of(cursor, "nextBatch"));
        id = cursor.get_i64("id").unwrap();
    }
    out
}

#[tokio::test]
async fn a_large_group_read_in_small_batches_is_complete_and_in_order() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("suspended");
    fill(&db.collection("c"), 2 * GROUPS).await;
    let pipeline = vec![
        doc! { "$group": { "_id": "$k", "n": { "$sum": 1 }, "total": { "$sum": "$v" } } },
        doc! { "$match": { "n": 2 } },
    ];
    let (id, mut got) = open(&db, pipeline, 7, false).await;
    assert_eq!(got.len(), 7);
    assert_ne!(id, 0, "the rest waits in the cursor");
    got.extend(read_rest(&db, id, 1000).await);
    assert_eq!(got.len() as i64, GROUPS);
    // Groups come out in first-seen order: k = 0, 1, 2, ...; each sums v = k and k + GROUPS.
    for (k, g) in (0i64..).zip(&got) {
        let id = match g.get("_id") {
            Some(Bson::Int64(v)) => *v,
            Some(Bson::Int32(v)) => i64::from(*v),
            other => panic!("bad _id {other:?}"),
        };
        assert_eq!(id, k);
        let total = match g.get("total") {
            Some(Bson::Int64(v)) => *v,
            Some(Bson::Int32(v)) => i64::from(*v),
            other => panic!("bad total {other:?}"),
        };
        assert_eq!(total, 2 * k + GROUPS, "group {k}");
    }
    assert_eq!(used_bytes(&db).await, 0, "a used-up cursor holds nothing");
}

#[tokio::test]
async fn kill_cursors_after_the_first_batch_frees_memory_and_spill_files() {
    let server = Server::start(
        BIN,
        &[
            "--setParameter",
            "internalQueryMaxBlockingSortMemoryUsageBytes=200000",
        ],
    );
    let client = server.client().await;
    let db = client.database("suspended");
    fill(&db.collection("c"), 20_000).await;
    let files_before = deleted_files_open(&server);
    let sort = vec![
        doc! { "$sort": { "v": -1 } },
        doc! { "$project": { "v": 1 } },
    ];
    let group = vec![doc! { "$group": { "_id": "$k", "all": { "$push": "$pad" } } }];
    for pipeline in [sort, group] {
        let (id, first) = open(&db, pipeline.clone(), 2, true).await;
        assert_eq!(first.len(), 2, "{pipeline:?}");
        assert_ne!(id, 0);
        assert!(
            used_bytes(&db).await > 0,
            "{pipeline:?}: the stage's buffer is charged"
        );
        assert!(
            deleted_files_open(&server) > files_before,
            "{pipeline:?}: the stage spilled and its runs are open"
        );
        let reply = db
            .run_command(doc! { "killCursors": "c", "cursors": [id] })
            .await
            .unwrap();
        assert_eq!(reply.get_array("cursorsKilled").unwrap().len(), 1);
        assert_eq!(used_bytes(&db).await, 0, "{pipeline:?}: budget given back");
        assert_eq!(
            deleted_files_open(&server),
            files_before,
            "{pipeline:?}: spill files closed"
        );
    }
}

/// A find whose sort no index gives holds its sort buffer, not its projected results: after a
/// first batch of 2 the rest is projected batch by batch (the same documents as one large
/// batch), the buffer stays charged while the cursor is open, and killCursors gives it back.
#[tokio::test]
async fn a_sorted_find_keeps_its_buffer_charged_and_projects_per_batch() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("sortedfind");
    fill(&db.collection("c"), 5_000).await;
    let find = |batch: i32| {
        doc! {
            "find": "c", "filter": { "v": { "$gte": 10 } }, "sort": { "v": -1 },
            "projection": { "_id": 0, "v": 1 }, "batchSize": batch,
        }
    };
    let whole = db.run_command(find(10_000)).await.unwrap();
    let whole = docs_of(whole.get_document("cursor").unwrap(), "firstBatch");
    assert_eq!(whole.len(), 4_990);
    assert_eq!(whole[0], doc! { "v": 4_999_i64 });

    let reply = db.run_command(find(2)).await.unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    let id = cursor.get_i64("id").unwrap();
    let mut got = docs_of(cursor, "firstBatch");
    assert_ne!(id, 0);
    assert!(used_bytes(&db).await > 0, "the sort buffer is charged");
    got.extend(read_rest(&db, id, 700).await);
    assert_eq!(got, whole, "batch by batch equals one batch");
    assert_eq!(
        used_bytes(&db).await,
        0,
        "an exhausted cursor holds nothing"
    );

    let reply = db.run_command(find(2)).await.unwrap();
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    let reply = db
        .run_command(doc! { "killCursors": "c", "cursors": [id] })
        .await
        .unwrap();
    assert_eq!(reply.get_array("cursorsKilled").unwrap().len(), 1);
    assert_eq!(
        used_bytes(&db).await,
        0,
        "killCursors gives the buffer back"
    );
}

/// The getMore of an aggregate suspended after its `$sort` runs within what is left of the
/// command's maxTimeMS (50) and stops on killOp (11601); either way the cursor is gone and the
/// sort's buffer given back. The stage after the sort is made slow per document so the getMore
/// is still running when the signal comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_get_more_after_a_sort_stops_at_max_time_ms_and_on_kill_op() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("slowmore");
    fill(&db.collection("c"), 3_000).await;
    let slow = vec![
        doc! { "$sort": { "v": -1 } },
        doc! { "$addFields": { "x": { "$size": { "$range": [0, 200_000] } } } },
    ];
    let open_slow = |max_time_ms: Option<i64>| {
        let mut cmd =
            doc! { "aggregate": "c", "pipeline": slow.clone(), "cursor": { "batchSize": 1 } };
        if let Some(ms) = max_time_ms {
            cmd.insert("maxTimeMS", ms);
        }
        cmd
    };
    let get_more = |id: i64| doc! { "getMore": id, "collection": "c", "batchSize": 100_000 };

    let reply = db.run_command(open_slow(Some(1_500))).await.unwrap();
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    let asked = std::time::Instant::now();
    let e = db.run_command(get_more(id)).await.unwrap_err();
    assert_eq!(cairn_e2e::error_code(&e), 50, "{e}");
    // Printed, not asserted (machines are noisy): the getMore ends at the 1.5 s the command
    // had left, not after the ~3,000 slow documents.
    println!("getMore after a $sort: 50 after {:?}", asked.elapsed());
    assert_eq!(
        used_bytes(&db).await,
        0,
        "the failed cursor gave its buffer back"
    );

    let reply = db.run_command(open_slow(None)).await.unwrap();
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    let running = {
        let db = db.clone();
        tokio::spawn(async move { db.run_command(get_more(id)).await })
    };
    let admin = client.database("admin");
    let opid = loop {
        let ops = admin.run_command(doc! { "currentOp": 1 }).await.unwrap();
        let found = ops.get_array("inprog").unwrap().iter().find_map(|o| {
            let o = o.as_document()?;
            let is_get_more = o.get_document("command").ok()?.contains_key("getMore");
            is_get_more.then(|| o.get("opid").cloned()).flatten()
        });
        if let Some(opid) = found {
            break opid;
        }
        assert!(
            !running.is_finished(),
            "the getMore ended before it was seen"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let killed = std::time::Instant::now();
    admin
        .run_command(doc! { "killOp": 1, "op": opid })
        .await
        .unwrap();
    let e = running.await.unwrap().unwrap_err();
    assert_eq!(cairn_e2e::error_code(&e), 11601, "{e}");
    println!(
        "getMore after a $sort: 11601 {:?} after killOp",
        killed.elapsed()
    );
    assert_eq!(
        used_bytes(&db).await,
        0,
        "the killed cursor gave its buffer back"
    );
}
