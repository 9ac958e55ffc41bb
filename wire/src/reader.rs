//! `Reader`: a bounds-checked cursor over one message's bytes. Every read names what it was
//! reading so that a short message becomes `WireError::Truncated { what }`; nothing here indexes
//! a slice without checking, so no input can make it panic.

use crate::bson_check;
use crate::error::WireError;
use crate::limits::{BSON_DOCUMENT_SIZE_MIN, BSON_OBJECT_SIZE_INTERNAL_MAX, I32_SIZE, I64_SIZE};

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self
            .pos
            .checked_add(len)
            .ok_or(WireError::Truncated { what })?;
        let bytes = self
            .buf
            .get(self.pos..end)
            .ok_or(WireError::Truncated { what })?;
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let bytes = self.take(N, what)?;
        bytes.try_into().map_err(|_| WireError::Truncated { what })
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.array::<I32_SIZE>(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array::<I32_SIZE>(what)?))
    }

    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, WireError> {
        Ok(i64::from_le_bytes(self.array::<I64_SIZE>(what)?))
    }

    /// A zero-terminated UTF-8 string; the terminator is consumed, not returned.
    pub(crate) fn cstring(&mut self, what: &'static str) -> Result<&'a str, WireError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let nul = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(WireError::InvalidCString { what })?;
        let text =
            std::str::from_utf8(&rest[..nul]).map_err(|_| WireError::InvalidCString { what })?;
        self.pos += nul + 1;
        Ok(text)
    }

    /// One whole BSON document: its declared length is checked against the bytes left and
    /// against the per-document limit before anything is copied, then the document is walked.
    pub(crate) fn document(&mut self, what: &'static str) -> Result<&'a [u8], WireError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let len_bytes: [u8; I32_SIZE] = rest
            .get(..I32_SIZE)
            .and_then(|b| b.try_into().ok())
            .ok_or(WireError::Truncated { what })?;
        let declared = i32::from_le_bytes(len_bytes);
        let len = usize::try_from(declared)
            .ok()
            .filter(|&len| len >= BSON_DOCUMENT_SIZE_MIN)
            .ok_or(WireError::InvalidBson {
                what,
                reason: "document length below 5",
            })?;
        if len > BSON_OBJECT_SIZE_INTERNAL_MAX {
            return Err(WireError::DocumentTooLarge {
                size_bytes: len,
                max_bytes: BSON_OBJECT_SIZE_INTERNAL_MAX,
            });
        }
        let bytes = self.take(len, what)?;
        bson_check::validate(bytes, what)?;
        Ok(bytes)
    }
}

/// Copy checked document bytes into an owned `RawDocumentBuf`.
pub(crate) fn owned_document(
    bytes: &[u8],
    what: &'static str,
) -> Result<bson::RawDocumentBuf, WireError> {
    bson::RawDocumentBuf::from_bytes(bytes.to_vec()).map_err(|_| WireError::InvalidBson {
        what,
        reason: "rejected by the bson crate",
    })
}
