//! Proves that `cairn-load` runs end to end against a real server: every YCSB workload and the
//! durable inserts at two connection counts, server CPU found from the port, floor beside it.
//! How: the library entry point with 300 records and 150 operations a cell against debug cairn.

use cairn_e2e::Server;
use cairn_e2e::load::target::MongoClient;
use cairn_e2e::load::workload::{Shape, Workload};
use cairn_e2e::load::{self, Config, report};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// Every workload at 1 and 4 connections, 300 records of 4 small fields, 150 operations a cell.
fn smoke(server: &Server, client: MongoClient, db: &str, seed: u64) -> Config {
    Config {
        uri: Some(server.uri()),
        label: "cairn".into(),
        mongo_client: client,
        pg: None,
        db: db.into(),
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
        floor_dir: None,
        seed,
        also: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_runs_and_reports() {
    let server = Server::start(BIN, &[]);
    let floor = tempfile::tempdir().expect("tempdir");
    let cfg = Config {
        floor_dir: Some(floor.path().to_path_buf()),
        ..smoke(&server, MongoClient::Driver, "load_smoke", 7)
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

/// The bare wire client (`--mongo-client wire`) does every workload's operations: reads find
/// their records, inserts land, updates change the field they set, scans walk past one batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wire_client_runs_every_workload() {
    let server = Server::start(BIN, &[]);
    let cfg = Config {
        connections: vec![1, 3],
        shape: Shape {
            fields: 1,
            field_bytes: 20,
            scan_length_max: 150,
        },
        server_pid: Some(server.pid()),
        ..smoke(&server, MongoClient::Wire, "load_wire", 11)
    };
    let coll = server
        .client()
        .await
        .database("load_wire")
        .collection::<bson::Document>("usertable");
    let run = load::run(&cfg).await.expect("run");
    assert_eq!(run.measurements.len(), 14);
    for m in &run.measurements {
        assert_eq!(m.errors, 0, "{m:?}");
        // D reads the latest keys, which an insert may have claimed and not yet written.
        if m.workload != "D" {
            assert_eq!(m.missing, 0, "{m:?}");
        }
        assert!(m.ops >= 150 && m.ops_per_s > 0.0, "{m:?}");
    }
    let inserted = coll.count_documents(bson::doc! {}).await.expect("count");
    assert!(inserted >= 300 + 2 * 150, "{inserted}");
    // One field per record: an update's $set rewrote it, so some record no longer holds the
    // value it was loaded with. Loading again with the same seed gives the original values.
    let after: Vec<bson::Document> = {
        use futures_util::TryStreamExt;
        let c = coll
            .find(bson::doc! {"_id": {"$lt": 300i64}})
            .sort(bson::doc! {"_id": 1});
        c.await.expect("find").try_collect().await.expect("docs")
    };
    load::target::load_mongo(&server.uri(), "load_wire", 300, cfg.shape, cfg.seed)
        .await
        .expect("reload");
    let loaded: Vec<bson::Document> = {
        use futures_util::TryStreamExt;
        let c = coll.find(bson::doc! {}).sort(bson::doc! {"_id": 1});
        c.await.expect("find").try_collect().await.expect("docs")
    };
    assert_eq!(after.len(), 300);
    let changed = after.iter().zip(&loaded).filter(|(a, b)| a != b).count();
    assert!(changed > 0, "no update reached a record");
}
