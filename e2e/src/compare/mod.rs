//! The compare and benchmark tools' library: differential correctness cases over a frozen corpus
//! of edge values, timed workloads on a generated user dataset, and the report (JSON, Markdown,
//! PNG), and the storage sweep through the server (`sweep`). The binaries `cairn-compare` and
//! `cairn-bench` are thin command lines over this.

pub mod cases;
pub mod corpus;
pub mod correctness;
pub mod dataset;
pub mod launch;
pub mod limits;
pub mod normalize;
pub mod parallel_ab;
pub mod ping;
pub mod plot;
pub mod png;
pub mod report;
pub mod scan_ratio;
pub mod side;
pub mod stats;
pub mod sweep;
pub mod table;
pub mod workloads;
