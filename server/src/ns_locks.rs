//! Namespace locks between multi-document transactions and DDL, in mongod's shape: an open
//! transaction holds its databases and collections shared (mongod's IX) from the statement that
//! first touches them until it ends; DDL (drop, dropDatabase, renameCollection, createIndexes,
//! collMod, dropIndexes) takes its collections exclusive (X) and waits for those transactions to
//! end, bounded by its `maxTimeMS` and stopped by `killOp`. A transaction statement that cannot
//! get a lock within `maxTransactionLockRequestTimeoutMillis` fails at once instead (LockTimeout).
//!
//! Two levels, each a fair tokio `RwLock`: a database lock (collection DDL holds it shared,
//! `dropDatabase` exclusive) and a collection lock. Fairness matters: a waiting DDL keeps later
//! transactions from starving it (they time out behind it, as mongod's do behind a queued X).
//! Invariant (no deadlock between DDLs): every holder takes database locks before collection
//! locks, each level in name order; a transaction's waits are bounded, so it never closes a
//! cycle for long. Entries nobody holds or waits for are dropped once the table passes
//! `NAMESPACE_LOCK_ENTRIES_MAX`, so the table is bounded by what is in use.
//! Plain reads and writes outside transactions do not take these locks.

use crate::error::{CommandResult, ErrorCode, err};
use crate::interrupt::Interrupt;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// Entries kept before unused ones are dropped.
const NAMESPACE_LOCK_ENTRIES_MAX: usize = 4096;

type Lock = Arc<RwLock<()>>;

/// A database (`coll: None`) or a collection.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    pub db: String,
    pub coll: Option<String>,
}

impl Target {
    pub fn collection(db: &str, coll: &str) -> Target {
        Target {
            db: db.to_string(),
            coll: Some(coll.to_string()),
        }
    }

    pub fn database(db: &str) -> Target {
        Target {
            db: db.to_string(),
            coll: None,
        }
    }

    fn text(&self) -> String {
        match &self.coll {
            Some(c) => format!("{}.{c}", self.db),
            None => self.db.clone(),
        }
    }
}

#[derive(Default)]
pub struct NamespaceLocks {
    map: Mutex<HashMap<Target, Lock>>,
}

/// What a transaction holds: shared guards, one per database and collection it touched.
#[derive(Default)]
pub struct SharedSet {
    held: HashMap<Target, OwnedRwLockReadGuard<()>>,
}

impl SharedSet {
    pub fn holds(&self, t: &Target) -> bool {
        self.held.contains_key(t)
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Takes over `other`'s guards (a second guard of one target replaces the first).
    pub fn absorb(&mut self, other: SharedSet) {
        self.held.extend(other.held);
    }
}

/// What a DDL holds until it is done: its databases shared (or exclusive for `dropDatabase`)
/// and its collections exclusive.
#[must_use]
pub struct Exclusive {
    _shared: Vec<OwnedRwLockReadGuard<()>>,
    _exclusive: Vec<OwnedRwLockWriteGuard<()>>,
}

impl NamespaceLocks {
    fn handle(&self, t: &Target) -> Lock {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= NAMESPACE_LOCK_ENTRIES_MAX && !map.contains_key(t) {
            // Held or waited for: someone else has a clone of the Arc.
            map.retain(|_, l| Arc::strong_count(l) > 1);
        }
        map.entry(t.clone()).or_default().clone()
    }

