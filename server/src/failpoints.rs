//! Test-only fail points: named places in the server that a test can switch on to make them block,
//! so that behaviour under slow storage is proven by the order of events, never by timing. They are
//! configured with mongod's `configureFailPoint` (`mode: "off" | "alwaysOn" | {times: n} |
//! {skip: n}`, `data: {...}`) and awaited with `waitForFailPoint`, both answered only when the
//! server runs with `--setParameter enableTestCommands=1`. While every point is off, a place
//! costs one relaxed atomic load.
//!
//! The points (all entered on the blocking pool, never on an async worker):
//! - `blockStorageCall`: every storage job of the commands in `data.commands` (all when absent)
//!   blocks `data.blockTimeMS` milliseconds, or, without it, for as long as the point stays on.
//! - `hangAfterStartingIndexBuild`: an index build, once `currentOp` shows it and the namespace
//!   lock is released, waits while the point is on.
//! - `hangIndexBuildDuringScan`: an index build waits while the point is on at its first progress
//!   report with documents done (`currentOp` then shows the progress).
//! - `fsyncLockedWrite` (the one entered on an async worker; it never blocks): counted each time
//!   a write command finds the server fsync-locked and starts waiting, so a test knows the write
//!   is held back.
//! - `hangBeforeRecordingRetryReply` (cairn's own): an insert, update or delete with a retryable
//!   write's session, once its data batch is written and before its reply goes into the session's
//!   record, waits while the point is on (a test kills the server in that window).
//! - `onPrimaryTransactionalWrite` (async worker, never blocks): after a retryable write ran and
//!   its reply was recorded, the connection is closed instead of answering (unless
//!   `data.closeConnection` is false), as mongod's point does: the reply is lost, the driver
//!   retries.

use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;

pub const BLOCK_STORAGE_CALL: &str = "blockStorageCall";
pub const HANG_AFTER_STARTING_INDEX_BUILD: &str = "hangAfterStartingIndexBuild";
pub const HANG_INDEX_BUILD_DURING_SCAN: &str = "hangIndexBuildDuringScan";
pub const FSYNC_LOCKED_WRITE: &str = "fsyncLockedWrite";
pub const ON_PRIMARY_TRANSACTIONAL_WRITE: &str = "onPrimaryTransactionalWrite";
/// cairn's own: a retryable write hangs after its data batch and before its reply goes into the
/// session's record (the window `retry_record` answers with 217 after a crash).
pub const HANG_BEFORE_RECORDING_RETRY_REPLY: &str = "hangBeforeRecordingRetryReply";
const NAMES: &[&str] = &[
    BLOCK_STORAGE_CALL,
    HANG_AFTER_STARTING_INDEX_BUILD,
    HANG_INDEX_BUILD_DURING_SCAN,
    FSYNC_LOCKED_WRITE,
    ON_PRIMARY_TRANSACTIONAL_WRITE,
    HANG_BEFORE_RECORDING_RETRY_REPLY,
];

/// Longest a hang re-checks its point without being woken (a safety net; configure wakes it).
const HANG_RECHECK_MS: u64 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    AlwaysOn,
    /// On for the next n entries.
    Times(i64),
    /// Off for the next n entries, then on.
    Skip(i64),
}

struct Point {
    mode: Mode,
    data: Document,
    /// Entries since the server started (mongod's `count` / `timesEntered`).
    entered: u64,
}

pub struct FailPoints {
    /// Points not off: the fast path skips the lock when zero.
    on: AtomicUsize,
    points: Mutex<BTreeMap<&'static str, Point>>,
    /// Wakes hangs when a point is reconfigured.
    changed: Condvar,
    /// Bumped at every entry; `waitForFailPoint` waits on it.
    entries: watch::Sender<u64>,
}

impl Default for FailPoints {
    fn default() -> Self {
        let points = NAMES
            .iter()
            .map(|n| {
                let p = Point {
                    mode: Mode::Off,
                    data: Document::new(),
                    entered: 0,
                };
                (*n, p)
            })
            .collect();
        FailPoints {
            on: AtomicUsize::new(0),
            points: Mutex::new(points),
            changed: Condvar::new(),
            entries: watch::channel(0).0,
        }
    }
}

