//! mongod's numeric error codes used by the pipeline, named once. Many are "Location" codes
//! that `crate::error::ErrorCode` may not list yet: [`perr`] maps a number to its table row
//! when one exists and otherwise falls back to BadValue, keeping mongod's number in the
//! message so that adding the row later is all it takes. [`ALL`] lists every number used.

use crate::error::{CommandError, ErrorCode, err};

pub const FAILED_TO_PARSE: i32 = 9;
pub const TYPE_MISMATCH: i32 = 14;
pub const INVALID_NAMESPACE: i32 = 73;
pub const MAX_SUB_PIPELINE_DEPTH: i32 = 2;
pub const MEMORY_NO_DISK_USE: i32 = 292;
pub const PIPELINE_TOO_LONG: i32 = 7749501;
pub const STAGE_ONE_FIELD: i32 = 40323;
pub const UNRECOGNIZED_STAGE: i32 = 40324;
pub const STAGE_NOT_LAST: i32 = 40601;
pub const DOCUMENTS_NOT_FIRST: i32 = 40602;
pub const MATCH_NOT_OBJECT: i32 = 15959;
pub const PROJECT_NOT_OBJECT: i32 = 15969;
pub const PROJECT_EMPTY: i32 = 51272;
pub const PROJECT_EXCLUSION_IN_INCLUSION: i32 = 31254;
pub const PROJECT_INCLUSION_IN_EXCLUSION: i32 = 31253;
pub const PROJECT_PATH_COLLISION: i32 = 31250;
pub const FIELD_PATH_DOLLAR: i32 = 16410;
pub const FIELD_PATH_EMPTY: i32 = 15998;
pub const ADD_FIELDS_NOT_OBJECT: i32 = 40272;
pub const UNSET_NOT_STRING: i32 = 31120;
pub const UNSET_EMPTY: i32 = 31119;
pub const GROUP_NOT_OBJECT: i32 = 15947;
pub const GROUP_NO_ID: i32 = 15955;
pub const GROUP_ONE_ACCUMULATOR: i32 = 40238;
pub const GROUP_FIELD_DOT: i32 = 40235;
pub const GROUP_FIELD_DOLLAR: i32 = 40236;
pub const GROUP_UNKNOWN_OPERATOR: i32 = 15952;
pub const ACCUMULATOR_ARRAY_ARG: i32 = 40237;
pub const SORT_NOT_OBJECT: i32 = 15973;
pub const SORT_EMPTY: i32 = 15976;
pub const SORT_BAD_ORDER: i32 = 15975;
pub const SORT_BAD_KEY: i32 = 15974;
pub const LIMIT_NOT_NUMBER: i32 = 15957;
pub const LIMIT_NOT_POSITIVE: i32 = 15958;
pub const SKIP_NOT_NUMBER: i32 = 15972;
pub const SKIP_NEGATIVE: i32 = 15956;
pub const UNWIND_BAD_SPEC: i32 = 15981;
pub const UNWIND_NO_PATH: i32 = 28812;
pub const UNWIND_PATH_DOLLAR: i32 = 28818;
pub const UNWIND_UNKNOWN_OPTION: i32 = 28811;
pub const UNWIND_INDEX_DOLLAR: i32 = 28822;
pub const UNWIND_INDEX_NOT_STRING: i32 = 28810;
pub const UNWIND_PRESERVE_NOT_BOOL: i32 = 28809;
pub const COUNT_NOT_STRING: i32 = 40156;
pub const COUNT_EMPTY: i32 = 40157;
pub const COUNT_DOLLAR: i32 = 40158;
pub const COUNT_DOT: i32 = 40160;
pub const SORT_BY_COUNT_BAD: i32 = 40148;
pub const REPLACE_ROOT_NOT_OBJECT: i32 = 40228;
pub const REPLACE_ROOT_MISSING: i32 = 40231;
pub const UNKNOWN_FIELD: i32 = 40415;
pub const MISSING_FIELD: i32 = 40414;
pub const SAMPLE_NOT_NUMBER: i32 = 28746;
pub const SAMPLE_NEGATIVE: i32 = 28747;
pub const SAMPLE_UNKNOWN_OPTION: i32 = 28748;
pub const SAMPLE_NO_SIZE: i32 = 28749;
pub const SAMPLE_NOT_OBJECT: i32 = 28745;
pub const LOOKUP_OUT_IN_PIPELINE: i32 = 51047;
pub const FACET_NOT_OBJECT: i32 = 15947;
pub const FACET_EMPTY: i32 = 40169;
pub const FACET_NOT_ARRAY: i32 = 40170;
pub const FACET_STAGE_NOT_ALLOWED: i32 = 40600;
pub const MERGE_OBJECTS_NOT_OBJECT: i32 = 40400;
pub const BUCKET_NOT_OBJECT: i32 = 40201;
pub const BUCKET_UNKNOWN_FIELD: i32 = 40197;
pub const BUCKET_MISSING: i32 = 40198;
pub const BUCKET_GROUP_BY: i32 = 40202;
pub const BUCKET_BOUNDARIES_COUNT: i32 = 40192;
pub const BUCKET_BOUNDARIES_TYPE: i32 = 40193;
pub const BUCKET_BOUNDARIES_ORDER: i32 = 40194;
pub const BUCKET_DEFAULT_RANGE: i32 = 40199;
pub const BUCKET_OUTPUT_NOT_OBJECT: i32 = 40196;
pub const BUCKET_NO_MATCH: i32 = 40066;
pub const BUCKET_AUTO_NOT_OBJECT: i32 = 40240;
pub const BUCKET_AUTO_UNKNOWN_FIELD: i32 = 40245;
pub const BUCKET_AUTO_BUCKETS: i32 = 40243;
pub const BUCKET_AUTO_MISSING: i32 = 40246;
pub const BUCKET_AUTO_GROUP_BY: i32 = 40239;
pub const N_NOT_INTEGRAL: i32 = 5787902;
pub const N_NOT_POSITIVE: i32 = 5787908;
pub const N_MISSING: i32 = 5787906;
pub const N_UNKNOWN_FIELD: i32 = 5787901;
pub const TOP_SORT_MISSING: i32 = 5788005;
pub const REDACT_BAD_RESULT: i32 = 17053;
pub const GRAPH_LOOKUP_MISSING: i32 = 40105;
pub const GRAPH_LOOKUP_DEPTH: i32 = 40101;
pub const WINDOW_BAD_SPEC: i32 = 5371602;
pub const DOCUMENTS_BAD: i32 = 5858203;
pub const MERGE_ON_MISSING: i32 = 51132;
pub const MERGE_FAIL_MATCHED: i32 = 11000;
pub const MERGE_FAIL_NOT_MATCHED: i32 = 13113;
pub const MERGE_NEW_ID: i32 = 66;
pub const LOOKUP_TOO_LARGE: i32 = 4568;
pub const FACET_TOO_LARGE: i32 = 4031700;

