//! Explain output in mongod's shapes: `queryPlanner.winningPlan` / `rejectedPlans` built from
//! mongod's stage names (COLLSCAN, IXSCAN, FETCH, IDHACK, OR, SORT, SKIP, LIMIT, PROJECTION_*,
//! COUNT/COUNT_SCAN, DISTINCT_SCAN), and
//! `executionStats` with `nReturned`, `totalKeysExamined`, `totalDocsExamined`,
//! `executionTimeMillis`.

use super::{IndexPlan, Plan};
use bson::{Bson, Document, doc};
use storage::Direction;

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "forward",
        Direction::Backward => "backward",
    }
}

fn ixscan(p: &IndexPlan) -> Document {
    let mut bounds = Document::new();
    for (field, _) in &p.key_pattern {
        let shown: Vec<Bson> = match p.field_bounds.iter().find(|(f, _)| f == field) {
            Some((_, ivs)) => ivs.iter().map(|iv| Bson::String(iv.describe())).collect(),
            None => vec![Bson::String("[MinKey, MaxKey]".into())],
        };
        bounds.insert(field.clone(), shown);
    }
    // Storage knows only that some path is multikey: name it when the index has one field.
    let single = p.key_pattern.len() == 1;
    // In a wildcard plan the path after `$_path` is the one that may be multikey (a compound
    // wildcard index's regular fields never are).
    let keys: Vec<&String> = p.key_pattern.keys().collect();
    let wildcard_path = super::wildcard::is_wildcard_plan(p)
        .then(|| {
            keys.iter()
                .position(|k| *k == storage::wildcard::PATH_FIELD)
        })
        .flatten()
        .and_then(|i| keys.get(i + 1).copied());
    let multikey_paths: Document = p
        .key_pattern
        .keys()
        .map(|k| {
            let paths = if p.multikey && (single || wildcard_path == Some(k)) {
                vec![Bson::String(k.clone())]
            } else {
                vec![]
            };
            (k.clone(), Bson::Array(paths))
        })
        .collect();
    let mut d = doc! {
        "stage": "IXSCAN",
        "keyPattern": p.key_pattern.clone(),
        "indexName": p.index_name.clone(),
    };
    if let Some(c) = &p.flags.collation {
        d.insert("collation", c.clone());
    }
    d.extend(doc! {
        "isMultiKey": p.multikey,
        "multiKeyPaths": multikey_paths,
        "isUnique": p.flags.unique,
        "isSparse": p.flags.sparse,
        "isPartial": p.flags.partial,
        "indexVersion": 2,
        "direction": direction_name(p.direction),
        "indexBounds": bounds,
    });
    d
}

/// A clustered collection's scan: CLUSTERED_IXSCAN with the `_id` bounds as `minRecord` and
/// `maxRecord` (mongod 7.0), or COLLSCAN when nothing bounds `_id`.
fn clustered_scan(p: &IndexPlan, filter: Option<&Document>) -> Document {
    let ivs = p
        .field_bounds
        .first()
        .map(|(_, v)| v.as_slice())
        .unwrap_or(&[]);
    let stage = if ivs.is_empty() {
        "COLLSCAN"
    } else {
        "CLUSTERED_IXSCAN"
    };
    let mut d = doc! { "stage": stage };
    if let Some(f) = filter {
        d.insert("filter", f.clone());
    }
    d.insert("direction", direction_name(p.direction));
    if let (Some(first), Some(last)) = (ivs.first(), ivs.last()) {
        d.insert("minRecord", first.lo.clone());
        d.insert("maxRecord", last.hi.clone());
    }
    d
}

fn fetch(input: Document, filter: Option<&Document>) -> Document {
    let mut d = doc! { "stage": "FETCH" };
    if let Some(f) = filter {
        d.insert("filter", f.clone());
    }
    d.insert("inputStage", input);
    d
}

/// COUNT over COUNT_SCAN: the scan's bounds as start and end keys.
pub fn count_scan_tree(p: &IndexPlan) -> Document {
    let mut scan = ixscan(p);
    scan.insert("stage", "COUNT_SCAN");
    scan.remove("direction");
    let (mut start, mut end) = (Document::new(), Document::new());
    for (field, _) in &p.key_pattern {
        let iv = p.field_bounds.iter().find(|(f, _)| f == field);
        let lo = iv.and_then(|(_, v)| v.first()).map(|iv| iv.lo.clone());
        let hi = iv.and_then(|(_, v)| v.last()).map(|iv| iv.hi.clone());
        start.insert(field.clone(), lo.unwrap_or(Bson::MinKey));
        end.insert(field.clone(), hi.unwrap_or(Bson::MaxKey));
    }
    // Start and end in index order; an end is exclusive where the byte interval skips its
    // value (see `keyscan::tighten`).
    let descending = super::keyscan::leading_descending(&p.key_pattern);
    let first = |d: &Document| d.values().next().cloned().unwrap_or(Bson::MinKey);
    let enc = |v: Bson| storage::encode_index_key(&p.key_pattern, &[v]);
    let (start_inclusive, end_inclusive) = match p.intervals.first() {
        Some((lo, hi)) if descending => (
            *hi != enc(first(&start)),
            *lo != storage::keys::prefix_end(&enc(first(&end))),
        ),
        Some((lo, hi)) => (
            *lo != storage::keys::prefix_end(&enc(first(&start))),
            *hi != enc(first(&end)),
        ),
        None => (true, true),
    };
    if descending {
        std::mem::swap(&mut start, &mut end);
        let (s, e) = (start_inclusive, end_inclusive);
        return count_tree(scan, start, end, e, s);
    }
    count_tree(scan, start, end, start_inclusive, end_inclusive)
}

