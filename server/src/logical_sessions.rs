//! The logical session cache: every session id a command carried (`lsid`) or `startSession`
//! made, with its owner's digest and when it was last used. `$listLocalSessions` lists it and
//! `$listSessions` reads it as mongod's `config.system.sessions` would hold it after a refresh.
//!
//! A record is `{_id: {id: UUID, uid: BinData(32 bytes)}, lastUse: Date, user?: {name}}` as in
//! mongod. `uid` is the SHA-256 of the owner's unambiguous name (`db.user`), or of the empty
//! string when the connection is not authenticated (the digest mongod uses without auth).
//!
//! Bounded by `limits::SESSIONS_MAX`: when full, records idle longer than the session timeout
//! go first; still full, a new id is simply not recorded (the command itself still runs; the
//! retryable-write table, `crate::sessions`, is where mongod's TooManyLogicalSessions is
//! raised). `endSessions` removes the records it names at once (mongod removes them at the
//! next refresh). Nothing is persisted: after a restart the cache starts empty, as a mongod
//! whose sessions expired. The hot path (`touch` of a known id) is one lock, one hash lookup
//! and one clock read; the digest is computed only when a record is made.

use crate::limits;
use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

/// A session id: the 16 bytes of its UUID.
pub type SessionId = [u8; 16];
/// An owner's digest (SHA-256).
pub type UserDigest = [u8; 32];

struct Record {
    uid: UserDigest,
    /// `user.name` as mongod shows it (`user@db`); None without authentication.
    user: Option<String>,
    last_use_ms: i64,
}

#[derive(Default)]
pub struct LogicalSessions {
    map: Mutex<HashMap<SessionId, Record>>,
}

/// The digest of a user (`None`: not authenticated), as mongod computes `uid`.
pub fn user_digest(user: Option<(&str, &str)>) -> UserDigest {
    let mut h = Sha256::new();
    if let Some((name, db)) = user.filter(|(n, d)| !(n.is_empty() && d.is_empty())) {
        h.update(db.as_bytes());
        h.update(b".");
        h.update(name.as_bytes());
    }
    h.finalize().into()
}

fn timeout_ms() -> i64 {
    limits::SESSION_TIMEOUT_MINUTES as i64 * 60_000
}

impl LogicalSessions {
    /// Notes a use of session `id` at `now_ms` by `user` (name, db).
    pub fn touch(&self, id: SessionId, user: Option<(&str, &str)>, now_ms: i64) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = map.get_mut(&id) {
            r.last_use_ms = now_ms;
            return;
        }
        if map.len() >= limits::SESSIONS_MAX {
            map.retain(|_, r| now_ms - r.last_use_ms < timeout_ms());
            if map.len() >= limits::SESSIONS_MAX {
                return;
            }
        }
        map.insert(
            id,
            Record {
                uid: user_digest(user),
                user: user.map(|(n, d)| format!("{n}@{d}")),
                last_use_ms: now_ms,
            },
        );
    }

    /// Forgets these sessions (`endSessions`).
    pub fn end(&self, ids: &[SessionId]) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            map.remove(id);
        }
    }

    /// The records owned by one of `owners` (every record for None), in `lastUse` order, newest
    /// first; records idle past the timeout are left out (they have expired).
    pub fn list(&self, owners: Option<&[UserDigest]>, now_ms: i64) -> Vec<Document> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<(&SessionId, &Record)> = map
            .iter()
            .filter(|(_, r)| now_ms - r.last_use_ms < timeout_ms())
            .filter(|(_, r)| owners.is_none_or(|o| o.contains(&r.uid)))
            .collect();
        rows.sort_by_key(|(id, r)| (std::cmp::Reverse(r.last_use_ms), **id));
        rows.into_iter().map(|(id, r)| record_doc(id, r)).collect()
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn record_doc(id: &SessionId, r: &Record) -> Document {
    let mut d = doc! {
        "_id": {
            "id": Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() },
            "uid": Binary { subtype: BinarySubtype::Generic, bytes: r.uid.to_vec() },
        },
        "lastUse": bson::DateTime::from_millis(r.last_use_ms),
    };
    if let Some(name) = &r.user {
        d.insert("user", doc! { "name": name.clone() });
    }
    d
}

/// The session id of a request's `lsid` (None when it has none or it is malformed: the
/// command's own checks report that).
pub fn lsid_of(body: &Document) -> Option<SessionId> {
    match body.get_document("lsid").ok()?.get("id") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => {
            b.bytes.as_slice().try_into().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(b: u8) -> SessionId {
        [b; 16]
    }

    #[test]
    fn records_have_mongods_shape_and_no_auth_digest() {
        let s = LogicalSessions::default();
        s.touch(id(1), None, 1_000);
        let rows = s.list(None, 2_000);
        assert_eq!(rows.len(), 1);
        let key = rows[0].get_document("_id").unwrap();
        let uid = key.get_binary_generic("uid").unwrap();
        // SHA-256 of the empty string.
        assert_eq!(uid[..4], [0xe3, 0xb0, 0xc4, 0x42]);
        assert_eq!(
            rows[0].get_datetime("lastUse").unwrap().timestamp_millis(),
            1_000
        );
        assert!(!rows[0].contains_key("user"));
    }

    #[test]
    fn owners_filter_and_newest_first() {
        let s = LogicalSessions::default();
        s.touch(id(1), Some(("ann", "admin")), 10);
        s.touch(id(2), Some(("bob", "test")), 20);
        s.touch(id(1), Some(("ann", "admin")), 30);
        let all = s.list(None, 40);
        assert_eq!(all.len(), 2);
        assert_eq!(
            all[0].get_document("user").unwrap().get_str("name").ok(),
            Some("ann@admin")
        );
        let bob = [user_digest(Some(("bob", "test")))];
        let only = s.list(Some(&bob), 40);
        assert_eq!(only.len(), 1);
        assert_eq!(
            only[0].get_document("user").unwrap().get_str("name").ok(),
            Some("bob@test")
        );
        s.end(&[id(2)]);
        assert!(s.list(Some(&bob), 40).is_empty());
    }

    #[test]
    fn expired_records_are_not_listed_and_make_room() {
        let s = LogicalSessions::default();
        s.touch(id(1), None, 0);
        assert!(s.list(None, timeout_ms() + 1).is_empty());
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn lsid_is_read_only_when_well_formed() {
        let uuid = Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![7; 16],
        };
        assert_eq!(lsid_of(&doc! { "lsid": { "id": uuid } }), Some(id(7)));
        assert_eq!(lsid_of(&doc! { "lsid": { "id": 1 } }), None);
        assert_eq!(lsid_of(&doc! { "lsid": 1 }), None);
        assert_eq!(lsid_of(&doc! {}), None);
    }
}
