//! The `cairn` server: connections, command dispatch, the query language and the planner.
pub mod error;
pub mod query;
