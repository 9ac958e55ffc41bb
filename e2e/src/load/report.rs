//! The run as files: every round's figures and their medians as JSON, the medians as Markdown
//! tables (per system, side by side with ratios, scaling over connection counts, and issue 11's
//! goals with met / not met), and a PNG with throughput against connections (log-log) for the
//! YCSB workloads and for the durable inserts beside their group-commit floor.

use crate::compare::plot::{self, LogLog, Series};
use crate::compare::stats::median;
use crate::load::target::MongoClient;
use crate::load::{Measurement, Run};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const FLOOR: &str = "floor";
/// Issue 11's goals: mixed reads at 8 and 64 connections reach this multiple of 1 connection;
/// durable inserts at 8 and 64 connections reach this share of the group-commit floor.
pub const READ_SCALING_GOAL: f64 = 1.8;
pub const FLOOR_SHARE_GOAL: f64 = 0.6;
const GOAL_CONNECTIONS: [usize; 2] = [8, 64];

/// Medians over the rounds of one (system, workload, connections).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub system: String,
    pub workload: String,
    pub connections: usize,
    pub rounds: usize,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub client_cores: Option<f64>,
    pub server_cores: Option<f64>,
    /// Server CPU per operation: server cores / throughput.
    pub server_us_per_op: Option<f64>,
    pub errors: u64,
    pub missing: u64,
}

