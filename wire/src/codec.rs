//! Whole messages: `decode` turns one frame into a `Message`, the `encode_*` functions build
//! frames, and `FrameReader` cuts frames off a `BytesMut` read buffer. OP_COMPRESSED is undone
//! here by rebuilding the original frame (header with the original opcode and length, then the
//! decompressed bytes) and decoding that, so an OP_MSG checksum inside a compressed message
//! covers the same bytes as it would uncompressed.

use bytes::{Bytes, BytesMut};

use crate::compress::Compressor;
use crate::error::WireError;
use crate::header::{Header, OpCode, check_message_length, frame_length};
use crate::legacy::{self, OpQuery, OpReply};
use crate::limits::{
    CHECKSUM_SIZE, COMPRESSED_PAYLOAD_OFFSET, HEADER_SIZE, MESSAGE_LENGTH_OFFSET, MESSAGE_SIZE_MAX,
};
use crate::msg::{self, OpMsg, patch_i32};
use crate::reader::Reader;

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Msg(OpMsg),
    Query(OpQuery),
    Reply(OpReply),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The header of the (decompressed) message: for one that arrived in OP_COMPRESSED this is
    /// the original opcode and the uncompressed length, with the outer requestID/responseTo.
    pub header: Header,
    pub body: Body,
    /// Set when the message arrived inside OP_COMPRESSED; a server replies with the same one.
    pub compressor: Option<Compressor>,
}

impl Body {
    /// The opcode this body is carried under (before any compression).
    pub fn op_code(&self) -> OpCode {
        match self {
            Body::Msg(_) => OpCode::Msg,
            Body::Query(_) => OpCode::Query,
            Body::Reply(_) => OpCode::Reply,
        }
    }
}

/// Decode exactly one whole frame (as delimited by `frame_length`). The frame is copied once
/// so that the message can share it; `decode_shared` takes one already shared.
pub fn decode(frame: &[u8]) -> Result<Message, WireError> {
    decode_shared(Bytes::copy_from_slice(frame))
}

/// `decode` of a frame the message may keep: the documents of its sequences are slices of it
/// (a server's read buffer split off with `BytesMut::split_to(..).freeze()` costs no copy).
pub fn decode_shared(frame: Bytes) -> Result<Message, WireError> {
    let header = checked_header(&frame)?;
    match OpCode::from_i32(header.op_code) {
        Some(OpCode::Compressed) => decode_compressed(&frame, header),
        Some(_) => Ok(Message {
            header,
            body: decode_body(&frame, header.op_code)?,
            compressor: None,
        }),
        None => Err(WireError::UnknownOpCode(header.op_code)),
    }
}

fn checked_header(frame: &[u8]) -> Result<Header, WireError> {
    let header = Header::parse(frame).ok_or(WireError::MessageTooSmall {
        length_bytes: frame.len() as i64,
        min_bytes: HEADER_SIZE,
    })?;
    let declared_bytes = check_message_length(header.message_length.into())?;
    if declared_bytes != frame.len() {
        return Err(WireError::FrameLengthMismatch {
            declared_bytes,
            actual_bytes: frame.len(),
        });
    }
    Ok(header)
}

fn decode_body(frame: &Bytes, op_code: i32) -> Result<Body, WireError> {
    match OpCode::from_i32(op_code) {
        Some(OpCode::Msg) => Ok(Body::Msg(msg::decode(frame)?)),
        Some(OpCode::Query) => Ok(Body::Query(legacy::decode_query(frame)?)),
        Some(OpCode::Reply) => Ok(Body::Reply(legacy::decode_reply(frame)?)),
        Some(_) => Err(WireError::UnsupportedOpCode(op_code)),
        None => Err(WireError::UnknownOpCode(op_code)),
    }
}

fn decode_compressed(frame: &[u8], outer: Header) -> Result<Message, WireError> {
    let mut reader = Reader::new(frame);
    reader.take(HEADER_SIZE, "header")?;
    let original = reader.i32("OP_COMPRESSED originalOpcode")?;
    let declared = reader.i32("OP_COMPRESSED uncompressedSize")?;
    let compressor_id = reader.u8("OP_COMPRESSED compressorId")?;
    if !matches!(
        OpCode::from_i32(original),
        Some(OpCode::Msg | OpCode::Query | OpCode::Reply)
    ) {
        return Err(WireError::CompressedOpCode(original));
    }
    let payload_max = MESSAGE_SIZE_MAX - HEADER_SIZE;
    let payload_len = usize::try_from(declared)
        .ok()
        .filter(|&len| len <= payload_max)
        .ok_or(WireError::UncompressedSizeInvalid {
            size_bytes: declared.into(),
            max_bytes: payload_max,
        })?;
    let compressor =
        Compressor::from_id(compressor_id).ok_or(WireError::UnknownCompressor(compressor_id))?;
    let payload =
        compressor.decompress(reader.take(reader.remaining(), "payload")?, payload_len)?;
    let header = Header {
        message_length: i32::try_from(HEADER_SIZE + payload_len).unwrap_or(i32::MAX),
        request_id: outer.request_id,
        response_to: outer.response_to,
        op_code: original,
    };
    let mut inner = Vec::with_capacity(HEADER_SIZE + payload_len);
    inner.extend_from_slice(&header.to_bytes());
    inner.extend_from_slice(&payload);
    let inner = Bytes::from(inner);
    Ok(Message {
        header,
        body: decode_body(&inner, original)?,
        compressor: Some(compressor),
    })
}

