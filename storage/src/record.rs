//! Log records and segment headers: byte layout, encoding, checking. (Table in docs/FORMAT.md.)
//!
//! A record is `[length u32][crc32 u32][kind u8][sequence u64][payload]`, little-endian; `length`
//! counts payload bytes; the crc (crc32fast, IEEE) covers the length field, kind, sequence and
//! payload. Sequences increase by exactly one from record to record inside a segment.
//!
//! Recovery rule: scanning a segment stops at an all-zero header (preallocated space). Any other
//! record that fails its checks (length beyond the file or limit, crc mismatch, unknown kind,
//! sequence out of order) is a *torn tail* only when it lies in the last segment holding records
//! and no valid record follows it there; recovery then truncates it (and a batch it cut short)
//! and syncs. Anywhere else it is *corruption*: the engine refuses to open, naming the segment
//! file and offset. It never skips a damaged record silently.

use crate::limits::RECORD_PAYLOAD_SIZE_MAX;

pub const RECORD_LENGTH_OFFSET: usize = 0;
pub const RECORD_CRC_OFFSET: usize = RECORD_LENGTH_OFFSET + 4;
pub const RECORD_KIND_OFFSET: usize = RECORD_CRC_OFFSET + 4;
pub const RECORD_SEQUENCE_OFFSET: usize = RECORD_KIND_OFFSET + 1;
pub const RECORD_HEADER_SIZE: usize = RECORD_SEQUENCE_OFFSET + 8;

pub const SEGMENT_MAGIC: &[u8; 8] = b"CAIRNLOG";
/// 2: PUT and DELETE carry the index keys they remove; MOVE; no catalog snapshots.
pub const SEGMENT_FORMAT_VERSION: u32 = 2;
pub const SEGMENT_MAGIC_OFFSET: usize = 0;
pub const SEGMENT_VERSION_OFFSET: usize = SEGMENT_MAGIC_OFFSET + 8;
pub const SEGMENT_RESERVED_OFFSET: usize = SEGMENT_VERSION_OFFSET + 4;
pub const SEGMENT_ID_OFFSET: usize = SEGMENT_RESERVED_OFFSET + 4;
pub const SEGMENT_HEADER_SIZE: usize = SEGMENT_ID_OFFSET + 8;

/// PUT, DELETE and MOVE payloads start with these two fields.
pub const PAYLOAD_COLLECTION_ID_OFFSET: usize = 0;
pub const PAYLOAD_RECORD_ID_OFFSET: usize = PAYLOAD_COLLECTION_ID_OFFSET + 8;
pub const PAYLOAD_DOCUMENT_OFFSET: usize = PAYLOAD_RECORD_ID_OFFSET + 8;
/// Byte offset of a PUT's or MOVE's document inside its record.
pub const RECORD_DOCUMENT_OFFSET: usize = RECORD_HEADER_SIZE + PAYLOAD_DOCUMENT_OFFSET;
/// Bytes of a BSON document's length prefix.
const BSON_LENGTH_SIZE: usize = 4;

/// What a record means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Payload: op count u32. Opens a batch: the next `count` records, then `BatchEnd`.
    BatchBegin = 1,
    /// Payload: op count u32. Closes the batch; only now does recovery apply it.
    BatchEnd = 2,
    /// Payload: collection id u64, record id u64, BSON document, removed keys. Insert or
    /// replace.
    Put = 3,
    /// Payload: collection id u64, record id u64, removed keys.
    Delete = 4,
    /// Payload: one BSON document describing a DDL change (see `catalog`).
    Catalog = 5,
    /// Payload: collection id u64, record id u64, BSON document. The same document at a new
    /// place (compaction); indexes are untouched.
    Move = 7,
    /// Payload: the stamp of a batch (written only when the engine stamps writes, always the
    /// first record of a batch): timestamp u64, wall clock ms i64, op count u32, one op code
    /// byte per data record of the batch, then a BSON document of per-op details.
    Stamp = 8,
    /// Payload as `Put` (collection id u64, record id u64, BSON document, an empty removed-key
    /// list): the version a document had before the batch's next data record changed it,
    /// written just before that record when the collection keeps pre-images
    /// (`changeStreamPreAndPostImages`). Read only by the history; replay passes over it.
    PreImage = 9,
}

impl Kind {
    pub fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::BatchBegin,
            2 => Kind::BatchEnd,
            3 => Kind::Put,
            4 => Kind::Delete,
            5 => Kind::Catalog,
            7 => Kind::Move,
            8 => Kind::Stamp,
            9 => Kind::PreImage,
            _ => return None,
        })
    }
}

