//! `cairn-compare`: the same differential cases and timed workloads against two MongoDB-protocol
//! servers (cairn and mongod, or any two), written to DIR/compare.{json,md,png}; exit status 1
//! when any case differs. `cairn-compare gate` checks a run against a saved baseline.
//! See docs/COMPARE.md.

use anyhow::{Context, Result, bail};
use cairn_e2e::compare::limits::SERVER_SELECTION_TIMEOUT;
use cairn_e2e::compare::report::{self, GateResult, Report};
use cairn_e2e::compare::side::Side;
use cairn_e2e::compare::workloads::{self, Better, Measurement, Sizes};
use cairn_e2e::compare::{correctness, plot};
use clap::{Args, Parser, Subcommand};
use mongodb::Client;
use mongodb::options::ClientOptions;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Default dataset sizes: full and `--quick`.
const DOCS_FULL: u64 = 50_000;
const DOCS_QUICK: u64 = 2_000;
const RUNS_FULL: usize = 5;
const RUNS_QUICK: usize = 3;

#[derive(Parser)]
#[command(
    name = "cairn-compare",
    about = "Compare two MongoDB-protocol servers: answers and speed"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Fail (exit 1) when a ratio of RUN regressed past THRESHOLD against BASELINE.
    Gate {
        #[arg(long)]
        baseline: PathBuf,
        #[arg(long)]
        run: PathBuf,
        /// A workload name from compare.json, or `correctness` (mismatch count).
        #[arg(long)]
        ratio: String,
        /// Allowed worsening factor (1.2 = 20% worse passes); for `correctness`, extra mismatches.
        #[arg(long)]
        threshold: f64,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Connection string of the server under test (or --target-bin).
    #[arg(long)]
    target: Option<String>,
    /// Connection string of the reference server (e.g. a mongod).
    #[arg(long)]
    reference: Option<String>,
    /// Directory for compare.json, compare.md and compare.png.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Small dataset and few repetitions: finishes in under a minute.
    #[arg(long)]
    quick: bool,
    /// Records in the generated dataset.
    #[arg(long)]
    docs: Option<u64>,
    /// Repetitions per workload; the median is reported.
    #[arg(long)]
    runs: Option<usize>,
    /// Start the target with this command line (it must listen where --target points); enables
    /// the restart-after-SIGKILL measurement.
    #[arg(long)]
    target_cmd: Option<String>,
    /// Same for the reference server.
    #[arg(long)]
    reference_cmd: Option<String>,
    /// Start this cairn binary as the target on a free port with a fresh data directory
    /// (instead of --target); enables the restart measurement.
    #[arg(long)]
    target_bin: Option<String>,
    /// Same for the reference server.
    #[arg(long)]
    reference_bin: Option<String>,
    /// Run only the correctness cases whose name contains this (e.g. `filter/$in`).
    #[arg(long)]
    case: Option<String>,
    /// Run only the correctness cases.
    #[arg(long)]
    skip_workloads: bool,
    /// Run only the workloads.
    #[arg(long)]
    skip_correctness: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Gate {
            baseline,
            run,
            ratio,
            threshold,
        }) => gate(&baseline, &run, &ratio, threshold),
        None => run_compare(cli.run),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cairn-compare: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn gate(baseline: &Path, run: &Path, name: &str, threshold: f64) -> Result<ExitCode> {
    let read = |p: &Path| -> Result<Report> {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
    };
    match report::gate(&read(baseline)?, &read(run)?, name, threshold) {
        GateResult::Pass { baseline, run } => {
            println!(
                "gate {name}: pass (baseline {baseline:.3}, run {run:.3}, threshold {threshold})"
            );
            Ok(ExitCode::SUCCESS)
        }
        GateResult::Regressed { baseline, run } => {
            println!(
                "gate {name}: REGRESSED (baseline {baseline:.3}, run {run:.3}, threshold {threshold})"
            );
            Ok(ExitCode::from(1))
        }
        GateResult::Missing(why) => bail!("gate {name}: {why}"),
    }
}

