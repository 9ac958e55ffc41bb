//! The session table: the commands' face of the session registry (`crate::sessions::registry`,
//! one entry per logical session id), whose entries hold the state of each session's latest
//! `txnNumber`, which is what makes retryable writes run at most once. A write command that carries `lsid` + `txnNumber`
//! (replica-set mode only) checks its session out for as long as it runs: a retry that arrives
//! while the first attempt still runs waits for it, then finds the stored reply and gets it back
//! without the write being applied again. An older `txnNumber` than the session's latest is
//! refused (TransactionTooOld); a newer one replaces the stored reply.
//!
//! Invariants: a session's stored reply belongs to exactly its `txn_number`; the write runs in a
//! task of its own (`run_once`), so a client that hangs up cannot cancel it between applying the
//! write and recording its reply. Only replies of commands that returned `ok: 1` are stored (a
//! command-level error means no statement ran, so the retry runs it); per-statement write errors,
//! interruptions included, are part of the stored reply: at most once, never twice.
//!
//! The table lives in memory and is durable through `crate::retry_record` (`config.transactions`):
//! a write's first batch records that its number ran, its reply is recorded before it goes out,
//! and the table is loaded from there at start-up, so a retry after a restart gets the first
//! reply too. Results are kept per command, not per statement (`stmtId`), so a retry that
//! re-batches the statements differently gets the first reply. Kept replies are bounded in bytes
//! (`limits::SESSION_REPLIES_BYTES_MAX`): a reply past the bound is not kept, and a retry of its
//! write gets IncompleteTransactionHistory (217), never a second run. The registry holds at
//! most `limits::SESSIONS_MAX` sessions; when full, sessions idle longer than
//! `logicalSessionTimeoutMinutes` that nobody holds are dropped. As in mongod, `endSessions` and
//! `killSessions` leave the state in place (it goes when the session expires; `endSessions` only
//! unlists the session), so a late retry still cannot apply twice.
//!
//! A session's `txn_number` may instead start a multi-document transaction (`Phase`): open, then
//! committed (its reply kept, so a retried commitTransaction gets it again) or aborted. Statements
//! of the open one get its `crate::txn::Txn`; a newer number aborts it; `endSessions`,
//! `killSessions` and the lifetime reaper abort it (a session busy with a statement is left to
//! the next reaper pass). Ending it, either way, releases at once what it holds (`Txn::release`:
//! namespace and document locks, the write set), even while a statement still has the `Txn`.

use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::limits;
pub mod registry;

use crate::txn::Txn;
use bson::{Bson, Document, doc};
use registry::{Registry, SessionId, TxnState, UserDigest};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The commands a `txnNumber` makes retryable (outside a transaction).
pub const RETRYABLE_COMMANDS: &[&str] =
    &["insert", "update", "delete", "findAndModify", "bulkWrite"];

/// What one session remembers of its latest transaction number.
#[derive(Default)]
pub struct SessionTxn {
    /// The highest `txnNumber` seen (-1: none yet).
    txn_number: i64,
    /// The reply of the write that ran under `txn_number`, once it finished with `ok: 1`.
    reply: Option<Document>,
    /// Its size, counted in `SessionTable::reply_bytes`.
    reply_bytes: usize,
    /// The write under `txn_number` ran (`reply` may still be None: not kept, over the bound).
    executed: bool,
    /// The multi-document transaction `txn_number` started, if it is one.
    phase: Option<Phase>,
}

impl SessionTxn {
    /// A session no transaction number has used yet.
    pub fn new() -> SessionTxn {
        SessionTxn {
            txn_number: -1,
            ..SessionTxn::default()
        }
    }

    /// No transaction number has used the session: nothing to keep for a retry.
    pub fn is_empty(&self) -> bool {
        self.txn_number < 0 && !self.executed && self.phase.is_none()
    }
}

/// Where a session's transaction is.
pub enum Phase {
    Open(Arc<Txn>),
    /// Committed, with the reply a retried commitTransaction gets again.
    Committed(Document),
    Aborted,
}

/// A statement of a multi-document transaction: its session and `txnNumber`, and whether it
/// starts the transaction.
pub struct TxnStatement {
    key: SessionId,
    pub txn_number: i64,
    pub start: bool,
}

impl TxnStatement {
    /// The session's key (the lsid UUID's bytes).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The session id as mongod prints it in messages.
    fn id_text(&self) -> String {
        crate::query::types::uuid_text(&self.key)
    }

