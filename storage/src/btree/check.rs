//! Full structural validation of a tree, used by `invariants` (our own bugs), by `validate`, and
//! to list a tree's pages when it is dropped. It never panics: every read is bounds-checked.

use std::collections::HashSet;

use super::page::{
    HEADER_SIZE_BYTES, KEY_INLINE_SIZE_MAX, KIND_INTERNAL, KIND_LEAF, KeyRepr, PAGE_SIZE_BYTES,
    Page, SLOT_SIZE_BYTES,
};
use super::{DEPTH_MAX, Tree, overflow_chain, resolve};

use crate::error::{Result, StorageError};
use crate::pager::{PageId, Pager};

/// Trees up to this many entries are fully checked after every mutation in debug builds.
pub const DEBUG_CHECK_LEN_MAX: u64 = 400;

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
    id: PageId,
    depth: usize,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

/// What a full check found.
#[derive(Debug, Default)]
pub struct CheckReport {
    /// Every page the tree owns: nodes and overflow chains.
    pub pages: Vec<PageId>,
    pub depth: usize,
}

impl Tree {
    /// Checks every invariant listed in the module documentation; lists the pages.
    pub fn check(&self, pager: &Pager) -> std::result::Result<CheckReport, BTreeError> {
        let wrap = |e: StorageError| corrupt(e.to_string());
        let mut seen = HashSet::new();
        let mut report = CheckReport::default();
        let mut leaf_depth = None;
        let (mut count, mut overflow_keys) = (0u64, 0u64);
        let mut stack = vec![Visit {
            id: self.root,
            depth: 1,
            lower: None,
            upper: None,
        }];
        while let Some(visit) = stack.pop() {
            if !seen.insert(visit.id) {
                return Err(corrupt(format!("page {} is reached twice", visit.id)));
            }
            report.pages.push(visit.id);
            if visit.depth > DEPTH_MAX {
                return Err(corrupt(format!(
                    "page {} is deeper than {DEPTH_MAX}",
                    visit.id
                )));
            }
            let frame = pager.read(visit.id).map_err(wrap)?;
            let page = frame.read().clone();
            drop(frame);
            let keys = check_page(pager, visit.id, &page, &mut seen, &mut report.pages)?;
            overflow_keys += (0..page.count())
                .filter(|&i| matches!(page.cell(i).map(|c| c.key), Some(KeyRepr::Overflow { .. })))
                .count() as u64;
            check_order(visit.id, &keys, &visit)?;
            if page.kind() == KIND_LEAF {
                if *leaf_depth.get_or_insert(visit.depth) != visit.depth {
                    return Err(corrupt(format!(
                        "leaf {} at depth {}",
                        visit.id, visit.depth
                    )));
                }
                if keys.is_empty() && visit.id != self.root {
                    return Err(corrupt(format!("leaf {} is empty", visit.id)));
                }
                count += keys.len() as u64;
                continue;
            }
            if keys.is_empty() {
                return Err(corrupt(format!(
                    "internal page {} has no separator",
                    visit.id
                )));
            }
            // Push children right to left so that leaves are met in key order.
            for index in (0..=keys.len()).rev() {
                stack.push(Visit {
                    id: page.child(index),
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
        if report.pages.len() as u64 != self.pages || overflow_keys != self.overflow_keys {
            return Err(corrupt(format!(
                "{} pages and {overflow_keys} overflow keys found, counters say {} and {}",
                report.pages.len(),
                self.pages,
                self.overflow_keys
            )));
        }
        report.depth = leaf_depth.unwrap_or(1);
        Ok(report)
    }

    /// Every page the tree owns, for freeing it. Reads only internal nodes unless some cell has
    /// an overflow key (then leaves too).
    pub fn all_pages(&self, pager: &Pager) -> Result<Vec<PageId>> {
        let leaf_depth = self.depth(pager)?;
        let read_leaves = self.overflow_keys > 0;
        let mut out = Vec::new();
        let mut stack = vec![(self.root, 1usize)];
        while let Some((id, depth)) = stack.pop() {
            out.push(id);
            if depth == leaf_depth && !read_leaves {
                continue;
            }
            let frame = pager.read(id)?;
            let page = frame.read();
            for i in 0..page.count() {
                if let Some(KeyRepr::Overflow { first, len }) = page.cell(i).map(|c| c.key) {
                    out.extend(overflow_chain(pager, first, len)?);
                }
            }
            if depth < leaf_depth {
                stack.extend((0..=page.count()).map(|i| (page.child(i), depth + 1)));
            }
        }
        Ok(out)
    }

    /// Panics if an invariant is broken: our own bug, never bad input.
    pub fn invariants(&self, pager: &Pager) {
        if let Err(error) = self.check(pager) {
            panic!("B+tree invariant broken: {error}");
        }
    }
}

/// Checks one page's header, slots and cells; returns its keys in slot order. Overflow chains
/// are walked and their pages recorded.
fn check_page(
    pager: &Pager,
    id: PageId,
    page: &Page,
    seen: &mut HashSet<PageId>,
    pages: &mut Vec<PageId>,
) -> std::result::Result<Vec<Vec<u8>>, BTreeError> {
    let kind = page.kind();
    if (kind != KIND_LEAF && kind != KIND_INTERNAL) || page.reserved() != 0 {
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
        match cell.key {
            KeyRepr::Inline(bytes) if bytes.len() > KEY_INLINE_SIZE_MAX => {
                return Err(corrupt(format!("page {id} holds an oversized inline key")));
            }
            KeyRepr::Overflow { first, len } => {
                if len <= KEY_INLINE_SIZE_MAX {
                    return Err(corrupt(format!("page {id} overflows a short key")));
                }
                let chain =
                    overflow_chain(pager, first, len).map_err(|e| corrupt(e.to_string()))?;
                for p in chain {
                    if !seen.insert(p) {
                        return Err(corrupt(format!("overflow page {p} is reached twice")));
                    }
                    pages.push(p);
                }
            }
            KeyRepr::Inline(_) => {}
        }
        keys.push(
            resolve(pager, cell.key)
                .map_err(|e| corrupt(e.to_string()))?
                .into_owned(),
        );
    }
    if cell_bytes + page.dead() != PAGE_SIZE_BYTES - start {
        return Err(corrupt(format!("page {id} space accounting is off")));
    }
    Ok(keys)
}

fn check_order(id: PageId, keys: &[Vec<u8>], visit: &Visit) -> std::result::Result<(), BTreeError> {
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
