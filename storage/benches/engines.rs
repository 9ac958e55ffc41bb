//! Criterion benchmarks of cairn's storage engine side by side with redb, fjall and sled, all
//! with every commit synced: durable puts of 64..512-byte values one per commit and 1,000 per
//! commit, random point gets, range scans of 1,000, and this machine's raw fdatasync latency
//! (the floor every durable single put is measured against).
//!
//! Stores live in a temporary directory (`$CAIRN_BENCH_DIR`, default the system temp dir), so
//! the numbers are for that filesystem. Run: `cargo bench -p cairn-storage --bench engines`.

mod common;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{
    BULK_BATCH_COUNT, ENGINES, Store, SyncKind, VALUE_SIZES, fdatasync_latencies, make_doc,
    open_store,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Records preloaded for the read benchmarks.
const READ_STORE_COUNT: u64 = 100_000;
/// Value bytes of the preloaded records.
const READ_VALUE_SIZE: usize = 256;
/// Records per range scan.
const SCAN_COUNT: usize = 1000;

fn bench_root() -> PathBuf {
    std::env::var_os("CAIRN_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(bench_root()).expect("tempdir")
}

/// Times `iters` rounds of `round`, where each round writes one commit of `per_commit` records.
fn timed_puts(
    store: &mut dyn Store,
    next: &mut u64,
    size: usize,
    per: usize,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let items: Vec<_> = (0..per as u64)
            .map(|i| (*next + i, make_doc(*next + i, 0, size)))
            .collect();
        *next += per as u64;
        let t = Instant::now();
        store.put(&items);
        total += t.elapsed();
    }
    total
}

fn puts(c: &mut Criterion, group_name: &str, per_commit: usize) {
    let mut g = c.benchmark_group(group_name);
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(per_commit as u64));
    for size in VALUE_SIZES {
        for name in ENGINES {
            let dir = tempdir();
            let mut store = open_store(name, dir.path());
            let mut next = 0u64;
            g.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter_custom(|iters| {
                    timed_puts(store.as_mut(), &mut next, size, per_commit, iters)
                })
            });
            drop(store);
        }
    }
    g.finish();
}

fn put_sync_each(c: &mut Criterion) {
    puts(c, "put_sync_each", 1);
}

fn put_batch_1000(c: &mut Criterion) {
    puts(c, "put_1000_per_commit", BULK_BATCH_COUNT);
}

fn loaded(name: &str, dir: &std::path::Path) -> Box<dyn Store> {
    let mut store = open_store(name, dir);
    let mut next = 0;
    while next < READ_STORE_COUNT {
        let items: Vec<_> = (next..next + BULK_BATCH_COUNT as u64)
            .map(|k| (k, make_doc(k, 0, READ_VALUE_SIZE)))
            .collect();
        store.put(&items);
        next += BULK_BATCH_COUNT as u64;
    }
    store
}

fn reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("read");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for name in ENGINES {
        let dir = tempdir();
        let store = loaded(name, dir.path());
        let mut rng = StdRng::seed_from_u64(7);
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("random_get", name), |b| {
            b.iter(|| {
                let k = rng.random_range(0..READ_STORE_COUNT);
                let mut len = 0;
                store.get(k, &mut |v| len = v.len());
                black_box(len)
            })
        });
        g.throughput(Throughput::Elements(SCAN_COUNT as u64));
        g.bench_function(BenchmarkId::new("scan_1000", name), |b| {
            b.iter(|| {
                let from = rng.random_range(0..READ_STORE_COUNT - SCAN_COUNT as u64);
                let mut len = 0;
                let n = store.scan(from, SCAN_COUNT, &mut |v| len += v.len());
                assert_eq!(n, SCAN_COUNT);
                black_box(len)
            })
        });
        drop(store);
    }
    g.finish();
}

fn fdatasync(c: &mut Criterion) {
    let mut g = c.benchmark_group("fdatasync_1_byte");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let dir = tempdir();
    for kind in [SyncKind::Preallocated, SyncKind::Appending] {
        g.bench_function(format!("{kind:?}").to_lowercase(), |b| {
            b.iter_custom(|iters| {
                fdatasync_latencies(dir.path(), kind, iters as usize)
                    .iter()
                    .sum()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, fdatasync, put_sync_each, put_batch_1000, reads);
criterion_main!(benches);
