//! Full structural validation of a tree, used by `invariants` (our own bugs) and by
//! `from_checkpoint` (bytes from disk). It never panics: every read is bounds-checked first.

use super::BTree;
use super::page::{
    HEADER_SIZE_BYTES, KEY_INLINE_SIZE_MAX, KIND_INTERNAL, KIND_LEAF, KeyRepr, NONE,
    PAGE_SIZE_BYTES, SLOT_SIZE_BYTES,
};

/// Deeper than any tree of 4 KiB pages can grow; a longer path means a cycle or corruption.
pub const DEPTH_MAX: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BTreeError {
    #[error("B+tree is corrupt: {0}")]
    Corrupt(String),
    #[error("bulk build input is not strictly ascending at entry {0}")]
    Unsorted(u64),
}

fn corrupt(message: String) -> BTreeError {
    BTreeError::Corrupt(message)
}

/// A node to visit with the key range its parent allows.
struct Visit {
    id: u32,
    depth: usize,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

impl BTree {
    /// Checks every invariant listed in the module documentation.
    pub fn check(&self) -> Result<(), BTreeError> {
        let mut seen = vec![false; self.pages.len()];
        let mut owned = vec![false; self.overflow.len()];
        let mut leaves = Vec::new();
        let mut leaf_depth = None;
        let mut count = 0u64;
        let mut stack = vec![Visit {
            id: self.root,
            depth: 1,
            lower: None,
            upper: None,
        }];
        while let Some(visit) = stack.pop() {
            let id = visit.id as usize;
            if id >= self.pages.len() || seen[id] {
                return Err(corrupt(format!(
                    "page {id} is out of range or reached twice"
                )));
            }
            seen[id] = true;
            if visit.depth > DEPTH_MAX {
                return Err(corrupt(format!("page {id} is deeper than {DEPTH_MAX}")));
            }
            let keys = self.check_page(visit.id, &mut owned)?;
            check_order(id, &keys, &visit)?;
            let page = self.page(visit.id);
            if page.kind() == KIND_LEAF {
                if *leaf_depth.get_or_insert(visit.depth) != visit.depth {
                    return Err(corrupt(format!("leaf {id} at depth {}", visit.depth)));
                }
                if keys.is_empty() && visit.id != self.root {
                    return Err(corrupt(format!("leaf {id} is empty")));
                }
                count += keys.len() as u64;
                leaves.push(visit.id);
                continue;
            }
            // Push children right to left so that leaves are met in key order.
            for index in (0..=keys.len()).rev() {
                let child = self.child_at(visit.id, index);
                stack.push(Visit {
                    id: child,
                    depth: visit.depth + 1,
                    lower: if index == 0 {
                        visit.lower.clone()
                    } else {
                        Some(keys[index - 1].clone())
                    },
                    upper: if index == keys.len() {
                        visit.upper.clone()
                    } else {
                        Some(keys[index].clone())
                    },
                });
            }
        }
        if count != self.len {
            return Err(corrupt(format!(
                "{count} entries in leaves, length says {}",
                self.len
            )));
        }
        self.check_links(&leaves)?;
        self.check_free(&seen, &owned)
    }

    /// Checks one page's header, slots and cells; returns its keys in slot order.
    fn check_page(&self, id: u32, owned: &mut [bool]) -> Result<Vec<Vec<u8>>, BTreeError> {
        let page = self.page(id);
        let kind = page.kind();
        if kind != KIND_LEAF && kind != KIND_INTERNAL {
            return Err(corrupt(format!("page {id} has kind {kind}")));
        }
        let (count, start) = (page.count(), page.cell_start());
        if start > PAGE_SIZE_BYTES || HEADER_SIZE_BYTES + count * SLOT_SIZE_BYTES > start {
            return Err(corrupt(format!(
                "page {id} header: {count} cells from {start}"
            )));
        }
        let mut keys = Vec::with_capacity(count);
        let mut cell_bytes = 0;
        for slot in 0..count {
            let offset = page.slot(slot);
            let cell = page
                .cell(slot)
                .filter(|c| offset + c.len <= PAGE_SIZE_BYTES);
            let Some(cell) = cell else {
                return Err(corrupt(format!(
                    "page {id} cell {slot} at {offset} is malformed"
                )));
            };
            cell_bytes += cell.len;
            keys.push(self.check_key(id, cell.key, owned)?);
            if kind == KIND_INTERNAL && cell.payload >= self.pages.len() as u64 {
                return Err(corrupt(format!(
                    "page {id} cell {slot} points past the pages"
                )));
            }
        }
        if cell_bytes + page.dead() != PAGE_SIZE_BYTES - start {
            return Err(corrupt(format!("page {id} space accounting is off")));
        }
        if kind == KIND_INTERNAL && page.link_a() as usize >= self.pages.len() {
            return Err(corrupt(format!("page {id} leftmost child is out of range")));
        }
        Ok(keys)
    }

