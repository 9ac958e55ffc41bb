//! The one table of server error codes, and `CommandError`, the error every command handler
//! returns. A `CommandError` becomes exactly `{ok: 0.0, errmsg, code, codeName}` on the wire;
//! inside write replies it becomes `{index, code, errmsg}`. Codes and names follow mongod's
//! `error_codes.yml`; add a row here rather than writing a number anywhere else. `storage_error`
//! maps the storage engine's errors to these codes, once.

use bson::{Bson, Document, doc};
use std::fmt;
use storage::StorageError;

macro_rules! error_codes {
    ($($name:ident = $code:expr),* $(,)?) => {
        /// A mongod error code. The variant name is the `codeName` sent to clients.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $($name),* }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),*];

            pub fn code(self) -> i32 {
                match self { $(ErrorCode::$name => $code),* }
            }

            pub fn name(self) -> &'static str {
                match self { $(ErrorCode::$name => stringify!($name)),* }
            }

            pub fn from_code(code: i32) -> Option<ErrorCode> {
                match code { $($code => Some(ErrorCode::$name),)* _ => None }
            }
        }
    };
}

error_codes! {
    InternalError = 1,
    BadValue = 2,
    NoSuchKey = 4,
    GraphContainsCycle = 5,
    HostUnreachable = 6,
    HostNotFound = 7,
    UnknownError = 8,
    FailedToParse = 9,
    CannotMutateObject = 10,
    UserNotFound = 11,
    UnsupportedFormat = 12,
    Unauthorized = 13,
    TypeMismatch = 14,
    Overflow = 15,
    InvalidLength = 16,
    ProtocolError = 17,
    AuthenticationFailed = 18,
    IllegalOperation = 20,
    AlreadyInitialized = 23,
    EmptyArrayOperation = 21,
    InvalidBSON = 22,
    LockTimeout = 24,
    NamespaceNotFound = 26,
    IndexNotFound = 27,
    PathNotViable = 28,
    NonExistentPath = 29,
    InvalidPath = 30,
    RoleNotFound = 31,
    ConflictingUpdateOperators = 40,
    CursorNotFound = 43,
    NoMatchingDocument = 47,
    NamespaceExists = 48,
    MaxTimeMSExpired = 50,
    JSInterpreterFailure = 139,
    DollarPrefixedFieldName = 52,
    InvalidIdField = 53,
    NotSingleValueField = 54,
    InvalidDBRef = 55,
    EmptyFieldName = 56,
    DottedFieldName = 57,
    CommandNotFound = 59,
    ImmutableField = 66,
    CannotCreateIndex = 67,
    IndexAlreadyExists = 68,
    InvalidOptions = 72,
    NoReplicationEnabled = 76,
    InvalidNamespace = 73,
    IndexOptionsConflict = 85,
    IndexKeySpecsConflict = 86,
    CannotSplit = 87,
    NetworkTimeout = 89,
    OperationFailed = 96,
    InvalidReplicaSetConfig = 93,
    NotYetInitialized = 94,
    NewReplicaSetConfigurationIncompatible = 103,
    ChangeStreamFatalError = 280,
    ChangeStreamHistoryLost = 286,
    InvalidResumeToken = 260,
    WriteConcernFailed = 64,
    MultipleErrorsOccurred = 65,
    UnknownReplWriteConcern = 79,
    CannotBackfillArray = 108,
    ConflictingOperationInProgress = 117,
    WriteConflict = 112,
    SnapshotTooOld = 239,
    SnapshotUnavailable = 246,
    NotAReplicaSet = 123,
    NoSuchTransaction = 251,
    TransactionCommitted = 256,
    OperationNotSupportedInTransaction = 263,
    FailPointSetFailed = 266,
    TransactionExceededLifetimeLimitSeconds = 290,
    TransactionTooLargeForCache = 388,
    QueryRejectedBySettings = 411,
    CommandNotSupported = 115,
    NamespaceNotSharded = 118,
    InvalidSyncSource = 119,
    CommandFailed = 125,
    InvalidIndexSpecificationOption = 197,
    InvalidUUID = 207,
    QueryPlanKilled = 175,
    CappedPositionLost = 136,
    InvalidPipelineOperator = 168,
    ViewDepthLimitExceeded = 165,
    CommandNotSupportedOnView = 166,
    OptionNotSupportedOnView = 167,
    NoSuchSession = 206,
    TransactionTooOld = 225,
    TooManyLogicalSessions = 261,
    IncompleteTransactionHistory = 217,
    NotARetryableWriteCommand = 50768,
    DatabaseDropPending = 215,
    Interrupted = 11601,
    InterruptedAtShutdown = 11600,
    ShutdownInProgress = 91,
    NotWritablePrimary = 10107,
    DuplicateKey = 11000,
    NotPrimaryNoSecondaryOk = 13435,
    ExceededMemoryLimit = 146,
    BSONObjectTooLarge = 10334,
    NoQueryExecutionPlans = 291,
    QueryExceededMemoryLimitNoDiskUseAllowed = 292,
    ClientMetadataCannotBeMutated = 186,
    ClientMetadataMissingField = 183,
    ClientMetadataAppNameTooLarge = 187,
    CollectionUUIDMismatch = 361,
    IndexBuildAborted = 276,
    ClientDisconnect = 279,
    IndexBuildAlreadyInProgress = 285,
    CannotIndexParallelArrays = 171,
    Location16410 = 16410,
    Location16411 = 16411,
    Location16412 = 16412,
    Location15974 = 15974,
    Location15998 = 15998,
    Location16020 = 16020,
    Location17217 = 17217,
    Location28765 = 28765,
    Location50989 = 50989,
    Location17287 = 17287,
    Location31249 = 31249,
    Location31250 = 31250,
    Location31253 = 31253,
    Location31254 = 31254,
    Location40324 = 40324,
    Location40573 = 40573,
    Location40674 = 40674,
    Location51173 = 51173,
    Location51174 = 51174,
    Location51023 = 51023,
    // Scripting turned off (`--noscripting`): `$where`/mapReduce, `$function`/`$accumulator`.
    Location16395 = 16395,
    Location31264 = 31264,
    // `$accumulator` and mapReduce's `$_internalJsReduce` argument errors.
    Location4544702 = 4544702,
    Location4544703 = 4544703,
    Location4544704 = 4544704,
    Location4544705 = 4544705,
    Location4544706 = 4544706,
    Location4544707 = 4544707,
    Location4544708 = 4544708,
    Location4544709 = 4544709,
    Location4544710 = 4544710,
    Location4544711 = 4544711,
    Location4544712 = 4544712,
    Location31244 = 31244,
    Location31251 = 31251,
    Location31349 = 31349,
    // Aggregation stage argument errors (mongod's location codes).
    Location7749501 = 7749501,
    Location40323 = 40323,
    Location40601 = 40601,
    Location40602 = 40602,
    Location15959 = 15959,
    Location15969 = 15969,
    Location51272 = 51272,
    Location40272 = 40272,
    Location31120 = 31120,
    Location31119 = 31119,
    Location15947 = 15947,
    Location15955 = 15955,
    Location40238 = 40238,
    Location40235 = 40235,
    Location40236 = 40236,
    Location15952 = 15952,
    Location40237 = 40237,
    Location15973 = 15973,
    Location15976 = 15976,
    Location15975 = 15975,
    Location15957 = 15957,
    Location15958 = 15958,
    Location15972 = 15972,
    Location15956 = 15956,
    Location15981 = 15981,
    Location28812 = 28812,
    Location28818 = 28818,
    Location28811 = 28811,
    Location28822 = 28822,
    Location28810 = 28810,
    Location28809 = 28809,
    Location40156 = 40156,
    Location40157 = 40157,
    Location40158 = 40158,
    Location40160 = 40160,
    Location40148 = 40148,
    Location40228 = 40228,
    Location40231 = 40231,
    Location40414 = 40414,
    Location28746 = 28746,
    Location28747 = 28747,
    Location28748 = 28748,
    Location28749 = 28749,
    Location28745 = 28745,
    Location51047 = 51047,
    Location40169 = 40169,
    Location40170 = 40170,
    Location40600 = 40600,
    Location40400 = 40400,
    Location40201 = 40201,
    Location40197 = 40197,
    Location40198 = 40198,
    Location40202 = 40202,
    Location40192 = 40192,
    Location40193 = 40193,
    Location40194 = 40194,
    Location40199 = 40199,
    Location40196 = 40196,
    Location40066 = 40066,
    Location40240 = 40240,
    Location40245 = 40245,
    Location40243 = 40243,
    Location40246 = 40246,
    Location40239 = 40239,
    Location5787902 = 5787902,
    Location5787908 = 5787908,
    Location5787906 = 5787906,
    Location5787901 = 5787901,
    Location5788005 = 5788005,
    Location17053 = 17053,
    Location40105 = 40105,
    Location40101 = 40101,
    Location5371602 = 5371602,
    Location5858203 = 5858203,
    Location51132 = 51132,
    Location13113 = 13113,
    Location4568 = 4568,
    Location4031700 = 4031700,
    Location28808 = 28808,
    Location40353 = 40353,
    Location51270 = 51270,
    Location40177 = 40177,
    Location40234 = 40234,
    Location17262 = 17262,
    Location17313 = 17313,
    Location40218 = 40218,
    Location17307 = 17307,
    Location17308 = 17308,
    Location16675 = 16675,
    Location40203 = 40203,
    Location40204 = 40204,
    Location40205 = 40205,
    Location40206 = 40206,
    Location40149 = 40149,
    Location40171 = 40171,
    Location40172 = 40172,
    Location40200 = 40200,
    Location40241 = 40241,
    Location40242 = 40242,
    Location40244 = 40244,
    Location40229 = 40229,
    Location40319 = 40319,
    Location40320 = 40320,
    Location40321 = 40321,
    Location40571 = 40571,
    Location40415 = 40415,
    Location40413 = 40413,
    // Clustered collections (issue 19).
    Location5979700 = 5979700,
    Location5979702 = 5979702,
    Location5979703 = 5979703,
    Location5979704 = 5979704,
    Location5979800 = 5979800,
    Location6026500 = 6026500,
    Location6026501 = 6026501,
    Location6049200 = 6049200,
    Location6049201 = 6049201,
    Location6049204 = 6049204,
    Location6127800 = 6127800,
    Location6243700 = 6243700,
    OutOfDiskSpace = 14031,
    UnsupportedOpQueryCommand = 352,
    // Authentication and authorization (issue 16).
    InvalidRoleModification = 178,
    MechanismUnavailable = 334,
    Location51002 = 51002,
    Location51003 = 51003,
    Location40352 = 40352,
    Location51024 = 51024,
    Location51091 = 51091,
    Location51108 = 51108,
    Location15983 = 15983,
    Location16554 = 16554,
    Location16556 = 16556,
    Location16608 = 16608,
    Location16610 = 16610,
    Location16702 = 16702,
    Location51151 = 51151,
    Location17080 = 17080,
    Location17083 = 17083,
    Location17124 = 17124,
    Location17276 = 17276,
    Location40081 = 40081,
    Location31275 = 31275,
    Location31276 = 31276,
    Location51246 = 51246,
    Location28724 = 28724,
    // Array operators' own codes (mongod's expression evaluators).
    Location28689 = 28689,
    Location28690 = 28690,
    Location28691 = 28691,
    Location28725 = 28725,
    Location28726 = 28726,
    Location28727 = 28727,
    Location28728 = 28728,
    Location28729 = 28729,
    Location28664 = 28664,
    Location34435 = 34435,
    Location40090 = 40090,
    Location40096 = 40096,
    Location40097 = 40097,
    Location40386 = 40386,
    Location40390 = 40390,
    Location40391 = 40391,
    Location40392 = 40392,
    Location40393 = 40393,
    Location40394 = 40394,
    Location40395 = 40395,
    Location40396 = 40396,
    Location40397 = 40397,
    Location40398 = 40398,
    Location4940400 = 4940400,
    Location17040 = 17040,
    Location17041 = 17041,
    Location34443 = 34443,
    Location34444 = 34444,
    Location34445 = 34445,
    Location34446 = 34446,
    Location34447 = 34447,
    Location34448 = 34448,
    Location34449 = 34449,
    Location34460 = 34460,
    Location34461 = 34461,
    Location34462 = 34462,
    Location34463 = 34463,
    Location34464 = 34464,
    Location34465 = 34465,
    Location34466 = 34466,
    Location34467 = 34467,
    Location34468 = 34468,
    Location2942504 = 2942504,
    // String operators' own codes.
    Location16034 = 16034,
    Location16035 = 16035,
    Location50752 = 50752,
    Location28656 = 28656,
    Location28657 = 28657,
    Location34450 = 34450,
    Location34451 = 34451,
    Location34452 = 34452,
    Location34453 = 34453,
    Location34454 = 34454,
    Location34455 = 34455,
    Location34471 = 34471,
    Location34473 = 34473,
    Location40091 = 40091,
    Location40092 = 40092,
    Location50699 = 50699,
    Location50700 = 50700,
    Location51744 = 51744,
    Location51745 = 51745,
    Location51746 = 51746,
    Location4161105 = 4161105,
    Location3041704 = 3041704,
    Location51104 = 51104,
    Location51105 = 51105,
    Location51106 = 51106,
    Location51107 = 51107,
    Location51109 = 51109,
    Location51110 = 51110,
    Location51111 = 51111,
    Location40093 = 40093,
    Location40094 = 40094,
    Location40085 = 40085,
    Location40086 = 40086,
    Location40087 = 40087,
    // Named-argument operators' parse codes (query/expr/shapes.rs `named_codes`).
    Location40519 = 40519,
    Location40518 = 40518,
    Location40516 = 40516,
    Location40515 = 40515,
    Location40489 = 40489,
    Location40525 = 40525,
    Location40524 = 40524,
    Location40520 = 40520,
    Location40522 = 40522,
    Location40540 = 40540,
    Location40541 = 40541,
    Location40542 = 40542,
    Location18629 = 18629,
    Location18534 = 18534,
    Location18628 = 18628,
    Location50696 = 50696,
    Location50694 = 50694,
    Location50695 = 50695,
    Location51103 = 51103,
    Location31024 = 31024,
    Location31022 = 31022,
    Location31023 = 31023,
    Location51751 = 51751,
    Location51750 = 51750,
    Location51749 = 51749,
    Location51748 = 51748,
    Location51747 = 51747,
    Location2942500 = 2942500,
    Location2942501 = 2942501,
    Location2942502 = 2942502,
    Location2942503 = 2942503,
    Location2942505 = 2942505,
    Location2942506 = 2942506,
    Location2942507 = 2942507,
    Location50723 = 50723,
    Location4161100 = 4161100,
    Location4161101 = 4161101,
    Location4161102 = 4161102,
    Location4161103 = 4161103,
    Location4161109 = 4161109,
    Location4161106 = 4161106,
    Location4161107 = 4161107,
    Location4161108 = 4161108,
    Location3041701 = 3041701,
    Location3041702 = 3041702,
    Location5654602 = 5654602,
    Location17081 = 17081,
    Location17082 = 17082,
    Location5166400 = 5166400,
    Location5166401 = 5166401,
    Location5166402 = 5166402,
    Location5166301 = 5166301,
    Location5166302 = 5166302,
    Location5166303 = 5166303,
    Location5166304 = 5166304,
    Location5166305 = 5166305,
    Location5439007 = 5439007,
    Location5439008 = 5439008,
    Location5439009 = 5439009,
    Location5439010 = 5439010,
    // $top/$bottom family's argument documents (accumulatorNParseArgs).
    Location5788001 = 5788001,
    Location5788002 = 5788002,
    Location5788003 = 5788003,
    Location5788004 = 5788004,
    // $let, $map, $filter, $reduce and $switch argument documents.
    Location10065 = 10065,
    Location16874 = 16874,
    Location16875 = 16875,
    Location16876 = 16876,
    Location16877 = 16877,
    Location16878 = 16878,
    Location16879 = 16879,
    Location16880 = 16880,
    Location16882 = 16882,
    Location28646 = 28646,
    Location28647 = 28647,
    Location28648 = 28648,
    Location28650 = 28650,
    Location40075 = 40075,
    Location40076 = 40076,
    Location40077 = 40077,
    Location40078 = 40078,
    Location40079 = 40079,
    Location40060 = 40060,
    Location40061 = 40061,
    Location40062 = 40062,
    Location40063 = 40063,
    Location40064 = 40064,
    Location40065 = 40065,
    Location40067 = 40067,
    Location40068 = 40068,
    Location16883 = 16883,
    Location28651 = 28651,
    Location40080 = 40080,
    Location327391 = 327391,
    Location327392 = 327392,
    // $round and $trunc.
    Location51081 = 51081,
    Location51082 = 51082,
    Location51083 = 51083,
    // Date operators and time zones.
    ConversionFailure = 241,
    Location16006 = 16006,
    Location16007 = 16007,
    Location16872 = 16872,
    Location5166405 = 5166405,
    Location5166403 = 5166403,
    Location5166307 = 5166307,
    Location6045000 = 6045000,
    Location5439013 = 5439013,
    Location5439015 = 5439015,
    Location5439016 = 5439016,
    Location5439017 = 5439017,
    Location5439018 = 5439018,
    Location18533 = 18533,
    Location18535 = 18535,
    Location18536 = 18536,
    Location18537 = 18537,
    Location31034 = 31034,
    Location40485 = 40485,
    Location40517 = 40517,
    Location40521 = 40521,
    Location40523 = 40523,
    Location31095 = 31095,
    Location5976500 = 5976500,
    Location5439006 = 5439006,
    Location40535 = 40535,
    Location40539 = 40539,
    Location40684 = 40684,
    DocumentValidationFailure = 121,
    NotImplemented = 238,
    APIStrictError = 323,
    APIVersionError = 322,
    Location51300 = 51300,
    Location16764 = 16764,
    Location16755 = 16755,
    Location16804 = 16804,
    Location13027 = 13027,
    Location13028 = 13028,
    Location13067 = 13067,
    Location16766 = 16766,
    Location31303 = 31303,
    // The N-array, quantile, size and timestamp expressions and accumulators.
    Location5787801 = 5787801,
    Location5787900 = 5787900,
    Location5787903 = 5787903,
    Location5787907 = 5787907,
    Location5788200 = 5788200,
    Location7436100 = 7436100,
    Location7436200 = 7436200,
    Location7436201 = 7436201,
    Location7429703 = 7429703,
    Location7750300 = 7750300,
    Location7750301 = 7750301,
    Location7750302 = 7750302,
    Location7750303 = 7750303,
    Location31393 = 31393,
    Location51276 = 51276,
    Location5687301 = 5687301,
    Location5687302 = 5687302,
    // $convert's binData arguments (mongod 8.0).
    Location4341106 = 4341106,
    Location4341107 = 4341107,
    Location4341108 = 4341108,
    Location4341114 = 4341114,
    Location4341115 = 4341115,
    Location4341125 = 4341125,
    // $convert's `byteOrder` (mongod 8.1): not a string, not "little" or "big".
    Location9130001 = 9130001,
    Location9130002 = 9130002,
    // The math expressions' domain and type errors.
    Location28714 = 28714,
    Location28756 = 28756,
    Location28757 = 28757,
    Location28758 = 28758,
    Location28759 = 28759,
    Location28761 = 28761,
    Location28762 = 28762,
    Location28763 = 28763,
    Location28764 = 28764,
    Location28766 = 28766,
    Location8727502 = 8727502,
    Location7746604 = 7746604,
    Location7746606 = 7746606,
    Location8584900 = 8584900,
    Location8584901 = 8584901,
}

