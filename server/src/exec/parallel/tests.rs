//! Proves a parallel scan gives exactly the serial scan's results: counts, `$group` outputs (same
//! groups, same order, same `_id` values and accumulator values with their types, decimal and
//! integer sums included) and top-k `$sort` + `$limit` (ties in RecordId order), and that it
//! falls back to serial where it must (a double sum, a state past the memory bound).
//! How: seeded random collections (seed printed; CAIRN_SEED replays) with holes in the RecordId
//! range, random pipelines run through `aggregate::streamed` with parallelism off and with 2 to 5
//! parts, outputs compared document by document.

use super::stages::{count, run_stage};
use super::*;
use crate::exec::DocSource;
use crate::exec::aggregate::{scan_filter, stages_done, streamed};
use crate::query::pipeline::ParseContext;
use bson::{Bson, Decimal128, bson, doc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seed() -> u64 {
    let seed = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("parallel scan seed: {seed} (set CAIRN_SEED to replay)");
    seed
}

fn decimal(rng: &mut StdRng) -> Bson {
    let text = format!(
        "{}.{:02}",
        rng.random_range(-999..999),
        rng.random_range(0..100)
    );
    Bson::Decimal128(text.parse::<Decimal128>().expect("decimal"))
}

/// A value for `v`: mostly integers, some longs, decimals, doubles, nulls, strings, missing.
fn value(rng: &mut StdRng, doubles: bool) -> Option<Bson> {
    Some(match rng.random_range(0..10) {
        0..=3 => Bson::Int32(rng.random_range(-1000..1000)),
        4 => Bson::Int64(rng.random_range(-(1i64 << 40)..(1i64 << 40))),
        5 => decimal(rng),
        6 if doubles => Bson::Double(f64::from(rng.random_range(-1000..1000)) / 8.0),
        7 => Bson::Null,
        8 => Bson::String(format!("s{}", rng.random_range(0..5))),
        _ => return None,
    })
}

fn random_doc(rng: &mut StdRng, i: i64, doubles: bool) -> Document {
    // Keys that compare equal across types (1, 1.0, NumberLong(1)) share a group.
    let k = rng.random_range(0..12);
    let key = match rng.random_range(0..4) {
        0 => Bson::Double(f64::from(k)),
        1 => Bson::Int64(i64::from(k)),
        _ => Bson::Int32(k),
    };
    let mut d = doc! { "_id": i, "k": key, "t": rng.random_range(0..4) };
    if let Some(v) = value(rng, doubles) {
        d.insert("v", v);
    }
    d
}

/// Collection `name` holding `docs`, inserted in one write.
fn filled(
    engine: &storage::Engine,
    name: &str,
    docs: impl Iterator<Item = Document>,
) -> Arc<Collection> {
    let coll = engine
        .create_collection("t", name, Document::new())
        .expect("create");
    let ops = docs
        .map(|d| storage::WriteOp::Insert(RawDocumentBuf::try_from(&d).expect("encode").into()))
        .collect();
    coll.write(ops).expect("insert");
    coll
}

/// A collection of `n` random documents with about a tenth deleted (holes in the RecordIds).
fn collection(
    rng: &mut StdRng,
    engine: &storage::Engine,
    name: &str,
    n: i64,
    doubles: bool,
) -> Arc<Collection> {
    let coll = filled(engine, name, (0..n).map(|i| random_doc(rng, i, doubles)));
    let all = coll
        .scan(Direction::Forward, None, usize::MAX)
        .expect("scan");
    let gone: Vec<storage::WriteOp> = all
        .iter()
        .filter(|_| rng.random_bool(0.1))
        .map(|(rid, _)| storage::WriteOp::Delete(*rid))
        .collect();
    if !gone.is_empty() {
        coll.write(gone).expect("delete");
    }
    coll
}

fn random_group(rng: &mut StdRng) -> Document {
    let id = match rng.random_range(0..4) {
        0 => Bson::Null,
        1 => bson!("$t"),
        2 => bson!({ "$mod": ["$k", 5] }),
        _ => bson!("$k"),
    };
    let mut g = doc! { "_id": id };
    let accs = [
        bson!({ "$sum": "$v" }),
        bson!({ "$sum": 1 }),
        bson!({ "$avg": "$v" }),
        bson!({ "$min": "$v" }),
        bson!({ "$max": "$v" }),
        bson!({ "$first": "$v" }),
        bson!({ "$last": "$_id" }),
        bson!({ "$count": {} }),
    ];
    for i in 0..rng.random_range(1..5) {
        g.insert(
            format!("a{i}"),
            accs[rng.random_range(0..accs.len())].clone(),
        );
    }
    doc! { "$group": g }
}

fn random_pipeline(rng: &mut StdRng) -> Vec<Document> {
    let mut stages = Vec::new();
    if rng.random_bool(0.5) {
        stages.push(doc! { "$match": { "t": { "$ne": rng.random_range(0..4) } } });
    }
    match rng.random_range(0..3) {
        0 => stages.push(random_group(rng)),
        1 => stages.push(doc! { "$count": "n" }),
        _ => {
            let dir = if rng.random_bool(0.5) { 1 } else { -1 };
            let sort = if rng.random_bool(0.5) {
                doc! { "k": dir }
            } else {
                doc! { "v": dir, "t": 1 }
            };
            stages.push(doc! { "$sort": sort });
            stages.push(doc! { "$limit": rng.random_range(1..30) });
        }
    }
    if rng.random_bool(0.3) {
        stages.push(doc! { "$project": { "_id": 1, "a0": 1, "n": 1, "v": 1 } });
    }
    stages
}

fn drain(mut source: DocSource) -> Vec<RawDocumentBuf> {
    let mut out = Vec::new();
    while !source.is_exhausted() {
        let batch = source.next_batch(7, None).expect("batch");
        if batch.is_empty() && source.is_exhausted() {
            break;
        }
        out.extend(batch);
    }
    out
}

fn run(coll: &Arc<Collection>, stages: &[Document], cfg: Parallelism) -> Vec<RawDocumentBuf> {
    let ctx = ParseContext::new("t", Some("c"), bson::DateTime::from_millis(0));
    let p = Arc::new(Pipeline::parse(stages, &ctx).expect("parses"));
    drain(streamed(coll, &p, cfg).expect("runs").expect("streams"))
}

/// True when the pipeline's first stage after the scan ran in parallel.
fn went_parallel(coll: &Arc<Collection>, stages: &[Document], cfg: Parallelism) -> bool {
    let ctx = ParseContext::new("t", Some("c"), bson::DateTime::from_millis(0));
    let p = Pipeline::parse(stages, &ctx).expect("parses");
    let filter_doc = scan_filter(&p);
    let filter = Filter::parse(&filter_doc).expect("filter");
    let choice = planner::choose(coll, &filter, &filter_doc, p.leading_sort(), None);
    let done = stages_done(&p, &choice);
    run_stage(coll, &p, done, &filter, &filter_doc, &choice.winner, cfg)
        .expect("runs")
        .is_some()
}

use crate::planner;
use crate::query::pipeline::Pipeline;

#[test]
fn parallel_pipelines_equal_serial_ones() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = tempfile::tempdir().expect("tempdir");
    let engine =
        storage::Engine::open(dir.path(), storage::EngineOptions::default()).expect("open");
    let mut parallel_runs = 0;
    for round in 0..12 {
        let doubles = round % 3 == 2;
        let n = rng.random_range(0..3000);
        let coll = collection(&mut rng, &engine, &format!("c{round}"), n, doubles);
        for _ in 0..15 {
            let stages = random_pipeline(&mut rng);
            let cfg = Parallelism {
                parts_max: rng.random_range(2..6),
                docs_min: 0,
            };
            let serial = run(&coll, &stages, Parallelism::SERIAL);
            let parallel = run(&coll, &stages, cfg);
            assert_eq!(
                parallel, serial,
                "round {round}, {n} documents, {cfg:?}: {stages:?}"
            );
            parallel_runs += usize::from(went_parallel(&coll, &stages, cfg));
        }
    }
    assert!(
        parallel_runs > 60,
        "most runs went parallel ({parallel_runs})"
    );
}

