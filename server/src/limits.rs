//! Every bound the server enforces, in one place, units last. `hello` and `serverStatus` report
//! these same constants, so what we announce is what we enforce.

// One limit per bound: the protocol's own bounds (`maxBsonObjectSize`, `maxMessageSizeBytes`,
// `maxWriteBatchSize`) are defined once, in the wire crate, and enforced here too; the namespace
// lengths are the storage engine's (`storage::limits`).
pub use wire::limits::{BSON_OBJECT_SIZE_MAX, MESSAGE_SIZE_MAX, WRITE_BATCH_COUNT_MAX};
/// Levels of nesting a stored document may have, the top level counted (mongod's default
/// `maxBSONDepth` of 200 less the 20 levels it keeps for wrapping documents in commands).
pub const STORED_NESTING_DEPTH_MAX: usize = 180;
/// Default bound on concurrently open client connections (`--maxConns` lowers or raises it).
pub const CONNECTIONS_MAX: usize = 10_000;
/// Log lines kept in memory for `getLog`.
pub const LOG_LINES_MAX: usize = 1024;
/// How long a clean shutdown waits for in-flight requests before giving up on them.
pub const SHUTDOWN_GRACE_MS: u64 = 10_000;
/// Default threshold of the slow-operation log line (mongod's `slowms`).
pub const SLOW_OP_THRESHOLD_MS_DEFAULT: i64 = 100;
/// `logicalSessionTimeoutMinutes` in `hello`.
pub const SESSION_TIMEOUT_MINUTES: i32 = 30;
/// Logical sessions the server keeps retryable-write state for (mongod's `maxSessions` is 1M;
/// an entry here holds one stored reply).
pub const SESSIONS_MAX: usize = 100_000;
/// Query settings kept (`setQuerySettings`); mongod bounds its `querySettings` parameter at
/// 16 MiB of BSON instead.
pub const QUERY_SETTINGS_MAX: usize = 1_000;
/// Query shapes `$queryStats` keeps (`crate::query_stats`); mongod bounds its store by memory
/// (`internalQueryStatsCacheSize`, 1% of it by default).
pub const QUERY_STATS_ENTRIES_MAX: usize = 10_000;
/// Bytes of retryable-write replies the session table keeps at most, all sessions together. Past
/// it a reply is not kept, and a retry of that write gets IncompleteTransactionHistory instead of
/// running again.
pub const SESSION_REPLIES_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Wire versions we speak: 0 (legacy) through 25 (mongod 8.0).
pub const WIRE_VERSION_MIN: i32 = 0;
pub const WIRE_VERSION_MAX: i32 = 25;
/// Size of the read buffer a connection starts with; it grows to the frame being read.
pub const READ_BUFFER_INITIAL_BYTES: usize = 16 * 1024;
/// A read buffer that grew past this (a large frame, or requests read ahead) is replaced by a
/// fresh one of `READ_BUFFER_INITIAL_BYTES` once its frame is taken, so an idle connection does
/// not keep up to 48 MiB for the largest message it ever received.
pub const READ_BUFFER_KEPT_BYTES_MAX: usize = 64 * 1024;
/// While a request runs, the connection keeps reading (to notice a client that hangs up) until
/// this many bytes of later requests wait in its buffer.
pub const READ_AHEAD_BYTES_MAX: usize = 1024 * 1024;
/// Threads of the blocking pool that runs every storage call (the runtime's
/// `max_blocking_threads`): as many storage operations as mongod 7.0 admits at once by default
/// (128 read and 128 write tickets, here one pool). Further jobs queue, one per connection at most.
pub const STORAGE_THREADS_MAX: usize = 128;

