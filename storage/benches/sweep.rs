//! Record-count sweep and the issue-3 goal measurements, cairn side by side with redb, fjall
//! and sled, every commit synced. For each store size N (10 .. `$CAIRN_BENCH_MAX`, default
//! 1,000,000) and engine it measures the per-record cost of: durable single writes, bulk load
//! (1,000 per commit), random reads, reading N/3 consecutive records, a full scan summing a
//! field, durable single-field updates, and bytes on disk. Then, for cairn only: the latency of
//! a durable single put against this machine's raw fdatasync, the open time after SIGKILL of a
//! large store, and the resident memory of that store with two secondary indexes.
//!
//! The kill and memory measurements run in child processes: this binary re-invokes itself with
//! `CAIRN_BENCH_CHILD=fill|open`, so the parent's own allocations never count. Output: a table
//! on stdout, `target/bench/storage-sweep.json` and `target/bench/storage-sweep.svg`.
//! Run: `cargo bench -p cairn-storage --bench sweep`.

mod common;
#[path = "common/plot.rs"]
mod plot;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bson::spec::BinarySubtype;
use bson::{Binary, rawdoc};
use common::{
    BULK_BATCH_COUNT, ENGINES, Store, SyncFile, SyncKind, bump_field, disk_bytes, id_of, make_doc,
    median, open_store, percentile,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use storage::{Engine, EngineOptions, IndexSpec, WriteOp};

/// Bytes of the `v` field: documents are 293 bytes, the "300-byte documents" of the goals.
const VALUE_SIZE: usize = 256;
/// Store sizes of the sweep (those above `$CAIRN_BENCH_MAX` are skipped).
const SWEEP_COUNTS: [u64; 5] = [10, 1000, 10_000, 100_000, 1_000_000];
const SWEEP_MAX_DEFAULT: u64 = 1_000_000;
/// Durable single writes (and single updates) timed per store size; the median is kept.
const SINGLE_OPS_COUNT: usize = 50;
/// Random point reads per repetition.
const RANDOM_READS_COUNT: u64 = 20_000;
/// Repetitions of the cheap measurements (median kept); bulk loads repeat up to this size.
const REPS: usize = 3;
const BULK_REPS_UP_TO_COUNT: u64 = 10_000;
/// Rounds of "1 byte + fdatasync" and of durable single puts for the latency goal.
const SYNC_ROUNDS: usize = 300;
/// Block lengths the sync rounds take turns in (see `sync_figures`).
const SYNC_BLOCKS: [usize; 2] = [1, 30];
/// Size of the store killed and reopened, and measured for memory (`$CAIRN_BENCH_GOAL_BYTES`).
const GOAL_BYTES_DEFAULT: u64 = 1 << 30;
/// Reopens after SIGKILL timed (median kept).
const REOPEN_REPS: usize = 3;
/// A child waits at most this long to be killed.
const CHILD_LINGER_SECS: u64 = 900;

/// Per-record costs of one engine at one store size.
#[derive(Clone, Debug)]
pub struct Row {
    pub engine: &'static str,
    pub count: u64,
    pub write_single_ns: f64,
    pub write_bulk_ns: f64,
    pub random_read_ns: f64,
    pub read_third_ns: f64,
    pub scan_sum_ns: f64,
    pub update_ns: f64,
    pub disk_bytes: u64,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench_root() -> PathBuf {
    std::env::var_os("CAIRN_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    target.join("bench")
}

fn ns_per(d: Duration, n: u64) -> f64 {
    d.as_nanos() as f64 / n.max(1) as f64
}

fn load(store: &mut dyn Store, from: u64, to: u64) {
    let mut next = from;
    while next < to {
        let end = (next + BULK_BATCH_COUNT as u64).min(to);
        let items: Vec<_> = (next..end)
            .map(|k| (k, make_doc(k, 0, VALUE_SIZE)))
            .collect();
        store.put(&items);
        next = end;
    }
}

/// Median of `REPS` timings of `f`.
fn median_of(mut f: impl FnMut() -> Duration) -> Duration {
    median((0..REPS).map(|_| f()).collect())
}

fn measure(engine: &'static str, n: u64, rng: &mut StdRng) -> Row {
    let reps = if n <= BULK_REPS_UP_TO_COUNT { REPS } else { 1 };
    let mut bulk = Vec::new();
    let mut kept = None;
    for r in 0..reps {
        let dir = tempfile::tempdir_in(bench_root()).expect("tempdir");
        let mut store = open_store(engine, dir.path());
        let t = Instant::now();
        load(store.as_mut(), 0, n);
        bulk.push(t.elapsed());
        if r + 1 == reps {
            kept = Some((dir, store));
        }
    }
    let (dir, mut store) = kept.expect("at least one repetition");
    let singles: Vec<Duration> = (0..SINGLE_OPS_COUNT as u64)
        .map(|i| {
            let k = n + i;
            let item = [(k, make_doc(k, 0, VALUE_SIZE))];
            let t = Instant::now();
            store.put(&item);
            t.elapsed()
        })
        .collect();
    let total = n + SINGLE_OPS_COUNT as u64;
    let random = median_of(|| {
        let keys: Vec<u64> = (0..RANDOM_READS_COUNT)
            .map(|_| rng.random_range(0..total))
            .collect();
        let mut len = 0usize;
        let t = Instant::now();
        for k in keys {
            store.get(k, &mut |v| len += v.len());
        }
        std::hint::black_box(len);
        t.elapsed()
    });
    let third = (n / 3).max(1);
    let read_third = median_of(|| {
        let t = Instant::now();
        let mut len = 0usize;
        let got = store.scan(n / 3, third as usize, &mut |v| len += v.len());
        assert_eq!(got as u64, third, "{engine}: short scan");
        std::hint::black_box(len);
        t.elapsed()
    });
    let scan_sum = median_of(|| {
        let t = Instant::now();
        let mut sum = 0i64;
        let got = store.scan(0, total as usize, &mut |v| sum += id_of(v));
        assert_eq!(got as u64, total, "{engine}: short full scan");
        std::hint::black_box(sum);
        t.elapsed()
    });
    let updates: Vec<Duration> = (0..SINGLE_OPS_COUNT)
        .map(|_| {
            let k = rng.random_range(0..total);
            let t = Instant::now();
            let mut doc = None;
            store.get(k, &mut |v| {
                doc = Some(bump_field(bson::RawDocument::from_bytes(v).expect("bson")))
            });
            store.update(&[(k, doc.expect("read"))]);
            t.elapsed()
        })
        .collect();
    drop(store);
    let disk = disk_bytes(dir.path());
    Row {
        engine,
        count: n,
        write_single_ns: median(singles).as_nanos() as f64,
        write_bulk_ns: ns_per(median(bulk), n),
        random_read_ns: ns_per(random, RANDOM_READS_COUNT),
        read_third_ns: ns_per(read_third, third),
        scan_sum_ns: ns_per(scan_sum, total),
        update_ns: median(updates).as_nanos() as f64,
        disk_bytes: disk,
    }
}

fn print_row(r: &Row) {
    println!(
        "{:>9} {:>6} {:>12.0} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>12.0} {:>10.1}",
        r.count,
        r.engine,
        r.write_single_ns,
        r.write_bulk_ns,
        r.random_read_ns,
        r.read_third_ns,
        r.scan_sum_ns,
        r.update_ns,
        r.disk_bytes as f64 / (r.count + SINGLE_OPS_COUNT as u64) as f64
    );
}

/// Durable single-put latency of every engine and the raw fdatasync floor, as
/// `(what, median ns, p90 ns)`.
#[derive(Debug)]
struct SyncFigures {
    rows: Vec<(&'static str, f64, f64)>,
}

impl SyncFigures {
    fn median_ns(&self, what: &str) -> f64 {
        self.rows.iter().find(|r| r.0 == what).map_or(0.0, |r| r.1)
    }
}

/// Every measured thing (both fdatasync kinds, one put per engine) takes turns in blocks of
/// `block` rounds, so all see the same disk conditions on this shared machine. With `block` 1
/// each size-changing sync (appending file, stores that grow their files) lands right before the
/// others and drags them into its filesystem-journal commit; with longer blocks each thing runs
/// mostly alone, as a real single writer would.
fn sync_figures(block: usize) -> SyncFigures {
    let dir = tempfile::tempdir_in(bench_root()).expect("tempdir");
    let mut pre = SyncFile::new(dir.path(), SyncKind::Preallocated, SYNC_ROUNDS);
    let mut app = SyncFile::new(dir.path(), SyncKind::Appending, SYNC_ROUNDS);
    let dirs: Vec<_> = ENGINES
        .iter()
        .map(|_| tempfile::tempdir_in(bench_root()).expect("tempdir"))
        .collect();
    let mut stores: Vec<_> = ENGINES
        .iter()
        .zip(&dirs)
        .map(|(e, d)| open_store(e, d.path()))
        .collect();
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); 2 + ENGINES.len()];
    let mut next = 0u64;
    while lat[0].len() < SYNC_ROUNDS {
        let block = block.min(SYNC_ROUNDS - lat[0].len());
        lat[0].extend((0..block).map(|_| pre.round()));
        lat[1].extend((0..block).map(|_| app.round()));
        for (i, store) in stores.iter_mut().enumerate() {
            for k in next..next + block as u64 {
                let item = [(k, make_doc(k, 0, VALUE_SIZE))];
                let t = Instant::now();
                store.put(&item);
                lat[2 + i].push(t.elapsed());
            }
        }
        next += block as u64;
    }
    let names = ["fdatasync_preallocated", "fdatasync_appending"];
    let rows = names
        .iter()
        .chain(ENGINES.iter())
        .zip(lat)
        .map(|(name, l)| {
            let p90 = percentile(l.clone(), 90).as_nanos() as f64;
            (*name, median(l).as_nanos() as f64, p90)
        })
        .collect();
    SyncFigures { rows }
}

/// What the fill and reopen children reported.
#[derive(Debug, Default)]
struct GoalFigures {
    target_bytes: u64,
    docs: u64,
    doc_bytes: u64,
    disk_bytes: u64,
    fill_secs: f64,
    rss_after_load_kb: u64,
    reopen_secs: Vec<f64>,
    rss_after_reopen_kb: u64,
}

/// Reads `key=value` pairs from a child's lines until `READY` (or end of output).
fn child_report(cmd: &mut Command) -> (std::process::Child, Vec<(String, String)>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn bench child");
    let out = child.stdout.take().expect("child stdout");
    let mut pairs = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.expect("child line");
        if line == "READY" {
            break;
        }
        for word in line.split_whitespace() {
            if let Some((k, v)) = word.split_once('=') {
                pairs.push((k.to_string(), v.to_string()));
            }
        }
    }
    (child, pairs)
}

fn field(pairs: &[(String, String)], key: &str) -> f64 {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("child did not report {key}: {pairs:?}"))
}