    /// `{lsid: {id}, txnNumber}` as the oplog and change events show a transaction.
    pub fn note(&self) -> Document {
        let id = bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: self.key.to_vec(),
        };
        doc! { "lsid": { "id": id }, "txnNumber": self.txn_number }
    }
}

/// Commands mongod 7.0 runs inside a transaction.
const TXN_COMMANDS: &[&str] = &[
    "find",
    "getMore",
    "killCursors",
    "insert",
    "update",
    "delete",
    "findAndModify",
    "aggregate",
    "distinct",
    "create",
    "createIndexes",
    "commitTransaction",
    "abortTransaction",
];

/// The session registry (`crate::sessions::registry`) with what the retryable writes and
/// transactions of its sessions share.
#[derive(Default)]
pub struct SessionTable {
    registry: Registry,
    /// Retried writes answered from the table (serverStatus.transactions.retriedStatementsCount
    /// counts statements; this counts commands).
    pub retried_commands: std::sync::atomic::AtomicU64,
    /// The statements of those commands (serverStatus.transactions.retriedStatementsCount).
    pub retried_statements: std::sync::atomic::AtomicU64,
    /// Bytes of the kept replies (bounded by `limits::SESSION_REPLIES_BYTES_MAX`).
    reply_bytes: std::sync::atomic::AtomicUsize,
}

impl Retryable {
    /// The durable record this write keeps in `coll` (`config.transactions`).
    pub fn record(&self, coll: Arc<storage::Collection>) -> Arc<crate::retry_record::RetryRecord> {
        crate::retry_record::RetryRecord::new(coll, self.key.to_vec(), self.txn_number)
    }
}

/// A retryable write's identity: the session key and its `txnNumber`.
pub struct Retryable {
    key: SessionId,
    txn_number: i64,
    /// The command's statements (documents inserted, updates, deletes, bulkWrite ops).
    pub statements: u64,
    /// Their ids, for the `retriedStmtIds` of a retry's reply.
    pub ids: crate::retried::StmtIds,
}

/// A request's `lsid` as `dispatch` parsed it, once: None when the request has none.
pub type ParsedLsid = Option<CommandResult<SessionId>>;

/// The key of a session: its `lsid.id` bytes (a UUID), checked as mongod checks them.
pub fn session_key(lsid: &Bson) -> CommandResult<SessionId> {
    let Bson::Document(d) = lsid else {
        return Err(err(
            ErrorCode::TypeMismatch,
            "BSON field 'OperationSessionInfo.lsid' is the wrong type, expected type 'object'",
        ));
    };
    match d.get("id") {
        Some(Bson::Binary(b)) if b.subtype == bson::spec::BinarySubtype::Uuid => {
            b.bytes.as_slice().try_into().map_err(|_| {
                err(
                    ErrorCode::InvalidUUID,
                    "uuid must be a 16-byte binary field with UUID (4) subtype",
                )
            })
        }
        Some(_) => Err(err(
            ErrorCode::TypeMismatch,
            "BSON field 'LogicalSessionId.id' is the wrong type, expected type 'uuid'",
        )),
        None => Err(err(
            ErrorCode::Location40414,
            "BSON field 'LogicalSessionId.id' is missing but a required field",
        )),
    }
}

/// The parsed `lsid` of a request body (for the callers that have no `Request`).
pub fn parse_lsid(body: &Document) -> ParsedLsid {
    body.get("lsid").map(session_key)
}

/// The `txnNumber` of a request: mongod takes only a 64-bit integer, never negative.
pub fn txn_number(body: &Document) -> CommandResult<Option<i64>> {
    match body.get("txnNumber") {
        None => Ok(None),
        Some(Bson::Int64(n)) if *n >= 0 => Ok(Some(*n)),
        Some(Bson::Int64(n)) => Err(err(
            ErrorCode::BadValue,
            format!("TxnNumber cannot be negative: {n}"),
        )),
        Some(v) => Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field 'OperationSessionInfo.txnNumber' is the wrong type '{}', expected type 'long'",
                value_type_name(v)
            ),
        )),
    }
}

fn value_type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        Bson::Int32(_) => "int",
        Bson::Decimal128(_) => "decimal",
        _ => "other",
    }
}

/// What a write command's handler returns, as far as the table is concerned: the reply to keep
/// (only an `ok: 1` one is kept) and how a retry gets it back.
pub trait Storable: Sized + Send + 'static {
    fn stored(&self) -> Option<Document>;
    fn from_stored(d: Document) -> Self;
}

