//! Insertion and deletion: page splits that push separators up the recorded path, and on
//! deletion the merge of an underfull node into a sibling (or a move of cells between the two
//! when they do not fit one page), collapsing the root when it is left with one child. Every
//! page changed here was made writable first (`Tree::make_writable` for the path,
//! `writable_child` for a sibling).

use super::page::{self, CELL_AREA_SIZE_BYTES, KIND_INTERNAL, VALUE_SIZE_MAX};
use super::{Tree, cell_key, search};
use crate::error::{Result, StorageError};
use crate::pager::{PageId, Pager};

/// A node using fewer bytes than this after a deletion is merged or refilled.
const UNDERFULL_SIZE_BYTES: usize = page::PAGE_SIZE_BYTES / 4;

/// (internal page, index of the child taken) from the root down.
type Path = [(PageId, usize)];

impl Tree {
    /// Inserts or replaces; returns the previous value for an existing key.
    pub fn insert(&mut self, pager: &Pager, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        if value.len() > VALUE_SIZE_MAX {
            return Err(StorageError::LimitExceeded("B+tree value too long".into()));
        }
        let mut d = self.find_leaf(pager, key, true)?;
        let found = {
            let page = d.leaf_frame.read();
            match search(pager, &page, key)? {
                Ok(slot) => {
                    let cell = page
                        .cell(slot)
                        .ok_or_else(|| super::corrupt(d.leaf, "cell"))?;
                    if cell.value == value {
                        return Ok(Some(cell.value.to_vec()));
                    }
                    let bytes = page.cell_bytes(slot).unwrap_or_default();
                    Ok((
                        slot,
                        cell.value.to_vec(),
                        bytes[..cell.key_part_len].to_vec(),
                    ))
                }
                Err(slot) => Err(slot),
            }
        };
        self.make_writable(pager, &mut d)?;
        let (leaf, path) = (d.leaf, &d.steps);
        let previous = match found {
            Ok((slot, old, key_part)) => {
                d.leaf_frame.write().remove_cell(slot);
                self.insert_into(pager, leaf, slot, page::leaf_cell(&key_part, value), path)?;
                Some(old)
            }
            Err(slot) => {
                let key_part = self.store_key(pager, key)?;
                self.insert_into(pager, leaf, slot, page::leaf_cell(&key_part, value), path)?;
                self.len += 1;
                None
            }
        };
        self.debug_check(pager);
        Ok(previous)
    }

    /// Removes a key; returns its value if it was present.
    pub fn remove(&mut self, pager: &Pager, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut d = self.find_leaf(pager, key, true)?;
        let slot = {
            let page = d.leaf_frame.read();
            match search(pager, &page, key)? {
                Ok(slot) => slot,
                Err(_) => return Ok(None),
            }
        };
        self.make_writable(pager, &mut d)?;
        let (leaf, path) = (d.leaf, d.steps.clone());
        let (bytes, value) = {
            let mut page = d.leaf_frame.write();
            let bytes = page
                .cell_bytes(slot)
                .ok_or_else(|| super::corrupt(leaf, "cell"))?
                .to_vec();
            page.remove_cell(slot);
            let value = page::parse_cell(&bytes, true)
                .map(|c| c.value.to_vec())
                .unwrap_or_default();
            (bytes, value)
        };
        self.release_key(pager, &bytes, true)?;
        self.len -= 1;
        self.rebalance(pager, leaf, &path)?;
        self.debug_check(pager);
        Ok(Some(value))
    }

    /// Puts `cell` at `slot` of writable node `id`, splitting up the path as needed.
    fn insert_into(
        &mut self,
        pager: &Pager,
        id: PageId,
        slot: usize,
        cell: Vec<u8>,
        path: &Path,
    ) -> Result<()> {
        let frame = pager.read(id)?;
        let (cells, kind) = {
            let mut page = frame.write();
            if page.insert_cell(slot, &cell) {
                return Ok(());
            }
            let mut cells = page.cells();
            cells.insert(slot, cell);
            (cells, page.kind())
        };
        let leaf = kind == page::KIND_LEAF;
        let (right, right_frame) = self.alloc(pager, kind)?;
        let separator = if leaf {
            let middle = split_point(&cells, 1);
            let separator = shortest_separator(
                &cell_key(pager, &cells[middle - 1], true)?,
                &cell_key(pager, &cells[middle], true)?,
            );
            let separator = self.store_key(pager, &separator)?;
            fill(&mut right_frame.write(), &cells[middle..]);
            fill(&mut frame.write(), &cells[..middle]);
            separator
        } else {
            let middle = split_point(&cells, 1).min(cells.len() - 2);
            let (key_part, child) = split_internal_cell(&cells[middle]);
            let mut r = right_frame.write();
            r.set_link(child);
            fill(&mut r, &cells[middle + 1..]);
            fill(&mut frame.write(), &cells[..middle]);
            key_part
        };
        drop((frame, right_frame));
        let separator_cell = page::internal_cell(&separator, right);
        match path.split_last() {
            Some((&(parent, index), above)) => {
                self.insert_into(pager, parent, index, separator_cell, above)
            }
            None => {
                let (root, root_frame) = self.alloc(pager, KIND_INTERNAL)?;
                let mut r = root_frame.write();
                r.set_link(id);
                r.insert_cell(0, &separator_cell);
                self.root = root;
                Ok(())
            }
        }
    }