/// An error a command returns to its client.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandError {
    pub code: ErrorCode,
    pub message: String,
    /// Extra fields mongod adds to some errors (e.g. `keyPattern`/`keyValue` on duplicate keys).
    pub extra: Option<Document>,
}

impl CommandError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CommandError {
            code,
            message: message.into(),
            extra: None,
        }
    }

    pub fn with_extra(mut self, extra: Document) -> Self {
        self.extra = Some(extra);
        self
    }

    /// Adds `TransientTransactionError` to `errorLabels`: the whole transaction may be retried.
    pub fn transient(mut self) -> Self {
        let mut extra = self.extra.take().unwrap_or_default();
        extra.insert("errorLabels", vec!["TransientTransactionError"]);
        self.extra = Some(extra);
        self
    }

    /// Adds `UnknownTransactionCommitResult` to `errorLabels`: a commit whose outcome the
    /// client cannot know (it may have committed); the client retries the commit alone.
    pub fn unknown_commit_result(mut self) -> Self {
        let mut extra = self.extra.take().unwrap_or_default();
        extra.insert("errorLabels", vec!["UnknownTransactionCommitResult"]);
        self.extra = Some(extra);
        self
    }

    /// The whole `{ok: 0.0, errmsg, code, codeName}` reply document.
    pub fn to_reply(&self) -> Document {
        let mut reply = doc! {
            "ok": 0.0,
            "errmsg": self.message.clone(),
            "code": self.code.code(),
            "codeName": self.code.name(),
        };
        if let Some(extra) = &self.extra {
            for (k, v) in extra {
                reply.insert(k.clone(), v.clone());
            }
        }
        reply
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.name(),
            self.code.code(),
            self.message
        )
    }
}