fn med(ms: &[&Measurement], f: impl Fn(&Measurement) -> f64) -> f64 {
    median(&ms.iter().map(|m| f(m)).collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

fn med_opt(ms: &[&Measurement], f: impl Fn(&Measurement) -> Option<f64>) -> Option<f64> {
    median(&ms.iter().filter_map(|m| f(m)).collect::<Vec<_>>())
}

/// One summary per (system, workload, connections), in first-seen order of workloads.
pub fn summaries(run: &Run) -> Vec<Summary> {
    fn rank(seen: &mut Vec<String>, name: &str) -> usize {
        if !seen.iter().any(|s| s == name) {
            seen.push(name.to_string());
        }
        seen.iter().position(|s| s == name).unwrap_or(0)
    }
    let (mut workloads, mut systems) = (Vec::new(), Vec::new());
    let mut groups: BTreeMap<(usize, usize, usize), Vec<&Measurement>> = BTreeMap::new();
    for m in &run.measurements {
        let w = rank(&mut workloads, &m.workload);
        let s = rank(&mut systems, &m.system);
        groups.entry((w, m.connections, s)).or_default().push(m);
    }
    groups
        .into_values()
        .map(|ms| {
            let ops_per_s = med(&ms, |m| m.ops_per_s);
            let server_cores = med_opt(&ms, |m| m.server_cores);
            Summary {
                system: ms[0].system.clone(),
                workload: ms[0].workload.clone(),
                connections: ms[0].connections,
                rounds: ms.len(),
                ops_per_s,
                p50_us: med(&ms, |m| m.p50_us),
                p99_us: med(&ms, |m| m.p99_us),
                p999_us: med(&ms, |m| m.p999_us),
                client_cores: med_opt(&ms, |m| m.client_cores),
                server_cores,
                server_us_per_op: server_cores
                    .filter(|_| ops_per_s > 0.0)
                    .map(|c| c * 1e6 / ops_per_s),
                errors: ms.iter().map(|m| m.errors).sum(),
                missing: ms.iter().map(|m| m.missing).sum(),
            }
        })
        .collect()
}

fn find<'a>(s: &'a [Summary], system: &str, workload: &str, c: usize) -> Option<&'a Summary> {
    s.iter()
        .find(|x| x.system == system && x.workload == workload && x.connections == c)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

/// Systems other than the floor, in first-seen order.
fn systems(s: &[Summary]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in s {
        if x.system != FLOOR && !out.contains(&x.system) {
            out.push(x.system.clone());
        }
    }
    out
}

fn workloads(s: &[Summary]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in s {
        if !out.contains(&x.workload) {
            out.push(x.workload.clone());
        }
    }
    out
}

fn connection_counts(s: &[Summary]) -> Vec<usize> {
    let mut out: Vec<usize> = s.iter().map(|x| x.connections).collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn header(run: &Run) -> String {
    let mode = run.rate.map_or("closed loop".to_string(), |r| {
        format!("open loop at {r:.0} ops/s")
    });
    let client = match run.mongo_client {
        MongoClient::Driver => "the official Rust driver",
        MongoClient::Wire => "cairn-load's bare wire client (--mongo-client wire)",
    };
    format!(
        "{} records of {} fields x {} B ({} B a document; the group-commit floor appends as \
         many per acknowledgement); {} round(s) of {:.1} s per cell after {:.1} s warm-up; \
         {mode}; MongoDB client: {client}; load average {} at the start, {} at the end.\n",
        run.records,
        run.shape.fields,
        run.shape.field_bytes,
        run.shape.document_bytes(),
        run.rounds,
        run.measure_s,
        run.warmup_s,
        run.load_average_start,
        run.load_average_end
    )
}

fn per_system_table(s: &[Summary]) -> String {
    let mut out = String::from(
        "| workload | conns | system | ops/s | p50 µs | p99 µs | p99.9 µs | server cores | \
         server µs/op | client cores | errors | missing |\n\
         | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for x in s {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {} |",
            x.workload,
            x.connections,
            x.system,
            x.ops_per_s,
            x.p50_us,
            x.p99_us,
            x.p999_us,
            opt(x.server_cores, 2),
            opt(x.server_us_per_op, 0),
            opt(x.client_cores, 2),
            x.errors,
            x.missing
        );
    }
    out
}

fn side_by_side(s: &[Summary]) -> String {
    let sys = systems(s);
    let has_floor = s.iter().any(|x| x.system == FLOOR);
    let mut out = String::from("| workload | conns |");
    let mut rule = String::from("| --- | ---: |");
    for name in &sys {
        let _ = write!(out, " {name} ops/s |");
        rule.push_str(" ---: |");
    }
    if sys.len() == 2 {
        let _ = write!(out, " {} / {} |", sys[0], sys[1]);
        rule.push_str(" ---: |");
    }
    if has_floor {
        out.push_str(" floor acks/s |");
        rule.push_str(" ---: |");
        for name in &sys {
            let _ = write!(out, " {name} / floor |");
            rule.push_str(" ---: |");
        }
    }
    let _ = writeln!(out, "\n{rule}");
    for w in workloads(s) {
        for c in connection_counts(s) {
            let get = |system: &str| find(s, system, &w, c).map(|x| x.ops_per_s);
            if sys.iter().all(|n| get(n).is_none()) {
                continue;
            }
            let _ = write!(out, "| {w} | {c} |");
            for name in &sys {
                let _ = write!(out, " {} |", opt(get(name), 0));
            }
            if sys.len() == 2 {
                let _ = write!(out, " {} |", opt(ratio(get(&sys[0]), get(&sys[1])), 2));
            }
            if has_floor {
                let floor = get(FLOOR);
                let _ = write!(out, " {} |", opt(floor, 0));
                for name in &sys {
                    let _ = write!(out, " {} |", opt(ratio(get(name), floor), 2));
                }
            }
            out.push('\n');
        }
    }
    out
}

fn scaling(s: &[Summary]) -> String {
    let counts: Vec<usize> = connection_counts(s)
        .into_iter()
        .filter(|c| *c != 1)
        .collect();
    let mut out = String::from("| workload | system |");
    let mut rule = String::from("| --- | --- |");
    for c in &counts {
        let _ = write!(out, " {c} conns / 1 |");
        rule.push_str(" ---: |");
    }
    let _ = writeln!(out, "\n{rule}");
    for w in workloads(s) {
        for name in systems(s).iter().chain([FLOOR.to_string()].iter()) {
            let Some(one) = find(s, name, &w, 1) else {
                continue;
            };
            let _ = write!(out, "| {w} | {name} |");
            for c in &counts {
                let r = ratio(
                    find(s, name, &w, *c).map(|x| x.ops_per_s),
                    Some(one.ops_per_s),
                );
                let _ = write!(out, " {} |", opt(r, 2));
            }
            out.push('\n');
        }
    }
    out
}

fn verdict(v: Option<f64>, goal: f64) -> &'static str {
    match v {
        Some(v) if v >= goal => "**met**",
        Some(_) => "**not met**",
        None => "not measured",
    }
}

