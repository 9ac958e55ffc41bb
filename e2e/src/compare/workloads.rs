//! Timed workloads on the generated user dataset, run through the official driver the way an
//! application would. Each timed workload is repeated `runs` times and reported as the median; a
//! workload the server cannot run (an error reply) is recorded as that error, not a crash.

use crate::compare::dataset;
use crate::compare::limits::{BULK_BATCH_COUNT, RUN_BUDGET_FULL, RUN_BUDGET_QUICK};
use crate::compare::stats::median;
use bson::{Document, doc};
use mongodb::options::ReturnDocument;
use mongodb::{Client, Collection, Database, IndexModel};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Sizes of one workload run.
#[derive(Clone, Debug)]
pub struct Sizes {
    /// Records in the dataset.
    pub docs: u64,
    /// Repetitions; the median is reported.
    pub runs: usize,
    /// Operations per run of a point workload (findOne, updateOne, ...).
    pub point_ops: usize,
    /// Operations per run of a scanning workload (counts, $group, updateMany).
    pub scan_ops: usize,
    /// A run stops early once it has taken this long; the cost is averaged over the operations
    /// done, so a slow server cannot stretch `--quick` past its minute.
    pub run_budget: Duration,
    /// Progress lines on stderr name this (e.g. "target"); empty = silent.
    pub label: String,
    /// Workloads to time, by a part of their name (empty: all). The load and the index it
    /// builds always run, since the others read that data.
    pub only: Vec<String>,
}

impl Sizes {
    pub fn new(docs: u64, runs: usize, quick: bool) -> Sizes {
        Sizes {
            docs,
            runs: runs.max(1),
            point_ops: if quick { 200 } else { 2_000 },
            scan_ops: if quick { 3 } else { 10 },
            run_budget: if quick {
                RUN_BUDGET_QUICK
            } else {
                RUN_BUDGET_FULL
            },
            label: String::new(),
            only: Vec::new(),
        }
    }

    /// True when workload `name` is to be timed.
    fn selected(&self, name: &str) -> bool {
        ALWAYS_RUN.contains(&name)
            || self.only.is_empty()
            || self.only.iter().any(|part| name.contains(part.as_str()))
    }
}

/// Workloads that prepare the data the others read: they run whatever `Sizes::only` says.
const ALWAYS_RUN: &[&str] = &["bulk insert", "createIndex"];

/// The value of a workload `Sizes::only` left out; `run_all` drops those.
const NOT_SELECTED: &str = "not selected";

/// Which direction of a value is good.
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

/// One workload's result on one server.
#[derive(Clone, Debug)]
pub struct Measurement {
    pub name: &'static str,
    pub unit: &'static str,
    pub better: Better,
    pub value: Result<f64, String>,
}

const USERS: &str = "users";

type Outcome = Result<f64, mongodb::error::Error>;

