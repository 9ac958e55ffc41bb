//! The executor: runs the plans the planner returns (collection scan, index scan with fetch,
//! OR / SORT_MERGE unions, covered scans, COUNT_SCAN, DISTINCT_SCAN), as resumable scans that a
//! cursor can suspend between batches, and drives the aggregation pipeline over them.
//!
//! Layering: `exec` sits below `commands` (which parse, call and reply) and above `planner`
//! (which returns a plan, as data), `query` (pure matching, projection, sort, pipeline stages)
//! and `catalog`. It never imports `commands`, `cursors` or `state`; the cursor registry stores
//! the `DocSource` this module hands out.

pub mod aggregate;
pub mod covered;
pub mod find;
pub mod keyscan;
pub mod near;
pub mod parallel;
pub mod scan;
pub mod sorted;
pub mod source;
pub mod stream;
pub mod text;

pub use scan::{
    MergeBranch, ScanMode, ScanState, check_deadline, collect_matches, for_each_match,
    index_key_of, planned_scan, scan_mode, sort_memory_error,
};
pub use source::{BATCH_BYTES_MAX, DocSource};
