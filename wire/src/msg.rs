//! OP_MSG (opCode 2013), the message every modern driver sends: flag bits, exactly one kind-0
//! body section, any number of kind-1 document sequences with distinct identifiers, and an
//! optional CRC-32C over everything before it. Decoding verifies the checksum before it looks at
//! any section and rejects unknown *required* flag bits (0-15), as the spec demands; unknown
//! optional bits (16-31) are kept and ignored.

use std::sync::LazyLock;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use bytes::Bytes;

use crate::error::WireError;
use crate::limits::{
    CHECKSUM_SIZE, HEADER_SIZE, I32_SIZE, MSG_SECTIONS_OFFSET, SEQUENCE_COUNT_MAX,
};
use crate::reader::{Reader, owned_document};

/// The message ends with a CRC-32C of all bytes before it.
pub const FLAG_CHECKSUM_PRESENT: u32 = 1 << 0;
/// The sender will not wait for a reply (and, from a server, more replies follow).
pub const FLAG_MORE_TO_COME: u32 = 1 << 1;
/// The client accepts a stream of replies with `moreToCome` set (exhaust cursors).
pub const FLAG_EXHAUST_ALLOWED: u32 = 1 << 16;
/// Bits 0-15 must be understood by the receiver; these are the ones we understand.
pub const FLAGS_REQUIRED_MASK: u32 = 0xFFFF;
pub const FLAGS_REQUIRED_KNOWN: u32 = FLAG_CHECKSUM_PRESENT | FLAG_MORE_TO_COME;

/// Section kinds.
pub const SECTION_KIND_BODY: u8 = 0;
pub const SECTION_KIND_SEQUENCE: u8 = 1;

/// A kind-1 section: a named list of documents (e.g. `documents` of an insert) that the
/// receiver treats as if it were an array field of the body.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentSequence {
    pub identifier: String,
    pub documents: Vec<SharedDocument>,
}

/// One document of a sequence. A decoded one is a slice of the message it arrived in (shared,
/// never copied: an insert's documents go from the socket's buffer to wherever they are stored
/// in one copy); one to send wraps an encoded document. Either way it was checked before it
/// became one, so it always reads as a document.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedDocument(Bytes);

/// What a `SharedDocument` reads as if its invariant were ever broken.
static EMPTY_DOCUMENT: LazyLock<RawDocumentBuf> = LazyLock::new(RawDocumentBuf::new);

impl SharedDocument {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<RawDocument> for SharedDocument {
    fn as_ref(&self) -> &RawDocument {
        RawDocument::from_bytes(&self.0).unwrap_or_else(|_| {
            debug_assert!(false, "a SharedDocument holds a checked document");
            &EMPTY_DOCUMENT
        })
    }
}

impl std::ops::Deref for SharedDocument {
    type Target = RawDocument;

