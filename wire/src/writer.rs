//! Building replies in place. `DocWriter` appends BSON elements straight into a byte buffer,
//! keeping a stack of open documents/arrays whose lengths are patched when they close; it can
//! splice already-encoded documents (stored records) as raw bytes. `MsgWriter` puts a
//! `DocWriter` inside an OP_MSG frame so that the body is written once, directly where it will
//! be sent. These take our own data, not a peer's, so their invariants are `debug_assert!`s.

use std::io::Write;

use bson::raw::BindRawBsonRef;
use bson::{RawDocument, RawDocumentBuf};

use crate::codec::{finish_msg_frame, start_frame};
use crate::compress::Compressor;
use crate::error::WireError;
use crate::header::OpCode;
use crate::limits::I32_SIZE;
use crate::msg::{FLAG_CHECKSUM_PRESENT, SECTION_KIND_BODY, patch_i32};

const TYPE_DOUBLE: u8 = 0x01;
const TYPE_STRING: u8 = 0x02;
const TYPE_DOCUMENT: u8 = 0x03;
const TYPE_ARRAY: u8 = 0x04;
const TYPE_BOOLEAN: u8 = 0x08;
const TYPE_NULL: u8 = 0x0A;
const TYPE_INT32: u8 = 0x10;
const TYPE_INT64: u8 = 0x12;

struct Open {
    start: usize,
    /// `Some(next index)` for an array, whose keys are generated.
    array_len: Option<usize>,
}

/// Appends one BSON document to a buffer. Inside an array the `key` argument of every append
/// is ignored and the next index ("0", "1", ...) is written instead, so pass `""` there.
pub struct DocWriter {
    buf: Vec<u8>,
    /// Where the root document starts in `buf` (after any frame prefix).
    root_start: usize,
    open: Vec<Open>,
}

impl Default for DocWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl DocWriter {
    pub fn new() -> Self {
        Self::with_prefix(Vec::new())
    }

    /// Start a document after the bytes already in `buf`.
    pub(crate) fn with_prefix(mut buf: Vec<u8>) -> Self {
        let root_start = buf.len();
        buf.extend_from_slice(&[0; I32_SIZE]);
        DocWriter {
            buf,
            root_start,
            open: vec![Open {
                start: root_start,
                array_len: None,
            }],
        }
    }

    /// Bytes written so far for this document (its size if it were closed now, roughly).
    pub fn len_bytes(&self) -> usize {
        self.buf.len() - self.root_start + self.open.len()
    }

    fn key(&mut self, kind: u8, key: &str) {
        debug_assert!(!key.contains('\0'), "BSON keys cannot contain NUL");
        self.buf.push(kind);
        match self.open.last_mut().and_then(|o| o.array_len.as_mut()) {
            Some(index) => {
                // Writing into a Vec cannot fail; no temporary string per array element.
                let _ = write!(self.buf, "{index}");
                *index += 1;
            }
            None => self.buf.extend_from_slice(key.as_bytes()),
        }
        self.buf.push(0);
    }

