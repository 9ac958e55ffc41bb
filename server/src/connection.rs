//! One client connection: read whole frames from the socket, decode them with `wire`, hand each
//! command to `commands::dispatch`, and write the reply compressed the way the request was. A
//! malformed frame closes this connection only; a command error is a reply, never a close.
//! Requests on one connection are handled one at a time, in order, as mongod does. While a
//! request runs, the connection keeps reading (up to `READ_AHEAD_BYTES_MAX` of later requests)
//! so that a client hanging up is noticed: its request's operation is interrupted (a storage job
//! still queued is then never started, a running one stops at its next yield point with
//! ClientDisconnect) and the connection ends without waiting for it.

use crate::commands::{self, ConnectionInfo, Reply, Request, Sequence};
use crate::error::{CommandError, ErrorCode, err};
use crate::interrupt::{Interrupt, Reason};
use crate::limits;
use crate::state::ServerState;
use bson::{Document, RawDocumentBuf};
use bytes::BytesMut;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use wire::{Body, Compressor, Message, OpMsg, OpQuery, OpReply};

/// Commands whose replies are never compressed (the compression spec's list).
const NEVER_COMPRESSED: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "saslStart",
    "saslContinue",
    "getnonce",
    "authenticate",
    "createUser",
    "updateUser",
    "copydbSaslStart",
    "copydbgetnonce",
    "copydb",
];

/// Why a connection loop ended.
enum End {
    ClientClosed,
    Malformed(String),
    Io(std::io::Error),
    Shutdown,
    /// Under `--auth`: no request completed within `unauthenticatedIdleTimeoutMS`.
    IdleUnauthenticated,
}

/// Serve one connection until it ends; returns the client's driver as "name version" (from the
/// handshake metadata) for the connection-ended log line.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    state: Arc<ServerState>,
    mut stream: S,
    mut info: ConnectionInfo,
) -> String {
    let end = run(&state, &mut stream, &mut info).await;
    match end {
        End::IdleUnauthenticated => {
            tracing::info!(remote = %info.peer, connection_id = info.id, "closing connection: unauthenticated and idle")
        }
        End::ClientClosed | End::Shutdown => {}
        End::Malformed(why) => {
            tracing::warn!(remote = %info.peer, connection_id = info.id, error = %why, "closing connection: malformed message")
        }
        End::Io(e) => {
            tracing::debug!(remote = %info.peer, connection_id = info.id, error = %e, "connection I/O error")
        }
    }
    let driver = info
        .client_metadata
        .as_ref()
        .and_then(|m| m.get_document("driver").ok());
    match driver {
        Some(d) => format!(
            "{} {}",
            d.get_str("name").unwrap_or("unknown"),
            d.get_str("version").unwrap_or("")
        ),
        None => "unknown".to_string(),
    }
}

/// When an unauthenticated connection (under `--auth`) that completed its last request at
/// `last` is closed; far in the future otherwise.
fn idle_deadline(
    state: &ServerState,
    info: &ConnectionInfo,
    last: Instant,
) -> tokio::time::Instant {
    let far = Duration::from_secs(86_400 * 365);
    let limit = if info.auth.counts_as_unauthenticated() {
        Duration::from_millis(state.params.get_i64("unauthenticatedIdleTimeoutMS").max(1) as u64)
    } else {
        far
    };
    tokio::time::Instant::from_std(last + limit)
}

