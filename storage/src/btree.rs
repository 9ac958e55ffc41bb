//! An in-memory B+tree of 4 KiB slotted pages (`page`) in one flat array addressed by u32 page
//! ids: byte-string keys (encoded index keys, RecordId suffix included) mapped to u64 values.
//! Leaves hold every entry and are linked both ways for range scans; internal nodes hold
//! separators, each the shortest prefix of its right subtree's first key that still sorts above
//! the left subtree (suffix truncation keeps internal nodes wide). Keys longer than
//! `KEY_INLINE_SIZE_MAX` live in an overflow area and the cell keeps a reference.
//!
//! Invariants (`check`): keys strictly ascending in each node and across leaves; a child's keys
//! lie in [its separator, the next separator); all leaves at one depth, linked in key order both
//! ways; no leaf but the root is empty; every internal node has at least one child; `len` equals
//! the number of leaf cells; every overflow entry has exactly one owner. Deletion merges an
//! underfull node (under a quarter page) into a sibling when both fit one page, otherwise moves
//! cells across; nodes may stay underfull (lazy), never empty. Debug builds verify the whole tree
//! after each mutation while it is small (`DEBUG_CHECK_LEN_MAX`); tests call `check` on big ones.
//! The tree is not thread-safe by itself and does no I/O: `checkpoint` turns it into bytes.

mod build;
mod check;
mod checkpoint;
mod iter;
mod mutate;
mod page;

pub use check::BTreeError;
pub use iter::Range;
pub use page::{KEY_INLINE_SIZE_MAX, PAGE_SIZE_BYTES};

use page::{Cell, KeyRepr, NONE, Page};
use std::cmp::Ordering;
use std::ops::Bound;

/// Trees up to this many entries are fully checked after every mutation in debug builds.
const DEBUG_CHECK_LEN_MAX: u64 = 1_000;

/// Cloning copies every page: a full snapshot, for callers that want one.
#[derive(Clone)]
pub struct BTree {
    pages: Vec<Page>,
    free_pages: Vec<u32>,
    /// Long keys; an empty vector is a free entry (listed in `overflow_free`).
    overflow: Vec<Vec<u8>>,
    overflow_free: Vec<u32>,
    root: u32,
    len: u64,
}

impl Default for BTree {
    fn default() -> Self {
        BTree::new()
    }
}

impl BTree {
    pub fn new() -> BTree {
        BTree {
            pages: vec![Page::new(page::KIND_LEAF)],
            free_pages: Vec::new(),
            overflow: Vec::new(),
            overflow_free: Vec::new(),
            root: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held: pages, overflow keys and the bookkeeping vectors.
    pub fn memory_bytes(&self) -> usize {
        let page_bytes = self.pages.capacity() * std::mem::size_of::<Page>()
            + self.pages.len() * PAGE_SIZE_BYTES;
        let overflow_bytes: usize = self.overflow.iter().map(Vec::capacity).sum::<usize>()
            + self.overflow.capacity() * std::mem::size_of::<Vec<u8>>();
        page_bytes
            + overflow_bytes
            + (self.free_pages.capacity() + self.overflow_free.capacity()) * 4
            + std::mem::size_of::<BTree>()
    }

    /// Levels from root to leaves (1 when the root is a leaf).
    pub fn depth(&self) -> usize {
        let mut depth = 1;
        let mut id = self.root;
        while !self.page(id).is_leaf() && depth < check::DEPTH_MAX {
            id = self.page(id).link_a();
            depth += 1;
        }
        depth
    }

    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let leaf = self.find_leaf(key, |_, _| {});
        let slot = self.search(leaf, key).ok()?;
        self.page(leaf).cell(slot).map(|c| c.payload)
    }

    /// Entries with keys within the bounds, ascending or (with `reverse`) descending. To resume
    /// after a key, pass it as `Bound::Excluded` on the side the scan comes from.
    pub fn range<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Range<'a> {
        Range::new(self, lower, upper, reverse)
    }

