//! The write path across collections: one atomic log batch for the ops of several collections
//! of one engine (what a multi-document transaction commits). The collections' write locks are
//! taken in collection-id order, so two such writes never wait on each other in a cycle; every
//! collection's ops are planned (index changes checked and applied, undone for all collections
//! if one fails), the records of all of them are appended as ONE batch (one STAMP when the
//! engine stamps writes, its op indexes counting across the batch), and each collection's record
//! tree is updated. Recovery applies a batch whole or not at all, so a crash leaves every
//! collection's part there or none. `Collection::write` is the one-collection case.

use std::sync::RwLockWriteGuard;
use std::sync::atomic::Ordering;

use bson::Document;

use crate::collection::{CollState, Collection, Planned, RecordId, Undo, WriteOp};
use crate::commit::Ticket;
use crate::error::{Result, StorageError};
use crate::index_build::SideOp;
use crate::limits::{DOCUMENT_SIZE_MAX, WRITE_BATCH_OPS_MAX};
use crate::log::{OutRecord, StampOps};
use crate::snapshot::{Body, Snapshot};

/// A batch's STAMP as it is planned: one op code per record, details by op index.
#[derive(Default)]
pub(crate) struct StampDraft {
    pub ops: Vec<u8>,
    pub details: Document,
}

/// One collection's share of a batch while it is planned; its planned records borrow their
/// documents from the ops (`'o`).
struct Part<'a, 'o> {
    coll: &'a Collection,
    st: RwLockWriteGuard<'a, CollState>,
    undo: Vec<Undo>,
    side: Vec<Vec<SideOp>>,
    planned: Vec<Planned<'o>>,
    /// Per planned op: whether the caller asked for it (false: a capped collection's trim).
    mine: Vec<bool>,
    /// The version before the batch of each RecordId it touches, kept for open snapshots
    /// (None: no snapshot is open).
    befores: Option<Vec<(RecordId, Body)>>,
}

fn check_sizes(parts: &[(&Collection, Vec<WriteOp>)]) -> Result<()> {
    let total: usize = parts.iter().map(|(_, ops)| ops.len()).sum();
    if total > WRITE_BATCH_OPS_MAX {
        return Err(StorageError::LimitExceeded(format!(
            "{total} ops in one write, at most {WRITE_BATCH_OPS_MAX}"
        )));
    }
    for (_, ops) in parts {
        for op in ops {
            if let Some(d) = op.document()
                && d.as_bytes().len() > DOCUMENT_SIZE_MAX
            {
                return Err(StorageError::LimitExceeded("document too large".into()));
            }
        }
    }
    Ok(())
}

/// Applies every collection's ops as one atomic batch: every index check of every collection
/// passes and everything is logged and applied, or nothing is. The collections must belong to
/// one engine and appear once each. The ticket holds one RecordId per op, collection after
/// collection in the order given.
pub fn write_across(parts: Vec<(&Collection, Vec<WriteOp>)>) -> Result<Ticket> {
    write_across_at(parts, None, None)
}

/// The key of a batch's STAMP details that holds the batch's `note` (op details are keyed by
/// op index, so no op's key can be this).
pub const STAMP_NOTE_KEY: &str = "txn";

