//! `$text` in `find` (and explain): TEXT_OR reads the text index's entries of every query term,
//! taking each document's score for the term from the entry's key and summing per document;
//! TEXT_MATCH then fetches the candidates in RecordId order and applies the whole filter (the
//! bound `$text` checks phrases, negations and sensitivity; the other predicates check the
//! rest; a bare `$text` of plain terms skips that check, the index having decided). The result is every match with its score, for `{$meta: "textScore"}`.

use super::scan::check_deadline;
use crate::error::{CommandResult, ErrorCode, err};
use crate::planner;
use crate::query::matcher::{Filter, Op};
use crate::query::text::{self, TextQuery};
use bson::{Bson, Document, RawBson, RawBsonRef, RawDocumentBuf, doc};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;
use storage::{Collection, Direction, RecordId};

/// Index entries read per step of a term's range.
const TERM_BATCH_COUNT: usize = 4096;

/// What a text search found and what it read.
pub struct TextRun {
    /// Matches in RecordId order, with their scores.
    pub hits: Vec<(RecordId, RawDocumentBuf, f64)>,
    pub keys_examined: u64,
    pub docs_examined: u64,
}

/// Runs `filter`, whose top-level conjunction holds `query`, through the text index.
pub fn run(
    coll: &Arc<Collection>,
    filter: &Filter,
    query: &TextQuery,
    deadline: Option<Instant>,
) -> CommandResult<TextRun> {
    planner::bind_text(coll, filter);
    let bound = query.bound().ok_or_else(text::no_index_error)?;
    let prefix = prefix_values(filter, &bound.spec)?;
    let prefix_raw: Vec<RawBson> = prefix
        .iter()
        .map(|v| RawBson::try_from(v.clone()))
        .collect::<Result<_, _>>()
        .map_err(|e| err(ErrorCode::BadValue, e.to_string()))?;
    let prefix_refs: Vec<RawBsonRef<'_>> =
        prefix_raw.iter().map(RawBson::as_raw_bson_ref).collect();
    let mut suffix = SuffixCheck::new(filter, &bound.spec);
    let mut scores: BTreeMap<RecordId, f64> = BTreeMap::new();
    let mut keys_examined = 0u64;
    for term in &bound.lookup {
        let lo = bound.spec.term_prefix(&prefix_refs, term);
        let hi = storage::keys::prefix_end(&lo);
        let mut after: Option<(Vec<u8>, RecordId)> = None;
        loop {
            check_deadline(deadline)?;
            let batch = coll
                .index_scan(
                    &bound.index_name,
                    Bound::Included(&lo),
                    Bound::Excluded(&hi),
                    Direction::Forward,
                    after.as_ref().map(|(k, r)| (k.as_slice(), *r)),
                    TERM_BATCH_COUNT,
                )
                .map_err(|e| crate::error::storage_error(e, "", ""))?;
            keys_examined += batch.len() as u64;
            for (key, rid) in &batch {
                if let Some(check) = suffix.as_mut()
                    && !check.passes(*rid, key)?
                {
                    continue;
                }
                *scores.entry(*rid).or_default() += bound.spec.entry_score(key).unwrap_or(0.0);
            }
            if batch.len() < TERM_BATCH_COUNT {
                break;
            }
            after = batch.into_iter().last();
        }
    }
    // A filter that is only a `$text` the index decides needs no TEXT_MATCH check.
    let recheck = !(matches!(filter, Filter::Text(_)) && query.index_decides());
    let mut hits = Vec::new();
    let mut docs_examined = 0u64;
    for (rid, score) in scores {
        check_deadline(deadline)?;
        let Some(doc) = coll
            .get(rid)
            .map_err(|e| crate::error::storage_error(e, "", ""))?
        else {
            continue;
        };
        docs_examined += 1;
        if !recheck || filter.try_matches(&doc)?.is_some() {
            hits.push((rid, doc, score));
        }
    }
    Ok(TextRun {
        hits,
        keys_examined,
        docs_examined,
    })
}

/// Predicates on suffix fields of a compound text index, answered from the index key before
/// the fetch (mongod's filter on TEXT_OR). Only top-level suffix fields (a dotted path may cross
/// an array the key does not show) and only operators for which a missing field and null agree
/// (the key stores null for both): equality, ranges, `$in`, `$regex`. TEXT_MATCH still applies
/// the whole filter to what is fetched.
struct SuffixCheck<'f> {
    /// (column of the value in the decoded key, field name, predicate)
    checks: Vec<(usize, String, &'f Filter)>,
    descending: Vec<bool>,
    decided: std::collections::HashMap<RecordId, bool>,
}