/// Issue 11's goals for the first system (the MongoDB URI), figure and verdict per line.
pub fn goals(s: &[Summary]) -> String {
    let Some(subject) = systems(s).into_iter().next() else {
        return String::new();
    };
    let mut out = String::from("| goal | figure | met? |\n| --- | --- | --- |\n");
    let ops = |w: &str, c: usize| find(s, &subject, w, c).map(|x| x.ops_per_s);
    for w in ["C", "B"] {
        for c in GOAL_CONNECTIONS {
            let r = ratio(ops(w, c), ops(w, 1));
            let _ = writeln!(
                out,
                "| workload {w} at {c} connections ≥ {READ_SCALING_GOAL}x 1 connection | {}x ({} vs {} ops/s) | {} |",
                opt(r, 2),
                opt(ops(w, c), 0),
                opt(ops(w, 1), 0),
                verdict(r, READ_SCALING_GOAL)
            );
        }
    }
    for c in GOAL_CONNECTIONS {
        let floor = find(s, FLOOR, "insert", c).map(|x| x.ops_per_s);
        let r = ratio(ops("insert", c), floor);
        let _ = writeln!(
            out,
            "| durable inserts at {c} connections ≥ {:.0}% of the group-commit floor | {} ({} vs {} acks/s) | {} |",
            FLOOR_SHARE_GOAL * 100.0,
            r.map_or("-".to_string(), |r| format!("{:.0}%", r * 100.0)),
            opt(ops("insert", c), 0),
            opt(floor, 0),
            verdict(r, FLOOR_SHARE_GOAL)
        );
    }
    if let Some(other) = systems(s).get(1) {
        let mut rows = Vec::new();
        for x in s.iter().filter(|x| x.system == subject) {
            if let Some(o) = find(s, other, &x.workload, x.connections) {
                rows.push(ratio(Some(x.ops_per_s), Some(o.ops_per_s)).unwrap_or(0.0));
            }
        }
        let ahead = rows.iter().filter(|r| **r > 1.0).count();
        let _ = writeln!(
            out,
            "| every row ahead of {other} | {ahead} of {} rows ahead (ratios in the side-by-side table) | {} |",
            rows.len(),
            if !rows.is_empty() && ahead == rows.len() {
                "**met**"
            } else {
                "**not met**"
            }
        );
    }
    out
}

pub fn markdown(run: &Run) -> String {
    let s = summaries(run);
    let mut out = String::from("# cairn-load\n\n");
    out.push_str(&header(run));
    for (name, pid) in &run.server_cpu_watched {
        let _ = writeln!(
            out,
            "\nServer CPU of {name}: {}.",
            pid.map_or("not found (pass its pid)".to_string(), |p| format!(
                "pid {p}"
            ))
        );
    }
    if !run.postgres_settings.is_empty() {
        let settings: Vec<String> = run
            .postgres_settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(out, "\nPostgreSQL: {}.", settings.join(", "));
    }
    let _ = write!(
        out,
        "\n## Medians over rounds\n\n{}\n## Side by side\n\n{}\n## Scaling over connections\n\n{}\n## Goals\n\n{}",
        per_system_table(&s),
        side_by_side(&s),
        scaling(&s),
        goals(&s)
    );
    out
}

pub fn json(run: &Run) -> Result<String, String> {
    let value = serde_json::json!({ "run": run, "summaries": summaries(run) });
    serde_json::to_string_pretty(&value).map_err(|e| e.to_string())
}

