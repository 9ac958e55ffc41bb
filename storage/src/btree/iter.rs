//! Range scans: a cursor over the leaf chain, forward or backward, that stops at the far bound.
//! It borrows the tree, so keys are handed out without copying.

use super::BTree;
use super::page::NONE;
use std::ops::Bound;

pub struct Range<'a> {
    tree: &'a BTree,
    leaf: u32,
    /// Forward: the next slot to yield. Reverse: one past the next slot to yield.
    slot: usize,
    end: Bound<Vec<u8>>,
    reverse: bool,
    done: bool,
}

impl<'a> Range<'a> {
    pub(super) fn new(
        tree: &'a BTree,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Range<'a> {
        let (start, end) = if reverse {
            (upper, lower)
        } else {
            (lower, upper)
        };
        let (leaf, slot) = match start {
            Bound::Unbounded if reverse => {
                let leaf = tree.rightmost_leaf();
                (leaf, tree.page(leaf).count())
            }
            Bound::Unbounded => (tree.leftmost_leaf(), 0),
            Bound::Included(key) | Bound::Excluded(key) => {
                let leaf = tree.find_leaf(key, |_, _| {});
                let inclusive = matches!(start, Bound::Included(_));
                let slot = match (tree.search(leaf, key), reverse, inclusive) {
                    (Ok(s), false, true) | (Ok(s), true, false) => s,
                    (Ok(s), false, false) | (Ok(s), true, true) => s + 1,
                    (Err(s), _, _) => s,
                };
                (leaf, slot)
            }
        };
        Range {
            tree,
            leaf,
            slot,
            end: end.map(<[u8]>::to_vec),
            reverse,
            done: false,
        }
    }

    fn past_end(&self, key: &[u8]) -> bool {
        match (&self.end, self.reverse) {
            (Bound::Unbounded, _) => false,
            (Bound::Included(end), false) => key > end.as_slice(),
            (Bound::Excluded(end), false) => key >= end.as_slice(),
            (Bound::Included(end), true) => key < end.as_slice(),
            (Bound::Excluded(end), true) => key <= end.as_slice(),
        }
    }

    /// Moves to the slot to yield next, crossing leaves; None when the chain ends.
    fn position(&mut self) -> Option<usize> {
        // Only the root leaf can be empty, so this loop crosses at most one leaf per step.
        for _ in 0..self.tree.pages.len() + 1 {
            let page = self.tree.page(self.leaf);
            if self.reverse {
                if self.slot > 0 {
                    self.slot -= 1;
                    return Some(self.slot);
                }
                self.leaf = page.link_a();
                if self.leaf == NONE {
                    return None;
                }
                self.slot = self.tree.page(self.leaf).count();
            } else {
                if self.slot < page.count() {
                    self.slot += 1;
                    return Some(self.slot - 1);
                }
                self.leaf = page.link_b();
                if self.leaf == NONE {
                    return None;
                }
                self.slot = 0;
            }
        }
        None
    }
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], u64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let Some(slot) = self.position() else {
            self.done = true;
            return None;
        };
        let tree: &'a BTree = self.tree;
        let cell = tree.page(self.leaf).cell(slot)?;
        let key = tree.resolve(cell.key);
        if self.past_end(key) {
            self.done = true;
            return None;
        }
        Some((key, cell.payload))
    }
}