/// Checks the session fields of a request the way mongod does, in its order: a `txnNumber` needs
/// an `lsid` (InvalidOptions), a standalone takes none (IllegalOperation), and only the retryable
/// write commands take one without a transaction (NotARetryableWriteCommand). `Some` when the
/// request is a retryable write.
pub fn retryable(
    body: &Document,
    lsid: &ParsedLsid,
    command: &str,
    repl: bool,
) -> CommandResult<Option<Retryable>> {
    let Some(n) = txn_number(body)? else {
        return Ok(None);
    };
    let Some(key) = lsid.clone() else {
        return Err(err(
            ErrorCode::InvalidOptions,
            "Transaction number requires a session ID to also be specified",
        ));
    };
    if !repl {
        return Err(err(
            ErrorCode::IllegalOperation,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    let key = key?;
    if !RETRYABLE_COMMANDS.contains(&command) {
        return Err(err(
            ErrorCode::NotARetryableWriteCommand,
            format!(
                "txnNumber may only be provided for multi-document transactions and retryable \
                 write commands. autocommit:false was not provided, and {command} is not a \
                 retryable write command."
            ),
        ));
    }
    Ok(Some(Retryable {
        key,
        txn_number: n,
        statements: 1,
        ids: crate::retried::StmtIds::of(command, body, 1),
    }))
}

/// Checks the transaction fields of a request (replica-set mode) as mongod does: `autocommit`
/// must be false and come with `lsid` and `txnNumber`; `startTransaction` must be true; only the
/// commands a transaction may hold. None: the request is not part of a transaction.
pub fn transaction_fields(
    body: &Document,
    lsid: &ParsedLsid,
    command: &str,
) -> CommandResult<Option<TxnStatement>> {
    let autocommit = body.get("autocommit");
    let start = body.get("startTransaction");
    if autocommit.is_none() && start.is_none() {
        return Ok(None);
    }
    let invalid = |m: &str| Err(err(ErrorCode::InvalidOptions, m));
    match autocommit {
        Some(Bson::Boolean(false)) => {}
        Some(Bson::Boolean(true)) => return invalid("autocommit:true is not allowed"),
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'OperationSessionInfo.autocommit' is the wrong type, expected type 'bool'",
            ));
        }
        None => {
            return invalid(
                "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided",
            );
        }
    }
    let start = match start {
        None => false,
        Some(Bson::Boolean(true)) => true,
        Some(Bson::Boolean(false)) => {
            return invalid("specifying startTransaction=false is not allowed");
        }
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'OperationSessionInfo.startTransaction' is the wrong type, expected type 'bool'",
            ));
        }
    };
    let Some(key) = lsid.clone() else {
        return invalid("Transaction number requires a session ID to also be specified");
    };
    let Some(n) = txn_number(body)? else {
        return invalid("'autocommit' field requires a transaction number to also be specified");
    };
    let key = key?;
    if !TXN_COMMANDS.contains(&command) {
        return Err(err(
            ErrorCode::OperationNotSupportedInTransaction,
            format!("Cannot run '{command}' in a multi-document transaction."),
        ));
    }
    Ok(Some(TxnStatement {
        key,
        txn_number: n,
        start,
    }))
}

fn no_such_transaction(message: String) -> CommandError {
    err(ErrorCode::NoSuchTransaction, message).transient()
}

impl SessionTxn {
    /// The open transaction `st` names, or mongod's error for why there is none.
    fn open_txn(&self, st: &TxnStatement) -> CommandResult<Arc<Txn>> {
        self.check_not_older(st)?;
        match &self.phase {
            Some(Phase::Open(t)) if st.txn_number == self.txn_number => Ok(t.clone()),
            Some(Phase::Aborted) if st.txn_number == self.txn_number => {
                Err(no_such_transaction(format!(
                    "Transaction with {{ txnNumber: {} }} has been aborted.",
                    st.txn_number
                )))
            }
            Some(Phase::Committed(_)) if st.txn_number == self.txn_number => Err(err(
                ErrorCode::TransactionCommitted,
                format!(
                    "Transaction with {{ txnNumber: {} }} has been committed.",
                    st.txn_number
                ),
            )),
            _ => Err(no_such_transaction(format!(
                "Given transaction number {} does not match any in-progress transactions. The \
                 active transaction number is {}",
                st.txn_number, self.txn_number
            ))),
        }
    }

    fn check_not_older(&self, st: &TxnStatement) -> CommandResult<()> {
        if st.txn_number < self.txn_number {
            return Err(err(
                ErrorCode::TransactionTooOld,
                format!(
                    "Cannot start transaction {} on session {} because a newer transaction {} \
                     has already started.",
                    st.txn_number,
                    st.id_text(),
                    self.txn_number
                ),
            ));
        }
        Ok(())
    }

