//! The built-in roles with mongod's meaning, as privilege lists: the database roles (`read`,
//! `readWrite`, `dbAdmin`, `dbOwner`, `userAdmin`) exist in every database, the others only in
//! `admin`. Every built-in role covers the ordinary collections of its database(s) through the
//! database resource and names each `system.*` collection it may touch explicitly.

use super::privilege::{Privilege, Resource};

const READ: &[&str] = &[
    "changeStream",
    "collStats",
    "dbHash",
    "dbStats",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
    "listSearchIndexes",
];
const WRITE: &[&str] = &[
    "convertToCapped",
    "createCollection",
    "createIndex",
    "dropCollection",
    "dropIndex",
    "insert",
    "remove",
    "renameCollectionSameDB",
    "update",
    "createSearchIndexes",
    "dropSearchIndex",
    "updateSearchIndex",
];
const DB_ADMIN: &[&str] = &[
    "analyze",
    "bypassDocumentValidation",
    "collMod",
    "collStats",
    "compact",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "dbStats",
    "dropCollection",
    "dropDatabase",
    "dropIndex",
    "enableProfiler",
    "listCollections",
    "listIndexes",
    "listSearchIndexes",
    "planCacheIndexFilter",
    "planCacheRead",
    "planCacheWrite",
    "reIndex",
    "renameCollectionSameDB",
    "storageDetails",
    "validate",
];
const DB_ADMIN_PROFILE: &[&str] = &[
    "changeStream",
    "collStats",
    "convertToCapped",
    "createCollection",
    "dbHash",
    "dbStats",
    "dropCollection",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
    "planCacheRead",
];
const USER_ADMIN: &[&str] = &[
    "changeCustomData",
    "changePassword",
    "createRole",
    "createUser",
    "dropRole",
    "dropUser",
    "grantRole",
    "revokeRole",
    "setAuthenticationRestriction",
    "viewRole",
    "viewUser",
];
const CLUSTER_MONITOR: &[&str] = &[
    "checkFreeMonitoringStatus",
    "connPoolStats",
    "getClusterParameter",
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "getShardMap",
    "hostInfo",
    "inprog",
    "listDatabases",
    "listSessions",
    "listShards",
    "netstat",
    "operationMetrics",
    "replSetGetConfig",
    "replSetGetStatus",
    "serverStatus",
    "shardingState",
    "top",
    "useUUID",
];
const CLUSTER_MONITOR_DB: &[&str] = &[
    "collStats",
    "dbStats",
    "getShardVersion",
    "indexStats",
    "useUUID",
];
const HOST_MANAGER: &[&str] = &[
    "applicationMessage",
    "closeAllDatabases",
    "connPoolSync",
    "dropConnections",
    "flushRouterConfig",
    "fsync",
    "invalidateUserCache",
    "killAnyCursor",
    "killAnySession",
    "killop",
    "logRotate",
    "resync",
    "rotateCertificates",
    "setParameter",
    "shutdown",
    "touch",
    "unlock",
];
const CLUSTER_MANAGER: &[&str] = &[
    "addShard",
    "appendOplogNote",
    "applicationMessage",
    "checkMetadataConsistency",
    "cleanupOrphaned",
    "flushRouterConfig",
    "getClusterParameter",
    "getDefaultRWConcern",
    "listSessions",
    "listShards",
    "removeShard",
    "replSetConfigure",
    "replSetGetConfig",
    "replSetGetStatus",
    "replSetStateChange",
    "resync",
    "setClusterParameter",
    "setDefaultRWConcern",
    "setFeatureCompatibilityVersion",
    "setFreeMonitoring",
];
const CLUSTER_MANAGER_DB: &[&str] = &[
    "analyzeShardKey",
    "clearJumboFlag",
    "enableSharding",
    "moveChunk",
    "refineCollectionShardKey",
    "reshardCollection",
    "splitChunk",
    "splitVector",
];
const AUTH_COLLECTION_READ: &[&str] = &[
    "collStats",
    "dbHash",
    "dbStats",
    "find",
    "killCursors",
    "planCacheRead",
];
const RESTORE: &[&str] = &[
    "bypassDocumentValidation",
    "changeCustomData",
    "changePassword",
    "collMod",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "createRole",
    "createUser",
    "dropCollection",
    "dropRole",
    "dropUser",
    "grantRole",
    "insert",
    "revokeRole",
    "viewRole",
    "viewUser",
];
const RESTORE_AUTH_COLLECTIONS: &[&str] = &[
    "collMod",
    "createCollection",
    "createIndex",
    "dropCollection",
    "dropIndex",
    "find",
    "insert",
    "remove",
    "update",
];