    /// Entries in the table (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `targets` (and their databases) to a transaction's set, each within `timeout`;
    /// LockTimeout (24) when one cannot be had in time. What was taken before the failure stays
    /// in the set: the caller aborts the transaction, which releases it all.
    pub async fn share(
        &self,
        set: &mut SharedSet,
        targets: &[Target],
        timeout: Duration,
    ) -> CommandResult<()> {
        for t in ordered(targets) {
            if set.holds(&t) {
                continue;
            }
            let lock = self.handle(&t);
            // An uncontended lock is had on the first poll, before the timer is looked at.
            match tokio::time::timeout(timeout, lock.read_owned()).await {
                Ok(g) => {
                    set.held.insert(t, g);
                }
                Err(_) => {
                    return Err(err(
                        ErrorCode::LockTimeout,
                        format!(
                            "Unable to acquire IX lock on '{}' within {}ms.",
                            t.text(),
                            timeout.as_millis()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Takes `targets` for a DDL: a collection exclusive (its database shared), a database
    /// exclusive. Waits for the transactions that hold them; `op`'s deadline (50) and killOp
    /// (11601) end the wait.
    pub async fn exclusive(&self, targets: &[Target], op: &Interrupt) -> CommandResult<Exclusive> {
        let mut out = Exclusive {
            _shared: Vec::new(),
            _exclusive: Vec::new(),
        };
        for t in ordered(targets) {
            let lock = self.handle(&t);
            let wanted = targets.contains(&t);
            if wanted {
                out._exclusive
                    .push(crate::interrupt::wait_for(lock.write_owned(), op).await?);
            } else {
                out._shared
                    .push(crate::interrupt::wait_for(lock.read_owned(), op).await?);
            }
        }
        Ok(out)
    }
}

/// The targets with their databases, databases first, each level in name order (the one
/// acquisition order). A database named exclusive is not also taken shared.
fn ordered(targets: &[Target]) -> Vec<Target> {
    let mut dbs: BTreeSet<Target> = targets.iter().map(|t| Target::database(&t.db)).collect();
    dbs.extend(targets.iter().filter(|t| t.coll.is_none()).cloned());
    let colls: BTreeSet<Target> = targets
        .iter()
        .filter(|t| t.coll.is_some())
        .cloned()
        .collect();
    dbs.into_iter().chain(colls).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const SHORT: Duration = Duration::from_millis(5);

    fn coll(c: &str) -> Target {
        Target::collection("d", c)
    }

    #[tokio::test]
    async fn a_ddl_waits_for_the_transaction_that_holds_its_collection() {
        let locks = Arc::new(NamespaceLocks::default());
        let mut txn = SharedSet::default();
        locks.share(&mut txn, &[coll("a")], SHORT).await.unwrap();
        assert_eq!(txn.len(), 2, "the collection and its database");
        let ddl = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let op = Interrupt::default();
                locks.exclusive(&[coll("a")], &op).await.map(|_| ())
            })
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!ddl.is_finished(), "waits while the transaction holds it");
        // Another collection of the database is free meanwhile.
        let op = Interrupt::default();
        drop(locks.exclusive(&[coll("b")], &op).await.unwrap());
        drop(txn);
        ddl.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_transaction_times_out_behind_a_ddl_and_keeps_what_it_held() {
        let locks = NamespaceLocks::default();
        let op = Interrupt::default();
        let ddl = locks.exclusive(&[coll("a")], &op).await.unwrap();
        let mut txn = SharedSet::default();
        locks.share(&mut txn, &[coll("b")], SHORT).await.unwrap();
        let e = locks
            .share(&mut txn, &[coll("a")], SHORT)
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::LockTimeout);
        assert!(txn.holds(&coll("b")) && !txn.holds(&coll("a")));
        drop(ddl);
        locks.share(&mut txn, &[coll("a")], SHORT).await.unwrap();
        // Held already: no second guard, no wait.
        locks.share(&mut txn, &[coll("a")], SHORT).await.unwrap();
        assert_eq!(txn.len(), 3);
    }

    #[tokio::test]
    async fn drop_database_waits_for_any_collection_of_it_and_the_wait_is_bounded() {
        let locks = NamespaceLocks::default();
        let mut txn = SharedSet::default();
        locks.share(&mut txn, &[coll("a")], SHORT).await.unwrap();
        let op = Interrupt::default();
        op.set_deadline(Some(Instant::now() + Duration::from_millis(20)));
        let e = locks.exclusive(&[Target::database("d")], &op).await;
        assert_eq!(e.err().map(|e| e.code), Some(ErrorCode::MaxTimeMSExpired));
        let killed = Interrupt::default();
        killed.interrupt(crate::interrupt::Reason::Killed);
        let e = locks.exclusive(&[coll("a")], &killed).await;
        assert_eq!(e.err().map(|e| e.code), Some(ErrorCode::Interrupted));
        drop(txn);
        let op = Interrupt::default();
        drop(
            locks
                .exclusive(&[Target::database("d")], &op)
                .await
                .unwrap(),
        );
    }

    #[tokio::test]
    async fn unused_entries_are_dropped_once_the_table_is_full() {
        let locks = NamespaceLocks::default();
        let mut kept = SharedSet::default();
        locks
            .share(&mut kept, &[coll("kept")], SHORT)
            .await
            .unwrap();
        for i in 0..NAMESPACE_LOCK_ENTRIES_MAX + 10 {
            let op = Interrupt::default();
            drop(locks.exclusive(&[coll(&i.to_string())], &op).await.unwrap());
        }
        assert!(locks.len() <= NAMESPACE_LOCK_ENTRIES_MAX, "{}", locks.len());
        let op = Interrupt::default();
        op.set_deadline(Some(Instant::now()));
        let e = locks.exclusive(&[coll("kept")], &op).await;
        assert_eq!(
            e.err().map(|e| e.code),
            Some(ErrorCode::MaxTimeMSExpired),
            "a held entry survives the pruning"
        );
    }
}