#[test]
fn counts_equal_serial_counts_and_small_collections_stay_serial() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = tempfile::tempdir().expect("tempdir");
    let engine =
        storage::Engine::open(dir.path(), storage::EngineOptions::default()).expect("open");
    let coll = collection(&mut rng, &engine, "c", 5000, true);
    let cfg = Parallelism {
        parts_max: 3,
        docs_min: 1000,
    };
    for t in 0..4 {
        let q = doc! { "t": { "$lte": t }, "v": { "$exists": true } };
        let filter = Filter::parse(&q).expect("filter");
        let mut serial = 0u64;
        crate::exec::for_each_match(&coll, &filter, &q, None, |_| {
            serial += 1;
            Ok(())
        })
        .expect("serial");
        assert_eq!(count(&coll, &filter, &q, cfg).expect("count"), Some(serial));
        let above = Parallelism {
            parts_max: 3,
            docs_min: 100_000,
        };
        assert_eq!(count(&coll, &filter, &q, above).expect("count"), None);
    }
}

#[test]
fn double_sums_and_states_past_the_bound_fall_back_to_serial() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine =
        storage::Engine::open(dir.path(), storage::EngineOptions::default()).expect("open");
    let coll = filled(
        &engine,
        "c",
        (0..4000).map(|i| doc! { "_id": i, "k": i % 7, "d": 0.1 * f64::from(i), "i": i }),
    );
    let cfg = Parallelism {
        parts_max: 4,
        docs_min: 0,
    };
    let doubles = [doc! { "$group": { "_id": "$k", "s": { "$sum": "$d" } } }];
    assert!(!went_parallel(&coll, &doubles, cfg), "a double sum");
    assert_eq!(
        run(&coll, &doubles, cfg),
        run(&coll, &doubles, Parallelism::SERIAL)
    );
    let ints = [doc! { "$group": { "_id": "$k", "s": { "$sum": "$i" } } }];
    assert!(went_parallel(&coll, &ints, cfg), "an integer sum");
    // 4000 groups of a few hundred bytes pass a 100 KB bound: serial, which fails with 292.
    let ctx = {
        let mut c = ParseContext::new("t", Some("c"), bson::DateTime::from_millis(0));
        c.memory_max_bytes = 100_000;
        c
    };
    let many = [doc! { "$group": { "_id": "$_id", "f": { "$first": "$d" } } }];
    let p = Arc::new(Pipeline::parse(&many, &ctx).expect("parses"));
    let mut source = streamed(&coll, &p, cfg).expect("streams").expect("source");
    let e = source.next_batch(10, None).expect_err("past the bound");
    assert!(e.message.contains("exceeded memory limit"), "{e:?}");
}

