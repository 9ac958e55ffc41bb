//! Role management: `createRole`, `updateRole`, `dropRole`, `dropAllRolesFromDatabase`,
//! `rolesInfo`, `grantPrivilegesToRole`, `revokePrivilegesFromRole`, `grantRolesToRole`,
//! `revokeRolesFromRole`. User-defined roles live in `admin.system.roles` in mongod's shape;
//! built-in roles are computed (`auth::builtin`) and cannot be changed. Roles outside `admin`
//! may only hold privileges on their own database and inherit roles of their own database;
//! a grant that would make a role inherit itself is refused.

use super::argspec::users::check as check_args;
use super::users::{
    bad, check_not_builtin, check_role_scope, check_roles_exist, committed, name_arg, role_list,
    roles_bson, write_lock,
};
use super::{Reply, Request, truthy};
use crate::auth::privilege::{Privilege, Privileges, Resource};
use crate::auth::store::{self, AUTH_DB, Name, ROLES, USERS};
use crate::auth::{blocking, builtin};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::sync::Arc;

fn privilege_list(
    body: &Document,
    command: &str,
    db: &str,
) -> CommandResult<Option<Vec<Privilege>>> {
    let Some(v) = body.get("privileges") else {
        return Ok(None);
    };
    let Bson::Array(items) = v else {
        return Err(err(
            ErrorCode::TypeMismatch,
            format!("BSON field '{command}.privileges' is the wrong type, expected type 'array'"),
        ));
    };
    let list = items
        .iter()
        .map(Privilege::from_bson)
        .collect::<CommandResult<Vec<_>>>()?;
    if db != AUTH_DB {
        let outside = list.iter().any(|p| match &p.resource {
            Resource::Ns { db: d, .. } => d != db,
            _ => true,
        });
        if outside {
            return Err(bad(format!(
                "Roles on the '{db}' database cannot be granted privileges that target other \
                 databases or the cluster"
            )));
        }
    }
    Ok(Some(list))
}

fn merged(list: Vec<Privilege>) -> Privileges {
    let mut ps = Privileges::default();
    ps.extend(list);
    ps
}

fn role_not_found(role: &Name) -> CommandError {
    err(
        ErrorCode::RoleNotFound,
        format!("Could not find role: {}", role.display()),
    )
}

/// Refuse subroles through which `role` would inherit itself.
fn check_no_cycle(state: &ServerState, role: &Name, subroles: &[Name]) -> CommandResult<()> {
    for s in subroles {
        if s == role
            || store::resolve(state, std::slice::from_ref(s))?
                .roles
                .contains(role)
        {
            return Err(err(
                ErrorCode::InvalidRoleModification,
                format!(
                    "Granting {} to {} would introduce a cycle in the role graph",
                    s.display(),
                    role.display()
                ),
            ));
        }
    }
    Ok(())
}

fn role_document(role: &Name, privileges: &Privileges, roles: &[Name]) -> Document {
    doc! {
        "_id": role.id(),
        "role": &role.name,
        "db": &role.db,
        "privileges": privileges.to_bson(),
        "roles": roles_bson(roles),
    }
}

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

pub async fn create_role(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    let b = &req.body;
    check_args(b, "createRole")?;
    let role = Name::new(&name_arg(b, "createRole")?, &req.db);
    if builtin::is_reserved(&role.name, &role.db) {
        return Err(bad(
            "Cannot create roles with the same name as a built-in role",
        ));
    }
    if role.db == "local" || role.db == "$external" {
        return Err(bad(format!(
            "Cannot create roles in the {} database",
            role.db
        )));
    }
    let privileges = privilege_list(b, "createRole", &req.db)?
        .ok_or_else(|| bad("\"createRole\" command requires a \"privileges\" array"))?;
    let roles = role_list(b, "createRole", &req.db)?
        .ok_or_else(|| bad("\"createRole\" command requires a \"roles\" array"))?;
    check_role_scope(&req.db, &roles)?;
    check_restrictions(b)?;
    let d = role_document(&role, &merged(privileges), &roles);
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        check_roles_exist(s, &roles)?;
        store::insert(s, ROLES, &d).map_err(|e| match e.code {
            ErrorCode::DuplicateKey => err(
                ErrorCode::Location51002,
                format!("Role \"{}\" already exists", role.display()),
            ),
            _ => e,
        })
    })
    .await?;
    committed(state, req, vec![ticket]).await?;
    Ok(Reply::ok())
}

