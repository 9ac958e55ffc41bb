//! User management: `createUser`, `updateUser`, `dropUser`, `dropAllUsersFromDatabase`,
//! `usersInfo`, `grantRolesToUser`, `revokeRolesFromUser`. Documents have mongod's shape
//! (`credentials` holds salted, iterated SCRAM keys, never the password) and go through the
//! storage write path under the auth write lock (users, then roles: every auth write takes
//! both, in that order). Every change bumps the auth generation so that sessions re-resolve.

use super::argspec::users::check as check_args;
use super::{Reply, Request, truthy};
use crate::auth::scram::{Credential, ITERATIONS_MIN_SHA1, ITERATIONS_MIN_SHA256, Mechanism};
use crate::auth::store::{self, AUTH_DB, Name, ROLES, USERS};
use crate::auth::{blocking, builtin, sasl};
use crate::catalog::WriteConcern;
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::sync::Arc;
use storage::Ticket;

pub(super) fn bad(message: impl Into<String>) -> CommandError {
    err(ErrorCode::BadValue, message.into())
}

/// Take the auth write locks (users, then roles) for the life of the guard.
pub(super) async fn write_lock(
    state: &ServerState,
) -> (
    tokio::sync::OwnedMutexGuard<()>,
    tokio::sync::OwnedMutexGuard<()>,
) {
    let users = state.catalog.lock(AUTH_DB, USERS).await;
    let roles = state.catalog.lock(AUTH_DB, ROLES).await;
    (users, roles)
}

/// After a write: sessions re-resolve, and the reply waits for durability as asked.
pub(super) async fn committed(
    state: &ServerState,
    req: &Request,
    tickets: Vec<Ticket>,
) -> CommandResult<()> {
    state.auth.invalidate();
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    for t in &tickets {
        state.catalog.finish_write(t, &wc).await?;
    }
    Ok(())
}

/// After a write that is not the auth store's: the reply waits for durability as asked.
pub(super) async fn committed_plain(
    state: &ServerState,
    req: &Request,
    ticket: Ticket,
) -> CommandResult<()> {
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    state.catalog.finish_write(&ticket, &wc).await
}

pub(super) fn name_arg(body: &Document, command: &str) -> CommandResult<String> {
    match body.get(command) {
        Some(Bson::String(s)) if !s.is_empty() && !s.contains('\0') => Ok(s.clone()),
        Some(Bson::String(_)) => Err(bad(format!("{command} needs a non-empty name"))),
        _ => Err(err(
            ErrorCode::TypeMismatch,
            format!("BSON field '{command}.{command}' is the wrong type, expected type 'string'"),
        )),
    }
}

