//! Privileges: an action set on a resource, and the one rule that decides whether a set of
//! privileges allows an action on a target. Resources are mongod's: `{db, collection}` where an
//! empty string is a wildcard, `{cluster: true}` and `{anyResource: true}`. Database-wide
//! resources (`collection: ""`) cover the database itself and its ordinary collections, never
//! its `system.*` collections, which only an exact name (or `anyResource`) covers.

use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document, doc};
use std::collections::BTreeSet;

/// Every action name cairn accepts in a privilege (mongod's list; most only mean something to
/// commands cairn may add later, but user-defined roles may name them today).
pub const ACTIONS: &[&str] = &[
    "addShard",
    "analyze",
    "analyzeShardKey",
    "anyAction",
    "appendOplogNote",
    "applicationMessage",
    "applyOps",
    "authSchemaUpgrade",
    "bypassDocumentValidation",
    "bypassWriteBlockingMode",
    "changeCustomData",
    "changeOwnCustomData",
    "changeOwnPassword",
    "changePassword",
    "changeStream",
    "checkFreeMonitoringStatus",
    "checkMetadataConsistency",
    "cleanupOrphaned",
    "clearJumboFlag",
    "closeAllDatabases",
    "collMod",
    "collStats",
    "compact",
    "compactStructuredEncryptionData",
    "connPoolStats",
    "connPoolSync",
    "convertToCapped",
    "cpuProfiler",
    "createCollection",
    "createIndex",
    "createRole",
    "createSearchIndexes",
    "createUser",
    "dbCheck",
    "dbHash",
    "dbStats",
    "dropAllRolesFromDatabase",
    "dropAllUsersFromDatabase",
    "dropCollection",
    "dropConnections",
    "dropDatabase",
    "dropIndex",
    "dropRole",
    "dropSearchIndex",
    "dropUser",
    "enableProfiler",
    "enableSharding",
    "find",
    "flushRouterConfig",
    "forceUUID",
    "fsync",
    "getClusterParameter",
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "getShardMap",
    "getShardVersion",
    "grantRole",
    "hostInfo",
    "impersonate",
    "indexStats",
    "inprog",
    "insert",
    "internal",
    "invalidateUserCache",
    "killAnyCursor",
    "killAnySession",
    "killCursors",
    "killop",
    "listCachedAndActiveUsers",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "listSearchIndexes",
    "listSessions",
    "listShards",
    "logRotate",
    "moveChunk",
    "netstat",
    "operationMetrics",
    "planCacheIndexFilter",
    "planCacheRead",
    "planCacheWrite",
    "queryStatsRead",
    "reIndex",
    "refineCollectionShardKey",
    "remove",
    "removeShard",
    "renameCollection",
    "renameCollectionSameDB",
    "replSetConfigure",
    "replSetGetConfig",
    "replSetGetStatus",
    "replSetHeartbeat",
    "replSetResizeOplog",
    "replSetStateChange",
    "reshardCollection",
    "resync",
    "revokeRole",
    "rotateCertificates",
    "serverStatus",
    "setAuthenticationRestriction",
    "setClusterParameter",
    "setDefaultRWConcern",
    "setFeatureCompatibilityVersion",
    "setFreeMonitoring",
    "setParameter",
    "setUserWriteBlockMode",
    "shardCollection",
    "shardingState",
    "shutdown",
    "splitChunk",
    "splitVector",
    "storageDetails",
    "top",
    "touch",
    "unlock",
    "update",
    "updateSearchIndex",
    "useUUID",
    "validate",
    "viewRole",
    "viewUser",
];

/// What a privilege is granted on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Cluster,
    Any,
    /// `{db, collection}`; an empty string matches any database or any ordinary collection.
    Ns {
        db: String,
        collection: String,
    },
}

/// What a command needs an action on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Cluster,
    Database(String),
    Collection(String, String),
}

impl Target {
    pub fn db(&self) -> Option<&str> {
        match self {
            Target::Cluster => None,
            Target::Database(d) | Target::Collection(d, _) => Some(d),
        }
    }
}