/// Encode an OP_MSG. A checksum is appended when `msg.flags` has `FLAG_CHECKSUM_PRESENT`.
pub fn encode_msg(
    request_id: i32,
    response_to: i32,
    msg: &OpMsg,
    compressor: Option<Compressor>,
) -> Result<Vec<u8>, WireError> {
    let mut out = start_frame(request_id, response_to, OpCode::Msg);
    msg::encode_payload(&mut out, msg);
    finish_msg_frame(out, msg.checksum_present(), compressor)
}

pub fn encode_reply(
    request_id: i32,
    response_to: i32,
    reply: &OpReply,
    compressor: Option<Compressor>,
) -> Result<Vec<u8>, WireError> {
    let mut out = start_frame(request_id, response_to, OpCode::Reply);
    legacy::encode_reply_payload(&mut out, reply);
    finish_frame(out, compressor)
}

pub fn encode_query(
    request_id: i32,
    response_to: i32,
    query: &OpQuery,
    compressor: Option<Compressor>,
) -> Result<Vec<u8>, WireError> {
    let mut out = start_frame(request_id, response_to, OpCode::Query);
    legacy::encode_query_payload(&mut out, query);
    finish_frame(out, compressor)
}

/// A buffer holding a header whose length is patched by `finish_frame`.
pub(crate) fn start_frame(request_id: i32, response_to: i32, op_code: OpCode) -> Vec<u8> {
    let header = Header {
        message_length: 0,
        request_id,
        response_to,
        op_code: op_code.as_i32(),
    };
    header.to_bytes().to_vec()
}

/// Finish an OP_MSG frame: append the CRC-32C if asked, then length and compression.
pub(crate) fn finish_msg_frame(
    mut out: Vec<u8>,
    checksum: bool,
    compressor: Option<Compressor>,
) -> Result<Vec<u8>, WireError> {
    if checksum {
        let total = out.len() + CHECKSUM_SIZE;
        patch_i32(&mut out, MESSAGE_LENGTH_OFFSET, total);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
    }
    finish_frame(out, compressor)
}

/// Patch the length, refuse frames over the limit, and optionally wrap in OP_COMPRESSED.
pub(crate) fn finish_frame(
    mut out: Vec<u8>,
    compressor: Option<Compressor>,
) -> Result<Vec<u8>, WireError> {
    check_message_length(out.len() as i64)?;
    let total = out.len();
    patch_i32(&mut out, MESSAGE_LENGTH_OFFSET, total);
    match compressor {
        Some(compressor) => compress_frame(&out, compressor),
        None => Ok(out),
    }
}

/// Wrap an encoded frame in OP_COMPRESSED, keeping its requestID, responseTo and opcode.
pub fn compress_frame(frame: &[u8], compressor: Compressor) -> Result<Vec<u8>, WireError> {
    let header = checked_header(frame)?;
    let payload = &frame[HEADER_SIZE..];
    let compressed = compressor.compress(payload)?;
    let mut out = start_frame(header.request_id, header.response_to, OpCode::Compressed);
    out.reserve(COMPRESSED_PAYLOAD_OFFSET - HEADER_SIZE + compressed.len());
    out.extend_from_slice(&header.op_code.to_le_bytes());
    out.extend_from_slice(&(payload.len() as i32).to_le_bytes());
    out.push(compressor.id());
    out.extend_from_slice(&compressed);
    check_message_length(out.len() as i64)?;
    let total = out.len();
    patch_i32(&mut out, MESSAGE_LENGTH_OFFSET, total);
    Ok(out)
}

/// Split one whole frame off the front of `buf`, or `Ok(None)` if it is not all there yet.
pub fn next_frame(buf: &mut BytesMut) -> Result<Option<Bytes>, WireError> {
    Ok(frame_length(buf)?.map(|len| buf.split_to(len).freeze()))
}

/// Owns a connection's read buffer and yields whole frames/messages from it. "Not enough
/// bytes yet" is `Ok(None)`; the caller reads more into `buffer_mut()` and asks again.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: BytesMut,
}

impl FrameReader {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity_bytes: usize) -> Self {
        FrameReader {
            buf: BytesMut::with_capacity(capacity_bytes),
        }
    }

    /// The buffer to read socket bytes into (e.g. `AsyncReadExt::read_buf`).
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet returned as a frame.
    pub fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    /// How many more bytes the frame at the front needs (0 if one is complete). Useful to
    /// `reserve` exactly once the length is known; never more than `MESSAGE_SIZE_MAX`.
    pub fn bytes_needed(&self) -> Result<usize, WireError> {
        let declared = match self.buf.get(..crate::limits::I32_SIZE) {
            Some(bytes) => {
                let mut len = [0u8; crate::limits::I32_SIZE];
                len.copy_from_slice(bytes);
                check_message_length(i32::from_le_bytes(len).into())?
            }
            None => HEADER_SIZE,
        };
        Ok(declared.saturating_sub(self.buf.len()))
    }

    pub fn next_frame(&mut self) -> Result<Option<Bytes>, WireError> {
        next_frame(&mut self.buf)
    }

    pub fn next_message(&mut self) -> Result<Option<Message>, WireError> {
        self.next_frame()?.map(decode_shared).transpose()
    }
}
