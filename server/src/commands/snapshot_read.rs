//! Snapshot reads outside transactions: `readConcern: {level: "snapshot"}`, optionally with
//! `atClusterTime`, on `find`, `aggregate` and `distinct` of a replica-set member, as mongod 7.0
//! serves them. `prepare` checks the read concern of every request in mongod's order and, for
//! such a read, opens a storage snapshot at the requested cluster time (or at the newest
//! committed one) and hands it to the request as a read-only `crate::txn::Txn`, so the scans
//! and fetches of the command read the snapshot exactly as a transaction's do. A cursor the
//! read leaves open keeps that `Txn` (`Cursor::snapshot`), so its getMores read the same
//! snapshot; every reply carries the read's `atClusterTime` (in `cursor` for find, aggregate and
//! getMore, at the top for distinct).
//!
//! Bounds: an open snapshot pins the before-images of every later write in memory. A snapshot
//! cursor is a cursor like any other (at most `CURSORS_MAX`, reaped after
//! `cursorTimeoutMillis` idle), and the images of all snapshots together are capped by
//! `storage::limits::SNAPSHOT_HISTORY_BYTES_MAX`: past it the oldest go, and a cursor whose
//! snapshot needed them fails its next getMore with SnapshotTooOld instead of reading a wrong
//! version. How far back `atClusterTime` may go is `minSnapshotHistoryWindowInSeconds` (the
//! engine keeps every write's before-images that long, `storage::Engine::set_history_window`).

use super::{Reply, Request};
use crate::clock;
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::sessions::TxnStatement;
use crate::state::ServerState;
use crate::txn::Txn;
use bson::{Bson, Document, RawDocumentBuf, Timestamp, cstr};

/// The commands that take readConcern snapshot outside a transaction.
pub const SNAPSHOT_COMMANDS: &[&str] = &["find", "aggregate", "distinct"];

/// The server parameter that sets how far back a snapshot read may go.
pub const WINDOW_PARAMETER: &str = "minSnapshotHistoryWindowInSeconds";

/// The note `docs/COMPATIBILITY.md` shows under the command table (`crate::compat`).
pub fn compat_note() -> String {
    let names: Vec<String> = SNAPSHOT_COMMANDS.iter().map(|c| format!("`{c}`")).collect();
    format!(
        "readConcern `snapshot` outside a transaction (replica-set members only, with or without \
         `atClusterTime`, at most `{WINDOW_PARAMETER}` back): {} and the getMores of their \
         cursors, which keep reading the same snapshot; every other command refuses it with \
         InvalidOptions (72), a standalone with NotAReplicaSet (123), a capped collection with \
         SnapshotUnavailable (246), as mongod does.\n\n",
        names.join(", ")
    )
}

/// What a request's `readConcern` says about snapshots.
struct Asked {
    snapshot: bool,
    at: Option<Timestamp>,
}

/// `readConcern.level == "snapshot"` and `readConcern.atClusterTime`, with mongod's parse errors
/// (a wrong type is left to `clock::check_read_concern`, which names it).
fn asked(body: &Document) -> CommandResult<Option<Asked>> {
    let Some(Bson::Document(rc)) = body.get("readConcern") else {
        return Ok(None);
    };
    let snapshot = rc.get_str("level").is_ok_and(|l| l == "snapshot");
    let at = match rc.get("atClusterTime") {
        None => None,
        Some(Bson::Timestamp(t)) => Some(*t),
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'readConcern.atClusterTime' is the wrong type, expected type 'timestamp'",
            ));
        }
    };
    if let Some(t) = at {
        if !snapshot {
            return Err(err(
                ErrorCode::InvalidOptions,
                "atClusterTime field can be set only if level is snapshot",
            ));
        }
        if rc.contains_key("afterClusterTime") {
            return Err(err(
                ErrorCode::InvalidOptions,
                "Can not specify both afterClusterTime and atClusterTime",
            ));
        }
        if t.time == 0 && t.increment == 0 {
            return Err(err(
                ErrorCode::InvalidOptions,
                "readConcern atClusterTime cannot be a null timestamp",
            ));
        }
    }
    Ok((snapshot || at.is_some()).then_some(Asked { snapshot, at }))
}