    fn check_key(
        &self,
        id: u32,
        key: KeyRepr<'_>,
        owned: &mut [bool],
    ) -> Result<Vec<u8>, BTreeError> {
        match key {
            KeyRepr::Inline(bytes) if bytes.len() <= KEY_INLINE_SIZE_MAX => Ok(bytes.to_vec()),
            KeyRepr::Inline(_) => Err(corrupt(format!("page {id} holds an oversized inline key"))),
            KeyRepr::Overflow { id: entry, len } => {
                let index = entry as usize;
                let valid = self.overflow.get(index).is_some_and(|k| k.len() == len)
                    && len > KEY_INLINE_SIZE_MAX
                    && !owned[index];
                if !valid {
                    return Err(corrupt(format!(
                        "page {id} overflow key {entry} is invalid"
                    )));
                }
                owned[index] = true;
                Ok(self.overflow[index].clone())
            }
        }
    }

    fn check_links(&self, leaves: &[u32]) -> Result<(), BTreeError> {
        for (i, &leaf) in leaves.iter().enumerate() {
            let prev = if i == 0 { NONE } else { leaves[i - 1] };
            let next = leaves.get(i + 1).copied().unwrap_or(NONE);
            let page = self.page(leaf);
            if page.link_a() != prev || page.link_b() != next {
                return Err(corrupt(format!("leaf {leaf} links do not match key order")));
            }
        }
        Ok(())
    }

    /// Every page is reachable or free (once); every overflow entry is owned or free (once).
    fn check_free(&self, seen: &[bool], owned: &[bool]) -> Result<(), BTreeError> {
        let mut free = vec![false; self.pages.len()];
        for &id in &self.free_pages {
            let index = id as usize;
            if index >= free.len() || free[index] || seen[index] {
                return Err(corrupt(format!("free page {id} is invalid")));
            }
            free[index] = true;
        }
        if let Some(leaked) = (0..free.len()).find(|&i| !free[i] && !seen[i]) {
            return Err(corrupt(format!(
                "page {leaked} is neither reachable nor free"
            )));
        }
        let mut released = vec![false; self.overflow.len()];
        for &id in &self.overflow_free {
            let index = id as usize;
            if index >= released.len() || released[index] || owned[index] {
                return Err(corrupt(format!("free overflow entry {id} is invalid")));
            }
            released[index] = true;
        }
        if let Some(leaked) = (0..owned.len()).find(|&i| !owned[i] && !released[i]) {
            return Err(corrupt(format!(
                "overflow entry {leaked} is neither owned nor free"
            )));
        }
        Ok(())
    }
}

fn check_order(id: usize, keys: &[Vec<u8>], visit: &Visit) -> Result<(), BTreeError> {
    if keys.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(corrupt(format!(
            "page {id} keys are not strictly ascending"
        )));
    }
    let below = visit
        .lower
        .as_ref()
        .zip(keys.first())
        .is_some_and(|(low, first)| first < low);
    let above = visit
        .upper
        .as_ref()
        .zip(keys.last())
        .is_some_and(|(high, last)| last >= high);
    if below || above {
        return Err(corrupt(format!(
            "page {id} keys escape the separators above it"
        )));
    }
    Ok(())
}
