//! cairn's storage engine: documents in an append-only log of checksummed segments, indexes in
//! B+trees over an order-preserving key encoding, all made durable through group commit. This
//! crate knows nothing of the wire protocol or the query language.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod btree;
pub mod keycode;
pub mod keys;
pub mod order;
