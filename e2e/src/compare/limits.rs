//! Every bound and timeout of the compare and bench tools in one place, units last.

use std::time::Duration;

/// A correctness step slower than this is recorded as a client-side timeout.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// A down server should fail a run quickly, not after the driver's 30 s default.
pub const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server started from `--*-cmd` may take to answer its first ping.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// One ping attempt (start-up polling and the healthcheck's connect/read).
pub const PING_TIMEOUT: Duration = Duration::from_millis(500);
/// The healthcheck allows a busy server more time than start-up polling does.
pub const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between start-up pings of a server the tools started; also the resolution of the
/// restart and open timers.
pub const READY_POLL_INTERVAL: Duration = Duration::from_millis(2);
/// Largest reply the raw probes accept (ping, the sweep's first find of one document): such
/// replies are tiny, anything big is not a MongoDB server answering them.
pub const PING_REPLY_SIZE_MAX: usize = 1 << 20;
/// Longest answer text shown per side in the Markdown mismatch list.
pub const ANSWER_SHOWN_CHARS_MAX: usize = 700;
/// Documents per `insertMany` call of the bulk-insert workload.
pub const BULK_BATCH_COUNT: usize = 1_000;
/// A workload run stops after this long (`--quick` / full) and averages over what it did.
pub const RUN_BUDGET_QUICK: Duration = Duration::from_millis(300);
pub const RUN_BUDGET_FULL: Duration = Duration::from_secs(3);

// `cairn-bench sweep`.

/// How long a swept server may take to open its data directory: today's engine replays its log
/// on open, which takes minutes at 10M documents.
pub const SWEEP_OPEN_TIMEOUT: Duration = Duration::from_secs(1_800);
/// How long a clean shutdown (which flushes storage) may take before the server is SIGKILLed.
pub const SWEEP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long one driver operation of the sweep may take (a forced checkpoint of a large store).
pub const SWEEP_OPERATION_TIMEOUT: Duration = Duration::from_secs(600);
/// Default `insertMany` batches in flight during the bulk load.
pub const SWEEP_LOAD_IN_FLIGHT_DEFAULT: usize = 4;
/// Most batches in flight a user may ask for (one connection each).
pub const SWEEP_LOAD_IN_FLIGHT_MAX: usize = 64;
/// Documents in one range scan by the secondary key.
pub const SWEEP_RANGE_DOCS: i64 = 1_000;
/// Durable single inserts: one phase (outside or during checkpoints) stops after this long or
/// this many inserts, whichever comes first (full / `--quick`).
pub const SWEEP_INSERT_PHASE_FULL: Duration = Duration::from_secs(5);
pub const SWEEP_INSERT_PHASE_QUICK: Duration = Duration::from_millis(700);
pub const SWEEP_INSERT_PHASE_COUNT_MAX: usize = 50_000;
/// Acknowledged documents written just before the SIGKILL (full / `--quick`).
pub const SWEEP_BURST_DOCS_FULL: u64 = 10_000;
pub const SWEEP_BURST_DOCS_QUICK: u64 = 2_000;
/// Point reads and range scans per run (full / `--quick`); runs are given by `--runs`.
pub const SWEEP_POINT_READS_FULL: usize = 1_000;
pub const SWEEP_POINT_READS_QUICK: usize = 200;
pub const SWEEP_RANGE_SCANS_FULL: usize = 20;
pub const SWEEP_RANGE_SCANS_QUICK: usize = 5;
/// The floors: "write a block + fdatasync" over a preallocated file of this size, with whole
/// 4 KiB pages and with log-record-sized blocks, in turns of this many rounds with as many of a
/// system's durable inserts; loopback TCP round trips of a small message.
pub const FLOOR_SYNC_BLOCK_BYTES: usize = 4_096;
pub const FLOOR_SYNC_SMALL_BLOCK_BYTES: usize = 512;
pub const FLOOR_SYNC_FILE_BYTES: usize = 1 << 20;
pub const FLOOR_TURN_ROUNDS: usize = 20;
pub const FLOOR_LOOPBACK_ROUNDS: usize = 5_000;
pub const FLOOR_LOOPBACK_MESSAGE_BYTES: usize = 64;