/// Appends one encoded record to `out`.
pub fn encode(out: &mut Vec<u8>, kind: Kind, sequence: u64, payload: &[u8]) {
    encode_spliced(out, kind, sequence, payload, &[]);
}

/// `encode` of the payload `payload[..PAYLOAD_DOCUMENT_OFFSET]`, `document`,
/// `payload[PAYLOAD_DOCUMENT_OFFSET..]` (a data record whose document was left out of its
/// payload, see `data_payload_around`): the document is copied once, straight into `out`. With
/// an empty `document` this is `encode` of `payload`.
pub fn encode_spliced(
    out: &mut Vec<u8>,
    kind: Kind,
    sequence: u64,
    payload: &[u8],
    document: &[u8],
) {
    let start = out.len();
    let len = u32::try_from(payload.len() + document.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(kind as u8);
    out.extend_from_slice(&sequence.to_le_bytes());
    if document.is_empty() {
        out.extend_from_slice(payload);
    } else {
        let at = PAYLOAD_DOCUMENT_OFFSET.min(payload.len());
        out.extend_from_slice(&payload[..at]);
        out.extend_from_slice(document);
        out.extend_from_slice(&payload[at..]);
    }
    let crc = record_crc(&out[start..]);
    out[start + RECORD_CRC_OFFSET..start + RECORD_KIND_OFFSET].copy_from_slice(&crc.to_le_bytes());
    debug_assert!(matches!(decode(&out[start..]), Decoded::Record(..)));
}

fn record_crc(record: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&record[RECORD_LENGTH_OFFSET..RECORD_CRC_OFFSET]);
    h.update(&record[RECORD_KIND_OFFSET..]);
    h.finalize()
}

/// A record read back from bytes.
#[derive(Debug)]
pub struct RecordRef<'a> {
    pub kind: Kind,
    pub sequence: u64,
    pub payload: &'a [u8],
    /// Header plus payload bytes.
    pub size: usize,
}

/// The outcome of decoding at some position.
#[derive(Debug)]
pub enum Decoded<'a> {
    Record(RecordRef<'a>),
    /// An all-zero header: preallocated space, the end of the segment's records.
    End,
    /// Anything else: the reason it is not a record.
    Bad(&'static str),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The payload length a record header claims (not checked).
pub fn payload_len(header: &[u8]) -> usize {
    u32_at(header, RECORD_LENGTH_OFFSET) as usize
}

/// Decodes the record at the start of `b` (which may hold more after it).
pub fn decode(b: &[u8]) -> Decoded<'_> {
    if b.len() < RECORD_HEADER_SIZE {
        return if b.iter().all(|&x| x == 0) {
            Decoded::End
        } else {
            Decoded::Bad("truncated record header")
        };
    }
    let header = &b[..RECORD_HEADER_SIZE];
    if header.iter().all(|&x| x == 0) {
        return Decoded::End;
    }
    let len = payload_len(b);
    if len > RECORD_PAYLOAD_SIZE_MAX {
        return Decoded::Bad("record length beyond the limit");
    }
    let size = RECORD_HEADER_SIZE + len;
    if size > b.len() {
        return Decoded::Bad("record runs past the end of the segment");
    }
    if record_crc(&b[..size]) != u32_at(b, RECORD_CRC_OFFSET) {
        return Decoded::Bad("checksum mismatch");
    }
    let Some(kind) = Kind::from_u8(b[RECORD_KIND_OFFSET]) else {
        return Decoded::Bad("unknown record kind");
    };
    Decoded::Record(RecordRef {
        kind,
        sequence: u64_at(b, RECORD_SEQUENCE_OFFSET),
        payload: &b[RECORD_HEADER_SIZE..size],
        size,
    })
}

/// The segment header for segment `id`.
pub fn segment_header(id: u64) -> [u8; SEGMENT_HEADER_SIZE] {
    let mut h = [0u8; SEGMENT_HEADER_SIZE];
    h[SEGMENT_MAGIC_OFFSET..SEGMENT_VERSION_OFFSET].copy_from_slice(SEGMENT_MAGIC);
    h[SEGMENT_VERSION_OFFSET..SEGMENT_RESERVED_OFFSET]
        .copy_from_slice(&SEGMENT_FORMAT_VERSION.to_le_bytes());
    h[SEGMENT_ID_OFFSET..SEGMENT_HEADER_SIZE].copy_from_slice(&id.to_le_bytes());
    h
}

/// Checks a segment header; the error is the reason.
pub fn check_segment_header(b: &[u8], id: u64) -> Result<(), &'static str> {
    if b.len() < SEGMENT_HEADER_SIZE {
        return Err("segment shorter than its header");
    }
    if &b[SEGMENT_MAGIC_OFFSET..SEGMENT_VERSION_OFFSET] != SEGMENT_MAGIC {
        return Err("bad segment magic");
    }
    if u32_at(b, SEGMENT_VERSION_OFFSET) != SEGMENT_FORMAT_VERSION {
        return Err("unsupported segment format version");
    }
    // Reserved bytes are written as zero; anything else is damage, not a future format.
    if u32_at(b, SEGMENT_RESERVED_OFFSET) != 0 {
        return Err("nonzero reserved bytes in the segment header");
    }
    if u64_at(b, SEGMENT_ID_OFFSET) != id {
        return Err("segment id does not match the file name");
    }
    Ok(())
}