impl<'f> SuffixCheck<'f> {
    fn new(filter: &'f Filter, spec: &storage::text::TextSpec) -> Option<SuffixCheck<'f>> {
        let conjuncts: &[Filter] = match filter {
            Filter::And(children) => children,
            other => std::slice::from_ref(other),
        };
        let first_suffix = spec.prefix.len() + 2;
        let mut checks = Vec::new();
        for f in conjuncts {
            let Filter::Path { components, op, .. } = f else {
                continue;
            };
            let usable = matches!(
                op,
                Op::Eq(_)
                    | Op::Gt(_)
                    | Op::Gte(_)
                    | Op::Lt(_)
                    | Op::Lte(_)
                    | Op::In { .. }
                    | Op::Regex(_)
            );
            let column = spec.suffix.iter().position(|(path, _)| path == components);
            if let (true, [name], Some(i)) = (usable, components.as_slice(), column) {
                checks.push((first_suffix + i, name.clone(), f));
            }
        }
        (!checks.is_empty()).then(|| SuffixCheck {
            checks,
            descending: spec.columns_descending(),
            decided: Default::default(),
        })
    }

    /// Whether the document of `rid`, whose entry is `key`, may match (decided once per document).
    fn passes(&mut self, rid: RecordId, key: &[u8]) -> CommandResult<bool> {
        if let Some(known) = self.decided.get(&rid) {
            return Ok(*known);
        }
        let values = storage::keycode::decode_key(key, &self.descending)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        let mut ok = true;
        for (column, name, f) in &self.checks {
            let value = values.get(*column).cloned().unwrap_or(Bson::Null);
            let doc = RawDocumentBuf::try_from(&doc! { name.clone(): value })
                .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
            if f.try_matches(&doc)?.is_none() {
                ok = false;
                break;
            }
        }
        self.decided.insert(rid, ok);
        Ok(ok)
    }
}

/// The value of each prefix field of a compound text index: an equality on it in the filter's
/// top-level conjunction, or mongod's NoQueryExecutionPlans when one is missing.
pub fn prefix_values(filter: &Filter, spec: &storage::text::TextSpec) -> CommandResult<Vec<Bson>> {
    let conjuncts: &[Filter] = match filter {
        Filter::And(children) => children,
        other => std::slice::from_ref(other),
    };
    spec.prefix
        .iter()
        .map(|(components, _)| {
            let path = components.join(".");
            conjuncts
                .iter()
                .find_map(|f| match f {
                    Filter::Path {
                        path: p,
                        op: Op::Eq(v),
                        ..
                    } if *p == path && !matches!(v, Bson::Array(_) | Bson::RegularExpression(_)) => {
                        Some(v.clone())
                    }
                    _ => None,
                })
                .ok_or_else(|| {
                    err(
                        ErrorCode::NoQueryExecutionPlans,
                        "planner returned error :: caused by :: failed to use text index to satisfy $text query (if text index is compound, are equality predicates given for all prefix fields?)",
                    )
                })
        })
        .collect()
}

/// explain's tree: TEXT_MATCH over TEXT_OR over one IXSCAN per term; a compound index's
/// prefix equalities show as `indexPrefix` and as point bounds of each scan.
pub fn explain_tree(coll: &Collection, query: &TextQuery, filter: &Filter) -> Document {
    let Some(bound) = query.bound() else {
        return doc! { "stage": "EOF" };
    };
    let key_pattern = coll
        .indexes()
        .into_iter()
        .find(|ix| ix.spec.name == bound.index_name)
        .map(|ix| ix.spec.key.clone())
        .unwrap_or_default();
    let prefix = prefix_values(filter, &bound.spec).unwrap_or_default();
    let index_prefix: Document = bound
        .spec
        .prefix
        .iter()
        .zip(&prefix)
        .map(|((components, _), v)| (components.join("."), v.clone()))
        .collect();
    let scans: Vec<Document> = bound
        .lookup
        .iter()
        .map(|term| {
            doc! {
                "stage": "IXSCAN",
                "keyPattern": key_pattern.clone(),
                "indexName": bound.index_name.clone(),
                "isMultiKey": true,
                "isUnique": false,
                "isSparse": false,
                "isPartial": false,
                "indexVersion": 2,
                "direction": "backward",
                "indexBounds": index_prefix.iter().map(|(k, v)| (k.clone(), Bson::Array(vec![Bson::String(format!("[{v}, {v}]"))]))).collect::<Document>(),
                "term": term.clone(),
            }
        })
        .collect();
    doc! {
        "stage": "TEXT_MATCH",
        "indexPrefix": index_prefix,
        "indexName": bound.index_name.clone(),
        "parsedTextQuery": query.explain(),
        "textIndexVersion": storage::text::TEXT_INDEX_VERSION,
        "inputStage": { "stage": "TEXT_OR", "inputStages": scans },
    }
}
