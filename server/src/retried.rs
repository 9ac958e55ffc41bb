//! The statement ids a retried write reports: mongod answers a retry of a retryable write with
//! the first run's counts plus `retriedStmtIds` (insert, update, delete, bulkWrite) or
//! `retriedStmtId` (findAndModify), naming the statements that had already run and were not run
//! again. cairn keeps the whole first reply (`sessions::run_once`, `retry_record`), so every
//! statement the first run executed is a retried one: those without a write error, and in an
//! ordered write only those before its first error.
//!
//! A statement's id is the command's `stmtIds[i]` when it lists them, else `stmtId + i` (`stmtId`
//! defaults to 0). This module only reads the request and the reply; it never looks at storage.

use bson::{Bson, Document};

/// The statement ids of one retryable write command, read from its request.
#[derive(Debug, Clone, PartialEq)]
pub struct StmtIds {
    command: Command,
    /// `stmtIds` as given, when the command lists them.
    listed: Option<Vec<i32>>,
    /// The first id when none are listed.
    first: i32,
    /// The command's statements (documents, updates, deletes, ops).
    count: usize,
    ordered: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    /// insert, update, delete: write errors under `writeErrors`.
    Write,
    /// bulkWrite: errors are the `ok: 0` items of the results cursor.
    BulkWrite,
    /// findAndModify: one statement, `retriedStmtId`.
    FindAndModify,
    Other,
}

fn as_i32(v: &Bson) -> Option<i32> {
    match v {
        Bson::Int32(i) => Some(*i),
        Bson::Int64(i) => i32::try_from(*i).ok(),
        _ => None,
    }
}

impl StmtIds {
    /// The ids of `command` with `count` statements as the request `body` numbers them.
    pub fn of(command: &str, body: &Document, count: u64) -> StmtIds {
        let command = match command {
            "insert" | "update" | "delete" => Command::Write,
            "bulkWrite" => Command::BulkWrite,
            "findAndModify" | "findandmodify" => Command::FindAndModify,
            _ => Command::Other,
        };
        let listed = body
            .get_array("stmtIds")
            .ok()
            .map(|a| a.iter().filter_map(as_i32).collect());
        StmtIds {
            command,
            listed,
            first: body.get("stmtId").and_then(as_i32).unwrap_or(0),
            count: usize::try_from(count).unwrap_or(usize::MAX),
            ordered: body.get_bool("ordered").unwrap_or(true),
        }
    }

    /// A command without statement ids (commitTransaction): its reply is kept as it is.
    pub fn none() -> StmtIds {
        StmtIds::of("", &Document::new(), 0)
    }

    fn id(&self, i: usize) -> Option<i32> {
        match &self.listed {
            Some(ids) => ids.get(i).copied(),
            None => i32::try_from(i)
                .ok()
                .and_then(|i| self.first.checked_add(i)),
        }
    }

