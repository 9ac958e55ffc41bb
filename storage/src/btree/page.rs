//! The 4 KiB slotted page every B+tree node lives in, and the cells inside it. A page is a
//! header, a slot array of u16 cell offsets growing up from the header (kept in key order), and
//! cells packed down from the page end. Removing a cell only drops its slot and counts its bytes
//! as dead; `compact` rewrites the cells when the space is needed. This module knows nothing of
//! tree shape; every read of page bytes is bounds-checked so a corrupt page yields `None`.
//!
//! | offset | size | field                                                      |
//! |--------|------|------------------------------------------------------------|
//! | 0      | 1    | kind: 1 leaf, 2 internal, 3 overflow, 4 checkpoint blob    |
//! | 1      | 1    | reserved (0)                                               |
//! | 2      | 2    | cell count (u16 LE)                                        |
//! | 4      | 2    | cell area start (u16 LE; cells fill [start, 4096))        |
//! | 6      | 2    | dead cell bytes (u16 LE)                                   |
//! | 8      | 4    | internal: leftmost child; overflow: next page (u32 LE)     |
//! | 12     | 4    | crc32 of the page id (u32 LE) and every other page byte    |
//! | 16     | 2×n  | slots: cell offsets (u16 LE) in key order                  |
//!
//! Cell: `varint(key_len << 1 | overflow)`, then the key bytes, or for an overflow key the u32 LE
//! id of the first page of its overflow chain; then a leaf's value as `varint(len)` and bytes,
//! or an internal node's child page as u32 LE. Varints are LEB128. An overflow page holds key
//! bytes from offset 16 to the page end and links to the next page of the chain.

pub const PAGE_SIZE_BYTES: usize = 4096;
const KIND_OFFSET: usize = 0;
const RESERVED_OFFSET: usize = KIND_OFFSET + 1;
const COUNT_OFFSET: usize = RESERVED_OFFSET + 1;
const CELL_START_OFFSET: usize = COUNT_OFFSET + 2;
const DEAD_OFFSET: usize = CELL_START_OFFSET + 2;
const LINK_OFFSET: usize = DEAD_OFFSET + 2;
const CRC_OFFSET: usize = LINK_OFFSET + 4;
pub const HEADER_SIZE_BYTES: usize = CRC_OFFSET + 4;
pub const SLOT_SIZE_BYTES: usize = 2;
/// Keys longer than this live in an overflow chain so that a page always holds several cells.
pub const KEY_INLINE_SIZE_MAX: usize = PAGE_SIZE_BYTES / 4 - 32;
/// Longest leaf value (values are small: a document location, or nothing).
pub const VALUE_SIZE_MAX: usize = 64;
// A page must hold at least three maximal inline cells so that splits always leave both halves
// non-empty and an internal split has a middle cell to push up.
const _: () =
    assert!(3 * (KEY_INLINE_SIZE_MAX + VALUE_SIZE_MAX + 32) < PAGE_SIZE_BYTES - HEADER_SIZE_BYTES);
/// Key bytes one overflow page carries.
pub const OVERFLOW_PAYLOAD_BYTES: usize = PAGE_SIZE_BYTES - HEADER_SIZE_BYTES;
/// The page id standing for "no page" in links.
pub const NONE: u32 = u32::MAX;
pub const KIND_LEAF: u8 = 1;
pub const KIND_INTERNAL: u8 = 2;
pub const KIND_OVERFLOW: u8 = 3;
pub const KIND_BLOB: u8 = 4;
const OVERFLOW_REF_SIZE_BYTES: usize = 4;
const CHILD_SIZE_BYTES: usize = 4;
const VARINT_SIZE_MAX: usize = 10;

/// Where a cell's key is: in the page, or in an overflow chain (first page, full length).
#[derive(Debug, Clone, Copy)]
pub enum KeyRepr<'a> {
    Inline(&'a [u8]),
    Overflow { first: u32, len: usize },
}

/// A parsed cell: key, a leaf's value or an internal node's child, and the cell's byte length.
#[derive(Debug, Clone, Copy)]
pub struct Cell<'a> {
    pub key: KeyRepr<'a>,
    /// Leaf value (empty for internal cells).
    pub value: &'a [u8],
    /// Child page (internal cells only; NONE for leaves).
    pub child: u32,
    pub len: usize,
    /// Bytes of the key header and key (or overflow ref): the part shared by leaf and internal.
    pub key_part_len: usize,
}

#[derive(Clone)]
pub struct Page {
    bytes: Box<[u8; PAGE_SIZE_BYTES]>,
}

