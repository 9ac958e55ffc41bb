//! Leading aggregation stages that read server state rather than documents, beyond the ones
//! `commands::aggregate` answers itself: `$listLocalSessions` (the session registry,
//! `crate::sessions::registry`), `$listSessions` (`config.system.sessions`,
//! `crate::session_records`) and `$queryStats` (`crate::query_stats`). Each checks its spec and namespace as mongod's
//! stage parser does and returns the documents it produces; the rest of the pipeline runs over
//! them.

use super::Request;
use super::argspec;
use crate::error::{CommandResult, ErrorCode, err};
use crate::sessions::registry::{UserDigest, user_digest};
use crate::state::ServerState;
use bson::{Bson, Document};

/// `$listLocalSessions` (on `{aggregate: 1}`: the registry in memory) and `$listSessions` (on
/// `config.system.sessions`: that collection's records): the session records of the users the
/// spec names.
pub fn list_sessions(
    state: &ServerState,
    req: &Request,
    coll: Option<&str>,
    name: &str,
    spec: &Bson,
) -> CommandResult<Vec<Document>> {
    let local = name == "$listLocalSessions";
    if local && coll.is_some() {
        return Err(err(
            ErrorCode::InvalidNamespace,
            "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection",
        ));
    }
    if !local && (req.db != "config" || coll != Some("system.sessions")) {
        return Err(err(
            ErrorCode::InvalidNamespace,
            "$listSessions must be run against the 'system.sessions' collection in the 'config' database.",
        ));
    }
    let owners = owners(name, spec, req.user.get())?;
    match local {
        true => Ok(state.sessions.list_local(owners.as_deref())),
        false => crate::session_records::list(state, owners.as_deref()),
    }
}

/// `$queryStats` (on `admin` with `{aggregate: 1}`): the statistics of every shape kept, with
/// identifiers transformed under `transformIdentifiers` (`hmac-sha-256`, a key of at least 32
/// bytes).
pub fn query_stats(
    state: &ServerState,
    req: &Request,
    coll: Option<&str>,
    spec: &Bson,
) -> CommandResult<Vec<Document>> {
    let Bson::Document(spec) = spec else {
        return Err(err(
            ErrorCode::FailedToParse,
            format!(
                "$queryStats must take a nested object but found: {}",
                super::args::type_name(spec)
            ),
        ));
    };
    if req.db != "admin" || coll.is_some() {
        return Err(err(
            ErrorCode::InvalidNamespace,
            "$queryStats must be run against the 'admin' database with {aggregate: 1}",
        ));
    }
    let key = query_stats_key(spec)?;
    Ok(state.query_stats.list(key.as_deref()))
}

/// The HMAC key of `$queryStats`' spec (`DocumentSourceQueryStatsSpec`), None when identifiers
/// are shown as they are.
fn query_stats_key(spec: &Document) -> CommandResult<Option<Vec<u8>>> {
    argspec::check_entry(&argspec::admin::QUERY_STATS_SPEC, spec)?;
    let Ok(t) = spec.get_document("transformIdentifiers") else {
        return Ok(None);
    };
    argspec::check_entry(&argspec::admin::QUERY_STATS_TRANSFORM, t)?;
    let algorithm = t.get_str("algorithm").unwrap_or_default();
    if algorithm != "hmac-sha-256" {
        return Err(err(
            ErrorCode::BadValue,
            format!(
                "Enumeration value '{algorithm}' for field '$queryStats.transformIdentifiers.algorithm' is not a valid value."
            ),
        ));
    }
    let key = match t.get("hmacKey") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        _ => Vec::new(),
    };
    if key.len() < 32 {
        return Err(err(
            ErrorCode::BadValue,
            format!(
                "hmacKey must be greater than or equal to 32 bytes, found length: {}",
                key.len()
            ),
        ));
    }
    Ok(Some(key))
}