    /// Ends the open transaction as aborted (its snapshot and write set go with it).
    fn abort(&mut self) -> bool {
        if let Some(Phase::Open(t)) = &self.phase {
            t.counters()
                .aborted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Whoever still holds the `Txn` (a statement in flight), its locks and write set
            // go now: a DDL waiting for the namespace proceeds at once.
            t.abort();
            self.phase = Some(Phase::Aborted);
            return true;
        }
        false
    }
}

impl SessionTable {
    /// The transaction a statement runs in: a new one for `startTransaction` (made by `begin`),
    /// else the session's open one.
    pub async fn statement(
        &self,
        st: &TxnStatement,
        begin: impl FnOnce() -> CommandResult<Arc<Txn>>,
    ) -> CommandResult<Arc<Txn>> {
        let entry = self.entry(&st.key)?;
        let mut s = entry.lock().await;
        if !st.start {
            return s.open_txn(st);
        }
        s.check_not_older(st)?;
        if st.txn_number == s.txn_number {
            return Err(err(
                ErrorCode::ConflictingOperationInProgress,
                format!(
                    "Cannot start a transaction at given transaction number {} on session {}: a \
                     transaction or retryable write with the same number already ran",
                    st.txn_number,
                    st.id_text()
                ),
            ));
        }
        let txn = begin()?;
        s.abort();
        self.release(s.reply_bytes);
        *s = SessionTxn {
            txn_number: st.txn_number,
            phase: Some(Phase::Open(txn.clone())),
            ..SessionTxn::default()
        };
        Ok(txn)
    }

    /// Aborts the session's open transaction `st` after a statement of it failed.
    pub async fn abort_after_error(&self, st: &TxnStatement) {
        if let Ok(entry) = self.entry(&st.key) {
            let mut s = entry.lock().await;
            if s.txn_number == st.txn_number {
                s.abort();
            }
        }
    }

    /// `commitTransaction`: runs `commit` on the open transaction (holding the session, so a
    /// retry waits for it) and remembers its reply; a retry of a committed one gets that reply.
    pub async fn commit<F, Fut>(&self, st: &TxnStatement, commit: F) -> CommandResult<Document>
    where
        F: FnOnce(Arc<Txn>) -> Fut,
        Fut: Future<Output = CommandResult<Document>>,
    {
        let entry = self.entry(&st.key)?;
        let mut s = entry.lock().await;
        if let Some(Phase::Committed(reply)) = &s.phase
            && st.txn_number == s.txn_number
        {
            return Ok(reply.clone());
        }
        let txn = s.open_txn(st)?;
        let result = commit(txn.clone()).await;
        match &result {
            Ok(reply) => {
                txn.counters()
                    .committed
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                txn.release();
                s.phase = Some(Phase::Committed(retried_form(
                    reply,
                    &crate::retried::StmtIds::none(),
                )));
            }
            Err(_) => {
                s.abort();
            }
        }
        result
    }

    /// `abortTransaction`.
    pub async fn abort(&self, st: &TxnStatement) -> CommandResult<()> {
        let entry = self.entry(&st.key)?;
        let mut s = entry.lock().await;
        s.open_txn(st)?;
        s.abort();
        Ok(())
    }

    /// The registry itself (`crate::session_records` refreshes the collection from it).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Notes a use of session `id` now (every command with a well-formed `lsid`, and
    /// `startSession`); `user` is asked only when the session is new.
    pub fn touch(&self, id: SessionId, user: impl FnOnce() -> Option<(String, String)>) {
        let now_ms = bson::DateTime::now().timestamp_millis();
        let dropped = |t: &SessionTxn| self.release(t.reply_bytes);
        let _ = self.registry.session(id, user, now_ms, &dropped);
    }

    /// `endSessions`: the sessions are no longer listed, and their records go at the next
    /// refresh (their transaction state stays until they expire, as in mongod).
    pub fn end(&self, ids: &[SessionId]) {
        self.registry.end(ids);
    }

    /// `$listLocalSessions`: the sessions of `owners` (every one for None), newest first.
    pub fn list_local(&self, owners: Option<&[UserDigest]>) -> Vec<Document> {
        self.registry
            .list(owners, bson::DateTime::now().timestamp_millis())
    }

