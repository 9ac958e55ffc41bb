//! A foreign collection hashed by one field, built once per run of a `$lookup` (equality form
//! without a usable foreign index) or a `$graphLookup`: one pass over the foreign collection
//! as raw documents ([`PipelineEnv::scan_raw`]), so a join costs O(n + m) reads instead of
//! O(n * m).
//!
//! Every value the field reaches is a key (array elements and the array itself; missing counts
//! as null), in the storage key encoding, so values `storage::order` calls equal meet. The
//! table keeps a 64-bit hash of each key, not the key, and every candidate is checked again
//! against the probe keys, so a collision costs a comparison, never a wrong match. The
//! documents themselves are held only up to an eighth of the stage's memory bound; past it the table
//! keeps just their ids and reads a matched document again by id when it is probed
//! ([`PipelineEnv::fetch_raw`]), which bounds the table at a few dozen bytes per foreign
//! document plus the bound. That size is charged to the server's query memory budget
//! (`query::budget`) while the table lives, so a suspended cursor's table shows in
//! `serverStatus` and is given back when the cursor goes.
//!
//! The table is read once, when the run's first input document needs it; a suspended run
//! keeps it between `getMore`s, so its keys are those of that moment. Documents past the held
//! share are read again by id when matched, so they are as current as the probe.

use super::lookup::keys_raw;
use crate::error::CommandResult;
use crate::query::budget::Held;
use crate::query::matcher::Filter;
use crate::query::pipeline::PipelineEnv;
use bson::{RawDocument, RawDocumentBuf};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// How many documents are read between two interrupt checks.
const INTERRUPT_CHECK_DOCS: usize = 1024;

/// The share of the stage's memory bound the held documents may take (1/8): the rest is left
/// for the documents one input gathers (`$lookup`'s 4568 bound is the same setting).
pub(super) const HELD_SHARE_DIVISOR: usize = 8;

struct Slot {
    id: u64,
    /// `None` once the held documents passed the memory bound.
    doc: Option<RawDocumentBuf>,
}

pub struct ForeignTable {
    db: String,
    coll: String,
    field: Vec<String>,
    slots: Vec<Slot>,
    by_hash: HashMap<u64, Vec<usize>>,
    /// The table's estimated size, charged to the query memory budget.
    held: Held,
}

/// Bytes a slot and its hash entries take besides a held document (an estimate).
const SLOT_BYTES: usize = std::mem::size_of::<Slot>() + 24;

fn hash_key(key: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

impl ForeignTable {
    /// Reads `db.coll` once, keeping the documents `restrict` admits.
    pub fn build(
        env: &dyn PipelineEnv,
        (db, coll): (&str, &str),
        field: &[String],
        restrict: Option<&Filter>,
        memory_max_bytes: usize,
    ) -> CommandResult<ForeignTable> {
        let mut table = ForeignTable {
            db: db.to_string(),
            coll: coll.to_string(),
            field: field.to_vec(),
            slots: Vec::new(),
            by_hash: HashMap::new(),
            held: Held::global(),
        };
        let held_bytes_max = memory_max_bytes / HELD_SHARE_DIVISOR;
        let mut held_bytes = 0usize;
        for (n, item) in env.scan_raw(db, coll)?.enumerate() {
            if n % INTERRUPT_CHECK_DOCS == 0 {
                env.check_interrupt()?;
                table.charge(held_bytes.min(held_bytes_max))?;
            }
            let (id, raw) = item?;
            if let Some(f) = restrict
                && f.try_matches(&raw)?.is_none()
            {
                continue;
            }
            let pos = table.slots.len();
            let mut hashes: Vec<u64> = keys_raw(&raw, field, true)
                .iter()
                .map(|k| hash_key(k))
                .collect();
            hashes.sort_unstable();
            hashes.dedup();
            for h in hashes {
                table.by_hash.entry(h).or_default().push(pos);
            }
            held_bytes = held_bytes.saturating_add(raw.as_bytes().len());
            let doc = (held_bytes <= held_bytes_max).then_some(raw);
            table.slots.push(Slot { id, doc });
        }
        table.charge(held_bytes.min(held_bytes_max))?;
        Ok(table)
    }

    /// Charges the table's size with `docs_bytes` of held documents (146 when the server's
    /// budget has no room: the table cannot spill).
    fn charge(&mut self, docs_bytes: usize) -> CommandResult<()> {
        let bytes = docs_bytes.saturating_add(self.slots.len().saturating_mul(SLOT_BYTES));
        if self.held.set(bytes) {
            Ok(())
        } else {
            Err(crate::query::budget::exhausted("$lookup", bytes))
        }
    }

    /// The documents whose field equals one of `keys` (encoded keys), in collection order,
    /// each with its position in the table (a stable identity for `$graphLookup`'s visited set).
    pub fn matching<'t>(
        &'t self,
        env: &dyn PipelineEnv,
        keys: &[Vec<u8>],
        restrict: Option<&Filter>,
    ) -> CommandResult<Vec<(usize, Cow<'t, RawDocument>)>> {
        let mut positions: Vec<usize> = keys
            .iter()
            .filter_map(|k| self.by_hash.get(&hash_key(k)))
            .flatten()
            .copied()
            .collect();
        positions.sort_unstable();
        positions.dedup();
        let mut out = Vec::with_capacity(positions.len());
        for pos in positions {
            let slot = &self.slots[pos];
            let doc: Cow<'t, RawDocument> = match &slot.doc {
                Some(d) => Cow::Borrowed(d.as_ref()),
                None => match env.fetch_raw(&self.db, &self.coll, slot.id)? {
                    // Read again: it may have changed since the scan, so it is checked anew.
                    Some(d) => match restrict {
                        Some(f) if f.try_matches(&d)?.is_none() => continue,
                        _ => Cow::Owned(d),
                    },
                    None => continue,
                },
            };
            let found = keys_raw(&doc, &self.field, true);
            if found.iter().any(|f| keys.contains(f)) {
                out.push((pos, doc));
            }
        }
        Ok(out)
    }
}