pub async fn update_role(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    let b = &req.body;
    check_args(b, "updateRole")?;
    let role = Name::new(&name_arg(b, "updateRole")?, &req.db);
    check_not_builtin(&role)?;
    let privileges = privilege_list(b, "updateRole", &req.db)?;
    let roles = role_list(b, "updateRole", &req.db)?;
    if privileges.is_none() && roles.is_none() {
        return Err(bad(
            "Must specify at least one field to update in updateRole",
        ));
    }
    if let Some(r) = &roles {
        check_role_scope(&req.db, r)?;
    }
    check_restrictions(b)?;
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        let Some((rid, d)) = store::get_with_id(s, ROLES, &role)? else {
            return Err(role_not_found(&role));
        };
        let roles = match roles {
            Some(r) => {
                check_roles_exist(s, &r)?;
                check_no_cycle(s, &role, &r)?;
                r
            }
            None => store::roles_of(&d),
        };
        let privileges = merged(privileges.unwrap_or_else(|| store::privileges_of(&d)));
        store::write(
            s,
            ROLES,
            vec![(rid, role_document(&role, &privileges, &roles))],
            vec![],
        )
    })
    .await?;
    committed(state, req, ticket.into_iter().collect()).await?;
    Ok(Reply::ok())
}

/// Remove `gone` roles from every user and role that names them (mongod does the same), and
/// delete the role documents `delete`.
fn remove_roles(
    state: &ServerState,
    gone: &[Name],
    delete: Vec<u64>,
) -> CommandResult<Vec<storage::Ticket>> {
    let mut tickets = Vec::new();
    for coll in [USERS, ROLES] {
        let holders = store::list(state, coll, &|d| {
            store::roles_of(d).iter().any(|r| gone.contains(r))
        })?;
        let replace: Vec<(u64, Document)> = holders
            .into_iter()
            .filter(|(rid, _)| coll != ROLES || !delete.contains(rid))
            .map(|(rid, mut d)| {
                let kept: Vec<Name> = store::roles_of(&d)
                    .into_iter()
                    .filter(|r| !gone.contains(r))
                    .collect();
                d.insert("roles", roles_bson(&kept));
                (rid, d)
            })
            .collect();
        let del = if coll == ROLES {
            delete.clone()
        } else {
            Vec::new()
        };
        tickets.extend(store::write(state, coll, replace, del)?);
    }
    Ok(tickets)
}

pub async fn drop_role(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    check_args(&req.body, "dropRole")?;
    let role = Name::new(&name_arg(&req.body, "dropRole")?, &req.db);
    check_not_builtin(&role)?;
    let _lock = write_lock(state).await;
    let tickets = blocking(state, move |s| {
        let Some((rid, _)) = store::get_with_id(s, ROLES, &role)? else {
            return Err(role_not_found(&role));
        };
        remove_roles(s, std::slice::from_ref(&role), vec![rid])
    })
    .await?;
    committed(state, req, tickets).await?;
    Ok(Reply::ok())
}

pub async fn drop_all_roles(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    check_args(&req.body, "dropAllRolesFromDatabase")?;
    let db = req.db.clone();
    let _lock = write_lock(state).await;
    let (n, tickets) = blocking(state, move |s| {
        let found = store::list(s, ROLES, &|d| d.get_str("db").ok() == Some(db.as_str()))?;
        let names: Vec<Name> = found
            .iter()
            .filter_map(|(_, d)| Some(Name::new(d.get_str("role").ok()?, &db)))
            .collect();
        let rids = found.iter().map(|(rid, _)| *rid).collect();
        Ok((names.len(), remove_roles(s, &names, rids)?))
    })
    .await?;
    committed(state, req, tickets).await?;
    Ok(Reply::Doc(doc! { "n": n as i32, "ok": 1.0 }))
}

/// `grantPrivilegesToRole` (`grant`) and `revokePrivilegesFromRole`.
pub async fn change_role_privileges(
    state: &Arc<ServerState>,
    req: &Request,
    grant: bool,
) -> CommandResult<Reply> {
    let command = if grant {
        "grantPrivilegesToRole"
    } else {
        "revokePrivilegesFromRole"
    };
    check_args(&req.body, command)?;
    let role = Name::new(&name_arg(&req.body, command)?, &req.db);
    check_not_builtin(&role)?;
    let change = privilege_list(&req.body, command, &req.db)?
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            bad(format!(
                "{command} command requires a non-empty \"privileges\" array"
            ))
        })?;
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        let Some((rid, d)) = store::get_with_id(s, ROLES, &role)? else {
            return Err(role_not_found(&role));
        };
        let mut privileges = merged(store::privileges_of(&d));
        for p in &change {
            if grant {
                privileges.add(p.clone());
            } else {
                privileges.remove(p);
            }
        }
        let roles = store::roles_of(&d);
        store::write(
            s,
            ROLES,
            vec![(rid, role_document(&role, &privileges, &roles))],
            vec![],
        )
    })
    .await?;
    committed(state, req, ticket.into_iter().collect()).await?;
    Ok(Reply::ok())
}

