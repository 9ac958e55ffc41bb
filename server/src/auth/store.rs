//! Users and roles on disk: `admin.system.users` and `admin.system.roles`, in mongod's document
//! shapes (`_id: "<db>.<name>"`, unique `{user: 1, db: 1}` / `{role: 1, db: 1}` indexes), read
//! and written through the storage engine's ordinary write path (so they are in the log, durable
//! before the command answers, and survive a SIGKILL). Role resolution (a user's roles, the
//! roles they inherit, and the union of their privileges) also lives here. Everything here is
//! synchronous storage work: callers run it through `auth::blocking`.

use super::builtin;
use super::privilege::{Privilege, Privileges};
use super::scram::{Credential, Mechanism};
use crate::error::storage_error;
use crate::error::{CommandResult, ErrorCode, err};
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use storage::{Collection, Direction, IndexSpec, Ticket, WriteOp};

pub const AUTH_DB: &str = "admin";
pub const USERS: &str = "system.users";
pub const ROLES: &str = "system.roles";
/// Most roles one resolution visits (a user's roles and everything they inherit).
pub const ROLE_GRAPH_NODES_MAX: usize = 1024;
/// Most user or role documents one listing returns (`usersInfo`, `rolesInfo`, drops).
pub const AUTH_DOCUMENTS_LISTED_MAX: usize = 100_000;
const SCAN_BATCH: usize = 1000;

/// A user or role name qualified by its database.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name {
    pub name: String,
    pub db: String,
}

impl Name {
    pub fn new(name: &str, db: &str) -> Name {
        Name {
            name: name.to_string(),
            db: db.to_string(),
        }
    }

    /// The `_id` mongod gives the document: `<db>.<name>`.
    pub fn id(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    pub fn role_document(&self) -> Document {
        doc! { "role": &self.name, "db": &self.db }
    }

    pub fn user_document(&self) -> Document {
        doc! { "user": &self.name, "db": &self.db }
    }

    /// `name@db`, as mongod writes user and role names in messages.
    pub fn display(&self) -> String {
        format!("{}@{}", self.name, self.db)
    }

    /// A role as commands name it: `"name"` (in `default_db`) or `{role: "name", db: "db"}`.
    pub fn parse_role(v: &Bson, default_db: &str) -> CommandResult<Name> {
        Name::parse(v, default_db, "role")
    }

    /// A user as `usersInfo` names it: `"name"` or `{user: "name", db: "db"}`.
    pub fn parse_user(v: &Bson, default_db: &str) -> CommandResult<Name> {
        Name::parse(v, default_db, "user")
    }

    fn parse(v: &Bson, default_db: &str, field: &str) -> CommandResult<Name> {
        match v {
            Bson::String(s) => Ok(Name::new(s, default_db)),
            Bson::Document(d) => match (d.get(field), d.get("db")) {
                (Some(Bson::String(n)), Some(Bson::String(db))) => Ok(Name::new(n, db)),
                _ => Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "{field} names must be strings or {{{field}: <name>, db: <db>}} objects"
                    ),
                )),
            },
            _ => Err(err(
                ErrorCode::BadValue,
                format!("{field} names must be strings or objects"),
            )),
        }
    }
}

/// The roles listed in a user or role document's `roles` array.
pub fn roles_of(doc: &Document) -> Vec<Name> {
    let Ok(list) = doc.get_array("roles") else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|r| r.as_document())
        .filter_map(|r| Some(Name::new(r.get_str("role").ok()?, r.get_str("db").ok()?)))
        .collect()
}

/// The privileges a role document grants itself (not the ones it inherits).
pub fn privileges_of(doc: &Document) -> Vec<Privilege> {
    let Ok(list) = doc.get_array("privileges") else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|p| Privilege::from_bson(p).ok())
        .collect()
}

/// The stored credential of a user for one mechanism.
pub fn credential_of(user: &Document, mechanism: Mechanism) -> Option<Credential> {
    let creds = user.get_document("credentials").ok()?;
    Credential::from_document(mechanism, creds.get_document(mechanism.name()).ok()?)
}

/// The mechanisms a user has credentials for, in mongod's order.
pub fn mechanisms_of(user: &Document) -> Vec<Mechanism> {
    super::scram::MECHANISMS
        .into_iter()
        .filter(|m| credential_of(user, *m).is_some())
        .collect()
}

fn collection(state: &ServerState, name: &str) -> Option<Arc<Collection>> {
    state.catalog.collection(AUTH_DB, name)
}

fn get(state: &ServerState, coll: &str, id: &str) -> CommandResult<Option<(u64, Document)>> {
    let Some(c) = collection(state, coll) else {
        return Ok(None);
    };
    let rid = c
        .find_by_id(bson::RawBsonRef::String(id))
        .map_err(|e| storage_error(e, AUTH_DB, coll))?;
    let Some(rid) = rid else {
        return Ok(None);
    };
    let raw = c.get(rid).map_err(|e| storage_error(e, AUTH_DB, coll))?;
    match raw {
        Some(raw) => Document::try_from(raw.as_ref())
            .map(|d| Some((rid, d)))
            .map_err(|e| err(ErrorCode::InternalError, format!("{AUTH_DB}.{coll}: {e}"))),
        None => Ok(None),
    }
}

pub fn get_user(state: &ServerState, user: &Name) -> CommandResult<Option<Document>> {
    Ok(get(state, USERS, &user.id())?.map(|(_, d)| d))
}

pub fn get_role(state: &ServerState, role: &Name) -> CommandResult<Option<Document>> {
    Ok(get(state, ROLES, &role.id())?.map(|(_, d)| d))
}