/// Roles every database has.
pub const DATABASE_ROLES: &[&str] = &["read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"];
/// Roles only `admin` has.
pub const ADMIN_ROLES: &[&str] = &[
    "readAnyDatabase",
    "readWriteAnyDatabase",
    "userAdminAnyDatabase",
    "dbAdminAnyDatabase",
    "clusterMonitor",
    "clusterManager",
    "clusterAdmin",
    "hostManager",
    "backup",
    "restore",
    "root",
];

pub fn is_builtin(role: &str, db: &str) -> bool {
    DATABASE_ROLES.contains(&role) || (db == "admin" && ADMIN_ROLES.contains(&role))
}

/// A name no user-defined role may take in `db`.
pub fn is_reserved(role: &str, db: &str) -> bool {
    is_builtin(role, db) || role.starts_with("__")
}

fn both(a: &[&'static str], b: &[&'static str]) -> Vec<&'static str> {
    a.iter().chain(b).copied().collect()
}

/// The privileges of built-in role `role` defined in `db`; None when it is not built in.
pub fn privileges(role: &str, db: &str) -> Option<Vec<Privilege>> {
    if !is_builtin(role, db) {
        return None;
    }
    let on = |r: Resource, a: &[&'static str]| Privilege::new(r, a);
    let read_write = both(READ, WRITE);
    Some(match role {
        "read" => vec![
            on(Resource::db(db), READ),
            on(Resource::ns(db, "system.js"), READ),
        ],
        "readWrite" => vec![
            on(Resource::db(db), &read_write),
            on(Resource::ns(db, "system.js"), &read_write),
        ],
        "dbAdmin" => vec![
            on(Resource::db(db), DB_ADMIN),
            on(Resource::ns(db, "system.profile"), DB_ADMIN_PROFILE),
        ],
        "userAdmin" => vec![on(Resource::db(db), USER_ADMIN)],
        "dbOwner" => ["readWrite", "dbAdmin", "userAdmin"]
            .iter()
            .flat_map(|r| privileges(r, db).unwrap_or_default())
            .collect(),
        "readAnyDatabase" => vec![
            on(Resource::db(""), READ),
            on(Resource::ns("", "system.js"), READ),
            on(Resource::Cluster, &["listDatabases"]),
        ],
        "readWriteAnyDatabase" => vec![
            on(Resource::db(""), &read_write),
            on(Resource::ns("", "system.js"), &read_write),
            on(Resource::Cluster, &["listDatabases"]),
        ],
        "dbAdminAnyDatabase" => vec![
            on(Resource::db(""), DB_ADMIN),
            on(Resource::ns("", "system.profile"), DB_ADMIN_PROFILE),
            on(Resource::Cluster, &["listDatabases"]),
        ],
        "userAdminAnyDatabase" => vec![
            on(Resource::db(""), USER_ADMIN),
            on(
                Resource::Cluster,
                &[
                    "authSchemaUpgrade",
                    "invalidateUserCache",
                    "listDatabases",
                    "viewUser",
                ],
            ),
            on(
                Resource::ns("admin", "system.users"),
                &both(AUTH_COLLECTION_READ, &["createIndex", "dropIndex"]),
            ),
            on(Resource::ns("admin", "system.roles"), AUTH_COLLECTION_READ),
        ],
        "clusterMonitor" => vec![
            on(Resource::Cluster, CLUSTER_MONITOR),
            on(Resource::db(""), CLUSTER_MONITOR_DB),
            on(Resource::ns("", "system.profile"), &["find"]),
        ],
        "hostManager" => vec![
            on(Resource::Cluster, HOST_MANAGER),
            on(Resource::db(""), &["killCursors"]),
        ],
        "clusterManager" => vec![
            on(Resource::Cluster, CLUSTER_MANAGER),
            on(Resource::db(""), CLUSTER_MANAGER_DB),
        ],
        "clusterAdmin" => {
            let mut p: Vec<Privilege> = ["clusterManager", "clusterMonitor", "hostManager"]
                .iter()
                .flat_map(|r| privileges(r, "admin").unwrap_or_default())
                .collect();
            p.push(on(Resource::db(""), &["dropDatabase"]));
            p
        }
        "backup" => vec![
            on(
                Resource::Cluster,
                &[
                    "appendOplogNote",
                    "bypassWriteBlockingMode",
                    "getParameter",
                    "listDatabases",
                    "serverStatus",
                    "setUserWriteBlockMode",
                ],
            ),
            on(Resource::Any, &["listCollections", "listIndexes"]),
            on(Resource::db(""), &["find"]),
            on(Resource::ns("", "system.js"), &["find"]),
            on(Resource::ns("", "system.views"), &["find"]),
            on(Resource::ns("", "system.profile"), &["find"]),
            on(Resource::ns("admin", "system.users"), &["find"]),
            on(Resource::ns("admin", "system.roles"), &["find"]),
            on(Resource::ns("admin", "system.version"), &["find"]),
        ],
        "restore" => vec![
            on(
                Resource::Cluster,
                &["bypassWriteBlockingMode", "getParameter"],
            ),
            on(Resource::Any, &["listCollections"]),
            on(Resource::db(""), RESTORE),
            on(
                Resource::ns("", "system.js"),
                &[
                    "bypassDocumentValidation",
                    "collMod",
                    "createCollection",
                    "createIndex",
                    "dropCollection",
                    "insert",
                ],
            ),
            on(
                Resource::ns("admin", "system.users"),
                RESTORE_AUTH_COLLECTIONS,
            ),
            on(
                Resource::ns("admin", "system.roles"),
                RESTORE_AUTH_COLLECTIONS,
            ),
        ],
        "root" => {
            let mut p: Vec<Privilege> = [
                "readWriteAnyDatabase",
                "dbAdminAnyDatabase",
                "userAdminAnyDatabase",
                "clusterAdmin",
                "restore",
                "backup",
            ]
            .iter()
            .flat_map(|r| privileges(r, "admin").unwrap_or_default())
            .collect();
            p.push(on(Resource::Any, &["validate"]));
            p
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::privilege::{Privileges, Target};

    fn allows(role: &str, db: &str, target: Target, action: &str) -> bool {
        let mut ps = Privileges::default();
        ps.extend(privileges(role, db).unwrap());
        ps.allows(&target, action)
    }

    fn coll(d: &str, c: &str) -> Target {
        Target::Collection(d.into(), c.into())
    }

    #[test]
    fn meanings() {
        assert!(allows("read", "a", coll("a", "c"), "find"));
        assert!(!allows("read", "a", coll("a", "c"), "insert"));
        assert!(!allows("read", "a", coll("b", "c"), "find"));
        assert!(allows("readWrite", "a", coll("a", "c"), "insert"));
        assert!(!allows("userAdmin", "a", coll("a", "c"), "find"));
        assert!(allows(
            "userAdmin",
            "a",
            Target::Database("a".into()),
            "createUser"
        ));
        assert!(allows(
            "dbOwner",
            "a",
            Target::Database("a".into()),
            "dropDatabase"
        ));
        assert!(allows("readAnyDatabase", "admin", coll("z", "c"), "find"));
        assert!(allows(
            "root",
            "admin",
            coll("admin", "system.users"),
            "find"
        ));
        assert!(allows("root", "admin", Target::Cluster, "shutdown"));
        assert!(allows(
            "root",
            "admin",
            Target::Database("z".into()),
            "createUser"
        ));
        assert!(allows(
            "clusterMonitor",
            "admin",
            Target::Cluster,
            "serverStatus"
        ));
        assert!(!allows("clusterMonitor", "admin", coll("z", "c"), "find"));
        assert!(privileges("root", "test").is_none());
        assert!(privileges("read", "test").is_some());
        assert!(privileges("nope", "admin").is_none());
    }

    #[test]
    fn every_action_is_known() {
        for role in DATABASE_ROLES.iter().chain(ADMIN_ROLES) {
            for p in privileges(role, "admin").unwrap() {
                for a in p.actions {
                    assert!(super::super::privilege::ACTIONS.contains(&a), "{role}: {a}");
                }
            }
        }
    }
}
