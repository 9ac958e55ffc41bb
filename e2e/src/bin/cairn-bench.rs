//! `cairn-bench`: the compare workloads against ONE server at growing record counts (default
//! 1k, 10k, 100k, 1M; `--quick` stops at 100k), written as DIR/bench.json (per-operation cost
//! versus N), DIR/bench.md and DIR/bench.png (cost relative to the smallest N, log-log).

use anyhow::{Context, Result, bail};
use cairn_e2e::compare::limits::SERVER_SELECTION_TIMEOUT;
use cairn_e2e::compare::plot::{self, Series};
use cairn_e2e::compare::report::{format_value, redact_uri};
use cairn_e2e::compare::workloads::{self, Better, Sizes};
use clap::Parser;
use mongodb::Client;
use mongodb::options::ClientOptions;
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;

const COUNTS_FULL: &[u64] = &[1_000, 10_000, 100_000, 1_000_000];
const COUNTS_QUICK: &[u64] = &[1_000, 10_000, 100_000];

#[derive(Parser)]
#[command(
    name = "cairn-bench",
    about = "Workload cost versus record count on one server"
)]
struct Cli {
    /// Connection string of the server to measure.
    #[arg(long)]
    server: String,
    /// Directory for bench.json, bench.md and bench.png.
    #[arg(long)]
    out: PathBuf,
    /// Record counts, comma separated (default 1000,10000,100000,1000000; --quick: up to 100000).
    #[arg(long, value_delimiter = ',')]
    counts: Vec<u64>,
    /// Few repetitions and short runs.
    #[arg(long)]
    quick: bool,
    /// Repetitions per workload (median reported).
    #[arg(long)]
    runs: Option<usize>,
}

#[derive(Serialize)]
struct Value {
    name: String,
    unit: String,
    better: Better,
    value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct Point {
    docs: u64,
    workloads: Vec<Value>,
}

#[derive(Serialize)]
struct Bench {
    server: String,
    runs: usize,
    points: Vec<Point>,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let counts: Vec<u64> = if cli.counts.is_empty() {
        (if cli.quick { COUNTS_QUICK } else { COUNTS_FULL }).to_vec()
    } else {
        cli.counts.clone()
    };
    if counts.contains(&0) {
        bail!("record counts must be positive");
    }
    let runs = cli.runs.unwrap_or(if cli.quick { 1 } else { 3 });
    std::fs::create_dir_all(&cli.out).with_context(|| format!("creating {}", cli.out.display()))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let mut bench = Bench {
        server: redact_uri(&cli.server),
        runs,
        points: Vec::new(),
    };
    runtime.block_on(async {
        let mut options = ClientOptions::parse(&cli.server).await?;
        options
            .server_selection_timeout
            .get_or_insert(SERVER_SELECTION_TIMEOUT);
        let client = Client::with_options(options)?;
        for &docs in &counts {
            eprintln!("cairn-bench: {docs} records");
            let db = format!("bench_{}_{docs}", std::process::id());
            let mut sizes = Sizes::new(docs, runs, cli.quick);
            sizes.label = format!("{docs} records");
            let measured = workloads::run_all(&client, &db, &sizes).await;
            let _ = client.database(&db).drop().await;
            let workloads = measured
                .into_iter()
                .map(|m| Value {
                    name: m.name.to_string(),
                    unit: m.unit.to_string(),
                    better: m.better,
                    value: m.value.as_ref().ok().copied(),
                    error: m.value.err(),
                })
                .collect();
            bench.points.push(Point { docs, workloads });
        }
        anyhow::Ok(())
    })?;
    std::fs::write(
        cli.out.join("bench.json"),
        serde_json::to_string_pretty(&bench)?,
    )?;
    let md = markdown(&bench);
    std::fs::write(cli.out.join("bench.md"), &md)?;
    print!("{md}");
    let png = plot::cost_lines(&series(&bench), "cairn-bench: cost vs records")
        .map_err(anyhow::Error::msg)?;
    std::fs::write(cli.out.join("bench.png"), png)?;
    Ok(())
}

/// One line per workload that produced a value at two or more counts.
fn series(bench: &Bench) -> Vec<Series> {
    let Some(first) = bench.points.first() else {
        return Vec::new();
    };
    first
        .workloads
        .iter()
        .map(|w| Series {
            name: format!("{} ({})", w.name, w.unit),
            points: bench
                .points
                .iter()
                .filter_map(|p| {
                    let v = p.workloads.iter().find(|x| x.name == w.name)?.value?;
                    Some((p.docs as f64, v))
                })
                .collect(),
        })
        .filter(|s| s.points.len() >= 2)
        .collect()
}

fn markdown(bench: &Bench) -> String {
    let mut s = format!(
        "# cairn-bench\n\n- server: `{}`\n- median of {} runs\n\n| workload | unit |",
        bench.server, bench.runs
    );
    for p in &bench.points {
        let _ = write!(s, " {} |", p.docs);
    }
    s.push_str("\n| --- | --- |");
    s.push_str(&" ---: |".repeat(bench.points.len()));
    s.push('\n');
    let Some(first) = bench.points.first() else {
        return s;
    };
    for w in &first.workloads {
        let _ = write!(s, "| {} | {} |", w.name, w.unit);
        for p in &bench.points {
            let cell = match p.workloads.iter().find(|x| x.name == w.name) {
                Some(Value { value: Some(v), .. }) => format_value(*v),
                Some(Value { error: Some(e), .. }) => format!("error: {e}"),
                _ => "n/a".into(),
            };
            let _ = write!(s, " {cell} |");
        }
        s.push('\n');
    }
    s
}
