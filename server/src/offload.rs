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
//! (`Catalog::finish_write`) and holds no pool thread.

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
