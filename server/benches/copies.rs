//! Copies per document on the two hot paths, measured rather than claimed: an insert of one
//! document (OP_MSG `documents` sequence, as drivers send it) and finds returning documents,
//! each run from the request frame (the socket's read buffer) to the reply frame (what is
//! written to the socket) through `connection::answer_frame`, the path a socket's bytes take.
//!
//! How: a counting global allocator (`cap`) sums the bytes allocated while one request runs;
//! the documents are large (1 MiB) so that everything else a request allocates is noise, and
//! bytes allocated / document bytes is the number of document-sized buffers filled: each copy
//! into a new buffer, each decode into a `bson::Document` (its big string) and each re-encode
//! count one. The storage read's own buffer (the pread target) counts one on the find path,
//! the reply frame one. Run: `cargo bench -p cairn --bench copies`.

mod in_process;

use in_process::frame;

use bson::{RawDocumentBuf, doc};
use bytes::BytesMut;
use cairn_server::commands::ConnectionInfo;
use cairn_server::state::ServerState;
use cap::Cap;
use std::alloc::System;
use std::sync::Arc;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// The payload of each test document: large against a request's fixed allocations.
const PAD_BYTES: usize = 1 << 20;
/// Documents in the multi-document find.
const FIND_MANY_COUNT: i64 = 8;

fn padded(id: Option<i64>) -> RawDocumentBuf {
    let pad = "x".repeat(PAD_BYTES);
    let d = match id {
        Some(id) => doc! { "_id": id, "pad": pad },
        None => doc! { "pad": pad },
    };
    RawDocumentBuf::try_from(&d).expect("encodes")
}

/// Bytes allocated while `frame` is answered, divided by `doc_bytes`.
async fn copies(
    state: &Arc<ServerState>,
    info: &mut ConnectionInfo,
    frame: BytesMut,
    doc_bytes: usize,
) -> f64 {
    let before = ALLOCATOR.total_allocated();
    let reply = cairn_server::connection::answer_frame(state, info, frame).await;
    let allocated = ALLOCATOR.total_allocated() - before;
    let reply = reply.expect("a reply");
    assert!(
        !String::from_utf8_lossy(&reply).contains("errmsg"),
        "the command failed"
    );
    drop(reply);
    allocated as f64 / doc_bytes as f64
}

fn main() {
    let in_process::InProcess {
        _dir,
        state,
        runtime,
        mut info,
    } = in_process::start();
    let doc_bytes = padded(Some(0)).as_bytes().len();
    runtime.block_on(async {
        let insert = |docs| frame(doc! { "insert": "c", "$db": "b" }, docs);
        // Warm up: create the collection, so the measured inserts only insert.
        copies(&state, &mut info, insert(vec![padded(Some(-1))]), doc_bytes).await;
        for i in 1..FIND_MANY_COUNT {
            copies(&state, &mut info, insert(vec![padded(Some(i))]), doc_bytes).await;
        }
        let with_id = copies(&state, &mut info, insert(vec![padded(Some(0))]), doc_bytes).await;
        let no_id = copies(&state, &mut info, insert(vec![padded(None)]), doc_bytes).await;
        let find = |filter| frame(doc! { "find": "c", "filter": filter, "$db": "b" }, vec![]);
        let one = copies(&state, &mut info, find(doc! { "_id": 0 }), doc_bytes).await;
        let many_filter = doc! { "_id": { "$gte": 0, "$lt": FIND_MANY_COUNT } };
        let many_bytes = doc_bytes * FIND_MANY_COUNT as usize;
        let many = copies(&state, &mut info, find(many_filter), many_bytes).await;
        let scan = copies(&state, &mut info, find(doc! {}), many_bytes + 2 * doc_bytes).await;
        println!("document-sized buffers filled per document (document: {doc_bytes} bytes)");
        println!("insert, _id given first      {with_id:.2}");
        println!("insert, _id generated        {no_id:.2}");
        println!("find by _id, 1 document      {one:.2}");
        println!("find by _id range, {FIND_MANY_COUNT} docs   {many:.2}");
        println!("find, collection scan        {scan:.2}");
    });
}
