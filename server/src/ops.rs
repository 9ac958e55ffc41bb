//! Long-running operations that `currentOp` shows: index builds with their progress. Bounded by
//! the number of concurrent builds (each one holds its collection's write lock).

use bson::{Document, doc};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

struct Op {
    ns: String,
    index: String,
    done: u64,
    total: u64,
    started: Instant,
}

#[derive(Default)]
pub struct OpRegistry {
    next_id: AtomicU64,
    ops: Mutex<BTreeMap<u64, Op>>,
}

impl OpRegistry {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Op>> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn begin_index_build(&self, ns: &str, index: &str) -> u64 {
        let id = self.next_id.fetch_add(1, Relaxed) + 1;
        let op = Op {
            ns: ns.into(),
            index: index.into(),
            done: 0,
            total: 0,
            started: Instant::now(),
        };
        self.map().insert(id, op);
        id
    }

    pub fn progress(&self, id: u64, done: u64, total: u64) {
        if let Some(op) = self.map().get_mut(&id) {
            op.done = done;
            op.total = total;
        }
    }

    pub fn end(&self, id: u64) {
        self.map().remove(&id);
    }

    /// `currentOp`'s `inprog` entries.
    pub fn in_progress(&self) -> Vec<Document> {
        self.map()
            .iter()
            .map(|(id, op)| {
                let pct = (op.done * 100).checked_div(op.total).unwrap_or(0);
                let coll = op.ns.split_once('.').map_or("", |(_, c)| c);
                let elapsed = op.started.elapsed();
                doc! {
                    "type": "op",
                    "opid": *id as i64,
                    "active": true,
                    "op": "command",
                    "ns": op.ns.clone(),
                    "command": { "createIndexes": coll, "indexes": [ { "name": op.index.clone() } ] },
                    "msg": format!("Index Build: scanning collection Index Build: {}/{} {}%", op.done, op.total, pct),
                    "progress": { "done": op.done as i64, "total": op.total as i64 },
                    "secs_running": elapsed.as_secs() as i64,
                    "microsecs_running": elapsed.as_micros() as i64,
                }
            })
            .collect()
    }
}
