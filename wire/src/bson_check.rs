//! A full structural walk of one BSON document, done once when a message is decoded, so that
//! everything later reading it (the `bson` crate's raw iterators, the server's handlers) meets
//! only well-formed bytes: every element's type is known, every length lies inside its parent,
//! every document and array ends with its zero byte exactly where its length says, keys and
//! strings are UTF-8, booleans are 0 or 1, nesting is at most `BSON_NESTING_DEPTH_MAX`.
//!
//! Because BSON nests documents inline, the walk is linear: a stack of the end offsets of the
//! open containers replaces recursion, so no input depth can exhaust the thread's stack.

use crate::error::WireError;
use crate::limits::{BSON_DOCUMENT_SIZE_MIN, BSON_NESTING_DEPTH_MAX, I32_SIZE, I64_SIZE};

const TYPE_DOUBLE: u8 = 0x01;
const TYPE_STRING: u8 = 0x02;
const TYPE_DOCUMENT: u8 = 0x03;
const TYPE_ARRAY: u8 = 0x04;
const TYPE_BINARY: u8 = 0x05;
const TYPE_UNDEFINED: u8 = 0x06;
const TYPE_OBJECT_ID: u8 = 0x07;
const TYPE_BOOLEAN: u8 = 0x08;
const TYPE_DATE_TIME: u8 = 0x09;
const TYPE_NULL: u8 = 0x0A;
const TYPE_REGEX: u8 = 0x0B;
const TYPE_DB_POINTER: u8 = 0x0C;
const TYPE_JAVASCRIPT: u8 = 0x0D;
const TYPE_SYMBOL: u8 = 0x0E;
const TYPE_JAVASCRIPT_WITH_SCOPE: u8 = 0x0F;
const TYPE_INT32: u8 = 0x10;
const TYPE_TIMESTAMP: u8 = 0x11;
const TYPE_INT64: u8 = 0x12;
const TYPE_DECIMAL128: u8 = 0x13;
const TYPE_MIN_KEY: u8 = 0xFF;
const TYPE_MAX_KEY: u8 = 0x7F;

const OBJECT_ID_SIZE: usize = 12;
const DECIMAL128_SIZE: usize = 16;
const BINARY_SUBTYPE_OLD: u8 = 0x02;
/// Typical documents nest a few levels; one allocation covers them.
const ENDS_INITIAL_CAPACITY: usize = 8;

/// Walk `doc` (exactly one document's bytes). `what` names the document in errors.
pub(crate) fn validate(doc: &[u8], what: &'static str) -> Result<(), WireError> {
    let mut walk = Walk {
        doc,
        what,
        pos: 0,
        ends: Vec::with_capacity(ENDS_INITIAL_CAPACITY),
    };
    walk.open_container()?;
    if walk.ends.first() != Some(&doc.len()) {
        return Err(walk.bad("document length does not match its bytes"));
    }
    while let Some(&end) = walk.ends.last() {
        // `end` is one past the container's zero byte.
        if walk.pos + 1 == end {
            if doc.get(walk.pos) != Some(&0) {
                return Err(walk.bad("container not zero-terminated"));
            }
            walk.pos = end;
            walk.ends.pop();
        } else if walk.pos + 1 > end {
            return Err(walk.bad("element runs past its container"));
        } else {
            walk.element(end - 1)?;
        }
    }
    Ok(())
}

/// Keys and most strings are short ASCII; checking that inline first is several times faster
/// than the general UTF-8 validator on such inputs.
fn is_utf8(bytes: &[u8]) -> bool {
    bytes.is_ascii() || std::str::from_utf8(bytes).is_ok()
}

struct Walk<'a> {
    doc: &'a [u8],
    what: &'static str,
    pos: usize,
    /// End offsets of the containers currently open, outermost first.
    ends: Vec<usize>,
}

