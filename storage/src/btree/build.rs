//! Bulk build for index creation: sorted entries are packed into leaves left to right, then each
//! level of internal nodes is packed over the one below, with no per-key descent or split.

use super::BTree;
use super::check::BTreeError;
use super::mutate::{shortest_separator, split_internal_cell};
use super::page::{self, CELL_AREA_SIZE_BYTES, KIND_INTERNAL, KIND_LEAF};

/// Bulk-built pages are filled to 15/16, leaving room for some later inserts before splits.
const BULK_FILL_SIZE_BYTES: usize = CELL_AREA_SIZE_BYTES / 16 * 15;

impl BTree {
    /// Builds a tree from strictly ascending keys. Out-of-order or repeated keys are an error.
    pub fn bulk_build(
        sorted: impl IntoIterator<Item = (Vec<u8>, u64)>,
    ) -> Result<BTree, BTreeError> {
        let mut tree = BTree::new();
        // (separator key part, page) for every leaf after the first.
        let mut level: Vec<(Vec<u8>, u32)> = Vec::new();
        let mut current = tree.root;
        let mut previous: Option<Vec<u8>> = None;
        for (key, value) in sorted {
            if previous
                .as_ref()
                .is_some_and(|p| p.as_slice() >= key.as_slice())
            {
                return Err(BTreeError::Unsorted(tree.len));
            }
            let key_part = tree.store_key(&key);
            let cell = page::leaf_cell(&key_part, value);
            if !tree.fits_bulk(current, &cell) {
                let next = tree.allocate_page(KIND_LEAF);
                tree.link_leaf_after(current, next);
                let separator = shortest_separator(previous.as_deref().unwrap_or(&[]), &key);
                level.push((tree.store_key(&separator), next));
                current = next;
            }
            let count = tree.page(current).count();
            tree.page_mut(current).insert_cell(count, &cell);
            tree.len += 1;
            previous = Some(key);
        }
        let mut leftmost = tree.root;
        while !level.is_empty() {
            let (first, next_level) = tree.pack_level(leftmost, level);
            leftmost = first;
            level = next_level;
        }
        tree.root = leftmost;
        tree.debug_check();
        Ok(tree)
    }

    fn fits_bulk(&self, id: u32, cell: &[u8]) -> bool {
        let page = self.page(id);
        page.count() == 0
            || page.used_bytes() + cell.len() + page::SLOT_SIZE_BYTES <= BULK_FILL_SIZE_BYTES
    }

    /// Packs one level of internal nodes over `leftmost` and `children`; returns the new level's
    /// first node and the (separator, node) entries for the level above.
    fn pack_level(
        &mut self,
        leftmost: u32,
        children: Vec<(Vec<u8>, u32)>,
    ) -> (u32, Vec<(Vec<u8>, u32)>) {
        let first = self.allocate_page(KIND_INTERNAL);
        self.page_mut(first).set_link_a(leftmost);
        let mut node = first;
        let mut previous_node = None;
        let mut up: Vec<(Vec<u8>, u32)> = Vec::new();
        for (key_part, child) in children {
            let cell = page::internal_cell(&key_part, child);
            if self.fits_bulk(node, &cell) {
                let count = self.page(node).count();
                self.page_mut(node).insert_cell(count, &cell);
                continue;
            }
            let next = self.allocate_page(KIND_INTERNAL);
            self.page_mut(next).set_link_a(child);
            up.push((key_part, next));
            previous_node = Some(node);
            node = next;
        }
        if let (Some(previous), 0) = (previous_node, self.page(node).count()) {
            self.borrow_last_cell(previous, node, &mut up);
        }
        (first, up)
    }

    /// Gives the empty last node of a level one cell from its left neighbour, so that only the
    /// root is ever an internal node without separators.
    fn borrow_last_cell(&mut self, previous: u32, node: u32, up: &mut [(Vec<u8>, u32)]) {
        let last = self.page(previous).count() - 1;
        let Some(cell) = self.page(previous).cell_bytes(last).map(<[u8]>::to_vec) else {
            return;
        };
        self.page_mut(previous).remove_cell(last);
        self.page_mut(previous).compact();
        let (key_part, child) = split_internal_cell(&cell);
        let old_leftmost = self.page(node).link_a();
        self.page_mut(node).set_link_a(child);
        if let Some(entry) = up.last_mut() {
            let pushed_up = std::mem::replace(&mut entry.0, key_part);
            self.page_mut(node)
                .insert_cell(0, &page::internal_cell(&pushed_up, old_leftmost));
        }
    }
}
