//! The memory budget all running operations share for what their blocking stages hold
//! (`$sort`, `$group`, `$bucketAuto`, `$setWindowFields`, `$densify`, `$sample`, a find's
//! in-memory sort). Each stage instance keeps a [`Held`]: the bytes it has charged, added to the
//! process-wide total as they grow and given back when they shrink or the `Held` is dropped.
//! The per-stage bound (`internalQueryMaxBlockingSortMemoryUsageBytes`, mongod's) limits one
//! stage; this budget (the `queryMemoryBudgetBytes` parameter, cairn's own; a quarter of the
//! machine's memory by default) limits them all together, so a crowd of concurrent heavy
//! queries spills or fails with a clear error instead of exhausting the process.

use crate::error::{CommandError, ErrorCode, err};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A total and its bound.
pub struct Budget {
    used: AtomicUsize,
    max: AtomicUsize,
}

/// The server's budget (unbounded until start-up sets it from the parameter).
pub static GLOBAL: Budget = Budget::new(usize::MAX);

impl Budget {
    pub const fn new(max: usize) -> Budget {
        Budget {
            used: AtomicUsize::new(0),
            max: AtomicUsize::new(max),
        }
    }

    pub fn set_max(&self, bytes: usize) {
        self.max.store(bytes, Ordering::Relaxed);
    }

    pub fn max(&self) -> usize {
        self.max.load(Ordering::Relaxed)
    }

    /// Bytes charged by every live [`Held`] of this budget.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// A stage's share, holding nothing yet.
    pub fn hold(&'static self) -> Held {
        Held {
            budget: self,
            bytes: 0,
        }
    }
}

/// What one stage holds of a [`Budget`]; dropping it gives the bytes back.
pub struct Held {
    budget: &'static Budget,
    bytes: usize,
}

impl Held {
    /// A share of the server's budget.
    pub fn global() -> Held {
        GLOBAL.hold()
    }

    /// Records that the stage now holds `bytes`. A rise that would take the budget's total past
    /// its bound is refused (false) and changes nothing; a fall always succeeds.
    pub fn set(&mut self, bytes: usize) -> bool {
        let used = &self.budget.used;
        if bytes <= self.bytes {
            used.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
            self.bytes = bytes;
            return true;
        }
        let rise = bytes - self.bytes;
        let max = self.budget.max();
        let mut now = used.load(Ordering::Relaxed);
        loop {
            if now.saturating_add(rise) > max {
                return false;
            }
            match used.compare_exchange_weak(now, now + rise, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(seen) => now = seen,
            }
        }
        self.bytes = bytes;
        true
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held({} bytes)", self.bytes)
    }
}

/// The error for a stage whose rise the server's budget refused (146 ExceededMemoryLimit).
pub fn exhausted(stage: &str, used_bytes: usize) -> CommandError {
    err(
        ErrorCode::ExceededMemoryLimit,
        format!(
            "{stage} could not hold {used_bytes} bytes: the server's memory budget for all \
             running queries (queryMemoryBudgetBytes: {} bytes, {} in use) is exhausted; retry \
             later, or pass allowDiskUse so the stage spills to disk",
            GLOBAL.max(),
            GLOBAL.used()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_return_on_drop() {
        static B: Budget = Budget::new(1000);
        let mut a = B.hold();
        let mut b = B.hold();
        assert!(a.set(600));
        assert!(!b.set(500), "600 + 500 passes the bound of 1000");
        assert_eq!(b.bytes(), 0, "a refused rise changes nothing");
        assert!(b.set(400));
        assert_eq!(B.used(), 1000);
        assert!(a.set(100), "a fall always succeeds");
        assert!(b.set(900));
        drop(a);
        assert_eq!(B.used(), 900);
        drop(b);
        assert_eq!(B.used(), 0);
    }

    #[test]
    fn concurrent_shares_never_pass_the_bound() {
        static B: Budget = Budget::new(10_000);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut h = B.hold();
                    for i in 0..10_000usize {
                        let want = (i * 37) % 5_000;
                        if h.set(want) {
                            assert!(B.used() <= B.max());
                        }
                    }
                });
            }
        });
        assert_eq!(B.used(), 0);
    }
}
