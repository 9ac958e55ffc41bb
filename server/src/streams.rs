//! Open change streams and oplog cursors: where each one is in the write history
//! (`storage::history`), what it selects, and how it shapes what it returns. Data only, like
//! `cursors`: `commands::changes` reads the history and fills batches. Bounded by
//! `cursors::CURSORS_MAX` together with the registry of ordinary cursors' ids.

use bson::Document;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use storage::HistoryPos;

/// What a change stream watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Collection {
        db: String,
        coll: String,
    },
    Database {
        db: String,
    },
    /// `allChangesForCluster`: every database but admin, config and local.
    Cluster,
}

/// `fullDocument` of a change stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FullDocument {
    Default,
    UpdateLookup,
    /// `whenAvailable` / `required`: an update's post-image, which exists (as in mongod) only
    /// when the collection kept pre- and post-images at the time of the write.
    PostImage(Image),
}

/// Whether a change stream asks for an image it may not find (`fullDocumentBeforeChange`,
/// or the post-image of `fullDocument`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Image {
    Off,
    /// Null when the write kept no image.
    WhenAvailable,
    /// An error (47 NoMatchingDocument) when the write kept no image.
    Required,
}

#[derive(Clone, Debug)]
pub enum Kind {
    /// A find on `local.oplog.rs`: entries matching `filter`.
    Oplog { filter: Document, tailable: bool },
    Change {
        scope: Scope,
        full_document: FullDocument,
        /// The stages after `$changeStream` (`commands::change_stages`), applied to events.
        matches: Vec<Document>,
        /// `fullDocumentBeforeChange`: the pre-image the log kept for the op.
        before_change: Image,
        /// `showExpandedEvents`: also create, createIndexes, dropIndexes and modify events,
        /// `collectionUUID` on every event, `operationDescription` on renames and
        /// `updateDescription.disambiguatedPaths`.
        expanded: bool,
    },
}

/// A position in the history: the batch at `next`, of which the first `skip` ops are done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub next: HistoryPos,
    pub skip: u32,
    /// Timestamp of the last op passed (the high-water mark the resume token carries).
    pub last_ts: u64,
    /// `startAtOperationTime`: ops before this timestamp are passed over.
    pub min_ts: u64,
}

pub struct StreamCursor {
    pub kind: Kind,
    pub pos: Position,
    /// `db.coll` the cursor answers for.
    pub ns: String,
    pub last_used: Instant,
    /// Collection id -> (db, name, uuid) of collections met so far.
    pub names: HashMap<u64, Option<(String, String, bson::Uuid)>>,
    /// The stream met a drop, rename or dropDatabase of what it watches and returned its
    /// invalidate event: it ends with this reply.
    pub invalidated: bool,
}

#[derive(Default)]
pub struct StreamRegistry {
    map: Mutex<HashMap<i64, StreamCursor>>,
}

impl StreamRegistry {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i64, StreamCursor>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `c` under `id` (the caller picks an id no ordinary cursor has).
    pub fn insert(&self, id: i64, c: StreamCursor) -> bool {
        let mut m = self.map();
        if m.len() >= crate::cursors::CURSORS_MAX || m.contains_key(&id) {
            return false;
        }
        m.insert(id, c);
        true
    }

    pub fn contains(&self, id: i64) -> bool {
        self.map().contains_key(&id)
    }

    pub fn take(&self, id: i64) -> Option<StreamCursor> {
        self.map().remove(&id)
    }

    pub fn put_back(&self, id: i64, mut c: StreamCursor) {
        c.last_used = Instant::now();
        self.map().insert(id, c);
    }

    pub fn kill(&self, id: i64) -> bool {
        self.map().remove(&id).is_some()
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reap_idle(&self, timeout: Duration) -> usize {
        let mut m = self.map();
        let before = m.len();
        m.retain(|_, c| c.last_used.elapsed() < timeout);
        before - m.len()
    }
}
