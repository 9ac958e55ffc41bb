//! `cairn-load`: YCSB's workloads A–F and durable single inserts against a MongoDB URI and,
//! optionally, PostgreSQL jsonb, at several connection counts, closed loop (each connection
//! sends its next operation when the last one is answered) or open loop (a fixed total rate,
//! each connection on its own schedule; latency counts from the scheduled start, so a stalled
//! server is not hidden by the generator waiting for it). The systems take turns cell by cell
//! (workload × connection count), and the order flips every round, so the machine's load weighs
//! on both alike; with `floor_dir`, the group-commit floor takes its turn beside every durable
//! insert cell. Latencies go to one HDR histogram per worker, merged per cell; CPU of the client
//! and of the server (its process, or PostgreSQL's process tree) is sampled at the window's ends.
//! The bin `cairn-load` is a command line over [`run`]; [`report`] writes JSON, Markdown, PNG.

pub mod cpu;
pub mod floor;
pub mod keys;
pub mod report;
pub mod target;
pub mod wire_client;
pub mod workload;

use crate::load::cpu::{Sample, Watch};
use crate::load::keys::{Chooser, Distribution, KeySpace, Rng, Zipfian};
use crate::load::target::{Conn, MongoClient, Outcome, System};
use crate::load::workload::{Op, Shape, Workload};
use hdrhistogram::Histogram;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Everything one run needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The MongoDB-compatible server (None: PostgreSQL only).
    pub uri: Option<String>,
    /// What the reports call the system behind `uri` (e.g. "cairn", "mongod").
    pub label: String,
    /// What speaks to the MongoDB URIs: the official driver or the bare wire client.
    pub mongo_client: MongoClient,
    pub pg: Option<String>,
    pub db: String,
    pub workloads: Vec<Workload>,
    pub connections: Vec<usize>,
    pub records: u64,
    pub shape: Shape,
    pub warmup: Duration,
    pub measure: Duration,
    /// Stop a cell once this many operations were measured (a smoke test's bound).
    pub ops: Option<u64>,
    pub rounds: usize,
    /// Open loop at this many operations per second in total (None: closed loop).
    pub rate: Option<f64>,
    /// Overrides every workload's own request distribution.
    pub distribution: Option<Distribution>,
    pub server_pid: Option<u32>,
    pub pg_pid: Option<u32>,
    /// Where the group-commit floor's probe file goes (the server's disk); None: no floor.
    pub floor_dir: Option<PathBuf>,
    pub seed: u64,
    /// A second MongoDB-compatible server taking its turn in every cell (e.g. another build).
    pub also: Option<Also>,
}

/// A second MongoDB-compatible server: where it is, its name in the reports, its pid.
#[derive(Clone, Debug)]
pub struct Also {
    pub uri: String,
    pub label: String,
    pub server_pid: Option<u32>,
}

/// Longest latency a histogram holds (longer ones are recorded as this), µs: one hour.
pub const LATENCY_US_MAX: u64 = 3_600_000_000;

/// A latency histogram in µs, 3 significant figures, 1 µs to [`LATENCY_US_MAX`]. (Fixed bounds:
/// an auto-resizing histogram starts tiny and `saturating_record` clamps instead of growing.)
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3)
        .unwrap_or_else(|_| unreachable!("1 <= 3.6e9 with 3 significant figures is valid"))
}

/// One cell's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measurement {
    pub system: String,
    pub workload: String,
    pub connections: usize,
    pub round: usize,
    pub ops: u64,
    pub errors: u64,
    /// Reads and scans that found nothing (records being inserted right then).
    pub missing: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub client_cores: Option<f64>,
    pub server_cores: Option<f64>,
    pub first_error: Option<String>,
    /// The floor's appends per sync and mean fdatasync µs (None for servers).
    pub writers_per_sync: Option<f64>,
    pub sync_us_mean: Option<f64>,
}

impl Measurement {
    fn new(system: &str, w: Workload, connections: usize, round: usize) -> Measurement {
        Measurement {
            system: system.to_string(),
            workload: w.name().to_string(),
            connections,
            round,
            ops: 0,
            errors: 0,
            missing: 0,
            seconds: 0.0,
            ops_per_s: 0.0,
            p50_us: 0.0,
            p90_us: 0.0,
            p99_us: 0.0,
            p999_us: 0.0,
            max_us: 0.0,
            client_cores: None,
            server_cores: None,
            first_error: None,
            writers_per_sync: None,
            sync_us_mean: None,
        }
    }

