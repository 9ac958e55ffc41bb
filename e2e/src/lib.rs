//! Harness for end-to-end tests and tools: start a real `cairn` process on an ephemeral port (the
//! port is read from the server's own "Waiting for connections" log line, so nothing sleeps while
//! waiting for start-up), connect the official Rust driver, or talk raw wire bytes to it.

#[cfg(target_os = "linux")]
pub mod lazyfs;
#[cfg(target_os = "linux")]
pub mod powercut;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a server may take to print its listening line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `cairn` process. Killed when dropped.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub dbpath: PathBuf,
    /// Every log line the server printed so far.
    pub log: Arc<Mutex<Vec<String>>>,
    _tempdir: Option<tempfile::TempDir>,
    bin: PathBuf,
    args: Vec<String>,
}

impl Server {
    /// Start `bin` with a fresh temporary data directory.
    pub fn start(bin: &str, args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let dbpath = dir.path().join("db");
        let mut s = Server::start_at(bin, &dbpath, args);
        s._tempdir = Some(dir);
        s
    }

    /// Start `bin` on an existing (or new) data directory.
    /// Starts `bin --replSet rs0 <args>` and initiates the set, so it is PRIMARY when this
    /// returns.
    pub async fn start_initiated(bin: &str, args: &[&str]) -> Server {
        let mut all = vec!["--replSet", "rs0"];
        all.extend_from_slice(args);
        let server = Server::start(bin, &all);
        let r = server
            .client()
            .await
            .database("admin")
            .run_command(bson::doc! { "replSetInitiate": {} })
            .await
            .expect("replSetInitiate");
        assert_eq!(r.get_f64("ok").ok(), Some(1.0), "{r}");
        server
    }

    pub fn start_at(bin: &str, dbpath: &Path, args: &[&str]) -> Server {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (child, port, log) = spawn(Path::new(bin), dbpath, &args);
        Server {
            child: Some(child),
            port,
            dbpath: dbpath.to_path_buf(),
            log,
            _tempdir: None,
            bin: bin.into(),
            args,
        }
    }

    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub async fn client(&self) -> mongodb::Client {
        self.client_with(&[]).await
    }

    /// A driver client with extra URI options, e.g. `["compressors=zstd"]`.
    pub async fn client_with(&self, options: &[&str]) -> mongodb::Client {
        let mut uri = self.uri();
        for o in options {
            uri.push('&');
            uri.push_str(o);
        }
        mongodb::Client::with_uri_str(&uri).await.expect("client")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// SIGKILL the process and wait for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send a signal by name (e.g. "TERM", "INT") with the system `kill` command.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{name} failed");
    }

    /// Wait for the process to exit on its own (bounded).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill (SIGKILL) and start again on the same data directory and port-picking rules.
    pub fn restart_after_kill(&mut self) {
        self.kill();
        let (child, port, log) = spawn(&self.bin, &self.dbpath, &self.args);
        self.child = Some(child);
        self.port = port;
        self.log = log;
    }

    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// Whether the server's log shows `needle` within `timeout`: its lines reach the test
    /// through a reader thread, so a line logged before a reply may arrive after it.
    pub fn log_shows(&self, needle: &str, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.log_text().contains(needle) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(bin: &Path, dbpath: &Path, args: &[String]) -> (Child, u16, Arc<Mutex<Vec<String>>>) {
    let mut cmd = Command::new(bin);
    cmd.arg("--port")
        .arg("0")
        .arg("--log-format")
        .arg("json")
        .arg("--dbpath")
        .arg(dbpath);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let stderr = child.stderr.take().expect("stderr");
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let (Some(port), Some(t)) = (listening_port(&line), tx.as_ref()) {
                let _ = t.send(port);
                tx = None;
            }
            if let Ok(mut l) = sink.lock() {
                l.push(line);
            }
        }
    });
    match rx.recv_timeout(STARTUP_TIMEOUT) {
        Ok(port) => (child, port, log),
        Err(_) => {
            let _ = child.kill();
            let status = child.wait().ok();
            let text = log.lock().map(|l| l.join("\n")).unwrap_or_default();
            panic!("cairn did not start (status {status:?}); log:\n{text}");
        }
    }
}

/// The port from a JSON "Waiting for connections" line.
fn listening_port(line: &str) -> Option<u16> {
    if !line.contains("Waiting for connections") {
        return None;
    }
    let rest = &line[line.find("\"port\":")? + 7..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// A raw TCP connection for wire-level tests.
pub struct RawConn {
    pub stream: TcpStream,
}

impl RawConn {
    pub fn connect(addr: &str) -> RawConn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        RawConn { stream }
    }

    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Read one whole frame; Err on EOF or timeout.
    pub fn recv(&mut self) -> std::io::Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let n = i32::from_le_bytes(len);
        if !(16..=48_000_000).contains(&n) {
            return Err(std::io::Error::other(format!("bad reply length {n}")));
        }
        let mut frame = vec![0u8; n as usize];
        frame[..4].copy_from_slice(&len);
        self.stream.read_exact(&mut frame[4..])?;
        Ok(frame)
    }

    /// True when the server closed the connection (EOF) within the read timeout.
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0))
            || matches!(self.stream.read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }
}

/// The server error code inside a driver error (command error, write error, or the first
/// write error of an insertMany); -1 when there is none.
pub fn error_code(e: &mongodb::error::Error) -> i32 {
    use mongodb::error::{ErrorKind, WriteFailure};
    match e.kind.as_ref() {
        ErrorKind::Command(c) => c.code,
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code,
        ErrorKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|w| w.first())
            .map_or(-1, |w| w.code),
        _ => -1,
    }
}

/// The server's `errmsg` inside a driver error (falls back to the driver's text).
pub fn error_message(e: &mongodb::error::Error) -> String {
    use mongodb::error::{ErrorKind, WriteFailure};
    match e.kind.as_ref() {
        ErrorKind::Command(c) => c.message.clone(),
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.message.clone(),
        _ => e.to_string(),
    }
}

/// `explain` of a command at `executionStats` verbosity.
/// The `listCollections` entry of collection `name` (panics when there is none).
pub async fn collection_entry(db: &mongodb::Database, name: &str) -> bson::Document {
    let list = db
        .run_command(bson::doc! { "listCollections": 1, "filter": { "name": name } })
        .await
        .expect("listCollections");
    list.get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .expect("firstBatch")
        .first()
        .and_then(|e| e.as_document())
        .unwrap_or_else(|| panic!("no collection {name}"))
        .clone()
}

pub async fn explain(db: &mongodb::Database, inner: bson::Document) -> bson::Document {
    db.run_command(bson::doc! { "explain": inner, "verbosity": "executionStats" })
        .await
        .expect("explain")
}

/// `queryPlanner.winningPlan` of an explain reply.
pub fn winning(e: &bson::Document) -> &bson::Document {
    e.get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .expect("winningPlan")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listening_line() {
        let line = r#"{"timestamp":"x","level":"INFO","message":"Waiting for connections","port":40123,"target":"cairn"}"#;
        assert_eq!(listening_port(line), Some(40123));
        assert_eq!(listening_port(r#"{"message":"other","port":1}"#), None);
    }
}

/// A SCRAM client over raw streams and generated TLS certificates (auth and TLS tests).
pub mod auth;

/// Compare and benchmark tools (`cairn-compare`, `cairn-bench`); see docs/COMPARE.md.
pub mod compare;

/// The YCSB-style load generator behind `cairn-load` (MongoDB URI and PostgreSQL jsonb).
pub mod load;
