//! A value current for one thread while a guard lives: the operation's interrupt token
//! (`interrupt`), its collator (`query::collator`), its transaction (`txn::Txn`) and its
//! retryable-write record (`retry_record::RetryRecord`) are installed on the pool thread that
//! runs the command's storage part, and the previous value comes back when the guard drops.
//! Imports nothing of the crate, so every layer may use it.

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

/// The thread-local slot such a value lives in (`T` is cheap to clone: an `Arc` or a handle).
pub type Slot<T> = LocalKey<RefCell<Option<T>>>;

/// Restores the slot's previous value (usually none) when dropped.
#[must_use = "the value is current only while the guard lives"]
pub struct Installed<T: 'static> {
    slot: &'static Slot<T>,
    previous: Option<T>,
}

/// Makes `value` current in `slot` until the returned guard drops.
pub fn install<T>(slot: &'static Slot<Arc<T>>, value: Arc<T>) -> Installed<Arc<T>> {
    replace(slot, Some(value))
}

/// Makes `value` (none too: an inner scope can clear an outer one's value) current in `slot`
/// until the returned guard drops.
pub fn replace<T>(slot: &'static Slot<T>, value: Option<T>) -> Installed<T> {
    Installed {
        slot,
        previous: slot.with(|c| c.replace(value)),
    }
}

/// The slot's current value.
pub fn current<T: Clone>(slot: &'static Slot<T>) -> Option<T> {
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

    #[test]
    fn an_inner_scope_can_clear_the_value() {
        let _outer = install(&SLOT, Arc::new(1));
        {
            let _inner = replace(&SLOT, None);
            assert_eq!(current(&SLOT), None);
        }
        assert_eq!(current(&SLOT).as_deref(), Some(&1));
    }
}