impl Walk<'_> {
    fn bad(&self, reason: &'static str) -> WireError {
        WireError::InvalidBson {
            what: self.what,
            reason,
        }
    }

    fn i32_at(&self, pos: usize) -> Result<i32, WireError> {
        self.doc
            .get(pos..pos + I32_SIZE)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_le_bytes)
            .ok_or(self.bad("length runs past the document"))
    }

    /// Read a document/array length at `pos`, check it fits inside the enclosing container
    /// (or the whole buffer for the top level), and open it.
    fn open_container(&mut self) -> Result<(), WireError> {
        let len =
            usize::try_from(self.i32_at(self.pos)?).map_err(|_| self.bad("negative length"))?;
        if len < BSON_DOCUMENT_SIZE_MIN {
            return Err(self.bad("document length below 5"));
        }
        let limit = self.ends.last().map_or(self.doc.len(), |end| end - 1);
        let end = self.pos.checked_add(len).filter(|&e| e <= limit);
        let end = end.ok_or(self.bad("nested document runs past its parent"))?;
        // The top-level document is depth 0; each container inside it adds one.
        if self.ends.len() > BSON_NESTING_DEPTH_MAX {
            return Err(self.bad("nesting deeper than the maximum"));
        }
        self.ends.push(end);
        self.pos += I32_SIZE;
        Ok(())
    }

    /// A zero-terminated UTF-8 string ending before `limit`; returns its length with the zero.
    fn cstring(&self, pos: usize, limit: usize) -> Result<usize, WireError> {
        let bytes = self
            .doc
            .get(pos..limit)
            .ok_or(self.bad("string runs past its container"))?;
        let nul = bytes
            .iter()
            .position(|&b| b == 0)
            .ok_or(self.bad("unterminated cstring"))?;
        if !is_utf8(&bytes[..nul]) {
            return Err(self.bad("cstring is not UTF-8"));
        }
        Ok(nul + 1)
    }

    /// An i32-length-prefixed UTF-8 string; returns its total size including prefix and zero.
    fn string(&self, pos: usize, limit: usize) -> Result<usize, WireError> {
        let len =
            usize::try_from(self.i32_at(pos)?).map_err(|_| self.bad("negative string length"))?;
        let start = pos + I32_SIZE;
        let end = start.checked_add(len).filter(|&e| len >= 1 && e <= limit);
        let end = end.ok_or(self.bad("string length out of bounds"))?;
        if self.doc.get(end - 1) != Some(&0) {
            return Err(self.bad("string not zero-terminated"));
        }
        let text = self
            .doc
            .get(start..end - 1)
            .ok_or(self.bad("string out of bounds"))?;
        if !is_utf8(text) {
            return Err(self.bad("string is not UTF-8"));
        }
        Ok(I32_SIZE + len)
    }

    /// One element starting at `self.pos`, whose value must end by `limit` (the parent's zero).
    fn element(&mut self, limit: usize) -> Result<(), WireError> {
        let kind = *self
            .doc
            .get(self.pos)
            .ok_or(self.bad("missing element type"))?;
        let key_size = self.cstring(self.pos + 1, limit)?;
        let value = self.pos + 1 + key_size;
        let size = match kind {
            TYPE_UNDEFINED | TYPE_NULL | TYPE_MIN_KEY | TYPE_MAX_KEY => 0,
            TYPE_BOOLEAN => match self.doc.get(value) {
                Some(0 | 1) => 1,
                _ => return Err(self.bad("boolean is not 0 or 1")),
            },
            TYPE_INT32 => I32_SIZE,
            TYPE_DOUBLE | TYPE_DATE_TIME | TYPE_TIMESTAMP | TYPE_INT64 => I64_SIZE,
            TYPE_OBJECT_ID => OBJECT_ID_SIZE,
            TYPE_DECIMAL128 => DECIMAL128_SIZE,
            TYPE_STRING | TYPE_JAVASCRIPT | TYPE_SYMBOL => self.string(value, limit)?,
            TYPE_REGEX => {
                let pattern = self.cstring(value, limit)?;
                pattern + self.cstring(value + pattern, limit)?
            }
            TYPE_DB_POINTER => self.string(value, limit)? + OBJECT_ID_SIZE,
            TYPE_BINARY => self.binary(value)?,
            TYPE_DOCUMENT | TYPE_ARRAY => {
                self.pos = value;
                return self.open_container();
            }
            TYPE_JAVASCRIPT_WITH_SCOPE => return self.code_with_scope(value, limit),
            _ => return Err(self.bad("unknown element type")),
        };
        match value.checked_add(size) {
            Some(end) if end <= limit => {
                self.pos = end;
                Ok(())
            }
            _ => Err(self.bad("element value runs past its container")),
        }
    }

    fn binary(&self, value: usize) -> Result<usize, WireError> {
        let len =
            usize::try_from(self.i32_at(value)?).map_err(|_| self.bad("negative binary length"))?;
        let subtype = *self
            .doc
            .get(value + I32_SIZE)
            .ok_or(self.bad("binary subtype missing"))?;
        if subtype == BINARY_SUBTYPE_OLD {
            // The old binary subtype repeats the length (minus 4) inside the payload.
            let inner = self.i32_at(value + I32_SIZE + 1)?;
            if usize::try_from(inner)
                .ok()
                .and_then(|n| n.checked_add(I32_SIZE))
                != Some(len)
            {
                return Err(self.bad("old binary inner length mismatch"));
            }
        }
        len.checked_add(I32_SIZE + 1)
            .ok_or(self.bad("binary length overflows"))
    }

    /// code_w_s: i32 total, string code, document scope; the total must add up exactly, then
    /// the scope is opened like any nested document.
    fn code_with_scope(&mut self, value: usize, limit: usize) -> Result<(), WireError> {
        let total =
            usize::try_from(self.i32_at(value)?).map_err(|_| self.bad("negative code length"))?;
        let end = value.checked_add(total).filter(|&e| e <= limit);
        let end = end.ok_or(self.bad("code with scope runs past its container"))?;
        let code = self.string(value + I32_SIZE, end)?;
        let scope = value + I32_SIZE + code;
        let scope_len =
            usize::try_from(self.i32_at(scope)?).map_err(|_| self.bad("negative scope length"))?;
        if scope.checked_add(scope_len) != Some(end) {
            return Err(self.bad("code with scope length mismatch"));
        }
        self.pos = scope;
        self.open_container()
    }
}