/// Run every workload against one server in database `db_name` (dropped first; the caller drops
/// it after any restart measurement, so a restart recovers a realistic amount of data).
pub async fn run_all(client: &Client, db_name: &str, sizes: &Sizes) -> Vec<Measurement> {
    let db = client.database(db_name);
    let _ = db.drop().await;
    let users: Collection<Document> = db.collection(USERS);
    let mut out = Vec::new();
    let lower = Better::Lower;
    out.push(
        timed("insertOne sequential", "us/op", lower, sizes, |_| {
            insert_one_seq(&db, sizes)
        })
        .await,
    );
    out.push(
        timed("bulk insert", "MB/s", Better::Higher, sizes, |_| {
            bulk_insert(&users, sizes)
        })
        .await,
    );
    out.push(timed("createIndex", "ms", lower, sizes, |_| create_index(&users)).await);
    out.push(
        timed("countDocuments({})", "ms/op", lower, sizes, |_| {
            count_all(&users, sizes)
        })
        .await,
    );
    out.push(
        timed("findOne by _id", "us/op", lower, sizes, |r| {
            find_by_id(&users, sizes, r)
        })
        .await,
    );
    out.push(
        timed("findOne indexed field", "us/op", lower, sizes, |r| {
            find_by_email(&users, sizes, r)
        })
        .await,
    );
    out.push(
        timed("range count unindexed", "ms/op", lower, sizes, |_| {
            range_count(&db, sizes)
        })
        .await,
    );
    out.push(
        timed("sort _id desc limit 20", "us/op", lower, sizes, |_| {
            sort_desc(&users, sizes)
        })
        .await,
    );
    out.push(
        timed("find projection limit 1000", "ms/op", lower, sizes, |_| {
            projection(&users, sizes)
        })
        .await,
    );
    out.push(
        timed(
            "find limit 1000 (whole documents)",
            "ms/op",
            lower,
            sizes,
            |_| find_whole(&users, sizes),
        )
        .await,
    );
    out.push(
        timed("$group by key", "ms/op", lower, sizes, |_| {
            group(&users, sizes)
        })
        .await,
    );
    out.push(
        timed(
            "$match+$group (unindexed match)",
            "ms/op",
            lower,
            sizes,
            |_| match_group(&users, sizes),
        )
        .await,
    );
    out.push(
        timed(
            "$project 3 fields (aggregate)",
            "ms/op",
            lower,
            sizes,
            |_| project_pipeline(&users, sizes),
        )
        .await,
    );
    out.push(
        timed(
            "aggregate first batch (no blocking stage)",
            "ms/op",
            lower,
            sizes,
            |_| first_batch(&users, sizes),
        )
        .await,
    );
    out.push(
        timed(
            "range count indexed (100 ids)",
            "ms/op",
            lower,
            sizes,
            |r| range_count_indexed(&db, sizes, r),
        )
        .await,
    );
    out.push(
        timed("$sort+$limit 10 (top-k)", "ms/op", lower, sizes, |_| {
            sort_pipeline(&users, sizes, true)
        })
        .await,
    );
    out.push(
        timed("$sort full (unindexed)", "ms/op", lower, sizes, |_| {
            sort_pipeline(&users, sizes, false)
        })
        .await,
    );
    out.push(
        timed(
            "$sort _id desc+$limit 10 (index order)",
            "ms/op",
            lower,
            sizes,
            |_| sort_indexed(&users, sizes),
        )
        .await,
    );
    out.push(
        timed(
            "$lookup 200 orders, foreign index",
            "ms/op",
            lower,
            sizes,
            |_| lookup(&db, sizes, true),
        )
        .await,
    );
    out.push(
        timed(
            "$lookup 200 orders, no foreign index",
            "ms/op",
            lower,
            sizes,
            |_| lookup(&db, sizes, false),
        )
        .await,
    );
    out.push(
        timed("updateOne repeated", "us/op", lower, sizes, |r| {
            update_one(&users, sizes, r)
        })
        .await,
    );
    out.push(
        timed("updateMany $inc", "ms/op", lower, sizes, |_| {
            update_many(&users, sizes)
        })
        .await,
    );
    out.push(
        timed("deleteOne+insertOne", "us/op", lower, sizes, |r| {
            delete_insert(&users, sizes, r)
        })
        .await,
    );
    out.push(
        timed("job queue cycle", "us/op", lower, sizes, |_| {
            job_queue(&db, sizes)
        })
        .await,
    );
    out.push(gauge("server RSS", "MiB", server_rss(client).await));
    out.push(gauge("data size on disk", "MiB", data_size(&db).await));
    out.retain(|m| !matches!(&m.value, Err(e) if e == NOT_SELECTED));
    out
}

/// Repeat `f` and keep the median; the first error ends the workload.
async fn timed<F, Fut>(
    name: &'static str,
    unit: &'static str,
    better: Better,
    sizes: &Sizes,
    mut f: F,
) -> Measurement
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Outcome>,
{
    if !sizes.selected(name) {
        return gauge(name, unit, Err(NOT_SELECTED.to_string()));
    }
    let mut values = Vec::with_capacity(sizes.runs);
    let mut value = Err(String::new());
    for run in 0..sizes.runs {
        match f(run).await {
            Ok(v) => values.push(v),
            Err(e) => {
                value = Err(describe(&e));
                break;
            }
        }
    }
    if values.len() == sizes.runs {
        value = median(&values).ok_or_else(|| "no runs".to_string());
    }
    if !sizes.label.is_empty() {
        match &value {
            Ok(v) => eprintln!("  {}: {name}: {v:.3} {unit}", sizes.label),
            Err(e) => eprintln!("  {}: {name}: error {e}", sizes.label),
        }
    }
    Measurement {
        name,
        unit,
        better,
        value,
    }
}