async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    state: &Arc<ServerState>,
    stream: &mut S,
    info: &mut ConnectionInfo,
) -> End {
    let mut buf = BytesMut::with_capacity(limits::READ_BUFFER_INITIAL_BYTES);
    let mut shutdown = state.shutdown_requested();
    let mut last_request = Instant::now();
    loop {
        match wire::frame_length(&buf) {
            Err(e) => return End::Malformed(e.to_string()),
            Ok(Some(len)) if buf.len() >= len => {
                // Frozen, not copied: the message's document sequences are slices of it.
                let frame = buf.split_to(len).freeze();
                shrink_read_buffer(&mut buf, len);
                state.network.bytes_in.fetch_add(len as u64, Relaxed);
                state.network.num_requests.fetch_add(1, Relaxed);
                let message = match wire::decode_shared(frame.clone()) {
                    Ok(m) => m,
                    Err(e) if !e.closes_connection() => {
                        // mongod answers these (a well-framed OP_MSG with bad sections) with an error.
                        let Some(reply) = decode_error_reply(&frame, &e) else {
                            return End::Malformed(e.to_string());
                        };
                        if let Err(io) = write_frame(stream, &reply).await {
                            return End::Io(io);
                        }
                        continue;
                    }
                    Err(e) => return End::Malformed(e.to_string()),
                };
                state.connections.active.fetch_add(1, Relaxed);
                let outcome = handle_watching(state, stream, &mut buf, info, message).await;
                state.connections.active.fetch_sub(1, Relaxed);
                match outcome {
                    Ok(Some((bytes, exhaust))) => {
                        state
                            .network
                            .bytes_out
                            .fetch_add(bytes.len() as u64, Relaxed);
                        if let Err(e) = write_frame(stream, &bytes).await {
                            return End::Io(e);
                        }
                        if let Some(ex) = exhaust
                            && let Some(end) =
                                stream_hellos(state, stream, info, &mut buf, ex).await
                        {
                            return end;
                        }
                    }
                    Ok(None) => {}
                    Err(end) => return end,
                }
                last_request = Instant::now();
                continue;
            }
            Ok(_) => {}
        }
        if state.is_shutting_down() {
            return End::Shutdown;
        }
        tokio::select! {
            read = stream.read_buf(&mut buf) => match read {
                Ok(0) => return End::ClientClosed,
                Ok(_) => {}
                Err(e) => return End::Io(e),
            },
            _ = shutdown.changed() => {
                // Between requests: nothing in flight on this connection, so stop now.
                return End::Shutdown;
            }
            _ = tokio::time::sleep_until(idle_deadline(state, info, last_request)) => {
                return End::IdleUnauthenticated;
            }
        }
    }
}

/// After a frame of `frame_len` bytes was split off `buf`: if it was large, or `buf` grew large,
/// move what is left (the start of later requests) into a fresh small buffer. The big
/// allocation is then freed when the request's frame is dropped, instead of staying with the
/// connection for as long as it lives.
fn shrink_read_buffer(buf: &mut BytesMut, frame_len: usize) {
    let kept = limits::READ_BUFFER_KEPT_BYTES_MAX;
    // A long run of requests read ahead is left alone until little of it remains, so shrinking
    // copies at most `kept` bytes once, not the rest of the run after every request.
    if (frame_len <= kept && buf.capacity() <= kept) || buf.len() > kept {
        return;
    }
    let mut fresh = BytesMut::with_capacity(limits::READ_BUFFER_INITIAL_BYTES.max(buf.len()));
    fresh.extend_from_slice(buf);
    *buf = fresh;
}

/// Write one whole frame and push it out (a TLS stream buffers until flushed).
async fn write_frame<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// A reply and, for a streaming `hello`, what to keep sending.
type Outcome = Option<(Vec<u8>, Option<Exhaust>)>;

/// Handle one message while watching the socket: bytes of later requests are buffered (up to
/// `READ_AHEAD_BYTES_MAX`); end of stream or a reset marks the request's client gone and ends
/// the connection at once. A fire-and-forget request (`moreToCome`) is let finish: nobody waits
/// for its reply, but its client expects it done.
async fn handle_watching<S: AsyncRead + AsyncWrite + Unpin>(
    state: &Arc<ServerState>,
    stream: &mut S,
    buf: &mut BytesMut,
    info: &mut ConnectionInfo,
    message: Message,
) -> Result<Outcome, End> {
    let client = Interrupt::default();
    let fire_and_forget = matches!(&message.body, Body::Msg(m) if m.more_to_come());
    let work = handle(state, info, message, client.clone());
    tokio::pin!(work);
    let mut hung_up = false;
    loop {
        let watching = !hung_up && buf.len() < limits::READ_AHEAD_BYTES_MAX;
        tokio::select! {
            outcome = &mut work => {
                return if hung_up { Err(End::ClientClosed) } else { outcome };
            }
            read = stream.read_buf(buf), if watching => match read {
                Ok(0) | Err(_) => {
                    // The running operation stops at its next yield point (ClientDisconnect).
                    client.interrupt(Reason::ClientDisconnected);
                    if !fire_and_forget {
                        return Err(End::ClientClosed);
                    }
                    hung_up = true;
                }
                Ok(_) => {}
            },
        }
    }
}