#[test]
fn ranges_cover_the_record_ids_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine =
        storage::Engine::open(dir.path(), storage::EngineOptions::default()).expect("open");
    let mut rng = StdRng::seed_from_u64(1);
    let coll = collection(&mut rng, &engine, "c", 1000, false);
    let plan = Plan::CollScan {
        direction: Direction::Forward,
    };
    for parts_max in 2..=8 {
        let cfg = Parallelism {
            parts_max,
            docs_min: 0,
        };
        let split = split(&coll, &plan, cfg).expect("split").expect("parallel");
        let filter = Filter::parse(&Document::new()).expect("filter");
        let parts = run_parts(&split, &coll, &filter, Vec::new, |ids, d| {
            ids.push(d.get_i64("_id").expect("id"));
            Ok(Step::Go)
        })
        .expect("runs")
        .expect("complete");
        let all: Vec<i64> = parts.concat();
        let serial: Vec<i64> = coll
            .scan(Direction::Forward, None, usize::MAX)
            .expect("scan")
            .iter()
            .map(|(_, d)| d.get_i64("_id").expect("id"))
            .collect();
        assert_eq!(all, serial, "{parts_max} parts");
    }
}

#[test]
fn a_part_error_is_the_serial_scans_first_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine =
        storage::Engine::open(dir.path(), storage::EngineOptions::default()).expect("open");
    // A bad value late in the first half and one early in the second: the second part meets
    // its error first, but the serial scan's error names the first one.
    let coll = filled(
        &engine,
        "c",
        (0..2000).map(|i| {
            let s = match i {
                990 => "bad-first".to_string(),
                1001 => "bad-second".to_string(),
                _ => format!("2020-01-{:02}T00:00:00Z", i % 28 + 1),
            };
            doc! { "_id": i, "s": s }
        }),
    );
    let stages = [doc! { "$group": { "_id": { "$toDate": "$s" }, "n": { "$sum": 1 } } }];
    let ctx = ParseContext::new("t", Some("c"), bson::DateTime::from_millis(0));
    let p = Arc::new(Pipeline::parse(&stages, &ctx).expect("parses"));
    let error = |cfg| match streamed(&coll, &p, cfg) {
        Ok(Some(mut s)) => s.next_batch(10, None).expect_err("fails").message,
        Ok(None) => panic!("not streamed"),
        Err(e) => e.message,
    };
    let serial = error(Parallelism::SERIAL);
    assert!(serial.contains("bad-first"), "{serial}");
    let cfg = Parallelism {
        parts_max: 2,
        docs_min: 0,
    };
    assert_eq!(error(cfg), serial);
}

