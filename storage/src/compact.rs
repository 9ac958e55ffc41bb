//! Compaction: when the log holds much more than its live data, the oldest segment's current
//! documents are re-appended at the head of the log, a catalog snapshot is appended (the oldest
//! segment may hold the records that created collections), and once both are durable the old
//! segment file is deleted, after a fresh checkpoint (the previous one may point into it). Only the oldest segment is ever removed: a DELETE record can then
//! never vanish while an older PUT it cancels survives. Readers hold the collection read lock
//! while they follow a location, so they never see a half-moved document.

use std::sync::Arc;

use crate::catalog::{CatalogEntry, snapshot_document};
use crate::collection::Collection;
use crate::commit::Ticket;
use crate::engine::Inner;
use crate::error::{Result, StorageError};
use crate::limits::{
    COMPACTION_CHUNK_BYTES, COMPACTION_LOG_BYTES_MIN, COMPACTION_SPACE_RATIO_PERCENT,
};
use crate::log::{Loc, OutRecord};
use crate::record::{self, Kind};

/// One pass; true if a segment was removed. `any_size` skips the minimum log size (the space
/// ratio still decides, so repeated calls stop once the log is tight).
pub(crate) fn compact_once(inner: &Inner, any_size: bool) -> Result<bool> {
    let _m = inner
        .maintenance
        .lock()
        .map_err(|_| StorageError::Poisoned("maintenance lock poisoned".into()))?;
    let log = &inner.shared.log;
    let usage = log.segment_usage();
    let current = log.current_segment();
    let Some(&(oldest, _, _)) = usage.first() else {
        return Ok(false);
    };
    if oldest == current {
        return Ok(false);
    }
    let total: u64 = usage.iter().map(|u| u.1).sum();
    let live: u64 = usage.iter().map(|u| u.2).sum();
    let big_enough = any_size || total >= COMPACTION_LOG_BYTES_MIN;
    if !big_enough || total * 100 <= live * COMPACTION_SPACE_RATIO_PERCENT {
        return Ok(false);
    }
    let colls: Vec<Arc<Collection>> = inner
        .catalog
        .read()
        .map_err(|_| StorageError::Poisoned("catalog lock poisoned".into()))?
        .by_id
        .values()
        .cloned()
        .collect();
    for c in &colls {
        relocate(inner, c, oldest)?;
    }
    let ticket = write_snapshot(inner)?;
    ticket.wait_durable_blocking()?;
    // The last checkpoint may name locations in `oldest`; a new one must replace it first.
    crate::checkpoint::take(inner)?;
    inner
        .checkpoint_segment
        .store(log.current_segment(), std::sync::atomic::Ordering::Release);
    log.remove_segment(oldest)?;
    tracing::debug!(segment = %record::segment_file_name(oldest), "compacted");
    Ok(true)
}

/// Re-appends every current document of `c` stored in `segment`, a chunk per lock hold.
fn relocate(inner: &Inner, c: &Collection, segment: u64) -> Result<()> {
    let log = &inner.shared.log;
    let todo: Vec<(u64, Loc)> = {
        let st = c.read()?;
        st.records
            .iter()
            .filter(|(_, l)| l.segment == segment)
            .map(|(r, l)| (*r, *l))
            .collect()
    };
    let mut rest = todo.as_slice();
    while !rest.is_empty() {
        let mut st = c.write_state()?;
        if st.dropped {
            return Ok(());
        }
        let mut recs = Vec::new();
        let mut moved = Vec::new();
        let mut bytes = 0u64;
        while let Some(((rid, loc), tail)) = rest.split_first() {
            if bytes >= COMPACTION_CHUNK_BYTES {
                break;
            }
            rest = tail;
            if st.records.get(rid) != Some(loc) {
                continue; // replaced or deleted meanwhile
            }
            let doc = log.read_document(*loc)?;
            bytes += u64::from(loc.size);
            recs.push(OutRecord {
                kind: Kind::Put,
                payload: record::data_payload(c.id, *rid, doc.as_bytes()),
            });
            moved.push((*rid, *loc));
        }
        if recs.is_empty() {
            continue;
        }
        let (seq, locs) = log.append(&recs, false)?;
        for ((rid, old), new) in moved.into_iter().zip(locs) {
            st.records.insert(rid, new);
            log.release(old);
        }
        drop(st);
        inner.shared.commit.note_written(seq);
    }
    Ok(())
}

/// Appends the whole catalog as one record.
fn write_snapshot(inner: &Inner) -> Result<Ticket> {
    let cat = inner
        .catalog
        .read()
        .map_err(|_| StorageError::Poisoned("catalog lock poisoned".into()))?;
    let mut entries = Vec::with_capacity(cat.by_id.len());
    for c in cat.by_id.values() {
        let meta = c
            .meta
            .read()
            .map_err(|_| StorageError::Poisoned("meta lock poisoned".into()))?
            .clone();
        let st = c.read()?;
        entries.push(CatalogEntry {
            id: c.id,
            db: meta.db,
            name: meta.name,
            uuid: c.uuid,
            options: meta.options,
            indexes: st.indexes.iter().map(|i| i.spec.clone()).collect(),
            next_record_id: st.next_record_id,
        });
    }
    let doc = snapshot_document(&entries, cat.next_collection_id);
    let payload = doc
        .to_vec()
        .map_err(|e| StorageError::InvalidDocument(e.to_string()))?;
    let (seq, _) = inner.shared.log.append(
        &[OutRecord {
            kind: Kind::CatalogSnapshot,
            payload,
        }],
        false,
    )?;
    drop(cat);
    inner.shared.commit.note_written(seq);
    Ok(Ticket {
        sequence: seq,
        record_ids: Vec::new(),
        commit: inner.shared.commit.clone(),
    })
}