fn goal_figures(target_bytes: u64) -> GoalFigures {
    let dir = tempfile::tempdir_in(bench_root()).expect("tempdir");
    let exe = std::env::current_exe().expect("own path");
    let child_cmd = |mode: &str| {
        let mut c = Command::new(&exe);
        c.env("CAIRN_BENCH_CHILD", mode)
            .env("CAIRN_BENCH_CHILD_DIR", dir.path())
            .env("CAIRN_BENCH_GOAL_BYTES", target_bytes.to_string());
        c
    };
    let (mut child, fill) = child_report(&mut child_cmd("fill"));
    child.kill().expect("SIGKILL the filler");
    let _ = child.wait();
    let mut g = GoalFigures {
        target_bytes,
        docs: field(&fill, "docs") as u64,
        doc_bytes: field(&fill, "doc_bytes") as u64,
        fill_secs: field(&fill, "secs"),
        rss_after_load_kb: field(&fill, "rss_kb") as u64,
        disk_bytes: disk_bytes(dir.path()),
        ..GoalFigures::default()
    };
    for _ in 0..REOPEN_REPS {
        let (mut child, open) = child_report(&mut child_cmd("open"));
        child.kill().expect("SIGKILL the reopener");
        let _ = child.wait();
        assert_eq!(field(&open, "count") as u64, g.docs, "documents lost");
        g.reopen_secs.push(field(&open, "secs"));
        g.rss_after_reopen_kb = field(&open, "rss_kb") as u64;
    }
    g
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A goal document: two indexed fields (`a` int, `b` string) and padding, 300 bytes.
fn goal_doc(i: u64) -> bson::RawDocumentBuf {
    let v = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![(i % 251) as u8; 232],
    };
    let a = ((i * 7919) % 1_000_003) as i64;
    let b = format!("user{:010}", (i * 104_729) % 10_000_019);
    rawdoc! { "_id": i as i64, "a": a, "b": b, "v": v }
}

