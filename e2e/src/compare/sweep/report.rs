//! The sweep's report: `sweep.json` (every repeat plus the per-cell medians; keys are part of
//! the tool's interface: add, never rename), `sweep.md` (the medians as tables, the durable
//! single insert against this machine's floor, PostgreSQL side by side) and `sweep.png` (RSS
//! and disk against N with the configured cache size as a level, point-read latency against N).

use crate::compare::plot::{self, Level, LogLog};
use crate::compare::report::{format_value, redact_uri};
use crate::compare::sweep::Config;
use crate::compare::sweep::docs::DOC_BYTES;
use crate::compare::table::{self, Point};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Row names (stable: the JSON and the docs refer to them).
pub mod names {
    pub const BULK: &str = "bulk load";
    pub const RSS_LOAD: &str = "RSS after load";
    pub const DISK_LOAD: &str = "disk after load";
    pub const DISK_LOAD_APPARENT: &str = "disk after load, file sizes";
    pub const READ_ID: &str = "point read by _id";
    pub const READ_ID_P99: &str = "point read by _id p99";
    pub const READ_K: &str = "point read by k";
    pub const READ_K_P99: &str = "point read by k p99";
    pub const RANGE: &str = "range scan 1,000 by k";
    pub const RSS_READS: &str = "RSS after reads";
    pub const INSERT_OUT_P50: &str = "insertOne p50, no checkpoint asked";
    pub const INSERT_OUT_P99: &str = "insertOne p99, no checkpoint asked";
    pub const INSERT_IN_P50: &str = "insertOne p50 during fsync";
    pub const INSERT_IN_P99: &str = "insertOne p99 during fsync";
    pub const INSERT_RATIO: &str = "p99 during fsync / p50 without";
    pub const INSERT_IN_COUNT: &str = "inserts during fsync";
    pub const FSYNC: &str = "fsync (forced checkpoint)";
    pub const SHUTDOWN: &str = "clean shutdown";
    pub const DISK_CLEAN: &str = "disk after clean shutdown";
    pub const OPEN_CLEAN_PING: &str = "open after clean shutdown: ping";
    pub const OPEN_CLEAN_FIND: &str = "open after clean shutdown: find";
    pub const RSS_OPEN: &str = "RSS after clean open";
    pub const OPEN_KILL_PING: &str = "open after SIGKILL: ping";
    pub const OPEN_KILL_FIND: &str = "open after SIGKILL: find";
    pub const LOST: &str = "acknowledged docs lost at SIGKILL";
    pub const WALL: &str = "wall time for this N";
    pub const SWEEP_ERROR: &str = "sweep error";
    pub const FDATASYNC_P50: &str = "fdatasync 4 KiB p50, in turns with cairn's inserts";
    pub const FDATASYNC_P99: &str = "fdatasync 4 KiB p99, in turns with cairn's inserts";
    pub const SMALL_SYNC_P50: &str = "fdatasync 512 B append p50, in turns with cairn's inserts";
    pub const SMALL_SYNC_P99: &str = "fdatasync 512 B append p99, in turns with cairn's inserts";
    pub const PG_SMALL_SYNC_P50: &str =
        "fdatasync 512 B append p50, in turns with PostgreSQL's inserts";
    pub const PG_SMALL_SYNC_P99: &str =
        "fdatasync 512 B append p99, in turns with PostgreSQL's inserts";
    pub const PG_FDATASYNC_P50: &str = "fdatasync 4 KiB p50, in turns with PostgreSQL's inserts";
    pub const PG_FDATASYNC_P99: &str = "fdatasync 4 KiB p99, in turns with PostgreSQL's inserts";
    pub const LOOPBACK_P50: &str = "loopback TCP round trip p50";
    pub const LOOPBACK_P99: &str = "loopback TCP round trip p99";
    pub const PG_BULK: &str = "PostgreSQL bulk insert";
    pub const PG_INSERT_P50: &str = "PostgreSQL single insert p50";
    pub const PG_INSERT_P99: &str = "PostgreSQL single insert p99";
}
use names as m;

