//! Proves no acknowledged write is lost when the power is cut (unsynced bytes dropped, not just
//! the process killed) and that recovery opens after every cut. How: `cairn_e2e::lazyfs` mounted
//! with FUSE holds the data directory; `cairn_e2e::powercut` runs writers, cuts the power at a
//! random moment, restarts and checks, a few rounds. Skipped, saying so, where FUSE cannot be
//! mounted (the simulated backend's crash tests in storage/tests still run). Many rounds:
//! `cargo run -p cairn-e2e --bin cairn-powercut -- --rounds 50`.

use cairn_e2e::lazyfs::LazyFs;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
const ROUNDS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_power_cuts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mounted = match LazyFs::mount(dir.path()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "SKIPPED: cannot mount FUSE here ({e}); the simulated backend's crash tests still run"
            );
            return;
        }
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    eprintln!("power-cut seed {seed}");
    let report = cairn_e2e::powercut::run(BIN, &mounted.fs, dir.path(), ROUNDS, seed, &mut |l| {
        eprintln!("{l}")
    })
    .await
    .expect("rounds run");
    assert_eq!(report.rounds, ROUNDS);
    assert!(report.acknowledged > 0, "{report:?}");
    assert!(
        report.lost.is_empty(),
        "acknowledged writes lost: {report:?}"
    );
    assert_eq!(report.refused_opens, 0);
}
