//! The session registry: one entry per logical session id the server knows, made by
//! `startSession` or by the first command whose `lsid` named it. An entry holds what
//! `$listLocalSessions` shows (the owner's digest, the user's name, the last use) and the state
//! of the session's latest `txnNumber` (`crate::sessions::SessionTxn`: retryable writes and
//! transactions), so a command's session is found with one lookup. `crate::sessions::SessionTable`
//! is its face to the commands; `crate::session_records` writes it to `config.system.sessions`.
//!
//! A record is `{_id: {id: UUID, uid: BinData(32 bytes)}, lastUse: Date, user?: {name}}` as in
//! mongod. `uid` is the SHA-256 of the owner's unambiguous name (`db.user`), or of the empty
//! string when the connection is not authenticated (the digest mongod uses without auth).
//!
//! The map is split into `SHARD_COUNT` shards by the id's first byte, each behind a read-write
//! lock. Noting a use of a known session (every command with an `lsid`) takes one shard's read
//! lock and stores the time in the entry's atomic: no process-wide mutex on that path. A new
//! entry takes its shard's write lock.
//!
//! Bounded by `limits::SESSIONS_MAX` entries in all: when full, entries idle longer than the
//! session timeout and not in use go first; still full, a new id is not recorded (a command
//! still runs; one that needs transaction state gets TooManyLogicalSessions from the table).
//! `endSessions` hides an entry at once (not listed, not refreshed) and queues its id, so the
//! next refresh removes its record from the collection; the entry itself stays while it holds
//! transaction state, so a late retry still cannot apply twice (as in mongod).

use super::SessionTxn;
use crate::limits;
use bson::{Binary, Document, doc, spec::BinarySubtype};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A session id: the 16 bytes of its UUID.
pub type SessionId = [u8; 16];
/// An owner's digest (SHA-256).
pub type UserDigest = [u8; 32];
/// The state a session keeps for its transaction numbers, shared with whoever checked it out.
pub type TxnState = Arc<tokio::sync::Mutex<SessionTxn>>;

/// Shards of the map (a power of two; ids are random UUIDs, so their first byte spreads them).
const SHARD_COUNT: usize = 16;

/// One session.
pub struct Session {
    uid: UserDigest,
    /// `user.name` as mongod shows it (`user@db`); None without authentication.
    user: Option<String>,
    last_use_ms: AtomicI64,
    /// The `last_use_ms` the last refresh wrote (`i64::MIN`: never written).
    refreshed_ms: AtomicI64,
    /// Not listed and not refreshed: ended by `endSessions`, or only restored from
    /// `config.transactions` at start-up. A new use shows it again.
    hidden: AtomicBool,
    pub txn: TxnState,
}

impl Session {
    fn new(user: Option<(&str, &str)>, now_ms: i64, hidden: bool) -> Session {
        Session {
            uid: user_digest(user),
            user: user.map(|(n, d)| format!("{n}@{d}")),
            last_use_ms: AtomicI64::new(now_ms),
            refreshed_ms: AtomicI64::new(i64::MIN),
            hidden: AtomicBool::new(hidden),
            txn: Arc::new(tokio::sync::Mutex::new(SessionTxn::new())),
        }
    }

    fn used(&self, now_ms: i64) {
        self.last_use_ms.store(now_ms, Relaxed);
        if self.hidden.load(Relaxed) {
            self.hidden.store(false, Relaxed);
        }
    }

    /// Nobody holds it (no command has it checked out).
    fn unused(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) == 1 && Arc::strong_count(&self.txn) == 1
    }

    /// A record as `config.system.sessions` holds it, with `lastUse` at `last_use_ms`.
    pub fn record(&self, id: &SessionId, last_use_ms: i64) -> Document {
        let mut d = doc! {
            "_id": {
                "id": Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() },
                "uid": Binary { subtype: BinarySubtype::Generic, bytes: self.uid.to_vec() },
            },
            "lastUse": bson::DateTime::from_millis(last_use_ms),
        };
        if let Some(name) = &self.user {
            d.insert("user", doc! { "name": name.clone() });
        }
        d
    }
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

pub fn timeout_ms() -> i64 {
    limits::SESSION_TIMEOUT_MINUTES as i64 * 60_000
}

type Shard = HashMap<SessionId, Arc<Session>>;

pub struct Registry {
    shards: [RwLock<Shard>; SHARD_COUNT],
    /// Entries in all shards (bounded by `limits::SESSIONS_MAX`).
    count: AtomicUsize,
    /// Ids `endSessions` named since the last refresh (at most `limits::SESSIONS_MAX`).
    ended: Mutex<Vec<SessionId>>,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            shards: std::array::from_fn(|_| RwLock::default()),
            count: AtomicUsize::new(0),
            ended: Mutex::default(),
        }
    }
}