/// Streaming monitoring (`hello` with `exhaustAllowed`, `topologyVersion` and `maxAwaitTimeMS`):
/// the server answers with `moreToCome` set and then sends a fresh `hello` reply every
/// `maxAwaitTimeMS` without further requests, until the client closes or sends something.
struct Exhaust {
    request: Arc<Request>,
    interval: Duration,
    last_response_id: i32,
}

/// One whole request frame in, its reply frame out (`None`: no reply is due, or the frame
/// closes the connection): the way a request's bytes travel from the socket's read buffer to the
/// socket's write, without the socket. `benches/copies.rs` measures the copies on this path.
pub async fn answer_frame(
    state: &Arc<ServerState>,
    info: &mut ConnectionInfo,
    frame: BytesMut,
) -> Option<Vec<u8>> {
    let message = wire::decode_shared(frame.freeze()).ok()?;
    match handle(state, info, message, Interrupt::default()).await {
        Ok(Some((bytes, _))) => Some(bytes),
        _ => None,
    }
}

/// Handle one message; `Ok(None)` means no reply is due (moreToCome).
async fn handle(
    state: &Arc<ServerState>,
    info: &mut ConnectionInfo,
    message: Message,
    client: Interrupt,
) -> Result<Outcome, End> {
    let request_id = message.header.request_id;
    let compressor = message.compressor;
    match message.body {
        Body::Msg(msg) => handle_msg(state, info, request_id, compressor, msg, client).await,
        Body::Query(q) => handle_query(state, info, request_id, q)
            .await
            .map(|bytes| Some((bytes, None)))
            .map_err(|e| End::Malformed(e.to_string())),
        Body::Reply(_) => Err(End::Malformed("clients may not send OP_REPLY".into())),
    }
}

async fn handle_msg(
    state: &Arc<ServerState>,
    info: &mut ConnectionInfo,
    request_id: i32,
    compressor: Option<Compressor>,
    msg: OpMsg,
    client: Interrupt,
) -> Result<Outcome, End> {
    let more_to_come = msg.more_to_come();
    let exhaust_allowed = msg.exhaust_allowed();
    let (raw_body, decoded) = decode_body(state, msg.body).await;
    let body = match decoded {
        Ok(Ok(body)) => body,
        Ok(Err(malformed)) => return Err(End::Malformed(malformed)),
        Err(e) => {
            let bytes = encode_reply(Reply::Doc(e.to_reply()), request_id, None, 0)?;
            return Ok((!more_to_come).then_some((bytes, None)));
        }
    };
    let sequences = msg
        .sequences
        .into_iter()
        .map(|s| Sequence {
            identifier: s.identifier,
            documents: s.documents,
        })
        .collect();
    let req = match commands::parse_request(body, sequences, true) {
        Ok(mut req) => {
            // The connection's token (which it interrupts on a hang-up) takes the deadline.
            client.set_deadline(req.op.deadline());
            req.op = client;
            req.raw_body = Some(raw_body);
            Arc::new(req)
        }
        Err(e) => {
            let bytes = encode_reply(Reply::Doc(e.to_reply()), request_id, None, 0)?;
            return Ok((!more_to_come).then_some((bytes, None)));
        }
    };
    let await_ms = awaitable_hello(state, &req);
    if let Some(ms) = await_ms {
        // Nothing changes on a standalone: wait out maxAwaitTimeMS (or until shutdown).
        let mut shutdown = state.shutdown_requested();
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
            // wait_for, not changed: a shutdown requested before this hello arrived counts.
            _ = shutdown.wait_for(|stop| *stop) => {}
        }
    }
    let mut reply = match run_command(state, info, &req).await {
        Ok(Reply::Close) => return Err(End::Shutdown),
        Ok(r) => r,
        Err(e) => Reply::Doc(e.to_reply()),
    };
    if crate::clock::gossips(state) {
        match &mut reply {
            Reply::Doc(d) => crate::clock::decorate_doc(state, d),
            Reply::Raw(r) => crate::clock::decorate_raw(state, r),
            Reply::Cursor(c) => {
                let mut gossip = RawDocumentBuf::new();
                crate::clock::decorate_raw(state, &mut gossip);
                c.trailer = Some(gossip);
            }
            Reply::Close => {}
        }
    }
    if more_to_come {
        return Ok(None);
    }
    let compressor = compressor.filter(|_| !NEVER_COMPRESSED.contains(&req.name.as_str()));
    let streaming = exhaust_allowed && await_ms.is_some();
    let flags = if streaming {
        wire::FLAG_MORE_TO_COME
    } else {
        0
    };
    let response_id = next_response_id();
    let bytes = encode_reply_with_id(reply, response_id, request_id, compressor, flags)?;
    let exhaust = streaming.then(|| Exhaust {
        interval: Duration::from_millis(await_ms.unwrap_or(0)),
        request: req,
        last_response_id: response_id,
    });
    Ok(Some((bytes, exhaust)))
}

