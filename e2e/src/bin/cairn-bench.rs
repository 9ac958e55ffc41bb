//! `cairn-bench`: the compare workloads against ONE server at growing record counts (default
//! 1k, 10k, 100k, 1M; `--quick` stops at 100k), written as DIR/bench.json (per-operation cost
//! versus N), DIR/bench.md and DIR/bench.png (cost relative to the smallest N, log-log).
//!
//! `cairn-bench sweep`: the storage benchmark through the server (fresh `cairn` per N, bulk
//! load, memory, disk, reads, checkpoints, reopen; optional PostgreSQL rows), written as
//! DIR/sweep.json, DIR/sweep.md and DIR/sweep.png. See docs/BENCHMARKS.md.

use anyhow::{Context, Result, bail};
use cairn_e2e::compare::limits::{
    SERVER_SELECTION_TIMEOUT, SWEEP_LOAD_IN_FLIGHT_DEFAULT, SWEEP_LOAD_IN_FLIGHT_MAX,
};
use cairn_e2e::compare::plot;
use cairn_e2e::compare::report::redact_uri;
use cairn_e2e::compare::sweep;
use cairn_e2e::compare::table::{self, Point, Value};
use cairn_e2e::compare::workloads::{self, Sizes};
use clap::{Args, Parser, Subcommand};
use mongodb::Client;
use mongodb::options::ClientOptions;
use serde::Serialize;
use std::path::PathBuf;

const COUNTS_FULL: &[u64] = &[1_000, 10_000, 100_000, 1_000_000];
const COUNTS_QUICK: &[u64] = &[1_000, 10_000, 100_000];
const SWEEP_COUNTS: &[u64] = &[10_000, 100_000, 1_000_000, 10_000_000];

#[derive(Parser)]
#[command(
    name = "cairn-bench",
    about = "Workload cost versus record count on one server",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    cost: CostArgs,
}

#[derive(Subcommand)]
enum Command {
    /// The storage sweep: a fresh cairn per record count, measured from outside.
    Sweep(SweepArgs),
    /// Serial against parallel collection scans on one cairn (`parallelScanThreads` 1 and 0,
    /// alternating), per document; DIR/parallel.json and DIR/parallel.md.
    Parallel(ParallelArgs),
    /// Two cairn builds side by side: count scan, `$project` 3 fields, top-k, each as a ratio
    /// to the count scan, with server and client CPU; DIR/ratio.json and DIR/ratio.md.
    Ratio(RatioArgs),
}

#[derive(Args)]
struct RatioArgs {
    /// The build measured first in the first run (e.g. main's `cairn`).
    #[arg(long)]
    before: String,
    /// The build compared with it.
    #[arg(long)]
    after: String,
    /// Directory for ratio.json and ratio.md.
    #[arg(long)]
    out: PathBuf,
    /// Documents in the collection.
    #[arg(long, default_value_t = 100_000)]
    docs: u64,
    /// Alternating runs (medians reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Operations per timed sample.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Time only these workloads (0 count, 1 `$project`, 2 `$project` raw, 3 top-k), e.g. to
    /// profile one; the ratio needs 0.
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<usize>,
}