pub(super) fn role_list(
    body: &Document,
    command: &str,
    db: &str,
) -> CommandResult<Option<Vec<Name>>> {
    match body.get("roles") {
        None => Ok(None),
        Some(Bson::Array(items)) => {
            let mut out: Vec<Name> = Vec::new();
            for r in items {
                let n = Name::parse_role(r, db)?;
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            Ok(Some(out))
        }
        Some(_) => Err(err(
            ErrorCode::TypeMismatch,
            format!("BSON field '{command}.roles' is the wrong type, expected type 'array'"),
        )),
    }
}

pub(super) fn roles_bson(roles: &[Name]) -> Bson {
    Bson::Array(
        roles
            .iter()
            .map(|r| Bson::Document(r.role_document()))
            .collect(),
    )
}

/// Every role must exist (built in, or stored).
pub(super) fn check_roles_exist(state: &ServerState, roles: &[Name]) -> CommandResult<()> {
    for r in roles {
        if !store::role_exists(state, r)? {
            return Err(err(
                ErrorCode::RoleNotFound,
                format!("Could not find role: {}", r.display()),
            ));
        }
    }
    Ok(())
}

fn user_not_found(user: &Name) -> CommandError {
    err(
        ErrorCode::UserNotFound,
        format!(
            "Could not find user \"{}\" for db \"{}\"",
            user.name, user.db
        ),
    )
}

/// `authenticationRestrictions` are accepted only empty: cairn does not enforce them, and
/// storing an unenforced restriction would promise what the server does not do.
fn check_restrictions(body: &Document) -> CommandResult<()> {
    match body.get("authenticationRestrictions") {
        None => Ok(()),
        Some(Bson::Array(a)) if a.is_empty() => Ok(()),
        Some(_) => Err(err(
            ErrorCode::CommandNotSupported,
            "authenticationRestrictions are not supported by cairn",
        )),
    }
}

/// The mechanisms a new credential set is made for: `mechanisms` when given (each enabled),
/// else every enabled SCRAM mechanism.
fn mechanisms(
    state: &ServerState,
    body: &Document,
    command: &str,
) -> CommandResult<Vec<Mechanism>> {
    let Some(v) = body.get("mechanisms") else {
        return Ok(crate::auth::scram::MECHANISMS
            .into_iter()
            .filter(|m| sasl::enabled_mechanism(state, m.name()).is_ok())
            .collect());
    };
    let Bson::Array(items) = v else {
        return Err(err(
            ErrorCode::TypeMismatch,
            format!("BSON field '{command}.mechanisms' is the wrong type, expected type 'array'"),
        ));
    };
    let mut out = Vec::new();
    for m in items {
        let name = m
            .as_str()
            .ok_or_else(|| bad("mechanisms must be strings"))?;
        let m = sasl::enabled_mechanism(state, name)
            .map_err(|_| bad(format!("Unknown auth mechanism '{name}'")))?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err(bad("mechanisms field must not be empty"));
    }
    out.sort();
    Ok(out)
}

/// Salted, iterated credentials of `user` for `mechs` (the password goes no further).
fn credentials(
    state: &ServerState,
    user: &str,
    password: &str,
    digested: bool,
    mechs: &[Mechanism],
) -> CommandResult<Document> {
    if password.is_empty() {
        return Err(bad("User passwords must not be empty"));
    }
    if digested && mechs.contains(&Mechanism::Sha256) {
        return Err(bad("Use of SCRAM-SHA-256 requires undigested passwords"));
    }
    let mut out = Document::new();
    for m in mechs {
        let (param, min) = match m {
            Mechanism::Sha1 => ("scramIterationCount", ITERATIONS_MIN_SHA1),
            Mechanism::Sha256 => ("scramSHA256IterationCount", ITERATIONS_MIN_SHA256),
        };
        let iterations = state.params.get_i64(param).clamp(min, i32::MAX as i64) as u32;
        let c = Credential::derive(
            *m,
            user,
            password,
            digested,
            Credential::new_salt(*m),
            iterations,
        )
        .map_err(|why| bad(format!("Error preparing the password: {why}")))?;
        out.insert(m.name(), c.to_document());
    }
    Ok(out)
}

fn password_arg<'a>(body: &'a Document, command: &str) -> CommandResult<Option<&'a str>> {
    match body.get("pwd") {
        None => Ok(None),
        Some(Bson::String(p)) => Ok(Some(p)),
        Some(_) => Err(err(
            ErrorCode::TypeMismatch,
            format!("BSON field '{command}.pwd' is the wrong type, expected type 'string'"),
        )),
    }
}

fn digest_arg(body: &Document) -> bool {
    body.get("digestPassword").is_none_or(truthy)
}

pub async fn create_user(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    let b = &req.body;
    check_args(b, "createUser")?;
    let db = req.db.clone();
    let user = Name::new(&name_arg(b, "createUser")?, &db);
    if db == "local" {
        return Err(bad("Cannot create users in the local database"));
    }
    let roles = role_list(b, "createUser", &db)?
        .ok_or_else(|| bad("\"createUser\" command requires a \"roles\" array"))?;
    check_restrictions(b)?;
    let custom = super::args::opt_doc(b, "createUser", "customData")?.cloned();
    let pwd = match (password_arg(b, "createUser")?, db == "$external") {
        (Some(_), true) => {
            return Err(bad(
                "Cannot set the password for users defined on the '$external' database",
            ));
        }
        (None, true) => None,
        (None, false) => {
            return Err(bad(
                "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db",
            ));
        }
        (Some(pwd), false) => Some(pwd.to_string()),
    };
    let mechs = mechanisms(state, b, "createUser")?;
    let digested = !digest_arg(b);
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        check_roles_exist(s, &roles)?;
        // PBKDF2 is the slow part of createUser: it runs here, off the async workers.
        let creds = match &pwd {
            Some(pwd) => credentials(s, &user.name, pwd, digested, &mechs)?,
            None => Document::new(),
        };
        let mut d = doc! {
            "_id": user.id(),
            "userId": bson::Binary::from_uuid(bson::Uuid::new()),
            "user": &user.name,
            "db": &user.db,
            "credentials": creds,
            "roles": roles_bson(&roles),
        };
        if let Some(c) = custom {
            d.insert("customData", c);
        }
        store::insert(s, USERS, &d).map_err(|e| match e.code {
            ErrorCode::DuplicateKey => err(
                ErrorCode::Location51003,
                format!("User \"{}\" already exists", user.display()),
            ),
            _ => e,
        })
    })
    .await?;
    committed(state, req, vec![ticket]).await?;
    Ok(Reply::ok())
}

