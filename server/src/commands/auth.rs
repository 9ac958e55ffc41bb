//! Authentication commands: `saslStart` and `saslContinue` (SCRAM-SHA-1 and SCRAM-SHA-256),
//! the two things `hello` does for drivers before they log in (`saslSupportedMechs`: which
//! mechanisms a user has; `speculativeAuthenticate`: the first SASL step carried in the
//! handshake, saving a round trip), `logout`, `connectionStatus`, and `authenticate` (mongod's
//! x.509 path, refused). The protocol lives in `crate::auth::sasl`; this file parses and replies.

use super::{ConnectionInfo, Reply, Request, argspec, truthy};
use crate::auth::blocking;
use crate::auth::sasl::{self, CONVERSATION_ID, Step};
use crate::auth::store::{self, Name};
use crate::error::{CommandResult, ErrorCode, err};
use crate::state::ServerState;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bson::{Bson, Document, doc, spec::BinarySubtype};
use std::sync::Arc;

/// A SASL payload as it came: binary, or a base64 string (answered in the same form).
struct Payload {
    bytes: Vec<u8>,
    as_string: bool,
}

fn payload(body: &Document, command: &str) -> CommandResult<Payload> {
    match body.get("payload") {
        Some(Bson::Binary(b)) if b.subtype != BinarySubtype::Generic => Err(err(
            ErrorCode::BadValue,
            "Invalid SASLPayload subtype. Expected BinDataGeneral",
        )),
        Some(Bson::Binary(b)) => Ok(Payload {
            bytes: b.bytes.clone(),
            as_string: false,
        }),
        Some(Bson::String(s)) => Ok(Payload {
            bytes: B64
                .decode(s)
                .map_err(|_| err(ErrorCode::BadValue, "payload is not valid base64"))?,
            as_string: true,
        }),
        Some(v) => Err(err(
            ErrorCode::BadValue,
            format!(
                "Invalid SASLPayload type. Expected Base64 or BinData, got: {}",
                super::args::type_name(v)
            ),
        )),
        None => Err(err(
            ErrorCode::Location40414,
            format!("BSON field '{command}.payload' is missing but a required field"),
        )),
    }
}

fn step_reply(step: Step, as_string: bool) -> Document {
    let payload = if as_string {
        Bson::String(B64.encode(&step.payload))
    } else {
        Bson::Binary(bson::Binary {
            subtype: BinarySubtype::Generic,
            bytes: step.payload,
        })
    };
    doc! { "conversationId": CONVERSATION_ID, "done": step.done, "payload": payload }
}

/// The first SASL step on `db`, shared by `saslStart` and `speculativeAuthenticate`.
async fn start(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    db: &str,
    body: &Document,
    command: &str,
) -> CommandResult<Document> {
    let mechanism = match body.get("mechanism") {
        Some(Bson::String(m)) => sasl::enabled_mechanism(state, m).map_err(|_| {
            err(
                ErrorCode::MechanismUnavailable,
                format!("Unsupported mechanism '{m}' on authentication database '{db}'"),
            )
        })?,
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '{command}.mechanism' is the wrong type, expected type 'string'"
                ),
            ));
        }
        None => {
            return Err(err(
                ErrorCode::Location40414,
                format!("BSON field '{command}.mechanism' is missing but a required field"),
            ));
        }
    };
    let p = payload(body, command)?;
    let skip_empty = body
        .get_document("options")
        .ok()
        .and_then(|o| o.get("skipEmptyExchange"))
        .is_some_and(truthy);
    let speculative = command == "speculativeAuthenticate";
    let step = sasl::start(
        state,
        &mut conn.auth,
        db,
        mechanism,
        &p.bytes,
        skip_empty,
        speculative,
    )
    .await?;
    Ok(step_reply(step, p.as_string))
}