/// Every document of `coll` that `keep` accepts, in storage order (bounded).
pub fn list(
    state: &ServerState,
    coll: &str,
    keep: &dyn Fn(&Document) -> bool,
) -> CommandResult<Vec<(u64, Document)>> {
    let Some(c) = collection(state, coll) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let batch = c
            .scan(Direction::Forward, after, SCAN_BATCH)
            .map_err(|e| storage_error(e, AUTH_DB, coll))?;
        let Some((last, _)) = batch.last() else {
            return Ok(out);
        };
        after = Some(*last);
        for (rid, raw) in batch {
            let d = Document::try_from(raw.as_ref())
                .map_err(|e| err(ErrorCode::InternalError, format!("{AUTH_DB}.{coll}: {e}")))?;
            if keep(&d) {
                if out.len() >= AUTH_DOCUMENTS_LISTED_MAX {
                    return Err(err(
                        ErrorCode::ExceededMemoryLimit,
                        format!(
                            "more than {AUTH_DOCUMENTS_LISTED_MAX} documents in {AUTH_DB}.{coll}"
                        ),
                    ));
                }
                out.push((rid, d));
            }
        }
    }
}

/// True when no user and no role exists: the localhost exception is open.
pub fn is_empty(state: &ServerState) -> bool {
    [USERS, ROLES]
        .iter()
        .all(|c| collection(state, c).is_none_or(|c| c.count() == 0))
}

/// The collection, created with mongod's unique `{<field>: 1, db: 1}` index when missing.
fn ensure(state: &ServerState, coll: &str) -> CommandResult<Arc<Collection>> {
    if let Some(c) = collection(state, coll) {
        return Ok(c);
    }
    let engine = state.catalog.engine();
    match engine.create_collection(AUTH_DB, coll, Document::new()) {
        Ok(_) | Err(storage::StorageError::NamespaceExists(_)) => {}
        Err(e) => return Err(storage_error(e, AUTH_DB, coll)),
    }
    let field = if coll == USERS { "user" } else { "role" };
    let spec = IndexSpec {
        name: format!("{field}_1_db_1"),
        key: doc! { field: 1, "db": 1 },
        unique: true,
        sparse: false,
        partial_filter: None,
        expire_after_seconds: None,
        hidden: false,
        extra: Document::new(),
    };
    match engine.create_index(AUTH_DB, coll, spec, &|_, _| {}) {
        Ok(()) | Err(storage::StorageError::IndexExists(_)) => {}
        Err(e) => return Err(storage_error(e, AUTH_DB, coll)),
    }
    collection(state, coll).ok_or_else(|| err(ErrorCode::InternalError, "auth collection vanished"))
}

fn raw(d: &Document) -> CommandResult<RawDocumentBuf> {
    RawDocumentBuf::try_from(d).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
}

/// Insert a new user or role document. A duplicate `_id` is a storage DuplicateKey error.
pub fn insert(state: &ServerState, coll: &str, d: &Document) -> CommandResult<Ticket> {
    let c = ensure(state, coll)?;
    c.write(vec![WriteOp::Insert((raw(d)?).into())])
        .map_err(|e| storage_error(e, AUTH_DB, coll))
}

/// Replace and delete in one atomic batch (`replace`: RecordId and new document).
pub fn write(
    state: &ServerState,
    coll: &str,
    replace: Vec<(u64, Document)>,
    delete: Vec<u64>,
) -> CommandResult<Option<Ticket>> {
    if replace.is_empty() && delete.is_empty() {
        return Ok(None);
    }
    let c = ensure(state, coll)?;
    let mut ops = Vec::with_capacity(replace.len() + delete.len());
    for (rid, d) in &replace {
        ops.push(WriteOp::Replace(*rid, raw(d)?));
    }
    ops.extend(delete.into_iter().map(WriteOp::Delete));
    c.write(ops)
        .map(Some)
        .map_err(|e| storage_error(e, AUTH_DB, coll))
}

/// The stored document (with its RecordId) of a user or role.
pub fn get_with_id(
    state: &ServerState,
    coll: &str,
    name: &Name,
) -> CommandResult<Option<(u64, Document)>> {
    get(state, coll, &name.id())
}

/// A role's resolution: every role reached (itself, or a user's direct roles, and what they
/// inherit) and the union of their privileges.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub roles: BTreeSet<Name>,
    pub privileges: Privileges,
}

/// Whether a role exists: built in, or stored.
pub fn role_exists(state: &ServerState, role: &Name) -> CommandResult<bool> {
    Ok(builtin::is_builtin(&role.name, &role.db) || get_role(state, role)?.is_some())
}

/// Walk the role graph from `start` (breadth first, each role once, bounded). Roles that no
/// longer exist grant nothing.
pub fn resolve(state: &ServerState, start: &[Name]) -> CommandResult<Resolved> {
    let mut out = Resolved::default();
    let mut queue: VecDeque<Name> = start.iter().cloned().collect();
    while let Some(role) = queue.pop_front() {
        if out.roles.contains(&role) {
            continue;
        }
        if out.roles.len() >= ROLE_GRAPH_NODES_MAX {
            return Err(err(
                ErrorCode::BadValue,
                format!("a role graph reaches more than {ROLE_GRAPH_NODES_MAX} roles"),
            ));
        }
        if let Some(ps) = builtin::privileges(&role.name, &role.db) {
            out.privileges.extend(ps);
        } else if let Some(d) = get_role(state, &role)? {
            out.privileges.extend(privileges_of(&d));
            queue.extend(roles_of(&d));
        } else {
            continue;
        }
        out.roles.insert(role);
    }
    Ok(out)
}
