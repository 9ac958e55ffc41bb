//! `cairn-load`: YCSB workloads A-F and durable single inserts against a MongoDB URI and (with
//! `--pg`) PostgreSQL jsonb, at several connection counts, the systems taking turns; writes
//! DIR/load.json, DIR/load.md and DIR/load.png. See docs/BENCHMARKS.md ("cairn-load") and
//! e2e/bench/load.sh, which starts a release cairn and a throw-away PostgreSQL and runs this.

use anyhow::{Context, Result, bail};
use cairn_e2e::load::keys::Distribution;
use cairn_e2e::load::workload::{Shape, Workload};
use cairn_e2e::load::{self, Config, report};
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

// The client's CPU shares the machine with the server under test: the driver and tokio-postgres
// allocate per operation, and glibc's malloc took about a tenth of the client's CPU.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "cairn-load",
    about = "YCSB workloads and durable inserts against MongoDB-compatible servers and PostgreSQL"
)]
struct Cli {
    /// The MongoDB-compatible server's connection string.
    #[arg(
        long,
        default_value = "mongodb://127.0.0.1:27017/?directConnection=true"
    )]
    uri: String,
    /// Leave out the MongoDB side (PostgreSQL only).
    #[arg(long)]
    no_mongo: bool,
    /// What the reports call the server behind --uri.
    #[arg(long, default_value = "cairn")]
    label: String,
    /// What speaks to the MongoDB URIs: `driver` (the official Rust driver, as applications
    /// use it) or `wire` (the same commands over a bare connection, a client about as light as
    /// tokio-postgres, so client CPU weighs alike on both systems).
    #[arg(long, value_enum, default_value = "driver")]
    mongo_client: cairn_e2e::load::target::MongoClient,
    /// PostgreSQL connection string: run the same operations against jsonb there too.
    #[arg(long)]
    pg: Option<String>,
    /// Database of the `usertable` collection.
    #[arg(long, default_value = "cairn_load")]
    db: String,
    /// Workloads, comma separated: A,B,C,D,E,F,insert.
    #[arg(long, value_delimiter = ',', default_value = "A,B,C,D,E,F,insert")]
    workloads: Vec<Workload>,
    /// Connection counts, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    connections: Vec<usize>,
    /// Records loaded before the workloads run.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Fields per record.
    #[arg(long, default_value_t = 10)]
    fields: usize,
    /// Bytes per field.
    #[arg(long, default_value_t = 100)]
    field_bytes: usize,
    /// Longest scan of workload E.
    #[arg(long, default_value_t = 100)]
    scan_length_max: u64,
    /// Seconds measured per cell (workload x connections x system).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Unmeasured seconds before each cell's window.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// End each cell after this many measured operations instead (smoke runs).
    #[arg(long)]
    ops: Option<u64>,
    /// Times every cell runs (the report gives medians).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Open loop: this many operations per second in total, spread over the connections.
    #[arg(long)]
    rate: Option<f64>,
    /// Request distribution for every workload (uniform, zipfian, latest) instead of YCSB's.
    #[arg(long)]
    distribution: Option<Distribution>,
    /// Server pid for its CPU (default: whoever listens on the URI's loopback port).
    #[arg(long)]
    server_pid: Option<u32>,
    /// PostgreSQL postmaster pid (default: whoever listens on --pg's loopback port).
    #[arg(long)]
    pg_pid: Option<u32>,
    /// Directory on the servers' disk for the group-commit floor beside the insert cells.
    #[arg(long)]
    floor_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A second MongoDB-compatible server taking its turn in every cell (e.g. another build
    /// of cairn: before/after side by side).
    #[arg(long)]
    also_uri: Option<String>,
    /// What the reports call the server behind --also-uri.
    #[arg(long, default_value = "other")]
    also_label: String,
    /// Pid of the server behind --also-uri (default: whoever listens on its loopback port).
    #[arg(long)]
    also_server_pid: Option<u32>,
    /// Directory for load.json, load.md and load.png.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if cli.connections.is_empty() || cli.connections.contains(&0) {
        bail!("--connections needs counts above 0");
    }
    if cli.no_mongo && cli.pg.is_none() {
        bail!("--no-mongo leaves nothing to measure without --pg");
    }
    let cfg = Config {
        uri: (!cli.no_mongo).then_some(cli.uri),
        label: cli.label,
        mongo_client: cli.mongo_client,
        pg: cli.pg,
        db: cli.db,
        workloads: cli.workloads,
        connections: cli.connections,
        records: cli.records,
        shape: Shape {
            fields: cli.fields,
            field_bytes: cli.field_bytes,
            scan_length_max: cli.scan_length_max,
        },
        warmup: Duration::from_secs_f64(cli.warmup),
        measure: Duration::from_secs_f64(cli.seconds),
        ops: cli.ops,
        rounds: cli.rounds.max(1),
        rate: cli.rate,
        distribution: cli.distribution,
        server_pid: cli.server_pid,
        pg_pid: cli.pg_pid,
        floor_dir: cli.floor_dir,
        seed: cli.seed,
        also: cli.also_uri.map(|uri| load::Also {
            uri,
            label: cli.also_label,
            server_pid: cli.also_server_pid,
        }),
    };
    let rt = tokio::runtime::Runtime::new()?;
    let run = rt
        .block_on(load::run(&cfg))
        .map_err(anyhow::Error::msg)
        .context("cairn-load")?;
    std::fs::create_dir_all(&cli.out)?;
    let json = report::json(&run).map_err(anyhow::Error::msg)?;
    std::fs::write(cli.out.join("load.json"), json)?;
    let md = report::markdown(&run);
    std::fs::write(cli.out.join("load.md"), &md)?;
    let png = report::plot(&run).map_err(anyhow::Error::msg)?;
    std::fs::write(cli.out.join("load.png"), png)?;
    println!("{md}");
    Ok(())
}
