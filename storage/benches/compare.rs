//! Side-by-side benchmarks: cairn's storage engine against redb, fjall and sled with the same
//! durability (every acknowledged put fdatasynced), plus this machine's raw fdatasync latency.
//! Run: `cargo bench -p cairn-storage --bench compare`; docs/BENCHMARKS.md holds the results.

use std::hint::black_box;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bson::{Binary, RawDocumentBuf, doc, spec::BinarySubtype};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::{Rng, SeedableRng, rngs::StdRng};
use redb::ReadableDatabase;
use storage::{Collection, Direction, Engine, EngineOptions, WriteOp};

const VALUE_SIZES: [usize; 4] = [64, 128, 256, 512];
const PRELOAD_COUNT: u64 = 20_000;
const BATCH_COUNT: u64 = 1_000;
const TABLE: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("t");

fn cairn_doc(key: u64, value: &[u8]) -> RawDocumentBuf {
    let d = doc! {"_id": key as i64, "v": Binary { subtype: BinarySubtype::Generic, bytes: value.to_vec() }};
    RawDocumentBuf::try_from(&d).expect("doc")
}

struct Cairn {
    _dir: tempfile::TempDir,
    _engine: Engine,
    coll: Arc<Collection>,
}

fn cairn() -> Cairn {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    let coll = engine.create_collection("b", "c", doc! {}).expect("create");
    Cairn {
        _dir: dir,
        _engine: engine,
        coll,
    }
}

fn fdatasync(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = std::fs::File::create(dir.path().join("f")).expect("file");
    f.write_all(&vec![0u8; 64 << 20]).expect("zeros");
    f.sync_all().expect("sync");
    let buf = [7u8; 300];
    let mut at = 0u64;
    c.bench_function("fdatasync_300B_overwrite", |b| {
        b.iter(|| {
            use std::os::unix::fs::FileExt;
            f.write_all_at(&buf, at).expect("write");
            at = (at + 300) % (60 << 20);
            f.sync_data().expect("sync");
        })
    });
}