fn gauge(name: &'static str, unit: &'static str, value: Result<f64, String>) -> Measurement {
    Measurement {
        name,
        unit,
        better: Better::Lower,
        value,
    }
}

/// A short, stable description of a failure: the code name for server errors.
pub fn describe(e: &mongodb::error::Error) -> String {
    match *e.kind {
        mongodb::error::ErrorKind::Command(ref c) => format!("{} ({})", c.code_name, c.code),
        mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteError(ref w)) => {
            format!(
                "{} ({})",
                w.code_name.as_deref().unwrap_or("write error"),
                w.code
            )
        }
        mongodb::error::ErrorKind::InsertMany(ref m) => match m.write_errors.as_deref() {
            Some([first, ..]) => format!("insert write error ({})", first.code),
            _ => "insertMany failed".to_string(),
        },
        ref other => {
            let text = format!("{other}");
            text.chars().take(80).collect()
        }
    }
}

/// True when a run has used its time budget (always false before the first operation).
fn spent(start: Instant, sizes: &Sizes, done: usize) -> bool {
    done > 0 && start.elapsed() > sizes.run_budget
}

/// Runs `op` (given its index) up to `ops` times, stopping early once the run budget is spent
/// (never before the first); returns when it started and how many ran.
async fn within_budget(
    sizes: &Sizes,
    ops: usize,
    mut op: impl AsyncFnMut(usize) -> Result<(), mongodb::error::Error>,
) -> Result<(Instant, usize), mongodb::error::Error> {
    let start = Instant::now();
    let mut done = 0usize;
    for i in 0..ops {
        if spent(start, sizes, done) {
            break;
        }
        op(i).await?;
        done += 1;
    }
    Ok((start, done))
}

fn per_op_us(start: Instant, ops: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e6 / ops.max(1) as f64
}

fn per_op_ms(start: Instant, ops: usize) -> f64 {
    per_op_us(start, ops) / 1e3
}

/// A spread of ids over the dataset that differs per run but is the same on both servers.
fn probe_id(sizes: &Sizes, run: usize, i: usize) -> i64 {
    let n = sizes.docs.max(1);
    ((i as u64)
        .wrapping_mul(7_919)
        .wrapping_add(run as u64 * 104_729)
        % n) as i64
}

async fn insert_one_seq(db: &Database, sizes: &Sizes) -> Outcome {
    let coll: Collection<Document> = db.collection("seq");
    coll.drop().await?;
    let docs = dataset::users(dataset::SEED, 0, sizes.point_ops as i64);
    let start = Instant::now();
    let mut done = 0usize;
    for d in docs {
        if spent(start, sizes, done) {
            break;
        }
        coll.insert_one(d).await?;
        done += 1;
    }
    Ok(per_op_us(start, done))
}

async fn bulk_insert(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    users.drop().await?;
    let mut bytes = 0usize;
    let mut elapsed = 0.0;
    let mut first = 0i64;
    while (first as u64) < sizes.docs {
        let count = (sizes.docs - first as u64).min(BULK_BATCH_COUNT as u64) as i64;
        let batch = dataset::users(dataset::SEED, first, count);
        bytes += batch
            .iter()
            .map(|d| bson::RawDocumentBuf::try_from(d).map_or(0, |r| r.as_bytes().len()))
            .sum::<usize>();
        let start = Instant::now();
        users.insert_many(batch).await?;
        elapsed += start.elapsed().as_secs_f64();
        first += count;
    }
    Ok(bytes as f64 / 1e6 / elapsed.max(1e-9))
}

async fn create_index(users: &Collection<Document>) -> Outcome {
    let _ = users.drop_index("email_1").await;
    let start = Instant::now();
    users
        .create_index(IndexModel::builder().keys(doc! {"email": 1}).build())
        .await?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

async fn count_all(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        users.count_documents(doc! {}).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

async fn find_by_id(users: &Collection<Document>, sizes: &Sizes, run: usize) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.point_ops, async |i: usize| {
        users
            .find_one(doc! {"_id": probe_id(sizes, run, i)})
            .await?;
        Ok(())
    })
    .await?;
    Ok(per_op_us(start, done))
}