    /// The indexes of the statements that failed, from the first reply.
    fn failed(&self, reply: &Document) -> Vec<usize> {
        let index = |d: &Document, key: &str| d.get(key).and_then(as_i32);
        let items: Vec<usize> = match self.command {
            Command::Write => reply
                .get_array("writeErrors")
                .map(|a| {
                    a.iter()
                        .filter_map(Bson::as_document)
                        .filter_map(|e| index(e, "index"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
                .into_iter()
                .filter_map(|i| usize::try_from(i).ok())
                .collect(),
            Command::BulkWrite => reply
                .get_document("cursor")
                .and_then(|c| c.get_array("firstBatch"))
                .map(|a| {
                    a.iter()
                        .filter_map(Bson::as_document)
                        .filter(|d| d.get("ok").and_then(crate::query::types::as_f64) == Some(0.0))
                        .filter_map(|d| index(d, "idx"))
                        .filter_map(|i| usize::try_from(i).ok())
                        .collect()
                })
                .unwrap_or_default(),
            Command::FindAndModify | Command::Other => Vec::new(),
        };
        items
    }

    /// The ids of the statements the first run executed, as its `reply` shows them.
    pub fn executed(&self, reply: &Document) -> Vec<i32> {
        let failed = self.failed(reply);
        let end = match (self.ordered, failed.iter().min()) {
            (true, Some(first)) => (*first).min(self.count),
            _ => self.count,
        };
        (0..end)
            .filter(|i| !failed.contains(i))
            .filter_map(|i| self.id(i))
            .collect()
    }

    /// The reply a retry gets: `reply` with the retried statement ids where mongod puts them
    /// (before `upserted`/`nModified` in an update, after the counts elsewhere).
    pub fn retried_reply(&self, reply: &Document) -> Document {
        let (key, value) = match self.command {
            Command::Other => return reply.clone(),
            Command::FindAndModify => ("retriedStmtId", Bson::Int32(self.first)),
            Command::Write | Command::BulkWrite => {
                let ids = self.executed(reply);
                if ids.is_empty() {
                    return reply.clone();
                }
                let ids = ids.into_iter().map(Bson::Int32).collect();
                ("retriedStmtIds", Bson::Array(ids))
            }
        };
        let before: &[&str] = match self.command {
            Command::Write => &["upserted", "nModified", "writeConcernError", "ok"],
            _ => &["writeConcernError", "ok"],
        };
        let mut out = Document::new();
        let mut placed = false;
        for (k, v) in reply {
            if k == key {
                continue;
            }
            if !placed && before.contains(&k.as_str()) {
                out.insert(key, value.clone());
                placed = true;
            }
            out.insert(k.clone(), v.clone());
        }
        if !placed {
            out.insert(key, value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn ids(reply: &Document) -> Option<Vec<i32>> {
        reply.get_array("retriedStmtIds").ok().map(|a| {
            a.iter()
                .map(|v| v.as_i32().expect("int32"))
                .collect::<Vec<_>>()
        })
    }

    #[test]
    fn every_statement_of_a_clean_write() {
        let s = StmtIds::of("insert", &doc! { "insert": "c" }, 3);
        let r = s.retried_reply(&doc! { "n": 3, "ok": 1.0 });
        assert_eq!(r, doc! { "n": 3, "retriedStmtIds": [0, 1, 2], "ok": 1.0 });
        let s = StmtIds::of("update", &doc! { "update": "c", "stmtId": 5 }, 2);
        let r = s.retried_reply(&doc! { "n": 0, "nModified": 0, "ok": 1.0 });
        assert_eq!(
            r,
            doc! { "n": 0, "retriedStmtIds": [5, 6], "nModified": 0, "ok": 1.0 }
        );
        let s = StmtIds::of("delete", &doc! { "stmtIds": [9, 4] }, 2);
        assert_eq!(
            ids(&s.retried_reply(&doc! { "n": 2, "ok": 1.0 })),
            Some(vec![9, 4])
        );
    }

    #[test]
    fn failed_statements_and_what_an_ordered_write_left() {
        let errors = doc! { "n": 2, "writeErrors": [{ "index": 1, "code": 11000 }], "ok": 1.0 };
        let ordered = StmtIds::of("insert", &doc! {}, 4);
        assert_eq!(ids(&ordered.retried_reply(&errors)), Some(vec![0]));
        let unordered = StmtIds::of("insert", &doc! { "ordered": false }, 4);
        assert_eq!(ids(&unordered.retried_reply(&errors)), Some(vec![0, 2, 3]));
        // Nothing ran: no field.
        let first = doc! { "n": 0, "writeErrors": [{ "index": 0, "code": 11000 }], "ok": 1.0 };
        assert_eq!(ids(&ordered.retried_reply(&first)), None);
    }

    #[test]
    fn bulk_write_errors_come_from_the_cursor() {
        let reply = doc! {
            "cursor": { "id": 0_i64, "firstBatch": [
                { "ok": 1.0, "idx": 0, "n": 1 },
                { "ok": 0.0, "idx": 1, "code": 11000 },
                { "ok": 1.0, "idx": 2, "n": 1 },
            ], "ns": "admin.$cmd.bulkWrite" },
            "nErrors": 1, "nInserted": 2, "nMatched": 0, "nModified": 0, "nUpserted": 0,
            "nDeleted": 0, "ok": 1.0,
        };
        let s = StmtIds::of("bulkWrite", &doc! { "ordered": false }, 3);
        let r = s.retried_reply(&reply);
        assert_eq!(ids(&r), Some(vec![0, 2]));
        let keys: Vec<&str> = r.keys().map(String::as_str).collect();
        assert_eq!(&keys[keys.len() - 2..], ["retriedStmtIds", "ok"]);
    }

    #[test]
    fn find_and_modify_names_its_one_statement() {
        let s = StmtIds::of("findAndModify", &doc! { "findAndModify": "c" }, 1);
        let r = s.retried_reply(&doc! { "lastErrorObject": { "n": 1 }, "value": null, "ok": 1.0 });
        assert_eq!(r.get_i32("retriedStmtId").ok(), Some(0));
        let other = StmtIds::of("ping", &doc! {}, 1);
        assert_eq!(other.retried_reply(&doc! { "ok": 1.0 }), doc! { "ok": 1.0 });
    }
}