/// `mode` as mongod's `FailPoint::parseBSON` reads it: required (IllegalOperation), a string
/// (`off`, `alwaysOn`) or a document whose first known key of `times`, `skip` decides (other
/// keys ignored); any other type is TypeMismatch. cairn has no random activation, so
/// `activationProbability` is refused (BadValue) rather than silently ignored.
fn parse_mode(v: Option<&Bson>) -> CommandResult<Mode> {
    let d = match v {
        None => {
            return Err(err(
                ErrorCode::IllegalOperation,
                "When setting a failpoint, you must supply a 'mode'",
            ));
        }
        Some(Bson::String(s)) if s == "off" => return Ok(Mode::Off),
        Some(Bson::String(s)) if s == "alwaysOn" => return Ok(Mode::AlwaysOn),
        Some(Bson::String(s)) => {
            return Err(err(ErrorCode::BadValue, format!("unknown mode: {s}")));
        }
        Some(Bson::Document(d)) => d,
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "'mode' must be a string or JSON object",
            ));
        }
    };
    let Some((k, n)) = ["times", "skip"]
        .into_iter()
        .find_map(|k| d.get(k).map(|n| (k, n)))
    else {
        return Err(err(
            ErrorCode::BadValue,
            "'mode' must be one of 'off', 'alwaysOn', '{times:n}' or '{skip:n}'",
        ));
    };
    let n = match n {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            crate::query::types::as_i64_exact(n).ok_or_else(|| {
                err(
                    ErrorCode::BadValue,
                    format!("Expected field \"{k}\" to have integral value"),
                )
            })?
        }
        _ => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!("Expected field \"{k}\" to have numeric type"),
            ));
        }
    };
    if n < 0 {
        return Err(err(
            ErrorCode::BadValue,
            format!("'{k}' option to 'mode' must be positive"),
        ));
    }
    if n > i64::from(i32::MAX) {
        return Err(err(
            ErrorCode::BadValue,
            format!("'{k}' option to 'mode' is too large"),
        ));
    }
    Ok(match k {
        "times" if n == 0 => Mode::Off,
        "times" => Mode::Times(n),
        _ => Mode::Skip(n),
    })
}

