//! The two meta slots (pages 0 and 1 of the page file) and the checkpoint blob they name.
//! A checkpoint is written to the slot that does not hold the newest valid meta, so the slot
//! being overwritten always holds the older one; a torn or corrupt newest slot leaves the other
//! one to open from. The blob
//! (catalog, tree roots, counters, free pages) lies in consecutive pages, each with its page
//! checksum, and the meta also holds a crc of the whole blob. Byte table in docs/FORMAT.md.

use super::PageId;
use crate::btree::PAGE_SIZE_BYTES;
use crate::record::u64_at;

pub const META_MAGIC: &[u8; 8] = b"CAIRNMET";
pub const META_FORMAT_VERSION: u32 = 1;
pub const META_MAGIC_OFFSET: usize = 0;
pub const META_VERSION_OFFSET: usize = META_MAGIC_OFFSET + 8;
pub const META_RESERVED_OFFSET: usize = META_VERSION_OFFSET + 4;
pub const META_CHECKPOINT_OFFSET: usize = META_RESERVED_OFFSET + 4;
pub const META_LOG_SEGMENT_OFFSET: usize = META_CHECKPOINT_OFFSET + 8;
pub const META_LOG_OFFSET_OFFSET: usize = META_LOG_SEGMENT_OFFSET + 8;
pub const META_NEXT_SEQUENCE_OFFSET: usize = META_LOG_OFFSET_OFFSET + 8;
pub const META_PAGE_COUNT_OFFSET: usize = META_NEXT_SEQUENCE_OFFSET + 8;
pub const META_BLOB_PAGE_OFFSET: usize = META_PAGE_COUNT_OFFSET + 4;
pub const META_BLOB_LEN_OFFSET: usize = META_BLOB_PAGE_OFFSET + 4;
pub const META_BLOB_CRC_OFFSET: usize = META_BLOB_LEN_OFFSET + 8;
pub const META_CRC_OFFSET: usize = META_BLOB_CRC_OFFSET + 4;
pub const META_SIZE_BYTES: usize = META_CRC_OFFSET + 4;
const _: () = assert!(META_SIZE_BYTES <= PAGE_SIZE_BYTES);

/// Number of meta slots at the start of the page file.
pub const META_SLOTS: u32 = 2;

/// What one meta slot says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Checkpoint number: 1 for the first, increasing.
    pub checkpoint: u64,
    /// Where log replay resumes.
    pub log_segment: u64,
    pub log_offset: u64,
    pub next_sequence: u64,
    /// Pages in use in the file at the cut (the high-water mark).
    pub page_count: PageId,
    pub blob_page: PageId,
    pub blob_len: u64,
    pub blob_crc: u32,
}

/// The state of one slot as read.
#[derive(Debug)]
pub enum Slot {
    /// All zeros: never written.
    Empty,
    Valid(Meta),
    /// Written but failing a check (torn or corrupt); the reason.
    Invalid(&'static str),
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; PAGE_SIZE_BYTES];
        b[META_MAGIC_OFFSET..META_VERSION_OFFSET].copy_from_slice(META_MAGIC);
        put32(&mut b, META_VERSION_OFFSET, META_FORMAT_VERSION);
        put64(&mut b, META_CHECKPOINT_OFFSET, self.checkpoint);
        put64(&mut b, META_LOG_SEGMENT_OFFSET, self.log_segment);
        put64(&mut b, META_LOG_OFFSET_OFFSET, self.log_offset);
        put64(&mut b, META_NEXT_SEQUENCE_OFFSET, self.next_sequence);
        put32(&mut b, META_PAGE_COUNT_OFFSET, self.page_count);
        put32(&mut b, META_BLOB_PAGE_OFFSET, self.blob_page);
        put64(&mut b, META_BLOB_LEN_OFFSET, self.blob_len);
        put32(&mut b, META_BLOB_CRC_OFFSET, self.blob_crc);
        let crc = crc32fast::hash(&b[..META_CRC_OFFSET]);
        put32(&mut b, META_CRC_OFFSET, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Slot {
        if b.len() < META_SIZE_BYTES {
            return Slot::Invalid("meta slot shorter than its layout");
        }
        if b.iter().all(|&x| x == 0) {
            return Slot::Empty;
        }
        if crc32fast::hash(&b[..META_CRC_OFFSET]) != get32(b, META_CRC_OFFSET) {
            return Slot::Invalid("meta checksum mismatch");
        }
        if &b[META_MAGIC_OFFSET..META_VERSION_OFFSET] != META_MAGIC {
            return Slot::Invalid("bad meta magic");
        }
        if get32(b, META_VERSION_OFFSET) != META_FORMAT_VERSION {
            return Slot::Invalid("unsupported page file format version");
        }
        if get32(b, META_RESERVED_OFFSET) != 0 {
            return Slot::Invalid("nonzero reserved bytes in the meta slot");
        }
        Slot::Valid(Meta {
            checkpoint: u64_at(b, META_CHECKPOINT_OFFSET),
            log_segment: u64_at(b, META_LOG_SEGMENT_OFFSET),
            log_offset: u64_at(b, META_LOG_OFFSET_OFFSET),
            next_sequence: u64_at(b, META_NEXT_SEQUENCE_OFFSET),
            page_count: get32(b, META_PAGE_COUNT_OFFSET),
            blob_page: get32(b, META_BLOB_PAGE_OFFSET),
            blob_len: u64_at(b, META_BLOB_LEN_OFFSET),
            blob_crc: get32(b, META_BLOB_CRC_OFFSET),
        })
    }
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn get32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta {
            checkpoint: 7,
            log_segment: 3,
            log_offset: 4096,
            next_sequence: 99,
            page_count: 1234,
            blob_page: 1200,
            blob_len: 5000,
            blob_crc: 0xdead_beef,
        }
    }

    #[test]
    fn round_trip() {
        let m = sample();
        match Meta::decode(&m.encode()) {
            Slot::Valid(back) => assert_eq!(back, m),
            other => panic!("{other:?}"),
        }
        assert!(matches!(Meta::decode(&[0u8; PAGE_SIZE_BYTES]), Slot::Empty));
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let bytes = sample().encode();
        for i in 0..META_SIZE_BYTES * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(matches!(Meta::decode(&b), Slot::Invalid(_)), "bit {i}");
        }
    }
}
