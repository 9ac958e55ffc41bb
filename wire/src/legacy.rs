//! The two legacy opcodes still in use: OP_QUERY (2004), which drivers send only for the first
//! `hello`/`isMaster` of a connection, and OP_REPLY (1), the answer to it. Both are decoded
//! strictly: every byte must belong to a field, and OP_REPLY's count must match its documents.

use bson::RawDocumentBuf;

use crate::error::WireError;
use crate::limits::{BSON_DOCUMENT_SIZE_MIN, HEADER_SIZE};
use crate::reader::{Reader, owned_document};

#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    pub flags: u32,
    /// `"<db>.<collection>"`; for commands `"<db>.$cmd"`.
    pub full_collection_name: String,
    pub number_to_skip: i32,
    pub number_to_return: i32,
    pub query: RawDocumentBuf,
    pub return_fields: Option<RawDocumentBuf>,
}

impl OpQuery {
    /// The database part of `full_collection_name` (everything before the first dot).
    pub fn database(&self) -> &str {
        self.full_collection_name
            .split('.')
            .next()
            .unwrap_or_default()
    }
}

/// OP_REPLY responseFlags bits.
pub const REPLY_FLAG_CURSOR_NOT_FOUND: u32 = 1 << 0;
pub const REPLY_FLAG_QUERY_FAILURE: u32 = 1 << 1;
pub const REPLY_FLAG_AWAIT_CAPABLE: u32 = 1 << 3;

#[derive(Debug, Clone, PartialEq)]
pub struct OpReply {
    pub response_flags: u32,
    pub cursor_id: i64,
    pub starting_from: i32,
    pub documents: Vec<RawDocumentBuf>,
}

pub(crate) fn decode_query(frame: &[u8]) -> Result<OpQuery, WireError> {
    let mut reader = Reader::new(frame);
    reader.take(HEADER_SIZE, "header")?;
    let flags = reader.u32("OP_QUERY flags")?;
    let full_collection_name = reader.cstring("OP_QUERY fullCollectionName")?.to_owned();
    let number_to_skip = reader.i32("OP_QUERY numberToSkip")?;
    let number_to_return = reader.i32("OP_QUERY numberToReturn")?;
    let query = owned_document(reader.document("OP_QUERY query")?, "OP_QUERY query")?;
    let return_fields = if reader.remaining() > 0 {
        let doc = reader.document("OP_QUERY returnFieldsSelector")?;
        Some(owned_document(doc, "OP_QUERY returnFieldsSelector")?)
    } else {
        None
    };
    if reader.remaining() > 0 {
        return Err(WireError::TrailingBytes {
            what: "OP_QUERY",
            count: reader.remaining(),
        });
    }
    Ok(OpQuery {
        flags,
        full_collection_name,
        number_to_skip,
        number_to_return,
        query,
        return_fields,
    })
}

pub(crate) fn decode_reply(frame: &[u8]) -> Result<OpReply, WireError> {
    let mut reader = Reader::new(frame);
    reader.take(HEADER_SIZE, "header")?;
    let response_flags = reader.u32("OP_REPLY responseFlags")?;
    let cursor_id = reader.i64("OP_REPLY cursorID")?;
    let starting_from = reader.i32("OP_REPLY startingFrom")?;
    let number_returned = reader.i32("OP_REPLY numberReturned")?;
    // Never trust the count for capacity: at most one document per five remaining bytes.
    let capacity = usize::try_from(number_returned)
        .unwrap_or(0)
        .min(reader.remaining() / BSON_DOCUMENT_SIZE_MIN);
    let mut documents = Vec::with_capacity(capacity);
    while reader.remaining() > 0 {
        documents.push(owned_document(
            reader.document("OP_REPLY document")?,
            "OP_REPLY document",
        )?);
    }
    if i64::from(number_returned) != documents.len() as i64 {
        return Err(WireError::ReplyCount {
            declared: number_returned.into(),
            found: documents.len(),
        });
    }
    Ok(OpReply {
        response_flags,
        cursor_id,
        starting_from,
        documents,
    })
}

pub(crate) fn encode_query_payload(out: &mut Vec<u8>, query: &OpQuery) {
    out.extend_from_slice(&query.flags.to_le_bytes());
    out.extend_from_slice(query.full_collection_name.as_bytes());
    out.push(0);
    out.extend_from_slice(&query.number_to_skip.to_le_bytes());
    out.extend_from_slice(&query.number_to_return.to_le_bytes());
    out.extend_from_slice(query.query.as_bytes());
    if let Some(fields) = &query.return_fields {
        out.extend_from_slice(fields.as_bytes());
    }
}

pub(crate) fn encode_reply_payload(out: &mut Vec<u8>, reply: &OpReply) {
    out.extend_from_slice(&reply.response_flags.to_le_bytes());
    out.extend_from_slice(&reply.cursor_id.to_le_bytes());
    out.extend_from_slice(&reply.starting_from.to_le_bytes());
    let count = i32::try_from(reply.documents.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for doc in &reply.documents {
        out.extend_from_slice(doc.as_bytes());
    }
}
