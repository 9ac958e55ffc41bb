//! `$out` and `$merge`: writing an aggregation's results as the pipeline produces them, in
//! chunks of at most [`CHUNK_DOCS_MAX`] documents and [`CHUNK_BYTES_MAX`] bytes, so a large
//! result is never held whole. `$out` builds the new contents in a temporary collection and
//! renames it over the target once durable (a failure drops the temporary collection, the
//! target untouched); `$merge` matches each result on its `on` fields under the target's
//! namespace lock, taken per chunk, so documents merged before a failure stay merged, as in
//! mongod. A `$merge` whose pipeline reads its own target takes every result first, so its
//! reads never see its writes. Pulls and writes run on the storage pool; the durability waits
//! stay async.

use super::crud_write::{prepare_document, prepare_for_storage};
use super::{Request, off_thread};
use crate::commands::aggregate::Output;
use crate::error::{CommandResult, storage_error};
use crate::exec::aggregate::to_doc;
use crate::exec::stream::Streamed;
use crate::query::matcher::Filter;
use crate::query::pipeline::output::merge_documents;
use crate::query::pipeline::{OutputMode, OutputTarget};
use crate::state::ServerState;
use bson::{Document, RawDocumentBuf};
use std::collections::VecDeque;
use std::sync::Arc;
use storage::{Ticket, WriteOp};

/// Most documents written (or merged under one lock) at a time.
pub const CHUNK_DOCS_MAX: usize = 1_000;
/// Most bytes of documents pulled before they are written (one document more may pass it).
pub const CHUNK_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The results still to write: the suspended pipeline, or all of them already pulled.
enum Results {
    Streaming(Box<Streamed>),
    Held(VecDeque<RawDocumentBuf>),
}

impl Results {
    /// The next result (`None`: no more), pulled within the request's deadline.
    fn next(&mut self, req: &Request) -> CommandResult<Option<RawDocumentBuf>> {
        match self {
            Results::Streaming(run) => run.next_doc(super::crud_read::deadline(req)),
            Results::Held(docs) => Ok(docs.pop_front()),
        }
    }

    /// The next chunk (empty: no more).
    fn chunk(&mut self, req: &Request) -> CommandResult<Vec<RawDocumentBuf>> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while out.len() < CHUNK_DOCS_MAX && bytes < CHUNK_BYTES_MAX {
            let Some(doc) = self.next(req)? else { break };
            bytes += doc.as_bytes().len();
            out.push(doc);
        }
        Ok(out)
    }
}

/// `$out` replaces the target atomically (built in a temporary collection, then renamed over
/// it); `$merge` inserts or updates document by document. See the module note.
pub async fn write_output(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    out: Output,
) -> CommandResult<()> {
    let Output {
        target,
        run,
        reads_target,
        collator,
        ..
    } = out;
    crate::catalog::validate_collection_name(&target.db, &target.coll)?;
    crate::catalog::check_user_writable(&target.db, &target.coll)?;
    state.catalog.check_not_view(&target.db, &target.coll)?;
    match target.mode {
        OutputMode::Out => write_out(state, req, target, run, collator).await,
        OutputMode::Merge { .. } => {
            let mut results = Results::Streaming(run);
            if reads_target {
                let c = collator.clone();
                results = off_thread(state, req, move |_, req| {
                    let _collation = crate::query::collator::scope(c);
                    let mut all = VecDeque::new();
                    while let Some(doc) = results.next(req)? {
                        all.push_back(doc);
                    }
                    Ok(Results::Held(all))
                })
                .await?;
            }
            write_merge(state, req, target, results, collator).await
        }
    }
}

