//! A B+tree of 4 KiB slotted pages (`page`) kept in the page file and reached through the
//! `Pager`: byte-string keys (encoded index keys with their RecordId suffix, or a RecordId)
//! mapped to short byte values (a document's location, or nothing). Leaves hold every entry;
//! internal nodes hold separators, each the shortest prefix of its right subtree's first key that
//! still sorts above the left subtree (suffix truncation keeps internal nodes wide). Keys longer
//! than `KEY_INLINE_SIZE_MAX` live in a chain of overflow pages that the cell names.
//!
//! A `Tree` is only a handle (root page and counters); the caller serialises access to one tree
//! (the collection lock): many readers or one writer. Changes follow the pager's copy-on-write
//! rule: a mutation first makes the root-to-leaf path writable top-down (`make_writable`), and a
//! page that the last checkpoint references is copied and its parent repointed. Leaves are not
//! linked to each other (a link would force copying neighbours); scans keep a path instead.
//!
//! Invariants (`check`): keys strictly ascending in each node and across leaves; a child's keys
//! lie in [its separator, the next separator); all leaves at one depth; no leaf but the root is
//! empty; every internal node has at least one separator; `len`, `pages` and `overflow_keys`
//! match what the pages hold. Deletion merges an underfull node (under a quarter page) into a
//! sibling when both fit one page, otherwise moves cells across; nodes may stay underfull (lazy),
//! never empty.

mod build;
mod check;
mod mutate;
pub mod page;
mod scan;

pub use check::BTreeError;
pub use page::{KEY_INLINE_SIZE_MAX, PAGE_SIZE_BYTES, VALUE_SIZE_MAX};

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::error::{Result, StorageError};
use crate::pager::{PageId, PageRef, Pager};
use page::{KIND_LEAF, KIND_OVERFLOW, KeyRepr, NONE, OVERFLOW_PAYLOAD_BYTES, Page};

/// Deeper than any tree of 4 KiB pages can grow; a longer path means a cycle or corruption.
pub const DEPTH_MAX: usize = 32;

/// A root-to-leaf descent: the internal pages passed (with the child index taken and their
/// frames), and the leaf.
pub(crate) struct Descent {
    pub steps: Vec<(PageId, usize)>,
    pub frames: Vec<PageRef>,
    pub leaf: PageId,
    pub leaf_frame: PageRef,
}

/// The set of pages a tree owns, kept up to date while it is built so that a checkpoint taken
/// meanwhile can list them for recovery to free (a build not yet committed is in no catalog).
#[derive(Clone, Default)]
pub struct PageTracker(Arc<Mutex<HashSet<PageId>>>);

impl PageTracker {
    fn add(&self, id: PageId) {
        if let Ok(mut s) = self.0.lock() {
            s.insert(id);
        }
    }
    fn remove(&self, id: PageId) {
        if let Ok(mut s) = self.0.lock() {
            s.remove(&id);
        }
    }
    /// The pages owned now.
    pub fn pages(&self) -> Vec<PageId> {
        self.0
            .lock()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for PageTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PageTracker")
    }
}

/// A tree's handle: where its root is and what it holds. The pages live in the pager.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    pub root: PageId,
    /// Entries.
    pub len: u64,
    /// Pages owned: nodes and overflow chains.
    pub pages: u64,
    /// Cells (leaf or separator) whose key lives in an overflow chain.
    pub overflow_keys: u64,
    /// Set while the tree is being built.
    pub tracker: Option<PageTracker>,
}

impl Tree {
    /// A new empty tree (one empty leaf).
    pub fn create(pager: &Pager) -> Result<Tree> {
        let mut t = Tree::default();
        t.root = t.alloc(pager, KIND_LEAF)?.0;
        Ok(t)
    }