/// A body of more than this many bytes is checked and decoded on the blocking pool: a 16 MB
/// command with 100,000s of fields takes long enough to stall the worker's other connections.
const DECODE_INLINE_BYTES_MAX: usize = 64 * 1024;

/// The command body checked for duplicate fields (a command error) and decoded (`Ok(Err)`: not
/// BSON, the connection closes); the raw bytes come back for the handlers that read them.
async fn decode_body(
    state: &Arc<ServerState>,
    raw: RawDocumentBuf,
) -> (
    RawDocumentBuf,
    Result<Result<Document, String>, CommandError>,
) {
    fn decode(raw: &RawDocumentBuf) -> Result<Result<Document, String>, CommandError> {
        commands::args::check_duplicate_fields(raw)?;
        Ok(Document::try_from(raw.as_ref()).map_err(|e| format!("invalid BSON body: {e}")))
    }
    if raw.as_bytes().len() <= DECODE_INLINE_BYTES_MAX {
        let decoded = decode(&raw);
        return (raw, decoded);
    }
    let len = raw.as_bytes().len();
    match crate::offload::run(state, "decode", None, move |_| Ok((decode(&raw), raw))).await {
        Ok((decoded, raw)) => (raw, decoded),
        Err(e) => {
            tracing::error!(bytes = len, error = %e.message, "decoding a command body failed");
            (RawDocumentBuf::new(), Err(e))
        }
    }
}

/// `Some(maxAwaitTimeMS)` for a monitoring `hello` that waits for a topology change.
fn awaitable_hello(state: &ServerState, req: &Request) -> Option<u64> {
    if !matches!(req.name.as_str(), "hello" | "isMaster" | "ismaster") {
        return None;
    }
    let tv = req.body.get_document("topologyVersion").ok()?;
    let ms = req
        .body
        .get("maxAwaitTimeMS")
        .and_then(crate::query::types::as_i64)?;
    // Another process id means the client saw an earlier incarnation: answer at once.
    if tv.get_object_id("processId").ok()? != state.process_id {
        return None;
    }
    Some(ms.clamp(0, 60_000) as u64)
}

