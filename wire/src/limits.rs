//! Every bound and fixed offset of the wire protocol, in one place. Offsets are chained from
//! the previous field so that a layout change is one edit; the relations between limits are
//! checked at compile time at the bottom of this file.

/// The largest whole message (header included) a peer may send or we will build; mongod's
/// `maxMessageSizeBytes`, reported by `hello`.
pub const MESSAGE_SIZE_MAX: usize = 48_000_000;
/// The largest BSON document a user may store; mongod's `maxBsonObjectSize`.
pub const BSON_OBJECT_SIZE_MAX: usize = 16 * 1024 * 1024;
/// The largest BSON document accepted inside a message. mongod allows 16 KiB of headroom over
/// `BSON_OBJECT_SIZE_MAX` so that a command wrapping a maximum-size document still fits.
pub const BSON_OBJECT_SIZE_INTERNAL_MAX: usize = BSON_OBJECT_SIZE_MAX + 16 * 1024;
/// The smallest BSON document: an i32 length and the terminating zero.
pub const BSON_DOCUMENT_SIZE_MIN: usize = 5;
/// Nesting depth (documents and arrays inside the top-level document) accepted on the wire;
/// mongod's default `maxBSONDepth`.
pub const BSON_NESTING_DEPTH_MAX: usize = 200;
/// Document sequences (kind-1 sections) accepted in one OP_MSG, as in mongod.
pub const SEQUENCE_COUNT_MAX: usize = 2;
/// The most documents `hello` advertises per write batch (`maxWriteBatchSize`).
pub const WRITE_BATCH_COUNT_MAX: usize = 100_000;

/// Size in bytes of the standard message header.
pub const HEADER_SIZE: usize = 16;
/// Header field offsets: messageLength, requestID, responseTo, opCode (all i32 LE).
pub const MESSAGE_LENGTH_OFFSET: usize = 0;
pub const REQUEST_ID_OFFSET: usize = MESSAGE_LENGTH_OFFSET + I32_SIZE;
pub const RESPONSE_TO_OFFSET: usize = REQUEST_ID_OFFSET + I32_SIZE;
pub const OP_CODE_OFFSET: usize = RESPONSE_TO_OFFSET + I32_SIZE;

pub const I32_SIZE: usize = 4;
pub const I64_SIZE: usize = 8;
pub const U8_SIZE: usize = 1;

/// OP_MSG: flagBits u32, then sections, then the optional CRC-32C.
pub const MSG_FLAGS_OFFSET: usize = HEADER_SIZE;
pub const MSG_SECTIONS_OFFSET: usize = MSG_FLAGS_OFFSET + I32_SIZE;
pub const CHECKSUM_SIZE: usize = 4;
/// An OP_MSG needs its flags and at least one kind-0 section (kind byte + empty document).
pub const MSG_SIZE_MIN: usize = MSG_SECTIONS_OFFSET + U8_SIZE + BSON_DOCUMENT_SIZE_MIN;

/// OP_COMPRESSED: originalOpcode i32, uncompressedSize i32, compressorId u8, payload.
pub const COMPRESSED_ORIGINAL_OP_CODE_OFFSET: usize = HEADER_SIZE;
pub const COMPRESSED_UNCOMPRESSED_SIZE_OFFSET: usize =
    COMPRESSED_ORIGINAL_OP_CODE_OFFSET + I32_SIZE;
pub const COMPRESSED_COMPRESSOR_ID_OFFSET: usize = COMPRESSED_UNCOMPRESSED_SIZE_OFFSET + I32_SIZE;
pub const COMPRESSED_PAYLOAD_OFFSET: usize = COMPRESSED_COMPRESSOR_ID_OFFSET + U8_SIZE;

/// OP_REPLY: responseFlags i32, cursorID i64, startingFrom i32, numberReturned i32, documents.
pub const REPLY_FLAGS_OFFSET: usize = HEADER_SIZE;
pub const REPLY_CURSOR_ID_OFFSET: usize = REPLY_FLAGS_OFFSET + I32_SIZE;
pub const REPLY_STARTING_FROM_OFFSET: usize = REPLY_CURSOR_ID_OFFSET + I64_SIZE;
pub const REPLY_NUMBER_RETURNED_OFFSET: usize = REPLY_STARTING_FROM_OFFSET + I32_SIZE;
pub const REPLY_DOCUMENTS_OFFSET: usize = REPLY_NUMBER_RETURNED_OFFSET + I32_SIZE;

/// OP_QUERY: flags i32, then the variable-length fields starting with the namespace cstring.
pub const QUERY_FLAGS_OFFSET: usize = HEADER_SIZE;
pub const QUERY_COLLECTION_NAME_OFFSET: usize = QUERY_FLAGS_OFFSET + I32_SIZE;

/// Initial capacity of a decompression buffer; it then grows by doubling, never past the
/// declared uncompressed size, so a small frame claiming a huge size costs nothing up front.
pub const DECOMPRESS_INITIAL_CAPACITY_BYTES: usize = 64 * 1024;

const _: () = assert!(BSON_OBJECT_SIZE_INTERNAL_MAX < MESSAGE_SIZE_MAX);
const _: () = assert!(MESSAGE_SIZE_MAX <= i32::MAX as usize);
const _: () = assert!(OP_CODE_OFFSET + I32_SIZE == HEADER_SIZE);
const _: () = assert!(MSG_SIZE_MIN > HEADER_SIZE);

/// The most a snappy block can expand: its densest element is a 3-byte copy of 64 bytes
/// (about 21x), so a raw stream claiming more than 32x its size plus a little is corrupt and is
/// refused before the output buffer is allocated.
pub const SNAPPY_EXPANSION_MAX: usize = 32;
pub const SNAPPY_EXPANSION_SLACK_BYTES: usize = 64;
/// Largest zstd window (log2 bytes) accepted from a frame that does not state its content
/// size. The decoder allocates its window from the frame header, so this caps what a hostile
/// header can make it reserve (32 MiB < MESSAGE_SIZE_MAX); default-level compressors use far
/// smaller windows.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 25;
/// The same for a frame that states its content size (checked equal to the declared size
/// first): zstd then sizes its buffer by the content, so any window up to the message limit
/// is safe, and one-shot compressors of a big batch use exactly such a window.
pub const ZSTD_WINDOW_LOG_SIZED_MAX: u32 = 26;

const _: () = assert!((1usize << ZSTD_WINDOW_LOG_MAX) < MESSAGE_SIZE_MAX);
