//! A tree as one checksummed byte image, so that a restart loads indexes instead of rebuilding
//! them. Loading verifies the crc, bounds every count by the bytes present before allocating,
//! and runs the full `check`: corrupt input is an error, never a panic.
//!
//! | offset | size       | field                                                  |
//! |--------|------------|--------------------------------------------------------|
//! | 0      | 8          | magic `CAIRNBT1`                                       |
//! | 8      | 4          | format version (u32 LE) = 1                            |
//! | 12     | 4          | page count P (u32 LE)                                  |
//! | 16     | 4          | root page (u32 LE)                                     |
//! | 20     | 8          | entry count (u64 LE)                                   |
//! | 28     | 4          | free page count F (u32 LE)                             |
//! | 32     | 4          | overflow entry count O (u32 LE)                        |
//! | 36     | 4×F        | free page ids (u32 LE)                                 |
//! | …      | per entry  | overflow: length (u32 LE; !0 = free entry), key bytes  |
//! | …      | 4096×P     | pages (see `page`)                                     |
//! | end-4  | 4          | crc32 (IEEE, crc32fast) of every byte before it        |

use super::page::{PAGE_SIZE_BYTES, Page};
use super::{BTree, BTreeError};
use std::io::{self, Write};

const MAGIC: &[u8; 8] = b"CAIRNBT1";
const VERSION: u32 = 1;
const VERSION_OFFSET: usize = MAGIC.len();
const PAGE_COUNT_OFFSET: usize = VERSION_OFFSET + 4;
const ROOT_OFFSET: usize = PAGE_COUNT_OFFSET + 4;
const LEN_OFFSET: usize = ROOT_OFFSET + 4;
const FREE_COUNT_OFFSET: usize = LEN_OFFSET + 8;
const OVERFLOW_COUNT_OFFSET: usize = FREE_COUNT_OFFSET + 4;
const HEADER_SIZE_BYTES: usize = OVERFLOW_COUNT_OFFSET + 4;
const CRC_SIZE_BYTES: usize = 4;
const FREE_OVERFLOW: u32 = u32::MAX;

/// Feeds everything written into a crc.
struct Crc<W: Write> {
    inner: W,
    hasher: crc32fast::Hasher,
}

impl<W: Write> Crc<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.inner.write_all(bytes)
    }
}

impl BTree {
    pub fn to_checkpoint(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.pages.len() * PAGE_SIZE_BYTES + HEADER_SIZE_BYTES);
        // Writing into a Vec cannot fail.
        let _ = self.write_checkpoint(&mut out);
        out
    }

    /// Streams the checkpoint image into `out`.
    pub fn write_checkpoint<W: Write>(&self, out: W) -> io::Result<()> {
        let mut w = Crc {
            inner: out,
            hasher: crc32fast::Hasher::new(),
        };
        w.put(MAGIC)?;
        w.put(&VERSION.to_le_bytes())?;
        w.put(&(self.pages.len() as u32).to_le_bytes())?;
        w.put(&self.root.to_le_bytes())?;
        w.put(&self.len.to_le_bytes())?;
        w.put(&(self.free_pages.len() as u32).to_le_bytes())?;
        w.put(&(self.overflow.len() as u32).to_le_bytes())?;
        for id in &self.free_pages {
            w.put(&id.to_le_bytes())?;
        }
        let mut free_overflow = vec![false; self.overflow.len()];
        for &id in &self.overflow_free {
            if let Some(flag) = free_overflow.get_mut(id as usize) {
                *flag = true;
            }
        }
        for (key, free) in self.overflow.iter().zip(free_overflow) {
            let len = if free {
                FREE_OVERFLOW
            } else {
                key.len() as u32
            };
            w.put(&len.to_le_bytes())?;
            w.put(if free { &[] } else { key })?;
        }
        for page in &self.pages {
            w.put(page.as_bytes())?;
        }
        let crc = w.hasher.clone().finalize();
        w.inner.write_all(&crc.to_le_bytes())
    }

    /// Loads and fully validates a checkpoint image.
    pub fn from_checkpoint(bytes: &[u8]) -> Result<BTree, BTreeError> {
        let bad = |what: &str| BTreeError::Corrupt(format!("checkpoint {what}"));
        let body_len = bytes
            .len()
            .checked_sub(CRC_SIZE_BYTES)
            .filter(|&n| n >= HEADER_SIZE_BYTES)
            .ok_or_else(|| bad("is too short"))?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32fast::hash(body) != u32::from_le_bytes(array(crc)?) {
            return Err(bad("checksum does not match"));
        }
        if &body[..MAGIC.len()] != MAGIC || read_u32(body, VERSION_OFFSET)? != VERSION {
            return Err(bad("has an unknown magic or version"));
        }
        let page_count = read_u32(body, PAGE_COUNT_OFFSET)? as usize;
        let root = read_u32(body, ROOT_OFFSET)?;
        let len = u64::from_le_bytes(array(&body[LEN_OFFSET..LEN_OFFSET + 8])?);
        let free_count = read_u32(body, FREE_COUNT_OFFSET)? as usize;
        let overflow_count = read_u32(body, OVERFLOW_COUNT_OFFSET)? as usize;
        let mut at = HEADER_SIZE_BYTES;
        // Every count is bounded by the bytes it needs before anything is allocated.
        if free_count > body.len() / 4 || overflow_count > body.len() / 4 {
            return Err(bad("counts exceed its size"));
        }
        let mut free_pages = Vec::with_capacity(free_count);
        for _ in 0..free_count {
            free_pages.push(read_u32(body, at)?);
            at += 4;
        }
        let mut overflow = Vec::with_capacity(overflow_count);
        let mut overflow_free = Vec::new();
        for index in 0..overflow_count {
            let key_len = read_u32(body, at)?;
            at += 4;
            if key_len == FREE_OVERFLOW {
                overflow_free.push(index as u32);
                overflow.push(Vec::new());
                continue;
            }
            let end = at
                .checked_add(key_len as usize)
                .ok_or_else(|| bad("overflow key overruns"))?;
            overflow.push(
                body.get(at..end)
                    .ok_or_else(|| bad("overflow key overruns"))?
                    .to_vec(),
            );
            at = end;
        }
        let pages_bytes = body.get(at..).ok_or_else(|| bad("is truncated"))?;
        if page_count == 0 || pages_bytes.len() != page_count * PAGE_SIZE_BYTES {
            return Err(bad("page area has the wrong size"));
        }
        let pages = pages_bytes
            .chunks_exact(PAGE_SIZE_BYTES)
            .map(Page::from_bytes)
            .collect::<Option<Vec<Page>>>()
            .ok_or_else(|| bad("page area is malformed"))?;
        let tree = BTree {
            pages,
            free_pages,
            overflow,
            overflow_free,
            root,
            len,
        };
        tree.check()?;
        Ok(tree)
    }
}

fn array<const N: usize>(bytes: &[u8]) -> Result<[u8; N], BTreeError> {
    bytes
        .try_into()
        .map_err(|_| BTreeError::Corrupt("checkpoint field is truncated".into()))
}

fn read_u32(bytes: &[u8], at: usize) -> Result<u32, BTreeError> {
    let raw = bytes
        .get(at..at + 4)
        .ok_or_else(|| BTreeError::Corrupt("checkpoint is truncated".into()))?;
    Ok(u32::from_le_bytes(array(raw)?))
}