#[test]
fn an_interrupted_operation_stops_every_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine =
        storage::Engine::open(dir.path(), storage::EngineOptions::default()).expect("open");
    let mut rng = StdRng::seed_from_u64(3);
    let coll = collection(&mut rng, &engine, "c", 3000, false);
    let plan = Plan::CollScan {
        direction: Direction::Forward,
    };
    let cfg = Parallelism {
        parts_max: 3,
        docs_min: 0,
    };
    let op = crate::interrupt::Interrupt::default();
    let _installed = op.install();
    let split = split(&coll, &plan, cfg).expect("split").expect("parallel");
    let filter = Filter::parse(&Document::new()).expect("filter");
    let seen = AtomicUsize::new(0);
    // The first part to read its 100th document kills the operation; every part must stop.
    let r = run_parts(
        &split,
        &coll,
        &filter,
        || 0usize,
        |n, _| {
            *n += 1;
            if seen.fetch_add(1, Relaxed) == 100 {
                op.interrupt(crate::interrupt::Reason::Killed);
            }
            Ok(Step::Go)
        },
    );
    let e = r.expect_err("interrupted");
    assert_eq!(e.code, crate::error::ErrorCode::Interrupted);
    assert!(seen.load(Relaxed) < 1000, "parts stopped early");
}

#[test]
fn parts_never_pass_the_cores_or_the_bound() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let one_per_core = Parallelism::new(0, 10);
    assert_eq!(one_per_core.parts_max, cores.min(PARALLEL_SCAN_PARTS_MAX));
    assert_eq!(Parallelism::new(1, 10).parts_max, 1, "1: never parallel");
    assert!(Parallelism::new(1000, 10).parts_max <= cores.min(PARALLEL_SCAN_PARTS_MAX));
    assert_eq!(Parallelism::new(-3, -1).docs_min, 0);
    // On one core nothing is split, whatever the parameter says.
    if cores == 1 {
        assert_eq!(Parallelism::new(4, 0).parts_max, 1);
    }
}