/// `write_across` for a transaction that read at snapshot `at`: if a batch committed after the
/// snapshot changed a document this one replaces or deletes, nothing is written and the answer
/// is `WriteConflict` (the check and the write are one step under the collections' locks). A
/// stamped batch carries `note` (the transaction's session and number) for the history.
pub fn write_across_at(
    parts: Vec<(&Collection, Vec<WriteOp>)>,
    at: Option<&Snapshot>,
    note: Option<Document>,
) -> Result<Ticket> {
    check_sizes(&parts)?;
    crate::nowait::write_allowed()?;
    let Some(shared) = parts.first().map(|(c, _)| c.shared.clone()) else {
        return Err(StorageError::InvalidDocument(
            "a write names no collection".into(),
        ));
    };
    if parts
        .iter()
        .any(|(c, _)| !std::sync::Arc::ptr_eq(&c.shared, &shared))
    {
        return Err(StorageError::InvalidNamespace(
            "one write spans two engines".into(),
        ));
    }
    let mut by_id: Vec<u64> = parts.iter().map(|(c, _)| c.id).collect();
    by_id.sort_unstable();
    if by_id.windows(2).any(|w| w[0] == w[1]) {
        return Err(StorageError::InvalidNamespace(
            "one write names a collection twice".into(),
        ));
    }
    let guards = lock_in_id_order(&parts)?;
    let _writing = shared.versions.writing()?;
    if let Some(snap) = at {
        check_conflicts(&parts, snap)?;
    }
    let keep = shared.versions.keeping()?;
    let mut stamp = shared.stamp.then(StampDraft::default);
    // Every part's ops (a capped collection's trims added) stay here until the batch is
    // logged: the planned records borrow their documents.
    let mut colls = Vec::with_capacity(parts.len());
    let mut all_ops = Vec::with_capacity(parts.len());
    let mut mines = Vec::with_capacity(parts.len());
    for ((coll, ops), st) in parts.into_iter().zip(&guards) {
        let (ops, mine) = with_trims(coll, st, ops)?;
        colls.push(coll);
        all_ops.push(ops);
        mines.push(mine);
    }
    let mut planned_parts: Vec<Part<'_, '_>> = Vec::with_capacity(colls.len());
    let each = colls.into_iter().zip(&all_ops).zip(mines).zip(guards);
    for (((coll, ops), mine), st) in each {
        let mut part = Part {
            coll,
            st,
            undo: Vec::new(),
            side: Vec::new(),
            planned: Vec::new(),
            mine,
            befores: keep.then(Vec::new),
        };
        let planned = plan_part(&mut part, ops, stamp.as_mut());
        planned_parts.push(part);
        if let Err(e) = planned {
            rollback_all(&mut planned_parts)?;
            return Err(e);
        }
    }
    if let (Some(s), Some(note)) = (stamp.as_mut(), note) {
        s.details.insert(STAMP_NOTE_KEY, note);
    }
    let stamp = match stamp {
        Some(d) => Some(StampOps {
            ops: d.ops,
            details: d
                .details
                .to_vec()
                .map_err(|e| StorageError::InvalidDocument(format!("stamp details: {e}")))?,
        }),
        None => None,
    };
    // Each op's record, preceded by its pre-image where the collection keeps them.
    let mut records: Vec<OutRecord> = Vec::new();
    let mut is_pre_image: Vec<bool> = Vec::new();
    for p in planned_parts.iter_mut().flat_map(|p| p.planned.iter_mut()) {
        if let Some(pre) = p.pre_image.take() {
            records.push(pre);
            is_pre_image.push(true);
        }
        records.push(OutRecord {
            kind: p.record.kind,
            payload: std::mem::take(&mut p.record.payload),
            document: p.record.document,
        });
        is_pre_image.push(false);
    }
    let (seq, locs, timestamp) = match shared.log.append_stamped(&records, true, stamp.as_ref()) {
        Ok(x) => x,
        Err(e) => {
            rollback_all(&mut planned_parts)?;
            return Err(e);
        }
    };
    drop(records);
    shared.versions.note_batch(seq, timestamp, keep)?;
    let mut locs = locs
        .into_iter()
        .zip(is_pre_image)
        .filter(|(_, pre)| !pre)
        .map(|(loc, _)| loc);
    let mut record_ids = Vec::new();
    for p in &mut planned_parts {
        let mine: Vec<_> = locs.by_ref().take(p.planned.len()).collect();
        if let Some(befores) = p.befores.take() {
            shared.versions.record(p.coll.id, seq, befores)?;
        }
        if let Err(e) = p.coll.apply(&mut p.st, &p.planned, mine) {
            // The log has the batch; memory does not. A restart replays it.
            shared
                .log
                .poison(format!("applying a logged write failed: {e}"));
            return Err(e);
        }
        for (b, ops) in p.st.builds.iter().zip(std::mem::take(&mut p.side)) {
            b.record(ops)?;
        }
        p.coll
            .write_ops
            .fetch_add(p.planned.len() as u64, std::sync::atomic::Ordering::Relaxed);
        record_ids.extend(
            p.planned
                .iter()
                .zip(&p.mine)
                .filter(|(_, m)| **m)
                .map(|(p, _)| p.rid),
        );
    }
    drop(planned_parts);
    shared.applied.fetch_max(seq, Ordering::AcqRel);
    shared.commit.note_written(seq);
    Ok(Ticket {
        record_ids,
        timestamp,
        ..Ticket::new(&shared.commit, seq)
    })
}

