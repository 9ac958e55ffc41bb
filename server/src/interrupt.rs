//! Interrupt tokens: every request carries one [`Interrupt`], which holds why the operation must
//! stop (killed by `killOp`, its client disconnected, the server shutting down) and its
//! `maxTimeMS` deadline. Whoever decides the operation must stop sets the reason (the connection
//! task on EOF, `killOp`, shutdown); the operation itself notices at its next yield point and
//! fails with mongod's code (11601 Interrupted, 279 ClientDisconnect, 11600
//! InterruptedAtShutdown, 50 MaxTimeMSExpired), dropping what it built as the error unwinds.
//!
//! Yield points do not take the token as an argument: `crate::offload::run` installs the
//! request's token as the current operation of the blocking thread that runs it (a job runs on
//! one thread from start to end), and the scans, the matcher, the expression evaluator and the
//! pipeline call [`check`] (one thread-local read, one atomic load and, with a deadline, a clock
//! read) or [`tick`] (a counter; a real check every `TICKS_PER_CHECK` steps) in their loops.
//! Code running outside an operation (start-up, the TTL monitor without a token) is never
//! interrupted. This module sits at the bottom of the layers: it imports only `error` (and the
//! storage engine's no-wait flag, to refuse a call tried on an async worker that ran too long).

use crate::error::{CommandError, CommandResult, ErrorCode, err};
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Steps of a hot loop (matcher clauses, expression elements, regex matches) between two real
/// checks in [`tick`]: a check costs a clock read, a step can be a few nanoseconds.
pub const TICKS_PER_CHECK: u32 = 1024;

/// Why an operation was told to stop. The first reason set wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Killed = 1,
    ClientDisconnected = 2,
    Shutdown = 3,
}

impl Reason {
    fn from_u8(v: u8) -> Option<Reason> {
        match v {
            1 => Some(Reason::Killed),
            2 => Some(Reason::ClientDisconnected),
            3 => Some(Reason::Shutdown),
            _ => None,
        }
    }

    /// mongod's error for an operation interrupted for this reason.
    pub fn error(self) -> CommandError {
        match self {
            Reason::Killed => err(ErrorCode::Interrupted, "operation was interrupted"),
            Reason::ClientDisconnected => err(
                ErrorCode::ClientDisconnect,
                "operation was interrupted because a client disconnected",
            ),
            Reason::Shutdown => err(ErrorCode::InterruptedAtShutdown, "interrupted at shutdown"),
        }
    }
}

pub fn time_limit_error() -> CommandError {
    err(ErrorCode::MaxTimeMSExpired, "operation exceeded time limit")
}

struct Inner {
    reason: AtomicU8,
    /// The deadline as nanoseconds after [`epoch`], plus one; 0 = none. Atomic so that `getMore`
    /// can set it from its cursor's remaining time after the request was parsed.
    deadline: AtomicU64,
    /// Index keys and documents the operation's scans read (the profiler's `keysExamined` and
    /// `docsExamined`): the token is the one per-operation object every scan can reach.
    keys_examined: AtomicU64,
    docs_examined: AtomicU64,
    /// What the operation's execution did, as [`plan_flags`] bits (`$queryStats`' booleans).
    plan_flags: AtomicU8,
    /// The last plan the planner chose for the operation (the profiler's `planSummary`).
    plan_summary: std::sync::Mutex<Option<String>>,
}

/// One operation's interrupt token; clones share it.
#[derive(Clone)]
pub struct Interrupt(Arc<Inner>);

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt(Arc::new(Inner {
            reason: AtomicU8::new(0),
            deadline: AtomicU64::new(0),
            keys_examined: AtomicU64::new(0),
            docs_examined: AtomicU64::new(0),
            plan_flags: AtomicU8::new(0),
            plan_summary: std::sync::Mutex::new(None),
        }))
    }
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupt")
            .field("reason", &self.reason())
            .field("deadline", &self.deadline())
            .finish()
    }
}

