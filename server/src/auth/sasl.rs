//! The SASL conversation of one connection (`saslStart`, `saslContinue`, and the same first
//! step carried by `hello`'s `speculativeAuthenticate`): parse, look up the user's credential,
//! run SCRAM, and on success make the session that user. Bounded: one conversation at a time,
//! payloads of at most `SASL_PAYLOAD_BYTES_MAX`, at most `SASL_STEPS_MAX` messages, finished
//! within `SASL_CONVERSATION_MS_MAX`. Every failure is `AuthenticationFailed` with mongod's
//! message, answered only after `authFailedDelayMs`, and logged with its real reason (never a
//! payload, which carries proofs).

use super::scram::{self, Conversation, Mechanism, ScramError};
use super::store::{self, Name};
use super::{Session, blocking};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::limits;
use crate::state::ServerState;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The conversation id cairn hands out (one conversation per connection at a time).
pub const CONVERSATION_ID: i32 = 1;

/// A conversation in flight.
#[derive(Debug, Clone)]
pub struct Sasl {
    conversation: Conversation,
    db: String,
    steps: usize,
    started: Instant,
    skip_empty_exchange: bool,
    /// Started by `hello`'s `speculativeAuthenticate`.
    speculative: bool,
    /// The proof checked out; waiting for the client's empty last message.
    proven: bool,
}

/// What a SASL step answers: `done` and the payload to send.
pub struct Step {
    pub done: bool,
    pub payload: Vec<u8>,
}

/// mongod's answer to every failed authentication.
fn auth_failed() -> CommandError {
    err(ErrorCode::AuthenticationFailed, "Authentication failed.")
}

/// Log the reason, wait the constant delay, return the error.
async fn fail(
    state: &ServerState,
    user: Option<&Name>,
    mechanism: &str,
    why: &str,
) -> CommandError {
    tracing::info!(
        user = user.map(|u| u.name.as_str()).unwrap_or(""),
        db = user.map(|u| u.db.as_str()).unwrap_or(""),
        mechanism = mechanism,
        reason = why,
        "Authentication failed"
    );
    let delay_ms = state.params.get_i64("authFailedDelayMs").clamp(0, 5000) as u64;
    if delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    auth_failed()
}

/// The mechanism, if cairn speaks it and `authenticationMechanisms` enables it.
pub fn enabled_mechanism(state: &ServerState, name: &str) -> CommandResult<Mechanism> {
    let enabled = state
        .params
        .get("authenticationMechanisms")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    match Mechanism::parse(name) {
        Some(m) if enabled.split(',').any(|e| e.trim() == name) => Ok(m),
        _ => Err(err(
            ErrorCode::MechanismUnavailable,
            format!("Received authentication for mechanism {name} which is not enabled"),
        )),
    }
}

/// The first step: `client-first-message` in, `server-first-message` out.
pub async fn start(
    state: &Arc<ServerState>,
    session: &mut Session,
    db: &str,
    mechanism: Mechanism,
    payload: &[u8],
    skip_empty_exchange: bool,
    speculative: bool,
) -> CommandResult<Step> {
    session.sasl = None;
    let mech = mechanism.name();
    if payload.len() > limits::SASL_PAYLOAD_BYTES_MAX {
        return Err(fail(state, None, mech, "payload too large").await);
    }
    let first = match scram::parse_client_first(payload) {
        Ok(f) => f,
        Err(ScramError::Malformed(why)) => return Err(fail(state, None, mech, why).await),
        Err(ScramError::WrongProof) => return Err(fail(state, None, mech, "bad message").await),
    };
    let user = Name::new(&first.user, db);
    if let Some(current) = session.user()
        && current != &user
    {
        return Err(err(
            ErrorCode::IllegalOperation,
            format!(
                "Each connection may only authenticate as one user; this one is {}",
                current.display()
            ),
        ));
    }
    let lookup = user.clone();
    let doc = blocking(state, move |s| store::get_user(s, &lookup)).await?;
    let Some(credential) = doc
        .as_ref()
        .and_then(|d| store::credential_of(d, mechanism))
    else {
        let why = if doc.is_some() {
            "the user has no credential for this mechanism"
        } else {
            "UserNotFound"
        };
        return Err(fail(state, Some(&user), mech, why).await);
    };
    let (conversation, server_first) =
        Conversation::start(mechanism, first, credential, &scram::new_server_nonce());
    session.sasl = Some(Sasl {
        conversation,
        db: db.to_string(),
        steps: 1,
        started: Instant::now(),
        skip_empty_exchange,
        speculative,
        proven: false,
    });
    Ok(Step {
        done: false,
        payload: server_first.into_bytes(),
    })
}

