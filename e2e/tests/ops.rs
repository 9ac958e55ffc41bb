//! Proves the operator's surface of a real `cairn` process: a mongod-style `--config` file takes
//! effect (and a bad key stops start-up), `/metrics` serves Prometheus text whose counters move,
//! `logRotate`/SIGUSR1 rotate `--logpath`, verbosity settings, and the slow-query line's shape.
//! How: the server binary on ephemeral ports, the Rust driver, raw HTTP, and the log files.

use bson::{Bson, Document, doc};
use cairn_e2e::Server;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

async fn admin(s: &Server, cmd: Document) -> Document {
    s.client()
        .await
        .database("admin")
        .run_command(cmd)
        .await
        .unwrap()
}

#[tokio::test]
async fn config_file_keys_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_file(
        dir.path(),
        "mongod.conf",
        "# a stock-looking mongod.conf\n\
         net:\n  maxIncomingConnections: 20\n\
         storage:\n  journal:\n    commitIntervalMs: 50\n\
         \x20 wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.125\n\
         operationProfiling:\n  slowOpThresholdMs: 1234\n\
         systemLog:\n  verbosity: 1\n\
         processManagement:\n  timeZoneInfo: /usr/share/zoneinfo\n\
         setParameter:\n  cursorTimeoutMillis: 5000\n",
    );
    let s = Server::start(BIN, &["-f", conf.to_str().unwrap()]);
    let opts = admin(&s, doc! { "getCmdLineOpts": 1 }).await;
    let parsed = opts.get_document("parsed").unwrap();
    assert_eq!(parsed.get_str("config").unwrap(), conf.to_str().unwrap());
    let net = parsed.get_document("net").unwrap();
    assert_eq!(net.get_i32("maxIncomingConnections").unwrap(), 20);
    // The command line (the harness's --port 0) wins over the file.
    assert_eq!(net.get_i32("port").unwrap(), 0);
    let status = admin(&s, doc! { "serverStatus": 1 }).await;
    let conns = status.get_document("connections").unwrap();
    let total = conns.get_i32("current").unwrap() + conns.get_i32("available").unwrap();
    assert_eq!(total, 20, "{conns}");
    let cache_max = status
        .get_document("wiredTiger")
        .and_then(|w| w.get_document("cache"))
        .map(|c| c.get("maximum bytes configured").cloned())
        .unwrap();
    assert_eq!(
        cache_max.and_then(|b| b.as_i64().or(b.as_f64().map(|f| f as i64))),
        Some(128 << 20)
    );
    let p = admin(
        &s,
        doc! { "getParameter": 1, "cursorTimeoutMillis": 1, "logLevel": 1 },
    )
    .await;
    assert_eq!(
        p.get("cursorTimeoutMillis").and_then(Bson::as_i64),
        Some(5000)
    );
    assert_eq!(p.get("logLevel").and_then(Bson::as_i32), Some(1));
    let prof = s
        .client()
        .await
        .database("test")
        .run_command(doc! { "profile": -1 })
        .await
        .unwrap();
    assert_eq!(prof.get_i32("slowms").unwrap(), 1234);
    let storage = parsed.get_document("storage").unwrap();
    assert_eq!(
        storage
            .get_document("journal")
            .unwrap()
            .get_i64("commitIntervalMs")
            .unwrap(),
        50
    );
}

#[test]
fn unknown_config_key_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_file(
        dir.path(),
        "bad.conf",
        "net:\n  port: 0\nstorage:\n  dbPath: /tmp/x\n  engine: wiredTiger\n",
    );
    let out = Command::new(BIN)
        .args(["--config", conf.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("engine"), "{err}");
    assert!(err.contains("bad.conf"), "{err}");
    assert!(err.contains('5'), "line of the key missing: {err}");
}

/// `GET path` over plain HTTP; returns (status line, body).
fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

fn metrics_port(s: &Server) -> u16 {
    let log = s.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("Metrics endpoint listening"))
        .unwrap_or_else(|| panic!("no metrics line:\n{log}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["port"].as_u64().unwrap() as u16
}

fn scrape(port: u16) -> prometheus_parse::Scrape {
    let (status, body) = http_get(port, "/metrics");
    assert!(status.contains("200"), "{status}");
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("Prometheus text")
}

fn counter(scrape: &prometheus_parse::Scrape, name: &str, label: (&str, &str)) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && s.labels.get(label.0) == Some(label.1))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