fn put_durable(c: &mut Criterion) {
    let mut g = c.benchmark_group("put_durable_single");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    for size in VALUE_SIZES {
        let value = vec![0xabu8; size];
        let cr = cairn();
        let mut k = 0u64;
        g.bench_with_input(BenchmarkId::new("cairn", size), &size, |b, _| {
            b.iter(|| {
                k += 1;
                let t = cr
                    .coll
                    .write(vec![WriteOp::Insert((cairn_doc(k, &value)).into())])
                    .expect("write");
                t.wait_durable_blocking().expect("durable");
            })
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let db = redb::Database::create(dir.path().join("r")).expect("redb");
        g.bench_with_input(BenchmarkId::new("redb", size), &size, |b, _| {
            b.iter(|| {
                k += 1;
                let tx = db.begin_write().expect("tx");
                tx.open_table(TABLE)
                    .expect("t")
                    .insert(k, value.as_slice())
                    .expect("ins");
                tx.commit().expect("commit");
            })
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let fj = fjall::Database::builder(dir.path()).open().expect("fjall");
        let ks = fj
            .keyspace("t", fjall::KeyspaceCreateOptions::default)
            .expect("ks");
        g.bench_with_input(BenchmarkId::new("fjall", size), &size, |b, _| {
            b.iter(|| {
                k += 1;
                ks.insert(k.to_be_bytes(), value.as_slice()).expect("ins");
                fj.persist(fjall::PersistMode::SyncData).expect("persist");
            })
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let sl = sled::open(dir.path()).expect("sled");
        g.bench_with_input(BenchmarkId::new("sled", size), &size, |b, _| {
            b.iter(|| {
                k += 1;
                sl.insert(k.to_be_bytes(), value.as_slice()).expect("ins");
                sl.flush().expect("flush");
            })
        });
    }
    g.finish();
}

fn put_batch(c: &mut Criterion) {
    let mut g = c.benchmark_group("put_durable_batch1000_256B");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let value = vec![0xcdu8; 256];
    let mut k = 0u64;
    let cr = cairn();
    g.bench_function("cairn", |b| {
        b.iter(|| {
            let ops = (0..BATCH_COUNT)
                .map(|i| WriteOp::Insert((cairn_doc(k + i, &value)).into()))
                .collect();
            k += BATCH_COUNT;
            cr.coll
                .write(ops)
                .expect("write")
                .wait_durable_blocking()
                .expect("durable");
        })
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let db = redb::Database::create(dir.path().join("r")).expect("redb");
    g.bench_function("redb", |b| {
        b.iter(|| {
            let tx = db.begin_write().expect("tx");
            {
                let mut t = tx.open_table(TABLE).expect("t");
                for i in 0..BATCH_COUNT {
                    t.insert(k + i, value.as_slice()).expect("ins");
                }
            }
            k += BATCH_COUNT;
            tx.commit().expect("commit");
        })
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let fj = fjall::Database::builder(dir.path()).open().expect("fjall");
    let ks = fj
        .keyspace("t", fjall::KeyspaceCreateOptions::default)
        .expect("ks");
    g.bench_function("fjall", |b| {
        b.iter(|| {
            let mut batch = fj.batch();
            for i in 0..BATCH_COUNT {
                batch.insert(&ks, (k + i).to_be_bytes(), value.as_slice());
            }
            k += BATCH_COUNT;
            batch.commit().expect("commit");
            fj.persist(fjall::PersistMode::SyncData).expect("persist");
        })
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let sl = sled::open(dir.path()).expect("sled");
    g.bench_function("sled", |b| {
        b.iter(|| {
            let mut batch = sled::Batch::default();
            for i in 0..BATCH_COUNT {
                batch.insert(&(k + i).to_be_bytes(), value.as_slice());
            }
            k += BATCH_COUNT;
            sl.apply_batch(batch).expect("batch");
            sl.flush().expect("flush");
        })
    });
    g.finish();
}

/// Random point reads and 1,000-entry range scans over PRELOAD_COUNT 256-byte values.
fn reads(c: &mut Criterion) {
    let value = vec![0x11u8; 256];
    let cr = cairn();
    let ops = (0..PRELOAD_COUNT)
        .map(|i| WriteOp::Insert((cairn_doc(i, &value)).into()))
        .collect();
    let rids = cr.coll.write(ops).expect("load").record_ids;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = redb::Database::create(dir.path().join("r")).expect("redb");
    let tx = db.begin_write().expect("tx");
    {
        let mut t = tx.open_table(TABLE).expect("t");
        for i in 0..PRELOAD_COUNT {
            t.insert(i, value.as_slice()).expect("ins");
        }
    }
    tx.commit().expect("commit");
    let fdir = tempfile::tempdir().expect("tempdir");
    let fj = fjall::Database::builder(fdir.path()).open().expect("fjall");
    let ks = fj
        .keyspace("t", fjall::KeyspaceCreateOptions::default)
        .expect("ks");
    let sdir = tempfile::tempdir().expect("tempdir");
    let sl = sled::open(sdir.path()).expect("sled");
    for i in 0..PRELOAD_COUNT {
        ks.insert(i.to_be_bytes(), value.as_slice()).expect("ins");
        sl.insert(i.to_be_bytes(), value.as_slice()).expect("ins");
    }
    let mut rng = StdRng::seed_from_u64(7);
    let mut g = c.benchmark_group("get_random");
    g.bench_function("cairn_by_id", |b| {
        b.iter(|| {
            let k = rng.random_range(0..PRELOAD_COUNT) as i64;
            let key = RawDocumentBuf::try_from(&doc! {"x": k}).expect("key");
            let rid = cr
                .coll
                .find_by_id(key.get("x").expect("x").expect("x"))
                .expect("find")
                .expect("hit");
            black_box(cr.coll.get(rid).expect("get"));
        })
    });
    g.bench_function("cairn_by_record_id", |b| {
        b.iter(|| {
            black_box(
                cr.coll
                    .get(rids[rng.random_range(0..rids.len())])
                    .expect("get"),
            )
        })
    });
    g.bench_function("redb", |b| {
        b.iter(|| {
            let rt = db.begin_read().expect("read");
            let t = rt.open_table(TABLE).expect("t");
            black_box(
                t.get(rng.random_range(0..PRELOAD_COUNT))
                    .expect("get")
                    .map(|v| v.value().len()),
            );
        })
    });
    g.bench_function("fjall", |b| {
        b.iter(|| {
            black_box(
                ks.get(rng.random_range(0..PRELOAD_COUNT).to_be_bytes())
                    .expect("get"),
            )
        })
    });
    g.bench_function("sled", |b| {
        b.iter(|| {
            black_box(
                sl.get(rng.random_range(0..PRELOAD_COUNT).to_be_bytes())
                    .expect("get"),
            )
        })
    });
    g.finish();
    let mut g = c.benchmark_group("scan_1000");
    g.bench_function("cairn", |b| {
        b.iter(|| {
            let after = rids[rng.random_range(0..rids.len() - 1001)];
            black_box(
                cr.coll
                    .scan(Direction::Forward, Some(after), 1000)
                    .expect("scan")
                    .len(),
            )
        })
    });
    g.bench_function("redb", |b| {
        b.iter(|| {
            let rt = db.begin_read().expect("read");
            let t = rt.open_table(TABLE).expect("t");
            let s = rng.random_range(0..PRELOAD_COUNT - 1001);
            black_box(t.range(s..s + 1000).expect("range").count())
        })
    });
    g.bench_function("fjall", |b| {
        b.iter(|| {
            let s = rng.random_range(0..PRELOAD_COUNT - 1001);
            black_box(
                ks.range(s.to_be_bytes()..(s + 1000).to_be_bytes())
                    .filter_map(|g| g.into_inner().ok())
                    .count(),
            )
        })
    });
    g.bench_function("sled", |b| {
        b.iter(|| {
            let s = rng.random_range(0..PRELOAD_COUNT - 1001);
            black_box(sl.range(s.to_be_bytes()..(s + 1000).to_be_bytes()).count())
        })
    });
    g.finish();
}

criterion_group!(benches, fdatasync, put_durable, put_batch, reads);
criterion_main!(benches);