pub async fn update_user(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    let b = req.body.clone();
    check_args(&b, "updateUser")?;
    let user = Name::new(&name_arg(&b, "updateUser")?, &req.db);
    let roles = role_list(&b, "updateUser", &req.db)?;
    let custom = super::args::opt_doc(&b, "updateUser", "customData")?.cloned();
    let pwd = password_arg(&b, "updateUser")?.map(str::to_string);
    check_restrictions(&b)?;
    if pwd.is_none() && roles.is_none() && custom.is_none() && !b.contains_key("mechanisms") {
        return Err(bad(
            "Must specify at least one field to update in updateUser",
        ));
    }
    let mechs = mechanisms(state, &b, "updateUser")?;
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        let Some((rid, mut d)) = store::get_with_id(s, USERS, &user)? else {
            return Err(user_not_found(&user));
        };
        if let Some(pwd) = &pwd {
            let creds = credentials(s, &user.name, pwd, !digest_arg(&b), &mechs)?;
            d.insert("credentials", creds);
        } else if b.contains_key("mechanisms") {
            // Without a password, mechanisms may only narrow what the user already has.
            let creds = d.get_document("credentials").cloned().unwrap_or_default();
            if mechs.iter().any(|m| !creds.contains_key(m.name())) {
                return Err(bad(
                    "mechanisms field must be a subset of previously set mechanisms",
                ));
            }
            let kept: Document = creds
                .into_iter()
                .filter(|(k, _)| mechs.iter().any(|m| m.name() == k))
                .collect();
            d.insert("credentials", kept);
        }
        if let Some(roles) = &roles {
            check_roles_exist(s, roles)?;
            d.insert("roles", roles_bson(roles));
        }
        if let Some(c) = custom {
            d.insert("customData", c);
        }
        store::write(s, USERS, vec![(rid, d)], vec![])
    })
    .await?;
    committed(state, req, ticket.into_iter().collect()).await?;
    Ok(Reply::ok())
}

pub async fn drop_user(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    check_args(&req.body, "dropUser")?;
    let user = Name::new(&name_arg(&req.body, "dropUser")?, &req.db);
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        let Some((rid, _)) = store::get_with_id(s, USERS, &user)? else {
            return Err(err(
                ErrorCode::UserNotFound,
                format!("User '{}' not found", user.display()),
            ));
        };
        store::write(s, USERS, vec![], vec![rid])
    })
    .await?;
    committed(state, req, ticket.into_iter().collect()).await?;
    Ok(Reply::ok())
}

pub async fn drop_all_users(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    check_args(&req.body, "dropAllUsersFromDatabase")?;
    let db = req.db.clone();
    let _lock = write_lock(state).await;
    let (n, ticket) = blocking(state, move |s| {
        let found = store::list(s, USERS, &|d| d.get_str("db").ok() == Some(db.as_str()))?;
        let rids: Vec<u64> = found.iter().map(|(rid, _)| *rid).collect();
        Ok((rids.len(), store::write(s, USERS, vec![], rids)?))
    })
    .await?;
    committed(state, req, ticket.into_iter().collect()).await?;
    Ok(Reply::Doc(doc! { "n": n as i32, "ok": 1.0 }))
}

/// `grantRolesToUser` (`grant`) and `revokeRolesFromUser`.
pub async fn change_user_roles(
    state: &Arc<ServerState>,
    req: &Request,
    grant: bool,
) -> CommandResult<Reply> {
    let command = if grant {
        "grantRolesToUser"
    } else {
        "revokeRolesFromUser"
    };
    check_args(&req.body, command)?;
    let user = Name::new(&name_arg(&req.body, command)?, &req.db);
    let roles = role_list(&req.body, command, &req.db)?.ok_or_else(|| {
        bad(format!(
            "\"{command}\" command requires a non-empty \"roles\" array"
        ))
    })?;
    if roles.is_empty() {
        return Err(bad(format!(
            "\"{command}\" command requires a non-empty \"roles\" array"
        )));
    }
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        check_roles_exist(s, &roles)?;
        let Some((rid, mut d)) = store::get_with_id(s, USERS, &user)? else {
            return Err(user_not_found(&user));
        };
        let mut now = store::roles_of(&d);
        if grant {
            for r in roles {
                if !now.contains(&r) {
                    now.push(r);
                }
            }
        } else {
            now.retain(|r| !roles.contains(r));
        }
        d.insert("roles", roles_bson(&now));
        store::write(s, USERS, vec![(rid, d)], vec![])
    })
    .await?;
    committed(state, req, ticket.into_iter().collect()).await?;
    Ok(Reply::ok())
}

/// The users `usersInfo` asks about: explicit names, this database, or every database.
enum Which {
    Names(Vec<Name>),
    Db(String),
    All,
}

