//! Runs the differential cases: each case on both servers at once, each side in its own fresh
//! database with the same name, every reply normalised and compared as rendered text. The first
//! difference in a case is reported with both answers; later steps of that case still run (their
//! differences are usually consequences) but are not listed again.

use crate::compare::cases::{self, Case, Step};
use crate::compare::corpus;
use crate::compare::limits::STEP_TIMEOUT;
use crate::compare::normalize::{Normalizer, error_doc, render_doc, sort_first_batch};
use bson::{Document, doc};
use mongodb::Client;
use mongodb::error::ErrorKind;
use serde::Serialize;

/// One case whose answers differ.
#[derive(Clone, Debug, Serialize)]
pub struct Mismatch {
    pub case: String,
    pub family: String,
    pub step: usize,
    pub command: String,
    pub target: String,
    pub reference: String,
}

/// Per command family: how much agreed, and how much each side does not implement at all.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct FamilyStats {
    pub family: String,
    pub cases: usize,
    pub mismatching_cases: usize,
    pub steps: usize,
    /// Steps answered with CommandNotFound (59) or NotImplemented (238).
    pub target_unsupported_steps: usize,
    pub reference_unsupported_steps: usize,
}

/// Totals for the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Correctness {
    pub cases: usize,
    pub steps: usize,
    pub mismatches: Vec<Mismatch>,
    pub families: Vec<FamilyStats>,
    /// Every step of every differing case, both answers: later steps often explain the first.
    pub transcripts: Vec<String>,
}

/// Error codes meaning "this server does not do that at all" rather than "you asked wrongly".
const UNSUPPORTED_CODES: [i32; 2] = [59, 238];

fn unsupported_steps(answers: &[Document]) -> usize {
    answers
        .iter()
        .filter(|a| a.get_f64("ok").is_ok_and(|ok| ok == 0.0))
        .filter(|a| {
            a.get_i32("code")
                .is_ok_and(|c| UNSUPPORTED_CODES.contains(&c))
        })
        .count()
}

/// The stats entry of `family`, created in first-seen order.
fn family_entry<'a>(families: &'a mut Vec<FamilyStats>, family: &str) -> &'a mut FamilyStats {
    let i = match families.iter().position(|f| f.family == family) {
        Some(i) => i,
        None => {
            families.push(FamilyStats {
                family: family.to_string(),
                ..FamilyStats::default()
            });
            families.len() - 1
        }
    };
    &mut families[i]
}

/// Run every case on both servers; `run_id` keeps database names unique per invocation.
/// `only`: run just the cases whose name contains it.
pub async fn run(
    target: &Client,
    reference: &Client,
    only: Option<&str>,
    run_id: &str,
) -> Correctness {
    let list: Vec<Case> = cases::all()
        .into_iter()
        .filter(|c| only.is_none_or(|o| c.name.contains(o)))
        .collect();
    let mut out = Correctness {
        cases: list.len(),
        ..Correctness::default()
    };
    for (i, case) in list.iter().enumerate() {
        let db = format!("cmp_{run_id}_{i}");
        let (t, r) = tokio::join!(run_case(target, &db, case), run_case(reference, &db, case));
        out.steps += case.steps.len();
        let stats = family_entry(&mut out.families, case.family);
        stats.cases += 1;
        stats.steps += case.steps.len();
        stats.target_unsupported_steps += unsupported_steps(&t);
        stats.reference_unsupported_steps += unsupported_steps(&r);
        if let Some(m) = first_difference(case, &t, &r) {
            stats.mismatching_cases += 1;
            out.mismatches.push(m);
            out.transcripts.push(transcript(case, &t, &r));
        }
    }
    out
}

/// All steps of a case with both sides' answers, marking the ones that differ.
pub fn transcript(case: &Case, target: &[Document], reference: &[Document]) -> String {
    let mut s = format!("== {} ({})\n", case.name, case.family);
    for (i, step) in case.steps.iter().enumerate() {
        let t = target.get(i).map(render_doc).unwrap_or_default();
        let r = reference.get(i).map(render_doc).unwrap_or_default();
        let mark = if t == r { "  " } else { "!!" };
        s.push_str(&format!("{mark} step {i}: {}\n", render_doc(&step.command)));
        s.push_str(&format!("   target:    {t}\n"));
        if t != r {
            s.push_str(&format!("   reference: {r}\n"));
        }
    }
    s
}

/// Compare two sides' answers step by step.
pub fn first_difference(
    case: &Case,
    target: &[Document],
    reference: &[Document],
) -> Option<Mismatch> {
    for (i, step) in case.steps.iter().enumerate() {
        let t = target.get(i).map(render_doc).unwrap_or_default();
        let r = reference.get(i).map(render_doc).unwrap_or_default();
        if t != r {
            return Some(Mismatch {
                case: case.name.clone(),
                family: case.family.to_string(),
                step: i,
                command: render_doc(&step.command),
                target: t,
                reference: r,
            });
        }
    }
    None
}