async fn find_by_email(users: &Collection<Document>, sizes: &Sizes, run: usize) -> Outcome {
    let emails: Vec<String> = (0..sizes.point_ops)
        .map(|i| {
            let u = dataset::user(dataset::SEED, probe_id(sizes, run, i));
            u.get_str("email").unwrap_or_default().to_string()
        })
        .collect();
    let start = Instant::now();
    let mut done = 0usize;
    for e in emails {
        if spent(start, sizes, done) {
            break;
        }
        users.find_one(doc! {"email": e}).await?;
        done += 1;
    }
    Ok(per_op_us(start, done))
}

/// Uses the `count` command (not the driver's countDocuments, which is an aggregation) so that
/// the query engine is measured, not the pipeline.
async fn range_count(db: &Database, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        db.run_command(doc! {"count": USERS, "query": {"age": {"$gte": 30, "$lt": 40}}})
            .await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

async fn drain(mut cursor: mongodb::Cursor<Document>) -> Result<usize, mongodb::error::Error> {
    let mut n = 0;
    while cursor.advance().await? {
        n += 1;
    }
    Ok(n)
}

async fn sort_desc(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let ops = sizes.point_ops / 4;
    let (start, done) = within_budget(sizes, ops, async |_| {
        drain(users.find(doc! {}).sort(doc! {"_id": -1}).limit(20).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_us(start, done))
}

async fn projection(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        let p = doc! {"username": 1, "email": 1, "age": 1};
        drain(users.find(doc! {}).projection(p).limit(1000).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// 1,000 stored documents as they are: the reply path (storage read to socket) with nothing
/// computed per document.
async fn find_whole(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        drain(users.find(doc! {}).limit(1000).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

async fn group(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        let pipeline =
            [doc! {"$group": {"_id": "$age", "n": {"$sum": 1}, "balance": {"$avg": "$balance"}}}];
        drain(users.aggregate(pipeline).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// A leading `$match` no index serves (about a third of the documents pass), then `$group`.
async fn match_group(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        let pipeline = [
            doc! {"$match": {"score": {"$lt": 33.0}}},
            doc! {"$group": {"_id": "$age", "n": {"$sum": 1}, "balance": {"$avg": "$balance"}}},
        ];
        drain(users.aggregate(pipeline).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// `$project` of 3 fields over the whole collection, every result read.
async fn project_pipeline(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        let pipeline = [doc! {"$project": {"username": 1, "age": 1, "score": 1}}];
        drain(users.aggregate(pipeline).batch_size(1000).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// The time to the first batch (101 documents) of an aggregate over the whole collection
/// whose stages all stream (`$match` passing about 90%, then `$project`); the cursor is then
/// dropped (killCursors).
async fn first_batch(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.point_ops / 20, async |_| {
        let pipeline = [
            doc! {"$match": {"score": {"$lt": 90.0}}},
            doc! {"$project": {"username": 1, "score": 1}},
        ];
        let mut cursor = users.aggregate(pipeline).await?;
        cursor.advance().await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// `$sort` on `_id` (the `_id` index gives the order) with a `$limit`: reads about the limit.
async fn sort_indexed(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        let pipeline = [
            doc! {"$sort": {"_id": -1}},
            doc! {"$limit": 10},
            doc! {"$project": {"score": 1}},
        ];
        drain(users.aggregate(pipeline).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// A count over a fixed-width `_id` range: its cost should not grow with the collection.
async fn range_count_indexed(db: &Database, sizes: &Sizes, run: usize) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.point_ops, async |i: usize| {
        let lo = probe_id(sizes, run, i);
        db.run_command(doc! {"count": USERS, "query": {"_id": {"$gte": lo, "$lt": lo + 100}}})
            .await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// `$sort` on an unindexed field, with a `$limit` (a top-k) or returning every document.
async fn sort_pipeline(users: &Collection<Document>, sizes: &Sizes, top_k: bool) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        let mut pipeline = vec![doc! {"$sort": {"score": -1}}];
        if top_k {
            pipeline.push(doc! {"$limit": 10});
        }
        pipeline.push(doc! {"$project": {"score": 1}});
        drain(users.aggregate(pipeline).allow_disk_use(true).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

/// 200 orders joined to their users by `_id` (indexed) or by `username` (no index).
async fn lookup(db: &Database, sizes: &Sizes, indexed: bool) -> Outcome {
    let orders: Collection<Document> = db.collection("orders");
    if orders.estimated_document_count().await? == 0 {
        let n = sizes.docs.max(1) as i64;
        let docs: Vec<Document> = (0..200i64)
            .map(|i| {
                let uid = (i * 7919) % n;
                let u = dataset::user(dataset::SEED, uid);
                doc! {"_id": i, "uid": uid, "uname": u.get_str("username").unwrap_or_default()}
            })
            .collect();
        orders.insert_many(docs).await?;
    }
    let (local, foreign) = if indexed {
        ("uid", "_id")
    } else {
        ("uname", "username")
    };
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
            let pipeline = [
                doc! {"$lookup": {"from": USERS, "localField": local, "foreignField": foreign, "as": "u"}},
            ];
            drain(orders.aggregate(pipeline).await?).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

async fn update_one(users: &Collection<Document>, sizes: &Sizes, run: usize) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.point_ops, async |i: usize| {
        let q = doc! {"_id": probe_id(sizes, run, i)};
        users
            .update_one(q, doc! {"$set": {"score": i as f64}})
            .await?;
        Ok(())
    })
    .await?;
    Ok(per_op_us(start, done))
}

async fn update_many(users: &Collection<Document>, sizes: &Sizes) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.scan_ops, async |_| {
        users
            .update_many(doc! {"is_active": true}, doc! {"$inc": {"login_count": 1}})
            .await?;
        Ok(())
    })
    .await?;
    Ok(per_op_ms(start, done))
}

async fn delete_insert(users: &Collection<Document>, sizes: &Sizes, run: usize) -> Outcome {
    let (start, done) = within_budget(sizes, sizes.point_ops, async |i: usize| {
        let id = probe_id(sizes, run, i);
        users.delete_one(doc! {"_id": id}).await?;
        users.insert_one(dataset::user(dataset::SEED, id)).await?;
        Ok(())
    })
    .await?;
    Ok(per_op_us(start, done))
}

/// Enqueue, claim the oldest ready job with findOneAndUpdate, mark it done: one cycle.
async fn job_queue(db: &Database, sizes: &Sizes) -> Outcome {
    let jobs: Collection<Document> = db.collection("jobs");
    jobs.drop().await?;
    jobs.create_index(
        IndexModel::builder()
            .keys(doc! {"state": 1, "_id": 1})
            .build(),
    )
    .await?;
    let cycles = sizes.point_ops / 2;
    let start = Instant::now();
    let mut done = 0usize;
    for i in 0..cycles {
        if spent(start, sizes, done) {
            break;
        }
        jobs.insert_one(doc! {"_id": i as i64, "state": "ready", "payload": "x"})
            .await?;
        let claimed = jobs
            .find_one_and_update(doc! {"state": "ready"}, doc! {"$set": {"state": "running"}})
            .sort(doc! {"_id": 1})
            .return_document(ReturnDocument::After)
            .await?;
        if let Some(job) = claimed {
            let id = job.get("_id").cloned().unwrap_or(bson::Bson::Null);
            jobs.update_one(doc! {"_id": id}, doc! {"$set": {"state": "done"}})
                .await?;
        }
        done += 1;
    }
    Ok(per_op_us(start, done))
}

async fn server_rss(client: &Client) -> Result<f64, String> {
    let status = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .map_err(|e| describe(&e))?;
    let mem = status
        .get_document("mem")
        .map_err(|_| "no mem section".to_string())?;
    // mongod reports resident memory in MiB.
    number(mem, "resident").ok_or_else(|| "no mem.resident".to_string())
}

async fn data_size(db: &Database) -> Result<f64, String> {
    let stats = db
        .run_command(doc! {"dbStats": 1})
        .await
        .map_err(|e| describe(&e))?;
    let bytes = number(&stats, "totalSize")
        .or_else(|| Some(number(&stats, "storageSize")? + number(&stats, "indexSize")?));
    bytes
        .map(|b| b / (1024.0 * 1024.0))
        .ok_or_else(|| "no totalSize/storageSize".to_string())
}

/// Any numeric field as f64.
pub fn number(d: &Document, key: &str) -> Option<f64> {
    match d.get(key)? {
        bson::Bson::Int32(i) => Some(f64::from(*i)),
        bson::Bson::Int64(i) => Some(*i as f64),
        bson::Bson::Double(f) => Some(*f),
        _ => None,
    }
}
