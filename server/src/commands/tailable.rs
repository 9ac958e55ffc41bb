//! Tailable cursors on capped collections: `find` with `tailable` (and `awaitData`) opens a
//! collection scan in insertion order that stays open at the end of the collection and resumes
//! after the last document it read. A `getMore` on an `awaitData` cursor that finds nothing
//! waits, holding no pool thread, for the engine's durable watch (the commit of a later write,
//! as change streams do) or its `maxTimeMS` (1 s by default), whichever comes first.
//!
//! When the document the cursor last read has been removed (the collection trimmed past it),
//! the cursor dies with CappedPositionLost, as mongod's does. An empty collection gives no
//! position to resume from, so `find` answers with a closed cursor there (mongod does too).

use super::crud_read::{cursor_reply, time_left};
use super::{Reply, Request};
use crate::cursors::{Cursor, FIRST_BATCH_COUNT_DEFAULT, Tail};
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::exec::DocSource;
use crate::exec::find::FindSpec;
use crate::exec::scan::{ScanMode, ScanState};
use crate::limits::CHANGE_AWAIT_MS_MAX;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use storage::{Collection, Direction};

/// How long an awaitData getMore without `maxTimeMS` waits (mongod's 1 s).
const AWAIT_MS_DEFAULT: u64 = 1000;

/// The `find` options that go with `tailable`, checked as mongod checks them.
pub fn check_find(body: &Document) -> CommandResult<()> {
    let flag = |k: &str| matches!(body.get(k), Some(Bson::Boolean(true)));
    if flag("awaitData") && !flag("tailable") {
        return Err(err(
            ErrorCode::FailedToParse,
            "Cannot set 'awaitData' without also setting 'tailable'",
        ));
    }
    if flag("tailable") {
        let natural_forward = match body.get("sort") {
            None | Some(Bson::Null) => true,
            Some(Bson::Document(s)) if s.is_empty() => true,
            Some(Bson::Document(s)) => {
                s.len() == 1
                    && s.get("$natural")
                        .and_then(crate::query::types::as_i64)
                        .is_some_and(|d| d > 0)
            }
            _ => false,
        };
        if !natural_forward {
            return Err(err(
                ErrorCode::BadValue,
                "cannot use tailable option with a sort other than {$natural: 1}",
            ));
        }
    }
    Ok(())
}

/// The tailable settings a `find` asks for (None: an ordinary find).
pub fn requested(body: &Document) -> CommandResult<Option<Tail>> {
    let flag = |k: &str| matches!(body.get(k), Some(Bson::Boolean(true)));
    Ok(flag("tailable").then(|| Tail {
        await_data: flag("awaitData"),
    }))
}

/// A tailable `find` on `coll` (which exists).
pub fn find(
    state: &ServerState,
    req: &Request,
    coll: Arc<Collection>,
    a: FindSpec,
    tail: Tail,
) -> CommandResult<Reply> {
    let ns = format!("{}.{}", req.db, args_name(req));
    if coll.capped_limits().is_none() {
        return Err(err(
            ErrorCode::BadValue,
            "error processing query: tailable cursor requested on non capped collection",
        ));
    }
    let mut scan = ScanState::new(
        coll.clone(),
        Arc::new(a.filter.clone()),
        ScanMode::Collection {
            direction: Direction::Forward,
            after: None,
        },
    );
    scan.finish = crate::exec::find::finish_of(&a, None);
    scan.skip = a.skip;
    scan.remaining = a.limit;
    let mut source = DocSource::Scan(Box::new(scan));
    let first_count = a.batch_size.unwrap_or(FIRST_BATCH_COUNT_DEFAULT);
    let batch = source.next_batch(first_count, req.op.deadline())?;
    let positioned = matches!(&source, DocSource::Scan(s)
        if matches!(s.mode, ScanMode::Collection { after: Some(_), .. }));
    if a.single_batch || !positioned || finished(&source) {
        return Ok(cursor_reply(0, &ns, true, batch));
    }
    let cursor = Cursor {
        db: req.db.clone(),
        coll: args_name(req),
        uuid: Some(coll.uuid()),
        source,
        last_used: Instant::now(),
        no_timeout: a.no_timeout,
        time_left: time_left(req),
        tail: Some(tail),
        collator: crate::query::collator::current(),
        snapshot: None,
    };
    let id = state.cursors.insert(cursor)?;
    Ok(cursor_reply(id, &ns, true, batch))
}

