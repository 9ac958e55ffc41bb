//! The `cairn` server: configuration, connections, command dispatch, the query language and the
//! planner. `main.rs` only parses the command line and calls [`server::run`].

pub mod alloc_trim;
pub mod auth;
pub mod background;
pub mod catalog;
pub mod clock;
pub mod commands;
#[cfg(test)]
mod compat;
pub mod config;
pub mod connection;
pub mod cursors;
pub mod error;
pub mod exec;
pub mod failpoints;
pub mod interrupt;
pub mod limits;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod ns_locks;
pub mod offload;
pub mod ops;
pub mod parameters;
pub mod planner;
pub mod profiler;
pub mod query;
pub mod query_settings;
pub mod query_shape;
pub mod query_stats;
pub mod repl;
pub mod retried;
pub mod retry_record;
pub mod scoped;
pub mod server;
pub mod session_records;
pub mod sessions;
pub mod state;
pub mod streams;
pub mod sysinfo;
pub mod tls;
pub mod ttl;
pub mod txn;

/// cairn's own version (buildInfo reports the mongod version it follows separately).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
