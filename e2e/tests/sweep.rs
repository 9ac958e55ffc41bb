//! Proves that `cairn-bench sweep` runs end to end against a real server: start on a free port,
//! load, reads, inserts, clean and SIGKILL reopens (nothing acknowledged lost), report files.
//! How: the sweep's library entry point with 1,000 documents and `--quick` phases.

use cairn_e2e::compare::sweep::report::{self, names};
use cairn_e2e::compare::sweep::{self, Config};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

#[test]
fn sweep_of_one_small_count_measures_every_row() {
    let work = tempfile::tempdir().expect("tempdir");
    let cfg = Config {
        cairn_bin: BIN.into(),
        work_dir: work.path().join("work"),
        server_args: Vec::new(),
        counts: vec![1_000],
        repeats: 1,
        runs: 1,
        in_flight: 2,
        quick: true,
        pg: None,
        keep_data: false,
    };
    let r = sweep::run(&cfg).expect("sweep");
    let p = &r.cairn[0];
    let error = p.workloads.iter().find(|v| v.name == names::SWEEP_ERROR);
    assert!(error.is_none(), "{error:?}");
    for name in [
        names::BULK,
        names::RSS_LOAD,
        names::DISK_LOAD,
        names::READ_ID,
        names::READ_K,
        names::RANGE,
        names::INSERT_OUT_P99,
        names::OPEN_CLEAN_FIND,
        names::OPEN_KILL_FIND,
    ] {
        assert!(p.get(name).is_some_and(|v| v > 0.0), "{name}: {p:?}");
    }
    assert_eq!(p.get(names::LOST), Some(0.0));
    assert!(r.floors[0].get(names::FDATASYNC_P50).is_some());
    assert!(report::markdown(&r).contains("## Durable writes against the floor"));
    assert_eq!(&report::plot(&r).expect("plot")[1..4], b"PNG");
    assert!(!cfg.work_dir.join("r0-n1000").exists(), "data left behind");
}
