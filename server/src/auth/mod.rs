//! Authentication and authorization. This module owns who a connection is (its `Session`: the
//! authenticated user, the roles and privileges that user has, a SASL conversation in flight),
//! the SCRAM protocol (`scram`), privileges and the built-in roles (`privilege`, `builtin`), and
//! users and roles on disk (`store`). The decision "may this command run" is made in one place,
//! `commands::authz`, from one table next to the command table.
//!
//! Invariants: a password never leaves the handler that derives credentials from it (not in a
//! log line, an error, a `Debug` or a stored document); a connection's privileges are those of
//! its user as of the last user or role change (every change bumps `AuthState::generation`, and
//! a session re-resolves before its next checked command); with `--auth` off nothing here
//! refuses anything.

pub mod builtin;
pub mod privilege;
pub mod sasl;
pub mod scram;
pub mod store;

use crate::error::CommandResult;
use crate::state::ServerState;
use privilege::Privileges;
use scram::Mechanism;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use store::{Name, Resolved};

/// Runs storage work for authentication (user and role look-ups and writes, PBKDF2) on the
/// server's blocking pool (`crate::offload`), as every storage call is run.
pub async fn blocking<T, F>(state: &Arc<ServerState>, f: F) -> CommandResult<T>
where
    T: Send + 'static,
    F: FnOnce(&ServerState) -> CommandResult<T> + Send + 'static,
{
    crate::offload::run(state, "auth", None, f).await
}

/// What every connection shares about authentication.
pub struct AuthState {
    enabled: bool,
    /// Bumped by every change to users or roles; sessions re-resolve when it moved.
    generation: AtomicU64,
    unauthenticated: Arc<AtomicUsize>,
}

impl AuthState {
    pub fn new(enabled: bool) -> AuthState {
        AuthState {
            enabled,
            generation: AtomicU64::new(1),
            unauthenticated: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// `--auth`: commands are checked.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Users or roles changed: every session re-resolves its privileges.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Relaxed);
    }

    /// Connections open and not authenticated (counted only under `--auth`).
    pub fn unauthenticated(&self) -> usize {
        self.unauthenticated.load(Relaxed)
    }

    /// The session of a new connection; None when `max` unauthenticated connections are open.
    pub fn admit(&self, max: usize) -> Option<Session> {
        if !self.enabled {
            return Some(Session::default());
        }
        let taken = self
            .unauthenticated
            .fetch_update(Relaxed, Relaxed, |n| (n < max).then_some(n + 1));
        taken.ok().map(|_| Session {
            slot: Some(Arc::new(Slot(self.unauthenticated.clone()))),
            ..Session::default()
        })
    }
}

/// One place in the count of unauthenticated connections, given back when dropped.
#[derive(Debug)]
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Who a connection is.
#[derive(Debug, Clone, Default)]
pub struct Session {
    user: Option<Name>,
    mechanism: Option<Mechanism>,
    resolved: Arc<Resolved>,
    generation: u64,
    sasl: Option<sasl::Sasl>,
    /// Held while the connection counts as unauthenticated.
    slot: Option<Arc<Slot>>,
}

impl Session {
    pub fn user(&self) -> Option<&Name> {
        self.user.as_ref()
    }

    pub fn is_authenticated(&self) -> bool {
        self.user.is_some()
    }

    pub fn privileges(&self) -> &Privileges {
        &self.resolved.privileges
    }

    /// Every role the user has, direct and inherited.
    pub fn roles(&self) -> impl Iterator<Item = &Name> {
        self.resolved.roles.iter()
    }

    /// Still counted among the unauthenticated connections (under `--auth`).
    pub fn counts_as_unauthenticated(&self) -> bool {
        self.slot.is_some()
    }

    /// Become `user`, with the roles and privileges resolved as of `generation`.
    pub fn authenticated(
        &mut self,
        user: Name,
        mechanism: Mechanism,
        resolved: Resolved,
        generation: u64,
    ) {
        self.user = Some(user);
        self.mechanism = Some(mechanism);
        self.resolved = Arc::new(resolved);
        self.generation = generation;
        self.slot = None;
    }

    /// `logout` (or the user was dropped): no user, no privileges. The connection does not go
    /// back into the unauthenticated count; it was admitted once.
    pub fn logout(&mut self) {
        self.user = None;
        self.mechanism = None;
        self.resolved = Arc::default();
        self.sasl = None;
    }

    /// Re-resolve the user's privileges if users or roles changed since they were resolved.
    pub async fn refresh(&mut self, state: &Arc<ServerState>) -> CommandResult<()> {
        let Some(user) = self.user.clone() else {
            return Ok(());
        };
        let now = state.auth.generation();
        if now == self.generation {
            return Ok(());
        }
        let found = blocking(state, move |s| {
            let Some(doc) = store::get_user(s, &user)? else {
                return Ok(None);
            };
            store::resolve(s, &store::roles_of(&doc)).map(Some)
        })
        .await?;
        match found {
            Some(resolved) => {
                self.resolved = Arc::new(resolved);
                self.generation = now;
            }
            None => self.logout(),
        }
        Ok(())
    }
}
