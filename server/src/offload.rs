//! The one way the server runs storage work: [`run`] hands a closure to tokio's blocking pool and
//! awaits its result, so page reads, log appends, scans, index builds and DDL (which waits for
//! its catalog record to be durable) never occupy an async worker, and `ping`, `hello` and every
//! other connection keep being served while storage is slow.
//!
//! Bounds: at most `limits::STORAGE_THREADS_MAX` jobs run at once (the runtime's
//! `max_blocking_threads`, set in `main.rs`); further jobs wait in tokio's FIFO queue, which the
//! connections bound (a connection has one request in flight) plus the TTL monitor. A job whose
//! operation was interrupted while it waited (its client disconnected, `killOp`, shutdown, its
//! `maxTimeMS` passed) is not started; a job that starts runs with its request's
//! `crate::interrupt::Interrupt` installed as the thread's current operation, so the scans,
//! the matcher and the expressions it runs stop at their next yield point once it is
//! interrupted. Waiting for a write to become durable is not a job: it stays async
//! (`Catalog::finish_write`) and holds no pool thread. Read-only calls and small writes may first
//! be tried on the async worker itself ([`run_tried`]): only what cannot block (cached pages, a
//! short time, a write up to its log append) is done there, anything else runs here.

use crate::error::{CommandResult, ErrorCode, err};
use crate::interrupt::Interrupt;
use crate::state::ServerState;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Decrements `running` however the job ends (a panic included).
struct Running<'a>(&'a AtomicU64);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Runs `f` on the blocking pool. `command` names the job (the canonical command name) for the
/// `blockStorageCall` fail point; `op`, when given, is checked before the job starts and is the
/// thread's current operation while it runs.
pub async fn run<T, F>(
    state: &Arc<ServerState>,
    command: &'static str,
    op: Option<&Interrupt>,
    f: F,
) -> CommandResult<T>
where
    T: Send + 'static,
    F: FnOnce(&ServerState) -> CommandResult<T> + Send + 'static,
{
    let st = state.clone();
    let op = op.cloned();
    state.pool.queued.fetch_add(1, Relaxed);
    let job = tokio::task::spawn_blocking(move || {
        let pool = &st.pool;
        pool.queued.fetch_sub(1, Relaxed);
        let _installed = op.as_ref().map(Interrupt::install);
        if let Some(op) = &op
            && let Err(e) = op.check()
        {
            if op.client_gone() {
                pool.skipped_client_gone.fetch_add(1, Relaxed);
            }
            return Err(e);
        }
        pool.running.fetch_add(1, Relaxed);
        let _running = Running(&pool.running);
        st.failpoints.block_storage_call(command);
        f(&st)
    });
    match job.await {
        Ok(result) => result,
        Err(e) => {
            // A panic in a handler is our bug: the request fails, the server keeps running.
            tracing::error!(command = command, error = %e, "storage job failed");
            Err(err(
                ErrorCode::InternalError,
                format!("{command}: storage job failed: {e}"),
            ))
        }
    }
}

/// What a call first tried on the async worker may do (see [`run_tried`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tried {
    /// A read-only call.
    Read,
    /// A write outside a multi-document transaction.
    Write,
}

/// Runs `f`, first on the calling async worker if it can be done there without blocking, else
/// on the blocking pool as [`run`] does.
///
/// The attempt runs inside a `storage::nowait` scope (file reads served only from the page cache,
/// no file writes, engine locks only tried) and a time bound (`limits::TRY_ON_WORKER_MICROS`,
/// checked at the operation's yield points). If anything in it would have blocked, or the bound
/// passed, its result is dropped and `f` runs again on the pool: `f` must have no side effect
/// that a dropped attempt leaves behind (a read's cursor is only registered once the attempt
/// succeeded, see `crate::cursors::Cursors::insert`; counters check `storage::nowait::dropping`).
///
/// A write's attempt is tried only up to its log append (locks, the pages its index and
/// record-tree changes start from, all cached); a refusal there undoes the planned changes. Once
/// the batch goes to the log the attempt stands whatever follows (`storage::nowait` settles:
/// nothing more is refused, nothing blocks but the rare re-read of a page evicted meanwhile),
/// and waiting for durability stays async as ever.
///
/// Not tried while a fail point is on, or when the `cairnReadsOnWorker` / `cairnWritesOnWorker`
/// parameter is off.
pub async fn run_tried<T, F>(
    state: &Arc<ServerState>,
    command: &'static str,
    op: Option<&Interrupt>,
    tried: Tried,
    f: F,
) -> CommandResult<T>
where
    T: Send + 'static,
    F: Fn(&ServerState) -> CommandResult<T> + Send + 'static,
{
    if let Some(out) = try_on_worker(state, op, tried, &f) {
        return out;
    }
    run(state, command, op, f).await
}

