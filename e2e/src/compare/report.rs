//! The report files: `compare.json` (stable shape, read back by `gate`), `compare.md` (the table a
//! person reads) and the ratio chart. JSON keys are part of the tool's interface: add, never rename.

use crate::compare::correctness::{Correctness, FamilyStats, Mismatch};
use crate::compare::limits::ANSWER_SHOWN_CHARS_MAX;
use crate::compare::stats::{gate_passes, ratio};
use crate::compare::workloads::{Better, Measurement};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One row of the workload table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub target: Option<f64>,
    pub reference: Option<f64>,
    /// target / reference.
    pub ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct CorrectnessSummary {
    pub cases: usize,
    pub steps: usize,
    pub mismatches: usize,
    #[serde(default)]
    pub families: Vec<FamilyStats>,
    #[serde(default)]
    pub mismatch_list: Vec<MismatchEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MismatchEntry {
    pub case: String,
    pub step: usize,
    pub command: String,
    pub target: String,
    pub reference: String,
}

/// The whole `compare.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Report {
    pub target: String,
    pub reference: String,
    pub docs: u64,
    pub runs: usize,
    pub workloads: Vec<Row>,
    pub correctness: CorrectnessSummary,
}

/// Pair the two sides' measurements (same order, same names) into rows.
pub fn rows(target: &[Measurement], reference: &[Measurement]) -> Vec<Row> {
    target
        .iter()
        .map(|t| {
            let r = reference.iter().find(|r| r.name == t.name);
            let tv = t.value.as_ref().ok().copied();
            let rv = r.and_then(|r| r.value.as_ref().ok().copied());
            Row {
                name: t.name.to_string(),
                unit: t.unit.to_string(),
                better: t.better,
                target: tv,
                reference: rv,
                ratio: ratio(tv, rv),
                target_error: t.value.as_ref().err().cloned(),
                reference_error: match r {
                    Some(r) => r.value.as_ref().err().cloned(),
                    None => Some("not measured".into()),
                },
            }
        })
        .collect()
}

pub fn summary(c: &Correctness) -> CorrectnessSummary {
    CorrectnessSummary {
        cases: c.cases,
        steps: c.steps,
        mismatches: c.mismatches.len(),
        families: c.families.clone(),
        mismatch_list: c.mismatches.iter().map(entry).collect(),
    }
}

fn entry(m: &Mismatch) -> MismatchEntry {
    MismatchEntry {
        case: m.case.clone(),
        step: m.step,
        command: m.command.clone(),
        target: m.target.clone(),
        reference: m.reference.clone(),
    }
}

/// Hide `user:password@` in a connection string before it is written to a file.
pub fn redact_uri(uri: &str) -> String {
    match (uri.find("://"), uri.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &uri[..scheme], &uri[at + 1..])
        }
        _ => uri.to_string(),
    }
}

fn cell(value: Option<f64>, error: &Option<String>) -> String {
    match (value, error) {
        (Some(v), _) => format_value(v),
        (None, Some(e)) if !e.is_empty() => format!("error: {}", e.replace('|', "/")),
        _ => "n/a".into(),
    }
}

pub fn format_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// `compare.md`.
pub fn markdown(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# cairn-compare\n");
    let _ = writeln!(
        s,
        "- target: `{}`\n- reference: `{}`",
        report.target, report.reference
    );
    let _ = writeln!(
        s,
        "- dataset: {} user records, median of {} runs\n",
        report.docs, report.runs
    );
    let _ = writeln!(
        s,
        "| workload | unit | target | reference | ratio (target/reference) | better |"
    );
    let _ = writeln!(s, "| --- | --- | ---: | ---: | ---: | --- |");
    for r in &report.workloads {
        let ratio = r.ratio.map_or("n/a".into(), |x| format!("{x:.2}"));
        let better = match r.better {
            Better::Lower => "lower",
            Better::Higher => "higher",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            r.name,
            r.unit,
            cell(r.target, &r.target_error),
            cell(r.reference, &r.reference_error),
            ratio,
            better
        );
    }
    let c = &report.correctness;
    let _ = writeln!(
        s,
        "\n## Correctness\n\n{} cases, {} commands, {} mismatching cases.\n",
        c.cases, c.steps, c.mismatches
    );
    if !c.families.is_empty() {
        let _ = writeln!(
            s,
            "| family | cases | differing cases | commands | target: not implemented | reference: not implemented |"
        );
        let _ = writeln!(s, "| --- | ---: | ---: | ---: | ---: | ---: |");
        for f in &c.families {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                f.family,
                f.cases,
                f.mismatching_cases,
                f.steps,
                f.target_unsupported_steps,
                f.reference_unsupported_steps
            );
        }
        s.push('\n');
    }
    for m in &c.mismatch_list {
        let _ = writeln!(s, "### {} (step {})\n", m.case, m.step);
        let _ = writeln!(s, "- command: `{}`", clip(&m.command));
        let _ = writeln!(s, "- target: `{}`", clip(&m.target));
        let _ = writeln!(s, "- reference: `{}`\n", clip(&m.reference));
    }
    s
}

