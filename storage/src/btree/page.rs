//! The 4 KiB slotted page every B+tree node lives in, and the cells inside it. A page is a
//! header, a slot array of u16 cell offsets growing up from the header (kept in key order), and
//! cells packed down from the page end. Removing a cell only drops its slot and counts its bytes
//! as dead; `compact` rewrites the cells when the space is needed. This module knows nothing of
//! tree shape; every read of page bytes is bounds-checked so a corrupt page yields `None`.
//!
//! | offset | size | field                                                    |
//! |--------|------|----------------------------------------------------------|
//! | 0      | 1    | kind: 1 leaf, 2 internal                                 |
//! | 1      | 1    | reserved (0)                                             |
//! | 2      | 2    | cell count (u16 LE)                                      |
//! | 4      | 2    | cell area start (u16 LE; cells fill [start, 4096))      |
//! | 6      | 2    | dead cell bytes (u16 LE)                                 |
//! | 8      | 4    | leaf: previous leaf; internal: leftmost child (u32 LE)   |
//! | 12     | 4    | leaf: next leaf; internal: unused (u32 LE, NONE = !0)    |
//! | 16     | 2×n  | slots: cell offsets (u16 LE) in key order                |
//!
//! Cell: `varint(key_len << 1 | overflow)`, then the key bytes, or for an overflow key a u32 LE
//! index into the tree's overflow area; then a leaf's value as a varint or an internal node's
//! child page as u32 LE. Varints are LEB128.

pub const PAGE_SIZE_BYTES: usize = 4096;
const KIND_OFFSET: usize = 0;
const COUNT_OFFSET: usize = KIND_OFFSET + 2;
const CELL_START_OFFSET: usize = COUNT_OFFSET + 2;
const DEAD_OFFSET: usize = CELL_START_OFFSET + 2;
const LINK_A_OFFSET: usize = DEAD_OFFSET + 2;
const LINK_B_OFFSET: usize = LINK_A_OFFSET + 4;
pub const HEADER_SIZE_BYTES: usize = LINK_B_OFFSET + 4;
pub const SLOT_SIZE_BYTES: usize = 2;
/// Keys longer than this live in the overflow area so that a page always holds several cells.
pub const KEY_INLINE_SIZE_MAX: usize = PAGE_SIZE_BYTES / 4 - 32;
// A page must hold at least three maximal inline cells so that splits always leave both halves
// non-empty and an internal split has a middle cell to push up.
const _: () = assert!(3 * (KEY_INLINE_SIZE_MAX + 32) < PAGE_SIZE_BYTES - HEADER_SIZE_BYTES);
/// The page id standing for "no page" in links.
pub const NONE: u32 = u32::MAX;
pub const KIND_LEAF: u8 = 1;
pub const KIND_INTERNAL: u8 = 2;
const OVERFLOW_REF_SIZE_BYTES: usize = 4;
const CHILD_SIZE_BYTES: usize = 4;
const VARINT_SIZE_MAX: usize = 10;

/// Where a cell's key is: in the page, or in the overflow area (index, full length).
#[derive(Debug, Clone, Copy)]
pub enum KeyRepr<'a> {
    Inline(&'a [u8]),
    Overflow { id: u32, len: usize },
}

/// A parsed cell: key, payload (leaf value or child page id), and the cell's byte length.
#[derive(Debug, Clone, Copy)]
pub struct Cell<'a> {
    pub key: KeyRepr<'a>,
    pub payload: u64,
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

    pub fn reset(&mut self, kind: u8) {
        self.bytes[KIND_OFFSET] = kind;
        self.set_u16(COUNT_OFFSET, 0);
        self.set_cell_start(PAGE_SIZE_BYTES);
        self.set_u16(DEAD_OFFSET, 0);
        self.set_link_a(NONE);
        self.set_link_b(NONE);
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

    pub fn count(&self) -> usize {
        self.u16_at(COUNT_OFFSET)
    }

    pub fn cell_start(&self) -> usize {
        // 4096 is stored as 0 would be ambiguous; u16 holds 4096 fine.
        self.u16_at(CELL_START_OFFSET)
    }

    fn set_cell_start(&mut self, value: usize) {
        self.set_u16(CELL_START_OFFSET, value);
    }

    pub fn dead(&self) -> usize {
        self.u16_at(DEAD_OFFSET)
    }

    /// Leaf: previous leaf. Internal: leftmost child.
    pub fn link_a(&self) -> u32 {
        self.u32_at(LINK_A_OFFSET)
    }

    pub fn set_link_a(&mut self, id: u32) {
        self.bytes[LINK_A_OFFSET..LINK_A_OFFSET + 4].copy_from_slice(&id.to_le_bytes());
    }

    /// Leaf: next leaf.
    pub fn link_b(&self) -> u32 {
        self.u32_at(LINK_B_OFFSET)
    }

    pub fn set_link_b(&mut self, id: u32) {
        self.bytes[LINK_B_OFFSET..LINK_B_OFFSET + 4].copy_from_slice(&id.to_le_bytes());
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

    /// The raw bytes of cell `i`.
    pub fn cell_bytes(&self, i: usize) -> Option<&[u8]> {
        let cell = self.cell(i)?;
        let start = self.slot(i);
        self.bytes.get(start..start + cell.len)
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

    /// Rewrites the page to hold exactly `cells`, keeping kind and links.
    pub fn rebuild(&mut self, cells: &[Vec<u8>]) -> bool {
        let (a, b, kind) = (self.link_a(), self.link_b(), self.kind());
        self.reset(kind);
        self.set_link_a(a);
        self.set_link_b(b);
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
        let id = u32::from_le_bytes(raw.try_into().ok()?);
        KeyRepr::Overflow { id, len: key_len }
    } else {
        let raw = bytes.get(at..at.checked_add(key_len)?)?;
        at += key_len;
        KeyRepr::Inline(raw)
    };
    let key_part_len = at;
    let payload = if leaf {
        let (value, used) = read_varint(bytes.get(at..)?)?;
        at += used;
        value
    } else {
        let raw = bytes.get(at..at + CHILD_SIZE_BYTES)?;
        at += CHILD_SIZE_BYTES;
        u64::from(u32::from_le_bytes(raw.try_into().ok()?))
    };
    Some(Cell {
        key,
        payload,
        len: at,
        key_part_len,
    })
}

/// The key part of a cell: header plus inline key, or header plus overflow reference.
pub fn key_part(key: &[u8], overflow_id: Option<u32>) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len().min(KEY_INLINE_SIZE_MAX) + VARINT_SIZE_MAX);
    let flag = u64::from(overflow_id.is_some());
    write_varint(&mut out, ((key.len() as u64) << 1) | flag);
    match overflow_id {
        Some(id) => out.extend_from_slice(&id.to_le_bytes()),
        None => out.extend_from_slice(key),
    }
    out
}

pub fn leaf_cell(key_part: &[u8], value: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_part.len() + VARINT_SIZE_MAX);
    out.extend_from_slice(key_part);
    write_varint(&mut out, value);
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

pub fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(VARINT_SIZE_MAX).enumerate() {
        value |= u64::from(b & 0x7F).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}