    pub fn append_f64(&mut self, key: &str, value: f64) -> &mut Self {
        self.key(TYPE_DOUBLE, key);
        self.buf.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn append_i32(&mut self, key: &str, value: i32) -> &mut Self {
        self.key(TYPE_INT32, key);
        self.buf.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn append_i64(&mut self, key: &str, value: i64) -> &mut Self {
        self.key(TYPE_INT64, key);
        self.buf.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn append_bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(TYPE_BOOLEAN, key);
        self.buf.push(u8::from(value));
        self
    }

    pub fn append_null(&mut self, key: &str) -> &mut Self {
        self.key(TYPE_NULL, key);
        self
    }

    pub fn append_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(TYPE_STRING, key);
        let len = value.len() + 1;
        self.buf
            .extend_from_slice(&i32::try_from(len).unwrap_or(i32::MAX).to_le_bytes());
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.push(0);
        self
    }

    /// Splice an encoded document (e.g. a stored record) as an embedded document, copying its
    /// bytes once and decoding nothing.
    pub fn append_raw_document(&mut self, key: &str, doc: &RawDocument) -> &mut Self {
        self.key(TYPE_DOCUMENT, key);
        self.buf.extend_from_slice(doc.as_bytes());
        self
    }

    /// Splice an encoded array document (its keys must be "0", "1", ...).
    pub fn append_raw_array(&mut self, key: &str, array: &bson::RawArray) -> &mut Self {
        self.key(TYPE_ARRAY, key);
        self.buf.extend_from_slice(array.as_bytes());
        self
    }

    /// Any other value, via the bson crate (costs one small temporary document).
    pub fn append_bson(&mut self, key: &str, value: impl BindRawBsonRef) -> &mut Self {
        let mut one = RawDocumentBuf::new();
        one.append(bson::cstr!("k"), value);
        let bytes = one.as_bytes();
        // Element = type byte, "k\0", value; the document wraps it in a length and a zero.
        let kind = bytes[I32_SIZE];
        let value_bytes = &bytes[I32_SIZE + 3..bytes.len() - 1];
        self.key(kind, key);
        self.buf.extend_from_slice(value_bytes);
        self
    }

    pub fn begin_document(&mut self, key: &str) -> &mut Self {
        self.begin(TYPE_DOCUMENT, key, None)
    }

    pub fn begin_array(&mut self, key: &str) -> &mut Self {
        self.begin(TYPE_ARRAY, key, Some(0))
    }

    fn begin(&mut self, kind: u8, key: &str, array_len: Option<usize>) -> &mut Self {
        self.key(kind, key);
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; I32_SIZE]);
        self.open.push(Open { start, array_len });
        self
    }

    /// Close the innermost document or array opened with `begin_*`.
    pub fn end(&mut self) -> &mut Self {
        debug_assert!(self.open.len() > 1, "end() without a matching begin");
        if self.open.len() > 1 {
            self.close_innermost();
        }
        self
    }

    fn close_innermost(&mut self) {
        if let Some(open) = self.open.pop() {
            self.buf.push(0);
            let len = self.buf.len() - open.start;
            patch_i32(&mut self.buf, open.start, len);
        }
    }

    /// Close everything still open and return the whole buffer (prefix included).
    pub(crate) fn finish_buffer(mut self) -> Vec<u8> {
        while !self.open.is_empty() {
            self.close_innermost();
        }
        self.buf
    }

    /// Close everything still open and return the document.
    pub fn finish(self) -> RawDocumentBuf {
        let bytes = self.finish_buffer();
        // Built by us element by element, so it is well formed; an empty document is the
        // fallback only if that invariant were ever broken.
        debug_assert!(crate::bson_check::validate(&bytes, "DocWriter output").is_ok());
        RawDocumentBuf::from_bytes(bytes).unwrap_or_default()
    }
}

/// Writes an OP_MSG (body only) straight into its frame buffer.
///
/// ```
/// let mut w = wire::MsgWriter::new(7, 3, 0);
/// w.body().append_f64("ok", 1.0);
/// let frame = w.finish(None).unwrap();
/// assert!(matches!(wire::decode(&frame).unwrap().body, wire::Body::Msg(_)));
/// ```
pub struct MsgWriter {
    flags: u32,
    body: DocWriter,
}

impl MsgWriter {
    pub fn new(request_id: i32, response_to: i32, flags: u32) -> Self {
        Self::with_capacity(request_id, response_to, flags, 0)
    }

    /// A writer whose frame buffer holds `capacity_bytes` (the whole frame, checksum included)
    /// before it grows: a reply whose size is known ahead is then written without the buffer
    /// being moved (each growth copies everything written so far).
    pub fn with_capacity(
        request_id: i32,
        response_to: i32,
        flags: u32,
        capacity_bytes: usize,
    ) -> Self {
        let mut prefix = Vec::with_capacity(capacity_bytes.min(crate::limits::MESSAGE_SIZE_MAX));
        prefix.extend_from_slice(&start_frame(request_id, response_to, OpCode::Msg));
        prefix.extend_from_slice(&flags.to_le_bytes());
        prefix.push(SECTION_KIND_BODY);
        MsgWriter {
            flags,
            body: DocWriter::with_prefix(prefix),
        }
    }

    pub fn body(&mut self) -> &mut DocWriter {
        &mut self.body
    }

    /// Close the body, append the checksum if the flags ask for one, and optionally compress.
    pub fn finish(self, compressor: Option<Compressor>) -> Result<Vec<u8>, WireError> {
        let checksum = self.flags & FLAG_CHECKSUM_PRESENT != 0;
        finish_msg_frame(self.body.finish_buffer(), checksum, compressor)
    }
}