impl Resource {
    pub fn db(db: &str) -> Resource {
        Resource::Ns {
            db: db.to_string(),
            collection: String::new(),
        }
    }

    pub fn ns(db: &str, collection: &str) -> Resource {
        Resource::Ns {
            db: db.to_string(),
            collection: collection.to_string(),
        }
    }

    /// Whether a privilege on `self` applies to `target`.
    pub fn covers(&self, target: &Target) -> bool {
        match (self, target) {
            (Resource::Any, _) => true,
            (Resource::Cluster, Target::Cluster) => true,
            (Resource::Cluster, _) | (Resource::Ns { .. }, Target::Cluster) => false,
            (Resource::Ns { db, collection }, Target::Database(d)) => {
                collection.is_empty() && (db.is_empty() || db == d)
            }
            (Resource::Ns { db, collection }, Target::Collection(d, c)) => {
                let db_ok = db.is_empty() || db == d;
                let coll_ok = if collection.is_empty() {
                    !c.starts_with("system.")
                } else {
                    collection == c
                };
                db_ok && coll_ok
            }
        }
    }

    /// mongod's resource document.
    pub fn to_document(&self) -> Document {
        match self {
            Resource::Cluster => doc! { "cluster": true },
            Resource::Any => doc! { "anyResource": true },
            Resource::Ns { db, collection } => doc! { "db": db, "collection": collection },
        }
    }

    pub fn from_document(d: &Document) -> CommandResult<Resource> {
        let bad = |m: &str| err(ErrorCode::BadValue, m.to_string());
        if let Some(v) = d.get("cluster") {
            if d.len() != 1 || v != &Bson::Boolean(true) {
                return Err(bad("resource: {cluster: true} takes no other field"));
            }
            return Ok(Resource::Cluster);
        }
        if let Some(v) = d.get("anyResource") {
            if d.len() != 1 || v != &Bson::Boolean(true) {
                return Err(bad("resource: {anyResource: true} takes no other field"));
            }
            return Ok(Resource::Any);
        }
        match (d.get("db"), d.get("collection"), d.len()) {
            (Some(Bson::String(db)), Some(Bson::String(c)), 2) => Ok(Resource::ns(db, c)),
            _ => Err(bad(
                "resource must be {db: <string>, collection: <string>}, {cluster: true} or \
                 {anyResource: true}",
            )),
        }
    }
}

/// One resource and the actions granted on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    pub resource: Resource,
    pub actions: BTreeSet<&'static str>,
}

/// The canonical name of an action, or mongod's error for an unknown one.
pub fn action(name: &str) -> CommandResult<&'static str> {
    ACTIONS.iter().copied().find(|a| *a == name).ok_or_else(|| {
        err(
            ErrorCode::FailedToParse,
            format!("Unrecognized action privilege string: {name}"),
        )
    })
}

impl Privilege {
    pub fn new(resource: Resource, actions: &[&'static str]) -> Privilege {
        Privilege {
            resource,
            actions: actions.iter().copied().collect(),
        }
    }

    pub fn to_document(&self) -> Document {
        let actions: Vec<Bson> = self.actions.iter().map(|a| Bson::from(*a)).collect();
        doc! { "resource": self.resource.to_document(), "actions": actions }
    }

    /// Parse `{resource, actions}` as `createRole` and `grantPrivilegesToRole` take it.
    pub fn from_bson(v: &Bson) -> CommandResult<Privilege> {
        let Bson::Document(d) = v else {
            return Err(err(ErrorCode::BadValue, "privileges must be objects"));
        };
        if let Some(k) = d.keys().find(|k| *k != "resource" && *k != "actions") {
            return Err(err(
                ErrorCode::BadValue,
                format!("unknown field in a privilege: {k}"),
            ));
        }
        let resource = match d.get("resource") {
            Some(Bson::Document(r)) => Resource::from_document(r)?,
            _ => {
                return Err(err(
                    ErrorCode::BadValue,
                    "a privilege needs a resource object",
                ));
            }
        };
        let Some(Bson::Array(list)) = d.get("actions") else {
            return Err(err(
                ErrorCode::BadValue,
                "a privilege needs an actions array",
            ));
        };
        let mut actions = BTreeSet::new();
        for a in list {
            let Bson::String(a) = a else {
                return Err(err(ErrorCode::BadValue, "actions must be strings"));
            };
            actions.insert(action(a)?);
        }
        Ok(Privilege { resource, actions })
    }
}

/// A merged privilege list: at most one entry per resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Privileges(Vec<Privilege>);

impl Privileges {
    pub fn add(&mut self, p: Privilege) {
        match self.0.iter_mut().find(|q| q.resource == p.resource) {
            Some(q) => q.actions.extend(p.actions),
            None => self.0.push(p),
        }
    }

