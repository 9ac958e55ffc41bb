//! Insertion and deletion: page splits that push separators up the recorded path, and on
//! deletion the merge of an underfull node into a sibling (or a move of cells between the two
//! when they do not fit one page), collapsing the root when it is left with one child.

use super::page::{self, CELL_AREA_SIZE_BYTES, KIND_INTERNAL, NONE};
use super::{BTree, Cell};

/// A node using fewer bytes than this after a deletion is merged or refilled.
const UNDERFULL_SIZE_BYTES: usize = page::PAGE_SIZE_BYTES / 4;

/// (internal page, index of the child taken) from the root down.
type Path = [(u32, usize)];

impl BTree {
    /// Inserts or replaces; returns the previous value for an existing key.
    pub fn insert(&mut self, key: &[u8], value: u64) -> Option<u64> {
        let mut path = Vec::new();
        let leaf = self.find_leaf(key, |id, index| path.push((id, index)));
        let previous = match self.search(leaf, key) {
            Ok(slot) => {
                let (old, key_part) = match self.cell(leaf, slot) {
                    Some(cell) => (cell.payload, self.cell_key_part(leaf, slot, cell)),
                    None => return None,
                };
                self.page_mut(leaf).remove_cell(slot);
                self.insert_into(leaf, slot, page::leaf_cell(&key_part, value), &path);
                Some(old)
            }
            Err(slot) => {
                let key_part = self.store_key(key);
                self.insert_into(leaf, slot, page::leaf_cell(&key_part, value), &path);
                self.len += 1;
                None
            }
        };
        self.debug_check();
        previous
    }

    /// Removes a key; returns its value if it was present.
    pub fn remove(&mut self, key: &[u8]) -> Option<u64> {
        let mut path = Vec::new();
        let leaf = self.find_leaf(key, |id, index| path.push((id, index)));
        let slot = self.search(leaf, key).ok()?;
        let bytes = self.page(leaf).cell_bytes(slot)?.to_vec();
        let value = page::parse_cell(&bytes, true)?.payload;
        self.page_mut(leaf).remove_cell(slot);
        self.release_key(&bytes, true);
        self.len -= 1;
        self.rebalance(leaf, &path);
        self.debug_check();
        Some(value)
    }

    fn cell_key_part(&self, id: u32, slot: usize, cell: Cell<'_>) -> Vec<u8> {
        self.page(id)
            .cell_bytes(slot)
            .map_or_else(Vec::new, |b| b[..cell.key_part_len].to_vec())
    }

    /// Puts `cell` at `slot` of node `id`, splitting up the path as needed.
    pub(super) fn insert_into(&mut self, id: u32, slot: usize, cell: Vec<u8>, path: &Path) {
        if self.page_mut(id).insert_cell(slot, &cell) {
            return;
        }
        let mut cells = self.page(id).cells();
        cells.insert(slot, cell);
        let leaf = self.page(id).is_leaf();
        let right = self.allocate_page(self.page(id).kind());
        let separator = if leaf {
            let middle = split_point(&cells, 1);
            let separator = shortest_separator(
                self.key_of_cell(&cells[middle - 1], true),
                self.key_of_cell(&cells[middle], true),
            );
            let separator = self.store_key(&separator);
            self.fill(right, &cells[middle..]);
            self.fill(id, &cells[..middle]);
            self.link_leaf_after(id, right);
            separator
        } else {
            let middle = split_point(&cells, 1).min(cells.len() - 2);
            let (key_part, child) = split_internal_cell(&cells[middle]);
            self.page_mut(right).set_link_a(child);
            self.fill(right, &cells[middle + 1..]);
            self.fill(id, &cells[..middle]);
            key_part
        };
        let separator_cell = page::internal_cell(&separator, right);
        match path.split_last() {
            Some((&(parent, index), above)) => {
                self.insert_into(parent, index, separator_cell, above)
            }
            None => {
                let root = self.allocate_page(KIND_INTERNAL);
                self.page_mut(root).set_link_a(id);
                self.page_mut(root).insert_cell(0, &separator_cell);
                self.root = root;
            }
        }
    }

    /// Rewrites node `id` with `cells` (which always fit: callers split by size).
    fn fill(&mut self, id: u32, cells: &[Vec<u8>]) {
        let fitted = self.page_mut(id).rebuild(cells);
        debug_assert!(fitted, "cells chosen to fit a page did not fit");
    }

    pub(super) fn link_leaf_after(&mut self, left: u32, right: u32) {
        let next = self.page(left).link_b();
        self.page_mut(right).set_link_a(left);
        self.page_mut(right).set_link_b(next);
        if next != NONE {
            self.page_mut(next).set_link_a(right);
        }
        self.page_mut(left).set_link_b(right);
    }

