//! Bulk build for index creation: sorted entries are packed into leaves left to right, then each
//! level of internal nodes is packed over the one below, with no per-key descent or split. Each
//! page is filled in memory and handed to the pager complete, and never changed afterwards, so a
//! checkpoint cut can come at any moment of a build.

use super::check::BTreeError;
use super::mutate::{shortest_separator, split_internal_cell};
use super::page::{self, CELL_AREA_SIZE_BYTES, KIND_INTERNAL, KIND_LEAF, Page};
use super::{PageTracker, Tree};
use crate::error::{Result, StorageError};
use crate::pager::{PageId, Pager};

/// (separator key part, page) entries of one level of internal nodes being packed.
type Level = Vec<(Vec<u8>, PageId)>;

/// Bulk-built pages are filled to 15/16, leaving room for some later inserts before splits.
const BULK_FILL_SIZE_BYTES: usize = CELL_AREA_SIZE_BYTES / 16 * 15;

fn fits(page: &Page, cell: &[u8]) -> bool {
    page.count() == 0
        || page.used_bytes() + cell.len() + page::SLOT_SIZE_BYTES <= BULK_FILL_SIZE_BYTES
}

impl Tree {
    /// Builds a tree from strictly ascending keys; out-of-order or repeated keys are an error.
    /// With `tracker`, every page is recorded as it is made.
    pub fn bulk_build(
        pager: &Pager,
        sorted: impl IntoIterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        tracker: Option<PageTracker>,
    ) -> Result<Tree> {
        let mut tree = Tree {
            tracker,
            ..Tree::default()
        };
        // (separator key part, page) for every leaf after the first.
        let mut level: Vec<(Vec<u8>, PageId)> = Vec::new();
        let mut leftmost = None;
        // The separator in front of the leaf being filled (none for the first leaf).
        let mut separator: Option<Vec<u8>> = None;
        let mut current = Page::new(KIND_LEAF);
        let mut previous: Option<Vec<u8>> = None;
        for entry in sorted {
            let (key, value) = entry?;
            if previous.as_ref().is_some_and(|p| *p >= key) {
                return Err(StorageError::InvalidIndex(
                    BTreeError::Unsorted(tree.len).to_string(),
                ));
            }
            if value.len() > page::VALUE_SIZE_MAX {
                return Err(StorageError::LimitExceeded("B+tree value too long".into()));
            }
            let key_part = tree.store_key(pager, &key)?;
            let cell = page::leaf_cell(&key_part, &value);
            if !fits(&current, &cell) {
                let full = std::mem::replace(&mut current, Page::new(KIND_LEAF));
                let id = tree.alloc_with(pager, full)?.0;
                match separator.take() {
                    Some(s) => level.push((s, id)),
                    None => leftmost = Some(id),
                }
                let between = shortest_separator(previous.as_deref().unwrap_or(&[]), &key);
                separator = Some(tree.store_key(pager, &between)?);
            }
            let count = current.count();
            current.insert_cell(count, &cell);
            tree.len += 1;
            previous = Some(key);
        }
        let last = tree.alloc_with(pager, current)?.0;
        let mut leftmost = match separator {
            Some(s) => {
                level.push((s, last));
                leftmost.unwrap_or(last)
            }
            None => last,
        };
        while !level.is_empty() {
            let (first, up) = tree.pack_level(pager, leftmost, std::mem::take(&mut level))?;
            leftmost = first;
            level = up;
        }
        tree.root = leftmost;
        Ok(tree)
    }

    /// Packs one level of internal nodes over `leftmost` and `children`; returns the new level's
    /// first node and the (separator, node) entries for the level above.
    fn pack_level(
        &mut self,
        pager: &Pager,
        leftmost: PageId,
        children: Vec<(Vec<u8>, PageId)>,
    ) -> Result<(PageId, Level)> {
        // Nodes are filled in memory first so that the last one can borrow from its neighbour.
        let mut nodes: Vec<(Option<Vec<u8>>, Page)> = Vec::new();
        let mut node = Page::new(KIND_INTERNAL);
        node.set_link(leftmost);
        let mut pushed_up: Option<Vec<u8>> = None;
        for (key_part, child) in children {
            let cell = page::internal_cell(&key_part, child);
            if fits(&node, &cell) {
                let count = node.count();
                node.insert_cell(count, &cell);
                continue;
            }
            let mut next = Page::new(KIND_INTERNAL);
            next.set_link(child);
            nodes.push((
                pushed_up.replace(key_part),
                std::mem::replace(&mut node, next),
            ));
        }
        if node.count() == 0
            && let Some((_, previous)) = nodes.last_mut()
        {
            // Give the last node one cell from its left neighbour: only the root may be an
            // internal node without separators, and it never stays one.
            let last = previous.count() - 1;
            if let Some(cell) = previous.cell_bytes(last).map(<[u8]>::to_vec) {
                previous.remove_cell(last);
                previous.compact();
                let (key_part, child) = split_internal_cell(&cell);
                let old_leftmost = node.link();
                node.set_link(child);
                if let Some(up) = pushed_up.replace(key_part) {
                    node.insert_cell(0, &page::internal_cell(&up, old_leftmost));
                }
            }
        }
        nodes.push((pushed_up, node));
        let mut first = None;
        let mut up = Vec::new();
        for (separator, page) in nodes {
            let id = self.alloc_with(pager, page)?.0;
            match separator {
                Some(s) => up.push((s, id)),
                None => first = Some(id),
            }
        }
        Ok((first.unwrap_or(leftmost), up))
    }
}
