//! Authorization: one rule per command, in one table next to the command table (`RULES`; a test
//! fails when a command has no rule or a rule no command), and the one check `dispatch` runs
//! before every handler under `--auth`. A rule names actions on a target: the cluster, the
//! request's database, the collection the command names, or targets worked out from the body
//! (writes with upserts, pipelines with `$lookup`/`$out`, user and role management, `explain`).
//! Denied: `Unauthorized` (13) with mongod's messages — "command X requires authentication"
//! before login, "not authorized on DB to execute command {...}" after (passwords redacted).
//! Also here: what some commands need after they ran (`finish`): `listDatabases` shows a user
//! only the databases they have privileges on, and drops that touch `admin` invalidate cached
//! privileges.

use super::{CommandSpec, ConnectionInfo, Reply, Request, Sequence, lookup, truthy};
use crate::auth::privilege::Target;
use crate::auth::store::{self, Name};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::limits;
use crate::state::ServerState;
use bson::{Bson, Document};
use std::sync::Arc;

/// What a command needs.
#[derive(Clone, Copy)]
pub enum Rule {
    /// Anyone, logged in or not (the handshake, authentication itself, `ping`, `buildInfo`).
    Open,
    /// Any authenticated user; the command shows each user only what is theirs.
    Authenticated,
    Cluster(&'static [&'static str]),
    /// Actions on the request's database.
    Database(&'static [&'static str]),
    /// Actions on the collection named by the command's first field (the database when that
    /// field is not a collection name).
    Collection(&'static [&'static str]),
    /// Worked out from the body: `(db, body, sequences)` to what is needed.
    Custom(fn(&str, &Document, &[Sequence]) -> Vec<Need>),
}

/// Actions needed on one target.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    pub target: Target,
    pub actions: Vec<&'static str>,
}