    /// Restores the fill rules after a deletion from writable node `id` reached through `path`.
    fn rebalance(&mut self, pager: &Pager, id: PageId, path: &Path) -> Result<()> {
        let Some((&(parent, index), above)) = path.split_last() else {
            return self.collapse_root(pager);
        };
        {
            let frame = pager.read(id)?;
            let page = frame.read();
            if page.count() > 0 && page.used_bytes() >= UNDERFULL_SIZE_BYTES {
                return Ok(());
            }
        }
        let parent_count = pager.read(parent)?.read().count();
        if parent_count == 0 {
            // Only the root is ever left with a single child; collapse it.
            return self.rebalance(pager, parent, above);
        }
        let left_index = if index < parent_count {
            index
        } else {
            index - 1
        };
        if self.merge_or_share(pager, parent, left_index, (index, id), above)? {
            self.rebalance(pager, parent, above)?;
        }
        Ok(())
    }

    /// Merges the right node of the pair around separator `separator_slot` of `parent` into the
    /// left one when both fit one page (true), else evens them out (false). `on_path` is the
    /// child (index, page) already writable; `above` is the path to `parent`.
    fn merge_or_share(
        &mut self,
        pager: &Pager,
        parent: PageId,
        separator_slot: usize,
        on_path: (usize, PageId),
        above: &Path,
    ) -> Result<bool> {
        let (on_path, on_path_id) = on_path;
        let (separator_cell, left_id, right_id) = {
            let frame = pager.read(parent)?;
            let p = frame.read();
            let sep = p.cell_bytes(separator_slot).map(<[u8]>::to_vec);
            let Some(sep) = sep else {
                return Ok(false);
            };
            (sep, p.child(separator_slot), p.child(separator_slot + 1))
        };
        let (left_cells, leaf, right_cells, right_link) = {
            let lf = pager.read(left_id)?;
            let rf = pager.read(right_id)?;
            let (l, r) = (lf.read(), rf.read());
            (l.cells(), l.is_leaf(), r.cells(), r.link())
        };
        let mut cells = left_cells;
        if !leaf {
            // The separator comes down in front of the right node's leftmost child.
            let (key_part, _) = split_internal_cell(&separator_cell);
            cells.push(page::internal_cell(&key_part, right_link));
        }
        cells.extend(right_cells);
        let writable = |t: &mut Tree, index: usize, id: PageId| -> Result<PageId> {
            if index == on_path {
                return Ok(on_path_id);
            }
            let parent_frame = pager.read(parent)?;
            let frame = pager.read(id)?;
            Ok(
                t.writable_child(pager, Some((&parent_frame, index)), id, frame)?
                    .0,
            )
        };
        if page::cells_size(&cells) <= CELL_AREA_SIZE_BYTES {
            let left = writable(self, separator_slot, left_id)?;
            fill(&mut pager.read(left)?.write(), &cells);
            pager.read(parent)?.write().remove_cell(separator_slot);
            if leaf {
                self.release_key(pager, &separator_cell, false)?;
            }
            // The right node is dropped, not changed: no copy needed.
            self.free(pager, right_id)?;
            return Ok(true);
        }
        let left = writable(self, separator_slot, left_id)?;
        let right = writable(self, separator_slot + 1, right_id)?;
        pager.read(parent)?.write().remove_cell(separator_slot);
        let new_separator = if leaf {
            self.release_key(pager, &separator_cell, false)?;
            let middle = split_point(&cells, 1);
            let separator = shortest_separator(
                &cell_key(pager, &cells[middle - 1], true)?,
                &cell_key(pager, &cells[middle], true)?,
            );
            let separator = self.store_key(pager, &separator)?;
            fill(&mut pager.read(left)?.write(), &cells[..middle]);
            fill(&mut pager.read(right)?.write(), &cells[middle..]);
            separator
        } else {
            let middle = split_point(&cells, 1).min(cells.len() - 2);
            let (key_part, child) = split_internal_cell(&cells[middle]);
            fill(&mut pager.read(left)?.write(), &cells[..middle]);
            let rf = pager.read(right)?;
            let mut r = rf.write();
            r.set_link(child);
            fill(&mut r, &cells[middle + 1..]);
            key_part
        };
        let cell = page::internal_cell(&new_separator, right);
        self.insert_into(pager, parent, separator_slot, cell, above)?;
        Ok(false)
    }

    fn collapse_root(&mut self, pager: &Pager) -> Result<()> {
        loop {
            let child = {
                let frame = pager.read(self.root)?;
                let page = frame.read();
                if page.is_leaf() || page.count() > 0 {
                    return Ok(());
                }
                page.child(0)
            };
            let old = self.root;
            self.root = child;
            self.free(pager, old)?;
        }
    }

    fn debug_check(&self, pager: &Pager) {
        if cfg!(debug_assertions) && self.len <= super::check::DEBUG_CHECK_LEN_MAX {
            self.invariants(pager);
        }
    }
}

/// Rewrites a page with `cells` (which always fit: callers split by size).
fn fill(page: &mut page::Page, cells: &[Vec<u8>]) {
    let fitted = page.rebuild(cells);
    debug_assert!(fitted, "cells chosen to fit a page did not fit");
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
pub(super) fn split_internal_cell(cell: &[u8]) -> (Vec<u8>, PageId) {
    match page::parse_cell(cell, false) {
        Some(parsed) => (cell[..parsed.key_part_len].to_vec(), parsed.child),
        None => (Vec::new(), page::NONE),
    }
}

/// The shortest key `s` with `left < s <= right`, given `left < right`.
pub(super) fn shortest_separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}