impl Page {
    pub fn new(kind: u8) -> Page {
        let mut page = Page {
            bytes: Box::new([0u8; PAGE_SIZE_BYTES]),
        };
        page.reset(kind);
        page
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<Page> {
        let array: [u8; PAGE_SIZE_BYTES] = bytes.try_into().ok()?;
        Some(Page {
            bytes: Box::new(array),
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..]
    }

    pub fn into_bytes(self) -> Box<[u8; PAGE_SIZE_BYTES]> {
        self.bytes
    }

    pub fn reset(&mut self, kind: u8) {
        self.bytes.fill(0);
        self.bytes[KIND_OFFSET] = kind;
        self.set_cell_start(PAGE_SIZE_BYTES);
        self.set_link(NONE);
    }

    fn u16_at(&self, at: usize) -> usize {
        usize::from(u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]]))
    }

    fn set_u16(&mut self, at: usize, value: usize) {
        // Every stored quantity is <= PAGE_SIZE_BYTES, which fits a u16.
        self.bytes[at..at + 2].copy_from_slice(&(value as u16).to_le_bytes());
    }

    fn u32_at(&self, at: usize) -> u32 {
        let mut word = [0u8; 4];
        word.copy_from_slice(&self.bytes[at..at + 4]);
        u32::from_le_bytes(word)
    }

    pub fn kind(&self) -> u8 {
        self.bytes[KIND_OFFSET]
    }

    pub fn is_leaf(&self) -> bool {
        self.kind() == KIND_LEAF
    }

    pub fn reserved(&self) -> u8 {
        self.bytes[RESERVED_OFFSET]
    }

    pub fn count(&self) -> usize {
        self.u16_at(COUNT_OFFSET)
    }

    pub fn cell_start(&self) -> usize {
        self.u16_at(CELL_START_OFFSET)
    }

    fn set_cell_start(&mut self, value: usize) {
        self.set_u16(CELL_START_OFFSET, value);
    }

    pub fn dead(&self) -> usize {
        self.u16_at(DEAD_OFFSET)
    }

    /// Internal: leftmost child. Overflow: next page of the chain.
    pub fn link(&self) -> u32 {
        self.u32_at(LINK_OFFSET)
    }

    pub fn set_link(&mut self, id: u32) {
        self.bytes[LINK_OFFSET..LINK_OFFSET + 4].copy_from_slice(&id.to_le_bytes());
    }

    pub fn slot(&self, i: usize) -> usize {
        self.u16_at(HEADER_SIZE_BYTES + i * SLOT_SIZE_BYTES)
    }

    /// Bytes between the slot array and the cell area.
    pub fn free_space(&self) -> usize {
        let slots_end = HEADER_SIZE_BYTES + self.count() * SLOT_SIZE_BYTES;
        self.cell_start().saturating_sub(slots_end)
    }

    /// Bytes used by live cells and their slots.
    pub fn used_bytes(&self) -> usize {
        PAGE_SIZE_BYTES - HEADER_SIZE_BYTES - self.free_space() - self.dead()
    }

    /// Parses cell `i`; `None` only on a corrupt page.
    pub fn cell(&self, i: usize) -> Option<Cell<'_>> {
        if i >= self.count() {
            return None;
        }
        let start = self.slot(i);
        if start < self.cell_start() {
            return None;
        }
        parse_cell(self.bytes.get(start..)?, self.is_leaf())
    }

    /// Only the key of cell `i` (what a binary search needs); `None` only on a corrupt page.
    #[inline]
    pub fn key_at(&self, i: usize) -> Option<KeyRepr<'_>> {
        if i >= self.count() {
            return None;
        }
        let start = self.slot(i);
        if start < self.cell_start() {
            return None;
        }
        let bytes = self.bytes.get(start..)?;
        let (header, at) = read_varint(bytes)?;
        let key_len = usize::try_from(header >> 1).ok()?;
        if header & 1 == 1 {
            let raw = bytes.get(at..at + OVERFLOW_REF_SIZE_BYTES)?;
            let first = u32::from_le_bytes(raw.try_into().ok()?);
            return Some(KeyRepr::Overflow {
                first,
                len: key_len,
            });
        }
        Some(KeyRepr::Inline(bytes.get(at..at.checked_add(key_len)?)?))
    }

    /// The raw bytes of cell `i`.
    pub fn cell_bytes(&self, i: usize) -> Option<&[u8]> {
        let cell = self.cell(i)?;
        let start = self.slot(i);
        self.bytes.get(start..start + cell.len)
    }

    /// Child `index` of an internal node: 0 is the leftmost, i is cell i-1's child.
    pub fn child(&self, index: usize) -> u32 {
        if index == 0 {
            return self.link();
        }
        self.cell(index - 1).map_or(NONE, |c| c.child)
    }

    /// Points child `index` of an internal node at `id`, in place.
    pub fn set_child(&mut self, index: usize, id: u32) {
        if index == 0 {
            self.set_link(id);
            return;
        }
        let Some(cell) = self.cell(index - 1) else {
            return;
        };
        let at = self.slot(index - 1) + cell.len - CHILD_SIZE_BYTES;
        self.bytes[at..at + CHILD_SIZE_BYTES].copy_from_slice(&id.to_le_bytes());
    }

    /// Inserts a cell at slot `i`, compacting if that makes room. False if it does not fit.
    pub fn insert_cell(&mut self, i: usize, cell: &[u8]) -> bool {
        let needed = cell.len() + SLOT_SIZE_BYTES;
        if self.free_space() < needed {
            if self.free_space() + self.dead() < needed {
                return false;
            }
            self.compact();
        }
        let start = self.cell_start() - cell.len();
        self.bytes[start..start + cell.len()].copy_from_slice(cell);
        self.set_cell_start(start);
        let count = self.count();
        let slot_at = HEADER_SIZE_BYTES + i * SLOT_SIZE_BYTES;
        let slots_end = HEADER_SIZE_BYTES + count * SLOT_SIZE_BYTES;
        self.bytes
            .copy_within(slot_at..slots_end, slot_at + SLOT_SIZE_BYTES);
        self.set_u16(slot_at, start);
        self.set_u16(COUNT_OFFSET, count + 1);
        true
    }

    /// Removes slot `i`; its cell bytes become dead space.
    pub fn remove_cell(&mut self, i: usize) {
        let len = self.cell(i).map_or(0, |c| c.len);
        let count = self.count();
        let slot_at = HEADER_SIZE_BYTES + i * SLOT_SIZE_BYTES;
        let slots_end = HEADER_SIZE_BYTES + count * SLOT_SIZE_BYTES;
        self.bytes
            .copy_within(slot_at + SLOT_SIZE_BYTES..slots_end, slot_at);
        self.set_u16(COUNT_OFFSET, count - 1);
        let dead = self.dead() + len;
        self.set_u16(DEAD_OFFSET, dead);
    }

    /// Owned copies of every cell, in slot order.
    pub fn cells(&self) -> Vec<Vec<u8>> {
        (0..self.count())
            .filter_map(|i| self.cell_bytes(i).map(<[u8]>::to_vec))
            .collect()
    }

    /// Rewrites the page to hold exactly `cells`, keeping kind and link.
    pub fn rebuild(&mut self, cells: &[Vec<u8>]) -> bool {
        let (link, kind) = (self.link(), self.kind());
        self.reset(kind);
        self.set_link(link);
        cells
            .iter()
            .enumerate()
            .all(|(i, cell)| self.insert_cell(i, cell))
    }

    /// Packs live cells against the page end, dropping dead bytes.
    pub fn compact(&mut self) {
        let cells = self.cells();
        self.rebuild(&cells);
    }

    /// The payload area of an overflow or blob page.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[HEADER_SIZE_BYTES..]
    }

    /// Fills the payload area from `data` (at most `OVERFLOW_PAYLOAD_BYTES`), zeroing the rest.
    pub fn set_payload(&mut self, data: &[u8]) {
        let n = data.len().min(OVERFLOW_PAYLOAD_BYTES);
        self.bytes[HEADER_SIZE_BYTES..HEADER_SIZE_BYTES + n].copy_from_slice(&data[..n]);
        self.bytes[HEADER_SIZE_BYTES + n..].fill(0);
    }
}

