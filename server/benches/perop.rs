//! Instructions per insertOne and per findOne by `_id`, whole request path in-process: the
//! request frame (as the Rust driver sends it: an `lsid`, `$db`, the document in a sequence)
//! through `connection::answer_frame` to the reply frame, storage write and log sync included,
//! the socket excluded. It gives the denominator for the argument checks' cost
//! (`benches/argspec.rs`): what share of a whole operation the checks are.
//!
//! How: `PEROP_RUN=<insert|find|agg>:<n>` answers n requests of that kind (a find or agg run
//! first inserts the same 1,000 documents; `agg` is a one-stage aggregate, `[{$match: {_id}}]`,
//! answered in its first batch); run it under `valgrind --tool=callgrind`
//! at two n and divide the difference of the counts by the difference of the n.
//! `PEROP_QUERY_STATS=off` runs with `internalQueryStatsRateLimit` 0 (no `$queryStats`
//! recording), for the recording's cost side by side in one binary. `PEROP_READS_ON_WORKER=off`
//! sends every read to the storage pool (`cairnReadsOnWorker` false): under callgrind a read
//! tried on the worker often overruns its time there and is run again on the pool, a
//! timing-dependent double count that makes series differ by several percent.

mod in_process;

use in_process::frame;

use bson::{RawDocumentBuf, doc, spec::BinarySubtype};
use bytes::BytesMut;
use cairn_server::commands::ConnectionInfo;
use cairn_server::state::ServerState;
use std::sync::Arc;

/// Documents a find run inserts before its finds.
const FIND_SEED_COUNT: i32 = 1000;

async fn answer(state: &Arc<ServerState>, info: &mut ConnectionInfo, f: BytesMut) {
    let reply = cairn_server::connection::answer_frame(state, info, f)
        .await
        .expect("a reply");
    assert!(!String::from_utf8_lossy(&reply).contains("errmsg"));
}

fn main() {
    let run = std::env::var("PEROP_RUN").expect("PEROP_RUN=<insert|find|agg>:<n>");
    let (kind, n) = run
        .split_once(':')
        .expect("PEROP_RUN=<insert|find|agg>:<n>");
    let n: i32 = n.parse().expect("a count");
    let in_process::InProcess {
        _dir,
        state,
        runtime,
        mut info,
    } = in_process::start();
    if std::env::var("PEROP_QUERY_STATS").is_ok_and(|v| v == "off") {
        state
            .params
            .set("internalQueryStatsRateLimit", &bson::Bson::Int32(0))
            .expect("a parameter");
    }
    if std::env::var("PEROP_READS_ON_WORKER").is_ok_and(|v| v == "off") {
        state
            .params
            .set("cairnReadsOnWorker", &bson::Bson::Boolean(false))
            .expect("a parameter");
    }
    let lsid = doc! { "id": bson::Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] } };
    runtime.block_on(async {
        // A find run reads from a fixed collection, so that two runs differ in finds only.
        let inserts = if kind == "insert" { n } else { FIND_SEED_COUNT };
        for i in 0..inserts {
            let d = doc! { "_id": i, "name": format!("user{i}"), "n": i };
            let body = doc! { "insert": "c", "ordered": true, "$db": "b", "lsid": lsid.clone() };
            answer(&state, &mut info, frame(body, vec![RawDocumentBuf::try_from(&d).expect("doc")])).await;
        }
        if kind == "find" {
            for i in 0..n {
                let body = doc! {
                    "find": "c", "filter": { "_id": i % FIND_SEED_COUNT }, "limit": 1, "singleBatch": true,
                    "$db": "b", "lsid": lsid.clone(),
                };
                answer(&state, &mut info, frame(body, vec![])).await;
            }
        }
        if kind == "agg" {
            for i in 0..n {
                let body = doc! {
                    "aggregate": "c", "pipeline": [{ "$match": { "_id": i % FIND_SEED_COUNT } }],
                    "cursor": {}, "$db": "b", "lsid": lsid.clone(),
                };
                answer(&state, &mut info, frame(body, vec![])).await;
            }
        }
    });
}
