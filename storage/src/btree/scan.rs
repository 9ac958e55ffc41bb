//! Range scans. Leaves are not linked, so a scan keeps the path of internal pages it came down
//! and climbs it to reach the next leaf (or the previous one, scanning backwards). The tree must
//! not change during a scan: callers hold the collection lock (read) across it.

use std::ops::Bound;

/// What a scan hands each entry to: key and value; false stops the scan.
pub type Visitor<'v> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'v;

use super::{DEPTH_MAX, Tree, child_index, corrupt, resolve, search};
use crate::error::Result;
use crate::pager::{PageRef, Pager};

impl Tree {
    /// Visits the entries whose keys lie within the bounds, ascending or (with `reverse`)
    /// descending, until `visit` returns false. To resume after a key, pass it as
    /// `Bound::Excluded` on the side the scan comes from.
    pub fn scan(
        &self,
        pager: &Pager,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        let (start, end) = if reverse {
            (upper, lower)
        } else {
            (lower, upper)
        };
        let mut stack: Vec<(PageRef, usize)> = Vec::new();
        let mut frame = pager.read(self.root)?;
        loop {
            let index = {
                let page = frame.read();
                if page.is_leaf() {
                    break;
                }
                match start {
                    Bound::Unbounded if reverse => page.count(),
                    Bound::Unbounded => 0,
                    Bound::Included(k) | Bound::Excluded(k) => child_index(pager, &page, k)?,
                }
            };
            let child = frame.read().child(index);
            stack.push((frame, index));
            if stack.len() > DEPTH_MAX {
                return Err(corrupt(self.root, "tree deeper than the limit"));
            }
            frame = pager.read(child)?;
        }
        // Forward: the next slot to yield. Reverse: one past it.
        let mut slot = {
            let page = frame.read();
            match start {
                Bound::Unbounded if reverse => page.count(),
                Bound::Unbounded => 0,
                Bound::Included(k) | Bound::Excluded(k) => {
                    let inclusive = matches!(start, Bound::Included(_));
                    match (search(pager, &page, k)?, reverse, inclusive) {
                        (Ok(s), false, true) | (Ok(s), true, false) => s,
                        (Ok(s), false, false) | (Ok(s), true, true) => s + 1,
                        (Err(s), _, _) => s,
                    }
                }
            }
        };
        loop {
            if !visit_leaf(pager, &frame, &mut slot, reverse, &end, visit)? {
                return Ok(());
            }
            match next_leaf(pager, &mut stack, reverse)? {
                Some((f, s)) => {
                    frame = f;
                    slot = s;
                }
                None => return Ok(()),
            }
        }
    }

    /// Every entry in key order (tests and checks).
    pub fn entries(&self, pager: &Pager) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan(
            pager,
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                Ok(true)
            },
        )?;
        Ok(out)
    }
}

fn past_end(key: &[u8], end: &Bound<&[u8]>, reverse: bool) -> bool {
    match (end, reverse) {
        (Bound::Unbounded, _) => false,
        (Bound::Included(e), false) => key > *e,
        (Bound::Excluded(e), false) => key >= *e,
        (Bound::Included(e), true) => key < *e,
        (Bound::Excluded(e), true) => key <= *e,
    }
}

/// Yields a leaf's entries from `slot` on; false once the scan is over.
fn visit_leaf(
    pager: &Pager,
    frame: &PageRef,
    slot: &mut usize,
    reverse: bool,
    end: &Bound<&[u8]>,
    visit: &mut Visitor<'_>,
) -> Result<bool> {
    let page = frame.read();
    loop {
        let at = if reverse {
            if *slot == 0 {
                return Ok(true);
            }
            *slot -= 1;
            *slot
        } else {
            if *slot >= page.count() {
                return Ok(true);
            }
            *slot += 1;
            *slot - 1
        };
        let cell = page
            .cell(at)
            .ok_or_else(|| corrupt(crate::btree::page::NONE, "malformed leaf cell"))?;
        let key = resolve(pager, cell.key)?;
        if past_end(&key, end, reverse) || !visit(&key, cell.value)? {
            return Ok(false);
        }
    }
}

/// Climbs the path to the next (or previous) subtree and descends to its edge leaf.
fn next_leaf(
    pager: &Pager,
    stack: &mut Vec<(PageRef, usize)>,
    reverse: bool,
) -> Result<Option<(PageRef, usize)>> {
    let child = loop {
        let Some((frame, index)) = stack.pop() else {
            return Ok(None);
        };
        let count = frame.read().count();
        let next = if reverse {
            index.checked_sub(1)
        } else {
            Some(index + 1).filter(|&i| i <= count)
        };
        if let Some(next) = next {
            let child = frame.read().child(next);
            stack.push((frame, next));
            break child;
        }
    };
    let mut frame = pager.read(child)?;
    loop {
        let (leaf, index, count) = {
            let page = frame.read();
            let count = page.count();
            (page.is_leaf(), if reverse { count } else { 0 }, count)
        };
        if leaf {
            return Ok(Some((frame, if reverse { count } else { 0 })));
        }
        let next = frame.read().child(index);
        stack.push((frame, index));
        if stack.len() > DEPTH_MAX {
            return Err(corrupt(next, "tree deeper than the limit"));
        }
        frame = pager.read(next)?;
    }
}