    /// Like `create`, with every page it will own tracked.
    pub fn create_tracked(pager: &Pager) -> Result<Tree> {
        let mut t = Tree {
            tracker: Some(PageTracker::default()),
            ..Tree::default()
        };
        t.root = t.alloc(pager, KIND_LEAF)?.0;
        Ok(t)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the pages the tree owns.
    pub fn size_bytes(&self) -> u64 {
        self.pages * PAGE_SIZE_BYTES as u64
    }

    fn alloc(&mut self, pager: &Pager, kind: u8) -> Result<(PageId, PageRef)> {
        self.alloc_with(pager, Page::new(kind))
    }

    fn alloc_with(&mut self, pager: &Pager, page: Page) -> Result<(PageId, PageRef)> {
        let (id, f) = pager.allocate_page(page)?;
        self.pages += 1;
        if let Some(t) = &self.tracker {
            t.add(id);
        }
        Ok((id, f))
    }

    fn free(&mut self, pager: &Pager, id: PageId) -> Result<()> {
        pager.free(id)?;
        self.pages = self.pages.saturating_sub(1);
        if let Some(t) = &self.tracker {
            t.remove(id);
        }
        Ok(())
    }

    /// `id` (whose frame is `frame`) or its writable copy (see `Pager::write_frame`).
    fn writable(&mut self, pager: &Pager, id: PageId, frame: PageRef) -> Result<(PageId, PageRef)> {
        let (new, f) = pager.write_frame(id, frame)?;
        if new != id
            && let Some(t) = &self.tracker
        {
            t.remove(id);
            t.add(new);
        }
        Ok((new, f))
    }

    /// Makes child `id` of `parent` (at `index`; `None` for the root) writable, repointing the
    /// parent (which must be writable already) at a copy.
    fn writable_child(
        &mut self,
        pager: &Pager,
        parent: Option<(&PageRef, usize)>,
        id: PageId,
        frame: PageRef,
    ) -> Result<(PageId, PageRef)> {
        let (new, f) = self.writable(pager, id, frame)?;
        if new != id {
            match parent {
                None => self.root = new,
                Some((p, index)) => p.write().set_child(index, new),
            }
        }
        Ok((new, f))
    }

    /// Makes every page of `path` (whose frames are `frames`) and then the leaf writable, from
    /// the root down; ids and frames are updated to the writable pages.
    fn make_writable(&mut self, pager: &Pager, path: &mut Descent) -> Result<()> {
        for i in 0..path.steps.len() {
            let (id, index) = path.steps[i];
            let frame = path.frames[i].clone();
            let parent = if i == 0 {
                None
            } else {
                Some((&path.frames[i - 1], path.steps[i - 1].1))
            };
            let parent = parent.map(|(f, ix)| (f.clone(), ix));
            let (new, f) =
                self.writable_child(pager, parent.as_ref().map(|(f, ix)| (f, *ix)), id, frame)?;
            path.steps[i] = (new, index);
            path.frames[i] = f;
        }
        let parent = path
            .frames
            .last()
            .cloned()
            .zip(path.steps.last().map(|s| s.1));
        let (leaf, leaf_frame) = self.writable_child(
            pager,
            parent.as_ref().map(|(f, ix)| (f, *ix)),
            path.leaf,
            path.leaf_frame.clone(),
        )?;
        path.leaf = leaf;
        path.leaf_frame = leaf_frame;
        Ok(())
    }

    /// The value stored under `key`.
    pub fn get(&self, pager: &Pager, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let d = self.find_leaf(pager, key, false)?;
        let page = d.leaf_frame.read();
        match search(pager, &page, key)? {
            Ok(slot) => Ok(page.cell(slot).map(|c| c.value.to_vec())),
            Err(_) => Ok(None),
        }
    }

    /// Levels from root to leaves (1 when the root is a leaf).
    pub fn depth(&self, pager: &Pager) -> Result<usize> {
        let mut depth = 1;
        let mut id = self.root;
        loop {
            let frame = pager.read(id)?;
            let page = frame.read();
            if page.is_leaf() {
                return Ok(depth);
            }
            if depth >= DEPTH_MAX {
                return Err(corrupt(id, "tree deeper than the limit"));
            }
            id = page.child(0);
            depth += 1;
        }
    }

    /// Descends to the leaf covering `key`; with `record`, keeps each (internal page, child
    /// index) passed and its frame.
    fn find_leaf(&self, pager: &Pager, key: &[u8], record: bool) -> Result<Descent> {
        let mut id = self.root;
        let mut steps = Vec::new();
        let mut frames = Vec::new();
        for _ in 0..DEPTH_MAX {
            let frame = pager.read(id)?;
            let (index, child) = {
                let page = frame.read();
                if page.is_leaf() {
                    drop(page);
                    return Ok(Descent {
                        steps,
                        frames,
                        leaf: id,
                        leaf_frame: frame,
                    });
                }
                let index = child_index(pager, &page, key)?;
                (index, page.child(index))
            };
            if record {
                steps.push((id, index));
                frames.push(frame);
            }
            id = child;
        }
        Err(corrupt(id, "tree deeper than the limit"))
    }

    /// The key part of a new cell, moving a long key into a new overflow chain.
    fn store_key(&mut self, pager: &Pager, key: &[u8]) -> Result<Vec<u8>> {
        if key.len() <= KEY_INLINE_SIZE_MAX {
            return Ok(page::key_part(key, None));
        }
        // Written back to front so each page can name the next one as it is made.
        let mut next = NONE;
        let chunks: Vec<&[u8]> = key.chunks(OVERFLOW_PAYLOAD_BYTES).collect();
        for chunk in chunks.iter().rev() {
            let mut p = Page::new(KIND_OVERFLOW);
            p.set_link(next);
            p.set_payload(chunk);
            next = self.alloc_with(pager, p)?.0;
        }
        self.overflow_keys += 1;
        Ok(page::key_part(key, Some(next)))
    }

    /// Frees the overflow chain a removed cell owned, if any.
    fn release_key(&mut self, pager: &Pager, cell_bytes: &[u8], leaf: bool) -> Result<()> {
        let Some(cell) = page::parse_cell(cell_bytes, leaf) else {
            return Ok(());
        };
        if let KeyRepr::Overflow { first, len } = cell.key {
            for id in overflow_chain(pager, first, len)? {
                self.free(pager, id)?;
            }
            self.overflow_keys = self.overflow_keys.saturating_sub(1);
        }
        Ok(())
    }
}

pub(crate) fn corrupt(id: PageId, why: &str) -> StorageError {
    StorageError::corruption(
        crate::pager::PAGE_FILE_NAME,
        u64::from(id) * PAGE_SIZE_BYTES as u64,
        why,
    )
}

/// The pages of the overflow chain starting at `first` for a key of `len` bytes.
pub(crate) fn overflow_chain(pager: &Pager, first: PageId, len: usize) -> Result<Vec<PageId>> {
    let n = len.div_ceil(OVERFLOW_PAYLOAD_BYTES);
    let mut ids = Vec::with_capacity(n);
    let mut id = first;
    for _ in 0..n {
        if id == NONE {
            return Err(corrupt(first, "overflow chain shorter than its key"));
        }
        ids.push(id);
        let frame = pager.read(id)?;
        let page = frame.read();
        if page.kind() != KIND_OVERFLOW {
            return Err(corrupt(id, "overflow chain reaches a page of another kind"));
        }
        id = page.link();
    }
    Ok(ids)
}

/// The bytes of a key, wherever they are stored.
pub(crate) fn resolve<'a>(pager: &Pager, key: KeyRepr<'a>) -> Result<Cow<'a, [u8]>> {
    match key {
        KeyRepr::Inline(bytes) => Ok(Cow::Borrowed(bytes)),
        KeyRepr::Overflow { first, len } => {
            let mut out = Vec::with_capacity(len);
            for id in overflow_chain(pager, first, len)? {
                let frame = pager.read(id)?;
                let page = frame.read();
                let want = (len - out.len()).min(OVERFLOW_PAYLOAD_BYTES);
                out.extend_from_slice(&page.payload()[..want]);
            }
            Ok(Cow::Owned(out))
        }
    }
}

