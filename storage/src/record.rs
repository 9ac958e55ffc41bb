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
pub const SEGMENT_FORMAT_VERSION: u32 = 1;
pub const SEGMENT_MAGIC_OFFSET: usize = 0;
pub const SEGMENT_VERSION_OFFSET: usize = SEGMENT_MAGIC_OFFSET + 8;
pub const SEGMENT_RESERVED_OFFSET: usize = SEGMENT_VERSION_OFFSET + 4;
pub const SEGMENT_ID_OFFSET: usize = SEGMENT_RESERVED_OFFSET + 4;
pub const SEGMENT_HEADER_SIZE: usize = SEGMENT_ID_OFFSET + 8;

/// PUT and DELETE payloads start with these two fields.
pub const PAYLOAD_COLLECTION_ID_OFFSET: usize = 0;
pub const PAYLOAD_RECORD_ID_OFFSET: usize = PAYLOAD_COLLECTION_ID_OFFSET + 8;
pub const PAYLOAD_DOCUMENT_OFFSET: usize = PAYLOAD_RECORD_ID_OFFSET + 8;
/// Byte offset of a PUT's document inside its record.
pub const RECORD_DOCUMENT_OFFSET: usize = RECORD_HEADER_SIZE + PAYLOAD_DOCUMENT_OFFSET;

/// What a record means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Payload: op count u32. Opens a batch: the next `count` records, then `BatchEnd`.
    BatchBegin = 1,
    /// Payload: op count u32. Closes the batch; only now does recovery apply it.
    BatchEnd = 2,
    /// Payload: collection id u64, record id u64, BSON document. Insert or replace.
    Put = 3,
    /// Payload: collection id u64, record id u64.
    Delete = 4,
    /// Payload: one BSON document describing a DDL change (see `catalog`).
    Catalog = 5,
    /// Payload: one BSON document holding the whole catalog (written by compaction).
    CatalogSnapshot = 6,
}

impl Kind {
    pub fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::BatchBegin,
            2 => Kind::BatchEnd,
            3 => Kind::Put,
            4 => Kind::Delete,
            5 => Kind::Catalog,
            6 => Kind::CatalogSnapshot,
            _ => return None,
        })
    }
}

/// Appends one encoded record to `out`.
pub fn encode(out: &mut Vec<u8>, kind: Kind, sequence: u64, payload: &[u8]) {
    let start = out.len();
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(kind as u8);
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(payload);
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
    let len = u32_at(b, RECORD_LENGTH_OFFSET) as usize;
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

/// PUT/DELETE payload head.
pub fn data_payload(collection_id: u64, record_id: u64, document: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(PAYLOAD_DOCUMENT_OFFSET + document.len());
    p.extend_from_slice(&collection_id.to_le_bytes());
    p.extend_from_slice(&record_id.to_le_bytes());
    p.extend_from_slice(document);
    p
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