/// PNG: ops/s against connections for the YCSB workloads, and for the durable inserts.
pub fn plot(run: &Run) -> Result<Vec<u8>, String> {
    let s = summaries(run);
    let line = |system: &str, w: &str| Series {
        name: format!("{w} {system}"),
        points: s
            .iter()
            .filter(|x| x.system == system && x.workload == w && x.ops_per_s > 0.0)
            .map(|x| (x.connections as f64, x.ops_per_s))
            .collect(),
    };
    let mut reads = Vec::new();
    let mut inserts = Vec::new();
    for w in workloads(&s) {
        for name in systems(&s).iter().chain([FLOOR.to_string()].iter()) {
            let l = line(name, &w);
            if l.points.is_empty() {
                continue;
            }
            if w == "insert" {
                inserts.push(l);
            } else {
                reads.push(l);
            }
        }
    }
    let tick = |d: i32| plot::decade_label_si(d);
    plot::panels(&[
        LogLog {
            title: "YCSB workloads: ops/s",
            caption: "connections (log) vs operations per second (log)",
            series: &reads,
            levels: &[],
            y_tick: &tick,
        },
        LogLog {
            title: "durable single inserts: acks/s",
            caption: "connections (log) vs acknowledgements per second (log)",
            series: &inserts,
            levels: &[],
            y_tick: &tick,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::workload::Shape;

    fn m(system: &str, w: &str, c: usize, round: usize, ops_per_s: f64) -> Measurement {
        let mut m = Measurement::new(system, crate::load::workload::Workload::C, c, round);
        m.workload = w.to_string();
        m.ops_per_s = ops_per_s;
        m.server_cores = Some(0.5);
        m
    }

    fn run(ms: Vec<Measurement>) -> Run {
        Run {
            mongo_client: MongoClient::Driver,
            measurements: ms,
            load_average_start: "1.0 1.0 1.0".into(),
            load_average_end: "2.0 2.0 2.0".into(),
            records: 10,
            shape: Shape {
                fields: 10,
                field_bytes: 100,
                scan_length_max: 100,
            },
            rounds: 3,
            warmup_s: 1.0,
            measure_s: 5.0,
            rate: None,
            postgres_settings: vec![],
            server_cpu_watched: vec![("cairn".into(), Some(1))],
        }
    }

    #[test]
    fn medians_ratios_and_goals() {
        let mut ms = Vec::new();
        for (round, f) in [(0, 1.0), (1, 3.0), (2, 2.0)] {
            ms.push(m("cairn", "C", 1, round, 1000.0 * f));
            ms.push(m("cairn", "C", 8, round, 4000.0 * f));
            ms.push(m("PostgreSQL", "C", 1, round, 500.0 * f));
            ms.push(m("PostgreSQL", "C", 8, round, 8000.0 * f));
            ms.push(m("cairn", "insert", 8, round, 600.0 * f));
            ms.push(m(FLOOR, "insert", 8, round, 2000.0 * f));
        }
        let r = run(ms);
        let s = summaries(&r);
        let c1 = find(&s, "cairn", "C", 1).expect("row");
        assert_eq!((c1.ops_per_s, c1.rounds), (2000.0, 3));
        assert_eq!(c1.server_us_per_op, Some(250.0));
        let md = markdown(&r);
        assert!(md.contains("| C | 1 | 2000 | 1000 | 2.00 |"), "{md}");
        assert!(md.contains("| C | cairn | 4.00 |"), "{md}");
        assert!(
            md.contains("| 4.00x (8000 vs 2000 ops/s) | **met** |"),
            "{md}"
        );
        assert!(
            md.contains("| 30% (1200 vs 4000 acks/s) | **not met** |"),
            "{md}"
        );
        assert!(md.contains("1 of 2 rows ahead"), "{md}");
        assert!(json(&r).expect("json").contains("\"summaries\""));
        assert_eq!(&plot(&r).expect("png")[1..4], b"PNG");
    }
}