/// The points of one whole sweep.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Repeat {
    pub cairn: Vec<Point>,
    pub floors: Vec<Point>,
    #[serde(default)]
    pub postgres: Vec<Point>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SweepReport {
    pub cairn_bin: String,
    pub cairn_version: String,
    pub server_args: Vec<String>,
    /// `--wiredTigerCacheSizeGB` among the server arguments, if given.
    pub cache_size_gb: Option<f64>,
    pub work_dir: String,
    pub doc_bytes: usize,
    pub in_flight: usize,
    pub repeats: usize,
    pub runs: usize,
    pub quick: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_uri: Option<String>,
    #[serde(default)]
    pub postgres_settings: Vec<(String, String)>,
    /// Per-cell medians over `raw`.
    pub cairn: Vec<Point>,
    pub floors: Vec<Point>,
    #[serde(default)]
    pub postgres: Vec<Point>,
    pub raw: Vec<Repeat>,
}

impl SweepReport {
    pub fn new(cfg: &Config, postgres_settings: Vec<(String, String)>, raw: Vec<Repeat>) -> Self {
        let pick = |f: fn(&Repeat) -> &Vec<Point>| -> Vec<Point> {
            table::medians(&raw.iter().map(|r| f(r).clone()).collect::<Vec<_>>())
        };
        SweepReport {
            cairn_bin: cfg.cairn_bin.display().to_string(),
            cairn_version: version(&cfg.cairn_bin),
            server_args: cfg.server_args.clone(),
            cache_size_gb: cache_size_gb(&cfg.server_args),
            work_dir: cfg.work_dir.display().to_string(),
            doc_bytes: DOC_BYTES,
            in_flight: cfg.in_flight,
            repeats: raw.len(),
            runs: cfg.runs,
            quick: cfg.quick,
            postgres_uri: cfg.pg.as_deref().map(redact_uri),
            postgres_settings,
            cairn: pick(|r| &r.cairn),
            floors: pick(|r| &r.floors),
            postgres: pick(|r| &r.postgres),
            raw,
        }
    }
}

/// `cairn --version`, first line.
fn version(bin: &std::path::Path) -> String {
    std::process::Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default()
}

/// The value of `--wiredTigerCacheSizeGB` (`--name value` or `--name=value`).
pub fn cache_size_gb(args: &[String]) -> Option<f64> {
    const FLAG: &str = "--wiredTigerCacheSizeGB";
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == FLAG {
            return it.next()?.parse().ok();
        }
        if let Some(v) = a.strip_prefix(FLAG).and_then(|r| r.strip_prefix('=')) {
            return v.parse().ok();
        }
    }
    None
}

fn cell(v: Option<f64>) -> String {
    v.map_or("n/a".into(), format_value)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.2}", a / b),
        _ => "n/a".into(),
    }
}

/// `sweep.md`.
pub fn markdown(r: &SweepReport) -> String {
    let mut s = String::from("# cairn-bench sweep\n\n");
    let _ = writeln!(s, "- cairn: `{}` ({})", r.cairn_bin, r.cairn_version);
    let args = if r.server_args.is_empty() {
        "(none)".to_string()
    } else {
        format!("`{}`", r.server_args.join(" "))
    };
    let _ = writeln!(s, "- extra server arguments: {args}");
    let _ = writeln!(
        s,
        "- {}-byte documents, 2 secondary indexes (k: int, s: string), insertMany of 1,000 with {} in flight",
        r.doc_bytes, r.in_flight
    );
    let _ = writeln!(
        s,
        "- median of {} sweep(s); reads: median of {} run means{}\n",
        r.repeats,
        r.runs,
        if r.quick { "; --quick phases" } else { "" }
    );
    s.push_str("## cairn\n\n");
    s.push_str(&table::by_count(&r.cairn));
    s.push_str("\n## This machine's floors\n\n");
    s.push_str(&table::by_count(&r.floors));
    s.push_str("\n## Durable writes against the floor\n\n");
    s.push_str(&floor_table(r));
    if !r.postgres_settings.is_empty() {
        let set: Vec<String> = r
            .postgres_settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "\nPostgreSQL: {}", set.join(", "));
    }
    s
}

