//! One swept `cairn` process: started on a free port with a fresh data directory and the user's
//! extra arguments, stopped cleanly (the `shutdown` command) or with SIGKILL, and reopened with
//! two clocks running from the spawn: the first answered `ping` and the first answered `find` on
//! the loaded collection. Also the two gauges read from outside the server: VmRSS from
//! `/proc/<pid>/status` and the bytes under the data directory.

use crate::compare::launch::Launched;
use crate::compare::limits::{PING_TIMEOUT, SWEEP_OPEN_TIMEOUT, SWEEP_SHUTDOWN_TIMEOUT};
use crate::compare::ping;
use bson::rawdoc;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Database and collection the sweep loads.
pub const DB: &str = "sweep";
pub const COLL: &str = "docs";

pub struct Swept {
    server: Launched,
    pub dbpath: PathBuf,
    port: u16,
}

/// The two open clocks, both from the spawn.
#[derive(Clone, Copy, Debug)]
pub struct OpenTimes {
    pub ping: Duration,
    pub find: Duration,
}

impl Swept {
    /// Start `bin` on a free port with data under `dir/db` and its log in `dir/cairn.log`;
    /// returns once it answers ping.
    pub fn start(bin: &Path, dir: &Path, extra_args: &[String]) -> Result<Swept, String> {
        let dbpath = dir.join("db");
        std::fs::create_dir_all(&dbpath).map_err(|e| format!("{}: {e}", dbpath.display()))?;
        let port = free_port()?;
        let mut args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind_ip".into(),
            "127.0.0.1".into(),
            "--dbpath".into(),
            dbpath.display().to_string(),
        ];
        args.extend(extra_args.iter().cloned());
        let addr = format!("127.0.0.1:{port}");
        let log = dir.join("cairn.log");
        let mut server = Launched::new(bin, &args, &addr, Some(&log));
        server
            .respawn(SWEEP_OPEN_TIMEOUT)
            .map_err(|e| format!("{e} (log: {})", log.display()))?;
        Ok(Swept {
            server,
            dbpath,
            port,
        })
    }

    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }

    /// Resident memory of the server process, bytes.
    pub fn rss_bytes(&self) -> Result<u64, String> {
        let pid = self.server.pid().ok_or("server not running")?;
        let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
        vm_rss_kib(&text)
            .map(|kib| kib * 1024)
            .ok_or_else(|| "no VmRSS line".into())
    }

    /// The `shutdown` command, then wait for the process to exit; the time until it did.
    pub fn shutdown(&mut self) -> Result<Duration, String> {
        let start = Instant::now();
        // The server closes the connection instead of replying; only the exit counts.
        let _ = ping::command(
            self.server.addr(),
            &rawdoc! {"shutdown": 1, "$db": "admin"},
            PING_TIMEOUT,
        );
        match self.server.wait_exit(SWEEP_SHUTDOWN_TIMEOUT) {
            Ok(_) => Ok(start.elapsed()),
            Err(e) => {
                self.server.kill();
                Err(format!("clean shutdown failed, killed: {e}"))
            }
        }
    }

    /// SIGKILL, no warning.
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Start again on the same data directory and port; time the first ping and the first
    /// `find` of document `probe_id` (which must be found).
    pub fn reopen(&mut self, probe_id: i64) -> Result<OpenTimes, String> {
        let start = Instant::now();
        let ping = self.server.respawn(SWEEP_OPEN_TIMEOUT)?;
        let find = rawdoc! {"find": COLL, "filter": {"_id": probe_id}, "limit": 1, "$db": DB};
        let reply = ping::command(self.server.addr(), &find, SWEEP_OPEN_TIMEOUT)?;
        let found = reply
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .map_or(0, Vec::len);
        if found != 1 {
            return Err(format!("first find returned {found} documents, not 1"));
        }
        Ok(OpenTimes {
            ping,
            find: start.elapsed(),
        })
    }
}

/// A port nothing listens on right now (bound and released; the server binds it next).
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// The `VmRSS:` figure of a `/proc/<pid>/status` text, KiB.
pub fn vm_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let kib = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib)
}

/// Bytes under a directory: the files' lengths and the blocks the filesystem allocated for them
/// (lower for sparse preallocated files, higher for many small ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskBytes {
    pub apparent: u64,
    pub allocated: u64,
}

pub fn dir_bytes(path: &Path) -> std::io::Result<DiskBytes> {
    let mut total = DiskBytes::default();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total.apparent += meta.len();
                total.allocated += meta.blocks() * 512;
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_kib() {
        let text = "Name:\tcairn\nVmPeak:\t  9000 kB\nVmRSS:\t   51200 kB\nThreads:\t4\n";
        assert_eq!(vm_rss_kib(text), Some(51_200));
        assert_eq!(vm_rss_kib("VmRSS: 12 MB\n"), None);
        assert_eq!(vm_rss_kib("Name: x\n"), None);
    }

    #[test]
    fn dir_bytes_walks_sub_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("a"), [1u8; 100]).expect("write");
        std::fs::write(dir.path().join("sub/b"), [1u8; 5000]).expect("write");
        let b = dir_bytes(dir.path()).expect("walk");
        assert_eq!(b.apparent, 5_100);
        assert!(b.allocated >= 5_100, "{b:?}");
    }
}
