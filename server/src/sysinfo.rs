//! What the machine gives the process: physical memory (`/proc/meminfo`) and the memory limit of
//! its cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`, the smallest along the path to the
//! root), and mongod's default cache size derived from them. Parsing is kept apart from reading
//! the files so that the rules are unit-tested; a file that cannot be read means "no limit".

use crate::limits::CACHE_SIZE_BYTES_DEFAULT_MIN;
use std::path::{Path, PathBuf};

const GIB: u64 = 1024 * 1024 * 1024;
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
pub fn parse_meminfo_total(text: &str) -> Option<u64> {
    let kb = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    kb.checked_mul(1024)
}

/// A cgroup limit file's value: `None` for v2's "max" or anything unreadable.
pub fn parse_cgroup_limit(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok()
}

/// The process's cgroup paths from `/proc/self/cgroup`: (v2 unified path, v1 memory path).
pub fn cgroup_paths(text: &str) -> (Option<String>, Option<String>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

/// The smallest limit in `file` of the cgroup directory `dir` and of its ancestors up to `root`.
fn limit_along(root: &Path, cgroup: &str, file: &str) -> Option<u64> {
    let mut dir: PathBuf = root.join(cgroup.trim_start_matches('/'));
    let mut best: Option<u64> = None;
    loop {
        if let Some(v) = std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|t| parse_cgroup_limit(&t))
        {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            return best;
        }
    }
}

/// The memory limit of this process's cgroup, if one is set.
pub fn cgroup_memory_limit_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let (v2, v1) = cgroup_paths(&text);
    let root = Path::new(CGROUP_ROOT);
    let v2_limit = v2.and_then(|p| {
        limit_along(root, &p, "memory.max")
            .or_else(|| limit_along(&root.join("unified"), &p, "memory.max"))
    });
    let v1_limit = v1.and_then(|p| limit_along(&root.join("memory"), &p, "memory.limit_in_bytes"));
    match (v2_limit, v1_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Physical memory in bytes (0 when `/proc/meminfo` cannot be read).
pub fn physical_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_meminfo_total(&t))
        .unwrap_or(0)
}

/// The memory the process may use: physical memory, or the cgroup's limit when it is smaller.
pub fn effective_memory(physical: u64, cgroup_limit: Option<u64>) -> u64 {
    match cgroup_limit {
        Some(l) if physical == 0 || l < physical => l,
        _ => physical,
    }
}

/// The memory available to this process (see [`effective_memory`]).
pub fn memory_bytes() -> u64 {
    effective_memory(physical_memory_bytes(), cgroup_memory_limit_bytes())
}

/// mongod's default cache: half of (memory less 1 GB), at least 256 MB.
pub fn default_cache_bytes(memory: u64) -> u64 {
    (memory.saturating_sub(GIB) / 2).max(CACHE_SIZE_BYTES_DEFAULT_MIN)
}

/// This machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rule() {
        let mib = 1024 * 1024;
        // 16 GiB: (16 - 1) / 2 = 7.5 GiB.
        assert_eq!(default_cache_bytes(16 * GIB), 15 * GIB / 2);
        // 1.5 GiB would give 256 MiB exactly; 1 GiB and less are lifted to the floor.
        assert_eq!(default_cache_bytes(GIB + 512 * mib), 256 * mib);
        assert_eq!(default_cache_bytes(GIB), 256 * mib);
        assert_eq!(default_cache_bytes(0), 256 * mib);
        assert_eq!(default_cache_bytes(2 * GIB), 512 * mib);
    }

    #[test]
    fn cgroup_limit_wins_when_smaller() {
        assert_eq!(effective_memory(16 * GIB, Some(2 * GIB)), 2 * GIB);
        assert_eq!(effective_memory(16 * GIB, Some(32 * GIB)), 16 * GIB);
        // cgroup v1's "unlimited" is a huge number.
        assert_eq!(
            effective_memory(16 * GIB, Some(9_223_372_036_854_771_712)),
            16 * GIB
        );
        assert_eq!(effective_memory(16 * GIB, None), 16 * GIB);
        assert_eq!(effective_memory(0, Some(GIB)), GIB);
        assert_eq!(
            default_cache_bytes(effective_memory(64 * GIB, Some(3 * GIB))),
            GIB
        );
    }

    #[test]
    fn parsing() {
        let meminfo = "MemTotal:       24558600 kB\nMemFree:         6000000 kB\n";
        assert_eq!(parse_meminfo_total(meminfo), Some(24_558_600 * 1024));
        assert_eq!(parse_meminfo_total("nothing"), None);
        assert_eq!(parse_cgroup_limit("max\n"), None);
        assert_eq!(parse_cgroup_limit("2147483648\n"), Some(2 * GIB));
        let v2 = "0::/system.slice/cairn.service\n";
        assert_eq!(
            cgroup_paths(v2),
            (Some("/system.slice/cairn.service".into()), None)
        );
        let v1 = "4:memory:/docker/abc\n3:cpuset:/\n0::/\n";
        assert_eq!(
            cgroup_paths(v1),
            (Some("/".into()), Some("/docker/abc".into()))
        );
        let joined = "5:cpu,memory:/x\n";
        assert_eq!(cgroup_paths(joined), (None, Some("/x".into())));
    }

    #[test]
    fn limits_along_the_path() {
        let root = tempfile::tempdir().unwrap();
        let leaf = root.path().join("a/b");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(root.path().join("a/memory.max"), "1073741824\n").unwrap();
        std::fs::write(leaf.join("memory.max"), "max\n").unwrap();
        assert_eq!(limit_along(root.path(), "/a/b", "memory.max"), Some(GIB));
        assert_eq!(limit_along(root.path(), "/", "memory.max"), None);
        assert_eq!(limit_along(root.path(), "/missing", "memory.max"), None);
    }
}
