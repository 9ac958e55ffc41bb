//! Variables bound from outside every expression for the length of one call: a `$lookup`'s
//! `let` values while its sub-pipeline runs. The sub-pipeline is parsed once with the names
//! known ([`parse_with_names`]: `$$name` parses to a variable instead of failing with 17276)
//! and run per input document with the values bound ([`run_with_values`]), so nothing is
//! re-parsed per document.
//!
//! Both are thread-local frames pushed and popped around a synchronous call (a sub-pipeline
//! runs to the end inside the stage that owns it; nested `$lookup`s push nested frames). A
//! name bound by `$let`/`$map`/`$filter`/`$reduce` inside an expression hides an outer one.

use bson::Bson;
use std::cell::RefCell;

thread_local! {
    static NAMES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static VALUES: RefCell<Vec<(String, Bson)>> = const { RefCell::new(Vec::new()) };
}

/// Pops what a frame pushed, also when the call unwinds.
struct Truncate<F: Fn(usize)> {
    len: usize,
    truncate: F,
}

impl<F: Fn(usize)> Drop for Truncate<F> {
    fn drop(&mut self) {
        (self.truncate)(self.len);
    }
}

/// Runs `f` (a parse) with `names` usable as `$$name`.
pub fn parse_with_names<T>(names: &[String], f: impl FnOnce() -> T) -> T {
    let len = NAMES.with(|n| {
        let mut n = n.borrow_mut();
        let len = n.len();
        n.extend(names.iter().cloned());
        len
    });
    let _pop = Truncate {
        len,
        truncate: |len| NAMES.with(|n| n.borrow_mut().truncate(len)),
    };
    f()
}

/// Runs `f` (an evaluation) with `values` bound.
pub fn run_with_values<T>(values: Vec<(String, Bson)>, f: impl FnOnce() -> T) -> T {
    let len = VALUES.with(|v| {
        let mut v = v.borrow_mut();
        let len = v.len();
        v.extend(values);
        len
    });
    let _pop = Truncate {
        len,
        truncate: |len| VALUES.with(|v| v.borrow_mut().truncate(len)),
    };
    f()
}

/// True while parsing inside [`parse_with_names`] of `name`.
pub(super) fn is_known(name: &str) -> bool {
    NAMES.with(|n| n.borrow().iter().any(|k| k == name))
}

/// The innermost bound value of `name`.
pub(super) fn value(name: &str) -> Option<Bson> {
    VALUES.with(|v| {
        v.borrow()
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
    })
}