#[derive(Args)]
struct ParallelArgs {
    /// Connection string of the cairn server to measure.
    #[arg(long)]
    server: String,
    /// Directory for parallel.json and parallel.md.
    #[arg(long)]
    out: PathBuf,
    /// Record counts, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![100_000u64, 1_000_000])]
    counts: Vec<u64>,
    /// Runs of each workload each way (median reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

#[derive(Args)]
struct CostArgs {
    /// Connection string of the server to measure.
    #[arg(long, required = true)]
    server: Option<String>,
    /// Directory for bench.json, bench.md and bench.png.
    #[arg(long, required = true)]
    out: Option<PathBuf>,
    /// Record counts, comma separated (default 1000,10000,100000,1000000; --quick: up to 100000).
    #[arg(long, value_delimiter = ',')]
    counts: Vec<u64>,
    /// Few repetitions and short runs.
    #[arg(long)]
    quick: bool,
    /// Repetitions per workload (median reported).
    #[arg(long)]
    runs: Option<usize>,
    /// Time only the workloads whose name contains one of these (comma separated), e.g.
    /// `--only "range count unindexed,\$project,top-k"`; the data load always runs.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Args)]
struct SweepArgs {
    /// The cairn binary to start (once per record count, plus its reopens).
    #[arg(long)]
    cairn_bin: PathBuf,
    /// Directory for the data directories (one per count, deleted afterwards unless --keep-data).
    #[arg(long)]
    work_dir: PathBuf,
    /// Directory for sweep.json, sweep.md and sweep.png.
    #[arg(long)]
    out: PathBuf,
    /// Record counts, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = SWEEP_COUNTS.to_vec())]
    counts: Vec<u64>,
    /// One argument passed to every cairn start (repeatable), e.g.
    /// --server-arg=--wiredTigerCacheSizeGB=1 or --server-arg --syncdelay --server-arg 10.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Whole sweeps; tables show per-cell medians.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Runs of each read workload within a sweep (median of run means).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// insertMany batches of 1,000 in flight during the bulk load.
    #[arg(long, default_value_t = SWEEP_LOAD_IN_FLIGHT_DEFAULT)]
    in_flight: usize,
    /// Shorter phases, for development.
    #[arg(long)]
    quick: bool,
    /// PostgreSQL connection string: also run the two write rows there (see e2e/bench/postgres.sh).
    #[arg(long)]
    pg: Option<String>,
    /// Keep each count's data directory.
    #[arg(long)]
    keep_data: bool,
}

#[derive(Serialize)]
struct Bench {
    server: String,
    runs: usize,
    points: Vec<Point>,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Sweep(args)) => run_sweep(args),
        Some(Command::Parallel(args)) => run_parallel(args),
        Some(Command::Ratio(args)) => run_ratio(args),
        None => run_cost(cli.cost),
    }
}

