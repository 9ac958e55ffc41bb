//! The user and role management commands' tables, from mongod's
//! `user_management_commands.idl`: all strict, each naming its user or role as a string
//! (`usersInfo`/`rolesInfo` take several shapes, the handler's). A role list is
//! `array<RoleNameOrString>` (its elements are the handler's), a privilege list
//! `array<ParsedPrivilege>`.

use super::{CommandResult, CommandSpec, Field, Ty, opt, req};
use crate::error::{ErrorCode, err};

/// A user-management command taking its user or role by name.
const fn named(name: &'static str, fields: &'static [Field]) -> CommandSpec {
    CommandSpec {
        name,
        fields,
        strict: true,
        target: Some(Ty::String),
    }
}

const USER_FIELDS: [Field; 6] = [
    opt("pwd", Ty::String),
    opt("customData", Ty::Object),
    opt("roles", Ty::Array),
    opt("digestPassword", Ty::SafeBool),
    opt("authenticationRestrictions", Ty::ObjectArray),
    opt("mechanisms", Ty::StringArray),
];

const CREATE_USER_FIELDS: [Field; 6] = [
    opt("pwd", Ty::String),
    opt("customData", Ty::Object),
    req("roles", Ty::Array),
    opt("digestPassword", Ty::SafeBool),
    opt("authenticationRestrictions", Ty::ObjectArray),
    opt("mechanisms", Ty::StringArray),
];

const ROLES: &[Field] = &[req("roles", Ty::Array)];
const PRIVILEGES: &[Field] = &[req("privileges", Ty::ObjectArray)];

pub static TABLES: &[CommandSpec] = &[
    named("createUser", &CREATE_USER_FIELDS),
    named("updateUser", &USER_FIELDS),
    named("dropUser", &[]),
    CommandSpec {
        name: "dropAllUsersFromDatabase",
        fields: &[],
        strict: true,
        target: None,
    },
    named("grantRolesToUser", ROLES),
    named("revokeRolesFromUser", ROLES),
    named(
        "createRole",
        &[
            req("privileges", Ty::ObjectArray),
            req("roles", Ty::Array),
            opt("authenticationRestrictions", Ty::ObjectArray),
        ],
    ),
    named(
        "updateRole",
        &[
            opt("privileges", Ty::ObjectArray),
            opt("roles", Ty::Array),
            opt("authenticationRestrictions", Ty::ObjectArray),
        ],
    ),
    named("grantPrivilegesToRole", PRIVILEGES),
    named("revokePrivilegesFromRole", PRIVILEGES),
    named("grantRolesToRole", ROLES),
    named("revokeRolesFromRole", ROLES),
    named("dropRole", &[]),
    CommandSpec {
        name: "dropAllRolesFromDatabase",
        fields: &[],
        strict: true,
        target: None,
    },
    CommandSpec {
        name: "usersInfo",
        fields: &[
            opt("showPrivileges", Ty::SafeBool),
            opt("showCredentials", Ty::SafeBool),
            opt("showAuthenticationRestrictions", Ty::SafeBool),
            opt("showCustomData", Ty::SafeBool),
            opt("authenticatedMechanism", Ty::String),
            opt("filter", Ty::Object),
        ],
        strict: true,
        target: None,
    },
    CommandSpec {
        name: "rolesInfo",
        fields: &[
            // A bool or "asUserFragment".
            opt("showPrivileges", Ty::Any),
            opt("showBuiltinRoles", Ty::SafeBool),
            opt("showAuthenticationRestrictions", Ty::SafeBool),
        ],
        strict: true,
        target: None,
    },
];

/// Check `body` against the table of `command`.
pub fn check(body: &bson::Document, command: &str) -> CommandResult<()> {
    let Some(spec) = TABLES.iter().find(|t| t.name == command) else {
        return Err(err(
            ErrorCode::InternalError,
            format!("no argument table for {command}"),
        ));
    };
    super::check(spec, body)
}