fn child_fill(dir: &Path, target_bytes: u64) {
    let engine = Engine::open(dir, EngineOptions::default()).expect("open");
    let coll = engine
        .create_collection("bench", "goal", bson::Document::new())
        .expect("create");
    for (name, key) in [("a_1", bson::doc! {"a": 1}), ("b_1", bson::doc! {"b": 1})] {
        let spec = IndexSpec {
            name: name.into(),
            key,
            ..Default::default()
        };
        engine
            .create_index("bench", "goal", spec, &|_, _| {})
            .expect("index");
    }
    let t = Instant::now();
    let (mut docs, mut bytes) = (0u64, 0u64);
    while bytes < target_bytes {
        let batch: Vec<WriteOp> = (docs..docs + BULK_BATCH_COUNT as u64)
            .map(|i| WriteOp::Insert(goal_doc(i).into()))
            .collect();
        bytes += batch
            .iter()
            .map(|op| match op {
                WriteOp::Insert(d) => d.as_bytes().len() as u64,
                _ => 0,
            })
            .sum::<u64>();
        docs += batch.len() as u64;
        coll.write(batch)
            .expect("write")
            .wait_durable_blocking()
            .expect("durable");
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "docs={docs} doc_bytes={bytes} secs={secs:.3} rss_kb={}",
        rss_kb()
    );
    linger(engine);
}