/// `grantRolesToRole` (`grant`) and `revokeRolesFromRole`.
pub async fn change_role_roles(
    state: &Arc<ServerState>,
    req: &Request,
    grant: bool,
) -> CommandResult<Reply> {
    let command = if grant {
        "grantRolesToRole"
    } else {
        "revokeRolesFromRole"
    };
    check_args(&req.body, command)?;
    let role = Name::new(&name_arg(&req.body, command)?, &req.db);
    check_not_builtin(&role)?;
    let change = role_list(&req.body, command, &req.db)?
        .filter(|r| !r.is_empty())
        .ok_or_else(|| {
            bad(format!(
                "\"{command}\" command requires a non-empty \"roles\" array"
            ))
        })?;
    check_role_scope(&req.db, &change)?;
    let _lock = write_lock(state).await;
    let ticket = blocking(state, move |s| {
        let Some((rid, d)) = store::get_with_id(s, ROLES, &role)? else {
            return Err(role_not_found(&role));
        };
        let mut roles = store::roles_of(&d);
        if grant {
            check_roles_exist(s, &change)?;
            check_no_cycle(s, &role, &change)?;
            for r in change {
                if !roles.contains(&r) {
                    roles.push(r);
                }
            }
        } else {
            roles.retain(|r| !change.contains(r));
        }
        let privileges = merged(store::privileges_of(&d));
        store::write(
            s,
            ROLES,
            vec![(rid, role_document(&role, &privileges, &roles))],
            vec![],
        )
    })
    .await?;
    committed(state, req, ticket.into_iter().collect()).await?;
    Ok(Reply::ok())
}

pub async fn roles_info(state: &Arc<ServerState>, req: &Request) -> CommandResult<Reply> {
    let b = req.body.clone();
    check_args(&b, "rolesInfo")?;
    let db = req.db.clone();
    let named: Option<Vec<Name>> = match b.get("rolesInfo").unwrap_or(&Bson::Null) {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => None,
        Bson::Array(items) => Some(
            items
                .iter()
                .map(|r| Name::parse_role(r, &db))
                .collect::<CommandResult<_>>()?,
        ),
        v => Some(vec![Name::parse_role(v, &db)?]),
    };
    let show_privileges = b.get("showPrivileges").is_some_and(truthy);
    let show_builtin = b.get("showBuiltinRoles").is_some_and(truthy);
    let roles = blocking(state, move |s| {
        let mut list: Vec<(Name, Option<Document>)> = Vec::new();
        match named {
            Some(names) => {
                for n in names {
                    if builtin::is_builtin(&n.name, &n.db) {
                        list.push((n, None));
                    } else if let Some(d) = store::get_role(s, &n)? {
                        list.push((n, Some(d)));
                    }
                }
            }
            None => {
                if show_builtin {
                    let mut names: Vec<&str> = builtin::DATABASE_ROLES.to_vec();
                    if db == AUTH_DB {
                        names.extend(builtin::ADMIN_ROLES);
                    }
                    names.sort();
                    list.extend(names.into_iter().map(|n| (Name::new(n, &db), None)));
                }
                let mut stored =
                    store::list(s, ROLES, &|d| d.get_str("db").ok() == Some(db.as_str()))?;
                stored.sort_by(|a, b| a.1.get_str("role").ok().cmp(&b.1.get_str("role").ok()));
                for (_, d) in stored {
                    if let Ok(n) = d.get_str("role") {
                        list.push((Name::new(n, &db), Some(d)));
                    }
                }
            }
        }
        list.into_iter()
            .map(|(n, d)| role_info(s, &n, d.as_ref(), show_privileges).map(Bson::Document))
            .collect::<CommandResult<Vec<_>>>()
    })
    .await?;
    Ok(Reply::Doc(doc! { "roles": roles, "ok": 1.0 }))
}

/// One `rolesInfo` entry in mongod's shape (`d`: the stored document of a user-defined role).
fn role_info(
    state: &ServerState,
    role: &Name,
    d: Option<&Document>,
    show_privileges: bool,
) -> CommandResult<Document> {
    let direct = d.map(store::roles_of).unwrap_or_default();
    let own: Privileges = match d {
        Some(d) => merged(store::privileges_of(d)),
        None => merged(builtin::privileges(&role.name, &role.db).unwrap_or_default()),
    };
    let resolved = store::resolve(state, std::slice::from_ref(role))?;
    let inherited: Vec<Bson> = resolved
        .roles
        .iter()
        .filter(|r| *r != role)
        .map(|r| Bson::Document(r.role_document()))
        .collect();
    let mut out = Document::new();
    if d.is_some() {
        out.insert("_id", role.id());
    }
    out.insert("role", &role.name);
    out.insert("db", &role.db);
    out.insert("isBuiltin", d.is_none());
    out.insert("roles", roles_bson(&direct));
    out.insert("inheritedRoles", inherited);
    if show_privileges {
        out.insert("privileges", own.to_bson());
        out.insert("inheritedPrivileges", resolved.privileges.to_bson());
    }
    Ok(out)
}