/// One index key a write removes: the index's ident in its collection and the encoded key
/// (without the RecordId suffix).
pub type RemovedKey = (u32, Vec<u8>);

/// A PUT (`document` given) or DELETE payload; `removed` lists the index keys the write takes
/// away, so replay never has to read the document's previous version.
/// `data_payload` without the document: what `encode_spliced` puts around it.
pub fn data_payload_around(collection_id: u64, record_id: u64, removed: &[RemovedKey]) -> Vec<u8> {
    data_payload(collection_id, record_id, None, removed)
}

pub fn data_payload(
    collection_id: u64,
    record_id: u64,
    document: Option<&[u8]>,
    removed: &[RemovedKey],
) -> Vec<u8> {
    let doc_len = document.map_or(0, <[u8]>::len);
    let keys_len: usize = removed.iter().map(|(_, k)| k.len() + 8).sum();
    let mut p = Vec::with_capacity(PAYLOAD_DOCUMENT_OFFSET + doc_len + keys_len + 4);
    p.extend_from_slice(&collection_id.to_le_bytes());
    p.extend_from_slice(&record_id.to_le_bytes());
    if let Some(d) = document {
        p.extend_from_slice(d);
    }
    write_varint(&mut p, removed.len() as u64);
    for (ident, key) in removed {
        write_varint(&mut p, u64::from(*ident));
        write_varint(&mut p, key.len() as u64);
        p.extend_from_slice(key);
    }
    p
}

pub const STAMP_TIMESTAMP_OFFSET: usize = 0;
pub const STAMP_WALL_OFFSET: usize = STAMP_TIMESTAMP_OFFSET + 8;
pub const STAMP_OP_COUNT_OFFSET: usize = STAMP_WALL_OFFSET + 8;
pub const STAMP_OPS_OFFSET: usize = STAMP_OP_COUNT_OFFSET + 4;

/// Op codes of a stamp, one per data record: what the write was to the client.
pub const OP_INSERT: u8 = b'i';
/// A replacement (the whole document given).
pub const OP_REPLACE: u8 = b'r';
/// An update by operators (the stamp's details hold its diff).
pub const OP_UPDATE: u8 = b'u';
/// A delete (the stamp's details hold the deleted `_id`).
pub const OP_DELETE: u8 = b'd';
/// A catalog change (create, drop, rename; the stamp's details say which and name the
/// collection as it was). A stamp may hold more command codes than its batch has records: the
/// extra ones describe the batch as a whole (a `dropDatabase` after its drops).
pub const OP_COMMAND: u8 = b'c';

/// A STAMP payload. `details` is a BSON document keyed by op index (decimal) for the ops that
/// carry more than their code.
pub fn stamp_payload(timestamp: u64, wall_ms: i64, ops: &[u8], details: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(STAMP_OPS_OFFSET + ops.len() + details.len());
    p.extend_from_slice(&timestamp.to_le_bytes());
    p.extend_from_slice(&wall_ms.to_le_bytes());
    p.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    p.extend_from_slice(ops);
    p.extend_from_slice(details);
    p
}

/// A STAMP payload taken apart.
#[derive(Debug)]
pub struct StampRef<'a> {
    pub timestamp: u64,
    pub wall_ms: i64,
    pub ops: &'a [u8],
    pub details: &'a [u8],
}

