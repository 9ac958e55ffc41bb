//! cairn's storage engine: documents in an append-only log of checksummed segments; the
//! RecordId -> location map and every index in paged B+trees read through a bounded buffer pool;
//! copy-on-write checkpoints; all made durable through group commit. This crate knows nothing of
//! the wire protocol or the query language.
//!
//! Entry point: [`Engine::open`]. A [`Collection`] takes atomic batches of [`WriteOp`]s and
//! returns a [`Ticket`] to wait on for durability.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod backend;
pub mod btree;
pub mod capped;
mod catalog;
mod checkpoint;
mod collection;
mod collmod;
mod commit;
mod compact;
pub mod diff;
mod engine;
pub mod error;
mod extsort;
pub mod geo;
pub mod hashed;
pub mod histogram;
pub mod history;
mod index;
mod index_build;
pub mod keycode;
pub mod keys;
pub mod limits;
mod log;
pub mod nowait;
pub mod order;
pub mod pager;
pub mod record;
mod recovery;
mod replay;
pub mod sim;
mod snapshot;
pub mod text;
mod thread_idle;
mod validate;
pub mod wildcard;
mod write;

pub use backend::{Backend, BackendFile, FileBackend};
pub use collection::{Collection, Direction, IndexInfo, RecordId, WriteOp};
pub use commit::{CommitStatsSnapshot, DurableWatch, PendingWriter, Ticket};
pub use engine::{CacheStats, CollectionInfo, Collections, Engine, EngineOptions, EngineStats};
pub use error::{Result, StorageError};
pub use history::{HistoryBatch, HistoryOp, HistoryPos, HistoryRead};
pub use index::{
    COLLATION, CollationCompiler, FilterCompiler, ID_INDEX_NAME, IndexCompilers, IndexSpec,
    Predicate, encode_index_key, flat_range,
};
pub use snapshot::{ScanStep, Snapshot};
pub use thread_idle::set_thread_idle_hook;
pub use validate::ValidateReport;
pub use write::{STAMP_NOTE_KEY, write_across, write_across_at};