pub async fn sasl_start(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    req: &Request,
) -> CommandResult<Reply> {
    argspec::check(&argspec::server::SASL_START, &req.body)?;
    let mut reply = start(state, conn, &req.db, &req.body, "saslStart").await?;
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

pub async fn sasl_continue(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    req: &Request,
) -> CommandResult<Reply> {
    argspec::check(&argspec::server::SASL_CONTINUE, &req.body)?;
    let id = req
        .body
        .get("conversationId")
        .and_then(super::as_i64)
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| {
            err(
                ErrorCode::BadValue,
                "saslContinue needs a numeric conversationId",
            )
        })?;
    let p = payload(&req.body, "saslContinue")?;
    let step = sasl::next(state, &mut conn.auth, id, &p.bytes).await?;
    let mut reply = step_reply(step, p.as_string);
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// mongod's `authenticate` serves x.509 (and the long-gone MONGODB-CR); cairn has neither.
pub fn authenticate(req: &Request) -> CommandResult<Reply> {
    let mechanism = req.body.get_str("mechanism").unwrap_or("MONGODB-CR");
    Err(err(
        ErrorCode::MechanismUnavailable,
        format!(
            "Auth mechanism {mechanism} is not available on the authenticate command; \
             use saslStart with SCRAM-SHA-256 or SCRAM-SHA-1"
        ),
    ))
}

/// `logout`: forget the user if they authenticated on this database.
pub fn logout(conn: &mut ConnectionInfo, req: &Request) -> CommandResult<Reply> {
    if conn.auth.user().is_some_and(|u| u.db == req.db) {
        conn.auth.logout();
    }
    Ok(Reply::ok())
}

pub fn connection_status(conn: &ConnectionInfo, req: &Request) -> Reply {
    let users: Vec<Bson> = conn
        .auth
        .user()
        .map(|u| Bson::Document(u.user_document()))
        .into_iter()
        .collect();
    let roles: Vec<Bson> = conn
        .auth
        .roles()
        .map(|r| Bson::Document(r.role_document()))
        .collect();
    let mut auth_info = doc! { "authenticatedUsers": users, "authenticatedUserRoles": roles };
    if req.body.get("showPrivileges").is_some_and(truthy) {
        auth_info.insert(
            "authenticatedUserPrivileges",
            conn.auth.privileges().to_bson(),
        );
    }
    Reply::Doc(doc! { "authInfo": auth_info, "ok": 1.0 })
}

/// `hello`'s authentication fields: the mechanisms of `saslSupportedMechs: "<db>.<user>"`
/// (omitted when there is no such user) and the reply to `speculativeAuthenticate` (omitted
/// when it fails: the driver then authenticates the long way and gets the real error).
pub async fn hello_extras(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    req: &Request,
    reply: &mut Document,
) -> CommandResult<()> {
    if let Some(Bson::String(qualified)) = req.body.get("saslSupportedMechs")
        && let Some((db, user)) = qualified.split_once('.')
    {
        let name = Name::new(user, db);
        let doc = blocking(state, move |s| store::get_user(s, &name)).await?;
        if let Some(doc) = doc {
            let mechs: Vec<Bson> = store::mechanisms_of(&doc)
                .into_iter()
                .map(|m| Bson::from(m.name()))
                .collect();
            insert_before_ok(reply, "saslSupportedMechs", Bson::Array(mechs));
        }
    }
    if let Ok(spec) = req.body.get_document("speculativeAuthenticate")
        && !conn.auth.is_authenticated()
        && spec.contains_key("saslStart")
    {
        let db = spec.get_str("db").unwrap_or(&req.db).to_string();
        if let Ok(answer) = start(state, conn, &db, spec, "speculativeAuthenticate").await {
            insert_before_ok(reply, "speculativeAuthenticate", Bson::Document(answer));
        }
    }
    Ok(())
}

fn insert_before_ok(reply: &mut Document, key: &str, value: Bson) {
    let ok = reply.remove("ok");
    reply.insert(key, value);
    if let Some(ok) = ok {
        reply.insert("ok", ok);
    }
}