    /// Aborts the open transactions of the sessions with these keys (endSessions, killSessions),
    /// or of every session; returns how many.
    pub async fn abort_sessions(&self, keys: Option<&[SessionId]>) -> usize {
        let entries = self.registry.txns(keys);
        // A session busy starting a statement or committing is waited for (briefly: a commit
        // ends in one durable batch; a running statement does not hold the session); a commit
        // that wins leaves nothing to abort.
        let mut aborted = 0;
        for (_, e) in entries {
            if e.lock().await.abort() {
                aborted += 1;
            }
        }
        aborted
    }

    /// Aborts open transactions older than `limit` (`transactionLifetimeLimitSeconds`).
    pub fn reap(&self, limit: Duration) -> usize {
        self.registry
            .txns(None)
            .into_iter()
            .filter(|(_, e)| {
                e.try_lock().is_ok_and(|mut s| match &s.phase {
                    Some(Phase::Open(t)) if t.started.elapsed() > limit => s.abort(),
                    _ => false,
                })
            })
            .count()
    }

    /// The open transactions, for currentOp: (session id, txnNumber, the transaction).
    pub fn open_transactions(&self) -> Vec<(bson::Bson, i64, Arc<Txn>)> {
        self.registry
            .txns(None)
            .into_iter()
            .filter_map(|(k, e)| {
                let s = e.try_lock().ok()?;
                match &s.phase {
                    Some(Phase::Open(t)) => Some((
                        bson::Bson::Binary(bson::Binary {
                            subtype: bson::spec::BinarySubtype::Uuid,
                            bytes: k.to_vec(),
                        }),
                        s.txn_number,
                        t.clone(),
                    )),
                    _ => None,
                }
            })
            .collect()
    }

    /// The session's state, created on first use. Full registry: idle sessions are dropped
    /// first; still full, the request fails as mongod's full session cache does.
    fn entry(&self, key: &SessionId) -> CommandResult<TxnState> {
        let now_ms = bson::DateTime::now().timestamp_millis();
        let dropped = |t: &SessionTxn| self.release(t.reply_bytes);
        match self.registry.session(*key, || None, now_ms, &dropped) {
            Some(s) => Ok(s.txn.clone()),
            None => Err(err(
                ErrorCode::TooManyLogicalSessions,
                format!(
                    "Unable to add session into the cache because the number of active sessions \
                     is too high ({} sessions)",
                    self.registry.len()
                ),
            )),
        }
    }

