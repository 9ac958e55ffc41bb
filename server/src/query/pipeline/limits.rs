//! Bounds of the aggregation pipeline, each named once with its unit last.

/// Bytes a blocking stage (`$group`, `$sort`, `$bucketAuto`, `$setWindowFields`) may hold
/// before it must fail with QueryExceededMemoryLimitNoDiskUseAllowed (mongod's 100 MB default).
pub const BLOCKING_STAGE_MEMORY_BYTES_MAX: usize = 100 * 1024 * 1024;
/// Stages one pipeline (including nested sub-pipelines) may have (mongod's default is 1000).
pub const PIPELINE_STAGES_MAX: usize = 1000;
/// Nesting of sub-pipelines (`$lookup`, `$facet`, `$unionWith`) inside each other.
pub const PIPELINE_DEPTH_MAX: usize = 20;
/// Bytes one `$facet` output document or `$lookup` `as` array may reach (mongod: 16 MB + slack).
pub const OUTPUT_DOCUMENT_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Bytes one group's `$push` or `$addToSet` array may hold (mongod's
/// `internalQueryMaxPushBytes` and `internalQueryMaxAddToSetBytes`, 100 MiB each).
pub const PUSH_BYTES_MAX: usize = 100 * 1024 * 1024;
/// Elements `$push`/`$addToSet` and the N accumulators may hold per group before the group
/// counts against the memory bound alone (they are also charged by bytes).
pub const ACCUMULATOR_N_MAX: i64 = 1 << 30;
/// Rows `$densify` may generate for one input before it fails (mongod: 500 MB worth).
pub const DENSIFY_GENERATED_MAX: usize = 1_000_000;
/// Depth `$graphLookup` may search when no `maxDepth` is given.
pub const GRAPH_LOOKUP_DEPTH_MAX: usize = 10_000;
/// Fixed per-entry overhead charged in memory accounting (bytes).
pub const ENTRY_OVERHEAD_BYTES: usize = 64;
/// Calls a JavaScript accumulator (`$accumulator`, mapReduce's reduce) buffers per group before
/// it runs them in one script call (mongod batches its pending calls the same way).
pub const JS_BATCH_COUNT_MAX: usize = 1000;
/// Bytes of buffered arguments per group before the batch is run, whatever its count.
pub const JS_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