/// What a refresh writes: the sessions used since the last one, and the ids ended since.
pub struct RefreshWork {
    pub used: Vec<(SessionId, Arc<Session>)>,
    pub ended: Vec<SessionId>,
}

impl Registry {
    fn read(&self, id: &SessionId) -> RwLockReadGuard<'_, Shard> {
        self.shards[id[0] as usize % SHARD_COUNT]
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, id: &SessionId) -> RwLockWriteGuard<'_, Shard> {
        self.shards[id[0] as usize % SHARD_COUNT]
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn write_shard(&self, i: usize) -> RwLockWriteGuard<'_, Shard> {
        self.shards[i].write().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a use of session `id` at `now_ms` (`user` is asked only for a new entry); the
    /// entry, None when the registry is full of sessions still alive. `dropped` sees the
    /// transaction state of each idle entry dropped to make room.
    pub fn session(
        &self,
        id: SessionId,
        user: impl FnOnce() -> Option<(String, String)>,
        now_ms: i64,
        dropped: &dyn Fn(&SessionTxn),
    ) -> Option<Arc<Session>> {
        if let Some(s) = self.read(&id).get(&id) {
            s.used(now_ms);
            return Some(s.clone());
        }
        let user = user();
        let user = user.as_ref().map(|(n, d)| (n.as_str(), d.as_str()));
        self.insert(id, || Session::new(user, now_ms, false), now_ms, dropped)
    }

    /// The entry of a session restored from `config.transactions` (hidden until used).
    pub fn restored(&self, id: SessionId, now_ms: i64) -> Option<Arc<Session>> {
        if let Some(s) = self.read(&id).get(&id) {
            return Some(s.clone());
        }
        self.insert(id, || Session::new(None, now_ms, true), now_ms, &|_| {})
    }

    fn insert(
        &self,
        id: SessionId,
        make: impl FnOnce() -> Session,
        now_ms: i64,
        dropped: &dyn Fn(&SessionTxn),
    ) -> Option<Arc<Session>> {
        if self.count.load(Relaxed) >= limits::SESSIONS_MAX {
            self.drop_idle(now_ms, dropped);
        }
        let mut shard = self.write(&id);
        if let Some(s) = shard.get(&id) {
            return Some(s.clone());
        }
        let room = self.count.fetch_update(Relaxed, Relaxed, |n| {
            (n < limits::SESSIONS_MAX).then_some(n + 1)
        });
        if room.is_err() {
            return None;
        }
        let s = Arc::new(make());
        shard.insert(id, s.clone());
        Some(s)
    }

    /// Drops the entries idle past the timeout that nobody uses; returns how many.
    fn drop_idle(&self, now_ms: i64, dropped: &dyn Fn(&SessionTxn)) -> usize {
        let mut n = 0;
        for i in 0..SHARD_COUNT {
            self.write_shard(i).retain(|_, s| {
                let keep = now_ms - s.last_use_ms.load(Relaxed) < timeout_ms() || !s.unused();
                if !keep {
                    if let Ok(t) = s.txn.try_lock() {
                        dropped(&t);
                    }
                    n += 1;
                }
                keep
            });
        }
        self.count.fetch_sub(n, Relaxed);
        n
    }

    /// `endSessions`: hides these sessions and queues their records' removal.
    pub fn end(&self, ids: &[SessionId]) {
        for id in ids {
            if let Some(s) = self.read(id).get(id) {
                s.hidden.store(true, Relaxed);
            }
        }
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        let room = limits::SESSIONS_MAX.saturating_sub(ended.len());
        ended.extend(ids.iter().take(room));
    }

    /// Queues ended ids again (a refresh that could not remove their records).
    pub fn requeue_ended(&self, ids: &[SessionId]) {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        let room = limits::SESSIONS_MAX.saturating_sub(ended.len());
        ended.extend(ids.iter().take(room));
    }

    /// The shown sessions owned by one of `owners` (every one for None), newest use first;
    /// sessions idle past the timeout are left out (they have expired).
    pub fn list(&self, owners: Option<&[UserDigest]>, now_ms: i64) -> Vec<Document> {
        let mut rows: Vec<(i64, SessionId, Document)> = Vec::new();
        for shard in &self.shards {
            let shard = shard.read().unwrap_or_else(|p| p.into_inner());
            for (id, s) in shard.iter() {
                let last = s.last_use_ms.load(Relaxed);
                if s.hidden.load(Relaxed)
                    || now_ms - last >= timeout_ms()
                    || owners.is_some_and(|o| !o.contains(&s.uid))
                {
                    continue;
                }
                rows.push((last, *id, s.record(id, last)));
            }
        }
        rows.sort_by_key(|(last, id, _)| (std::cmp::Reverse(*last), *id));
        rows.into_iter().map(|(_, _, d)| d).collect()
    }

    /// Takes what the next refresh writes: every shown session used since the last refresh
    /// (now counted as written) and the ids ended since. Hidden entries without transaction
    /// state that nobody uses are dropped here: their records are gone with this refresh.
    pub fn take_refresh(&self) -> RefreshWork {
        let ended = std::mem::take(&mut *self.ended.lock().unwrap_or_else(|p| p.into_inner()));
        let mut used = Vec::new();
        let mut gone = 0;
        for i in 0..SHARD_COUNT {
            self.write_shard(i).retain(|id, s| {
                if s.hidden.load(Relaxed) {
                    let empty = s.txn.try_lock().is_ok_and(|t| t.is_empty());
                    let keep = !(empty && s.unused());
                    gone += usize::from(!keep);
                    return keep;
                }
                let last = s.last_use_ms.load(Relaxed);
                if s.refreshed_ms.swap(last, Relaxed) < last {
                    used.push((*id, s.clone()));
                }
                true
            });
        }
        self.count.fetch_sub(gone, Relaxed);
        RefreshWork { used, ended }
    }

    /// Marks sessions as not written (a refresh that failed), so the next one tries again.
    pub fn unrefresh(&self, sessions: &[(SessionId, Arc<Session>)]) {
        for (_, s) in sessions {
            s.refreshed_ms.store(i64::MIN, Relaxed);
        }
    }

    /// The transaction state of the sessions with these ids (every session for None).
    pub fn txns(&self, ids: Option<&[SessionId]>) -> Vec<(SessionId, TxnState)> {
        let mut out = Vec::new();
        for shard in &self.shards {
            let shard = shard.read().unwrap_or_else(|p| p.into_inner());
            out.extend(
                shard
                    .iter()
                    .filter(|(id, _)| ids.is_none_or(|ids| ids.contains(id)))
                    .map(|(id, s)| (*id, s.txn.clone())),
            );
        }
        out
    }

    pub fn len(&self) -> usize {
        self.count.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(b: u8) -> SessionId {
        [b; 16]
    }

    fn touch(r: &Registry, i: SessionId, user: Option<(&str, &str)>, now: i64) -> bool {
        let user = user.map(|(n, d)| (n.to_string(), d.to_string()));
        r.session(i, || user, now, &|_| {}).is_some()
    }

    #[test]
    fn records_have_mongods_shape_and_no_auth_digest() {
        let r = Registry::default();
        touch(&r, id(1), None, 1_000);
        let rows = r.list(None, 2_000);
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
    fn owners_filter_newest_first_and_end_hides() {
        let r = Registry::default();
        touch(&r, id(1), Some(("ann", "admin")), 10);
        touch(&r, id(2), Some(("bob", "test")), 20);
        touch(&r, id(1), Some(("ann", "admin")), 30);
        let all = r.list(None, 40);
        assert_eq!(all.len(), 2);
        assert_eq!(
            all[0].get_document("user").unwrap().get_str("name").ok(),
            Some("ann@admin")
        );
        let bob = [user_digest(Some(("bob", "test")))];
        assert_eq!(r.list(Some(&bob), 40).len(), 1);
        r.end(&[id(2)]);
        assert!(r.list(Some(&bob), 40).is_empty());
        // A new use shows it again.
        touch(&r, id(2), None, 50);
        assert_eq!(r.list(Some(&bob), 60).len(), 1);
    }

    #[test]
    fn expired_records_are_not_listed() {
        let r = Registry::default();
        touch(&r, id(1), None, 0);
        assert!(r.list(None, timeout_ms() + 1).is_empty());
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn a_refresh_takes_each_use_once_and_drops_ended_sessions() {
        let r = Registry::default();
        touch(&r, id(1), None, 10);
        touch(&r, id(2), None, 10);
        let w = r.take_refresh();
        assert_eq!(w.used.len(), 2);
        assert!(w.ended.is_empty());
        drop(w);
        assert!(r.take_refresh().used.is_empty(), "nothing used since");
        touch(&r, id(1), None, 20);
        r.end(&[id(2), id(3)]);
        let w = r.take_refresh();
        assert_eq!(w.used.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [id(1)]);
        assert_eq!(w.ended, [id(2), id(3)]);
        assert_eq!(r.len(), 1, "the ended session without state is gone");
        r.unrefresh(&w.used);
        assert_eq!(
            r.take_refresh().used.len(),
            1,
            "a failed refresh is tried again"
        );
    }

    #[test]
    fn full_registry_drops_idle_entries_first() {
        let r = Registry::default();
        r.count.store(limits::SESSIONS_MAX - 1, Relaxed);
        assert!(touch(&r, id(1), None, 0));
        assert!(!touch(&r, id(2), None, 1), "full of live sessions");
        assert!(touch(&r, id(1), None, 2), "a known session is still found");
        // id(1) idles past the timeout: it makes room for a new one.
        assert!(touch(&r, id(3), None, timeout_ms() + 10));
        assert!(r.read(&id(1)).get(&id(1)).is_none());
    }
}
