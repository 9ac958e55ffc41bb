//! `WireError`: every way a peer's bytes can be wrong. Each malformed-input case is its own
//! variant so that tests (and logs) can tell them apart; none of them is ever a panic. A wire
//! error means the frame cannot be trusted, so the caller's policy is to close that connection.

use crate::compress::Compressor;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message length {length_bytes} is smaller than the {min_bytes}-byte minimum")]
    MessageTooSmall { length_bytes: i64, min_bytes: usize },
    #[error("message length {length_bytes} exceeds the maximum of {max_bytes} bytes")]
    MessageTooLarge { length_bytes: i64, max_bytes: usize },
    #[error("frame is {actual_bytes} bytes but its header declares {declared_bytes}")]
    FrameLengthMismatch {
        declared_bytes: usize,
        actual_bytes: usize,
    },
    #[error("unknown opCode {0}")]
    UnknownOpCode(i32),
    #[error("opCode {0} is a removed legacy operation")]
    UnsupportedOpCode(i32),
    #[error("{what} runs past the end of the message")]
    Truncated { what: &'static str },
    #[error("{count} unexpected bytes after {what}")]
    TrailingBytes { what: &'static str, count: usize },
    #[error("{what} is not a zero-terminated UTF-8 string")]
    InvalidCString { what: &'static str },
    #[error("invalid BSON in {what}: {reason}")]
    InvalidBson {
        what: &'static str,
        reason: &'static str,
    },
    #[error("BSON document of {size_bytes} bytes exceeds the maximum of {max_bytes}")]
    DocumentTooLarge { size_bytes: usize, max_bytes: usize },
    #[error("OP_MSG checksum mismatch: message says {declared:#010x}, bytes give {computed:#010x}")]
    Checksum { declared: u32, computed: u32 },
    #[error("OP_MSG has unknown required flag bits {0:#x}")]
    UnknownRequiredFlags(u32),
    #[error("OP_MSG section kind {0} is unknown")]
    UnknownSectionKind(u8),
    #[error("OP_MSG must have exactly one kind-0 (body) section, found {0}")]
    BodySectionCount(usize),
    #[error("OP_MSG section length {length_bytes} is invalid ({reason})")]
    SectionLength {
        length_bytes: i64,
        reason: &'static str,
    },
    #[error("OP_MSG repeats the document sequence {0:?}")]
    DuplicateSequence(String),
    #[error("OP_MSG has more than {count_max} document sequences")]
    TooManySequences { count_max: usize },
    #[error("OP_MSG body already has the field {0:?} named by a document sequence")]
    DuplicateBodyField(String),
    #[error("OP_REPLY numberReturned is {declared} but {found} documents follow")]
    ReplyCount { declared: i64, found: usize },
    #[error("unknown compressor id {0}")]
    UnknownCompressor(u8),
    #[error("OP_COMPRESSED wraps opCode {0}, which cannot be compressed")]
    CompressedOpCode(i32),
    #[error("declared uncompressed size {size_bytes} is invalid (max {max_bytes})")]
    UncompressedSizeInvalid { size_bytes: i64, max_bytes: usize },
    #[error("{compressor:?} output does not match the declared size {declared_bytes}")]
    DecompressedSizeMismatch {
        compressor: Compressor,
        declared_bytes: usize,
    },
    #[error("{compressor:?} payload is corrupt: {reason}")]
    Decompress {
        compressor: Compressor,
        reason: String,
    },
    #[error("{compressor:?} compression failed: {reason}")]
    Compress {
        compressor: Compressor,
        reason: String,
    },
}

impl WireError {
    /// mongod's error code and codeName for this failure, for the error reply a server sends
    /// when the connection survives (see `closes_connection`). Numeric-only mongod assertions
    /// are named `Location<code>` as mongod names them.
    pub fn mongod_code(&self) -> (i32, &'static str) {
        match self {
            Self::UnknownRequiredFlags(_) => (223, "IllegalOpMsgFlag"),
            Self::TooManySequences { .. } => (233, "TooManyDocumentSequences"),
            Self::Checksum { .. } => (288, "ChecksumMismatch"),
            Self::BodySectionCount(0) => (40587, "Location40587"),
            Self::BodySectionCount(_) => (40430, "Location40430"),
            Self::DuplicateSequence(_) => (40431, "Location40431"),
            Self::UnknownSectionKind(_) => (40432, "Location40432"),
            Self::DuplicateBodyField(_) => (40433, "Location40433"),
            Self::DocumentTooLarge { .. } => (10334, "BSONObjectTooLarge"),
            Self::InvalidBson { .. } => (22, "InvalidBSON"),
            _ => (9, "FailedToParse"),
        }
    }

    /// Whether mongod drops the connection for this failure instead of replying with an
    /// error: framing and compression damage (the stream can no longer be trusted) and the
    /// parse errors mongod classes as connection-fatal (illegal flags, too many sequences,
    /// checksum mismatch). The others are answered with `{ok: 0, code, errmsg}` to the
    /// frame's requestID, which `Header::parse` still yields.
    pub fn closes_connection(&self) -> bool {
        !matches!(
            self,
            Self::BodySectionCount(_)
                | Self::DuplicateSequence(_)
                | Self::UnknownSectionKind(_)
                | Self::DuplicateBodyField(_)
                | Self::DocumentTooLarge { .. }
                | Self::InvalidBson { .. }
        )
    }
}
