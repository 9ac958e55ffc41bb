//! The query language: filters (`matcher`), update operators (`update`), projection, sort and
//! the expression language (`expr`), over the dotted-path walk (`path`) and the one BSON order
//! of `storage::order`. Everything here is pure: it reads documents (raw where possible) and
//! returns values or `CommandError`s with mongod's codes; no storage or network I/O happens in
//! this module tree.

pub mod budget;
pub mod collation;
pub mod collator;
pub mod decimal;
pub mod distinct;
pub mod elements;
pub mod expr;
pub mod js;
pub mod limits;
pub mod matcher;
pub mod meta;
pub mod path;
pub mod pipeline;
pub mod projection;
pub mod sort;
pub mod text;
pub mod timeseries;
pub mod types;
pub mod update;
pub mod validation;
pub mod vocabulary;

#[cfg(test)]
mod fuzz_tests;