fn histogram_count(scrape: &prometheus_parse::Scrape, name: &str) -> u64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .map(|s| match &s.value {
            prometheus_parse::Value::Histogram(b) => {
                b.iter().map(|c| c.count as u64).max().unwrap_or(0)
            }
            _ => 0,
        })
        .sum()
}

#[tokio::test]
async fn metrics_endpoint_serves_prometheus_text_that_moves() {
    let s = Server::start(BIN, &["--metricsPort", "0"]);
    let port = metrics_port(&s);
    let before = scrape(port);
    let names: Vec<&str> = before.samples.iter().map(|s| s.metric.as_str()).collect();
    for want in [
        "cairn_connections_current",
        "cairn_cursors_open",
        "cairn_cache_bytes",
        "cairn_cache_pages_evicted_total",
        "cairn_log_bytes",
        "cairn_checkpoint_last_duration_seconds",
        "cairn_log_sync_duration_seconds",
        "cairn_group_commit_batch_records",
        "cairn_ttl_deleted_documents_total",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let inserts_before = counter(&before, "cairn_commands_total", ("command", "insert"));
    let client = s.client().await;
    let c = client.database("m").collection::<Document>("c");
    for i in 0..5 {
        c.insert_one(doc! { "i": i }).await.unwrap();
    }
    c.find_one(doc! { "i": 3 }).await.unwrap();
    let after = scrape(port);
    assert_eq!(
        counter(&after, "cairn_commands_total", ("command", "insert")) - inserts_before,
        5.0
    );
    assert!(counter(&after, "cairn_commands_total", ("command", "find")) >= 1.0);
    assert!(
        histogram_count(&after, "cairn_command_duration_seconds")
            > histogram_count(&before, "cairn_command_duration_seconds")
    );
    assert!(
        histogram_count(&after, "cairn_group_commit_batch_records")
            > histogram_count(&before, "cairn_group_commit_batch_records")
    );
    assert!(histogram_count(&after, "cairn_log_sync_duration_seconds") >= 5);
    assert!(counter(&after, "cairn_opcounters_total", ("type", "insert")) >= 5.0);
    assert!(http_get(port, "/nope").0.contains("404"));
}

#[tokio::test]
async fn metrics_under_repl_set_show_the_oplog() {
    let s = Server::start(BIN, &["--metricsPort", "0", "--replSet", "rs0"]);
    let text = http_get(metrics_port(&s), "/metrics").1;
    assert!(text.contains("cairn_oplog_size_bytes_max"), "{text}");
}

/// A server logging to a file: the harness reads start-up from stderr, so this one waits for
/// the listening line to appear in the file (bounded).
struct FileLogged {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for FileLogged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_file_logged(extra: &[&str], prefill: Option<&str>) -> FileLogged {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cairn.log");
    if let Some(text) = prefill {
        std::fs::write(&log, text).unwrap();
    }
    let child = Command::new(BIN)
        .args(["--port", "0", "--log-format", "json", "--logpath"])
        .arg(&log)
        .arg("--dbpath")
        .arg(dir.path().join("db"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let port = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("Waiting for connections")) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            break v["port"].as_u64().unwrap() as u16;
        }
        assert!(Instant::now() < deadline, "no start-up line in {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    FileLogged {
        child,
        port,
        log,
        _dir: dir,
    }
}

impl FileLogged {
    async fn admin(&self, cmd: Document) -> Result<Document, mongodb::error::Error> {
        let uri = format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port);
        mongodb::Client::with_uri_str(&uri)
            .await
            .unwrap()
            .database("admin")
            .run_command(cmd)
            .await
    }

    fn rotated(&self) -> Vec<PathBuf> {
        let name = self.log.file_name().unwrap().to_str().unwrap().to_string();
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.log.parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.file_name().unwrap().to_str().unwrap();
                n.starts_with(&format!("{name}.")) && n.len() > name.len() + 1
            })
            .collect();
        v.sort();
        v
    }

    /// Waits (bounded) until the file at the log path contains `text`.
    fn wait_for_line(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = std::fs::read_to_string(&self.log).unwrap_or_default();
            if now.contains(text) {
                return now;
            }
            assert!(Instant::now() < deadline, "{text} never logged: {now}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[tokio::test]
async fn log_rotate_command_and_sigusr1_rename_the_file() {
    let s = start_file_logged(&["--logappend"], Some("an old line\n"));
    let first = std::fs::read_to_string(&s.log).unwrap();
    assert!(
        first.starts_with("an old line\n"),
        "--logappend kept the old lines"
    );
    s.admin(doc! { "logRotate": 1 }).await.unwrap();
    let rotated = s.rotated();
    assert_eq!(rotated.len(), 1, "{rotated:?}");
    let old = std::fs::read_to_string(&rotated[0]).unwrap();
    assert!(old.contains("Waiting for connections") && old.contains("Log rotation initiated"));
    s.wait_for_line("Log rotated");
    let status = Command::new("kill")
        .args(["-USR1", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.rotated().len() < 2 {
        assert!(Instant::now() < deadline, "SIGUSR1 did not rotate");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.wait_for_line("Log rotated");
    let e = s.admin(doc! { "logRotate": "audit" }).await.unwrap_err();
    assert_eq!(cairn_e2e::error_code(&e), 4);
}

#[tokio::test]
async fn log_rotate_reopen_and_truncate_without_logappend() {
    let s = start_file_logged(&["--logRotate", "reopen"], Some("an old line\n"));
    assert!(
        !std::fs::read_to_string(&s.log)
            .unwrap()
            .contains("an old line")
    );
    let moved = s.log.with_extension("moved");
    std::fs::rename(&s.log, &moved).unwrap();
    s.admin(doc! { "logRotate": 1 }).await.unwrap();
    s.wait_for_line("Log file reopened");
    assert!(s.rotated().is_empty(), "reopen renames nothing");
    assert!(
        std::fs::read_to_string(&moved)
            .unwrap()
            .contains("Log rotation initiated")
    );
}

#[tokio::test]
async fn verbosity_levels_and_components() {
    let s = Server::start(BIN, &["-vv"]);
    let p = admin(&s, doc! { "getParameter": 1, "logLevel": 1 }).await;
    assert_eq!(p.get_i32("logLevel").unwrap(), 2);
    let opts = admin(&s, doc! { "getCmdLineOpts": 1 }).await;
    let log = opts
        .get_document("parsed")
        .and_then(|p| p.get_document("systemLog"))
        .unwrap();
    assert_eq!(log.get_i32("verbosity").unwrap(), 2);
    let set = admin(
        &s,
        doc! { "setParameter": 1, "logComponentVerbosity": { "verbosity": 0, "query": { "verbosity": 2 }, "storage": 1 } },
    )
    .await;
    assert_eq!(
        set.get_document("was")
            .unwrap()
            .get_document("query")
            .unwrap()
            .get_i32("verbosity")
            .unwrap(),
        -1
    );
    let now = admin(&s, doc! { "getParameter": 1, "logComponentVerbosity": 1 }).await;
    let v = now.get_document("logComponentVerbosity").unwrap();
    assert_eq!(v.get_i32("verbosity").unwrap(), 0);
    assert_eq!(
        v.get_document("query")
            .unwrap()
            .get_i32("verbosity")
            .unwrap(),
        2
    );
    assert_eq!(
        v.get_document("storage")
            .unwrap()
            .get_i32("verbosity")
            .unwrap(),
        1
    );
    let client = s.client().await;
    for bad in [
        doc! { "setParameter": 1, "logComponentVerbosity": { "nosuch": 1 } },
        doc! { "setParameter": 1, "logComponentVerbosity": { "verbosity": 9 } },
    ] {
        let e = client
            .database("admin")
            .run_command(bad.clone())
            .await
            .unwrap_err();
        assert_eq!(cairn_e2e::error_code(&e), 2, "{bad}");
    }
    // Not a document at all: mongod's TypeMismatch.
    let e = client
        .database("admin")
        .run_command(doc! { "setParameter": 1, "logComponentVerbosity": 3 })
        .await
        .unwrap_err();
    assert_eq!(cairn_e2e::error_code(&e), 14);
}

#[tokio::test]
async fn slow_query_line_has_mongods_shape() {
    let s = Server::start(BIN, &["--slowms=-1"]);
    let client = s.client().await;
    let c = client.database("sq").collection::<Document>("c");
    c.insert_many((0..50).map(|i| doc! { "i": i, "k": i % 5 }))
        .await
        .unwrap();
    let db = client.database("sq");
    db.run_command(doc! { "find": "c", "filter": { "k": 2 } })
        .await
        .unwrap();
    let log = admin(&s, doc! { "getLog": "global" }).await;
    let lines = log.get_array("log").unwrap();
    let slow: Vec<serde_json::Value> = lines
        .iter()
        .filter_map(|l| l.as_str())
        .filter(|l| l.contains("Slow query"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = slow
        .iter()
        .find(|v| v["attr"]["command"]["find"] == "c")
        .unwrap_or_else(|| panic!("no slow find line in {slow:?}"));
    assert_eq!(find["msg"], "Slow query");
    assert_eq!(find["c"], "COMMAND");
    assert_eq!(find["id"], 51803);
    let attr = &find["attr"];
    assert_eq!(attr["type"], "command");
    assert_eq!(attr["ns"], "sq.c");
    assert_eq!(attr["command"]["filter"]["k"], 2);
    assert_eq!(attr["command"]["$db"], "sq");
    assert_eq!(attr["planSummary"], "COLLSCAN");
    assert_eq!(attr["docsExamined"], 50);
    assert_eq!(attr["keysExamined"], 0);
    assert_eq!(attr["nreturned"], 10);
    assert_eq!(attr["cursorExhausted"], true);
    assert!(attr["durationMillis"].is_i64());
    assert_eq!(attr["workingMillis"], attr["durationMillis"], "8.0");
    assert_eq!(
        attr["queryShapeHash"].as_str().map(str::len),
        Some(64),
        "8.0"
    );
    assert_eq!(attr["protocol"], "op_msg");
    // An index scan names its index the way mongod does.
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build())
        .await
        .unwrap();
    db.run_command(doc! { "find": "c", "filter": { "k": 3 } })
        .await
        .unwrap();
    let log = admin(&s, doc! { "getLog": "global" }).await;
    let text: Vec<String> = log
        .get_array("log")
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect();
    let ix: serde_json::Value = text
        .iter()
        .filter(|l| l.contains(r#""planSummary":"IXSCAN { k: 1 }""#))
        .map(|l| serde_json::from_str(l).unwrap())
        .next()
        .unwrap_or_else(|| panic!("no IXSCAN line in {text:?}"));
    assert!(ix["attr"]["keysExamined"].as_i64().unwrap() >= 10, "{ix}");
    assert_eq!(ix["attr"]["docsExamined"], 10);

    // Not only find: an aggregate and an update report their plan, work and reply counters.
    db.run_command(
        doc! { "aggregate": "c", "pipeline": [{ "$match": { "i": { "$lt": 7 } } }],
        "cursor": {} },
    )
    .await
    .unwrap();
    db.run_command(
        doc! { "update": "c", "updates": [{ "q": { "k": 4 }, "u": { "$set": { "u": 1 } },
        "multi": true }] },
    )
    .await
    .unwrap();
    let log = admin(&s, doc! { "getLog": "global" }).await;
    let slow: Vec<serde_json::Value> = log
        .get_array("log")
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .filter(|l| l.contains("Slow query"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let line = |cmd: &str| {
        slow.iter()
            .find(|v| v["attr"]["command"][cmd] == "c")
            .unwrap_or_else(|| panic!("no slow {cmd} line in {slow:?}"))["attr"]
            .clone()
    };
    let agg = line("aggregate");
    assert_eq!(agg["planSummary"], "COLLSCAN", "{agg}");
    assert_eq!(agg["docsExamined"], 50, "{agg}");
    assert_eq!(agg["nreturned"], 7, "{agg}");
    assert_eq!(agg["cursorExhausted"], true, "{agg}");
    let upd = line("update");
    assert_eq!(upd["planSummary"], "IXSCAN { k: 1 }", "{upd}");
    assert_eq!(upd["docsExamined"], 10, "{upd}");
    assert_eq!(upd["nMatched"], 10, "{upd}");
    assert_eq!(upd["nModified"], 10, "{upd}");
}
