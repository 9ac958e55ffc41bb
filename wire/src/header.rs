//! The 16-byte message header, opcodes, and `frame_length`: the one function that decides how
//! many bytes make a frame. It looks only at the first four bytes and rejects an impossible
//! length before the caller reserves a single byte for the rest of the message.

use crate::error::WireError;
use crate::limits::{
    HEADER_SIZE, I32_SIZE, MESSAGE_LENGTH_OFFSET, MESSAGE_SIZE_MAX, OP_CODE_OFFSET,
    REQUEST_ID_OFFSET, RESPONSE_TO_OFFSET,
};

/// Every opcode mongod has ever defined. Only `Msg`, `Query`, `Reply` and `Compressed` are
/// decoded; the rest are recognised so that they can be reported as unsupported, not unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum OpCode {
    Reply = 1,
    Update = 2001,
    Insert = 2002,
    Reserved = 2003,
    Query = 2004,
    GetMore = 2005,
    Delete = 2006,
    KillCursors = 2007,
    Compressed = 2012,
    Msg = 2013,
}

impl OpCode {
    const ALL: [OpCode; 10] = [
        Self::Reply,
        Self::Update,
        Self::Insert,
        Self::Reserved,
        Self::Query,
        Self::GetMore,
        Self::Delete,
        Self::KillCursors,
        Self::Compressed,
        Self::Msg,
    ];

    pub fn from_i32(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|op| *op as i32 == code)
    }

    pub fn as_i32(self) -> i32 {
        self as i32
    }
}

/// The standard header, as read from (or written to) the first 16 bytes of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub message_length: i32,
    pub request_id: i32,
    pub response_to: i32,
    pub op_code: i32,
}

impl Header {
    /// Parse the header at the front of `buf`; `None` if fewer than 16 bytes are there.
    pub fn parse(buf: &[u8]) -> Option<Header> {
        let field = |offset: usize| -> Option<i32> {
            let bytes = buf.get(offset..offset + I32_SIZE)?;
            Some(i32::from_le_bytes(bytes.try_into().ok()?))
        };
        Some(Header {
            message_length: field(MESSAGE_LENGTH_OFFSET)?,
            request_id: field(REQUEST_ID_OFFSET)?,
            response_to: field(RESPONSE_TO_OFFSET)?,
            op_code: field(OP_CODE_OFFSET)?,
        })
    }

    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        let fields = [
            (MESSAGE_LENGTH_OFFSET, self.message_length),
            (REQUEST_ID_OFFSET, self.request_id),
            (RESPONSE_TO_OFFSET, self.response_to),
            (OP_CODE_OFFSET, self.op_code),
        ];
        for (offset, value) in fields {
            out[offset..offset + I32_SIZE].copy_from_slice(&value.to_le_bytes());
        }
        out
    }
}

/// Check a declared message length: at least a header, at most `MESSAGE_SIZE_MAX`.
pub fn check_message_length(length_bytes: i64) -> Result<usize, WireError> {
    if length_bytes < HEADER_SIZE as i64 {
        return Err(WireError::MessageTooSmall {
            length_bytes,
            min_bytes: HEADER_SIZE,
        });
    }
    match usize::try_from(length_bytes) {
        Ok(len) if len <= MESSAGE_SIZE_MAX => Ok(len),
        _ => Err(WireError::MessageTooLarge {
            length_bytes,
            max_bytes: MESSAGE_SIZE_MAX,
        }),
    }
}

/// Walk the bytes at the front of `buf` without allocating.
///
/// `Ok(None)`: more bytes are needed (a normal state while reading a socket).
/// `Ok(Some(len))`: a whole frame of `len` bytes is at the front of `buf`.
/// `Err`: the declared length is below 16 or above `MESSAGE_SIZE_MAX`; this is reported as
/// soon as the four length bytes are in, before the caller buffers the rest.
pub fn frame_length(buf: &[u8]) -> Result<Option<usize>, WireError> {
    let Some(len_bytes) = buf.get(MESSAGE_LENGTH_OFFSET..MESSAGE_LENGTH_OFFSET + I32_SIZE) else {
        return Ok(None);
    };
    let mut declared = [0u8; I32_SIZE];
    declared.copy_from_slice(len_bytes);
    let len = check_message_length(i64::from(i32::from_le_bytes(declared)))?;
    Ok((buf.len() >= len).then_some(len))
}