impl std::error::Error for CommandError {}

/// Shorthand for building an error: `err(ErrorCode::BadValue, "...")`.
pub fn err(code: ErrorCode, message: impl Into<String>) -> CommandError {
    CommandError::new(code, message)
}

pub type CommandResult<T> = Result<T, CommandError>;

/// Format a key-value document as mongod prints it in E11000 messages: `{ a: 1, b: "x" }`.
pub fn dup_key_text(key_value: &Document) -> String {
    let parts: Vec<String> = key_value
        .iter()
        .map(|(k, v)| format!("{k}: {}", shell_value(v)))
        .collect();
    format!("{{ {} }}", parts.join(", "))
}

fn shell_value(v: &Bson) -> String {
    match v {
        Bson::String(s) => format!("\"{s}\""),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(f) if f.fract() == 0.0 && f.is_finite() => format!("{f:.1}"),
        other => other.to_string(),
    }
}

/// mongod's 11000 reply. For a collated index the errmsg names the collation and shows each
/// top-level string of the key (already hex from storage) as `0x<hex>`; the extra fields add
/// `hexEncoded` and `collation`, as mongod's DuplicateKeyErrorInfo does.
fn duplicate_key(
    db: &str,
    coll: &str,
    index: &str,
    key_pattern: Document,
    key_value: Document,
    collation: Option<&Document>,
) -> CommandError {
    let Some(collation) = collation else {
        return CommandError::new(
            ErrorCode::DuplicateKey,
            format!(
                "E11000 duplicate key error collection: {db}.{coll} index: {index} dup key: {}",
                dup_key_text(&key_value)
            ),
        )
        .with_extra(bson::doc! { "keyPattern": key_pattern, "keyValue": key_value });
    };
    let hex: Vec<bool> = key_value
        .values()
        .map(|v| matches!(v, Bson::String(_)))
        .collect();
    let shown: Document = key_value
        .iter()
        .map(|(k, v)| match v {
            Bson::String(h) => (k.clone(), Bson::String(format!("0x{h}"))),
            v => (k.clone(), v.clone()),
        })
        .collect();
    let mut extra = bson::doc! { "keyPattern": key_pattern, "keyValue": key_value };
    if hex.iter().any(|h| *h) {
        extra.insert("hexEncoded", hex);
    }
    extra.insert("collation", collation.clone());
    CommandError::new(
        ErrorCode::DuplicateKey,
        format!(
            "E11000 duplicate key error collection: {db}.{coll} index: {index} collation: {} dup key: {}",
            dup_key_text(collation),
            dup_key_text(&shown)
        ),
    )
    .with_extra(extra)
}