/// The key of a cell given as bytes.
pub(crate) fn cell_key<'a>(pager: &Pager, cell: &'a [u8], leaf: bool) -> Result<Cow<'a, [u8]>> {
    match page::parse_cell(cell, leaf) {
        Some(c) => resolve(pager, c.key),
        None => Err(corrupt(NONE, "malformed cell")),
    }
}

/// Binary search in one node: Ok(slot) when found, Err(insertion slot) otherwise.
pub(crate) fn search(
    pager: &Pager,
    page: &Page,
    key: &[u8],
) -> Result<std::result::Result<usize, usize>> {
    let (mut low, mut high) = (0, page.count());
    while low < high {
        let mid = (low + high) / 2;
        let key_at = page
            .key_at(mid)
            .ok_or_else(|| corrupt(NONE, "malformed cell"))?;
        let ordering = match key_at {
            KeyRepr::Inline(bytes) => bytes.cmp(key),
            repr => resolve(pager, repr)?.as_ref().cmp(key),
        };
        match ordering {
            Ordering::Less => low = mid + 1,
            Ordering::Greater => high = mid,
            Ordering::Equal => return Ok(Ok(mid)),
        }
    }
    Ok(Err(low))
}

/// Which child of an internal node covers `key`.
pub(crate) fn child_index(pager: &Pager, page: &Page, key: &[u8]) -> Result<usize> {
    Ok(match search(pager, page, key)? {
        Ok(slot) => slot + 1,
        Err(slot) => slot,
    })
}