/// Every code above, for the lead to check against `crate::error::ErrorCode`.
pub const ALL: &[i32] = &[
    FAILED_TO_PARSE,
    TYPE_MISMATCH,
    INVALID_NAMESPACE,
    MEMORY_NO_DISK_USE,
    PIPELINE_TOO_LONG,
    STAGE_ONE_FIELD,
    UNRECOGNIZED_STAGE,
    STAGE_NOT_LAST,
    DOCUMENTS_NOT_FIRST,
    MATCH_NOT_OBJECT,
    PROJECT_NOT_OBJECT,
    PROJECT_EMPTY,
    PROJECT_EXCLUSION_IN_INCLUSION,
    PROJECT_INCLUSION_IN_EXCLUSION,
    PROJECT_PATH_COLLISION,
    FIELD_PATH_DOLLAR,
    FIELD_PATH_EMPTY,
    ADD_FIELDS_NOT_OBJECT,
    UNSET_NOT_STRING,
    UNSET_EMPTY,
    GROUP_NOT_OBJECT,
    GROUP_NO_ID,
    GROUP_ONE_ACCUMULATOR,
    GROUP_FIELD_DOT,
    GROUP_FIELD_DOLLAR,
    GROUP_UNKNOWN_OPERATOR,
    ACCUMULATOR_ARRAY_ARG,
    SORT_NOT_OBJECT,
    SORT_EMPTY,
    SORT_BAD_ORDER,
    SORT_BAD_KEY,
    LIMIT_NOT_NUMBER,
    LIMIT_NOT_POSITIVE,
    SKIP_NOT_NUMBER,
    SKIP_NEGATIVE,
    UNWIND_BAD_SPEC,
    UNWIND_NO_PATH,
    UNWIND_PATH_DOLLAR,
    UNWIND_UNKNOWN_OPTION,
    UNWIND_INDEX_DOLLAR,
    UNWIND_INDEX_NOT_STRING,
    UNWIND_PRESERVE_NOT_BOOL,
    COUNT_NOT_STRING,
    COUNT_EMPTY,
    COUNT_DOLLAR,
    COUNT_DOT,
    SORT_BY_COUNT_BAD,
    REPLACE_ROOT_NOT_OBJECT,
    REPLACE_ROOT_MISSING,
    UNKNOWN_FIELD,
    MISSING_FIELD,
    SAMPLE_NOT_NUMBER,
    SAMPLE_NEGATIVE,
    SAMPLE_UNKNOWN_OPTION,
    SAMPLE_NO_SIZE,
    SAMPLE_NOT_OBJECT,
    LOOKUP_OUT_IN_PIPELINE,
    FACET_EMPTY,
    FACET_NOT_ARRAY,
    FACET_STAGE_NOT_ALLOWED,
    MERGE_OBJECTS_NOT_OBJECT,
    BUCKET_NOT_OBJECT,
    BUCKET_UNKNOWN_FIELD,
    BUCKET_MISSING,
    BUCKET_GROUP_BY,
    BUCKET_BOUNDARIES_COUNT,
    BUCKET_BOUNDARIES_TYPE,
    BUCKET_BOUNDARIES_ORDER,
    BUCKET_DEFAULT_RANGE,
    BUCKET_OUTPUT_NOT_OBJECT,
    BUCKET_NO_MATCH,
    BUCKET_AUTO_NOT_OBJECT,
    BUCKET_AUTO_UNKNOWN_FIELD,
    BUCKET_AUTO_BUCKETS,
    BUCKET_AUTO_MISSING,
    BUCKET_AUTO_GROUP_BY,
    N_NOT_INTEGRAL,
    N_NOT_POSITIVE,
    N_MISSING,
    N_UNKNOWN_FIELD,
    TOP_SORT_MISSING,
    REDACT_BAD_RESULT,
    GRAPH_LOOKUP_MISSING,
    GRAPH_LOOKUP_DEPTH,
    WINDOW_BAD_SPEC,
    DOCUMENTS_BAD,
    MERGE_ON_MISSING,
    MERGE_FAIL_MATCHED,
    MERGE_FAIL_NOT_MATCHED,
    MERGE_NEW_ID,
    LOOKUP_TOO_LARGE,
    FACET_TOO_LARGE,
];

/// An error with mongod's numeric `code` (see the module note on missing table rows).
pub fn perr(code: i32, message: impl Into<String>) -> CommandError {
    match ErrorCode::from_code(code) {
        Some(known) => err(known, message),
        None => {
            let message: String = message.into();
            err(
                ErrorCode::BadValue,
                format!("{message} (mongod code {code})"),
            )
        }
    }
}
