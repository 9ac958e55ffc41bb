//! The MongoDB wire protocol: message headers, OP_MSG, OP_QUERY/OP_REPLY (legacy handshake only)
//! and OP_COMPRESSED. Bytes in, messages out, and back. This crate knows nothing of sockets or
//! databases; every length a peer declares is checked against [`limits`] before anything is
//! allocated for it, and every malformed input is a [`WireError`], never a panic.
//!
//! # Reading
//! [`frame_length`] looks at the first four bytes of a buffer and says "need more",
//! "a frame of N bytes is there" or "impossible length" (below 16 or above
//! [`limits::MESSAGE_SIZE_MAX`]). [`FrameReader`] wraps that around a `BytesMut`. [`decode`]
//! turns one whole frame into a [`Message`] ([`decode_shared`] of a `bytes::Bytes` frame keeps
//! the document sequences as slices of it, no copy); OP_COMPRESSED is undone on the way and remembered in
//! [`Message::compressor`]. Every document is walked once (see [`validate_document`]) so that
//! later raw reads of it through the `bson` crate cannot fail on structure.
//!
//! # Writing
//! [`encode_msg`], [`encode_reply`], [`encode_query`] build frames from owned messages.
//! [`MsgWriter`] builds an OP_MSG reply in place, appending stored documents as raw bytes,
//! with no intermediate `RawDocumentBuf` and no copy beyond the one into the frame.
//!
//! # Byte layouts (all integers little-endian)
//!
//! Standard header, at the start of every message:
//!
//! | offset | size | field         | notes                                              |
//! |-------:|-----:|---------------|----------------------------------------------------|
//! | 0      | 4    | messageLength | i32, whole message incl. header; 16..=48_000_000   |
//! | 4      | 4    | requestID     | i32, chosen by the sender                          |
//! | 8      | 4    | responseTo    | i32, requestID being answered (0 in requests)      |
//! | 12     | 4    | opCode        | i32: 1 REPLY, 2004 QUERY, 2012 COMPRESSED, 2013 MSG|
//!
//! OP_MSG (2013):
//!
//! | offset | size | field    | notes                                                        |
//! |-------:|-----:|----------|--------------------------------------------------------------|
//! | 16     | 4    | flagBits | u32: bit 0 checksumPresent, bit 1 moreToCome, bit 16 exhaustAllowed; other bits 0-15 must be 0 |
//! | 20     | ..   | sections | one or more, up to the checksum (or the end)                 |
//! | len-4  | 4    | checksum | u32 CRC-32C of bytes 0..len-4; only if bit 0 is set          |
//!
//! A section is one kind byte and its payload:
//!
//! | kind | payload                                                                              |
//! |-----:|--------------------------------------------------------------------------------------|
//! | 0    | one BSON document: the body. Exactly one kind-0 section per message.                 |
//! | 1    | i32 size (counting these 4 bytes), cstring identifier, BSON documents filling exactly `size`. At most 2, identifiers distinct and not already a (dotted) field of the body. |
//!
//! OP_QUERY (2004), accepted only for the legacy handshake:
//!
//! | offset | size | field                | notes                                       |
//! |-------:|-----:|----------------------|---------------------------------------------|
//! | 16     | 4    | flags                | i32 bit set (tailable, slaveOk, ...)        |
//! | 20     | n    | fullCollectionName   | cstring `"db.collection"` (`"admin.$cmd"`)  |
//! | 20+n   | 4    | numberToSkip         | i32                                         |
//! | 24+n   | 4    | numberToReturn       | i32                                         |
//! | 28+n   | m    | query                | BSON document                               |
//! | 28+n+m | ..   | returnFieldsSelector | optional BSON document; nothing may follow  |
//!
//! OP_REPLY (1):
//!
//! | offset | size | field          | notes                                             |
//! |-------:|-----:|----------------|---------------------------------------------------|
//! | 16     | 4    | responseFlags  | i32 bit set (cursorNotFound, queryFailure, ...)   |
//! | 20     | 8    | cursorID       | i64                                               |
//! | 28     | 4    | startingFrom   | i32                                               |
//! | 32     | 4    | numberReturned | i32, must equal the number of documents           |
//! | 36     | ..   | documents      | BSON documents filling the rest exactly           |
//!
//! OP_COMPRESSED (2012): the original message minus its header, compressed.
//!
//! | offset | size | field            | notes                                            |
//! |-------:|-----:|------------------|--------------------------------------------------|
//! | 16     | 4    | originalOpcode   | i32: 2013, 2004 or 1 (never 2012)                |
//! | 20     | 4    | uncompressedSize | i32, original length minus the 16-byte header    |
//! | 24     | 1    | compressorId     | u8: 0 noop, 1 snappy (raw block), 2 zlib, 3 zstd |
//! | 25     | ..   | compressed bytes | the original message from offset 16 on           |
//!
//! The decoder rebuilds the original frame as: header (length = 16 + uncompressedSize, the
//! outer requestID and responseTo, opCode = originalOpcode) followed by the decompressed bytes,
//! then decodes that; an OP_MSG checksum therefore covers the rebuilt uncompressed frame.
//! Decompression never produces (or allocates) more than `uncompressedSize` + 1 bytes, and the
//! output must be exactly `uncompressedSize` long.
//!
//! BSON documents inside messages: i32 length (5..=16 MiB + 16 KiB), elements, a zero byte;
//! fully walked on decode (types known, lengths nested correctly, strings/keys UTF-8, booleans
//! 0/1, nesting at most [`limits::BSON_NESTING_DEPTH_MAX`]).
//!
//! # Allocation bounds
//! Nothing is reserved from a declared length before that length is checked: frames against
//! `MESSAGE_SIZE_MAX` from their first four bytes, documents against
//! `BSON_OBJECT_SIZE_INTERNAL_MAX` and the bytes actually present, uncompressedSize against
//! `MESSAGE_SIZE_MAX - 16`. Decompressed output grows with the bytes really produced; a snappy
//! stream must be able to encode what it states (`SNAPPY_EXPANSION_MAX`), and a zstd frame's
//! stated content size must equal uncompressedSize (its window is capped otherwise).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod bson_check;
mod codec;
mod compress;
mod error;
mod header;
mod legacy;
pub mod limits;
mod msg;
mod reader;
mod writer;

pub use codec::{
    Body, FrameReader, Message, compress_frame, decode, decode_shared, encode_msg, encode_query,
    encode_reply, next_frame,
};
pub use compress::Compressor;
pub use error::WireError;
pub use header::{Header, OpCode, check_message_length, frame_length};
pub use legacy::{
    OpQuery, OpReply, REPLY_FLAG_AWAIT_CAPABLE, REPLY_FLAG_CURSOR_NOT_FOUND,
    REPLY_FLAG_QUERY_FAILURE,
};
pub use msg::{
    DocumentSequence, FLAG_CHECKSUM_PRESENT, FLAG_EXHAUST_ALLOWED, FLAG_MORE_TO_COME,
    FLAGS_REQUIRED_KNOWN, FLAGS_REQUIRED_MASK, OpMsg, SECTION_KIND_BODY, SECTION_KIND_SEQUENCE,
    SharedDocument,
};
pub use writer::{DocWriter, MsgWriter};

/// Check that `bytes` is exactly one well-formed BSON document (the same walk `decode` does).
pub fn validate_document(bytes: &[u8]) -> Result<(), WireError> {
    bson_check::validate(bytes, "document")
}