/// The error of a call that must not be answered in a no-wait attempt (it is refused, and
/// runs again on the pool).
pub fn refuse() -> crate::error::CommandError {
    storage::nowait::refuse();
    err(
        ErrorCode::InternalError,
        "the call cannot run on the async worker",
    )
}

fn try_on_worker<T>(
    state: &ServerState,
    op: Option<&Interrupt>,
    tried: Tried,
    f: &dyn Fn(&ServerState) -> CommandResult<T>,
) -> Option<CommandResult<T>> {
    let (on, served, moved) = match tried {
        Tried::Read => (
            state.params.reads_on_worker(),
            &state.pool.served_cached,
            &state.pool.moved_to_pool,
        ),
        Tried::Write => (
            state.params.writes_on_worker(),
            &state.pool.writes_on_worker,
            &state.pool.writes_moved_to_pool,
        ),
    };
    if !storage::nowait::supported() || state.failpoints.any_on() || !on {
        return None;
    }
    if let Some(op) = op
        && let Err(e) = op.check()
    {
        return Some(Err(e));
    }
    let out = {
        let _installed = op.map(Interrupt::install);
        let _budget = crate::interrupt::try_budget(std::time::Duration::from_micros(
            crate::limits::TRY_ON_WORKER_MICROS,
        ));
        let _scope = match tried {
            Tried::Read => storage::nowait::enter(),
            Tried::Write => storage::nowait::enter_write(),
        };
        let out = f(state);
        if storage::nowait::refused() && !storage::nowait::settled() {
            None
        } else {
            Some(out)
        }
    };
    match out {
        Some(out) => {
            served.fetch_add(1, Relaxed);
            Some(out)
        }
        None => {
            moved.fetch_add(1, Relaxed);
            if let Some(op) = op {
                op.reset_examined();
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use clap::Parser;
    use std::sync::atomic::AtomicBool;

    fn state(dir: &std::path::Path) -> Arc<ServerState> {
        let config = Config::parse_from(["cairn", "--dbpath", dir.to_str().unwrap()]);
        let ring = Arc::new(crate::logging::LogRing::default());
        Arc::new(ServerState::new(config, vec![], ring).unwrap())
    }

    /// A runtime with one blocking thread, so that a second job has to queue.
    fn one_thread_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    /// Runs `body` on [`one_thread_runtime`] with a fresh server state.
    fn on_one_thread<F: std::future::Future<Output = ()>>(
        body: impl FnOnce(Arc<ServerState>) -> F,
    ) {
        let dir = tempfile::tempdir().unwrap();
        one_thread_runtime().block_on(body(state(dir.path())));
    }

    #[test]
    fn a_queued_job_of_a_gone_client_never_starts() {
        let dir = tempfile::tempdir().unwrap();
        one_thread_runtime().block_on(async {
            let st = state(dir.path());
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
            let first = tokio::spawn({
                let st = st.clone();
                async move {
                    run(&st, "find", None, move |_| {
                        let _ = started_tx.send(());
                        let _ = release_rx.recv();
                        Ok(1)
                    })
                    .await
                }
            });
            started_rx.await.unwrap();
            let client = Interrupt::default();
            let ran = Arc::new(AtomicBool::new(false));
            let second = tokio::spawn({
                let (st, client, ran) = (st.clone(), client.clone(), ran.clone());
                async move {
                    run(&st, "find", Some(&client), move |_| {
                        ran.store(true, Relaxed);
                        Ok(2)
                    })
                    .await
                }
            });
            // The second job is queued behind the first (one blocking thread).
            while st.pool.queued.load(Relaxed) == 0 {
                tokio::task::yield_now().await;
            }
            client.interrupt(crate::interrupt::Reason::ClientDisconnected);
            release_tx.send(()).unwrap();
            assert_eq!(first.await.unwrap().unwrap(), 1);
            let e = second.await.unwrap().unwrap_err();
            assert_eq!(e.code, ErrorCode::ClientDisconnect);
            assert!(!ran.load(Relaxed));
            assert_eq!(st.pool.skipped_client_gone.load(Relaxed), 1);
            assert_eq!(st.pool.running.load(Relaxed), 0);
            assert_eq!(st.pool.queued.load(Relaxed), 0);
        });
    }

    #[test]
    fn a_call_that_cannot_block_is_answered_on_the_worker() {
        on_one_thread(|st| async move {
            let worker = std::thread::current().id();
            let ran_on = run_tried(&st, "find", None, Tried::Read, |_| {
                Ok(std::thread::current().id())
            })
            .await
            .unwrap();
            assert_eq!(ran_on, worker);
            assert_eq!(st.pool.served_cached.load(Relaxed), 1);
            assert_eq!(st.pool.moved_to_pool.load(Relaxed), 0);
        });
    }

    #[test]
    fn a_refused_call_runs_again_on_the_pool_and_only_that_result_counts() {
        on_one_thread(|st| async move {
            let worker = std::thread::current().id();
            let op = Interrupt::default();
            let tries = Arc::new(AtomicU64::new(0));
            let t = tries.clone();
            let (ran_on, attempt) = run_tried(&st, "find", Some(&op), Tried::Read, move |_| {
                let n = t.fetch_add(1, Relaxed);
                crate::interrupt::count_examined(5, 5);
                if storage::nowait::active() {
                    // What a page-cache miss does deep in the engine.
                    storage::nowait::refuse();
                    return Err(err(ErrorCode::InternalError, "would block"));
                }
                Ok((std::thread::current().id(), n))
            })
            .await
            .unwrap();
            assert_ne!(ran_on, worker, "the second run is on a pool thread");
            assert_eq!(attempt, 1);
            assert_eq!(tries.load(Relaxed), 2);
            assert_eq!(
                op.examined(),
                (5, 5),
                "the dropped attempt's counts are forgotten"
            );
            assert_eq!(st.pool.moved_to_pool.load(Relaxed), 1);
            assert_eq!(st.pool.served_cached.load(Relaxed), 0);
        });
    }

    fn insert_one(coll: &storage::Collection, id: i64) -> storage::Result<storage::Ticket> {
        let d = bson::RawDocumentBuf::try_from(&bson::doc! {"_id": id}).unwrap();
        coll.write(vec![storage::WriteOp::Insert(d.into())])
    }

    #[test]
    fn a_write_is_done_on_the_worker_and_a_refused_one_once_on_the_pool() {
        on_one_thread(|st| async move {
            let worker = std::thread::current().id();
            let coll = st.catalog.get_or_create("db", "c").unwrap();
            let c = coll.clone();
            let (ran_on, t) = run_tried(&st, "insert", None, Tried::Write, move |_| {
                let t = insert_one(&c, 1).map_err(|e| err(ErrorCode::InternalError, e.to_string()));
                Ok((std::thread::current().id(), t?))
            })
            .await
            .unwrap();
            assert_eq!(ran_on, worker);
            t.wait_durable().await.unwrap();
            assert_eq!(st.pool.writes_on_worker.load(Relaxed), 1);
            // Refused before its write (a lock held, a page not cached): nothing stands, and
            // the pool's run is the one write.
            let tries = Arc::new(AtomicU64::new(0));
            let (n, c) = (tries.clone(), coll.clone());
            run_tried(&st, "insert", None, Tried::Write, move |_| {
                n.fetch_add(1, Relaxed);
                if storage::nowait::active() {
                    storage::nowait::refuse();
                }
                insert_one(&c, 2).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
            })
            .await
            .unwrap();
            assert_eq!(tries.load(Relaxed), 2);
            assert_eq!(coll.count(), 2);
            assert_eq!(st.pool.writes_moved_to_pool.load(Relaxed), 1);
        });
    }

    /// A lone durable write done on the worker is synced by its own wait (off the worker's
    /// core, `block_in_place`), not by the commit thread; a write on the pool syncs in its job.
    #[test]
    fn a_lone_write_on_the_worker_is_synced_by_its_wait() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let st = state(dir.path());
            let coll = st.catalog.get_or_create("db", "c").unwrap();
            let wc = crate::catalog::WriteConcern::default();
            let synced = |st: &ServerState| {
                let g = st.catalog.engine().stats().group_commit;
                (g.syncs_by_writer, g.syncs_requested)
            };
            let before = synced(&st);
            for id in 0..3 {
                let c = coll.clone();
                let (t, on_worker) = run_tried(&st, "insert", None, Tried::Write, move |_| {
                    let t = insert_one(&c, id)
                        .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
                    // What a write job does at its end (`Catalog::sync_if_idle`).
                    t.sync_if_idle()
                        .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
                    Ok((t, storage::nowait::in_scope()))
                })
                .await
                .unwrap();
                assert!(
                    on_worker && !t.is_durable(),
                    "done on the worker, its sync left"
                );
                st.catalog.finish_write(&t, &wc).await.unwrap();
                assert!(t.is_durable());
            }
            let after = synced(&st);
            assert_eq!(after.0 - before.0, 3, "each write's wait led its sync");
            assert_eq!(after.1, before.1, "the commit thread was not asked");
        });
    }

    #[test]
    fn a_write_that_reached_the_log_stands_whatever_follows_in_its_attempt() {
        on_one_thread(|st| async move {
            let coll = st.catalog.get_or_create("db", "c").unwrap();
            let tries = Arc::new(AtomicU64::new(0));
            let (n, c) = (tries.clone(), coll.clone());
            run_tried(&st, "insert", None, Tried::Write, move |_| {
                n.fetch_add(1, Relaxed);
                let t = insert_one(&c, 1);
                // Settled by the append: nothing after it refuses or moves the attempt.
                assert!(!storage::nowait::active());
                storage::nowait::refuse();
                crate::interrupt::check()?;
                t.map_err(|e| err(ErrorCode::InternalError, e.to_string()))
            })
            .await
            .unwrap();
            assert_eq!(tries.load(Relaxed), 1, "the write ran once");
            assert_eq!(coll.count(), 1);
            assert_eq!(st.pool.writes_on_worker.load(Relaxed), 1);
            assert_eq!(st.pool.writes_moved_to_pool.load(Relaxed), 0);
        });
    }

    #[test]
    fn a_call_that_runs_past_its_time_on_the_worker_moves_to_the_pool() {
        on_one_thread(|st| async move {
            let op = Interrupt::default();
            // A scan that yields often: on the worker its yield point fails once the budget is
            // spent; on the pool it runs to its end.
            let steps = run_tried(&st, "find", Some(&op), Tried::Read, |_| {
                let start = std::time::Instant::now();
                let mut steps = 0u64;
                while start.elapsed()
                    < std::time::Duration::from_micros(4 * crate::limits::TRY_ON_WORKER_MICROS)
                {
                    crate::interrupt::check()?;
                    steps += 1;
                }
                Ok(steps)
            })
            .await
            .unwrap();
            assert!(steps > 0);
            assert_eq!(st.pool.moved_to_pool.load(Relaxed), 1);
        });
    }

    #[test]
    fn nothing_is_tried_on_the_worker_when_turned_off_or_while_a_fail_point_is_on() {
        on_one_thread(|st| async move {
            let worker = std::thread::current().id();
            let on_pool = |st: Arc<ServerState>| async move {
                run_tried(&st, "find", None, Tried::Read, |_| {
                    Ok(std::thread::current().id())
                })
                .await
                .unwrap()
            };
            st.params
                .set("cairnReadsOnWorker", &bson::Bson::Boolean(false))
                .unwrap();
            assert_ne!(on_pool(st.clone()).await, worker);
            st.params
                .set("cairnReadsOnWorker", &bson::Bson::Boolean(true))
                .unwrap();
            st.failpoints
                .configure(
                    crate::failpoints::BLOCK_STORAGE_CALL,
                    &bson::doc! { "mode": "alwaysOn", "data": { "commands": ["insert"] } },
                )
                .unwrap();
            assert_ne!(on_pool(st.clone()).await, worker);
            assert_eq!(st.pool.served_cached.load(Relaxed), 0);
        });
    }

    #[test]
    fn a_panicking_job_is_an_internal_error() {
        let dir = tempfile::tempdir().unwrap();
        one_thread_runtime().block_on(async {
            let st = state(dir.path());
            let r: CommandResult<()> = run(&st, "find", None, |_| panic!("bug")).await;
            assert_eq!(r.unwrap_err().code, ErrorCode::InternalError);
            assert_eq!(st.pool.running.load(Relaxed), 0);
            let ok = run(&st, "find", None, |_| Ok("fine")).await.unwrap();
            assert_eq!(ok, "fine");
        });
    }
}