    fn unlink_leaf(&mut self, id: u32) {
        let (prev, next) = (self.page(id).link_a(), self.page(id).link_b());
        if prev != NONE {
            self.page_mut(prev).set_link_b(next);
        }
        if next != NONE {
            self.page_mut(next).set_link_a(prev);
        }
    }

    pub(super) fn key_of_cell<'a>(&'a self, cell: &'a [u8], leaf: bool) -> &'a [u8] {
        page::parse_cell(cell, leaf).map_or(&[][..], |c| self.resolve(c.key))
    }

    /// Restores the fill rules after a deletion from node `id` reached through `path`.
    fn rebalance(&mut self, id: u32, path: &Path) {
        let Some((&(parent, index), above)) = path.split_last() else {
            self.collapse_root();
            return;
        };
        let page = self.page(id);
        if page.count() > 0 && page.used_bytes() >= UNDERFULL_SIZE_BYTES {
            return;
        }
        let parent_count = self.page(parent).count();
        if parent_count == 0 {
            // Only the root is ever left with a single child; collapse it.
            self.rebalance(parent, above);
            return;
        }
        let left_index = if index < parent_count {
            index
        } else {
            index - 1
        };
        let left = self.child_at(parent, left_index);
        let right = self.child_at(parent, left_index + 1);
        if self.merge_or_share(parent, left_index, left, right, above) {
            self.rebalance(parent, above);
        }
    }

    /// Merges `right` into `left` when both fit one page (true), else evens them out (false).
    /// The separator between them is cell `separator_slot` of `parent`.
    fn merge_or_share(
        &mut self,
        parent: u32,
        separator_slot: usize,
        left: u32,
        right: u32,
        above: &Path,
    ) -> bool {
        let leaf = self.page(left).is_leaf();
        let separator_cell = self
            .page(parent)
            .cell_bytes(separator_slot)
            .map(<[u8]>::to_vec);
        let Some(separator_cell) = separator_cell else {
            return false;
        };
        let mut cells = self.page(left).cells();
        if !leaf {
            // The separator comes down in front of the right node's leftmost child.
            let (key_part, _) = split_internal_cell(&separator_cell);
            cells.push(page::internal_cell(&key_part, self.page(right).link_a()));
        }
        cells.extend(self.page(right).cells());
        self.page_mut(parent).remove_cell(separator_slot);
        if page::cells_size(&cells) <= CELL_AREA_SIZE_BYTES {
            self.fill(left, &cells);
            if leaf {
                self.release_key(&separator_cell, false);
                self.unlink_leaf(right);
            }
            self.free_page(right);
            return true;
        }
        let new_separator = if leaf {
            self.release_key(&separator_cell, false);
            let middle = split_point(&cells, 1);
            let separator = shortest_separator(
                self.key_of_cell(&cells[middle - 1], true),
                self.key_of_cell(&cells[middle], true),
            );
            let separator = self.store_key(&separator);
            self.fill(left, &cells[..middle]);
            self.fill(right, &cells[middle..]);
            separator
        } else {
            let middle = split_point(&cells, 1).min(cells.len() - 2);
            let (key_part, child) = split_internal_cell(&cells[middle]);
            self.fill(left, &cells[..middle]);
            self.page_mut(right).set_link_a(child);
            self.fill(right, &cells[middle + 1..]);
            key_part
        };
        let cell = page::internal_cell(&new_separator, right);
        self.insert_into(parent, separator_slot, cell, above);
        false
    }

    fn collapse_root(&mut self) {
        while !self.page(self.root).is_leaf() && self.page(self.root).count() == 0 {
            let child = self.page(self.root).link_a();
            self.free_page(self.root);
            self.root = child;
        }
    }
}

/// The index splitting `cells` into two halves of about equal bytes, at least `min` from
/// either end.
pub(super) fn split_point(cells: &[Vec<u8>], min: usize) -> usize {
    let total = page::cells_size(cells);
    let mut running = 0;
    let mut point = cells.len() / 2;
    for (i, cell) in cells.iter().enumerate() {
        running += cell.len() + page::SLOT_SIZE_BYTES;
        if running * 2 >= total {
            point = i + 1;
            break;
        }
    }
    point.clamp(min, cells.len().saturating_sub(min).max(min))
}

/// An internal cell's key part and child page.
pub(super) fn split_internal_cell(cell: &[u8]) -> (Vec<u8>, u32) {
    match page::parse_cell(cell, false) {
        Some(parsed) => (cell[..parsed.key_part_len].to_vec(), parsed.payload as u32),
        None => (Vec::new(), NONE),
    }
}

/// The shortest key `s` with `left < s <= right`, given `left < right`.
pub(super) fn shortest_separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}
