//! `cairn-bench sweep`: the storage benchmark through the server. For each record count a fresh
//! `cairn` (its own port and data directory, extra arguments passed through) gets two secondary
//! indexes and a bulk load, then is measured from outside: memory and disk, point reads and
//! range scans, durable single inserts with and without forced checkpoints, shutdown and the two
//! kinds of reopen (clean, SIGKILL after an acknowledged burst, which must lose nothing). The
//! machine's floors (fdatasync, loopback) are taken at each count, and with a PostgreSQL URI the
//! two write rows run there too. The whole sweep can be repeated; the report holds every
//! repeat and the per-cell medians.

pub mod docs;
pub mod floor;
pub mod measure;
pub mod postgres;
pub mod report;
pub mod server;

use crate::compare::limits::{
    self, FLOOR_SYNC_BLOCK_BYTES, FLOOR_SYNC_SMALL_BLOCK_BYTES, FLOOR_TURN_ROUNDS,
    SERVER_SELECTION_TIMEOUT, SWEEP_INSERT_PHASE_COUNT_MAX, SWEEP_OPERATION_TIMEOUT,
};
use crate::compare::stats::{median, percentile};
use crate::compare::table::{Point, Value};
use crate::compare::workloads::Better;
use bson::Document;
use measure::Key;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection};
use report::names as m;
use server::Swept;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// What to sweep and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub cairn_bin: PathBuf,
    /// Each count gets a fresh directory under this one.
    pub work_dir: PathBuf,
    /// Passed to every `cairn` start after `--port`, `--bind_ip` and `--dbpath`.
    pub server_args: Vec<String>,
    pub counts: Vec<u64>,
    /// Whole sweeps; the report's tables are per-cell medians over them.
    pub repeats: usize,
    /// Runs of each read workload within one sweep (median of the run means).
    pub runs: usize,
    /// insertMany batches in flight during the bulk load (PostgreSQL: connections).
    pub in_flight: usize,
    /// Shorter phases (development and the smoke test).
    pub quick: bool,
    /// PostgreSQL connection string for the two write rows.
    pub pg: Option<String>,
    /// Keep each count's data directory instead of deleting it afterwards.
    pub keep_data: bool,
}

/// The per-phase sizes that `--quick` shrinks.
struct Sizes {
    point_reads: usize,
    range_scans: usize,
    insert_phase: Duration,
    burst_docs: u64,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        use limits::*;
        let pick = |q, f| if quick { q } else { f };
        Sizes {
            point_reads: pick(SWEEP_POINT_READS_QUICK, SWEEP_POINT_READS_FULL),
            range_scans: pick(SWEEP_RANGE_SCANS_QUICK, SWEEP_RANGE_SCANS_FULL),
            insert_phase: if quick {
                SWEEP_INSERT_PHASE_QUICK
            } else {
                SWEEP_INSERT_PHASE_FULL
            },
            burst_docs: if quick {
                SWEEP_BURST_DOCS_QUICK
            } else {
                SWEEP_BURST_DOCS_FULL
            },
        }
    }
}

/// Values of one count, in the order they were measured.
#[derive(Default)]
struct Row(Vec<Value>);