fn which(req: &Request) -> CommandResult<Which> {
    let v = req.body.get("usersInfo").unwrap_or(&Bson::Null);
    match v {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => Ok(Which::Db(req.db.clone())),
        Bson::Document(d) if d.contains_key("forAllDBs") => {
            if req.db != AUTH_DB {
                return Err(bad("forAllDBs may only be used on the admin database"));
            }
            Ok(Which::All)
        }
        Bson::Array(items) => items
            .iter()
            .map(|i| Name::parse_user(i, &req.db))
            .collect::<CommandResult<_>>()
            .map(Which::Names),
        v => Ok(Which::Names(vec![Name::parse_user(v, &req.db)?])),
    }
}

pub async fn users_info(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    let b = req.body.clone();
    check_args(&b, "usersInfo")?;
    let which = which(req)?;
    let filter = match super::args::opt_doc(&b, "usersInfo", "filter")? {
        Some(f) => Some(crate::query::matcher::Filter::parse(f)?),
        None => None,
    };
    let users = blocking(state, move |s| {
        let mut found: Vec<Document> = match which {
            Which::Names(names) => {
                let mut out = Vec::new();
                for n in &names {
                    out.extend(store::get_user(s, n)?);
                }
                out
            }
            Which::Db(db) => store::list(s, USERS, &|d| d.get_str("db").ok() == Some(db.as_str()))?
                .into_iter()
                .map(|(_, d)| d)
                .collect(),
            Which::All => store::list(s, USERS, &|_| true)?
                .into_iter()
                .map(|(_, d)| d)
                .collect(),
        };
        found.sort_by(|a, b| {
            (a.get_str("db").ok(), a.get_str("user").ok())
                .cmp(&(b.get_str("db").ok(), b.get_str("user").ok()))
        });
        let mut out = Vec::with_capacity(found.len());
        for d in found {
            if let Some(f) = &filter {
                let raw = bson::RawDocumentBuf::try_from(&d)
                    .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
                if !f.matches(&raw) {
                    continue;
                }
            }
            out.push(Bson::Document(user_info(s, d, &b)?));
        }
        Ok(out)
    })
    .await?;
    Ok(Reply::Doc(doc! { "users": users, "ok": 1.0 }))
}

/// One `usersInfo` entry in mongod's shape.
fn user_info(state: &ServerState, d: Document, opts: &Document) -> CommandResult<Document> {
    let flag = |k: &str| opts.get(k).is_some_and(truthy);
    let mut out = Document::new();
    for k in ["_id", "userId", "user", "db"] {
        if let Some(v) = d.get(k) {
            out.insert(k, v.clone());
        }
    }
    let roles = store::roles_of(&d);
    out.insert("roles", roles_bson(&roles));
    if let Some(c) = d
        .get("customData")
        .filter(|_| opts.get("showCustomData").is_none_or(truthy))
    {
        out.insert("customData", c.clone());
    }
    let mechs: Vec<Bson> = store::mechanisms_of(&d)
        .into_iter()
        .map(|m| Bson::from(m.name()))
        .collect();
    out.insert("mechanisms", mechs);
    if flag("showCredentials")
        && let Ok(c) = d.get_document("credentials")
    {
        out.insert("credentials", c.clone());
    }
    if flag("showAuthenticationRestrictions") {
        out.insert("authenticationRestrictions", Bson::Array(vec![]));
    }
    if flag("showPrivileges") {
        let resolved = store::resolve(state, &roles)?;
        let inherited: Vec<Bson> = resolved
            .roles
            .iter()
            .map(|r| Bson::Document(r.role_document()))
            .collect();
        out.insert("inheritedRoles", inherited);
        out.insert("inheritedPrivileges", resolved.privileges.to_bson());
        out.insert("inheritedAuthenticationRestrictions", Bson::Array(vec![]));
    }
    Ok(out)
}

/// Roles of `db` may only be granted from `db`, except roles of `admin` (mongod's rule).
pub(super) fn check_role_scope(db: &str, roles: &[Name]) -> CommandResult<()> {
    if db != AUTH_DB
        && let Some(r) = roles.iter().find(|r| r.db != db)
    {
        return Err(bad(format!(
            "Roles on the '{db}' database cannot be granted roles from other databases ({})",
            r.display()
        )));
    }
    Ok(())
}

/// Built-in roles cannot be created, changed or dropped.
pub(super) fn check_not_builtin(role: &Name) -> CommandResult<()> {
    if builtin::is_reserved(&role.name, &role.db) {
        return Err(err(
            ErrorCode::InvalidRoleModification,
            format!("Cannot modify built-in role: {}", role.display()),
        ));
    }
    Ok(())
}
