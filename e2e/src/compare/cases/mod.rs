//! The named differential cases. A case is a list of commands run in order against one fresh
//! database on each server; every reply (setup included) is normalised and compared. Cases are
//! plain data built from the frozen corpus, so adding one never changes another.

mod filters;
mod indexes;
mod shapes;
mod writes;

use bson::{Bson, Document, doc};

/// The collection every case works in (inside its own fresh database).
pub const COLL: &str = "c";

/// One command of a case.
#[derive(Clone, Debug)]
pub struct Step {
    pub command: Document,
    /// The query language leaves the order of this answer open (e.g. `$group`): sort it first.
    pub unordered: bool,
    /// Replace the `getMore`/`killCursors` cursor id in `command` with the id of the cursor the
    /// previous step opened on this server (ids differ between servers, so they cannot be fixed).
    pub follow_cursor: bool,
}

/// A named case; `family` groups cases in the report.
#[derive(Clone, Debug)]
pub struct Case {
    pub family: &'static str,
    pub name: String,
    pub steps: Vec<Step>,
}

impl Case {
    pub fn new(family: &'static str, name: impl Into<String>) -> Case {
        Case {
            family,
            name: name.into(),
            steps: Vec::new(),
        }
    }

    /// Append a command whose answer is compared in order.
    pub fn step(mut self, command: Document) -> Case {
        self.steps.push(Step {
            command,
            unordered: false,
            follow_cursor: false,
        });
        self
    }

    /// Append `getMore` on the cursor the previous cursor-opening step left open.
    pub fn get_more(mut self, batch_size: i32) -> Case {
        self.steps.push(Step {
            command: doc! {"getMore": 0_i64, "collection": COLL, "batchSize": batch_size},
            unordered: false,
            follow_cursor: true,
        });
        self
    }

    /// Append `killCursors` of the cursor the previous cursor-opening step left open.
    pub fn kill_cursor(mut self) -> Case {
        self.steps.push(Step {
            command: doc! {"killCursors": COLL, "cursors": [0_i64]},
            unordered: false,
            follow_cursor: true,
        });
        self
    }

    /// Append a command whose `cursor.firstBatch` is compared as a set.
    pub fn step_unordered(mut self, command: Document) -> Case {
        self.steps.push(Step {
            command,
            unordered: true,
            follow_cursor: false,
        });
        self
    }

    /// Insert documents (the setup most cases start with).
    pub fn insert(self, docs: Vec<Document>) -> Case {
        self.step(doc! {"insert": COLL, "documents": docs})
    }

    /// Read the whole collection back in `_id` order.
    pub fn read_all(self) -> Case {
        self.step(find_sorted(doc! {}))
    }
}

/// `find` with a filter, answers in `_id` order so that the comparison is order-exact.
pub fn find_sorted(filter: Document) -> Document {
    doc! {"find": COLL, "filter": filter, "sort": {"_id": 1}}
}

/// `find` returning only `_id`s: keeps filter cases' answers short.
pub fn find_ids(filter: Document) -> Document {
    doc! {"find": COLL, "filter": filter, "sort": {"_id": 1}, "projection": {"_id": 1}, "batchSize": 1000}
}

/// `{field: {op: value}}`.
pub fn cond(field: &str, op: &str, value: Bson) -> Document {
    let mut inner = Document::new();
    inner.insert(op, value);
    let mut d = Document::new();
    d.insert(field, inner);
    d
}

/// Every case, in report order.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(writes::inserts());
    cases.extend(filters::all());
    cases.extend(shapes::projections());
    cases.extend(shapes::sorts());
    cases.extend(writes::updates());
    cases.extend(writes::deletes());
    cases.extend(writes::find_and_modify());
    cases.extend(shapes::aggregations());
    cases.extend(indexes::all());
    cases.extend(indexes::errors());
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_names_are_unique_and_cases_nonempty() {
        let cases = all();
        let mut names: Vec<_> = cases.iter().map(|c| c.name.clone()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "duplicate case names");
        assert!(cases.iter().all(|c| !c.steps.is_empty()));
        for family in [
            "insert",
            "filter",
            "projection",
            "sort",
            "update",
            "delete",
            "findAndModify",
            "aggregate",
            "index",
            "error",
        ] {
            assert!(cases.iter().any(|c| c.family == family), "no {family} case");
        }
    }
}
