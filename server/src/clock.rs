//! Cluster time: the hybrid logical clock `Timestamp(seconds, increment)` the storage engine
//! gives every committed write batch under `--replSet` (persisted through the log, so it never
//! goes back over restarts), and the `$clusterTime` / `operationTime` every reply of an
//! initiated replica-set member carries.

use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, Timestamp, doc};

pub fn unpack(ts: u64) -> Timestamp {
    Timestamp {
        time: (ts >> 32) as u32,
        increment: ts as u32,
    }
}

pub fn pack(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// The timestamp of the newest committed write (the current second when nothing was written).
pub fn last_committed(state: &ServerState) -> Timestamp {
    let ts = state.catalog.engine().last_timestamp();
    if ts != 0 {
        return unpack(ts);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as u32;
    Timestamp {
        time: secs,
        increment: 0,
    }
}

/// `$clusterTime` as mongod without a keyFile sends it: a zero signature drivers accept and
/// gossip back.
fn cluster_time(ts: Timestamp) -> Document {
    doc! {
        "clusterTime": ts,
        "signature": {
            "hash": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 20] },
            "keyId": 0_i64,
        },
    }
}

/// Whether replies carry cluster time (an initiated replica-set member).
pub fn gossips(state: &ServerState) -> bool {
    state.repl.as_ref().is_some_and(|r| r.initiated())
}

/// Adds `$clusterTime` and `operationTime` to a reply document.
pub fn decorate_doc(state: &ServerState, reply: &mut Document) {
    let ts = last_committed(state);
    if !reply.contains_key("operationTime") {
        reply.insert("operationTime", ts);
    }
    reply.insert("$clusterTime", cluster_time(ts));
}

/// The same for a raw reply.
pub fn decorate_raw(state: &ServerState, reply: &mut RawDocumentBuf) {
    let ts = last_committed(state);
    if reply.get("operationTime").ok().flatten().is_none() {
        reply.append(bson::cstr!("operationTime"), ts);
    }
    if let Ok(ct) = RawDocumentBuf::try_from(&cluster_time(ts)) {
        reply.append(bson::cstr!("$clusterTime"), ct);
    }
}

/// `readConcern` under `--replSet`: levels local, available, majority, linearizable and
/// snapshot read the newest committed data on a one-member set; `afterClusterTime` later than
/// anything committed waits for nothing that could ever come, so it is refused as mongod
/// refuses a time in the future.
pub fn check_read_concern(state: &ServerState, body: &Document) -> crate::error::CommandResult<()> {
    use crate::error::{ErrorCode, err};
    let Some(rc) = body.get("readConcern") else {
        return Ok(());
    };
    let Bson::Document(rc) = rc else {
        return Err(err(
            ErrorCode::TypeMismatch,
            "BSON field 'readConcern' is the wrong type, expected type 'object'",
        ));
    };
    if let Some(level) = rc.get("level") {
        match level.as_str() {
            Some("local" | "available" | "majority" | "linearizable" | "snapshot") => {}
            Some(other) => {
                return Err(err(
                    ErrorCode::FailedToParse,
                    format!(
                        "enumeration value '{other}' for field 'readConcern.level' is not a valid value."
                    ),
                ));
            }
            None => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    "BSON field 'readConcern.level' is the wrong type, expected type 'string'",
                ));
            }
        }
    }
    if let Some(t) = rc.get("afterClusterTime") {
        let Bson::Timestamp(t) = t else {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'readConcern.afterClusterTime' is the wrong type, expected type 'timestamp'",
            ));
        };
        if state.repl.is_none() {
            return Err(err(
                ErrorCode::IllegalOperation,
                "Cannot specify 'afterClusterTime' readConcern without replication enabled",
            ));
        }
        let now = last_committed(state);
        if pack(*t) > pack(now) {
            return Err(err(
                ErrorCode::InvalidOptions,
                format!(
                    "readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: {t}; current clusterTime: {now}"
                ),
            ));
        }
    }
    Ok(())
}