/// Keep sending `hello` replies with `moreToCome` until the client closes or sends a request.
/// `None`: go back to normal request handling.
async fn stream_hellos<S: AsyncRead + AsyncWrite + Unpin>(
    state: &Arc<ServerState>,
    stream: &mut S,
    info: &mut ConnectionInfo,
    buf: &mut BytesMut,
    mut ex: Exhaust,
) -> Option<End> {
    let mut shutdown = state.shutdown_requested();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(ex.interval) => {}
            read = stream.read_buf(buf) => return match read {
                Ok(0) => Some(End::ClientClosed),
                Ok(_) => None,
                Err(e) => Some(End::Io(e)),
            },
            _ = shutdown.wait_for(|stop| *stop) => return Some(End::Shutdown),
        }
        let reply = match run_command(state, info, &ex.request).await {
            Ok(r) => r,
            Err(e) => Reply::Doc(e.to_reply()),
        };
        let id = next_response_id();
        let bytes = match encode_reply_with_id(
            reply,
            id,
            ex.last_response_id,
            None,
            wire::FLAG_MORE_TO_COME,
        ) {
            Ok(b) => b,
            Err(end) => return Some(end),
        };
        state
            .network
            .bytes_out
            .fetch_add(bytes.len() as u64, Relaxed);
        if let Err(e) = write_frame(stream, &bytes).await {
            return Some(End::Io(e));
        }
        ex.last_response_id = id;
    }
}

fn encode_reply(
    reply: Reply,
    response_to: i32,
    compressor: Option<Compressor>,
    flags: u32,
) -> Result<Vec<u8>, End> {
    encode_reply_with_id(reply, next_response_id(), response_to, compressor, flags)
}

fn encode_reply_with_id(
    reply: Reply,
    id: i32,
    response_to: i32,
    compressor: Option<Compressor>,
    flags: u32,
) -> Result<Vec<u8>, End> {
    if let Reply::Cursor(batch) = reply {
        // The documents go from the batch straight into a frame sized for the whole reply.
        let mut w = wire::MsgWriter::with_capacity(id, response_to, flags, batch.frame_bytes());
        batch.write_into(w.body());
        return w
            .finish(compressor)
            .map_err(|e| End::Malformed(e.to_string()));
    }
    let body = reply_bytes(reply).map_err(|e| End::Malformed(e.to_string()))?;
    let out = OpMsg {
        flags,
        body,
        sequences: vec![],
    };
    wire::encode_msg(id, response_to, &out, compressor).map_err(|e| End::Malformed(e.to_string()))
}

/// Dispatch with the bookkeeping every command shares: counters and the slow-operation log.
async fn run_command(
    state: &Arc<ServerState>,
    info: &mut ConnectionInfo,
    req: &Arc<Request>,
) -> Result<Reply, CommandError> {
    state.opcounters.command.fetch_add(1, Relaxed);
    let started = Instant::now();
    let registered = state.ops.begin_command(crate::ops::CommandInfo {
        connection_id: info.id,
        client: info.peer.to_string(),
        name: &req.name,
        db: &req.db,
        body: &req.body,
        body_bytes: req.raw_body.as_ref().map_or(0, |b| b.as_bytes().len()),
        raw_body: req.raw_body.as_ref(),
        interrupt: req.op.clone(),
        session: req.lsid.as_ref().and_then(|l| l.as_ref().ok().copied()),
    });
    let result = commands::dispatch(state, info, req).await;
    drop(registered);
    let elapsed = started.elapsed();
    crate::metrics::commands().record_command(
        (!req.command.is_empty()).then_some(req.command),
        elapsed,
        result.is_ok(),
    );
    let elapsed_ms = elapsed.as_millis() as i64;
    commands::profile::record(state, info, req, &result, elapsed_ms).await;
    if elapsed_ms > state.slowms.load(Relaxed) {
        log_slow(info, req, &result, elapsed_ms);
    }
    result
}