    fn set_latency(&mut self, h: &Histogram<u64>) {
        self.p50_us = h.value_at_quantile(0.5) as f64;
        self.p90_us = h.value_at_quantile(0.9) as f64;
        self.p99_us = h.value_at_quantile(0.99) as f64;
        self.p999_us = h.value_at_quantile(0.999) as f64;
        self.max_us = h.max() as f64;
    }
}

/// What the run found, with enough context to read it later.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    pub measurements: Vec<Measurement>,
    pub load_average_start: String,
    pub load_average_end: String,
    pub records: u64,
    pub shape: Shape,
    pub rounds: usize,
    pub warmup_s: f64,
    pub measure_s: f64,
    pub rate: Option<f64>,
    /// What spoke to the MongoDB URIs.
    pub mongo_client: MongoClient,
    pub postgres_settings: Vec<(String, String)>,
    pub server_cpu_watched: Vec<(String, Option<u32>)>,
}

/// A system under test: where it is, its record numbers, whose CPU is its own.
struct Subject {
    system: System,
    label: String,
    uri: String,
    keys: Arc<KeySpace>,
    watch: Option<Watch>,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn watch_for(system: System, uri: &str, pid: Option<u32>) -> Option<Watch> {
    let pid = pid.or_else(|| cpu::pid_listening(cpu::loopback_port(uri)?))?;
    Some(match system {
        System::Mongo => Watch::Process(pid),
        System::Postgres => Watch::Tree(pid),
    })
}

/// Load every system, then run every cell `rounds` times with the systems taking turns.
pub async fn run(cfg: &Config) -> Outcome<Run> {
    let load_average_start = load_average();
    let mut subjects = Vec::new();
    let mut postgres_settings = Vec::new();
    if let Some(uri) = &cfg.uri {
        eprintln!("loading {} records into {uri}", cfg.records);
        target::load_mongo(uri, &cfg.db, cfg.records, cfg.shape, cfg.seed).await?;
        subjects.push(Subject {
            system: System::Mongo,
            label: cfg.label.clone(),
            uri: uri.clone(),
            keys: KeySpace::new(cfg.records),
            watch: watch_for(System::Mongo, uri, cfg.server_pid),
        });
    }
    if let Some(also) = &cfg.also {
        eprintln!("loading {} records into {}", cfg.records, also.uri);
        target::load_mongo(&also.uri, &cfg.db, cfg.records, cfg.shape, cfg.seed).await?;
        subjects.push(Subject {
            system: System::Mongo,
            label: also.label.clone(),
            uri: also.uri.clone(),
            keys: KeySpace::new(cfg.records),
            watch: watch_for(System::Mongo, &also.uri, also.server_pid),
        });
    }
    if let Some(uri) = &cfg.pg {
        eprintln!("loading {} records into PostgreSQL", cfg.records);
        target::load_postgres(uri, cfg.records, cfg.shape, cfg.seed).await?;
        let client = crate::compare::sweep::postgres::connect(uri).await?;
        postgres_settings = crate::compare::sweep::postgres::settings(&client).await?;
        subjects.push(Subject {
            system: System::Postgres,
            label: System::Postgres.label().to_string(),
            uri: uri.clone(),
            keys: KeySpace::new(cfg.records),
            watch: watch_for(System::Postgres, uri, cfg.pg_pid),
        });
    }
    let server_cpu_watched = subjects
        .iter()
        .map(|s| {
            let pid = match s.watch {
                Some(Watch::Process(p) | Watch::Tree(p)) => Some(p),
                None => None,
            };
            (s.label.clone(), pid)
        })
        .collect();
    let latest = Arc::new(Zipfian::new(cfg.records));
    let mut measurements = Vec::new();
    let mut turn = 0usize;
    for round in 0..cfg.rounds {
        for &w in &cfg.workloads {
            for &c in &cfg.connections {
                let floor = w == Workload::Insert && cfg.floor_dir.is_some();
                let entries = subjects.len() + usize::from(floor);
                for k in 0..entries {
                    // Rotate who goes first from one cell to the next.
                    let i = (k + turn) % entries;
                    let m = match subjects.get(i) {
                        Some(s) => cell(cfg, s, &latest, w, c, round).await,
                        None => floor_cell(cfg, c, round).await,
                    };
                    eprintln!(
                        "round {round} {:<6} c={c:<3} {:<10} {:>9.0} ops/s p50 {:>7.0} us p99 {:>7.0} us server {:?} client {:?}{}{}",
                        w.name(),
                        m.system,
                        m.ops_per_s,
                        m.p50_us,
                        m.p99_us,
                        m.server_cores.map(|v| (v * 100.0).round() / 100.0),
                        m.client_cores.map(|v| (v * 100.0).round() / 100.0),
                        m.first_error
                            .as_ref()
                            .map(|e| format!(" errors {} ({e})", m.errors))
                            .unwrap_or_default(),
                        m.writers_per_sync
                            .zip(m.sync_us_mean)
                            .map(|(w, us)| format!(" writers/sync {w:.1} sync {us:.0} us"))
                            .unwrap_or_default()
                    );
                    measurements.push(m);
                }
                turn += 1;
            }
        }
    }
    Ok(Run {
        measurements,
        load_average_start,
        load_average_end: load_average(),
        records: cfg.records,
        shape: cfg.shape,
        rounds: cfg.rounds,
        warmup_s: cfg.warmup.as_secs_f64(),
        measure_s: cfg.measure.as_secs_f64(),
        rate: cfg.rate,
        mongo_client: cfg.mongo_client,
        postgres_settings,
        server_cpu_watched,
    })
}

async fn floor_cell(cfg: &Config, connections: usize, round: usize) -> Measurement {
    let mut m = Measurement::new("floor", Workload::Insert, connections, round);
    let Some(dir) = cfg.floor_dir.clone() else {
        return m;
    };
    let (warmup, measure, acks_max) = (cfg.warmup, cfg.measure, cfg.ops);
    let record_bytes = cfg.shape.document_bytes();
    let before = Sample::take(Some(cpu::own()));
    let r = tokio::task::spawn_blocking(move || {
        floor::run(&dir, connections, warmup, measure, acks_max, record_bytes)
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    m.client_cores = before.cores_until(&Sample::take(Some(cpu::own())));
    match r {
        Ok(r) => {
            m.ops = r.acks;
            m.seconds = r.seconds;
            m.ops_per_s = r.acks as f64 / r.seconds.max(1e-9);
            m.set_latency(&r.latency_us);
            m.writers_per_sync = Some(r.writers_per_sync);
            m.sync_us_mean = Some(r.sync_us_mean);
        }
        Err(e) => {
            m.errors = 1;
            m.first_error = Some(e);
        }
    }
    m
}

/// Connections for one cell (made before its clock starts).
async fn connect(cfg: &Config, s: &Subject, connections: usize) -> Outcome<Vec<Conn>> {
    match s.system {
        System::Mongo if cfg.mongo_client == MongoClient::Wire => {
            let mut out = Vec::with_capacity(connections);
            for _ in 0..connections {
                out.push(Conn::wire(&s.uri, &cfg.db).await?);
            }
            Ok(out)
        }
        System::Mongo => {
            let client = target::mongo_client(&s.uri, connections).await?;
            let conns: Vec<Conn> = (0..connections)
                .map(|_| Conn::mongo(&client, &cfg.db))
                .collect();
            // Fill the pool: every connection's handshake before the window.
            let pings = (0..connections).map(|_| {
                let db = client.database(&cfg.db);
                async move { db.run_command(bson::doc! {"ping": 1}).await }
            });
            for r in futures_util::future::join_all(pings).await {
                r.map_err(|e| e.to_string())?;
            }
            Ok(conns)
        }
        System::Postgres => {
            let mut out = Vec::with_capacity(connections);
            for _ in 0..connections {
                out.push(Conn::postgres(&s.uri).await?);
            }
            Ok(out)
        }
    }
}

/// One worker's tally.
struct Tally {
    hist: Histogram<u64>,
    ops: u64,
    errors: u64,
    missing: u64,
    first_error: Option<String>,
    last_done: Instant,
}

/// Shared by the workers of one cell.
struct Window {
    start: Instant,
    from: Instant,
    to: Instant,
    ops_max: Option<u64>,
    measured: AtomicU64,
    stop: AtomicBool,
    /// Open loop: time between one worker's operations.
    interval: Option<Duration>,
}

struct Worker {
    conn: Conn,
    rng: Rng,
    chooser: Chooser,
    workload: Workload,
    shape: Shape,
    keys: Arc<KeySpace>,
}

async fn work(mut w: Worker, win: Arc<Window>, index: usize, workers: usize) -> Tally {
    let mut t = Tally {
        hist: histogram(),
        ops: 0,
        errors: 0,
        missing: 0,
        first_error: None,
        last_done: win.from,
    };
    let mut next = win
        .interval
        .map(|iv| win.start + iv.mul_f64(index as f64 / workers as f64));
    loop {
        let mut began = Instant::now();
        if win.stop.load(Ordering::Relaxed) || began >= win.to {
            return t;
        }
        if let (Some(at), Some(iv)) = (next, win.interval) {
            tokio::time::sleep_until(at.into()).await;
            began = at;
            next = Some(at + iv);
        }
        let op = w.workload.choose(&mut w.rng);
        let key = match op {
            Op::Insert => w.keys.claim(),
            _ => w.chooser.next(&mut w.rng, &w.keys),
        };
        let r = w.conn.run(op, key, &w.shape, &mut w.rng).await;
        let done = Instant::now();
        if began < win.from {
            continue;
        }
        t.last_done = done;
        match r {
            Ok(found) => {
                t.ops += 1;
                t.missing += u64::from(!found);
                t.hist
                    .saturating_record(done.duration_since(began).as_micros().max(1) as u64);
            }
            Err(e) => {
                t.errors += 1;
                t.first_error.get_or_insert(e);
            }
        }
        if let Some(max) = win.ops_max
            && win.measured.fetch_add(1, Ordering::Relaxed) + 1 >= max
        {
            win.stop.store(true, Ordering::Relaxed);
        }
    }
}

async fn cell(
    cfg: &Config,
    s: &Subject,
    latest: &Zipfian,
    w: Workload,
    connections: usize,
    round: usize,
) -> Measurement {
    let mut m = Measurement::new(&s.label, w, connections, round);
    let conns = match connect(cfg, s, connections).await {
        Ok(c) => c,
        Err(e) => {
            m.errors = 1;
            m.first_error = Some(format!("connect: {e}"));
            return m;
        }
    };
    let start = Instant::now();
    let win = Arc::new(Window {
        start,
        from: start + cfg.warmup,
        to: start + cfg.warmup + cfg.measure,
        ops_max: cfg.ops,
        measured: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        interval: cfg
            .rate
            .map(|r| Duration::from_secs_f64(connections as f64 / r.max(1e-3))),
    });
    let distribution = cfg.distribution.unwrap_or(w.distribution());
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, conn)| {
            let seed = cfg.seed ^ ((round as u64) << 48) ^ ((i as u64) << 16) ^ connections as u64;
            let worker = Worker {
                conn,
                rng: Rng::new(seed),
                chooser: Chooser::new(distribution, latest),
                workload: w,
                shape: cfg.shape,
                keys: s.keys.clone(),
            };
            tokio::spawn(work(worker, win.clone(), i, connections))
        })
        .collect();
    tokio::time::sleep_until(win.from.into()).await;
    let (client0, server0) = (Sample::take(Some(cpu::own())), Sample::take(s.watch));
    if cfg.ops.is_none() {
        tokio::time::sleep_until(win.to.into()).await;
    }
    let mut end = (Sample::take(Some(cpu::own())), Sample::take(s.watch));
    let mut hist = histogram();
    let mut last_done = win.from;
    for task in tasks {
        match task.await {
            Ok(t) => {
                m.ops += t.ops;
                m.errors += t.errors;
                m.missing += t.missing;
                if m.first_error.is_none() {
                    m.first_error = t.first_error;
                }
                last_done = last_done.max(t.last_done);
                let _ = hist.add(&t.hist);
            }
            Err(e) => {
                m.errors += 1;
                m.first_error.get_or_insert(format!("worker: {e}"));
            }
        }
    }
    if cfg.ops.is_some() {
        end = (Sample::take(Some(cpu::own())), Sample::take(s.watch));
    }
    m.seconds = match cfg.ops {
        Some(_) => last_done.duration_since(win.from).as_secs_f64(),
        None => cfg.measure.as_secs_f64(),
    };
    m.ops_per_s = m.ops as f64 / m.seconds.max(1e-9);
    m.set_latency(&hist);
    m.client_cores = client0.cores_until(&end.0);
    m.server_cores = server0.cores_until(&end.1);
    m
}
