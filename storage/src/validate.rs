//! `Collection::validate`: the storage side of mongod's `validate` command. It walks every page
//! of the record tree and of each index (the full B+tree check: order, separators, depth,
//! counters, page checksums on read), reads every document, and checks that each index holds
//! exactly the keys the documents produce: the number of entries per index equals the number of
//! keys, and every document's keys are present. It holds the collection's read lock throughout
//! (writers wait, readers don't), as mongod's foreground validate holds its collection lock.

use std::collections::HashMap;

use crate::collection::{Collection, Direction};
use crate::engine::Engine;
use crate::error::Result;
use crate::index::entry_key;
use crate::limits::INDEX_BUILD_SCAN_DOCS;
use crate::pager::{META_SLOTS, PageId};

/// What `validate` found.
#[derive(Clone, Debug, Default)]
pub struct ValidateReport {
    /// Documents in the record tree.
    pub records: u64,
    /// Documents without an `_id` field.
    pub missing_id: u64,
    /// (index name, entries) for every index.
    pub index_entries: Vec<(String, u64)>,
    /// Each problem found, in words; empty when the collection is sound.
    pub problems: Vec<String>,
}

impl Collection {
    /// Checks the collection's trees and that its indexes match its documents.
    pub fn validate(&self) -> Result<ValidateReport> {
        let st = self.read()?;
        let pager = &*self.shared.pager;
        let mut report = ValidateReport::default();
        if let Err(e) = st.records.check(pager) {
            report.problems.push(format!("record tree: {e}"));
        }
        for ix in &st.indexes {
            if let Err(e) = ix.tree.check(pager) {
                report.problems.push(format!("index {}: {e}", ix.spec.name));
            }
        }
        if !report.problems.is_empty() {
            // Walking a damaged tree further would only repeat the finding.
            return Ok(report);
        }
        let mut keys = vec![0u64; st.indexes.len()];
        let mut after = None;
        loop {
            let locs = st.locs(pager, Direction::Forward, after, INDEX_BUILD_SCAN_DOCS)?;
            let Some(last) = locs.last() else { break };
            after = Some(last.0);
            let only: Vec<_> = locs.iter().map(|(_, l)| *l).collect();
            let docs = match self.shared.log.read_documents(&only) {
                Ok(d) => d,
                Err(e) => {
                    report.problems.push(format!("document read: {e}"));
                    return Ok(report);
                }
            };
            for ((rid, _), doc) in locs.iter().zip(&docs) {
                report.records += 1;
                if !matches!(doc.get("_id"), Ok(Some(_))) {
                    report.missing_id += 1;
                    report.problems.push(format!("record {rid} has no _id"));
                }
                for (i, ix) in st.indexes.iter().enumerate() {
                    let (ks, _) = ix.keys_of(doc)?;
                    keys[i] += ks.len() as u64;
                    for k in ks {
                        if ix.tree.get(pager, &entry_key(&k, *rid))?.is_none() {
                            report.problems.push(format!(
                                "index {} lacks a key of record {rid}",
                                ix.spec.name
                            ));
                        }
                    }
                }
            }
        }
        if report.records != st.count {
            report.problems.push(format!(
                "count says {} documents, the record tree holds {}",
                st.count, report.records
            ));
        }
        for (ix, n) in st.indexes.iter().zip(keys) {
            report.index_entries.push((ix.spec.name.clone(), ix.len()));
            if ix.len() != n {
                report.problems.push(format!(
                    "index {} holds {} entries, the documents make {n} keys",
                    ix.spec.name,
                    ix.len()
                ));
            }
        }
        Ok(report)
    }
}

impl Engine {
    /// Checks that every page of the page file is owned exactly once: by a tree, by a running
    /// index build, or by the free lists (which include the last checkpoints' blobs). Returns
    /// the problems found; empty when the accounting is exact. Holds the catalog lock.
    pub fn check_page_accounting(&self) -> Result<Vec<String>> {
        let cat =
            self.inner.catalog.read().map_err(|_| {
                crate::error::StorageError::Poisoned("catalog lock poisoned".into())
            })?;
        let pager = &*self.inner.shared.pager;
        let (high_water, free) = pager.accounting();
        let mut owner: HashMap<PageId, String> = HashMap::new();
        let mut problems = Vec::new();
        let mut claim = |id: PageId, who: String, problems: &mut Vec<String>| {
            if let Some(first) = owner.insert(id, who.clone()) {
                problems.push(format!("page {id} owned by {first} and {who}"));
            }
        };
        for c in cat.by_id.values() {
            let st = c.read()?;
            let mut trees = vec![("records".to_string(), &st.records)];
            trees.extend(st.indexes.iter().map(|i| (i.spec.name.clone(), &i.tree)));
            for (name, tree) in trees {
                match tree.check(pager) {
                    Ok(r) => {
                        for id in r.pages {
                            claim(id, format!("{}:{name}", c.id), &mut problems);
                        }
                    }
                    Err(e) => problems.push(format!("{}:{name}: {e}", c.id)),
                }
            }
            for b in &st.builds {
                for id in b.tracker.pages() {
                    claim(id, format!("{}:build", c.id), &mut problems);
                }
            }
        }
        for (id, n) in free {
            if n > 1 {
                problems.push(format!("page {id} listed free {n} times"));
            }
            claim(id, "free".into(), &mut problems);
        }
        for id in META_SLOTS..high_water {
            if !owner.contains_key(&id) {
                problems.push(format!("page {id} is leaked: neither owned nor free"));
            }
        }
        if let Some(id) = owner
            .keys()
            .find(|&&id| id >= high_water || id < META_SLOTS)
        {
            problems.push(format!("page {id} lies outside the page file's pages"));
        }
        Ok(problems)
    }
}