/// A later step: the proof (answered with the server's signature), or the empty last message.
pub async fn next(
    state: &Arc<ServerState>,
    session: &mut Session,
    conversation_id: i32,
    payload: &[u8],
) -> CommandResult<Step> {
    let Some(mut sasl) = session
        .sasl
        .take()
        .filter(|_| conversation_id == CONVERSATION_ID)
    else {
        return Err(err(ErrorCode::ProtocolError, "No SASL session state found"));
    };
    let user = Name::new(&sasl.conversation.user, &sasl.db);
    let mech = sasl.conversation.mechanism.name();
    sasl.steps += 1;
    if sasl.steps > limits::SASL_STEPS_MAX {
        return Err(fail(state, Some(&user), mech, "too many conversation steps").await);
    }
    if sasl.started.elapsed() > Duration::from_millis(limits::SASL_CONVERSATION_MS_MAX) {
        return Err(fail(state, Some(&user), mech, "conversation took too long").await);
    }
    if payload.len() > limits::SASL_PAYLOAD_BYTES_MAX {
        return Err(fail(state, Some(&user), mech, "payload too large").await);
    }
    if sasl.proven {
        if !payload.is_empty() {
            return Err(fail(state, Some(&user), mech, "unexpected last message").await);
        }
        finish(state, session, user, &sasl).await?;
        return Ok(Step {
            done: true,
            payload: Vec::new(),
        });
    }
    let server_final = match sasl.conversation.finish(payload) {
        Ok(v) => v,
        Err(ScramError::WrongProof) => {
            return Err(fail(state, Some(&user), mech, "wrong proof (password)").await);
        }
        Err(ScramError::Malformed(why)) => return Err(fail(state, Some(&user), mech, why).await),
    };
    if sasl.skip_empty_exchange {
        finish(state, session, user, &sasl).await?;
        return Ok(Step {
            done: true,
            payload: server_final.into_bytes(),
        });
    }
    sasl.proven = true;
    session.sasl = Some(sasl);
    Ok(Step {
        done: false,
        payload: server_final.into_bytes(),
    })
}

/// The proof checked out: resolve the user's privileges and make the session that user.
async fn finish(
    state: &Arc<ServerState>,
    session: &mut Session,
    user: Name,
    sasl: &Sasl,
) -> CommandResult<()> {
    let mechanism = sasl.conversation.mechanism;
    let generation = state.auth.generation();
    let lookup = user.clone();
    let resolved = blocking(state, move |s| {
        let Some(doc) = store::get_user(s, &lookup)? else {
            return Ok(None);
        };
        store::resolve(s, &store::roles_of(&doc)).map(Some)
    })
    .await?;
    let Some(resolved) = resolved else {
        // Dropped between the two steps.
        return Err(fail(state, Some(&user), mechanism.name(), "UserNotFound").await);
    };
    tracing::info!(
        user = %user.name,
        db = %user.db,
        mechanism = mechanism.name(),
        speculative = sasl.speculative,
        "Successfully authenticated"
    );
    session.authenticated(user, mechanism, resolved, generation);
    Ok(())
}
