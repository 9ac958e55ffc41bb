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
/// Pause between start-up pings of a `--*-cmd` server (it has no log line we can read).
pub const READY_POLL_INTERVAL: Duration = Duration::from_millis(5);
/// Largest ping reply accepted: a ping reply is tiny, anything big is not a MongoDB server.
pub const PING_REPLY_SIZE_MAX: usize = 1 << 20;
/// Longest answer text shown per side in the Markdown mismatch list.
pub const ANSWER_SHOWN_CHARS_MAX: usize = 700;
/// Documents per `insertMany` call of the bulk-insert workload.
pub const BULK_BATCH_COUNT: usize = 1_000;
/// A workload run stops after this long (`--quick` / full) and averages over what it did.
pub const RUN_BUDGET_QUICK: Duration = Duration::from_millis(300);
pub const RUN_BUDGET_FULL: Duration = Duration::from_secs(3);