    /// Every entry in key order.
    pub fn iter(&self) -> Range<'_> {
        self.range(Bound::Unbounded, Bound::Unbounded, false)
    }

    fn page(&self, id: u32) -> &Page {
        &self.pages[id as usize]
    }

    fn page_mut(&mut self, id: u32) -> &mut Page {
        &mut self.pages[id as usize]
    }

    /// The bytes of a key, wherever they are stored.
    fn resolve<'a>(&'a self, key: KeyRepr<'a>) -> &'a [u8] {
        match key {
            KeyRepr::Inline(bytes) => bytes,
            KeyRepr::Overflow { id, .. } => self
                .overflow
                .get(id as usize)
                .map_or(&[][..], Vec::as_slice),
        }
    }

    fn cell(&self, id: u32, slot: usize) -> Option<Cell<'_>> {
        self.page(id).cell(slot)
    }

    fn cell_key(&self, id: u32, slot: usize) -> &[u8] {
        self.cell(id, slot).map_or(&[][..], |c| self.resolve(c.key))
    }

    /// Binary search in one node: Ok(slot) when found, Err(insertion slot) otherwise.
    fn search(&self, id: u32, key: &[u8]) -> Result<usize, usize> {
        let (mut low, mut high) = (0, self.page(id).count());
        while low < high {
            let mid = (low + high) / 2;
            match self.cell_key(id, mid).cmp(key) {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// Which child of an internal node covers `key`: 0 is the leftmost, i is cell i-1's child.
    fn child_index(&self, id: u32, key: &[u8]) -> usize {
        match self.search(id, key) {
            Ok(slot) => slot + 1,
            Err(slot) => slot,
        }
    }

    fn child_at(&self, id: u32, index: usize) -> u32 {
        if index == 0 {
            return self.page(id).link_a();
        }
        self.cell(id, index - 1).map_or(NONE, |c| c.payload as u32)
    }

    /// Descends to the leaf covering `key`, reporting each (internal page, child index) passed.
    fn find_leaf(&self, key: &[u8], mut visit: impl FnMut(u32, usize)) -> u32 {
        let mut id = self.root;
        for _ in 0..check::DEPTH_MAX {
            if self.page(id).is_leaf() {
                break;
            }
            let index = self.child_index(id, key);
            visit(id, index);
            id = self.child_at(id, index);
        }
        id
    }

    fn leftmost_leaf(&self) -> u32 {
        let mut id = self.root;
        for _ in 0..check::DEPTH_MAX {
            if self.page(id).is_leaf() {
                break;
            }
            id = self.page(id).link_a();
        }
        id
    }

    fn rightmost_leaf(&self) -> u32 {
        let mut id = self.root;
        for _ in 0..check::DEPTH_MAX {
            let page = self.page(id);
            if page.is_leaf() {
                break;
            }
            id = self.child_at(id, page.count());
        }
        id
    }

    fn allocate_page(&mut self, kind: u8) -> u32 {
        if let Some(id) = self.free_pages.pop() {
            self.page_mut(id).reset(kind);
            return id;
        }
        self.pages.push(Page::new(kind));
        (self.pages.len() - 1) as u32
    }

    fn free_page(&mut self, id: u32) {
        self.page_mut(id).reset(0);
        self.free_pages.push(id);
    }

    /// The key part of a new cell, moving a long key into the overflow area.
    fn store_key(&mut self, key: &[u8]) -> Vec<u8> {
        if key.len() <= KEY_INLINE_SIZE_MAX {
            return page::key_part(key, None);
        }
        let id = match self.overflow_free.pop() {
            Some(id) => {
                self.overflow[id as usize] = key.to_vec();
                id
            }
            None => {
                self.overflow.push(key.to_vec());
                (self.overflow.len() - 1) as u32
            }
        };
        page::key_part(key, Some(id))
    }

    /// Releases the overflow entry a removed cell owned, if any.
    fn release_key(&mut self, cell_bytes: &[u8], leaf: bool) {
        if let Some(Cell {
            key: KeyRepr::Overflow { id, .. },
            ..
        }) = page::parse_cell(cell_bytes, leaf)
            && let Some(entry) = self.overflow.get_mut(id as usize)
        {
            *entry = Vec::new();
            self.overflow_free.push(id);
        }
    }

    fn debug_check(&self) {
        if cfg!(debug_assertions) && self.len <= DEBUG_CHECK_LEN_MAX {
            self.invariants();
        }
    }

    /// Panics if an invariant is broken: our own bug, never bad input (input is validated by
    /// `from_checkpoint` through `check`).
    pub fn invariants(&self) {
        if let Err(error) = self.check() {
            panic!("B+tree invariant broken: {error}");
        }
    }
}
