//! Replica-set mode (`--replSet NAME`): a one-member set whose only member is this process.
//! Until `replSetInitiate` the node answers as an uninitiated mongod does (hello without
//! `setName`, writes refused with NotWritablePrimary, the repl commands with NotYetInitialized);
//! after it, and on every restart, it is PRIMARY at once. The configuration lives in
//! `local.system.replset` (one document, written durably), with the election term, which grows
//! by one at every start so drivers never see an `electionId` go backwards.
//!
//! This file holds the state only; the commands, start-up and hello's fields are in
//! `commands::replset`. What it must not do: elect, replicate or accept a second member (cairn
//! has no consensus; see DESIGN.md "Where it goes after one machine").

use bson::{Document, oid::ObjectId};
use std::sync::{OnceLock, RwLock};

pub struct ReplState {
    pub set_name: String,
    /// The stored configuration once initiated (with `term`).
    pub(crate) config: RwLock<Option<Document>>,
    /// `host:port` this node answers as, known once the listener is bound.
    pub(crate) me: OnceLock<String>,
    pub(crate) started: std::time::Instant,
    /// When this node became primary (initiate or start-up).
    pub(crate) elected: RwLock<Option<bson::Timestamp>>,
}

impl ReplState {
    pub fn new(set_name: String) -> ReplState {
        ReplState {
            set_name,
            config: RwLock::new(None),
            me: OnceLock::new(),
            started: std::time::Instant::now(),
            elected: RwLock::new(None),
        }
    }

    pub fn config(&self) -> Option<Document> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn initiated(&self) -> bool {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    pub(crate) fn set_config(&self, d: Document) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Some(d);
    }

    pub fn me(&self) -> String {
        self.me.get().cloned().unwrap_or_default()
    }

    pub(crate) fn term(&self) -> i64 {
        self.config()
            .and_then(|c| c.get_i64("term").ok())
            .unwrap_or(0)
    }

    /// mongod's election id for a term: the largest ObjectId timestamp, then the term.
    pub fn election_id(&self) -> ObjectId {
        let mut b = [0u8; 12];
        b[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
        b[4..].copy_from_slice(&self.term().to_be_bytes());
        ObjectId::from_bytes(b)
    }
}