/// `$out`: every chunk into a temporary collection as it comes, then, once all of it is
/// durable, the rename over the target. A failure drops the temporary collection.
async fn write_out(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    target: OutputTarget,
    run: Box<Streamed>,
    collator: Option<Arc<crate::query::collator::Collator>>,
) -> CommandResult<()> {
    let temp = format!("tmp.agg_out.{}", bson::oid::ObjectId::new());
    let (db, tmp) = (target.db.clone(), temp.clone());
    let written = off_thread(state, req, move |state, req| {
        let _collation = crate::query::collator::scope(collator);
        let last = write_temp(state, req, &db, &tmp, Results::Streaming(run))?;
        if let Some(t) = &last {
            state.catalog.sync_if_idle(t, &Default::default());
        }
        Ok(last)
    })
    .await;
    let durable = match written {
        Ok(Some(t)) => state.catalog.finish_write(&t, &Default::default()).await,
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    let (db, tmp) = (target.db.clone(), temp.clone());
    if let Err(e) = durable {
        let _ = off_thread(state, req, move |state, _| {
            let _ = state.catalog.engine().drop_collection(&db, &tmp);
            Ok(())
        })
        .await;
        return Err(e);
    }
    off_thread(state, req, move |state, _| {
        let (db, name) = (target.db.as_str(), target.coll.as_str());
        state
            .catalog
            .engine()
            .rename_collection(db, &temp, db, name, true)
            .map_err(|e| storage_error(e, db, name))?;
        state.cursors.invalidate(db, Some(name));
        Ok(())
    })
    .await
}

/// `$merge`: chunk by chunk, each pulled without the lock and merged under it.
async fn write_merge(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    target: OutputTarget,
    mut results: Results,
    collator: Option<Arc<crate::query::collator::Collator>>,
) -> CommandResult<()> {
    let target = Arc::new(target);
    let mut last: Option<Ticket> = None;
    loop {
        let c = collator.clone();
        let (back, chunk, written) = off_thread(state, req, move |state, req| {
            let _collation = crate::query::collator::scope(c);
            let chunk = results.chunk(req)?;
            if chunk.is_empty()
                && let Some(t) = &last
            {
                state.catalog.sync_if_idle(t, &Default::default());
            }
            Ok((results, chunk, last))
        })
        .await?;
        (results, last) = (back, written);
        if chunk.is_empty() {
            break;
        }
        let guard = state.catalog.lock(&target.db, &target.coll).await;
        let t = target.clone();
        // The `on` match runs without the command's collation, as the whole-result path did.
        let ticket = off_thread(state, req, move |state, _| {
            let written = merge_into(state, &t, chunk);
            drop(guard);
            written
        })
        .await?;
        last = ticket.or(last);
    }
    if let Some(t) = last {
        state.catalog.finish_write(&t, &Default::default()).await?;
    }
    Ok(())
}

/// `$out`'s documents into the temporary collection (created even for an empty result, which
/// then empties the target), chunk by chunk as they are pulled.
fn write_temp(
    state: &ServerState,
    req: &Request,
    db: &str,
    temp: &str,
    mut results: Results,
) -> CommandResult<Option<Ticket>> {
    let coll = state.catalog.get_or_create(db, temp)?;
    let mut last = None;
    loop {
        let chunk = results.chunk(req)?;
        if chunk.is_empty() {
            return Ok(last);
        }
        // Raw results go in as they are when `_id` is first (the usual case), borrowed from
        // the chunk; no decode and re-encode per document.
        let ops = chunk
            .iter()
            .map(|raw| prepare_for_storage(raw.as_ref()).map(WriteOp::Insert))
            .collect::<CommandResult<Vec<_>>>()?;
        last = Some(coll.write(ops).map_err(|e| storage_error(e, db, temp))?);
    }
}

/// `$merge`: each document matched on `on` and inserted, replaced or merged.
fn merge_into(
    state: &ServerState,
    target: &OutputTarget,
    output: Vec<RawDocumentBuf>,
) -> CommandResult<Option<Ticket>> {
    let OutputMode::Merge {
        on,
        when_matched,
        when_not_matched,
    } = &target.mode
    else {
        return Ok(None);
    };
    let (db, name) = (target.db.as_str(), target.coll.as_str());
    let coll = state.catalog.get_or_create(db, name)?;
    let mut last = None;
    for new in output {
        let new = to_doc(&new)?;
        let key: Document = on
            .iter()
            .filter_map(|f| new.get(f).map(|v| (f.clone(), v.clone())))
            .collect();
        let existing =
            crate::exec::collect_matches(&coll, &Filter::parse(&key)?, &key, None, None, Some(1))?;
        let existing_doc = existing
            .first()
            .map(|(_, raw, _)| to_doc(raw))
            .transpose()?;
        let Some(result) =
            merge_documents(existing_doc.as_ref(), &new, when_matched, *when_not_matched)?
        else {
            continue;
        };
        let raw = prepare_document(result)?;
        let op = match existing.first() {
            Some((rid, _, _)) => WriteOp::Replace(*rid, raw),
            None => WriteOp::Insert(raw.into()),
        };
        last = Some(
            coll.write(vec![op])
                .map_err(|e| storage_error(e, db, name))?,
        );
    }
    Ok(last)
}