    pub fn extend(&mut self, ps: impl IntoIterator<Item = Privilege>) {
        for p in ps {
            self.add(p);
        }
    }

    pub fn remove(&mut self, p: &Privilege) {
        if let Some(q) = self.0.iter_mut().find(|q| q.resource == p.resource) {
            q.actions.retain(|a| !p.actions.contains(a));
        }
        self.0.retain(|q| !q.actions.is_empty());
    }

    pub fn iter(&self) -> impl Iterator<Item = &Privilege> {
        self.0.iter()
    }

    pub fn allows(&self, target: &Target, action: &str) -> bool {
        self.0.iter().any(|p| {
            p.resource.covers(target)
                && (p.actions.contains(action) || p.actions.contains("anyAction"))
        })
    }

    /// Whether any privilege names `db` (or every database): `listDatabases` shows such
    /// databases to users who may not list them all.
    pub fn mentions_db(&self, db: &str) -> bool {
        self.0.iter().any(|p| match &p.resource {
            Resource::Any => true,
            Resource::Cluster => false,
            Resource::Ns { db: d, .. } => d.is_empty() || d == db,
        })
    }

    pub fn to_bson(&self) -> Bson {
        Bson::Array(
            self.0
                .iter()
                .map(|p| Bson::Document(p.to_document()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coll(d: &str, c: &str) -> Target {
        Target::Collection(d.into(), c.into())
    }

    #[test]
    fn resource_matching() {
        let db = Resource::db("a");
        assert!(db.covers(&coll("a", "x")));
        assert!(db.covers(&Target::Database("a".into())));
        assert!(!db.covers(&coll("a", "system.users")));
        assert!(!db.covers(&coll("b", "x")));
        assert!(!db.covers(&Target::Cluster));
        let any_normal = Resource::db("");
        assert!(any_normal.covers(&coll("z", "x")));
        assert!(!any_normal.covers(&coll("z", "system.js")));
        assert!(Resource::ns("", "system.js").covers(&coll("z", "system.js")));
        assert!(Resource::ns("a", "x").covers(&coll("a", "x")));
        assert!(!Resource::ns("a", "x").covers(&Target::Database("a".into())));
        assert!(Resource::Any.covers(&coll("admin", "system.users")));
        assert!(Resource::Cluster.covers(&Target::Cluster));
    }

    #[test]
    fn merged_privileges() {
        let mut ps = Privileges::default();
        ps.add(Privilege::new(Resource::db("a"), &["find"]));
        ps.add(Privilege::new(Resource::db("a"), &["insert"]));
        assert_eq!(ps.iter().count(), 1);
        assert!(ps.allows(&coll("a", "c"), "insert"));
        assert!(!ps.allows(&coll("a", "c"), "remove"));
        ps.remove(&Privilege::new(Resource::db("a"), &["find", "insert"]));
        assert_eq!(ps.iter().count(), 0);
        let v = bson::bson!({ "resource": { "db": "a", "collection": "" }, "actions": ["find", "nope"] });
        assert_eq!(
            Privilege::from_bson(&v).unwrap_err().code,
            ErrorCode::FailedToParse
        );
    }
}