    fn deref(&self) -> &RawDocument {
        self.as_ref()
    }
}

impl From<RawDocumentBuf> for SharedDocument {
    fn from(doc: RawDocumentBuf) -> Self {
        SharedDocument(Bytes::from(doc.into_bytes()))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg {
    pub flags: u32,
    pub body: RawDocumentBuf,
    pub sequences: Vec<DocumentSequence>,
}

impl OpMsg {
    /// A message with just a body and no flags: the usual reply.
    pub fn new(body: RawDocumentBuf) -> Self {
        OpMsg {
            flags: 0,
            body,
            sequences: Vec::new(),
        }
    }

    pub fn checksum_present(&self) -> bool {
        self.flags & FLAG_CHECKSUM_PRESENT != 0
    }

    pub fn more_to_come(&self) -> bool {
        self.flags & FLAG_MORE_TO_COME != 0
    }

    pub fn exhaust_allowed(&self) -> bool {
        self.flags & FLAG_EXHAUST_ALLOWED != 0
    }

    /// The sequence with this identifier, if the message carries one.
    pub fn sequence(&self, identifier: &str) -> Option<&DocumentSequence> {
        self.sequences.iter().find(|s| s.identifier == identifier)
    }
}

/// Decode a whole OP_MSG frame (header included; the header was checked by the caller). The
/// sequences' documents share `frame`.
pub(crate) fn decode(frame: &Bytes) -> Result<OpMsg, WireError> {
    let mut reader = Reader::new(frame);
    reader.take(HEADER_SIZE, "header")?;
    let flags = reader.u32("OP_MSG flagBits")?;
    let unknown = flags & FLAGS_REQUIRED_MASK & !FLAGS_REQUIRED_KNOWN;
    if unknown != 0 {
        return Err(WireError::UnknownRequiredFlags(unknown));
    }
    let sections_end = if flags & FLAG_CHECKSUM_PRESENT != 0 {
        verify_checksum(frame)?
    } else {
        frame.len()
    };
    let sections = frame
        .get(MSG_SECTIONS_OFFSET..sections_end)
        .ok_or(WireError::Truncated {
            what: "OP_MSG sections",
        })?;
    let mut reader = Reader::new(sections);
    let mut body = None;
    let mut sequences: Vec<DocumentSequence> = Vec::new();
    // Errors are raised in the order mongod raises them while walking the sections.
    while reader.remaining() > 0 {
        match reader.u8("section kind")? {
            SECTION_KIND_BODY if body.is_some() => return Err(WireError::BodySectionCount(2)),
            SECTION_KIND_BODY => body = Some(reader.document("OP_MSG body")?),
            SECTION_KIND_SEQUENCE => {
                if sequences.len() >= SEQUENCE_COUNT_MAX {
                    return Err(WireError::TooManySequences {
                        count_max: SEQUENCE_COUNT_MAX,
                    });
                }
                let sequence = decode_sequence(frame, &mut reader)?;
                if sequences
                    .iter()
                    .any(|s| s.identifier == sequence.identifier)
                {
                    return Err(WireError::DuplicateSequence(sequence.identifier));
                }
                sequences.push(sequence);
            }
            kind => return Err(WireError::UnknownSectionKind(kind)),
        }
    }
    let body = owned_document(body.ok_or(WireError::BodySectionCount(0))?, "OP_MSG body")?;
    if let Some(clash) = sequences
        .iter()
        .find(|s| body_has_path(&body, &s.identifier))
    {
        return Err(WireError::DuplicateBodyField(clash.identifier.clone()));
    }
    Ok(OpMsg {
        flags,
        body,
        sequences,
    })
}

/// Whether the body already holds the (possibly dotted) path a sequence would fill. Like
/// mongod, an array met along the path counts as holding it.
fn body_has_path(body: &RawDocument, path: &str) -> bool {
    let mut doc = body;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        match doc.get(part) {
            Ok(Some(RawBsonRef::Document(inner))) if parts.peek().is_some() => doc = inner,
            Ok(Some(RawBsonRef::Array(_))) => return true,
            Ok(Some(_)) => return parts.peek().is_none(),
            _ => return false,
        }
    }
    false
}

/// Check the trailing CRC-32C; returns where the sections end (just before it).
fn verify_checksum(frame: &[u8]) -> Result<usize, WireError> {
    let end = frame
        .len()
        .checked_sub(CHECKSUM_SIZE)
        .filter(|&end| end >= MSG_SECTIONS_OFFSET)
        .ok_or(WireError::Truncated {
            what: "OP_MSG checksum",
        })?;
    let mut stored = [0u8; CHECKSUM_SIZE];
    stored.copy_from_slice(&frame[end..]);
    let declared = u32::from_le_bytes(stored);
    let computed = crc32c::crc32c(&frame[..end]);
    if declared != computed {
        return Err(WireError::Checksum { declared, computed });
    }
    Ok(end)
}

/// Kind 1: i32 size (counting itself), identifier cstring, then documents filling the size.
fn decode_sequence(frame: &Bytes, reader: &mut Reader<'_>) -> Result<DocumentSequence, WireError> {
    let declared = reader.i32("sequence size")?;
    let too_small = WireError::SectionLength {
        length_bytes: declared.into(),
        reason: "smaller than its own fields",
    };
    let content_len = usize::try_from(declared)
        .ok()
        .and_then(|size| size.checked_sub(I32_SIZE))
        .filter(|&len| len >= 1)
        .ok_or(too_small)?;
    if content_len > reader.remaining() {
        return Err(WireError::SectionLength {
            length_bytes: declared.into(),
            reason: "runs past the message",
        });
    }
    let mut section = Reader::new(reader.take(content_len, "document sequence")?);
    let identifier = section.cstring("sequence identifier")?.to_owned();
    let mut documents = Vec::new();
    while section.remaining() > 0 {
        // Checked by `document`; a slice of `frame` (the reader walks it), so no copy.
        let doc = section.document("sequence document")?;
        documents.push(SharedDocument(frame.slice_ref(doc)));
    }
    Ok(DocumentSequence {
        identifier,
        documents,
    })
}

/// Append the OP_MSG payload (after the header) of `msg` to `out`, without the checksum.
pub(crate) fn encode_payload(out: &mut Vec<u8>, msg: &OpMsg) {
    out.extend_from_slice(&msg.flags.to_le_bytes());
    out.push(SECTION_KIND_BODY);
    out.extend_from_slice(msg.body.as_bytes());
    for sequence in &msg.sequences {
        out.push(SECTION_KIND_SEQUENCE);
        let size_at = out.len();
        out.extend_from_slice(&[0; I32_SIZE]);
        out.extend_from_slice(sequence.identifier.as_bytes());
        out.push(0);
        for doc in &sequence.documents {
            out.extend_from_slice(doc.as_bytes());
        }
        let size = out.len() - size_at;
        patch_i32(out, size_at, size);
    }
}

/// Overwrite the i32 at `at` with `value`; our own lengths are bounded by the caller's checks,
/// so saturating here can only produce a frame the size check then refuses.
pub(crate) fn patch_i32(out: &mut [u8], at: usize, value: usize) {
    let value = i32::try_from(value).unwrap_or(i32::MAX);
    out[at..at + I32_SIZE].copy_from_slice(&value.to_le_bytes());
}