    /// Takes `bytes` of the reply budget; false (nothing taken) when they do not fit.
    fn reserve(&self, bytes: usize) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.reply_bytes
            .fetch_update(Relaxed, Relaxed, |held| {
                let next = held.checked_add(bytes)?;
                (next <= limits::SESSION_REPLIES_BYTES_MAX).then_some(next)
            })
            .is_ok()
    }

    fn release(&self, bytes: usize) {
        self.reply_bytes
            .fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// A session as `config.transactions` kept it over a restart: its write under `txn_number`
    /// ran; `reply` is what a retry gets (None: the server stopped before it was recorded, so a
    /// retry gets IncompleteTransactionHistory, never a second run).
    /// `committed`: the record is a committed transaction's, so a retried commit answers ok.
    pub fn restore(&self, key: &[u8], txn_number: i64, reply: Option<Document>, committed: bool) {
        let Ok(id) = SessionId::try_from(key) else {
            return;
        };
        let now_ms = bson::DateTime::now().timestamp_millis();
        let Some(session) = self.registry.restored(id, now_ms) else {
            return;
        };
        let Ok(mut s) = session.txn.try_lock() else {
            return;
        };
        if s.txn_number > txn_number {
            return;
        }
        let bytes = reply
            .as_ref()
            .and_then(|d| bson::RawDocumentBuf::try_from(d).ok())
            .map_or(0, |r| r.as_bytes().len());
        let kept = reply.filter(|_| self.reserve(bytes));
        self.release(s.reply_bytes);
        *s = SessionTxn {
            txn_number,
            reply_bytes: if kept.is_some() { bytes } else { 0 },
            reply: kept,
            executed: true,
            phase: committed.then(|| Phase::Committed(doc! { "ok": 1.0 })),
        };
    }

    pub fn len(&self) -> usize {
        self.registry.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Run a retryable write at most once per (session, txnNumber). `run` is the write command's
/// handler; it runs in a task of its own, holding the session, so nothing can stop it between
/// the write and the record of its reply.
pub async fn run_once<T, F, Fut>(
    table: Arc<SessionTable>,
    rw: Retryable,
    run: F,
) -> CommandResult<T>
where
    T: Storable,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = CommandResult<T>> + Send + 'static,
{
    let txn = table.entry(&rw.key)?;
    let task = tokio::spawn(async move {
        let mut s = txn.lock().await;
        if rw.txn_number < s.txn_number {
            return Err(err(
                ErrorCode::TransactionTooOld,
                format!(
                    "Retryable write with txnNumber {} is prohibited on session {} because a \
                     newer retryable write with txnNumber {} has already started on this session.",
                    rw.txn_number,
                    crate::query::types::uuid_text(&rw.key),
                    s.txn_number
                ),
            ));
        }
        if rw.txn_number == s.txn_number && s.executed {
            let Some(stored) = &s.reply else {
                return Err(err(
                    ErrorCode::IncompleteTransactionHistory,
                    format!(
                        "Incomplete history detected for transaction {} on session {}: the \
                         write ran, but its reply was not kept (over the bound of kept replies, or the \
                         server stopped before recording it)",
                        rw.txn_number,
                        crate::query::types::uuid_text(&rw.key)
                    ),
                ));
            };
            table
                .retried_commands
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            table
                .retried_statements
                .fetch_add(rw.statements, std::sync::atomic::Ordering::Relaxed);
            return Ok(T::from_stored(stored.clone()));
        }
        // A newer number ends an open transaction of the session, counted as aborted.
        s.abort();
        table.release(s.reply_bytes);
        *s = SessionTxn {
            txn_number: rw.txn_number,
            ..SessionTxn::default()
        };
        let result = run().await;
        if let Some(d) = result.as_ref().ok().and_then(Storable::stored)
            && d.get_f64("ok").ok() == Some(1.0)
            && !failed_before_writing(&d)
        {
            let d = retried_form(&d, &rw.ids);
            let bytes =
                bson::RawDocumentBuf::try_from(&d).map_or(usize::MAX, |r| r.as_bytes().len());
            s.executed = true;
            if table.reserve(bytes) {
                s.reply = Some(d);
                s.reply_bytes = bytes;
            }
        }
        result
    });
    match task.await {
        Ok(r) => r,
        Err(e) => Err(err(
            ErrorCode::InternalError,
            format!("retryable write failed: {e}"),
        )),
    }
}

/// The reply a retry gets: the first reply without the fields that describe that one attempt's
/// wait (a retry has nothing to wait for: the write was durable before the first reply), with
/// the ids of the statements it had run (`retriedStmtIds`, see `retried`).
pub fn retried_form(d: &Document, ids: &crate::retried::StmtIds) -> Document {
    let mut out = ids.retried_reply(d);
    out.remove("writeConcernError");
    out
}

/// An `ok: 1` reply that wrote nothing because its first statement failed (a write error at
/// index 0: interrupted because its client went away, a duplicate key, ...): as in mongod, no
/// statement is recorded as executed, and a retry runs the write again.
fn failed_before_writing(d: &Document) -> bool {
    let first_failed = d
        .get_array("writeErrors")
        .ok()
        .and_then(|w| w.first())
        .and_then(Bson::as_document)
        .is_some_and(|e| matches!(e.get("index"), Some(Bson::Int32(0) | Bson::Int64(0))));
    let zero = |k: &str| match d.get(k) {
        None => true,
        Some(v) => matches!(v, Bson::Int32(0) | Bson::Int64(0)),
    };
    // An unordered write goes on past a failed first statement: only "nothing at all" counts.
    first_failed && zero("n") && zero("nModified") && !d.contains_key("upserted")
}

/// `serverStatus.transactions`.
pub fn server_status(table: &SessionTable, txns: &crate::txn::Registry) -> Document {
    use std::sync::atomic::Ordering::Relaxed;
    let open = txns.open.load(Relaxed).max(0);
    // A transaction aborted under a running statement is no longer open but still active
    // until the statement ends: active never counts past open.
    let active = txns.active.load(Relaxed).clamp(0, open);
    doc! {
        "retriedCommandsCount": table.retried_commands.load(std::sync::atomic::Ordering::Relaxed) as i64,
        "retriedStatementsCount": table.retried_statements.load(Relaxed) as i64,
        "transactionsCollectionWriteCount":
            crate::retry_record::COLLECTION_WRITES.load(Relaxed) as i64,
        "currentActive": active,
        "currentInactive": open - active,
        "currentOpen": open,
        "totalAborted": txns.aborted.load(Relaxed) as i64,
        "totalCommitted": txns.committed.load(Relaxed) as i64,
        "totalStarted": txns.started.load(Relaxed) as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Storable for Document {
        fn stored(&self) -> Option<Document> {
            Some(self.clone())
        }
        fn from_stored(d: Document) -> Self {
            d
        }
    }

    fn lsid(byte: u8) -> Bson {
        Bson::Document(doc! { "id": bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: vec![byte; 16],
        } })
    }

    fn code<T>(r: CommandResult<T>) -> i32 {
        r.err().map_or(0, |e| e.code.code())
    }

    #[test]
    fn session_fields_are_checked_in_mongods_order() {
        let w = |b: Document, c: &str, repl: bool| code(retryable(&b, &parse_lsid(&b), c, repl));
        assert_eq!(w(doc! { "txnNumber": 1_i64 }, "insert", false), 72);
        assert_eq!(
            w(
                doc! { "txnNumber": 1_i64, "lsid": lsid(1) },
                "insert",
                false
            ),
            20
        );
        assert_eq!(
            w(doc! { "txnNumber": 1, "lsid": lsid(1) }, "insert", true),
            14
        );
        assert_eq!(
            w(
                doc! { "txnNumber": -1_i64, "lsid": lsid(1) },
                "insert",
                true
            ),
            2
        );
        assert_eq!(
            w(doc! { "txnNumber": 1_i64, "lsid": lsid(1) }, "find", true),
            50768
        );
        assert_eq!(
            w(doc! { "txnNumber": 1_i64, "lsid": 1 }, "insert", true),
            14
        );
        assert_eq!(
            w(doc! { "txnNumber": 1_i64, "lsid": lsid(1) }, "insert", true),
            0
        );
        assert_eq!(w(doc! { "lsid": lsid(1) }, "find", true), 0);
        let short = bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: vec![1; 3],
        };
        let body = doc! { "txnNumber": 1_i64, "lsid": { "id": short } };
        assert_eq!(w(body, "insert", true), 207, "InvalidUUID");
    }

    fn reply(n: i32) -> CommandResult<Document> {
        Ok(doc! { "n": n, "ok": 1.0 })
    }

    fn n_of(r: CommandResult<Document>) -> i32 {
        r.map_or(-1, |d| d.get_i32("n").unwrap_or(-1))
    }

    async fn once(
        table: &Arc<SessionTable>,
        txn: i64,
        n: i32,
        ran: &Arc<std::sync::atomic::AtomicU32>,
    ) -> CommandResult<Document> {
        let body = doc! { "txnNumber": txn, "lsid": lsid(7) };
        let rw = retryable(&body, &parse_lsid(&body), "insert", true)
            .unwrap()
            .unwrap();
        let ran = ran.clone();
        run_once(table.clone(), rw, move || async move {
            ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            reply(n)
        })
        .await
    }

    #[tokio::test]
    async fn a_retry_gets_the_first_reply_and_an_older_number_is_refused() {
        let table = Arc::new(SessionTable::default());
        let ran = Arc::new(std::sync::atomic::AtomicU32::new(0));
        assert_eq!(n_of(once(&table, 3, 1, &ran).await), 1);
        assert_eq!(n_of(once(&table, 3, 2, &ran).await), 1);
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(code(once(&table, 2, 1, &ran).await), 225);
        assert_eq!(n_of(once(&table, 4, 5, &ran).await), 5);
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(table.len(), 1);
    }

    #[tokio::test]
    async fn ended_and_restored_sessions_keep_their_state_unlisted() {
        let table = Arc::new(SessionTable::default());
        let ran = Arc::new(std::sync::atomic::AtomicU32::new(0));
        assert_eq!(n_of(once(&table, 3, 1, &ran).await), 1);
        assert_eq!(table.list_local(None).len(), 1);
        table.end(&[[7; 16]]);
        assert!(table.list_local(None).is_empty(), "endSessions unlists");
        assert_eq!(n_of(once(&table, 3, 2, &ran).await), 1, "a late retry");
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
        table.restore(&[8; 16], 5, Some(doc! { "n": 9, "ok": 1.0 }), false);
        assert_eq!(table.len(), 2);
        let listed: Vec<_> = table.list_local(None);
        assert_eq!(
            listed.len(),
            1,
            "a restored session is not listed: {listed:?}"
        );
    }

    #[tokio::test]
    async fn a_reply_past_the_byte_bound_is_not_kept_and_its_retry_is_refused() {
        let table = Arc::new(SessionTable::default());
        assert!(table.reserve(limits::SESSION_REPLIES_BYTES_MAX - 4));
        let ran = Arc::new(std::sync::atomic::AtomicU32::new(0));
        assert_eq!(n_of(once(&table, 1, 1, &ran).await), 1);
        assert_eq!(code(once(&table, 1, 1, &ran).await), 217);
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
        table.release(limits::SESSION_REPLIES_BYTES_MAX - 4);
        assert_eq!(n_of(once(&table, 2, 2, &ran).await), 2);
        assert_eq!(n_of(once(&table, 2, 9, &ran).await), 2);
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_command_is_not_remembered() {
        let table = Arc::new(SessionTable::default());
        let body = doc! { "txnNumber": 1_i64, "lsid": lsid(9) };
        let rw = retryable(&body, &parse_lsid(&body), "update", true)
            .unwrap()
            .unwrap();
        let r: CommandResult<Document> = run_once(table.clone(), rw, || async {
            Err(err(ErrorCode::NotWritablePrimary, "not primary"))
        })
        .await;
        assert_eq!(code(r), 10107);
        let rw = retryable(&body, &parse_lsid(&body), "update", true)
            .unwrap()
            .unwrap();
        assert_eq!(n_of(run_once(table, rw, || async { reply(1) }).await), 1);
    }

    fn stmt(n: i64, start: bool) -> TxnStatement {
        let mut body = doc! { "lsid": lsid(3), "txnNumber": n, "autocommit": false };
        if start {
            body.insert("startTransaction", true);
        }
        transaction_fields(&body, &parse_lsid(&body), "insert")
            .unwrap()
            .unwrap()
    }

    #[tokio::test]
    async fn a_transaction_moves_through_mongods_states() {
        let dir = tempfile::tempdir().unwrap();
        let engine = storage::Engine::open(dir.path(), storage::EngineOptions::default()).unwrap();
        let registry = Arc::new(crate::txn::Registry::default());
        let begin = || Ok(Txn::begin(&registry, engine.snapshot().unwrap()));
        let table = SessionTable::default();
        assert_eq!(code(table.statement(&stmt(1, false), begin).await), 251);
        assert!(table.statement(&stmt(1, true), begin).await.is_ok());
        assert!(table.statement(&stmt(1, false), begin).await.is_ok());
        assert_eq!(code(table.statement(&stmt(1, true), begin).await), 117);
        let committed = table
            .commit(&stmt(1, false), |_| async { Ok(doc! { "ok": 1.0 }) })
            .await;
        assert!(committed.is_ok());
        let retried = table
            .commit(&stmt(1, false), |_| async {
                Err(err(ErrorCode::InternalError, "ran twice"))
            })
            .await;
        assert_eq!(retried.ok(), Some(doc! { "ok": 1.0 }), "a retried commit");
        assert_eq!(code(table.abort(&stmt(1, false)).await), 256);
        assert!(table.statement(&stmt(2, true), begin).await.is_ok());
        assert_eq!(code(table.statement(&stmt(1, false), begin).await), 225);
        table.abort(&stmt(2, false)).await.unwrap();
        let after_abort = table.statement(&stmt(2, false), begin).await;
        let e = after_abort.err().unwrap();
        assert_eq!(e.code.code(), 251);
        assert!(e.to_reply().get_array("errorLabels").is_ok(), "{e}");
        assert!(table.statement(&stmt(3, true), begin).await.is_ok());
        assert_eq!(table.reap(Duration::ZERO), 1, "past its lifetime");
        assert!(table.statement(&stmt(4, true), begin).await.is_ok());
        assert_eq!(table.abort_sessions(None).await, 1);
        assert_eq!(
            registry.started.load(std::sync::atomic::Ordering::Relaxed),
            4
        );
        assert_eq!(
            registry
                .committed
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        assert_eq!(
            registry.aborted.load(std::sync::atomic::Ordering::Relaxed),
            3
        );
        assert_eq!(registry.open.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[test]
    fn transaction_fields_are_checked_as_mongod_checks_them() {
        let f = |b: Document, c: &str| code(transaction_fields(&b, &parse_lsid(&b), c));
        let base = doc! { "lsid": lsid(1), "txnNumber": 1_i64 };
        let with = |extra: Document| {
            let mut b = base.clone();
            b.extend(extra);
            b
        };
        assert_eq!(f(with(doc! { "autocommit": true }), "insert"), 72);
        assert_eq!(f(with(doc! { "startTransaction": true }), "insert"), 72);
        assert_eq!(
            f(
                with(doc! { "autocommit": false, "startTransaction": false }),
                "insert"
            ),
            72
        );
        assert_eq!(
            f(doc! { "lsid": lsid(1), "autocommit": false }, "insert"),
            72
        );
        assert_eq!(f(with(doc! { "autocommit": false }), "count"), 263);
        assert_eq!(f(with(doc! { "autocommit": false }), "find"), 0);
        assert_eq!(f(doc! {}, "find"), 0);
    }
}