/// Map a storage error to the error mongod would send for it.
pub fn storage_error(e: StorageError, db: &str, coll: &str) -> CommandError {
    match e {
        StorageError::DuplicateKey {
            index,
            key_pattern,
            key_value,
            collation,
        } => duplicate_key(
            db,
            coll,
            &index,
            *key_pattern,
            *key_value,
            collation.as_deref(),
        ),
        StorageError::NamespaceExists(ns) => err(
            ErrorCode::NamespaceExists,
            format!("Collection {ns} already exists."),
        ),
        StorageError::NamespaceNotFound(ns) => {
            err(ErrorCode::NamespaceNotFound, format!("ns not found: {ns}"))
        }
        StorageError::InvalidNamespace(m) => err(ErrorCode::InvalidNamespace, m),
        StorageError::IndexNotFound(name) => err(
            ErrorCode::IndexNotFound,
            format!("index not found with name [{name}]"),
        ),
        StorageError::IndexExists(name) => err(
            ErrorCode::IndexAlreadyExists,
            format!("index {name} already exists"),
        ),
        StorageError::IndexKeyExists(name) => err(
            ErrorCode::IndexOptionsConflict,
            format!("Index already exists with a different name: {name}"),
        ),
        StorageError::InvalidIndex(m) => err(ErrorCode::CannotCreateIndex, m),
        StorageError::IndexBuildInProgress(name) => err(
            ErrorCode::IndexBuildAlreadyInProgress,
            format!("Index build already in progress: {name}"),
        ),
        StorageError::IndexBuildAborted(name) => err(
            ErrorCode::IndexBuildAborted,
            format!("Index build aborted: {name}"),
        ),
        StorageError::Key(k) => {
            let code = ErrorCode::from_code(k.code()).unwrap_or(ErrorCode::CannotCreateIndex);
            err(code, k.to_string())
        }
        StorageError::InvalidDocument(m) => err(ErrorCode::InvalidBSON, m),
        StorageError::LimitExceeded(m) => err(ErrorCode::BadValue, m),
        StorageError::WriteConflict(m) => err(ErrorCode::WriteConflict, m).transient(),
        StorageError::SnapshotTooOld(m) => err(ErrorCode::SnapshotTooOld, m),
        // mongod 7.0 gives this one no TransientTransactionError label: the same transaction
        // retried would fail the same way.
        StorageError::TransactionTooLarge(m) => err(ErrorCode::TransactionTooLargeForCache, m),
        // A full disk is mongod's OutOfDiskSpace; writes resume by themselves once it has room.
        e @ StorageError::LogUnavailable {
            out_of_space: true, ..
        } => err(ErrorCode::OutOfDiskSpace, e.to_string()),
        other => err(ErrorCode::InternalError, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert!(seen.insert(c.code()), "duplicate code {}", c.code());
            assert_eq!(ErrorCode::from_code(c.code()), Some(*c));
        }
    }

    #[test]
    fn reply_shape() {
        let r = err(ErrorCode::CommandNotFound, "no such command: 'x'").to_reply();
        assert_eq!(r.get_f64("ok").unwrap(), 0.0);
        assert_eq!(r.get_i32("code").unwrap(), 59);
        assert_eq!(r.get_str("codeName").unwrap(), "CommandNotFound");
        assert_eq!(
            r.keys().collect::<Vec<_>>(),
            ["ok", "errmsg", "code", "codeName"]
        );
    }

    #[test]
    fn dup_key_message() {
        assert_eq!(
            dup_key_text(&bson::doc! { "a": 1, "b": "x" }),
            "{ a: 1, b: \"x\" }"
        );
    }
}
