//! A value current for one thread while a guard lives: the operation's transaction
//! (`txn::Txn`) and its retryable-write record (`retry_record::RetryRecord`) are installed on
//! the pool thread that runs the command's storage part, and the previous value comes back
//! when the guard drops.

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

/// The thread-local slot such a value lives in.
pub type Slot<T> = LocalKey<RefCell<Option<Arc<T>>>>;

/// Restores the slot's previous value (usually none) when dropped.
#[must_use = "the value is current only while the guard lives"]
pub struct Installed<T: 'static> {
    slot: &'static Slot<T>,
    previous: Option<Arc<T>>,
}

/// Makes `value` current in `slot` until the returned guard drops.
pub fn install<T>(slot: &'static Slot<T>, value: Arc<T>) -> Installed<T> {
    Installed {
        slot,
        previous: slot.with(|c| c.replace(Some(value))),
    }
}

/// The slot's current value.
pub fn current<T>(slot: &'static Slot<T>) -> Option<Arc<T>> {
    slot.with(|c| c.borrow().clone())
}

impl<T> Drop for Installed<T> {
    fn drop(&mut self) {
        let previous = self.previous.take();
        self.slot.with(|c| *c.borrow_mut() = previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static SLOT: RefCell<Option<Arc<u32>>> = const { RefCell::new(None) };
    }

    #[test]
    fn nested_guards_restore_in_order() {
        assert_eq!(current(&SLOT), None);
        let outer = install(&SLOT, Arc::new(1));
        {
            let _inner = install(&SLOT, Arc::new(2));
            assert_eq!(current(&SLOT).as_deref(), Some(&2));
        }
        assert_eq!(current(&SLOT).as_deref(), Some(&1));
        drop(outer);
        assert_eq!(current(&SLOT), None);
    }
}
