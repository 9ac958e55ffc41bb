//! CPU time of processes from `/proc/<pid>/stat` (user + system, in clock ticks of 1/100 s: the
//! USER_HZ of every mainstream Linux build), and finding the process behind a loopback port:
//! the listening socket's inode from `/proc/net/tcp{,6}`, then the process holding it among
//! `/proc/*/fd`. A PostgreSQL server is its postmaster and every process below it (one backend
//! per connection, plus the WAL writer, checkpointer and friends), so a sample covers a tree.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// Seconds per tick of `/proc/<pid>/stat`'s utime and stime.
const TICK_S: f64 = 0.01;

/// (utime + stime ticks, parent pid) of `pid`, if it still exists.
fn stat(pid: u32) -> Option<(u64, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): ppid is field 4, utime 14, stime 15.
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime, ppid))
}

fn all_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// `root` and every process below it.
fn tree(root: u32) -> Vec<u32> {
    let parents: BTreeMap<u32, u32> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, stat(p)?.1)))
        .collect();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| **pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// What to sample: one process, or a process and its descendants.
#[derive(Clone, Copy, Debug)]
pub enum Watch {
    Process(u32),
    Tree(u32),
}

/// CPU ticks per pid at one moment.
#[derive(Clone, Debug)]
pub struct Sample {
    at: Instant,
    ticks: BTreeMap<u32, u64>,
}

impl Sample {
    pub fn take(watch: Option<Watch>) -> Sample {
        let pids = match watch {
            None => Vec::new(),
            Some(Watch::Process(p)) => vec![p],
            Some(Watch::Tree(p)) => tree(p),
        };
        Sample {
            at: Instant::now(),
            ticks: pids
                .into_iter()
                .filter_map(|p| Some((p, stat(p)?.0)))
                .collect(),
        }
    }

    /// Cores used between `self` and `later`: processes in both count their difference, ones
    /// born in between count all their time (processes gone by `later` are lost).
    pub fn cores_until(&self, later: &Sample) -> Option<f64> {
        if later.ticks.is_empty() {
            return None;
        }
        let ticks: u64 = later
            .ticks
            .iter()
            .map(|(p, t)| t.saturating_sub(self.ticks.get(p).copied().unwrap_or(0)))
            .sum();
        let wall = later.at.duration_since(self.at).as_secs_f64();
        (wall > 0.0).then(|| ticks as f64 * TICK_S / wall)
    }
}

/// This process's own CPU.
pub fn own() -> Watch {
    Watch::Process(std::process::id())
}

/// The port of a `scheme://[user@]host:port[/...]` URI whose host is loopback.
pub fn loopback_port(uri: &str) -> Option<u16> {
    let rest = uri.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let hostport = authority.rsplit('@').next()?;
    let (host, port) = hostport.rsplit_once(':')?;
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
        .then(|| port.parse().ok())
        .flatten()
}

/// Inodes of sockets listening on `port` (state 0A) in one of /proc/net/tcp{,6}.
fn listening_inodes(table: &Path, port: u16) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(table) else {
        return Vec::new();
    };
    let want = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 9 && f[1].ends_with(&want) && f[3] == "0A").then(|| f[9].to_string())
        })
        .collect()
}

/// The oldest process holding a socket listening on loopback `port`.
pub fn pid_listening(port: u16) -> Option<u32> {
    let mut inodes = listening_inodes(Path::new("/proc/net/tcp"), port);
    inodes.extend(listening_inodes(Path::new("/proc/net/tcp6"), port));
    let targets: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    if targets.is_empty() {
        return None;
    }
    let mut pids = all_pids();
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .any(|link| targets.iter().any(|t| link.as_os_str() == t.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_of_loopback_uris() {
        assert_eq!(
            loopback_port("mongodb://127.0.0.1:27017/?directConnection=true"),
            Some(27017)
        );
        assert_eq!(
            loopback_port("postgresql://postgres@127.0.0.1:5433/postgres"),
            Some(5433)
        );
        assert_eq!(loopback_port("mongodb://localhost:1"), Some(1));
        assert_eq!(loopback_port("mongodb://db.example:27017"), None);
        assert_eq!(loopback_port("nonsense"), None);
    }

    #[test]
    fn own_cpu_and_a_listener_are_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        assert_eq!(pid_listening(port), Some(std::process::id()));
        let before = Sample::take(Some(own()));
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed().as_millis() < 60 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let cores = before.cores_until(&Sample::take(Some(own())));
        assert!(cores.is_some_and(|c| c >= 0.0), "{cores:?} {x}");
        assert_eq!(before.cores_until(&Sample::take(None)), None);
        assert!(tree(std::process::id()).contains(&std::process::id()));
    }
}