/// mongod's "Slow query" line (id 51803): `attr` carries the command as relaxed Extended JSON
/// (secrets withheld and long bodies cut as `currentOp` does), the plan and work figures when the
/// handler reported them, and `durationMillis`. The flat fields repeat the essentials for the
/// text and JSON formats.
fn log_slow(
    info: &ConnectionInfo,
    req: &Request,
    result: &Result<Reply, CommandError>,
    elapsed_ms: i64,
) {
    let ns = format!(
        "{}.{}",
        req.db,
        req.body
            .get(&req.name)
            .and_then(|v| v.as_str())
            .unwrap_or("$cmd")
    );
    let body_bytes = req.raw_body.as_ref().map_or(0, |b| b.as_bytes().len());
    let mut shown = crate::ops::shown_command(&req.name, &req.body, body_bytes);
    if !shown.contains_key("$db") {
        shown.insert("$db", req.db.clone());
    }
    let mut attr = bson::doc! { "type": "command", "ns": &ns };
    if let Some(app) = info
        .client_metadata
        .as_ref()
        .and_then(|m| m.get_document("application").ok())
        .and_then(|a| a.get_str("name").ok())
    {
        attr.insert("appName", app);
    }
    attr.insert("command", shown);
    // The work figures every operation counts on its interrupt token (the profiler reads the
    // same ones), and the reply's counters (nreturned, ninserted, nMatched, ...).
    if let Some(plan) = req.op.plan_summary() {
        attr.insert("planSummary", plan);
    }
    let (keys, docs) = req.op.examined();
    attr.insert("keysExamined", keys as i64);
    attr.insert("docsExamined", docs as i64);
    if let Ok(Reply::Cursor(batch)) = result {
        // Counted from the batch: a slow find or getMore does not decode its whole reply.
        let counts = batch.counts();
        attr.insert("cursorExhausted", !counts.contains_key("cursorid"));
        attr.extend(counts);
    } else if let Some(reply) = commands::profile::reply_document(result) {
        let mut counts = bson::Document::new();
        commands::profile::reply_counts(req.command, &reply, &mut counts);
        if reply.contains_key("cursor") {
            attr.insert("cursorExhausted", !counts.contains_key("cursorid"));
        }
        attr.extend(counts);
    }
    if let Err(e) = result {
        attr.insert("ok", 0);
        attr.insert("errMsg", e.message.clone());
        attr.insert("errName", e.code.name());
        attr.insert("errCode", e.code.code());
    }
    attr.insert("remote", info.peer.to_string());
    attr.insert("protocol", "op_msg");
    attr.insert("durationMillis", elapsed_ms);
    // 8.0: queueing excluded (cairn does not queue operations, so the same figure).
    attr.insert("workingMillis", elapsed_ms);
    if let Some(hash) = commands::profile::query_shape_hash(req) {
        attr.insert("queryShapeHash", hash);
    }
    let attr_json = bson::Bson::Document(attr)
        .into_relaxed_extjson()
        .to_string();
    tracing::info!(
        component = "COMMAND",
        id = 51803i64,
        ctx = %format!("conn{}", info.id),
        connection_id = info.id,
        command = %req.name,
        ns = %ns,
        duration_ms = elapsed_ms,
        ok = result.is_ok(),
        attr = %attr_json,
        "Slow query"
    );
}