fn clip(text: &str) -> String {
    let mut t: String = text.chars().take(ANSWER_SHOWN_CHARS_MAX).collect();
    if t.len() < text.len() {
        t.push_str(" ...");
    }
    t.replace('`', "'")
}

/// Outcome of `cairn-compare gate`.
#[derive(Debug, PartialEq)]
pub enum GateResult {
    Pass {
        baseline: f64,
        run: f64,
    },
    Regressed {
        baseline: f64,
        run: f64,
    },
    /// The named ratio is missing or not a number in one of the files.
    Missing(String),
}

/// Compare ratio `name` of `run` against `baseline`. The name `correctness` gates on the number
/// of mismatching cases instead (threshold = how many more are tolerated).
pub fn gate(baseline: &Report, run: &Report, name: &str, threshold: f64) -> GateResult {
    if name == "correctness" {
        let (b, r) = (
            baseline.correctness.mismatches as f64,
            run.correctness.mismatches as f64,
        );
        return if r <= b + threshold {
            GateResult::Pass {
                baseline: b,
                run: r,
            }
        } else {
            GateResult::Regressed {
                baseline: b,
                run: r,
            }
        };
    }
    let find = |rep: &Report| rep.workloads.iter().find(|w| w.name == name).cloned();
    let (Some(b), Some(r)) = (find(baseline), find(run)) else {
        return GateResult::Missing(format!("no workload named {name:?}"));
    };
    let (Some(bv), Some(rv)) = (b.ratio, r.ratio) else {
        return GateResult::Missing(format!("{name:?} has no ratio (an error on one side?)"));
    };
    if gate_passes(bv, rv, r.better, threshold) {
        GateResult::Pass {
            baseline: bv,
            run: rv,
        }
    } else {
        GateResult::Regressed {
            baseline: bv,
            run: rv,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &'static str, value: Result<f64, String>) -> Measurement {
        Measurement {
            name,
            unit: "us/op",
            better: Better::Lower,
            value,
        }
    }

    fn report(ratio_value: f64) -> Report {
        let t = [
            m("findOne by _id", Ok(ratio_value * 10.0)),
            m("$group by key", Err("CommandNotFound (59)".into())),
        ];
        let r = [m("findOne by _id", Ok(10.0)), m("$group by key", Ok(3.0))];
        Report {
            workloads: rows(&t, &r),
            ..Report::default()
        }
    }

    #[test]
    fn json_has_the_documented_shape() {
        let json = serde_json::to_value(report(2.0)).expect("serialise");
        let w = &json["workloads"][0];
        for key in ["name", "unit", "target", "reference", "ratio"] {
            assert!(w.get(key).is_some(), "missing {key}");
        }
        assert_eq!(w["ratio"], 2.0);
        assert!(json["workloads"][1]["ratio"].is_null());
        assert_eq!(json["workloads"][1]["target_error"], "CommandNotFound (59)");
        assert!(json["correctness"]["cases"].is_number());
        assert!(json["correctness"]["mismatches"].is_number());
        let back: Report = serde_json::from_value(json).expect("read back");
        assert_eq!(back, report(2.0));
    }

    #[test]
    fn gate_passes_and_fails_by_threshold() {
        let base = report(1.0);
        assert!(matches!(
            gate(&base, &report(1.1), "findOne by _id", 1.2),
            GateResult::Pass { .. }
        ));
        assert!(matches!(
            gate(&base, &report(1.5), "findOne by _id", 1.2),
            GateResult::Regressed { .. }
        ));
        assert!(matches!(
            gate(&base, &report(1.0), "$group by key", 1.2),
            GateResult::Missing(_)
        ));
        assert!(matches!(
            gate(&base, &report(1.0), "nope", 1.2),
            GateResult::Missing(_)
        ));
        assert!(matches!(
            gate(&base, &base, "correctness", 0.0),
            GateResult::Pass { .. }
        ));
    }

    #[test]
    fn markdown_shows_errors_and_ratios_and_redacts() {
        let md = markdown(&report(2.0));
        assert!(md.contains("| findOne by _id | us/op | 20.00 | 10.00 | 2.00 | lower |"));
        assert!(md.contains("error: CommandNotFound (59)"));
        assert_eq!(
            redact_uri("mongodb://u:p@h:1/?x=1"),
            "mongodb://***@h:1/?x=1"
        );
        assert_eq!(redact_uri("mongodb://h:1"), "mongodb://h:1");
    }
}