/// Checks the request's read concern for snapshots and, for a snapshot read outside a
/// transaction, attaches its snapshot to the request (`req.txn`). Returns the cluster time the
/// read is at (None: not a snapshot read outside a transaction). A transaction's statement
/// `ts` is checked here and reads the transaction's own snapshot.
pub fn prepare(
    state: &ServerState,
    req: &Request,
    command: &str,
    ts: Option<&TxnStatement>,
) -> CommandResult<Option<Timestamp>> {
    let Some(asked) = asked(&req.body)? else {
        return Ok(None);
    };
    if let Some(ts) = ts {
        if !ts.start {
            return Err(err(
                ErrorCode::InvalidOptions,
                "Only the first command in a transaction may specify a readConcern",
            ));
        }
        return Ok(None);
    }
    if !SNAPSHOT_COMMANDS.contains(&command) {
        return Err(err(
            ErrorCode::InvalidOptions,
            format!(
                "Command {command} does not support {{ readConcern: {{ level: \"snapshot\" }} }}"
            ),
        ));
    }
    debug_assert!(
        asked.snapshot,
        "asked() refuses atClusterTime without snapshot"
    );
    if state.repl.is_none() {
        return Err(err(
            ErrorCode::NotAReplicaSet,
            "node needs to be a replica set member to use readConcern: snapshot",
        ));
    }
    check_pipeline(&req.body)?;
    check_not_capped(state, req, command)?;
    let engine = state.catalog.engine();
    let (snapshot, at) = match asked.at {
        Some(t) => (open_at(state, t)?, t),
        None => {
            let (snap, ts) = engine
                .snapshot_now()
                .map_err(|e| storage_error(e, "", ""))?;
            let at = if ts == 0 {
                clock::last_committed(state)
            } else {
                clock::unpack(ts)
            };
            (snap, at)
        }
    };
    // A request is dispatched once and this is not a transaction's statement: the cell is empty.
    let _ = req.txn.set(Txn::snapshot_read(snapshot, at));
    Ok(Some(at))
}

/// The snapshot of a transaction's first statement: at its `atClusterTime` when it names one,
/// else the newest (what `startTransaction` reads).
pub fn transaction_snapshot(
    state: &ServerState,
    body: &Document,
) -> CommandResult<storage::Snapshot> {
    match asked(body)?.and_then(|a| a.at) {
        Some(t) => open_at(state, t),
        None => state
            .catalog
            .engine()
            .snapshot()
            .map_err(|e| storage_error(e, "", "")),
    }
}

/// A snapshot at cluster time `t`: InvalidOptions after the newest commit, SnapshotTooOld
/// before the history window (a minimum, as mongod's: the engine may still hold older history,
/// but a read is not promised it) or where the engine's history is gone.
fn open_at(state: &ServerState, t: Timestamp) -> CommandResult<storage::Snapshot> {
    let now = clock::last_committed(state);
    if clock::pack(t) > clock::pack(now) {
        return Err(err(
            ErrorCode::InvalidOptions,
            format!(
                "readConcern atClusterTime value must not be greater than the current clusterTime. Requested clusterTime: {t}; current clusterTime: {now}"
            ),
        ));
    }
    let window_secs = state.params.get_i64(WINDOW_PARAMETER).max(0) as u64;
    let wall_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if u64::from(t.time) + window_secs < wall_secs {
        return Err(too_old(
            storage::StorageError::SnapshotTooOld(String::new()),
            t,
        ));
    }
    state
        .catalog
        .engine()
        .snapshot_at(clock::pack(t))
        .map_err(|e| too_old(e, t))
}

fn too_old(e: storage::StorageError, t: Timestamp) -> crate::error::CommandError {
    match e {
        storage::StorageError::SnapshotTooOld(_) => err(
            ErrorCode::SnapshotTooOld,
            format!("Read timestamp {t} is older than the oldest available timestamp."),
        ),
        e => storage_error(e, "", ""),
    }
}

/// `$out` and `$merge` write, and a snapshot read only reads (mongod refuses them too).
fn check_pipeline(body: &Document) -> CommandResult<()> {
    let Ok(stages) = body.get_array("pipeline") else {
        return Ok(());
    };
    for stage in stages.iter().filter_map(Bson::as_document) {
        for name in ["$out", "$merge", "$changeStream"] {
            if stage.contains_key(name) {
                return Err(err(
                    ErrorCode::InvalidOptions,
                    format!("{name} cannot be used with a 'snapshot' read concern level"),
                ));
            }
        }
    }
    Ok(())
}

/// mongod serves no snapshot read of a capped collection (its trims are not versioned there).
fn check_not_capped(state: &ServerState, req: &Request, command: &str) -> CommandResult<()> {
    let Some(Bson::String(name)) = req.body.get(command) else {
        return Ok(());
    };
    let capped = state
        .catalog
        .collection(&req.db, name)
        .is_some_and(|c| c.capped_limits().is_some());
    if capped {
        return Err(err(
            ErrorCode::SnapshotUnavailable,
            format!(
                "Reading from capped collections with readConcern snapshot is not supported: {}.{name}",
                req.db
            ),
        ));
    }
    Ok(())
}