fn args_name(req: &Request) -> String {
    req.body
        .get_str(req.name.as_str())
        .unwrap_or("")
        .to_string()
}

/// A limit used up: the cursor has nothing more to give, ever.
fn finished(source: &DocSource) -> bool {
    matches!(source, DocSource::Scan(s) if s.remaining == Some(0) && s.pending.is_empty())
}

/// `getMore` on a tailable cursor (None: not one).
pub async fn get_more(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
) -> Option<CommandResult<Reply>> {
    let id = super::get_more_id(req)?;
    let tail = state.cursors.tail_of(id)?;
    Some(get_more_on(state, req, id, tail).await)
}

async fn get_more_on(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    id: i64,
    tail: Tail,
) -> CommandResult<Reply> {
    state.opcounters.getmore.fetch_add(1, Relaxed);
    super::argspec::check(&super::argspec::specs::GET_MORE, &req.body)?;
    if req.max_time_ms.is_some() && !tail.await_data {
        return Err(err(
            ErrorCode::BadValue,
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    let ns = format!(
        "{}.{}",
        req.db,
        req.body.get_str("collection").unwrap_or("")
    );
    let want = super::args::opt_non_negative(&req.body, "getMore", "batchSize")?
        .filter(|b| *b > 0)
        .map_or(usize::MAX, |b| b as usize);
    // maxTimeMS bounds the wait for new documents, not the work.
    let wait_ms = match tail.await_data {
        true => req
            .max_time_ms
            .map_or(AWAIT_MS_DEFAULT, |ms| ms.max(0) as u64)
            .min(CHANGE_AWAIT_MS_MAX),
        false => 0,
    };
    req.op.set_deadline(None);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    // Subscribed before the first read: a commit after it wakes the wait below.
    let mut durable = state.catalog.engine().durable_watch();
    let mut shutdown = state.shutdown_requested();
    loop {
        let ns2 = ns.clone();
        let (docs, open) = crate::offload::run(state, "getMore", Some(&req.op), move |st| {
            let Some(mut cursor) = st.cursors.take(id) else {
                return Err(err(
                    ErrorCode::CursorNotFound,
                    format!("cursor id {id} not found"),
                ));
            };
            if cursor.ns() != ns2 {
                let owner = cursor.ns();
                st.cursors.put_back(id, cursor);
                return Err(err(
                    ErrorCode::Unauthorized,
                    format!(
                        "Requested getMore on namespace '{ns2}', but cursor belongs to a different namespace {owner}"
                    ),
                ));
            }
            let docs = next_batch(st, &mut cursor, want)?;
            let open = !finished(&cursor.source);
            if open {
                st.cursors.put_back(id, cursor);
            }
            Ok((docs, open))
        })
        .await?;
        if !docs.is_empty() || !open || tokio::time::Instant::now() >= deadline {
            return Ok(cursor_reply(if open { id } else { 0 }, &ns, false, docs));
        }
        tokio::select! {
            alive = durable.changed() => if !alive {
                return Err(err(ErrorCode::InterruptedAtShutdown, "interrupted at shutdown"));
            },
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => {
                return Err(err(ErrorCode::InterruptedAtShutdown, "interrupted at shutdown"));
            }
        }
    }
}

/// The documents after the cursor's position (the cursor is out of the registry; on an error
/// it stays out: it is dead).
fn next_batch(
    state: &ServerState,
    cursor: &mut Cursor,
    want: usize,
) -> CommandResult<Vec<RawDocumentBuf>> {
    let same = state
        .catalog
        .collection(&cursor.db, &cursor.coll)
        .is_some_and(|c| Some(c.uuid()) == cursor.uuid);
    if !same {
        return Err(err(
            ErrorCode::QueryPlanKilled,
            format!("collection dropped: {}", cursor.ns()),
        ));
    }
    let DocSource::Scan(s) = &mut cursor.source else {
        return Ok(Vec::new());
    };
    if let ScanMode::Collection {
        after: Some(rid), ..
    } = s.mode
    {
        let here = s
            .coll
            .contains(rid)
            .map_err(|e| storage_error(e, &cursor.db, &cursor.coll))?;
        if !here {
            return Err(err(
                ErrorCode::CappedPositionLost,
                format!(
                    "CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId({rid})"
                ),
            ));
        }
    }
    // The end it reached last time may have moved on.
    s.exhausted = false;
    cursor.source.next_batch(want, None)
}
