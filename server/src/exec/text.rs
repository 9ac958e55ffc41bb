//! `$text` in `find` (and explain): TEXT_OR reads the text index's entries of every query term,
//! taking each document's score for the term from the entry's key and summing per document;
//! TEXT_MATCH then fetches the candidates in RecordId order and applies the whole filter (the
//! bound `$text` checks phrases, negations and sensitivity; the other predicates check the
//! rest; a bare `$text` of plain terms skips that check, the index having decided). The result is every match with its score, for `{$meta: "textScore"}`.

use super::scan::check_deadline;
use crate::error::CommandResult;
use crate::planner;
use crate::query::matcher::Filter;
use crate::query::text::{self, TextQuery};
use bson::{Document, RawDocumentBuf, doc};
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
    let mut scores: BTreeMap<RecordId, f64> = BTreeMap::new();
    let mut keys_examined = 0u64;
    for term in &bound.lookup {
        let lo = storage::text::term_prefix(term);
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
                *scores.entry(*rid).or_default() += storage::text::entry_score(key).unwrap_or(0.0);
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

/// explain's tree: TEXT_MATCH over TEXT_OR over one IXSCAN per term.
pub fn explain_tree(query: &TextQuery) -> Document {
    let Some(bound) = query.bound() else {
        return doc! { "stage": "EOF" };
    };
    let key_pattern = doc! { storage::text::FTS: storage::text::TEXT, storage::text::FTSX: 1 };
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
                "indexBounds": {},
                "term": term.clone(),
            }
        })
        .collect();
    doc! {
        "stage": "TEXT_MATCH",
        "indexPrefix": {},
        "indexName": bound.index_name.clone(),
        "parsedTextQuery": query.explain(),
        "textIndexVersion": storage::text::TEXT_INDEX_VERSION,
        "inputStage": { "stage": "TEXT_OR", "inputStages": scans },
    }
}