/// Per N: bulk docs/s and single-insert p50/p99 for cairn (and PostgreSQL), each against the
/// floor sampled in turns with its inserts (fdatasync + loopback round trip, same percentile).
fn floor_table(r: &SweepReport) -> String {
    let pg = !r.postgres.is_empty();
    let mut s = String::from("| N | row | cairn | floor | cairn / floor |");
    if pg {
        s.push_str(" PostgreSQL | floor | PostgreSQL / floor | cairn / PostgreSQL |");
    }
    let cols = if pg { 9 } else { 5 };
    let _ = writeln!(s, "\n| ---: | --- |{}", " ---: |".repeat(cols - 2));
    for c in &r.cairn {
        let f = r.floors.iter().find(|p| p.docs == c.docs);
        let p = r.postgres.iter().find(|p| p.docs == c.docs);
        let floor = |sync: &str, rtt: &str| Some(f?.get(sync)? + f?.get(rtt)?);
        let rows = [
            ("bulk insert, docs/s", m::BULK, m::PG_BULK, None, None),
            (
                "durable single insert p50, us",
                m::INSERT_OUT_P50,
                m::PG_INSERT_P50,
                floor(m::FDATASYNC_P50, m::LOOPBACK_P50),
                floor(m::PG_FDATASYNC_P50, m::LOOPBACK_P50),
            ),
            (
                "durable single insert p99, us",
                m::INSERT_OUT_P99,
                m::PG_INSERT_P99,
                floor(m::FDATASYNC_P99, m::LOOPBACK_P99),
                floor(m::PG_FDATASYNC_P99, m::LOOPBACK_P99),
            ),
        ];
        for (label, ours, theirs, our_floor, their_floor) in rows {
            let (cv, pv) = (c.get(ours), p.and_then(|p| p.get(theirs)));
            let floor_cell = |f: Option<f64>| f.map_or("-".into(), format_value);
            let _ = write!(
                s,
                "| {} | {label} | {} | {} | {} |",
                c.docs,
                cell(cv),
                floor_cell(our_floor),
                ratio(cv, our_floor)
            );
            if pg {
                let _ = write!(
                    s,
                    " {} | {} | {} | {} |",
                    cell(pv),
                    floor_cell(their_floor),
                    ratio(pv, their_floor),
                    ratio(cv, pv)
                );
            }
            s.push('\n');
        }
    }
    s
}