/// `WriteConflict` if a batch after `snap` changed a document that `parts` replace or delete.
fn check_conflicts(parts: &[(&Collection, Vec<WriteOp>)], snap: &Snapshot) -> Result<()> {
    for (coll, ops) in parts {
        for op in ops {
            let rid = match op {
                WriteOp::Insert(_) => continue,
                WriteOp::Replace(rid, _) | WriteOp::Update(rid, _) | WriteOp::Delete(rid) => *rid,
            };
            if snap
                .versions()
                .changed_after(coll.id, rid, snap.sequence())?
            {
                let (db, name) = coll.namespace();
                return Err(StorageError::WriteConflict(format!(
                    "record {rid} of {db}.{name} was changed after the transaction's snapshot"
                )));
            }
        }
    }
    Ok(())
}

/// Each collection's write lock, in the order given, taken in collection-id order.
fn lock_in_id_order<'a>(
    parts: &[(&'a Collection, Vec<WriteOp>)],
) -> Result<Vec<RwLockWriteGuard<'a, CollState>>> {
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| parts[i].0.id);
    let mut guards: Vec<Option<RwLockWriteGuard<'a, CollState>>> =
        (0..parts.len()).map(|_| None).collect();
    for i in order {
        let st = parts[i].0.write_state()?;
        if st.dropped {
            return Err(StorageError::NamespaceNotFound(parts[i].0.namespace().0));
        }
        guards[i] = Some(st);
    }
    Ok(guards.into_iter().flatten().collect())
}

/// `ops` with a capped collection's trims added, and which of them are the caller's.
fn with_trims<'w>(
    coll: &Collection,
    st: &CollState,
    ops: Vec<WriteOp<'w>>,
) -> Result<(Vec<WriteOp<'w>>, Vec<bool>)> {
    Ok(match coll.capped_limits() {
        Some(l) => crate::capped::with_trims(st, &coll.shared.pager, l, ops)?
            .into_iter()
            .unzip(),
        None => {
            let n = ops.len();
            (ops, vec![true; n])
        }
    })
}

/// Plans one collection's ops into `part`.
fn plan_part<'o>(
    part: &mut Part<'_, 'o>,
    ops: &'o [WriteOp<'_>],
    stamp: Option<&mut StampDraft>,
) -> Result<()> {
    part.side = vec![Vec::new(); part.st.builds.len()];
    part.planned = part.coll.plan(
        &mut part.st,
        ops,
        &mut part.undo,
        &mut part.side,
        stamp,
        part.befores.as_mut(),
    )?;
    Ok(())
}

/// Undoes the index changes of every part planned so far (never refused: see
/// `crate::nowait::suspend`).
fn rollback_all(parts: &mut [Part<'_, '_>]) -> Result<()> {
    let _may_block = crate::nowait::suspend();
    let mut result = Ok(());
    for p in parts.iter_mut().rev() {
        if let Err(e) = p.coll.rollback(&mut p.st, std::mem::take(&mut p.undo)) {
            result = Err(e);
        }
    }
    result
}