impl FailPoints {
    fn map(&self) -> MutexGuard<'_, BTreeMap<&'static str, Point>> {
        self.points.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count_on(map: &BTreeMap<&'static str, Point>) -> usize {
        map.values().filter(|p| p.mode != Mode::Off).count()
    }

    /// Whether any fail point is on (calls are then never tried on the async workers, so every
    /// storage call meets the `blockStorageCall` point).
    pub fn any_on(&self) -> bool {
        self.on.load(Relaxed) != 0
    }

    /// `configureFailPoint` on the point `name` (the command layer has read the name and checked
    /// the fields): returns how often the point was entered before.
    pub fn configure(&self, name: &str, body: &Document) -> CommandResult<u64> {
        if !self.map().contains_key(name) {
            return Err(err(
                ErrorCode::FailPointSetFailed,
                format!("{name} not found"),
            ));
        }
        let mode = parse_mode(body.get("mode"))?;
        let data = match body.get("data") {
            None => Document::new(),
            Some(Bson::Document(d)) => d.clone(),
            Some(_) => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    "the 'data' option must be a JSON object",
                ));
            }
        };
        let mut map = self.map();
        let Some(point) = map.get_mut(name) else {
            return Err(err(
                ErrorCode::FailPointSetFailed,
                format!("{name} not found"),
            ));
        };
        point.mode = mode;
        point.data = data;
        let count = point.entered;
        self.on.store(Self::count_on(&map), Relaxed);
        drop(map);
        self.changed.notify_all();
        Ok(count)
    }

    /// Enters `name` if it is on and `wanted(data)`: counts the entry and returns the data.
    /// An unwanted call neither counts nor uses up `times`/`skip`.
    pub fn enter_if(&self, name: &str, wanted: impl Fn(&Document) -> bool) -> Option<Document> {
        if self.on.load(Relaxed) == 0 {
            return None;
        }
        let mut map = self.map();
        let point = map.get_mut(name)?;
        if point.mode == Mode::Off || !wanted(&point.data) {
            return None;
        }
        let fire = match point.mode {
            Mode::Off => false,
            Mode::AlwaysOn => true,
            Mode::Times(n) => {
                point.mode = if n > 1 { Mode::Times(n - 1) } else { Mode::Off };
                true
            }
            Mode::Skip(n) if n > 0 => {
                point.mode = Mode::Skip(n - 1);
                false
            }
            Mode::Skip(_) => true,
        };
        if !fire {
            return None;
        }
        point.entered += 1;
        let data = point.data.clone();
        self.on.store(Self::count_on(&map), Relaxed);
        drop(map);
        self.entries.send_modify(|n| *n += 1);
        Some(data)
    }

    /// Blocks the calling thread (a blocking-pool thread) while `name` is on.
    pub fn hang_while_on(&self, name: &str) {
        let mut map = self.map();
        while map.get(name).is_some_and(|p| p.mode != Mode::Off) {
            map = self
                .changed
                .wait_timeout(map, Duration::from_millis(HANG_RECHECK_MS))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Enters `name` if it is on, then blocks while it stays on (the index build hangs).
    pub fn hang_while_on_entered(&self, name: &str) {
        if self.enter_if(name, |_| true).is_some() {
            self.hang_while_on(name);
        }
    }

    /// `blockStorageCall` for a storage job of `command`.
    pub fn block_storage_call(&self, command: &str) {
        let wanted = |data: &Document| match data.get_array("commands") {
            Ok(names) => names.iter().any(|n| n.as_str() == Some(command)),
            Err(_) => true,
        };
        let Some(data) = self.enter_if(BLOCK_STORAGE_CALL, wanted) else {
            return;
        };
        match data
            .get("blockTimeMS")
            .and_then(crate::query::types::as_i64)
        {
            Some(ms) => std::thread::sleep(Duration::from_millis(ms.max(0) as u64)),
            None => self.hang_while_on(BLOCK_STORAGE_CALL),
        }
    }

    /// Entries of `name` so far.
    pub fn times_entered(&self, name: &str) -> Option<u64> {
        self.map().get(name).map(|p| p.entered)
    }

    /// `waitForFailPoint`: until `name` was entered `times` times in all, at most `timeout`.
    pub async fn wait_entered(
        &self,
        name: &str,
        times: u64,
        timeout: Duration,
    ) -> CommandResult<()> {
        let mut rx = self.entries.subscribe();
        let reached = async {
            loop {
                match self.times_entered(name) {
                    None => {
                        return Err(err(
                            ErrorCode::BadValue,
                            format!("Cannot find failpoint {name}"),
                        ));
                    }
                    Some(n) if n >= times => return Ok(()),
                    Some(_) => {}
                }
                if rx.changed().await.is_err() {
                    return Err(err(ErrorCode::InternalError, "fail points dropped"));
                }
            }
        };
        tokio::time::timeout(timeout, reached).await.map_err(|_| {
            err(
                ErrorCode::MaxTimeMSExpired,
                format!("Fail point {name} not yet entered {times} times"),
            )
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn configure(fp: &FailPoints, body: Document) -> CommandResult<u64> {
        fp.configure(
            body.get_str("configureFailPoint").unwrap_or_default(),
            &body,
        )
    }

    #[test]
    fn modes_count_and_expire() {
        let fp = FailPoints::default();
        assert!(fp.enter_if(BLOCK_STORAGE_CALL, |_| true).is_none());
        let before = configure(
            &fp,
            doc! { "configureFailPoint": BLOCK_STORAGE_CALL, "mode": { "times": 2 }, "data": { "x": 1 } },
        )
        .unwrap();
        assert_eq!(before, 0);
        assert_eq!(
            fp.enter_if(BLOCK_STORAGE_CALL, |_| true),
            Some(doc! { "x": 1 })
        );
        // An unwanted entry uses up nothing.
        assert!(fp.enter_if(BLOCK_STORAGE_CALL, |_| false).is_none());
        assert!(fp.enter_if(BLOCK_STORAGE_CALL, |_| true).is_some());
        assert!(fp.enter_if(BLOCK_STORAGE_CALL, |_| true).is_none());
        assert_eq!(fp.times_entered(BLOCK_STORAGE_CALL), Some(2));
        configure(
            &fp,
            doc! { "configureFailPoint": BLOCK_STORAGE_CALL, "mode": { "skip": 1 } },
        )
        .unwrap();
        assert!(fp.enter_if(BLOCK_STORAGE_CALL, |_| true).is_none());
        assert!(fp.enter_if(BLOCK_STORAGE_CALL, |_| true).is_some());
        let count = configure(
            &fp,
            doc! { "configureFailPoint": BLOCK_STORAGE_CALL, "mode": "off" },
        )
        .unwrap();
        assert_eq!(count, 3);
        assert_eq!(fp.on.load(Relaxed), 0);
    }

    #[test]
    fn bad_requests() {
        let fp = FailPoints::default();
        let code = |body| configure(&fp, body).unwrap_err().code.code();
        // mongod's codes: the point is looked up first (266), then `mode` and `data` are read.
        assert_eq!(
            code(doc! { "configureFailPoint": "nope", "mode": "alwaysOn" }),
            266
        );
        assert_eq!(code(doc! { "configureFailPoint": "nope" }), 266);
        let p = BLOCK_STORAGE_CALL;
        for (mode, want) in [
            (None, 20),
            (Some(Bson::String("sometimes".into())), 2),
            (Some(Bson::Int32(1)), 14),
            (Some(Bson::Boolean(true)), 14),
            (Some(Bson::Document(doc! { "times": -1 })), 2),
            (Some(Bson::Document(doc! { "times": 1.5 })), 2),
            (Some(Bson::Document(doc! { "times": "1" })), 14),
            (Some(Bson::Document(doc! { "skip": 1_i64 << 40 })), 2),
            (Some(Bson::Document(doc! { "nope": 1 })), 2),
        ] {
            let mut body = doc! { "configureFailPoint": p };
            if let Some(m) = mode.clone() {
                body.insert("mode", m);
            }
            assert_eq!(code(body), want, "{mode:?}");
        }
        assert_eq!(
            code(doc! { "configureFailPoint": p, "mode": "off", "data": 1 }),
            14
        );
        // Other fields of the mode document are ignored, as are other fields of the command.
        configure(
            &fp,
            doc! { "configureFailPoint": p, "mode": { "times": 1, "x": 1 }, "extra": 1 },
        )
        .unwrap();
        configure(&fp, doc! { "configureFailPoint": p, "mode": "off" }).unwrap();
    }

    #[test]
    fn block_storage_call_filters_by_command() {
        let fp = FailPoints::default();
        configure(
            &fp,
            doc! { "configureFailPoint": BLOCK_STORAGE_CALL, "mode": "alwaysOn",
            "data": { "commands": ["find"], "blockTimeMS": 0 } },
        )
        .unwrap();
        fp.block_storage_call("insert");
        assert_eq!(fp.times_entered(BLOCK_STORAGE_CALL), Some(0));
        fp.block_storage_call("find");
        assert_eq!(fp.times_entered(BLOCK_STORAGE_CALL), Some(1));
    }

    #[tokio::test]
    async fn hang_ends_when_turned_off_and_wait_sees_the_entry() {
        let fp = std::sync::Arc::new(FailPoints::default());
        configure(
            &fp,
            doc! { "configureFailPoint": BLOCK_STORAGE_CALL, "mode": "alwaysOn" },
        )
        .unwrap();
        let f = fp.clone();
        let hung = tokio::task::spawn_blocking(move || f.block_storage_call("find"));
        fp.wait_entered(BLOCK_STORAGE_CALL, 1, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(!hung.is_finished());
        configure(
            &fp,
            doc! { "configureFailPoint": BLOCK_STORAGE_CALL, "mode": "off" },
        )
        .unwrap();
        hung.await.unwrap();
        let late = fp
            .wait_entered(BLOCK_STORAGE_CALL, 2, Duration::from_millis(1))
            .await;
        assert_eq!(late.unwrap_err().code, ErrorCode::MaxTimeMSExpired);
    }
}
