//! A hook the engine's own threads (commit, checkpoint, compaction, preallocation) call each time
//! they go back to sleep, for whatever the embedding program wants done on a thread that is
//! about to idle: the server hands the thread's allocator cache back
//! (`cairn_server::alloc_trim`). Storage knows nothing of allocators; without a hook set this
//! is one atomic load. The hook runs often (before every sleep), so it must be cheap and decide
//! itself when to do real work.

use std::sync::OnceLock;

static HOOK: OnceLock<fn()> = OnceLock::new();

/// Sets the hook once for the process; false if one was already set.
pub fn set_thread_idle_hook(hook: fn()) -> bool {
    HOOK.set(hook).is_ok()
}

/// Called by an engine thread just before it sleeps.
pub(crate) fn thread_idle() {
    if let Some(hook) = HOOK.get() {
        hook();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, EngineOptions};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::time::{Duration, Instant};

    static CALLS: AtomicU64 = AtomicU64::new(0);

    fn count() {
        CALLS.fetch_add(1, Relaxed);
    }

    /// The engine's threads call the hook as they go to sleep (the only test that sets it: the
    /// hook is once per process).
    #[test]
    fn engine_threads_call_the_idle_hook() {
        assert!(set_thread_idle_hook(count));
        assert!(!set_thread_idle_hook(count), "the hook is set once");
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(dir.path(), EngineOptions::default()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while CALLS.load(Relaxed) < 3 {
            assert!(
                Instant::now() < deadline,
                "no engine thread called the hook"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(engine);
    }
}
