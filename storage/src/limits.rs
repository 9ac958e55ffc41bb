//! Every bound the storage engine enforces, in one place, units last in the names. Relations
//! between them are checked at compile time at the bottom of the file.

/// Size a new log segment file is preallocated to (a segment holding one huge batch may be larger).
pub const SEGMENT_SIZE_BYTES_DEFAULT: u64 = 64 << 20;
/// Zeros written per call when preallocating a segment.
pub const PREALLOCATE_CHUNK_BYTES: usize = 1 << 20;
/// How often the preallocation thread checks for a missing spare segment.
pub const PREALLOCATE_INTERVAL_MS: u64 = 20;
/// Smallest segment size accepted in `EngineOptions` (tests use small segments to roll often).
pub const SEGMENT_SIZE_BYTES_MIN: u64 = 4 << 10;
/// Largest payload of one log record: a 16 MiB document plus its record framing and some slack.
pub const RECORD_PAYLOAD_SIZE_MAX: usize = (16 << 20) + (1 << 20);
/// Largest BSON document the engine stores (mongod's `maxBsonObjectSize` plus the 16 KiB it
/// allows internally for command overhead).
pub const DOCUMENT_SIZE_MAX: usize = (16 << 20) + (16 << 10);
/// Most bytes of before-images kept for open snapshots; past it the oldest go and snapshots
/// older than what is left get `SnapshotTooOld`.
pub const SNAPSHOT_HISTORY_BYTES_MAX: usize = 256 << 20;
/// Most operations in one atomic write batch.
pub const WRITE_BATCH_OPS_MAX: usize = 100_000;
/// Most bytes of log records one write batch may produce (a batch never spans segments).
pub const WRITE_BATCH_BYTES_MAX: usize = 256 << 20;
/// Longest encoded index key (mongod 4.2+ has no key limit; this bounds memory per entry).
pub const INDEX_KEY_SIZE_MAX: usize = 16 << 20;
/// Most indexes per collection (mongod: 64).
pub const INDEXES_PER_COLLECTION_MAX: usize = 64;
/// Most entries one scan call returns, whatever limit the caller asks for.
pub const SCAN_BATCH_COUNT_MAX: usize = 1 << 20;
/// Compaction starts when the log holds more than this many bytes per live byte (times 100).
pub const COMPACTION_SPACE_RATIO_PERCENT: u64 = 150;
/// Below this many bytes of log, compaction never runs (small stores are not worth it).
pub const COMPACTION_LOG_BYTES_MIN: u64 = 1 << 20;
/// How often the background compactor looks at the log.
pub const COMPACTION_INTERVAL_MS: u64 = 200;
/// Bytes of live records re-logged per collection-lock hold during compaction.
pub const COMPACTION_CHUNK_BYTES: u64 = 256 << 10;
/// A checkpoint is taken once the log has moved this many segments past the last one.
pub const CHECKPOINT_INTERVAL_SEGMENTS: u64 = 4;
/// Buffer pool size when the caller sets none (mongod's floor for its cache).
pub const CACHE_SIZE_BYTES_DEFAULT: u64 = 256 << 20;
/// Scheduled checkpoint period (mongod's `syncdelay` default).
pub const CHECKPOINT_INTERVAL_MS_DEFAULT: u64 = 60_000;
/// Log bytes written since the last checkpoint that start the next one.
pub const CHECKPOINT_LOG_BYTES_DEFAULT: u64 = 64 << 20;
/// Index changes replay buffers (to apply them in key order) before it applies them.
pub const REPLAY_INDEX_BUFFER_BYTES: usize = 64 << 20;
/// A checkpoint syncs the page file after each slice of this many bytes of pages it writes.
pub const CHECKPOINT_SYNC_SLICE_BYTES: usize = 8 << 20;
/// Immediate mode: how long a write nobody waits for may stay unsynced (mongod's default
/// `journalCommitInterval`). Waited-for writes are synced at once.
pub const UNAWAITED_SYNC_MS: u64 = 100;
/// Longest a requested sync is held back for writers on their way (`commit::PendingWriter`);
/// the hold is otherwise the last sync's duration, so it never costs more than a sync did.
pub const GROUP_COMMIT_HOLD_US_MAX: u64 = 2_000;
/// Most holds skipped after holds ran out (writers arriving spread out rather than in bursts).
pub const GROUP_COMMIT_HOLD_BACKOFF_MAX: u32 = 64;
/// After a failed log write or sync, the first retry waits this long; each failed retry doubles
/// the wait up to `LOG_RETRY_BACKOFF_MS_MAX` (a full disk is not hammered, yet writes resume
/// within seconds of space returning).
pub const LOG_RETRY_BACKOFF_MS_MIN: u64 = 100;
pub const LOG_RETRY_BACKOFF_MS_MAX: u64 = 2_000;
/// How long a checkpoint whose cut is made waits for a failed log to be repaired before it
/// gives up (and stops writes until a restart: its sealed pages were never written).
pub const CHECKPOINT_LOG_WAIT_MS: u64 = 60_000;
/// How often the checkpoint thread looks whether a checkpoint is due.
pub const CHECKPOINT_POLL_MS: u64 = 100;
/// Documents an index build reads per hold of the collection's read lock.
pub const INDEX_BUILD_SCAN_DOCS: usize = 512;
/// Memory an index build's external sort fills before it spills a sorted run (mongod's
/// `maxIndexBuildMemoryUsageMegabytes` is 200; cairn keeps within its cache setting's slack).
pub const INDEX_BUILD_MEMORY_BYTES: usize = 32 << 20;
/// Memory of a build's side table before it moves to a file.
pub const INDEX_BUILD_SIDE_MEMORY_BYTES: usize = 16 << 20;
/// Side-table entries applied per hold of a build's guard; fewer left means "caught up".
pub const INDEX_BUILD_DRAIN_OPS: usize = 1024;
/// Distinct duplicate keys a unique build re-checks at commit before it gives up.
pub const INDEX_BUILD_DUPLICATES_MAX: usize = 10_000;
/// Bytes read per call from a temporary file.
pub const EXTSORT_READ_CHUNK_BYTES: usize = 256 << 10;
/// Longest database name in bytes (mongod: fewer than 64). The server checks the same constant.
pub const DATABASE_NAME_SIZE_MAX: usize = 63;
/// Longest `db.collection` namespace in bytes (mongod: 255). The server checks the same constant.
pub const NAMESPACE_SIZE_MAX: usize = 255;
/// Most bytes one pread fetches when a scan reads neighbouring records together.
pub const READ_RUN_BYTES_MAX: u64 = 1 << 20;
/// Chunk size used to read a whole segment during recovery.
pub const RECOVERY_READ_CHUNK_BYTES: usize = 4 << 20;

const _: () = assert!(SEGMENT_SIZE_BYTES_MIN <= SEGMENT_SIZE_BYTES_DEFAULT);
const _: () = assert!(DOCUMENT_SIZE_MAX + 64 <= RECORD_PAYLOAD_SIZE_MAX);
const _: () = assert!(RECORD_PAYLOAD_SIZE_MAX <= WRITE_BATCH_BYTES_MAX);
const _: () = assert!(COMPACTION_SPACE_RATIO_PERCENT > 100);