/// Drop, run the steps, drop again; the answers are normalised within the case.
async fn run_case(client: &Client, db_name: &str, case: &Case) -> Vec<Document> {
    let db = client.database(db_name);
    let _ = tokio::time::timeout(STEP_TIMEOUT, db.drop()).await;
    let mut normalizer = Normalizer::new(corpus::known_object_ids());
    let mut answers = Vec::with_capacity(case.steps.len());
    let mut cursor_id = 0_i64;
    for step in &case.steps {
        answers.push(run_step(&db, step, &mut normalizer, &mut cursor_id).await);
    }
    let _ = tokio::time::timeout(STEP_TIMEOUT, db.drop()).await;
    answers
}

async fn run_step(
    db: &mongodb::Database,
    step: &Step,
    normalizer: &mut Normalizer,
    cursor_id: &mut i64,
) -> Document {
    let command = if step.follow_cursor {
        with_cursor_id(&step.command, *cursor_id)
    } else {
        step.command.clone()
    };
    let result = tokio::time::timeout(STEP_TIMEOUT, db.run_command(command)).await;
    match result {
        Err(_) => doc! {"clientError": "timeout"},
        Ok(Ok(reply)) => {
            if let Ok(id) = reply.get_document("cursor").and_then(|c| c.get_i64("id")) {
                *cursor_id = id;
            }
            let mut reply = normalizer.reply(&reply);
            if step.unordered {
                sort_first_batch(&mut reply);
                sort_values(&mut reply);
            }
            reply
        }
        Ok(Err(e)) => match *e.kind {
            ErrorKind::Command(ref c) => error_doc(c.code, &c.code_name),
            ref other => doc! {"clientError": short_kind(other)},
        },
    }
}

/// The command with its cursor id (`getMore` value or the `cursors` list) set to `id`.
fn with_cursor_id(command: &Document, id: i64) -> Document {
    let mut out = command.clone();
    if out.contains_key("getMore") {
        out.insert("getMore", id);
    }
    if out.contains_key("cursors") {
        out.insert("cursors", vec![id]);
    }
    out
}

/// `distinct` answers a `values` array in no promised order.
fn sort_values(reply: &mut Document) {
    if let Some(bson::Bson::Array(values)) = reply.get_mut("values") {
        values.sort_by_cached_key(crate::compare::normalize::render);
    }
}

/// A stable name for a client-side failure (messages carry addresses and timings).
fn short_kind(kind: &ErrorKind) -> String {
    let text = format!("{kind:?}");
    text.split(['(', ' ', '{'])
        .next()
        .unwrap_or("error")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_counts_only_not_implemented_codes() {
        let answers = [
            error_doc(59, "CommandNotFound"),
            error_doc(238, "NotImplemented"),
            error_doc(2, "BadValue"),
            doc! {"ok": 1.0},
        ];
        assert_eq!(unsupported_steps(&answers), 2);
        let mut families = Vec::new();
        family_entry(&mut families, "a").cases += 1;
        family_entry(&mut families, "b").cases += 1;
        family_entry(&mut families, "a").cases += 1;
        assert_eq!(families.iter().map(|f| f.cases).collect::<Vec<_>>(), [2, 1]);
    }

    #[test]
    fn cursor_ids_are_substituted() {
        let g = with_cursor_id(&doc! {"getMore": 0_i64, "collection": "c"}, 77);
        assert_eq!(g, doc! {"getMore": 77_i64, "collection": "c"});
        let k = with_cursor_id(&doc! {"killCursors": "c", "cursors": [0_i64]}, 5);
        assert_eq!(k, doc! {"killCursors": "c", "cursors": [5_i64]});
    }

    #[test]
    fn first_difference_names_the_step_and_both_answers() {
        let case = Case::new("filter", "x")
            .step(doc! {"ping": 1})
            .step(doc! {"ping": 2});
        let same = vec![doc! {"ok": 1.0}, doc! {"ok": 1.0}];
        assert!(first_difference(&case, &same, &same).is_none());
        let other = vec![doc! {"ok": 1.0}, error_doc(59, "CommandNotFound")];
        let m = first_difference(&case, &same, &other).expect("differs");
        let text = transcript(&case, &same, &other);
        assert!(
            text.contains("!! step 1") && text.contains("   step 0"),
            "{text}"
        );
        assert_eq!(m.step, 1);
        assert!(m.reference.contains("CommandNotFound"));
        assert!(m.target.contains("1.0"));
        // Same error code on both sides compares equal.
        assert!(first_difference(&case, &other, &other).is_none());
    }
}