/// How long a read-only call tried on an async worker (`crate::offload::run_tried`) may run
/// before it is dropped and run again on the storage pool. A point read from cached pages takes
/// tens of microseconds; this bounds what one attempt can hold a worker for, and what is wasted
/// when the attempt is dropped.
pub const TRY_ON_WORKER_MICROS: u64 = 500;
/// Parts one parallel collection scan is split into at most (`exec::parallel`; the machine's
/// cores and `parallelScanThreads` may lower it).
pub const PARALLEL_SCAN_PARTS_MAX: usize = 8;
/// Helper threads all parallel scans together may run at once, beyond the pool threads their
/// operations already hold; a scan that finds none free runs serially.
pub const PARALLEL_SCAN_HELPERS_MAX: usize = 16;
/// Default of `parallelScanMinDocuments`: smaller collections are scanned serially (starting
/// threads and merging partial states does not pay below it).
pub const PARALLEL_SCAN_DOCS_MIN_DEFAULT: i64 = 50_000;
/// Smallest default cache (mongod: the larger of 256 MB and half of RAM less 1 GB).
pub const CACHE_SIZE_BYTES_DEFAULT_MIN: u64 = 256 * 1024 * 1024;
/// Largest `--wiredTigerCacheSizeGB` (mongod's bound).
pub const CACHE_SIZE_GB_MAX: f64 = 10_000.0;
/// `--syncdelay` default: seconds between scheduled checkpoints (mongod's).
pub const SYNC_DELAY_SECS_DEFAULT: f64 = 60.0;
/// Largest `--syncdelay` (mongod's bound).
pub const SYNC_DELAY_SECS_MAX: f64 = 9_999_999.0;
/// `--checkpointLogSizeMB` default: log written since the last checkpoint that starts the next.
pub const CHECKPOINT_LOG_MB_DEFAULT: u64 = 64;
/// `--oplogSize` default in MB (mongod's smallest default, 990 MB, rounded up).
pub const OPLOG_SIZE_MB_DEFAULT: u64 = 1024;
/// Change-stream events or oplog entries one batch returns at most (besides the 16 MB bound).
pub const CHANGE_BATCH_COUNT_MAX: usize = 10_000;
/// Longest `maxAwaitTimeMS` a change stream's getMore waits.
pub const CHANGE_AWAIT_MS_MAX: u64 = 60_000;

/// Under `--auth`: most connections open at once that have not authenticated (the default of
/// `--setParameter maxUnauthenticatedConnections`; driver monitoring connections never
/// authenticate, so this is generous). Further connections are closed at accept.
pub const UNAUTHENTICATED_CONNECTIONS_MAX: usize = 2000;
/// Under `--auth`: an unauthenticated connection that completes no request for this long is
/// closed (the default of `unauthenticatedIdleTimeoutMS`; drivers' monitors send `hello` every
/// 10 s, or stream it).
pub const UNAUTHENTICATED_IDLE_MS: u64 = 60_000;
/// Largest SASL payload (a SCRAM message is some hundred bytes plus the user name).
pub const SASL_PAYLOAD_BYTES_MAX: usize = 8 * 1024;
/// Messages of one SASL conversation, `saslStart` included (SCRAM needs 2, or 3 without
/// `skipEmptyExchange`).
pub const SASL_STEPS_MAX: usize = 3;
/// Time a SASL conversation may take from `saslStart` to its last message.
pub const SASL_CONVERSATION_MS_MAX: u64 = 30_000;
/// Default of `authFailedDelayMs`: every failed authentication is answered this late.
pub const AUTH_FAILED_DELAY_MS_DEFAULT: i64 = 100;
/// Longest rendering of a command inside an `Unauthorized` message.
pub const UNAUTHORIZED_COMMAND_TEXT_BYTES_MAX: usize = 1024;
/// Time a TLS handshake may take before the connection is dropped.
pub const TLS_HANDSHAKE_MS_MAX: u64 = 10_000;

const _: () = assert!(BSON_OBJECT_SIZE_MAX < MESSAGE_SIZE_MAX);
const _: () = assert!(UNAUTHENTICATED_CONNECTIONS_MAX <= CONNECTIONS_MAX);
const _: () = assert!(SASL_PAYLOAD_BYTES_MAX < BSON_OBJECT_SIZE_MAX);
const _: () = assert!(WIRE_VERSION_MIN <= WIRE_VERSION_MAX);
const _: () = assert!(READ_AHEAD_BYTES_MAX <= MESSAGE_SIZE_MAX);
const _: () = assert!(STORAGE_THREADS_MAX > 0 && STORAGE_THREADS_MAX <= CONNECTIONS_MAX);

/// Rotations within one second get `.1`, `.2`, ... suffixes up to this many.
pub const LOG_ROTATE_SAME_SECOND_MAX: u32 = 1000;