fn child_open(dir: &Path) {
    let t = Instant::now();
    let engine = Engine::open(dir, EngineOptions::default()).expect("reopen");
    let secs = t.elapsed().as_secs_f64();
    let count = engine.collection("bench", "goal").map_or(0, |c| c.count());
    println!("secs={secs:.4} count={count} rss_kb={}", rss_kb());
    linger(engine);
}

/// Tells the parent we are ready, then waits to be killed (never closing the engine).
fn linger(engine: Engine) {
    println!("READY");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_secs(CHILD_LINGER_SECS));
    drop(engine);
}

fn run_child(mode: &str) {
    let dir = PathBuf::from(std::env::var_os("CAIRN_BENCH_CHILD_DIR").expect("child dir"));
    match mode {
        "fill" => child_fill(&dir, env_u64("CAIRN_BENCH_GOAL_BYTES", GOAL_BYTES_DEFAULT)),
        "open" => child_open(&dir),
        other => panic!("unknown child mode {other}"),
    }
}

fn main() {
    if let Ok(mode) = std::env::var("CAIRN_BENCH_CHILD") {
        run_child(&mode);
        return;
    }
    let started = Instant::now();
    let max = env_u64("CAIRN_BENCH_MAX", SWEEP_MAX_DEFAULT);
    let goal_bytes = env_u64("CAIRN_BENCH_GOAL_BYTES", GOAL_BYTES_DEFAULT);
    println!("storage sweep: stores under {}", bench_root().display());
    let syncs: Vec<(usize, SyncFigures)> =
        SYNC_BLOCKS.iter().map(|b| (*b, sync_figures(*b))).collect();
    for (block, sync) in &syncs {
        let floor = sync.median_ns("fdatasync_preallocated");
        for (what, med, p90) in &sync.rows {
            let ratio = med / floor;
            println!(
                "durable 1-write, blocks of {block:>2}, {what:>22}: median {med:>9.0} ns  p90 {p90:>9.0} ns  = {ratio:.2}x preallocated fdatasync"
            );
        }
    }
    println!(
        "{:>9} {:>6} {:>12} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}",
        "N",
        "engine",
        "single ns",
        "bulk ns",
        "rand rd ns",
        "N/3 rd ns",
        "scan ns",
        "update ns",
        "disk B/rec"
    );
    let mut rng = StdRng::seed_from_u64(42);
    let mut rows = Vec::new();
    for n in SWEEP_COUNTS.into_iter().filter(|n| *n <= max) {
        for engine in ENGINES {
            let row = measure(engine, n, &mut rng);
            print_row(&row);
            rows.push(row);
        }
    }
    let goals = if goal_bytes > 0 {
        let g = goal_figures(goal_bytes);
        println!("goal store: {g:?}");
        Some(g)
    } else {
        None
    };
    let out = out_dir();
    std::fs::create_dir_all(&out).expect("output dir");
    let json = to_json(&syncs, &rows, goals.as_ref(), started.elapsed());
    std::fs::write(out.join("storage-sweep.json"), json).expect("write json");
    std::fs::write(out.join("storage-sweep.svg"), plot::svg(&panels(&rows))).expect("write svg");
    println!(
        "wrote {}/storage-sweep.{{json,svg}} in {:.0} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
}

fn to_json(
    syncs: &[(usize, SyncFigures)],
    rows: &[Row],
    g: Option<&GoalFigures>,
    took: Duration,
) -> String {
    let puts: Vec<String> = syncs
        .iter()
        .map(|(block, s)| {
            let r: Vec<String> = s
                .rows
                .iter()
                .map(|(e, med, p90)| {
                    format!("\"{e}\": {{\"median_ns\": {med:.0}, \"p90_ns\": {p90:.0}}}")
                })
                .collect();
            format!("\"blocks_of_{block}\": {{{}}}", r.join(", "))
        })
        .collect();
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "    {{\"engine\": \"{}\", \"count\": {}, \"write_single_ns\": {:.0}, \
                 \"write_bulk_ns_per_record\": {:.1}, \"random_read_ns\": {:.1}, \
                 \"read_third_ns_per_record\": {:.1}, \"scan_sum_ns_per_record\": {:.1}, \
                 \"update_ns\": {:.0}, \"disk_bytes\": {}}}",
                r.engine,
                r.count,
                r.write_single_ns,
                r.write_bulk_ns,
                r.random_read_ns,
                r.read_third_ns,
                r.scan_sum_ns,
                r.update_ns,
                r.disk_bytes
            )
        })
        .collect();
    let goal = g.map_or("null".to_string(), |g| {
        let reopen: Vec<String> = g.reopen_secs.iter().map(|s| format!("{s:.4}")).collect();
        format!(
            "{{\"target_bytes\": {}, \"docs\": {}, \"doc_bytes\": {}, \"disk_bytes\": {}, \
             \"fill_secs\": {:.2}, \"rss_after_load_kb\": {}, \"reopen_after_sigkill_secs\": [{}], \
             \"rss_after_reopen_kb\": {}}}",
            g.target_bytes,
            g.docs,
            g.doc_bytes,
            g.disk_bytes,
            g.fill_secs,
            g.rss_after_load_kb,
            reopen.join(", "),
            g.rss_after_reopen_kb
        )
    });
    format!(
        "{{\n  \"value_bytes\": {VALUE_SIZE},\n  \"durable_single_write\": {{{}}},\n  \
         \"sweep\": [\n{}\n  ],\n  \"goal_store\": {},\n  \"elapsed_secs\": {:.0}\n}}\n",
        puts.join(", "),
        rows.join(",\n"),
        goal,
        took.as_secs_f64()
    )
}