/// `sweep.png`: two log-log panels.
pub fn plot(r: &SweepReport) -> Result<Vec<u8>, String> {
    let memory = table::series(&r.cairn, |n| {
        [m::RSS_LOAD, m::RSS_READS, m::RSS_OPEN, m::DISK_LOAD].contains(&n)
    });
    let reads = table::series(&r.cairn, |n| {
        [m::READ_ID, m::READ_ID_P99, m::READ_K, m::READ_K_P99].contains(&n)
    });
    let levels: Vec<Level> = r
        .cache_size_gb
        .map(|gb| Level {
            name: format!("cache {gb} GB"),
            value: gb * 1024.0,
        })
        .into_iter()
        .collect();
    let tick = |d: i32| plot::decade_label_si(d);
    plot::panels(&[
        LogLog {
            title: "cairn sweep: memory and disk (MiB)",
            caption: "documents (log) vs MiB (log)",
            series: &memory,
            levels: &levels,
            y_tick: &tick,
        },
        LogLog {
            title: "cairn sweep: point reads (us)",
            caption: "documents (log) vs microseconds (log)",
            series: &reads,
            levels: &[],
            y_tick: &tick,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::table::Value;
    use crate::compare::workloads::Better;

    fn point(docs: u64, values: &[(&str, f64)]) -> Point {
        Point {
            docs,
            workloads: values
                .iter()
                .map(|(n, v)| Value::new(n, "us", Better::Lower, Ok(*v)))
                .collect(),
        }
    }

    fn report(pg: bool) -> SweepReport {
        let cfg = Config {
            cairn_bin: "/nonexistent/cairn".into(),
            work_dir: "/tmp/w".into(),
            server_args: vec!["--wiredTigerCacheSizeGB=0.5".into()],
            counts: vec![1000],
            repeats: 1,
            runs: 3,
            in_flight: 4,
            quick: false,
            pg: pg.then(|| "postgresql://u:secret@h:5432/db".to_string()),
            keep_data: false,
        };
        let cairn = vec![
            point(
                1000,
                &[
                    (m::BULK, 50_000.0),
                    (m::INSERT_OUT_P50, 300.0),
                    (m::READ_ID, 150.0),
                ],
            ),
            point(
                10_000,
                &[
                    (m::BULK, 40_000.0),
                    (m::INSERT_OUT_P50, 330.0),
                    (m::READ_ID, 160.0),
                ],
            ),
        ];
        let floors = vec![
            point(
                1000,
                &[
                    (m::FDATASYNC_P50, 100.0),
                    (m::LOOPBACK_P50, 50.0),
                    (m::PG_FDATASYNC_P50, 250.0),
                ],
            ),
            point(
                10_000,
                &[(m::FDATASYNC_P50, 100.0), (m::LOOPBACK_P50, 50.0)],
            ),
        ];
        let postgres = if pg {
            vec![point(
                1000,
                &[(m::PG_BULK, 25_000.0), (m::PG_INSERT_P50, 600.0)],
            )]
        } else {
            Vec::new()
        };
        SweepReport::new(
            &cfg,
            Vec::new(),
            vec![Repeat {
                cairn,
                floors,
                postgres,
            }],
        )
    }

    /// Every row of each Markdown table has as many cells as its header.
    fn assert_tables_are_rectangular(md: &str) {
        let mut width = None;
        for line in md.lines() {
            if !line.starts_with('|') {
                width = None;
                continue;
            }
            let cells = line.matches('|').count();
            assert_eq!(*width.get_or_insert(cells), cells, "{line}");
        }
    }

    #[test]
    fn cache_size_is_found_in_either_spelling() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            cache_size_gb(&args(&["--wiredTigerCacheSizeGB", "2"])),
            Some(2.0)
        );
        assert_eq!(
            cache_size_gb(&args(&["--x", "--wiredTigerCacheSizeGB=0.25"])),
            Some(0.25)
        );
        assert_eq!(cache_size_gb(&args(&["--wiredTigerCacheSizeGBx=1"])), None);
        assert_eq!(cache_size_gb(&[]), None);
    }

    #[test]
    fn markdown_puts_systems_against_the_floor() {
        let md = markdown(&report(true));
        assert!(
            md.contains(
                "| 1000 | durable single insert p50, us | 300 | 150 | 2.00 | 600 | 300 | 2.00 | 0.50 |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 1000 | bulk insert, docs/s | 50000 | - | n/a | 25000 | - | n/a | 2.00 |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 10000 | durable single insert p50, us | 330 | 150 | 2.20 | n/a | - | n/a | n/a |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| point read by _id | us | 150 | 160 |"),
            "{md}"
        );
        assert!(md.contains("`--wiredTigerCacheSizeGB=0.5`"));
        assert_tables_are_rectangular(&md);
        let md = markdown(&report(false));
        assert_tables_are_rectangular(&md);
        assert!(
            md.contains("| 1000 | durable single insert p50, us | 300 | 150 | 2.00 |"),
            "{md}"
        );
        let r = report(true);
        assert_eq!(
            r.postgres_uri.as_deref(),
            Some("postgresql://***@h:5432/db")
        );
        assert_eq!(r.cache_size_gb, Some(0.5));
        let back: SweepReport =
            serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("parse");
        assert_eq!(back, r);
        assert_eq!(&plot(&r).expect("png")[1..4], b"PNG");
    }
}
