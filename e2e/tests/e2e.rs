//! The end-to-end tests: each file of this directory is one module of a single test binary
//! (built as a test of the `cairn` package, so `CARGO_BIN_EXE_cairn` is its fresh binary). One
//! binary instead of one per file: each links the driver, the server and their debug info, and
//! those links were most of the build time. Run one file's tests with
//! `cargo test -p cairn --test e2e <module>::`.

mod admin80;
mod admin_args;
mod agg_foreign;
mod agg_suspended;
mod aggregate;
mod auth;
mod bulkwrite;
mod capped;
mod change_ddl;
mod clustered;
mod collated_indexes;
mod collation;
mod command_args;
mod crud;
mod diagnostic;
mod diskfull;
mod durability;
mod handshake;
mod interrupt;
mod javascript;
mod load;
mod map_reduce;
mod offthread;
mod ops;
mod parallel_scan;
mod plancache;
mod planner;
mod planner2;
mod powercut;
mod profiler;
mod replset;
mod retryable;
mod snapshot_reads;
mod special_indexes;
mod strict;
mod sweep;
mod text_aggregate;
mod text_indexes;
mod timeseries;
mod tls;
mod tools;
mod transactions;
mod transactions_ddl;
mod transactions_limits;
mod transactions_waits;
mod txn_indexes;
mod validation;
mod views;
mod wildcard_indexes;