async fn connect(uri: &str) -> Result<Client> {
    let mut options = ClientOptions::parse(uri)
        .await
        .with_context(|| format!("parsing {uri}"))?;
    options
        .server_selection_timeout
        .get_or_insert(SERVER_SELECTION_TIMEOUT);
    options
        .app_name
        .get_or_insert_with(|| "cairn-compare".to_string());
    let client = Client::with_options(options)?;
    client
        .database("admin")
        .run_command(bson::doc! {"ping": 1})
        .await
        .with_context(|| format!("cannot reach {}", report::redact_uri(uri)))?;
    Ok(client)
}

fn restart(side: &mut Side) -> Measurement {
    let value = side.restart_after_kill_ms();
    Measurement {
        name: "restart after SIGKILL",
        unit: "ms",
        better: Better::Lower,
        value,
    }
}

fn run_compare(args: RunArgs) -> Result<ExitCode> {
    let Some(out) = args.out.clone() else {
        bail!("--out is required (or use the `gate` subcommand)");
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut target = Side::open(
        args.target.as_deref(),
        args.target_cmd.as_deref(),
        args.target_bin.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("target: {e}"))?;
    let mut reference = Side::open(
        args.reference.as_deref(),
        args.reference_cmd.as_deref(),
        args.reference_bin.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("reference: {e}"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let docs = args
        .docs
        .unwrap_or(if args.quick { DOCS_QUICK } else { DOCS_FULL });
    let runs = args
        .runs
        .unwrap_or(if args.quick { RUNS_QUICK } else { RUNS_FULL });
    let run_id = format!("{}_{}", std::process::id(), unix_secs());
    let mut rep = Report {
        target: report::redact_uri(&target.uri()),
        reference: report::redact_uri(&reference.uri()),
        docs,
        runs,
        ..Report::default()
    };
    runtime.block_on(async {
        let t = connect(&target.uri()).await?;
        let r = connect(&reference.uri()).await?;
        if !args.skip_correctness {
            eprintln!("cairn-compare: correctness cases");
            let c = correctness::run(&t, &r, args.case.as_deref(), &run_id).await;
            if !c.transcripts.is_empty() {
                std::fs::write(out.join("mismatches.txt"), c.transcripts.join("\n"))?;
            }
            rep.correctness = report::summary(&c);
        }
        if !args.skip_workloads {
            let mut sizes = Sizes::new(docs, runs, args.quick);
            let db = format!("cmpw_{run_id}");
            eprintln!("cairn-compare: workloads, {docs} records, {runs} runs");
            sizes.label = "target".into();
            let mut tm = workloads::run_all(&t, &db, &sizes).await;
            sizes.label = "reference".into();
            let mut rm = workloads::run_all(&r, &db, &sizes).await;
            tm.push(restart(&mut target));
            rm.push(restart(&mut reference));
            // Fresh clients: a restarted server is a new process, maybe on a new port.
            for side in [&target, &reference] {
                if let Ok(c) = connect(&side.uri()).await {
                    let _ = c.database(&db).drop().await;
                }
            }
            rep.workloads = report::rows(&tm, &rm);
        }
        anyhow::Ok(())
    })?;
    write_outputs(&out, &rep)?;
    let mismatches = rep.correctness.mismatches;
    eprintln!(
        "cairn-compare: {} cases, {} mismatching; report in {}",
        rep.correctness.cases,
        mismatches,
        out.display()
    );
    Ok(if mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn write_outputs(out: &Path, rep: &Report) -> Result<()> {
    let json = serde_json::to_string_pretty(rep)?;
    std::fs::write(out.join("compare.json"), json)?;
    let md = report::markdown(rep);
    std::fs::write(out.join("compare.md"), &md)?;
    print!("{md}");
    if !rep.workloads.is_empty() {
        let png = plot::ratio_bars(&rep.workloads, "cairn-compare: target / reference")
            .map_err(anyhow::Error::msg)?;
        std::fs::write(out.join("compare.png"), png)?;
    }
    Ok(())
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