pub fn parse_stamp(payload: &[u8]) -> Result<StampRef<'_>, &'static str> {
    if payload.len() < STAMP_OPS_OFFSET {
        return Err("stamp payload too short");
    }
    let count = u32_at(payload, STAMP_OP_COUNT_OFFSET) as usize;
    let ops = payload
        .get(STAMP_OPS_OFFSET..STAMP_OPS_OFFSET + count)
        .ok_or("stamp op codes overrun")?;
    let details = &payload[STAMP_OPS_OFFSET + count..];
    if document_prefix(details).map(<[u8]>::len) != Some(details.len()) {
        return Err("stamp details are not one document");
    }
    Ok(StampRef {
        timestamp: u64_at(payload, STAMP_TIMESTAMP_OFFSET),
        wall_ms: u64_at(payload, STAMP_WALL_OFFSET) as i64,
        ops,
        details,
    })
}

/// A MOVE payload.
pub fn move_payload(collection_id: u64, record_id: u64, document: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(PAYLOAD_DOCUMENT_OFFSET + document.len());
    p.extend_from_slice(&collection_id.to_le_bytes());
    p.extend_from_slice(&record_id.to_le_bytes());
    p.extend_from_slice(document);
    p
}

/// A data record's payload taken apart.
#[derive(Debug)]
pub struct DataPayload<'a> {
    pub collection_id: u64,
    pub record_id: u64,
    /// The BSON document (PUT, MOVE).
    pub document: Option<&'a [u8]>,
    pub removed: Vec<(u32, &'a [u8])>,
}

/// Parses a PUT, DELETE or MOVE payload; the error is the reason it is malformed.
pub fn parse_data(kind: Kind, payload: &[u8]) -> Result<DataPayload<'_>, &'static str> {
    if payload.len() < PAYLOAD_DOCUMENT_OFFSET {
        return Err("data record payload too short");
    }
    let collection_id = u64_at(payload, PAYLOAD_COLLECTION_ID_OFFSET);
    let record_id = u64_at(payload, PAYLOAD_RECORD_ID_OFFSET);
    let mut rest = &payload[PAYLOAD_DOCUMENT_OFFSET..];
    let document = if kind == Kind::Delete {
        None
    } else {
        let doc = document_prefix(rest).ok_or("document length out of range")?;
        rest = &rest[doc.len()..];
        Some(doc)
    };
    let mut removed = Vec::new();
    if kind == Kind::Move {
        return if rest.is_empty() {
            Ok(DataPayload {
                collection_id,
                record_id,
                document,
                removed,
            })
        } else {
            Err("bytes after a moved document")
        };
    }
    let (count, used) = read_varint(rest).ok_or("bad removed-key count")?;
    rest = &rest[used..];
    for _ in 0..count {
        let (ident, used) = read_varint(rest).ok_or("bad removed-key index")?;
        rest = &rest[used..];
        let (len, used) = read_varint(rest).ok_or("bad removed-key length")?;
        rest = &rest[used..];
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| n <= rest.len())
            .ok_or("removed key overruns")?;
        let ident = u32::try_from(ident).map_err(|_| "removed-key index out of range")?;
        removed.push((ident, &rest[..len]));
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        return Err("bytes after the removed keys");
    }
    Ok(DataPayload {
        collection_id,
        record_id,
        document,
        removed,
    })
}

/// The BSON document at the start of `b`, by its length prefix.
pub fn document_prefix(b: &[u8]) -> Option<&[u8]> {
    let len = u32::from_le_bytes(b.get(..BSON_LENGTH_SIZE)?.try_into().ok()?) as usize;
    if len < BSON_LENGTH_SIZE + 1 {
        return None;
    }
    b.get(..len)
}

fn write_varint(out: &mut Vec<u8>, value: u64) {
    crate::btree::page::write_varint(out, value);
}

fn read_varint(b: &[u8]) -> Option<(u64, usize)> {
    crate::btree::page::read_varint(b)
}

/// Segment file name for segment `id`, and back.
pub fn segment_file_name(id: u64) -> String {
    format!("log-{id:016x}.seg")
}

pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("log-")?.strip_suffix(".seg")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// A record to append. A data record's document may stay where the caller holds it
/// (`document`, spliced into the payload by `record::encode_spliced`): it is then copied once,
/// into the appended bytes.
pub(crate) struct OutRecord<'a> {
    pub kind: Kind,
    pub payload: Vec<u8>,
    pub document: Option<&'a [u8]>,
}

impl OutRecord<'_> {
    /// A record whose payload is all in `payload`.
    pub fn whole(kind: Kind, payload: Vec<u8>) -> OutRecord<'static> {
        OutRecord {
            kind,
            payload,
            document: None,
        }
    }

    pub(crate) fn payload_len(&self) -> usize {
        self.payload.len() + self.document.map_or(0, <[u8]>::len)
    }
}
