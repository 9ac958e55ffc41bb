//! `StorageError`: every way a storage call can fail. The server maps these to mongod error codes;
//! corruption errors name the segment file and byte offset so an operator can find the damage.

use std::io;

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error(
        "data directory {dir} is locked by another process (remove nothing: stop the other cairn first)"
    )]
    Locked { dir: String },
    #[error("corrupt data: {segment} offset {offset}: {reason}")]
    Corruption {
        segment: String,
        offset: u64,
        reason: String,
    },
    #[error("namespace {0} already exists")]
    NamespaceExists(String),
    #[error("namespace {0} not found")]
    NamespaceNotFound(String),
    #[error("invalid namespace: {0}")]
    InvalidNamespace(String),
    #[error("index {0} already exists")]
    IndexExists(String),
    #[error("an index with the same key pattern already exists under the name {0}")]
    IndexKeyExists(String),
    #[error("index {0} not found")]
    IndexNotFound(String),
    #[error("invalid index specification: {0}")]
    InvalidIndex(String),
    /// Index key extraction failed (`KeyError::code()` gives mongod's code, e.g. 171).
    #[error(transparent)]
    Key(#[from] crate::keys::KeyError),
    #[error("E11000 duplicate key error index: {index} dup key: {key_value}")]
    DuplicateKey {
        index: String,
        /// Boxed to keep `StorageError` small.
        key_pattern: Box<bson::Document>,
        key_value: Box<bson::Document>,
        /// A collated index's collation: `key_value`'s top-level strings are then the hex of
        /// the stored sort key (mongod's `hexEncoded`).
        collation: Option<Box<bson::Document>>,
    },
    #[error("index build already in progress: {0}")]
    IndexBuildInProgress(String),
    #[error("index build aborted: {0}")]
    IndexBuildAborted(String),
    #[error("record {0} not found")]
    RecordNotFound(u64),
    #[error("invalid document: {0}")]
    InvalidDocument(String),
    #[error("limit exceeded: {0}")]
    LimitExceeded(String),
    #[error("the log failed earlier and the engine refuses further writes: {0}")]
    Poisoned(String),
    /// A log write or sync failed; writes are refused until a retry after a backoff succeeds
    /// (see `log`). Nothing acknowledged is lost.
    #[error("cannot write the log ({reason}); writes resume once it can be written again")]
    LogUnavailable { reason: String, out_of_space: bool },
    /// A transaction's write meets a change committed after its snapshot.
    #[error("write conflict: {0}")]
    WriteConflict(String),
    /// A snapshot needs history that is no longer kept.
    #[error("snapshot too old: {0}")]
    SnapshotTooOld(String),
    /// A transaction's pending writes would pass the bound their owner set (the server's
    /// `transactionMemoryLimitBytes`); nothing of the write that would pass it was buffered.
    #[error("transaction too large: {0}")]
    TransactionTooLarge(String),
    #[error("the engine is closed")]
    Closed,
    #[error("simulated crash")]
    SimulatedCrash,
}

impl StorageError {
    pub(crate) fn corruption(segment: &str, offset: u64, reason: impl Into<String>) -> Self {
        StorageError::Corruption {
            segment: segment.to_string(),
            offset,
            reason: reason.into(),
        }
    }
}

/// Result alias for the storage layer.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