impl Need {
    fn on(target: Target, actions: &[&'static str]) -> Need {
        Need {
            target,
            actions: actions.to_vec(),
        }
    }

    fn db(db: &str, actions: &[&'static str]) -> Need {
        Need::on(Target::Database(db.to_string()), actions)
    }

    fn coll(db: &str, coll: &str, actions: &[&'static str]) -> Need {
        Need::on(
            Target::Collection(db.to_string(), coll.to_string()),
            actions,
        )
    }
}

use Rule::*;

/// The rule of every command in `COMMANDS`, by canonical name.
pub const RULES: &[(&str, Rule)] = &[
    ("hello", Open),
    ("isMaster", Open),
    ("ping", Open),
    ("buildInfo", Open),
    ("getParameter", Cluster(&["getParameter"])),
    ("setParameter", Cluster(&["setParameter"])),
    ("getCmdLineOpts", Cluster(&["getCmdLineOpts"])),
    ("hostInfo", Cluster(&["hostInfo"])),
    ("serverStatus", Cluster(&["serverStatus"])),
    ("whatsmyuri", Open),
    ("connectionStatus", Open),
    ("listCommands", Open),
    ("startSession", Open),
    ("endSessions", Open),
    ("commitTransaction", Open),
    ("abortTransaction", Open),
    ("refreshSessions", Open),
    ("killSessions", Authenticated),
    ("killAllSessions", Cluster(&["killAnySession"])),
    ("killAllSessionsByPattern", Cluster(&["killAnySession"])),
    ("getLog", Cluster(&["getLog"])),
    ("logRotate", Cluster(&["logRotate"])),
    ("shutdown", Cluster(&["shutdown"])),
    ("profile", Database(&["enableProfiler"])),
    ("listDatabases", Authenticated),
    ("insert", Custom(insert)),
    ("update", Custom(update)),
    ("delete", Collection(&["remove"])),
    ("bulkWrite", Custom(bulk_write)),
    ("findAndModify", Custom(find_and_modify)),
    ("find", Collection(&["find"])),
    ("getMore", Custom(get_more)),
    ("killCursors", Collection(&["killCursors"])),
    ("count", Collection(&["find"])),
    ("distinct", Collection(&["find"])),
    ("create", Collection(&["createCollection"])),
    ("drop", Collection(&["dropCollection"])),
    ("dropDatabase", Database(&["dropDatabase"])),
    ("listCollections", Custom(list_collections)),
    ("renameCollection", Custom(rename_collection)),
    ("convertToCapped", Collection(&["convertToCapped"])),
    (
        "cloneCollectionAsCapped",
        Collection(&["find", "insert", "createCollection"]),
    ),
    ("collMod", Collection(&["collMod"])),
    ("dbStats", Database(&["dbStats"])),
    ("collStats", Collection(&["collStats"])),
    ("validate", Collection(&["validate"])),
    ("createIndexes", Collection(&["createIndex"])),
    ("listIndexes", Collection(&["listIndexes"])),
    ("dropIndexes", Collection(&["dropIndex"])),
    ("currentOp", Cluster(&["inprog"])),
    ("killOp", Cluster(&["killop"])),
    ("aggregate", Custom(aggregate)),
    ("mapReduce", Custom(map_reduce)),
    ("explain", Custom(explain)),
    (
        "getFreeMonitoringStatus",
        Cluster(&["checkFreeMonitoringStatus"]),
    ),
    ("fsync", Cluster(&["fsync"])),
    ("replSetInitiate", Cluster(&["replSetConfigure"])),
    ("replSetReconfig", Cluster(&["replSetConfigure"])),
    ("replSetGetStatus", Cluster(&["replSetGetStatus"])),
    ("replSetGetConfig", Cluster(&["replSetGetConfig"])),
    ("fsyncUnlock", Cluster(&["unlock"])),
    ("dataSize", Custom(data_size)),
    ("compact", Collection(&["compact"])),
    ("autoCompact", Cluster(&["compact"])),
    (
        "validateDBMetadata",
        Database(&["listCollections", "listIndexes"]),
    ),
    ("top", Cluster(&["top"])),
    ("lockInfo", Cluster(&["serverStatus"])),
    ("connPoolStats", Cluster(&["connPoolStats"])),
    ("planCacheClear", Collection(&["planCacheWrite"])),
    (
        "planCacheClearFilters",
        Collection(&["planCacheIndexFilter"]),
    ),
    (
        "planCacheListFilters",
        Collection(&["planCacheIndexFilter"]),
    ),
    ("planCacheSetFilter", Collection(&["planCacheIndexFilter"])),
    ("getClusterParameter", Cluster(&["getClusterParameter"])),
    ("setClusterParameter", Cluster(&["setClusterParameter"])),
    // mongod's own `querySettings` action is granted with these (clusterManager).
    ("setQuerySettings", Cluster(&["setClusterParameter"])),
    ("removeQuerySettings", Cluster(&["setClusterParameter"])),
    ("getDefaultRWConcern", Cluster(&["getDefaultRWConcern"])),
    ("setDefaultRWConcern", Cluster(&["setDefaultRWConcern"])),
    // mongod gates fail points on internal privileges; cairn lets those who may set parameters.
    ("configureFailPoint", Cluster(&["setParameter"])),
    ("waitForFailPoint", Cluster(&["setParameter"])),
    // A test command; mongod checks nothing either.
    ("refreshLogicalSessionCacheNow", Open),
    ("logout", Open),
    ("saslStart", Open),
    ("saslContinue", Open),
    ("authenticate", Open),
    ("createUser", Custom(create_user)),
    ("updateUser", Custom(update_user)),
    ("dropUser", Database(&["dropUser"])),
    ("dropAllUsersFromDatabase", Database(&["dropUser"])),
    ("usersInfo", Custom(users_info)),
    ("grantRolesToUser", Custom(grant_roles)),
    ("revokeRolesFromUser", Custom(revoke_roles)),
    ("createRole", Custom(create_role)),
    ("updateRole", Custom(update_role)),
    ("dropRole", Database(&["dropRole"])),
    ("dropAllRolesFromDatabase", Database(&["dropRole"])),
    ("rolesInfo", Custom(roles_info)),
    ("grantPrivilegesToRole", Database(&["grantRole"])),
    ("revokePrivilegesFromRole", Database(&["revokeRole"])),
    ("grantRolesToRole", Custom(grant_roles)),
    ("revokeRolesFromRole", Custom(revoke_roles)),
];

/// The rule of a command (None only for a command missing from `RULES`, which a test forbids).
pub fn rule_of(command: &str) -> Option<Rule> {
    RULES.iter().find(|(n, _)| *n == command).map(|(_, r)| *r)
}

/// Whether a command needs a login under `--auth` (`listCommands.requiresAuth`).
pub fn requires_auth(command: &str) -> bool {
    !matches!(rule_of(command), Some(Open))
}

/// What `command` needs when run on `db` with `body`; empty for `Open` and `Authenticated`.
fn needs(rule: Rule, command: &str, db: &str, body: &Document, seqs: &[Sequence]) -> Vec<Need> {
    match rule {
        Open | Authenticated => Vec::new(),
        Cluster(a) => vec![Need::on(Target::Cluster, a)],
        Database(a) => vec![Need::db(db, a)],
        Collection(a) => vec![named(db, body, command, a)],
        Custom(f) => f(db, body, seqs),
    }
}

/// The collection a command names in its first field, or its database when there is none.
fn named(db: &str, body: &Document, command: &str, actions: &[&'static str]) -> Need {
    match body
        .get(command)
        .or_else(|| body.iter().next().map(|(_, v)| v))
    {
        Some(Bson::String(c)) if !c.is_empty() => Need::coll(db, c, actions),
        _ => Need::db(db, actions),
    }
}

fn first_name(body: &Document) -> &str {
    body.keys().next().map_or("", String::as_str)
}

fn insert(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    let mut a = vec!["insert"];
    if body.get("bypassDocumentValidation").is_some_and(truthy) {
        a.push("bypassDocumentValidation");
    }
    vec![named(db, body, first_name(body), &a)]
}

fn update(db: &str, body: &Document, seqs: &[Sequence]) -> Vec<Need> {
    let in_body = body
        .get_array("updates")
        .map(|u| {
            u.iter().any(|s| {
                s.as_document()
                    .and_then(|d| d.get("upsert"))
                    .is_some_and(truthy)
            })
        })
        .unwrap_or(false);
    let in_seq = seqs.iter().filter(|s| s.identifier == "updates").any(|s| {
        s.documents.iter().any(|d| {
            d.get("upsert")
                .ok()
                .flatten()
                .and_then(|v| v.as_bool())
                .unwrap_or(false)
        })
    });
    let mut a = vec!["update"];
    if in_body || in_seq {
        a.push("insert");
    }
    if body.get("bypassDocumentValidation").is_some_and(truthy) {
        a.push("bypassDocumentValidation");
    }
    vec![named(db, body, first_name(body), &a)]
}

/// `bulkWrite`: per op, its action on the namespace its `nsInfo` index names (ops and nsInfo
/// from the body or from document sequences). An op naming no namespace needs nothing here;
/// the handler refuses it.
fn bulk_write(_: &str, body: &Document, seqs: &[Sequence]) -> Vec<Need> {
    let list = |field: &str| -> Vec<Document> {
        let mut out: Vec<Document> = seqs
            .iter()
            .filter(|s| s.identifier == field)
            .flat_map(|s| s.documents.iter())
            .filter_map(|d| Document::try_from(d.as_ref()).ok())
            .collect();
        if let Ok(a) = body.get_array(field) {
            out.extend(a.iter().filter_map(|v| v.as_document().cloned()));
        }
        out
    };
    let namespaces: Vec<String> = list("nsInfo")
        .iter()
        .map(|d| d.get_str("ns").unwrap_or("").to_string())
        .collect();
    let mut needs = Vec::new();
    for op in list("ops") {
        let Some((kind, index)) = op.iter().next() else {
            continue;
        };
        let Some(ns) = super::as_i64(index)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| namespaces.get(i))
        else {
            continue;
        };
        let (db, coll) = ns.split_once('.').unwrap_or((ns, ""));
        let mut actions = match kind.as_str() {
            "insert" => vec!["insert"],
            "update" if op.get("upsert").is_some_and(truthy) => vec!["update", "insert"],
            "update" => vec!["update"],
            "delete" => vec!["remove"],
            _ => continue,
        };
        if body.get("bypassDocumentValidation").is_some_and(truthy) {
            actions.push("bypassDocumentValidation");
        }
        needs.push(Need::coll(db, coll, &actions));
    }
    needs
}

/// `dataSize` names its namespace in full ("db.coll"); it needs `find` there.
fn data_size(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    match body
        .get_str("dataSize")
        .ok()
        .and_then(|ns| ns.split_once('.'))
    {
        Some((d, c)) => vec![Need::coll(d, c, &["find"])],
        None => vec![Need::db(db, &["find"])],
    }
}

fn find_and_modify(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    let mut a = vec!["find"];
    if body.get("remove").is_some_and(truthy) {
        a.push("remove");
    } else {
        a.push("update");
        if body.get("upsert").is_some_and(truthy) {
            a.push("insert");
        }
    }
    if body.get("bypassDocumentValidation").is_some_and(truthy) {
        a.push("bypassDocumentValidation");
    }
    vec![named(db, body, first_name(body), &a)]
}

fn get_more(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    match body.get_str("collection") {
        Ok(c) => vec![Need::coll(db, c, &["find"])],
        Err(_) => vec![Need::db(db, &["find"])],
    }
}

fn list_collections(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    let own = body.get("authorizedCollections").is_some_and(truthy)
        && body.get("nameOnly").is_some_and(truthy);
    if own {
        Vec::new()
    } else {
        vec![Need::db(db, &["listCollections"])]
    }
}

/// `db.coll` split at the first dot.
fn split_ns(ns: &str) -> Option<(&str, &str)> {
    ns.split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
}

fn rename_collection(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    let from = body.get_str("renameCollection").ok().and_then(split_ns);
    let to = body.get_str("to").ok().and_then(split_ns);
    let (Some((fd, fc)), Some((td, tc))) = (from, to) else {
        return vec![Need::db(db, &["renameCollectionSameDB"])];
    };
    if fd == td {
        return vec![
            Need::coll(fd, fc, &["renameCollectionSameDB"]),
            Need::coll(td, tc, &["renameCollectionSameDB"]),
        ];
    }
    vec![
        Need::coll(fd, fc, &["find", "dropCollection"]),
        Need::coll(td, tc, &["insert", "createIndex", "createCollection"]),
    ]
}

/// Most nested pipelines (`$lookup`, `$unionWith`, `$facet`) walked for their namespaces.
const PIPELINE_DEPTH_MAX: usize = 20;

/// `mapReduce` reads its collection; `out` to a collection writes there (`out.db` may name
/// another database).
fn map_reduce(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    let mut out = Vec::new();
    if let Some((_, Bson::String(c))) = body.iter().next() {
        out.push(Need::coll(db, c, &["find"]));
    }
    let target = match body.get("out") {
        Some(Bson::String(c)) => Some((db.to_string(), c.clone(), "replace")),
        Some(Bson::Document(o)) => ["replace", "merge", "reduce"].iter().find_map(|m| {
            let c = o.get_str(m).ok()?;
            let d = o.get_str("db").unwrap_or(db);
            Some((d.to_string(), c.to_string(), *m))
        }),
        _ => None,
    };
    if let Some((d, c, mode)) = target {
        let second = if mode == "replace" {
            "remove"
        } else {
            "update"
        };
        out.push(Need::coll(&d, &c, &["insert", second]));
    }
    out
}

fn aggregate(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    let mut out = Vec::new();
    let stages = body.get_array("pipeline").map(Vec::as_slice).unwrap_or(&[]);
    let first_stage = stages
        .first()
        .and_then(Bson::as_document)
        .and_then(|s| s.keys().next())
        .map(String::as_str);
    let read = match first_stage {
        Some("$collStats") => "collStats",
        Some("$indexStats") => "indexStats",
        Some("$planCacheStats") => "planCacheRead",
        _ => "find",
    };
    // Otherwise `aggregate: 1`: a database-level pipeline ($documents, $currentOp, ...).
    if let Some(Bson::String(c)) = body.get("aggregate") {
        out.push(Need::coll(db, c, &[read]));
    }
    let bypass = body.get("bypassDocumentValidation").is_some_and(truthy);
    pipeline_needs(db, stages, bypass, 0, &mut out);
    out
}

/// `"coll"` or `{db, coll}` as `$out`, `$merge.into`, `$lookup.from` and `$unionWith` take it.
fn stage_ns(db: &str, v: &Bson) -> Option<(String, String)> {
    match v {
        Bson::String(c) => Some((db.to_string(), c.clone())),
        Bson::Document(d) => Some((
            d.get_str("db").unwrap_or(db).to_string(),
            d.get_str("coll").ok()?.to_string(),
        )),
        _ => None,
    }
}

fn pipeline_needs(db: &str, stages: &[Bson], bypass: bool, depth: usize, out: &mut Vec<Need>) {
    if depth > PIPELINE_DEPTH_MAX {
        return;
    }
    for stage in stages.iter().filter_map(Bson::as_document) {
        let Some((name, spec)) = stage.iter().next() else {
            continue;
        };
        let spec_doc = spec.as_document();
        let sub = |key: &str| {
            spec_doc
                .and_then(|d| d.get_array(key).ok())
                .map(Vec::as_slice)
                .unwrap_or(&[])
        };
        let mut write = |ns: Option<(String, String)>, actions: &[&'static str]| {
            if let Some((d, c)) = ns {
                let mut a = actions.to_vec();
                if bypass {
                    a.push("bypassDocumentValidation");
                }
                out.push(Need::coll(&d, &c, &a));
            }
        };
        match name.as_str() {
            "$out" => write(stage_ns(db, spec), &["insert", "remove"]),
            "$merge" => {
                let into = spec_doc.and_then(|d| d.get("into")).unwrap_or(spec);
                write(stage_ns(db, into), &["insert", "update"]);
            }
            "$lookup" | "$graphLookup" => {
                if let Some((d, c)) = spec_doc
                    .and_then(|s| s.get("from"))
                    .and_then(|f| stage_ns(db, f))
                {
                    out.push(Need::coll(&d, &c, &["find"]));
                }
                pipeline_needs(db, sub("pipeline"), bypass, depth + 1, out);
            }
            "$unionWith" => {
                let coll = spec_doc.and_then(|d| d.get("coll")).unwrap_or(spec);
                if let Some((d, c)) = stage_ns(db, coll) {
                    out.push(Need::coll(&d, &c, &["find"]));
                }
                pipeline_needs(db, sub("pipeline"), bypass, depth + 1, out);
            }
            "$facet" => {
                for (_, p) in spec_doc.into_iter().flatten() {
                    if let Bson::Array(p) = p {
                        pipeline_needs(db, p, bypass, depth + 1, out);
                    }
                }
            }
            "$currentOp" => out.push(Need::on(Target::Cluster, &["inprog"])),
            "$queryStats" => out.push(Need::on(Target::Cluster, &["queryStatsRead"])),
            // mongod's `querySettings` action comes with clusterManager, as this one does.
            "$querySettings" => out.push(Need::on(Target::Cluster, &["getClusterParameter"])),
            "$listSessions" | "$listLocalSessions"
                if spec_doc.and_then(|d| d.get("allUsers")).is_some_and(truthy) =>
            {
                out.push(Need::on(Target::Cluster, &["listSessions"]));
            }
            "$changeStream" => out.push(Need::db(db, &["changeStream"])),
            _ => {}
        }
    }
}

fn explain(db: &str, body: &Document, seqs: &[Sequence]) -> Vec<Need> {
    let Ok(inner) = body.get_document("explain") else {
        return vec![Need::db(db, &["find"])];
    };
    let name = first_name(inner);
    match lookup(name) {
        // An explain of an explain, or of an unknown command: the handler refuses it anyway.
        Some(spec) if spec.name != "explain" => match rule_of(spec.name) {
            Some(rule) => needs(rule, name, db, inner, seqs),
            None => vec![Need::db(db, &["find"])],
        },
        _ => vec![Need::db(db, &["find"])],
    }
}

/// The databases of the roles a body lists under `field`.
fn role_dbs(db: &str, body: &Document, field: &str) -> Vec<String> {
    let mut dbs: Vec<String> = body
        .get_array(field)
        .map(|roles| {
            roles
                .iter()
                .filter_map(|r| Name::parse_role(r, db).ok())
                .map(|r| r.db)
                .collect()
        })
        .unwrap_or_default();
    dbs.sort();
    dbs.dedup();
    dbs
}

fn with_role_dbs(
    mut out: Vec<Need>,
    db: &str,
    body: &Document,
    field: &str,
    action: &'static str,
) -> Vec<Need> {
    out.extend(
        role_dbs(db, body, field)
            .iter()
            .map(|d| Need::db(d, &[action])),
    );
    out
}

fn create_user(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    with_role_dbs(
        vec![Need::db(db, &["createUser"])],
        db,
        body,
        "roles",
        "grantRole",
    )
}

fn update_user(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    let mut a = Vec::new();
    if body.contains_key("pwd") || body.contains_key("mechanisms") {
        a.push("changePassword");
    }
    if body.contains_key("customData") {
        a.push("changeCustomData");
    }
    if body.contains_key("roles") {
        a.extend(["grantRole", "revokeRole"]);
    }
    if a.is_empty() {
        a.push("changePassword");
    }
    let out = vec![Need::db(db, &a)];
    with_role_dbs(out, db, body, "roles", "grantRole")
}

fn grant_roles(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    with_role_dbs(Vec::new(), db, body, "roles", "grantRole")
}

fn revoke_roles(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    with_role_dbs(Vec::new(), db, body, "roles", "revokeRole")
}

fn create_role(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    with_role_dbs(
        vec![Need::db(db, &["createRole"])],
        db,
        body,
        "roles",
        "grantRole",
    )
}

fn update_role(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    with_role_dbs(
        vec![Need::db(db, &["grantRole", "revokeRole"])],
        db,
        body,
        "roles",
        "grantRole",
    )
}

/// The names `usersInfo` / `rolesInfo` ask about: `Some(list)` for explicit names, None for
/// "all of this database" (`1`) or of every database (`forAllDBs`).
fn asked_names(db: &str, v: Option<&Bson>, user: bool) -> Option<Vec<Name>> {
    let parse = |v: &Bson| {
        if user {
            Name::parse_user(v, db).ok()
        } else {
            Name::parse_role(v, db).ok()
        }
    };
    match v? {
        Bson::Array(items) => items.iter().map(parse).collect(),
        Bson::Document(d) if d.contains_key("forAllDBs") => None,
        v @ (Bson::String(_) | Bson::Document(_)) => parse(v).map(|n| vec![n]),
        _ => None,
    }
}

fn info_needs(db: &str, v: Option<&Bson>, user: bool) -> Vec<Need> {
    let action: &'static str = if user { "viewUser" } else { "viewRole" };
    match (asked_names(db, v, user), v) {
        (Some(names), _) => {
            let mut dbs: Vec<&str> = names.iter().map(|n| n.db.as_str()).collect();
            dbs.sort();
            dbs.dedup();
            dbs.into_iter().map(|d| Need::db(d, &[action])).collect()
        }
        (None, Some(Bson::Document(_))) => vec![Need::on(Target::Cluster, &[action])],
        (None, _) => vec![Need::db(db, &[action])],
    }
}

fn users_info(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    info_needs(db, body.get("usersInfo"), true)
}

fn roles_info(db: &str, body: &Document, _: &[Sequence]) -> Vec<Need> {
    info_needs(db, body.get("rolesInfo"), false)
}

/// `usersInfo` about oneself and `rolesInfo` about one's own roles need no privilege.
fn about_oneself(conn: &ConnectionInfo, command: &str, req: &Request) -> bool {
    let session = &conn.auth;
    match command {
        "usersInfo" => asked_names(&req.db, req.body.get("usersInfo"), true)
            .is_some_and(|names| names.iter().all(|n| Some(n) == session.user())),
        "rolesInfo" => asked_names(&req.db, req.body.get("rolesInfo"), false)
            .is_some_and(|names| names.iter().all(|n| session.roles().any(|r| r == n))),
        _ => false,
    }
}

fn unauthorized(message: String) -> CommandError {
    err(ErrorCode::Unauthorized, message)
}

/// The check `dispatch` runs before every handler.
pub async fn check(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    spec: &CommandSpec,
    req: &Request,
) -> CommandResult<()> {
    if !state.auth.enabled() {
        return Ok(());
    }
    let Some(rule) = rule_of(spec.name) else {
        return Err(unauthorized(format!(
            "command {} has no authorization rule",
            spec.name
        )));
    };
    if matches!(rule, Open) {
        return Ok(());
    }
    conn.auth.refresh(state).await?;
    if !conn.auth.is_authenticated() {
        if matches!(spec.name, "createUser" | "createRole")
            && localhost_exception(state, conn).await?
        {
            return Ok(());
        }
        return Err(unauthorized(format!(
            "command {} requires authentication",
            spec.name
        )));
    }
    if about_oneself(conn, spec.name, req) {
        return Ok(());
    }
    let privileges = conn.auth.privileges();
    for need in needs(rule, &req.name, &req.db, &req.body, &req.sequences) {
        if !need
            .actions
            .iter()
            .all(|a| privileges.allows(&need.target, a))
        {
            return Err(unauthorized(format!(
                "not authorized on {} to execute command {}",
                req.db,
                command_text(&req.name, &req.body)
            )));
        }
    }
    Ok(())
}

/// The localhost exception: with `enableLocalhostAuthBypass` (the default), a connection from
/// a loopback address may create the first user or role while none exists.
async fn localhost_exception(
    state: &Arc<ServerState>,
    conn: &ConnectionInfo,
) -> CommandResult<bool> {
    if !state.params.get_bool("enableLocalhostAuthBypass") || !conn.peer.ip().is_loopback() {
        return Ok(false);
    }
    crate::auth::blocking(state, |s| Ok(store::is_empty(s))).await
}

/// What some commands need after their handler ran.
pub async fn finish(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    command: &str,
    req: &Request,
    result: CommandResult<Reply>,
) -> CommandResult<Reply> {
    let mut reply = result?;
    match (command, &mut reply) {
        ("hello" | "isMaster", Reply::Doc(d)) => {
            super::auth::hello_extras(state, conn, req, d).await?;
        }
        ("listDatabases", Reply::Doc(d)) if state.auth.enabled() => {
            filter_databases(conn, d);
        }
        ("drop" | "dropDatabase" | "renameCollection", _) if req.db == store::AUTH_DB => {
            // Users and roles may have gone with the collection or the database.
            state.auth.invalidate();
        }
        _ => {}
    }
    Ok(reply)
}

/// A user without `listDatabases` on the cluster sees the databases they have privileges on.
fn filter_databases(conn: &ConnectionInfo, reply: &mut Document) {
    let privileges = conn.auth.privileges();
    if privileges.allows(&Target::Cluster, "listDatabases") {
        return;
    }
    let Ok(dbs) = reply.get_array_mut("databases") else {
        return;
    };
    dbs.retain(|d| {
        d.as_document()
            .and_then(|d| d.get_str("name").ok())
            .is_some_and(|name| privileges.mentions_db(name))
    });
    let total: i64 = dbs
        .iter()
        .filter_map(|d| d.as_document()?.get("sizeOnDisk").and_then(super::as_i64))
        .sum();
    if reply.contains_key("totalSize") {
        reply.insert("totalSize", total as f64);
    }
}

/// Fields whose values are secrets, per command.
fn redacted(command: &str, field: &str) -> bool {
    matches!(
        (command, field),
        ("createUser" | "updateUser", "pwd") | ("saslStart" | "saslContinue", "payload")
    )
}

/// The command as mongod prints it in "not authorized" messages (shell syntax, secrets
/// replaced by "xxx", cut at `UNAUTHORIZED_COMMAND_TEXT_BYTES_MAX`).
pub fn command_text(command: &str, body: &Document) -> String {
    let mut out = String::new();
    out.push_str("{ ");
    for (i, (k, v)) in body.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(k);
        out.push_str(": ");
        if redacted(command, k) {
            out.push_str("\"xxx\"");
        } else {
            shell_value(v, &mut out, 0);
        }
        if out.len() > limits::UNAUTHORIZED_COMMAND_TEXT_BYTES_MAX {
            break;
        }
    }
    out.push_str(" }");
    if out.len() > limits::UNAUTHORIZED_COMMAND_TEXT_BYTES_MAX {
        let mut cut = limits::UNAUTHORIZED_COMMAND_TEXT_BYTES_MAX;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// Nesting printed in a command's text before "...".
const TEXT_DEPTH_MAX: usize = 8;

fn shell_value(v: &Bson, out: &mut String, depth: usize) {
    use std::fmt::Write as _;
    if depth > TEXT_DEPTH_MAX || out.len() > limits::UNAUTHORIZED_COMMAND_TEXT_BYTES_MAX {
        out.push_str("...");
        return;
    }
    match v {
        Bson::String(s) => {
            let _ = write!(out, "{s:?}");
        }
        Bson::Document(d) => {
            out.push_str("{ ");
            for (i, (k, v)) in d.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{k}: ");
                shell_value(v, out, depth + 1);
            }
            out.push_str(" }");
        }
        Bson::Array(a) => {
            out.push_str("[ ");
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                shell_value(v, out, depth + 1);
            }
            out.push_str(" ]");
        }
        Bson::Binary(b) if b.subtype == bson::spec::BinarySubtype::Uuid && b.bytes.len() == 16 => {
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(&b.bytes);
            let _ = write!(out, "UUID(\"{}\")", bson::Uuid::from_bytes(bytes));
        }
        Bson::ObjectId(o) => {
            let _ = write!(out, "ObjectId('{o}')");
        }
        Bson::Double(f) if f.fract() == 0.0 && f.is_finite() => {
            let _ = write!(out, "{f:.1}");
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::COMMANDS;

    /// Every command has exactly one rule, and every rule a command: a new command cannot
    /// forget its authorization.
    #[test]
    fn every_command_has_a_rule() {
        for c in COMMANDS {
            let n = RULES.iter().filter(|(name, _)| *name == c.name).count();
            assert_eq!(n, 1, "command {} has {n} authorization rules", c.name);
        }
        for (name, _) in RULES {
            assert!(
                COMMANDS.iter().any(|c| c.name == *name),
                "rule for {name}, which is not a command"
            );
        }
    }

    fn needs_of(body: Document) -> Vec<Need> {
        let name = first_name(&body).to_string();
        let rule = rule_of(lookup(&name).unwrap().name).unwrap();
        needs(rule, &name, "t", &body, &[])
    }

    #[test]
    fn targets() {
        assert_eq!(
            needs_of(bson::doc! { "find": "c" }),
            vec![Need::coll("t", "c", &["find"])]
        );
        let n = needs_of(
            bson::doc! { "update": "c", "updates": [{ "q": {}, "u": {}, "upsert": true }] },
        );
        assert_eq!(n, vec![Need::coll("t", "c", &["update", "insert"])]);
        let n = needs_of(bson::doc! { "aggregate": "c", "pipeline": [
            { "$lookup": { "from": "o", "as": "x", "pipeline": [{ "$unionWith": "u" }] } },
            { "$out": { "db": "z", "coll": "w" } },
        ] });
        assert_eq!(
            n,
            vec![
                Need::coll("t", "c", &["find"]),
                Need::coll("t", "o", &["find"]),
                Need::coll("t", "u", &["find"]),
                Need::coll("z", "w", &["insert", "remove"]),
            ]
        );
        let n = needs_of(bson::doc! { "explain": { "delete": "c", "deletes": [] } });
        assert_eq!(n, vec![Need::coll("t", "c", &["remove"])]);
        let n = needs_of(
            bson::doc! { "createUser": "u", "pwd": "p", "roles": ["read", { "role": "read", "db": "o" }] },
        );
        assert_eq!(
            n,
            vec![
                Need::db("t", &["createUser"]),
                Need::db("o", &["grantRole"]),
                Need::db("t", &["grantRole"]),
            ]
        );
        let n = needs_of(bson::doc! { "renameCollection": "a.b", "to": "c.d" });
        assert_eq!(n.len(), 2);
    }

    #[test]
    fn passwords_are_redacted() {
        let body = bson::doc! { "createUser": "u", "pwd": "hunter2", "roles": [], "$db": "t" };
        let t = command_text("createUser", &body);
        assert!(!t.contains("hunter2"), "{t}");
        assert_eq!(
            t,
            "{ createUser: \"u\", pwd: \"xxx\", roles: [  ], $db: \"t\" }"
        );
        let long = bson::doc! { "insert": "c", "documents": [{ "x": "y".repeat(5000) }] };
        assert!(
            command_text("insert", &long).len() < limits::UNAUTHORIZED_COMMAND_TEXT_BYTES_MAX + 10
        );
    }
}