fn page_crc(id: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    h.update(&bytes[..CRC_OFFSET]);
    h.update(&bytes[CRC_OFFSET + 4..]);
    h.finalize()
}

/// Stamps the checksum of page `id` into its header (just before it is written).
pub fn seal_crc(id: u32, bytes: &mut [u8; PAGE_SIZE_BYTES]) {
    let crc = page_crc(id, &bytes[..]);
    bytes[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Whether bytes read back from page `id`'s location carry its checksum.
pub fn verify_crc(id: u32, bytes: &[u8]) -> bool {
    bytes.len() == PAGE_SIZE_BYTES
        && page_crc(id, bytes).to_le_bytes()[..] == bytes[CRC_OFFSET..CRC_OFFSET + 4]
}

/// Bytes a set of cells needs in a page, slots included.
pub fn cells_size(cells: &[Vec<u8>]) -> usize {
    cells.iter().map(|c| c.len() + SLOT_SIZE_BYTES).sum()
}

/// Room for cells in an empty page.
pub const CELL_AREA_SIZE_BYTES: usize = PAGE_SIZE_BYTES - HEADER_SIZE_BYTES;

pub fn parse_cell(bytes: &[u8], leaf: bool) -> Option<Cell<'_>> {
    let (header, mut at) = read_varint(bytes)?;
    let overflow = header & 1 == 1;
    let key_len = usize::try_from(header >> 1).ok()?;
    let key = if overflow {
        let raw = bytes.get(at..at + OVERFLOW_REF_SIZE_BYTES)?;
        at += OVERFLOW_REF_SIZE_BYTES;
        let first = u32::from_le_bytes(raw.try_into().ok()?);
        KeyRepr::Overflow {
            first,
            len: key_len,
        }
    } else {
        let raw = bytes.get(at..at.checked_add(key_len)?)?;
        at += key_len;
        KeyRepr::Inline(raw)
    };
    let key_part_len = at;
    let (value, child) = if leaf {
        let (len, used) = read_varint(bytes.get(at..)?)?;
        at += used;
        let len = usize::try_from(len).ok().filter(|&n| n <= VALUE_SIZE_MAX)?;
        let value = bytes.get(at..at + len)?;
        at += len;
        (value, NONE)
    } else {
        let raw = bytes.get(at..at + CHILD_SIZE_BYTES)?;
        at += CHILD_SIZE_BYTES;
        (&[][..], u32::from_le_bytes(raw.try_into().ok()?))
    };
    Some(Cell {
        key,
        value,
        child,
        len: at,
        key_part_len,
    })
}

/// The key part of a cell: header plus inline key, or header plus overflow reference.
pub fn key_part(key: &[u8], overflow_first: Option<u32>) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len().min(KEY_INLINE_SIZE_MAX) + VARINT_SIZE_MAX);
    let flag = u64::from(overflow_first.is_some());
    write_varint(&mut out, ((key.len() as u64) << 1) | flag);
    match overflow_first {
        Some(id) => out.extend_from_slice(&id.to_le_bytes()),
        None => out.extend_from_slice(key),
    }
    out
}