/// Whose sessions a `ListSessionsSpec` asks for: None for `allUsers: true`, else the digests
/// of `users` (by default the connection's own user, or the unauthenticated digest).
fn owners(
    name: &str,
    spec: &Bson,
    me: Option<&(String, String)>,
) -> CommandResult<Option<Vec<UserDigest>>> {
    let Bson::Document(spec) = spec else {
        return Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "{name} options must be specified in an object, but found: {}",
                super::args::type_name(spec)
            ),
        ));
    };
    let table = match name {
        "$listSessions" => &argspec::admin::LIST_ALL_SESSIONS_SPEC,
        _ => &argspec::admin::LIST_SESSIONS_SPEC,
    };
    argspec::check_entry(table, spec)?;
    let mut users = Vec::new();
    for user in spec.get_array("users").into_iter().flatten() {
        if let Bson::Document(u) = user {
            argspec::check_entry(&argspec::admin::LIST_SESSIONS_USER, u)?;
            users.push(user_digest(Some((
                u.get_str("user").unwrap_or_default(),
                u.get_str("db").unwrap_or_default(),
            ))));
        }
    }
    let all = spec.get_bool("allUsers").unwrap_or(false);
    if all && !users.is_empty() {
        return Err(err(
            ErrorCode::UnsupportedFormat,
            format!(
                "{name} may not specify {{allUsers:true}} and {{users:[...]}} at the same time"
            ),
        ));
    }
    if all {
        return Ok(None);
    }
    if users.is_empty() {
        users.push(user_digest(me.map(|(n, d)| (n.as_str(), d.as_str()))));
    }
    Ok(Some(users))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn code<T>(r: CommandResult<T>) -> i32 {
        match r {
            Ok(_) => 0,
            Err(e) => e.code.code(),
        }
    }

    #[test]
    fn spec_errors_are_mongods() {
        let o = |spec: Bson| code(owners("$listSessions", &spec, None));
        assert_eq!(o(Bson::Int32(1)), 14);
        assert_eq!(o(Bson::Document(doc! { "allUsers": 1 })), 14);
        assert_eq!(o(Bson::Document(doc! { "users": 1 })), 14);
        assert_eq!(o(Bson::Document(doc! { "bogus": true })), 40415);
        assert_eq!(
            o(Bson::Document(doc! { "users": [{ "user": "a" }] })),
            40414
        );
        assert_eq!(
            o(Bson::Document(
                doc! { "allUsers": true, "users": [{ "user": "a", "db": "b" }] }
            )),
            12
        );
        assert_eq!(o(Bson::Document(doc! { "allUsers": true, "users": [] })), 0);
    }

    #[test]
    fn query_stats_spec_errors_are_mongods() {
        let key = |b: usize| {
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Sensitive,
                bytes: vec![1; b],
            })
        };
        let k = |spec: Document| code(query_stats_key(&spec));
        assert_eq!(k(doc! {}), 0);
        assert_eq!(k(doc! { "bogus": 1 }), 40415);
        assert_eq!(k(doc! { "transformIdentifiers": 1 }), 14);
        assert_eq!(k(doc! { "transformIdentifiers": {} }), 40414);
        assert_eq!(
            k(doc! { "transformIdentifiers": { "algorithm": "md5" } }),
            2
        );
        assert_eq!(
            k(doc! { "transformIdentifiers": { "algorithm": "hmac-sha-256", "hmacKey": key(8) } }),
            2
        );
        assert_eq!(
            k(doc! { "transformIdentifiers": { "algorithm": "hmac-sha-256", "hmacKey": "x" } }),
            14
        );
        assert_eq!(
            k(doc! { "transformIdentifiers": { "algorithm": "hmac-sha-256", "hmacKey": key(32) } }),
            0
        );
    }

    #[test]
    fn default_is_the_callers_own_digest() {
        let me = ("ann".to_string(), "admin".to_string());
        let got = owners("$listLocalSessions", &Bson::Document(doc! {}), Some(&me));
        assert_eq!(
            got.ok().flatten(),
            Some(vec![user_digest(Some(("ann", "admin")))])
        );
        let all = owners(
            "$listLocalSessions",
            &Bson::Document(doc! { "allUsers": true }),
            None,
        );
        assert_eq!(all.ok(), Some(None));
        let named = owners(
            "$listLocalSessions",
            &Bson::Document(doc! { "users": [{ "user": "bob", "db": "test" }] }),
            None,
        );
        assert_eq!(
            named.ok().flatten(),
            Some(vec![user_digest(Some(("bob", "test")))])
        );
    }
}
