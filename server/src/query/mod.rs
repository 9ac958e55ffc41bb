//! The query language: filters, update operators, projection and sort. Everything here is pure:
//! it reads documents (raw where possible) and returns values or `CommandError`s with mongod's
//! codes; no storage or network I/O happens in this module tree.

pub mod decimal;
pub mod expr;

#[cfg(test)]
mod fuzz_tests;
pub mod limits;
pub mod matcher;
pub mod path;
pub mod pipeline;
pub mod projection;
pub mod sort;
pub mod types;
pub mod update;
