//! The query language: filters, update operators, projection and sort.