impl Row {
    fn push(&mut self, name: &str, unit: &str, better: Better, value: Result<f64, String>) {
        self.0.push(Value::new(name, unit, better, value));
    }
    fn lower(&mut self, name: &str, unit: &str, value: Result<f64, String>) {
        self.push(name, unit, Better::Lower, value);
    }
    fn point(self, docs: u64) -> Point {
        Point {
            docs,
            workloads: self.0,
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn p50(v: &[f64]) -> Result<f64, String> {
    median(v).ok_or_else(|| "no samples".into())
}

fn p99(v: &[f64]) -> Result<f64, String> {
    percentile(v, 0.99).ok_or_else(|| "no samples".into())
}

/// A statistic of samples that may have failed to be taken.
fn stat(
    samples: &Result<Vec<f64>, String>,
    f: fn(&[f64]) -> Result<f64, String>,
) -> Result<f64, String> {
    samples.as_deref().map_err(Clone::clone).and_then(f)
}

/// One record count of one repeat: what every phase needs.
struct Count<'a> {
    cfg: &'a Config,
    rt: &'a Runtime,
    sizes: &'a Sizes,
    n: u64,
    dir: &'a Path,
}

/// Run the whole sweep `repeats` times; progress goes to stderr.
pub fn run(cfg: &Config) -> Result<report::SweepReport, String> {
    let rt = Runtime::new().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&cfg.work_dir)
        .map_err(|e| format!("{}: {e}", cfg.work_dir.display()))?;
    let mut pg_settings = Vec::new();
    if let Some(uri) = &cfg.pg {
        pg_settings =
            rt.block_on(async { postgres::settings(&postgres::connect(uri).await?).await })?;
    }
    let sizes = Sizes::new(cfg.quick);
    let mut raw = Vec::new();
    for repeat in 0..cfg.repeats.max(1) {
        let mut one = report::Repeat::default();
        for &n in &cfg.counts {
            eprintln!(
                "cairn-bench sweep: repeat {} of {}, {n} documents",
                repeat + 1,
                cfg.repeats
            );
            let dir = cfg.work_dir.join(format!("r{repeat}-n{n}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let c = Count {
                cfg,
                rt: &rt,
                sizes: &sizes,
                n,
                dir: &dir,
            };
            let mut floors = Row::default();
            let rtt = floor::loopback_us(limits::FLOOR_LOOPBACK_ROUNDS).map_err(|e| e.to_string());
            floors.lower(m::LOOPBACK_P50, "us", stat(&rtt, p50));
            floors.lower(m::LOOPBACK_P99, "us", stat(&rtt, p99));
            one.cairn.push(cairn_count(&c, &mut floors));
            if let Some(uri) = &cfg.pg {
                one.postgres.push(pg_count(&c, uri, &mut floors));
            }
            one.floors.push(floors.point(n));
            if !cfg.keep_data {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        raw.push(one);
    }
    Ok(report::SweepReport::new(cfg, pg_settings, raw))
}

/// A system's durable single inserts taking turns with the two fdatasync probes (4 KiB pages,
/// 512-byte records; `FLOOR_TURN_ROUNDS` of each) for the insert budget, from document
/// `*next_id` on: this disk's sync latency changes within seconds, so all must sample the same
/// moments. Records the floor rows under `names`; returns the inserts' microseconds.
async fn in_turns<F, Fut>(
    c: &Count<'_>,
    floors: &mut Row,
    names: [&str; 4],
    next_id: &mut u64,
    mut block: F,
) -> Result<Vec<f64>, String>
where
    F: FnMut(u64, usize) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<f64>, String>>,
{
    let io = |e: std::io::Error| e.to_string();
    let mut pages = floor::SyncProbe::new(c.dir, FLOOR_SYNC_BLOCK_BYTES).map_err(io)?;
    let mut records = floor::SyncProbe::new(c.dir, FLOOR_SYNC_SMALL_BLOCK_BYTES).map_err(io)?;
    let (mut inserts, mut page_us, mut record_us) = (Vec::new(), Vec::new(), Vec::new());
    let start = Instant::now();
    while start.elapsed() < c.sizes.insert_phase && inserts.len() < SWEEP_INSERT_PHASE_COUNT_MAX {
        page_us
            .extend(tokio::task::block_in_place(|| pages.rounds(FLOOR_TURN_ROUNDS)).map_err(io)?);
        let done = block(*next_id, FLOOR_TURN_ROUNDS).await?;
        *next_id += done.len() as u64;
        inserts.extend(done);
        record_us
            .extend(tokio::task::block_in_place(|| records.rounds(FLOOR_TURN_ROUNDS)).map_err(io)?);
    }
    let (page_us, record_us) = (Ok(page_us), Ok(record_us));
    floors.lower(names[0], "us", stat(&page_us, p50));
    floors.lower(names[1], "us", stat(&page_us, p99));
    floors.lower(names[2], "us", stat(&record_us, p50));
    floors.lower(names[3], "us", stat(&record_us, p99));
    Ok(inserts)
}

/// Every cairn phase at one count; a phase that fails ends the count with a `sweep error` row.
fn cairn_count(c: &Count, floors: &mut Row) -> Point {
    let start = Instant::now();
    let mut row = Row::default();
    if let Err(e) = cairn_phases(c, &mut row, floors) {
        eprintln!("  error: {e}");
        row.lower(m::SWEEP_ERROR, "", Err(e));
    }
    row.lower(m::WALL, "s", Ok(start.elapsed().as_secs_f64()));
    row.point(c.n)
}

async fn driver(uri: &str, pool: usize) -> Result<Client, String> {
    let mut options = ClientOptions::parse(uri).await.map_err(|e| e.to_string())?;
    options.server_selection_timeout = Some(SERVER_SELECTION_TIMEOUT);
    options.max_pool_size = Some(pool as u32 + 2);
    options.connect_timeout = Some(SWEEP_OPERATION_TIMEOUT);
    Client::with_options(options).map_err(|e| e.to_string())
}

fn collection(client: &Client) -> Collection<Document> {
    client.database(server::DB).collection(server::COLL)
}

fn cairn_phases(c: &Count, row: &mut Row, floors: &mut Row) -> Result<(), String> {
    let mut server = Swept::start(&c.cfg.cairn_bin, c.dir, &c.cfg.server_args)?;
    let mut next_id = c.n;
    c.rt.block_on(loaded_phases(c, &server, row))?;
    c.rt.block_on(async {
        let client = driver(&server.uri(), 1).await?;
        insert_rows(c, &server, &collection(&client), &mut next_id, row, floors).await
    })?;
    row.lower(m::SHUTDOWN, "ms", server.shutdown().map(ms));
    let disk = server::dir_bytes(&server.dbpath).map_err(|e| e.to_string());
    row.lower(m::DISK_CLEAN, "MiB", disk.map(|d| mib(d.allocated)));
    let probe = (c.n / 2) as i64;
    let open = server.reopen(probe)?;
    row.lower(m::OPEN_CLEAN_PING, "ms", Ok(ms(open.ping)));
    row.lower(m::OPEN_CLEAN_FIND, "ms", Ok(ms(open.find)));
    row.lower(m::RSS_OPEN, "MiB", server.rss_bytes().map(mib));
    eprintln!(
        "  clean reopen: {:.0} ms to ping, {:.0} ms to find",
        ms(open.ping),
        ms(open.find)
    );
    c.rt.block_on(async {
        let client = driver(&server.uri(), 1).await?;
        measure::burst(&collection(&client), next_id, c.sizes.burst_docs, c.n).await
    })?;
    next_id += c.sizes.burst_docs;
    server.kill();
    let open = server.reopen(probe)?;
    row.lower(m::OPEN_KILL_PING, "ms", Ok(ms(open.ping)));
    row.lower(m::OPEN_KILL_FIND, "ms", Ok(ms(open.find)));
    eprintln!(
        "  SIGKILL reopen: {:.0} ms to ping, {:.0} ms to find",
        ms(open.ping),
        ms(open.find)
    );
    let count = c.rt.block_on(async {
        let client = driver(&server.uri(), 1).await?;
        measure::count(&collection(&client)).await
    })?;
    row.lower(m::LOST, "docs", Ok(next_id.saturating_sub(count) as f64));
    let _ = server.shutdown();
    Ok(())
}

/// Indexes, load, gauges and reads on the first start of the server.
async fn loaded_phases(c: &Count<'_>, server: &Swept, row: &mut Row) -> Result<(), String> {
    let (n, runs) = (c.n, c.cfg.runs);
    let client = driver(&server.uri(), c.cfg.in_flight).await?;
    let coll = collection(&client);
    measure::create_indexes(&coll).await?;
    let load = measure::bulk_load(&coll, n, c.cfg.in_flight).await?;
    let rate = n as f64 / load.as_secs_f64().max(1e-9);
    eprintln!("  bulk load: {:.1} s, {rate:.0} docs/s", load.as_secs_f64());
    row.push(m::BULK, "docs/s", Better::Higher, Ok(rate));
    row.lower(m::RSS_LOAD, "MiB", server.rss_bytes().map(mib));
    let disk = server::dir_bytes(&server.dbpath).map_err(|e| e.to_string())?;
    row.lower(m::DISK_LOAD, "MiB", Ok(mib(disk.allocated)));
    row.lower(m::DISK_LOAD_APPARENT, "MiB", Ok(mib(disk.apparent)));
    for (key, mean, tail) in [
        (Key::Id, m::READ_ID, m::READ_ID_P99),
        (Key::Int, m::READ_K, m::READ_K_P99),
    ] {
        let reads = measure::point_reads(&coll, n, key, runs, c.sizes.point_reads).await?;
        row.lower(mean, "us/op", p50(&reads.means()));
        row.lower(tail, "us", p99(&reads.all()));
    }
    let scans = measure::range_scans(&coll, n, runs, c.sizes.range_scans).await?;
    row.lower(m::RANGE, "ms/op", p50(&scans.means()));
    row.lower(m::RSS_READS, "MiB", server.rss_bytes().map(mib));
    Ok(())
}

/// Durable single inserts in turns with the fdatasync floor, then beside back-to-back
/// `{fsync: 1}` when the server has it.
async fn insert_rows(
    c: &Count<'_>,
    server: &Swept,
    coll: &Collection<Document>,
    next_id: &mut u64,
    row: &mut Row,
    floors: &mut Row,
) -> Result<(), String> {
    let (n, budget) = (c.n, c.sizes.insert_phase);
    let names = [
        m::FDATASYNC_P50,
        m::FDATASYNC_P99,
        m::SMALL_SYNC_P50,
        m::SMALL_SYNC_P99,
    ];
    let outside_us = in_turns(c, floors, names, next_id, |first, count| {
        measure::insert_block(coll, n, first, count)
    })
    .await?;
    row.lower(m::INSERT_OUT_P50, "us", p50(&outside_us));
    row.lower(m::INSERT_OUT_P99, "us", p99(&outside_us));
    let checkpointer = driver(&server.uri(), 1).await?;
    let during = match measure::fsync_once(&checkpointer).await? {
        Some(missing) => Err(format!("not available: {missing}")),
        None => Ok(measure::insert_phase(coll, n, next_id, budget, Some(checkpointer)).await?),
    };
    if let Ok(measure::InsertPhase {
        checkpoint_error: Some(e),
        ..
    }) = &during
    {
        return Err(format!("fsync failed during the insert stream: {e}"));
    }
    let during_us = during
        .as_ref()
        .map(|p| p.latencies_us(true))
        .map_err(Clone::clone);
    let fsync_ms = during
        .as_ref()
        .map(|p| p.checkpoint_ms())
        .map_err(Clone::clone);
    let during_p99 = stat(&during_us, p99);
    row.lower(m::INSERT_IN_P50, "us", stat(&during_us, p50));
    row.lower(m::INSERT_IN_P99, "us", during_p99.clone());
    let ratio = during_p99.and_then(|d| p50(&outside_us).map(|o| d / o));
    row.lower(m::INSERT_RATIO, "x", ratio);
    let count = during_us
        .as_ref()
        .map(|v| v.len() as f64)
        .map_err(Clone::clone);
    row.push(m::INSERT_IN_COUNT, "ops", Better::Higher, count);
    row.lower(m::FSYNC, "ms", stat(&fsync_ms, p50));
    Ok(())
}

/// PostgreSQL's two write rows at one count.
fn pg_count(c: &Count, uri: &str, floors: &mut Row) -> Point {
    let mut row = Row::default();
    if let Err(e) = pg_phases(c, uri, &mut row, floors) {
        eprintln!("  PostgreSQL error: {e}");
        row.lower(m::SWEEP_ERROR, "", Err(e));
    }
    row.point(c.n)
}

fn pg_phases(c: &Count, uri: &str, row: &mut Row, floors: &mut Row) -> Result<(), String> {
    let n = c.n;
    let clients = c.rt.block_on(async {
        let mut clients = Vec::new();
        for _ in 0..c.cfg.in_flight.max(1) {
            clients.push(Arc::new(postgres::connect(uri).await?));
        }
        postgres::recreate(&clients[0]).await?;
        let load = postgres::bulk_load(&clients, n).await?;
        let rate = n as f64 / load.as_secs_f64().max(1e-9);
        eprintln!(
            "  PostgreSQL bulk load: {:.1} s, {rate:.0} docs/s",
            load.as_secs_f64()
        );
        row.push(m::PG_BULK, "docs/s", Better::Higher, Ok(rate));
        Ok::<_, String>(clients)
    })?;
    c.rt.block_on(async {
        let mut next_id = n;
        let one = &clients[0];
        let stmt = postgres::prepare_single(one).await?;
        let names = [
            m::PG_FDATASYNC_P50,
            m::PG_FDATASYNC_P99,
            m::PG_SMALL_SYNC_P50,
            m::PG_SMALL_SYNC_P99,
        ];
        let single = in_turns(c, floors, names, &mut next_id, |first, count| {
            postgres::single_block(one, &stmt, n, first, count)
        })
        .await?;
        row.lower(m::PG_INSERT_P50, "us", p50(&single));
        row.lower(m::PG_INSERT_P99, "us", p99(&single));
        postgres::drop_table(one).await
    })
}