/// The legacy handshake: OP_QUERY on `<db>.$cmd` carrying `hello`/`isMaster`. Anything else over
/// OP_QUERY gets mongod's "unsupported OP_QUERY command" failure reply.
async fn handle_query(
    state: &Arc<ServerState>,
    info: &mut ConnectionInfo,
    request_id: i32,
    q: OpQuery,
) -> Result<Vec<u8>, wire::WireError> {
    let outcome = match legacy_command(q) {
        Ok(body) => match commands::parse_request(body, vec![], false) {
            Ok(req) if matches!(req.name.as_str(), "hello" | "isMaster" | "ismaster") => {
                run_command(state, info, &Arc::new(req))
                    .await
                    .and_then(|r| {
                        reply_bytes(r).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
                    })
            }
            Ok(req) => Err(unsupported_query(&req.name)),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    let (flags, doc) = match outcome {
        Ok(doc) => (0, doc),
        Err(e) => (wire::REPLY_FLAG_QUERY_FAILURE, error_doc(&e)),
    };
    let reply = OpReply {
        response_flags: flags,
        cursor_id: 0,
        starting_from: 0,
        documents: vec![doc],
    };
    wire::encode_reply(next_response_id(), request_id, &reply, None)
}

fn legacy_command(q: OpQuery) -> Result<Document, CommandError> {
    let Some(db) = q.full_collection_name.strip_suffix(".$cmd") else {
        return Err(unsupported_query("find"));
    };
    let mut body = Document::try_from(q.query.as_ref())
        .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
    // Old drivers wrap the command as {$query: {...}, $readPreference: ...}.
    if let Ok(inner) = body.get_document("$query") {
        body = inner.clone();
    }
    body.insert("$db", db);
    Ok(body)
}

fn unsupported_query(name: &str) -> CommandError {
    err(
        ErrorCode::UnsupportedOpQueryCommand,
        format!("Unsupported OP_QUERY command: {name}. The client driver may require an upgrade."),
    )
}

/// The OP_REPLY failure document: `$err` and `code` as legacy clients read them, plus the
/// modern error fields.
fn error_doc(e: &CommandError) -> RawDocumentBuf {
    let mut d = bson::doc! { "$err": e.message.clone() };
    d.extend(e.to_reply());
    RawDocumentBuf::try_from(&d).unwrap_or_default()
}

fn reply_bytes(reply: Reply) -> Result<RawDocumentBuf, bson::error::Error> {
    match reply {
        Reply::Doc(d) => RawDocumentBuf::try_from(&d),
        Reply::Raw(r) => Ok(r),
        Reply::Cursor(c) => Ok(c.to_raw()),
        Reply::Close => Ok(RawDocumentBuf::new()),
    }
}

/// The error reply to a frame that decoded badly but leaves the connection usable.
fn decode_error_reply(frame: &[u8], e: &wire::WireError) -> Option<Vec<u8>> {
    let header = wire::Header::parse(frame)?;
    let (code, name) = e.mongod_code();
    let body = bson::doc! { "ok": 0.0, "errmsg": e.to_string(), "code": code, "codeName": name };
    let body = RawDocumentBuf::try_from(&body).ok()?;
    let msg = OpMsg {
        flags: 0,
        body,
        sequences: vec![],
    };
    wire::encode_msg(next_response_id(), header.request_id, &msg, None).ok()
}

fn next_response_id() -> i32 {
    use std::sync::atomic::AtomicI32;
    static NEXT: AtomicI32 = AtomicI32::new(1);
    NEXT.fetch_add(1, Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer as the read loop leaves it: `frame_len` bytes of one frame then `rest` bytes of
    /// the next, the frame split off.
    fn after_split(frame_len: usize, rest: &[u8]) -> (BytesMut, bytes::Bytes) {
        let mut buf = BytesMut::with_capacity(limits::READ_BUFFER_INITIAL_BYTES);
        buf.extend_from_slice(&vec![7u8; frame_len]);
        buf.extend_from_slice(rest);
        let frame = buf.split_to(frame_len).freeze();
        shrink_read_buffer(&mut buf, frame_len);
        (buf, frame)
    }

    #[test]
    fn a_large_frame_leaves_a_small_buffer_with_the_next_requests_bytes() {
        let (buf, frame) = after_split(16 << 20, b"next request");
        assert_eq!(frame.len(), 16 << 20);
        assert_eq!(&buf[..], b"next request");
        assert!(buf.capacity() <= limits::READ_BUFFER_KEPT_BYTES_MAX);
        // The connection no longer shares the frame's allocation: it goes with the request.
        assert!(frame.is_unique());
    }

    #[test]
    fn small_frames_keep_their_buffer() {
        let (buf, frame) = after_split(300, b"abc");
        assert_eq!(&buf[..], b"abc");
        assert!(buf.capacity() < limits::READ_BUFFER_INITIAL_BYTES);
        assert!(
            !frame.is_unique(),
            "a small frame's buffer is reused, not reallocated"
        );
    }

    #[test]
    fn a_long_read_ahead_is_not_copied_until_little_is_left() {
        let rest = vec![1u8; 2 * limits::READ_BUFFER_KEPT_BYTES_MAX];
        let (buf, _) = after_split(1 << 20, &rest);
        // Still the big buffer's tail: copying it now would repeat for every request in it.
        assert!(buf.capacity() > limits::READ_BUFFER_KEPT_BYTES_MAX);
        assert_eq!(buf.len(), rest.len());
    }
}
