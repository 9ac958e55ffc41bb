//! An in-process server for the per-request benches (`copies`, `perop`): a fresh data
//! directory, a runtime with one worker and one connection's info, so a bench feeds request
//! frames to `connection::answer_frame` as a socket's bytes would go, without the socket.

use bson::RawDocumentBuf;
use bytes::BytesMut;
use cairn_server::commands::ConnectionInfo;
use cairn_server::state::ServerState;
use clap::Parser;
use std::sync::Arc;

pub struct InProcess {
    /// Kept so the data directory lives as long as the server.
    pub _dir: tempfile::TempDir,
    pub state: Arc<ServerState>,
    pub runtime: tokio::runtime::Runtime,
    pub info: ConnectionInfo,
}

pub fn start() -> InProcess {
    let dir = tempfile::tempdir().expect("tempdir");
    let dbpath = dir.path().to_str().expect("utf-8 path");
    let config = cairn_server::config::Config::parse_from([
        "cairn",
        "--dbpath",
        dbpath,
        "--slowms",
        "100000000",
    ]);
    let ring = Arc::new(cairn_server::logging::LogRing::default());
    let state = Arc::new(ServerState::new(config, vec![], ring).expect("state"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let addr = "127.0.0.1:1".parse().expect("address");
    let info = ConnectionInfo {
        id: 1,
        peer: addr,
        local: addr,
        client_metadata: None,
        query_stats_client: None,
        compressors: vec![],
        hello_seen: false,
        auth: state.auth.admit(usize::MAX).expect("admitted"),
    };
    InProcess {
        _dir: dir,
        state,
        runtime,
        info,
    }
}

/// A request frame as a driver sends it: `body`, and `docs` as its `documents` sequence.
pub fn frame(body: bson::Document, docs: Vec<RawDocumentBuf>) -> BytesMut {
    let mut msg = wire::OpMsg::new(RawDocumentBuf::try_from(&body).expect("encodes"));
    if !docs.is_empty() {
        msg.sequences.push(wire::DocumentSequence {
            identifier: "documents".into(),
            documents: docs.into_iter().map(Into::into).collect(),
        });
    }
    BytesMut::from(&wire::encode_msg(1, 0, &msg, None).expect("frame")[..])
}
