//! Calls that must not block. A thread that serves requests on an async worker may try a read
//! inside a [`Scope`]: while the scope lives, every file read is served only from the kernel's
//! page cache (`preadv2` with `RWF_NOWAIT`), every write, sync, open or directory change is
//! refused, and the engine's reader locks are only tried, never waited for. A refused call fails
//! with an `io::ErrorKind::WouldBlock` error and marks the scope [`refused`]; the caller then
//! drops whatever the attempt produced and runs the call again where blocking is allowed (the
//! server's storage pool). Buffer-pool hits never touch a file, so they succeed as before.
//!
//! Only calls without side effects may be tried this way: a refused attempt must leave nothing
//! behind. The flag, not the error, is what the caller looks at, because code above the engine
//! may wrap or replace an error on its way up.
//!
//! A write may be tried too, in a scope entered with [`enter_write`] (a read's scope refuses
//! every write). Everything a write does before its batch goes to the log may be
//! refused (its locks are only tried, the pages it will change are read first from cached
//! bytes) and is undone when it is. The log append is the write's point of no return: just
//! before its bytes go to the log the scope is [`settle`]d, and from then on nothing in the scope
//! is refused (the append's buffered write, the record tree's update of pages read moments
//! before, a second write), so an attempt either left nothing behind or stands. After one
//! refusal no write starts in the scope ([`write_allowed`]).

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{RwLock, RwLockReadGuard, TryLockError};

use crate::error::{Result, StorageError};

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static REFUSED: Cell<bool> = const { Cell::new(false) };
    /// Inside a scope whose write reached the log (see [`settle`]).
    static SETTLED: Cell<bool> = const { Cell::new(false) };
    /// The scope may write ([`enter_write`]); a read's scope refuses every write.
    static WRITES: Cell<bool> = const { Cell::new(false) };
}

/// Set once the filesystem answered a no-wait read with "not supported": the server then stops
/// trying, since every attempt would be refused.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// While alive, the thread's storage calls must not block. Scopes do not nest.
pub struct Scope {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Starts a no-wait scope on this thread (and clears an earlier refusal).
pub fn enter() -> Scope {
    ACTIVE.with(|a| a.set(true));
    REFUSED.with(|r| r.set(false));
    SETTLED.with(|s| s.set(false));
    WRITES.with(|w| w.set(false));
    Scope {
        _not_send: std::marker::PhantomData,
    }
}

/// [`enter`] for a call that may write (see the module comment): its writes are tried up to
/// their log append instead of refused.
pub fn enter_write() -> Scope {
    let scope = enter();
    WRITES.with(|w| w.set(true));
    scope
}

impl Drop for Scope {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.set(false));
        SETTLED.with(|s| s.set(false));
        WRITES.with(|w| w.set(false));
    }
}

/// A write of this scope is about to reach the log: nothing more in the scope is refused (the
/// attempt will not be dropped). No-op outside a scope.
pub(crate) fn settle() {
    if active() {
        ACTIVE.with(|a| a.set(false));
        SETTLED.with(|s| s.set(true));
    }
}

/// Whether a write of this thread's scope reached the log (the attempt stands).
pub fn settled() -> bool {
    SETTLED.with(Cell::get)
}

/// Whether this thread is in a scope (settled or not): it serves requests and must not lead a
/// log sync of its own, even once settled.
pub fn in_scope() -> bool {
    active() || SETTLED.with(Cell::get)
}

/// Whether a write may start: not in a read's scope, and not after a refusal in this scope
/// (the attempt is dropped, so nothing it did may stand).
pub(crate) fn write_allowed() -> Result<()> {
    if active() && (refused() || !WRITES.with(Cell::get)) {
        return Err(refused_error());
    }
    Ok(())
}

/// Lets the thread block until dropped, inside a scope: for undoing changes already made,
/// which must complete whatever it costs. No-op outside a scope.
pub(crate) struct Suspended(bool);

pub(crate) fn suspend() -> Suspended {
    let was = active();
    ACTIVE.with(|a| a.set(false));
    Suspended(was)
}

impl Drop for Suspended {
    fn drop(&mut self) {
        if self.0 {
            ACTIVE.with(|a| a.set(true));
        }
    }
}

/// Whether this thread is inside a no-wait scope.
pub fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// Whether a call in this thread's current (or last) scope had to be refused.
pub fn refused() -> bool {
    REFUSED.with(Cell::get)
}

/// Whether this thread is inside a scope whose attempt was refused: what it builds is about to
/// be dropped, so nothing that outlives it (a cursor, a statistic) may be recorded.
pub fn dropping() -> bool {
    active() && refused()
}

