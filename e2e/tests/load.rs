//! Proves that `cairn-load` runs end to end against a real server: every YCSB workload and the
//! durable inserts at two connection counts, server CPU found from the port, floor beside it.
//! How: the library entry point with 300 records and 150 operations a cell against debug cairn.

use cairn_e2e::Server;
use cairn_e2e::load::workload::{Shape, Workload};
use cairn_e2e::load::{self, Config, report};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_runs_and_reports() {
    let server = Server::start(BIN, &[]);
    let floor = tempfile::tempdir().expect("tempdir");
    let cfg = Config {
        uri: Some(server.uri()),
        label: "cairn".into(),
        pg: None,
        db: "load_smoke".into(),
        workloads: Workload::ALL.to_vec(),
        connections: vec![1, 4],
        records: 300,
        shape: Shape {
            fields: 4,
            field_bytes: 20,
            scan_length_max: 10,
        },
        warmup: Duration::ZERO,
        measure: Duration::from_secs(60),
        ops: Some(150),
        rounds: 1,
        rate: None,
        distribution: None,
        server_pid: None,
        pg_pid: None,
        floor_dir: Some(floor.path().to_path_buf()),
        seed: 7,
        also: None,
    };
    let run = load::run(&cfg).await.expect("run");
    assert_eq!(
        run.server_cpu_watched,
        vec![("cairn".into(), Some(server.pid()))]
    );
    // 7 workloads x 2 connection counts, plus the floor beside both insert cells.
    assert_eq!(run.measurements.len(), 16);
    for m in &run.measurements {
        assert_eq!(m.errors, 0, "{m:?}");
        assert!(m.ops >= 150 && m.ops_per_s > 0.0 && m.p50_us > 0.0, "{m:?}");
        if m.system == "cairn" {
            assert!(m.server_cores.is_some(), "{m:?}");
        }
    }
    let inserted = server
        .client()
        .await
        .database("load_smoke")
        .collection::<bson::Document>("usertable")
        .count_documents(bson::doc! {})
        .await
        .expect("count");
    assert!(inserted > 300 + 2 * 150, "{inserted}");
    let md = report::markdown(&run);
    assert!(
        md.contains("## Goals") && md.contains("group-commit floor"),
        "{md}"
    );
    assert_eq!(&report::plot(&run).expect("plot")[1..4], b"PNG");
}