fn count_tree(
    mut scan: Document,
    start: Document,
    end: Document,
    start_inclusive: bool,
    end_inclusive: bool,
) -> Document {
    scan.insert(
        "indexBounds",
        doc! {
            "startKey": start,
            "startKeyInclusive": start_inclusive,
            "endKey": end,
            "endKeyInclusive": end_inclusive,
        },
    );
    doc! { "stage": "COUNT", "inputStage": scan }
}

/// PROJECTION_COVERED over DISTINCT_SCAN for `distinct` on `key`.
pub fn distinct_scan_tree(p: &IndexPlan, key: &str) -> Document {
    let mut scan = ixscan(p);
    scan.insert("stage", "DISTINCT_SCAN");
    doc! {
        "stage": "PROJECTION_COVERED",
        "transformBy": { key: 1, "_id": 0 },
        "inputStage": scan,
    }
}

/// What surrounds the access stage.
#[derive(Default, Clone)]
pub struct Shape {
    pub filter: Option<Document>,
    pub sort: Option<Document>,
    pub skip: u64,
    pub limit: Option<u64>,
    pub projection: Option<Document>,
    /// The projection is answered from the index keys (PROJECTION_COVERED, no FETCH).
    pub covered: bool,
}

/// The plan tree of one candidate, innermost stage first wrapped outward.
pub fn plan_tree(plan: &Plan, shape: &Shape) -> Document {
    let filter = shape.filter.clone().filter(|f| !f.is_empty());
    let mut stage = match plan {
        Plan::CollScan { direction } => {
            let mut d = doc! { "stage": "COLLSCAN" };
            if let Some(f) = &filter {
                d.insert("filter", f.clone());
            }
            d.insert("direction", direction_name(*direction));
            d
        }
        Plan::IdPoint(_) => doc! { "stage": "IDHACK" },
        Plan::Index(p) if shape.covered => {
            let mut d = ixscan(p);
            if let Some(f) = &filter {
                d.insert("filter", f.clone());
            }
            d
        }
        Plan::Index(p) => fetch(ixscan(p), filter.as_ref()),
        Plan::Clustered(p) => clustered_scan(p, filter.as_ref()),
        Plan::Or { branches, merge } => {
            let inputs: Vec<Bson> = branches.iter().map(|b| Bson::Document(ixscan(b))).collect();
            let union = match merge {
                Some((_, sort)) => {
                    doc! { "stage": "SORT_MERGE", "sortPattern": sort.clone(), "inputStages": inputs }
                }
                None => doc! { "stage": "OR", "inputStages": inputs },
            };
            fetch(union, filter.as_ref())
        }
    };
    if let Some(sort) = shape.sort.as_ref().filter(|_| !plan.provides_sort()) {
        let mut d = doc! { "stage": "SORT", "sortPattern": sort.clone(), "memLimit": 104_857_600_i64, "type": "simple" };
        if let Some(l) = shape.limit {
            d.insert("limitAmount", l as i64);
        }
        d.insert("inputStage", stage);
        stage = d;
    }
    if shape.skip > 0 {
        stage = doc! { "stage": "SKIP", "skipAmount": shape.skip as i64, "inputStage": stage };
    }
    if let Some(l) = shape
        .limit
        .filter(|_| shape.sort.is_none() || plan.provides_sort())
    {
        stage = doc! { "stage": "LIMIT", "limitAmount": l as i64, "inputStage": stage };
    }
    if let Some(p) = &shape.projection {
        let simple = p.values().all(|v| {
            matches!(
                v,
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Boolean(_)
            )
        });
        let name = if shape.covered {
            "PROJECTION_COVERED"
        } else if simple {
            "PROJECTION_SIMPLE"
        } else {
            "PROJECTION_DEFAULT"
        };
        stage = doc! { "stage": name, "transformBy": p.clone(), "inputStage": stage };
    }
    stage
}

/// Execution statistics of the winning plan.
pub struct Stats {
    pub n_returned: u64,
    pub keys_examined: u64,
    pub docs_examined: u64,
    pub millis: u64,
}

pub fn execution_stats(stats: &Stats, tree: &Document) -> Document {
    let mut stages = tree.clone();
    stages.insert("nReturned", stats.n_returned as i64);
    stages.insert("executionTimeMillisEstimate", stats.millis as i64);
    doc! {
        "executionSuccess": true,
        "nReturned": stats.n_returned as i64,
        "executionTimeMillis": stats.millis as i64,
        "totalKeysExamined": stats.keys_examined as i64,
        "totalDocsExamined": stats.docs_examined as i64,
        "executionStages": stages,
    }
}