/// Hands `minSnapshotHistoryWindowInSeconds` to the engine. Only a replica-set member serves
/// snapshot reads, so a standalone keeps no history for them.
pub fn apply_window(state: &ServerState) {
    let secs = match state.repl {
        Some(_) => state.params.get_i64(WINDOW_PARAMETER).max(0) as u64,
        None => 0,
    };
    let window = std::time::Duration::from_secs(secs);
    if let Err(e) = state.catalog.engine().set_history_window(window) {
        tracing::warn!(error = %e, "could not set the snapshot history window");
    }
}

/// The reply with the read's `atClusterTime`: in `cursor` (find, aggregate, getMore) or at the
/// top when there is no cursor (distinct).
pub fn stamp(reply: Reply, at: Timestamp) -> Reply {
    match reply {
        Reply::Doc(mut d) => {
            match d.get_document_mut("cursor") {
                Ok(c) => {
                    c.insert("atClusterTime", at);
                }
                Err(_) => {
                    d.insert("atClusterTime", at);
                }
            }
            Reply::Doc(d)
        }
        Reply::Cursor(mut c) => {
            c.at_cluster_time = Some(at);
            Reply::Cursor(c)
        }
        Reply::Raw(r) => match stamp_raw(&r, at) {
            Some(out) => Reply::Raw(out),
            None => Reply::Raw(r),
        },
        other => other,
    }
}

/// `stamp` for a raw reply: the documents are copied over as bytes, never decoded.
fn stamp_raw(r: &RawDocumentBuf, at: Timestamp) -> Option<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    let mut stamped = false;
    for el in r.iter() {
        let (key, value) = el.ok()?;
        match value.as_document() {
            Some(cursor) if key == "cursor" => {
                let mut c = RawDocumentBuf::new();
                for inner in cursor.iter() {
                    let (k, v) = inner.ok()?;
                    c.append(k, v);
                }
                c.append(cstr!("atClusterTime"), at);
                out.append(key, c);
                stamped = true;
            }
            _ => out.append(key, value),
        }
    }
    if !stamped {
        out.append(cstr!("atClusterTime"), at);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn parse_errors_are_mongods() {
        let code = |rc: Document| {
            asked(&doc! { "find": "c", "readConcern": rc })
                .err()
                .map(|e| e.code)
        };
        let t = Timestamp {
            time: 5,
            increment: 1,
        };
        assert_eq!(code(doc! { "level": "snapshot" }), None);
        assert_eq!(code(doc! { "level": "snapshot", "atClusterTime": t }), None);
        assert_eq!(
            code(doc! { "level": "majority", "atClusterTime": t }),
            Some(ErrorCode::InvalidOptions)
        );
        assert_eq!(
            code(doc! { "atClusterTime": t }),
            Some(ErrorCode::InvalidOptions)
        );
        assert_eq!(
            code(doc! { "level": "snapshot", "atClusterTime": 5 }),
            Some(ErrorCode::TypeMismatch)
        );
        assert_eq!(
            code(doc! { "level": "snapshot", "atClusterTime": t, "afterClusterTime": t }),
            Some(ErrorCode::InvalidOptions)
        );
        let zero = Timestamp {
            time: 0,
            increment: 0,
        };
        assert_eq!(
            code(doc! { "level": "snapshot", "atClusterTime": zero }),
            Some(ErrorCode::InvalidOptions)
        );
    }

    #[test]
    fn stamp_puts_the_time_in_the_cursor_or_at_the_top() {
        let t = Timestamp {
            time: 9,
            increment: 2,
        };
        let raw = super::super::crud_read::cursor_reply(0, "d.c", true, vec![]);
        let Reply::Cursor(c) = stamp(raw, t) else {
            panic!("a cursor in, a cursor out");
        };
        let r = c.to_raw();
        let d = Document::try_from(r.as_ref()).expect("decodes");
        assert_eq!(
            d.get_document("cursor")
                .expect("cursor")
                .get_timestamp("atClusterTime")
                .ok(),
            Some(t)
        );
        assert_eq!(d.get_f64("ok").ok(), Some(1.0));
        let Reply::Doc(d) = stamp(Reply::Doc(doc! { "values": [1], "ok": 1.0 }), t) else {
            panic!("doc in, doc out");
        };
        assert_eq!(d.get_timestamp("atClusterTime").ok(), Some(t));
    }
}