/// The process's reference instant for deadlines held as integers.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Interrupt {
    /// Whether both are the token of one operation.
    pub fn same(&self, other: &Interrupt) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// `(keysExamined, docsExamined)` counted so far.
    pub fn examined(&self) -> (u64, u64) {
        (
            self.0.keys_examined.load(Relaxed),
            self.0.docs_examined.load(Relaxed),
        )
    }

    /// Forgets the keys and documents counted so far, and the plan flags but the multi-planner's
    /// (an attempt that is run again: its trial filled the plan cache the next attempt reads).
    pub fn reset_examined(&self) {
        self.0.keys_examined.store(0, Relaxed);
        self.0.docs_examined.store(0, Relaxed);
        self.0
            .plan_flags
            .fetch_and(plan_flags::FROM_MULTI_PLANNER, Relaxed);
    }

    /// The [`plan_flags`] bits noted so far.
    pub fn plan_flags(&self) -> u8 {
        self.0.plan_flags.load(Relaxed)
    }

    /// The summary of the last plan chosen for the operation (`COLLSCAN`, `IXSCAN { a: 1 }`).
    pub fn plan_summary(&self) -> Option<String> {
        self.0.plan_summary.lock().ok().and_then(|p| p.clone())
    }

    /// Tell the operation to stop; a reason already set is kept.
    pub fn interrupt(&self, reason: Reason) {
        let _ = self
            .0
            .reason
            .compare_exchange(0, reason as u8, Relaxed, Relaxed);
    }

    pub fn reason(&self) -> Option<Reason> {
        Reason::from_u8(self.0.reason.load(Relaxed))
    }

    pub fn client_gone(&self) -> bool {
        self.reason() == Some(Reason::ClientDisconnected)
    }

    pub fn set_deadline(&self, deadline: Option<Instant>) {
        let nanos = deadline.map_or(0, |d| {
            let after = d.saturating_duration_since(epoch()).as_nanos();
            u64::try_from(after).unwrap_or(u64::MAX - 1) + 1
        });
        self.0.deadline.store(nanos, Relaxed);
    }

    pub fn deadline(&self) -> Option<Instant> {
        match self.0.deadline.load(Relaxed) {
            0 => None,
            n => Some(epoch() + Duration::from_nanos(n - 1)),
        }
    }

    /// Fails with the operation's interruption, or 50 once its deadline has passed.
    pub fn check(&self) -> CommandResult<()> {
        if let Some(r) = self.reason() {
            return Err(r.error());
        }
        let d = self.0.deadline.load(Relaxed);
        if d != 0 && epoch().elapsed().as_nanos() >= u128::from(d - 1) {
            return Err(time_limit_error());
        }
        Ok(())
    }

    /// Makes this token the current operation of this thread until the guard drops.
    pub fn install(&self) -> Installed {
        crate::scoped::replace(&CURRENT, Some(self.clone()))
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
    static TICKS: Cell<u32> = const { Cell::new(0) };
    /// While a call is tried on an async worker (`crate::offload::run_tried`): when its time
    /// there ends.
    static TRY_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Bounds the time of a call tried on an async worker: from now until the guard drops, a yield
/// point past `budget` refuses the attempt (`storage::nowait::refused` turns true) and fails, so
/// the caller drops the attempt and runs the call on the storage pool.
pub fn try_budget(budget: Duration) -> TryBudget {
    TRY_UNTIL.with(|t| t.set(Some(Instant::now() + budget)));
    TryBudget(std::marker::PhantomData)
}

/// Ends the time bound of [`try_budget`] when dropped.
pub struct TryBudget(std::marker::PhantomData<*const ()>);

impl Drop for TryBudget {
    fn drop(&mut self) {
        TRY_UNTIL.with(|t| t.set(None));
    }
}

fn check_try_budget() -> CommandResult<()> {
    match TRY_UNTIL.with(Cell::get) {
        // A write that reached the log is past refusing (`storage::nowait` settled).
        Some(until) if storage::nowait::active() && Instant::now() >= until => {
            storage::nowait::refuse();
            Err(err(
                ErrorCode::InternalError,
                "the call ran past its time on the async worker",
            ))
        }
        _ => Ok(()),
    }
}

/// Restores the thread's previous operation (usually none) when dropped.
pub type Installed = crate::scoped::Installed<Interrupt>;

/// A yield point: fails when the thread's current operation must stop.
pub fn check() -> CommandResult<()> {
    check_try_budget()?;
    CURRENT.with(|c| match &*c.borrow() {
        Some(op) => op.check(),
        None => Ok(()),
    })
}

/// The thread's current operation, for helper threads that work for it (a parallel scan's
/// parts install it, so killOp, maxTimeMS and a client that hangs up stop them too).
pub fn current() -> Option<Interrupt> {
    crate::scoped::current(&CURRENT)
}

/// Count index keys and documents a scan of the thread's current operation read.
pub fn count_examined(keys: u64, docs: u64) {
    CURRENT.with(|c| {
        if let Some(op) = &*c.borrow() {
            op.0.keys_examined.fetch_add(keys, Relaxed);
            op.0.docs_examined.fetch_add(docs, Relaxed);
        }
    })
}

/// What an operation's execution did, for `$queryStats` (`hasSortStage`, `usedDisk`,
/// `fromMultiPlanner`, `fromPlanCache`): bits noted on its token by the code that does it.
pub mod plan_flags {
    /// A blocking sort ran (find's in-memory SORT, a pipeline `$sort`).
    pub const HAS_SORT_STAGE: u8 = 1;
    /// A sort or group wrote a run to disk.
    pub const USED_DISK: u8 = 2;
    /// The planner tried more than one candidate plan.
    pub const FROM_MULTI_PLANNER: u8 = 4;
    /// The plan came from the plan cache.
    pub const FROM_PLAN_CACHE: u8 = 8;
}

/// Note [`plan_flags`] bits on the thread's current operation.
pub fn note_flags(bits: u8) {
    CURRENT.with(|c| {
        if let Some(op) = &*c.borrow() {
            op.0.plan_flags.fetch_or(bits, Relaxed);
        }
    })
}

/// Note that the current operation's plan came from the plan cache, unless an earlier attempt
/// of it (dropped and run again, `crate::offload::run_tried`) ran the trial that filled it.
pub fn note_from_plan_cache() {
    CURRENT.with(|c| {
        if let Some(op) = &*c.borrow() {
            let _ = op.0.plan_flags.fetch_update(Relaxed, Relaxed, |f| {
                (f & plan_flags::FROM_MULTI_PLANNER == 0).then_some(f | plan_flags::FROM_PLAN_CACHE)
            });
        }
    })
}

/// Note the plan the thread's current operation runs (built only when there is one).
pub fn note_plan(summary: impl FnOnce() -> String) {
    CURRENT.with(|c| {
        if let Some(op) = &*c.borrow()
            && let Ok(mut p) = op.0.plan_summary.lock()
        {
            *p = Some(summary());
        }
    })
}

/// A cheap yield point for hot loops: a real [`check`] every `TICKS_PER_CHECK` calls.
pub fn tick() -> CommandResult<()> {
    tick_n(1)
}

/// [`tick`] for a step worth `n` small ones (a long string copied, many elements at once).
pub fn tick_n(n: usize) -> CommandResult<()> {
    let step = u32::try_from(n).unwrap_or(u32::MAX);
    let t = TICKS.with(|t| {
        let v = t.get().saturating_add(step);
        t.set(if v >= TICKS_PER_CHECK { 0 } else { v });
        v
    });
    if t >= TICKS_PER_CHECK {
        check()
    } else {
        Ok(())
    }
}

/// How often an operation waiting for a lock looks at its interrupt token.
const WAIT_CHECK_MS: u64 = 10;

/// Awaits `fut` (a lock, a gate), failing when the operation is killed, its client goes or its
/// deadline passes (maxTimeMS: 50); the future keeps its place in its queue between checks.
pub async fn wait_for<F: std::future::Future>(fut: F, op: &Interrupt) -> CommandResult<F::Output> {
    tokio::pin!(fut);
    loop {
        op.check()?;
        let mut wake = Instant::now() + std::time::Duration::from_millis(WAIT_CHECK_MS);
        if let Some(d) = op.deadline() {
            wake = wake.min(d);
        }
        tokio::select! {
            g = &mut fut => return Ok(g),
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_map_to_mongod_codes_and_the_first_wins() {
        let op = Interrupt::default();
        assert!(op.check().is_ok());
        op.interrupt(Reason::ClientDisconnected);
        op.interrupt(Reason::Killed);
        assert_eq!(op.check().unwrap_err().code, ErrorCode::ClientDisconnect);
        let killed = Interrupt::default();
        killed.interrupt(Reason::Killed);
        assert_eq!(killed.check().unwrap_err().code, ErrorCode::Interrupted);
        let down = Interrupt::default();
        down.interrupt(Reason::Shutdown);
        assert_eq!(
            down.check().unwrap_err().code,
            ErrorCode::InterruptedAtShutdown
        );
    }

    #[test]
    fn a_passed_deadline_is_max_time_ms_expired() {
        let op = Interrupt::default();
        op.set_deadline(Some(Instant::now() + Duration::from_secs(3600)));
        assert!(op.check().is_ok());
        assert!(op.deadline().is_some());
        op.set_deadline(Some(Instant::now()));
        assert_eq!(op.check().unwrap_err().code, ErrorCode::MaxTimeMSExpired);
        op.set_deadline(None);
        assert!(op.check().is_ok());
    }

    #[test]
    fn the_installed_token_is_checked_on_its_thread_only() {
        let op = Interrupt::default();
        assert!(check().is_ok());
        {
            let _g = op.install();
            assert!(check().is_ok());
            op.interrupt(Reason::Killed);
            assert!(check().is_err());
            let other = std::thread::spawn(|| check().is_ok()).join().unwrap();
            assert!(other, "another thread has no current operation");
            let fails = (0..=TICKS_PER_CHECK).any(|_| tick().is_err());
            assert!(fails, "tick checks within TICKS_PER_CHECK calls");
        }
        assert!(check().is_ok(), "the guard uninstalls");
    }

    #[test]
    fn plan_flags_are_noted_on_the_installed_token() {
        use plan_flags::*;
        let op = Interrupt::default();
        note_flags(HAS_SORT_STAGE);
        assert_eq!(op.plan_flags(), 0, "no current operation: nothing noted");
        let _g = op.install();
        note_flags(HAS_SORT_STAGE);
        note_flags(FROM_MULTI_PLANNER);
        assert_eq!(op.plan_flags(), HAS_SORT_STAGE | FROM_MULTI_PLANNER);
        // An attempt run again keeps only the trial it made, so the cached plan it then reads is
        // still counted as the multi-planner's.
        op.reset_examined();
        assert_eq!(op.plan_flags(), FROM_MULTI_PLANNER);
        note_from_plan_cache();
        assert_eq!(op.plan_flags(), FROM_MULTI_PLANNER);
        let fresh = Interrupt::default();
        let _g2 = fresh.install();
        note_from_plan_cache();
        note_flags(USED_DISK);
        assert_eq!(fresh.plan_flags(), FROM_PLAN_CACHE | USED_DISK);
    }
}