pub fn leaf_cell(key_part: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_part.len() + value.len() + 1);
    out.extend_from_slice(key_part);
    write_varint(&mut out, value.len() as u64);
    out.extend_from_slice(value);
    out
}

pub fn internal_cell(key_part: &[u8], child: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_part.len() + CHILD_SIZE_BYTES);
    out.extend_from_slice(key_part);
    out.extend_from_slice(&child.to_le_bytes());
    out
}

pub fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
pub fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    // One byte is by far the common case (key lengths, value lengths).
    match bytes.first() {
        Some(&b) if b < 0x80 => Some((u64::from(b), 1)),
        _ => read_varint_long(bytes),
    }
}

fn read_varint_long(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(VARINT_SIZE_MAX).enumerate() {
        value |= u64::from(b & 0x7F).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_binds_bytes_and_location() {
        let mut p = Page::new(KIND_LEAF);
        assert!(p.insert_cell(0, &leaf_cell(&key_part(b"k", None), b"v")));
        let mut bytes = p.into_bytes();
        seal_crc(7, &mut bytes);
        assert!(verify_crc(7, &bytes[..]));
        assert!(
            !verify_crc(8, &bytes[..]),
            "a page read from the wrong place"
        );
        bytes[100] ^= 1;
        assert!(!verify_crc(7, &bytes[..]));
    }

    #[test]
    fn cells_round_trip_and_children_move() {
        let mut p = Page::new(KIND_INTERNAL);
        p.set_link(5);
        assert!(p.insert_cell(0, &internal_cell(&key_part(b"m", None), 9)));
        assert_eq!((p.child(0), p.child(1)), (5, 9));
        p.set_child(1, 11);
        p.set_child(0, 3);
        assert_eq!((p.child(0), p.child(1)), (3, 11));
        let mut l = Page::new(KIND_LEAF);
        assert!(l.insert_cell(0, &leaf_cell(&key_part(b"abc", Some(42)), &[1, 2, 3])));
        let c = l.cell(0).expect("cell");
        assert!(matches!(c.key, KeyRepr::Overflow { first: 42, len: 3 }));
        assert_eq!(c.value, &[1, 2, 3]);
    }
}
