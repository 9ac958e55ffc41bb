//! `hello` / `isMaster`: the handshake every driver sends first and then keeps sending to
//! monitor the server. The first one on a connection may carry client metadata and the list of
//! compressors the client speaks; later ones must not change the metadata.

use super::{ConnectionInfo, Reply, Request, argspec, truthy};
use crate::error::{CommandResult, ErrorCode, err};
use crate::limits;
use crate::state::ServerState;
use bson::{Bson, doc};
use std::sync::Arc;

/// Compressors this server speaks, by their handshake names.
pub const COMPRESSORS: &[&str] = &["snappy", "zlib", "zstd", "noop"];

pub fn hello(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    req: &Request,
    legacy: bool,
) -> CommandResult<Reply> {
    argspec::check(&argspec::server::HELLO, &req.body)?;
    if let Some(client) = req.body.get("client") {
        if conn.hello_seen && conn.client_metadata.is_some() {
            return Err(err(
                ErrorCode::ClientMetadataCannotBeMutated,
                "The client metadata document may only be sent in the first hello",
            ));
        }
        let Bson::Document(client) = client else {
            return Err(err(
                ErrorCode::TypeMismatch,
                "'client' field must be an object",
            ));
        };
        log_client_metadata(conn, client);
        conn.client_metadata = Some(client.clone());
        conn.query_stats_client = Some(Arc::new(crate::query_stats::ClientMeta::new(
            client.clone(),
        )));
    }
    let mut reply = doc! {};
    if truthy(req.body.get("helloOk").unwrap_or(&Bson::Boolean(false))) {
        reply.insert("helloOk", true);
    }
    reply.insert(
        if legacy {
            "ismaster"
        } else {
            "isWritablePrimary"
        },
        true,
    );
    reply.insert(
        "topologyVersion",
        doc! { "processId": state.process_id, "counter": 0_i64 },
    );
    super::replset::hello_fields(
        state,
        &mut reply,
        if legacy {
            "ismaster"
        } else {
            "isWritablePrimary"
        },
    );
    reply.insert("maxBsonObjectSize", limits::BSON_OBJECT_SIZE_MAX as i32);
    reply.insert("maxMessageSizeBytes", limits::MESSAGE_SIZE_MAX as i32);
    reply.insert("maxWriteBatchSize", limits::WRITE_BATCH_COUNT_MAX as i32);
    reply.insert("localTime", bson::DateTime::now());
    reply.insert(
        "logicalSessionTimeoutMinutes",
        limits::SESSION_TIMEOUT_MINUTES,
    );
    reply.insert("connectionId", conn.id as i32);
    reply.insert("minWireVersion", limits::WIRE_VERSION_MIN);
    reply.insert("maxWireVersion", limits::WIRE_VERSION_MAX);
    reply.insert("readOnly", false);
    if let Some(offered) = req.body.get("compression") {
        let Bson::Array(offered) = offered else {
            return Err(err(
                ErrorCode::TypeMismatch,
                "'compression' field must be an array of strings",
            ));
        };
        // The first hello decides; later ones (monitoring) keep what was agreed.
        if !conn.hello_seen {
            conn.compressors = offered
                .iter()
                .filter_map(|c| c.as_str())
                .filter(|c| COMPRESSORS.contains(c))
                .map(str::to_string)
                .collect();
        }
        let agreed: Vec<Bson> = conn
            .compressors
            .iter()
            .map(|c| Bson::String(c.clone()))
            .collect();
        reply.insert("compression", agreed);
    }
    // The mechanisms themselves are added by `auth::hello_extras` (a storage look-up).
    if let Some(user) = req.body.get("saslSupportedMechs")
        && !matches!(user, Bson::String(_))
    {
        return Err(err(
            ErrorCode::TypeMismatch,
            "'saslSupportedMechs' field must be a string",
        ));
    }
    conn.hello_seen = true;
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

fn log_client_metadata(conn: &ConnectionInfo, client: &bson::Document) {
    let driver = client.get_document("driver").ok();
    let name = driver
        .and_then(|d| d.get_str("name").ok())
        .unwrap_or("unknown");
    let version = driver
        .and_then(|d| d.get_str("version").ok())
        .unwrap_or("unknown");
    let app = client
        .get_document("application")
        .ok()
        .and_then(|a| a.get_str("name").ok())
        .unwrap_or("");
    tracing::info!(
        remote = %conn.peer,
        connection_id = conn.id,
        driver = name,
        driver_version = version,
        app_name = app,
        "client metadata"
    );
}