/// Whether no-wait reads can work here at all (false once the filesystem refused the flag).
pub fn supported() -> bool {
    !UNSUPPORTED.load(Relaxed)
}

/// Marks the scope refused and returns the error the refused call fails with.
pub fn refuse() -> io::Error {
    REFUSED.with(|r| r.set(true));
    io::Error::new(
        io::ErrorKind::WouldBlock,
        "the call would block (no-wait scope)",
    )
}

/// [`refuse`] as a storage error.
pub(crate) fn refused_error() -> StorageError {
    StorageError::Io(refuse())
}

/// A read guard of `lock`: waited for normally, only tried inside a scope (a writer may hold the
/// lock across a disk read or a log append).
pub(crate) fn read_lock<T>(lock: &RwLock<T>) -> Result<RwLockReadGuard<'_, T>> {
    guard(|| lock.read(), || lock.try_read())
}

/// `RwLock::write` inside a scope: only tried (see [`read_lock`]).
pub(crate) fn write_lock<T>(lock: &RwLock<T>) -> Result<std::sync::RwLockWriteGuard<'_, T>> {
    guard(|| lock.write(), || lock.try_write())
}

/// `Mutex::lock` inside a scope: only tried (see [`read_lock`]).
pub(crate) fn mutex_lock<T>(lock: &std::sync::Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>> {
    guard(|| lock.lock(), || lock.try_lock())
}

/// A lock's guard: `wait` outside a scope, `attempt` inside one (refused when held).
fn guard<G>(
    wait: impl FnOnce() -> std::sync::LockResult<G>,
    attempt: impl FnOnce() -> std::sync::TryLockResult<G>,
) -> Result<G> {
    if !active() {
        return wait().map_err(|_| poisoned());
    }
    match attempt() {
        Ok(g) => Ok(g),
        Err(TryLockError::WouldBlock) => Err(refused_error()),
        Err(TryLockError::Poisoned(_)) => Err(poisoned()),
    }
}

fn poisoned() -> StorageError {
    StorageError::Io(io::Error::other("a storage lock was poisoned"))
}

/// Fills `buf` from `offset` of `file` only if the page cache holds all of it.
pub(crate) fn read_cached(file: &std::fs::File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    use rustix::io::{Errno, ReadWriteFlags};
    let mut done = 0usize;
    while done < buf.len() {
        let mut bufs = [io::IoSliceMut::new(&mut buf[done..])];
        match rustix::io::preadv2(
            file,
            &mut bufs,
            offset + done as u64,
            ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ));
            }
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => return Err(refuse()),
            Err(Errno::OPNOTSUPP | Errno::INVAL | Errno::NOSYS) => {
                UNSUPPORTED.store(true, Relaxed);
                return Err(refuse());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    #[test]
    fn cached_bytes_are_read_and_the_scope_is_not_refused() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let _s = enter();
        let mut buf = vec![0u8; 5_000];
        match read_cached(&f, 7_000, &mut buf) {
            Ok(()) => {
                assert_eq!(&buf[..], &data[7_000..12_000]);
                assert!(!refused());
            }
            // A filesystem without no-wait reads refuses every read; the server then stops
            // trying. Say so rather than pass silently.
            Err(e) if !supported() => {
                assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                eprintln!("this filesystem does not support RWF_NOWAIT reads");
            }
            Err(e) => panic!("read of cached bytes failed: {e}"),
        }
        let mut past = vec![0u8; 10];
        let e = read_cached(&f, 19_995, &mut past).unwrap_err();
        assert!(matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof | io::ErrorKind::WouldBlock
        ));
        let mut full = vec![0u8; 3];
        assert!(f.read_exact_at(&mut full, 0).is_ok());
    }

    #[test]
    fn bytes_not_in_the_page_cache_are_refused() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; 64 * 1024]).unwrap();
        f.sync_all().unwrap();
        // Eviction is advice: a page another CPU still batches may stay, so ask a few times.
        let mut buf = vec![0u8; 4096];
        for _ in 0..20 {
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            let _s = enter();
            if let Err(e) = read_cached(&f, 32 * 1024, &mut buf) {
                assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                assert!(refused());
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("20 evictions of the file left its bytes readable without waiting");
    }

    #[test]
    fn a_held_write_lock_is_refused_inside_a_scope_and_waited_for_outside() {
        let lock = RwLock::new(5);
        {
            let _w = lock.write().unwrap();
            let s = enter();
            assert!(read_lock(&lock).is_err());
            assert!(refused());
            drop(s);
            assert!(!active());
        }
        assert_eq!(*read_lock(&lock).unwrap(), 5);
        let _s = enter();
        assert_eq!(*read_lock(&lock).unwrap(), 5);
        assert!(!refused());
    }
}
