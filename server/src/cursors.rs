//! Cursors: the registry that `find`, `aggregate` and `listCollections` leave open results in, and
//! that `getMore` and `killCursors` read. Ids are random non-zero int64s; the registry is bounded
//! (`CURSORS_MAX`); idle cursors are reaped after `cursorTimeoutMillis`; a cursor whose collection
//! was dropped (or dropped and re-created: its UUID differs) fails its next `getMore`. So does a
//! suspended aggregate when a collection its stages read (`$lookup`'s, `$unionWith`'s,
//! `$graphLookup`'s) goes: dropping or renaming it removes the cursor here.
//!
//! The registry only stores: a cursor holds a suspended execution (`crate::exec::DocSource`),
//! which the command layer resumes; nothing here reads storage.

use crate::error::{CommandResult, ErrorCode, err};
use crate::exec::DocSource;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most open cursors at once.
pub const CURSORS_MAX: usize = 100_000;
/// Default number of documents in a first batch.
pub const FIRST_BATCH_COUNT_DEFAULT: usize = 101;

pub struct Cursor {
    pub db: String,
    pub coll: String,
    /// The collection's UUID when the cursor was opened (None for non-collection cursors).
    pub uuid: Option<bson::Uuid>,
    pub source: DocSource,
    pub last_used: Instant,
    pub no_timeout: bool,
    /// What is left of the `maxTimeMS` of the command that opened it (None: no limit); each
    /// `getMore` runs within it and uses it up.
    pub time_left: Option<Duration>,
    /// A tailable cursor on a capped collection (`commands::tailable`): it stays open at the
    /// end of the collection and resumes after its last document.
    pub tail: Option<Tail>,
    /// The operation's collator, current again in every getMore.
    pub collator: Option<std::sync::Arc<crate::query::collator::Collator>>,
    /// A snapshot read's view (`commands::snapshot_read`), installed again in every getMore so
    /// the cursor goes on reading the same snapshot; it pins that snapshot's history until the
    /// cursor is exhausted, killed or reaped.
    pub snapshot: Option<std::sync::Arc<crate::txn::Txn>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// `awaitData`: a getMore that finds nothing waits for a commit (up to its `maxTimeMS`).
    pub await_data: bool,
}

impl Cursor {
    pub fn ns(&self) -> String {
        format!("{}.{}", self.db, self.coll)
    }
}

#[derive(Default)]
pub struct CursorRegistry {
    cursors: Mutex<HashMap<i64, Cursor>>,
}

impl CursorRegistry {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Cursor>> {
        self.cursors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Register a cursor and return its id.
    pub fn insert(&self, cursor: Cursor) -> CommandResult<i64> {
        if storage::nowait::dropping() {
            // This call was tried on an async worker and refused (`crate::offload::run_tried`):
            // it is dropped and run again on the pool, so its cursor must not outlive it.
            return Err(err(
                ErrorCode::InternalError,
                "no cursor for a dropped attempt",
            ));
        }
        let mut map = self.map();
        if map.len() >= CURSORS_MAX {
            return Err(err(
                ErrorCode::ExceededMemoryLimit,
                format!("too many open cursors (at most {CURSORS_MAX})"),
            ));
        }
        loop {
            let id: i64 = rand::random::<i64>() & i64::MAX;
            if id != 0 && !map.contains_key(&id) {
                map.insert(id, cursor);
                return Ok(id);
            }
        }
    }

    /// The tailable settings of cursor `id` (None: not open, or not tailable).
    pub fn tail_of(&self, id: i64) -> Option<Tail> {
        self.map().get(&id).and_then(|c| c.tail)
    }

    /// Take a cursor out for a `getMore` (so no two requests use it at once).
    pub fn take(&self, id: i64) -> Option<Cursor> {
        self.map().remove(&id)
    }

    pub fn put_back(&self, id: i64, mut cursor: Cursor) {
        cursor.last_used = Instant::now();
        self.map().insert(id, cursor);
    }

    pub fn kill(&self, id: i64) -> bool {
        self.map().remove(&id).is_some()
    }

    pub fn contains(&self, id: i64) -> bool {
        self.map().contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop cursors over a namespace (`coll` None: the whole database).
    pub fn invalidate(&self, db: &str, coll: Option<&str>) {
        let hit = |d: &str, c: &str| d == db && coll.is_none_or(|name| c == name);
        self.map().retain(|_, c| {
            !(hit(&c.db, &c.coll) || c.source.foreign().iter().any(|(d, f, _)| hit(d, f)))
        });
    }

    /// Remove cursors idle for longer than `timeout`; returns how many.
    pub fn reap_idle(&self, timeout: Duration) -> usize {
        let mut map = self.map();
        let before = map.len();
        map.retain(|_, c| c.no_timeout || c.last_used.elapsed() < timeout);
        before - map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn cursor(db: &str, coll: &str) -> Cursor {
        Cursor {
            db: db.into(),
            coll: coll.into(),
            uuid: None,
            source: DocSource::Buffered(VecDeque::new()),
            last_used: Instant::now(),
            no_timeout: false,
            time_left: None,
            tail: None,
            collator: None,
            snapshot: None,
        }
    }

    #[test]
    fn ids_are_positive_and_unique() {
        let r = CursorRegistry::default();
        let a = r.insert(cursor("d", "c")).unwrap();
        let b = r.insert(cursor("d", "c")).unwrap();
        assert!(a > 0 && b > 0 && a != b);
        assert!(r.kill(a));
        assert!(!r.kill(a));
    }

    #[test]
    fn invalidate_and_reap() {
        let r = CursorRegistry::default();
        r.insert(cursor("d", "c")).unwrap();
        r.insert(cursor("d", "e")).unwrap();
        r.insert(cursor("x", "c")).unwrap();
        r.invalidate("d", Some("c"));
        assert_eq!(r.len(), 2);
        r.invalidate("d", None);
        assert_eq!(r.len(), 1);
        assert_eq!(r.reap_idle(Duration::from_secs(0)), 1);
    }
}
