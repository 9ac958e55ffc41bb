//! `cairn-powercut`: many power-cut rounds against a `cairn` binary on a FUSE `LazyFs` (see
//! `cairn_e2e::powercut`), then a one-line JSON report: rounds, acknowledged writes, lost ones,
//! refused opens, the slowest restart. Needs root (FUSE).

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// The cairn binary to run.
    #[arg(long, default_value = "target/release/cairn")]
    cairn: String,
    #[arg(long, default_value_t = 50)]
    rounds: usize,
    #[arg(long)]
    seed: Option<u64>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let mounted = cairn_e2e::lazyfs::LazyFs::mount(dir.path())?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("seed {seed}");
    let report = cairn_e2e::powercut::run(
        &args.cairn,
        &mounted.fs,
        dir.path(),
        args.rounds,
        seed,
        &mut |l| eprintln!("{l}"),
    )
    .await?;
    println!(
        "{{\"rounds\":{},\"acknowledged\":{},\"lost\":{},\"refused_opens\":{},\"restart_ms_max\":{},\"seed\":{seed}}}",
        report.rounds,
        report.acknowledged,
        report.lost.len(),
        report.refused_opens,
        report.restart_ms_max
    );
    anyhow::ensure!(
        report.lost.is_empty() && report.refused_opens == 0,
        "power cuts lost data"
    );
    Ok(())
}