/// A plotted metric: title, unit, and how to read it from a row.
type Metric = (&'static str, plot::Unit, fn(&Row) -> f64);

/// The plotted metrics: one panel each, one line per engine.
fn panels(rows: &[Row]) -> Vec<plot::Panel> {
    let metrics: [Metric; 7] = [
        ("durable single write (per op)", plot::Unit::Nanos, |r| {
            r.write_single_ns
        }),
        (
            "bulk write, 1,000 per commit (per record)",
            plot::Unit::Nanos,
            |r| r.write_bulk_ns,
        ),
        ("random read (per op)", plot::Unit::Nanos, |r| {
            r.random_read_ns
        }),
        (
            "read N/3 consecutive (per record)",
            plot::Unit::Nanos,
            |r| r.read_third_ns,
        ),
        (
            "full scan, sum a field (per record)",
            plot::Unit::Nanos,
            |r| r.scan_sum_ns,
        ),
        (
            "durable update of one field (per op)",
            plot::Unit::Nanos,
            |r| r.update_ns,
        ),
        ("bytes on disk per record", plot::Unit::Bytes, |r| {
            r.disk_bytes as f64 / (r.count + SINGLE_OPS_COUNT as u64) as f64
        }),
    ];
    metrics
        .iter()
        .map(|(title, unit, f)| plot::Panel {
            title: (*title).to_string(),
            unit: *unit,
            series: ENGINES
                .iter()
                .map(|e| {
                    let pts = rows
                        .iter()
                        .filter(|r| r.engine == *e)
                        .map(|r| (r.count as f64, f(r)))
                        .collect();
                    (*e, pts)
                })
                .collect(),
        })
        .collect()
}