fn run_parallel(a: ParallelArgs) -> Result<()> {
    use cairn_e2e::compare::parallel_ab;
    if a.counts.is_empty() || a.counts.contains(&0) {
        bail!("record counts must be positive");
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let load_before = parallel_ab::load_average();
    let rows = tokio::runtime::Runtime::new()?.block_on(async {
        let mut options = ClientOptions::parse(&a.server).await?;
        options
            .server_selection_timeout
            .get_or_insert(SERVER_SELECTION_TIMEOUT);
        let client = Client::with_options(options)?;
        let mut rows = Vec::new();
        for &docs in &a.counts {
            let db = format!("bench_parallel_{}_{docs}", std::process::id());
            rows.extend(parallel_ab::run(&client, &db, docs, a.runs).await?);
        }
        anyhow::Ok(rows)
    })?;
    let load_after = parallel_ab::load_average();
    let md = parallel_ab::markdown(&rows, a.runs, &load_before, &load_after);
    std::fs::write(
        a.out.join("parallel.json"),
        serde_json::to_string_pretty(&rows)?,
    )?;
    std::fs::write(a.out.join("parallel.md"), &md)?;
    print!("{md}");
    Ok(())
}

fn run_ratio(a: RatioArgs) -> Result<()> {
    use cairn_e2e::compare::{parallel_ab, scan_ratio};
    if a.docs == 0 || a.runs == 0 {
        bail!("--docs and --runs must be positive");
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let servers = [
        cairn_e2e::Server::start(&a.before, &[]),
        cairn_e2e::Server::start(&a.after, &[]),
    ];
    let load_before = parallel_ab::load_average();
    let rows = tokio::runtime::Runtime::new()?.block_on(async {
        let mut sides = Vec::new();
        for (name, s) in ["before", "after"].iter().zip(&servers) {
            sides.push(scan_ratio::Side {
                name: name.to_string(),
                client: s.client().await,
                pid: s.pid(),
            });
        }
        scan_ratio::run(&sides, a.docs, a.runs, a.reps.max(1), &a.workloads).await
    })?;
    let load = format!(
        "load average before {load_before}, after {}",
        parallel_ab::load_average()
    );
    let md = scan_ratio::markdown(&rows, a.docs, a.runs, a.reps.max(1), &load);
    std::fs::write(
        a.out.join("ratio.json"),
        serde_json::to_string_pretty(&rows)?,
    )?;
    std::fs::write(a.out.join("ratio.md"), &md)?;
    print!("{md}");
    Ok(())
}

fn run_sweep(a: SweepArgs) -> Result<()> {
    if a.counts.is_empty() || a.counts.contains(&0) {
        bail!("record counts must be positive");
    }
    if !(1..=SWEEP_LOAD_IN_FLIGHT_MAX).contains(&a.in_flight) {
        bail!("--in-flight must be 1..={SWEEP_LOAD_IN_FLIGHT_MAX}");
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let cfg = sweep::Config {
        cairn_bin: a.cairn_bin,
        work_dir: a.work_dir,
        server_args: a.server_args,
        counts: a.counts,
        repeats: a.repeat.max(1),
        runs: a.runs.max(1),
        in_flight: a.in_flight,
        quick: a.quick,
        pg: a.pg,
        keep_data: a.keep_data,
    };
    let report = sweep::run(&cfg).map_err(anyhow::Error::msg)?;
    std::fs::write(
        a.out.join("sweep.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let md = sweep::report::markdown(&report);
    std::fs::write(a.out.join("sweep.md"), &md)?;
    print!("{md}");
    let png = sweep::report::plot(&report).map_err(anyhow::Error::msg)?;
    std::fs::write(a.out.join("sweep.png"), png)?;
    Ok(())
}

fn run_cost(cli: CostArgs) -> Result<()> {
    let (Some(server), Some(out)) = (cli.server, cli.out) else {
        bail!("--server and --out are required");
    };
    let counts: Vec<u64> = if cli.counts.is_empty() {
        (if cli.quick { COUNTS_QUICK } else { COUNTS_FULL }).to_vec()
    } else {
        cli.counts.clone()
    };
    if counts.contains(&0) {
        bail!("record counts must be positive");
    }
    let runs = cli.runs.unwrap_or(if cli.quick { 1 } else { 3 });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let mut bench = Bench {
        server: redact_uri(&server),
        runs,
        points: Vec::new(),
    };
    runtime.block_on(async {
        let mut options = ClientOptions::parse(&server).await?;
        options
            .server_selection_timeout
            .get_or_insert(SERVER_SELECTION_TIMEOUT);
        let client = Client::with_options(options)?;
        for &docs in &counts {
            eprintln!("cairn-bench: {docs} records");
            let db = format!("bench_{}_{docs}", std::process::id());
            let mut sizes = Sizes::new(docs, runs, cli.quick);
            sizes.label = format!("{docs} records");
            sizes.only = cli.only.clone();
            let measured = workloads::run_all(&client, &db, &sizes).await;
            let _ = client.database(&db).drop().await;
            let workloads = measured
                .into_iter()
                .map(|m| Value::new(m.name, m.unit, m.better, m.value))
                .collect();
            bench.points.push(Point { docs, workloads });
        }
        anyhow::Ok(())
    })?;
    std::fs::write(
        out.join("bench.json"),
        serde_json::to_string_pretty(&bench)?,
    )?;
    let md = markdown(&bench);
    std::fs::write(out.join("bench.md"), &md)?;
    print!("{md}");
    let png = plot::cost_lines(
        &table::series(&bench.points, |_| true),
        "cairn-bench: cost vs records",
    )
    .map_err(anyhow::Error::msg)?;
    std::fs::write(out.join("bench.png"), png)?;
    Ok(())
}

fn markdown(bench: &Bench) -> String {
    format!(
        "# cairn-bench\n\n- server: `{}`\n- median of {} runs\n\n{}",
        bench.server,
        bench.runs,
        table::by_count(&bench.points)
    )
}
