//! Index builds (every option the catalog keeps, the conflicts mongod reports) and the error cases
//! that do not belong to one command family: unknown commands, bad namespaces, dead cursors.

use super::{COLL, Case, find_sorted};
use crate::compare::corpus;
use bson::{Bson, doc};

pub fn all() -> Vec<Case> {
    let build = Case::new("index", "index/build-list-drop")
        .insert(corpus::documents())
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"v": 1}, "name": "v_1"}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"v": 1}, "name": "v_1"}]})
        .step(doc! {"createIndexes": COLL, "indexes": [
            {"key": {"v": -1, "_id": 1}, "name": "v_-1__id_1"},
            {"key": {"v.a": 1}, "name": "va", "sparse": true},
            {"key": {"w": 1}, "name": "w_ttl", "expireAfterSeconds": 3600},
            {"key": {"p": 1}, "name": "p_partial", "partialFilterExpression": {"p": {"$exists": true}}}]})
        .step(doc! {"listIndexes": COLL})
        .step(doc! {"find": COLL, "filter": {"v": {"$gte": 0}}, "sort": {"v": 1, "_id": 1}, "hint": "v_1", "projection": {"_id": 1}})
        .step(doc! {"find": COLL, "filter": {"v": {"$lt": "b"}}, "hint": {"v": 1}, "projection": {"_id": 1}})
        .step(doc! {"find": COLL, "filter": {}, "hint": "nosuchindex"})
        .step(doc! {"dropIndexes": COLL, "index": "v_1"})
        .step(doc! {"dropIndexes": COLL, "index": {"v.a": 1}})
        .step(doc! {"dropIndexes": COLL, "index": "nosuchindex"})
        .step(doc! {"dropIndexes": COLL, "index": "_id_"})
        .step(doc! {"listIndexes": COLL})
        .step(doc! {"dropIndexes": COLL, "index": "*"})
        .step(doc! {"listIndexes": COLL});
    let unique = Case::new("index", "index/unique")
        .insert(vec![doc! {"_id": 1, "u": 1}, doc! {"_id": 2, "u": 1.0}, doc! {"_id": 3}])
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"u": 1}, "name": "u_1", "unique": true}]})
        .step(doc! {"delete": COLL, "deletes": [{"q": {"_id": 2}, "limit": 1}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"u": 1}, "name": "u_1", "unique": true}]})
        .step(doc! {"insert": COLL, "documents": [{"_id": 4, "u": Bson::Int64(1)}]})
        .step(doc! {"insert": COLL, "documents": [{"_id": 5}]})
        .step(doc! {"update": COLL, "updates": [{"q": {"_id": 3}, "u": {"$set": {"u": 1}}}]})
        .read_all();
    let conflicts = Case::new("index", "index/conflicts-and-bad-specs")
        .insert(vec![doc! {"_id": 1, "a": 1}])
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"a": 1}, "name": "a_1"}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"a": -1}, "name": "a_1"}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"a": 1}, "name": "other"}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"a": 1}, "name": "a_1", "unique": true}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {}, "name": "empty"}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"a": "nosuchtype"}, "name": "bad"}]})
        .step(doc! {"createIndexes": COLL, "indexes": [{"key": {"b": 1}}]})
        .step(doc! {"createIndexes": COLL, "indexes": []})
        .step(doc! {"createIndexes": "newcoll", "indexes": [{"key": {"z": 1}, "name": "z_1"}]})
        .step(doc! {"listIndexes": "newcoll"})
        .step(doc! {"listIndexes": "nosuchcoll"});
    vec![build, unique, conflicts]
}

pub fn errors() -> Vec<Case> {
    let commands = Case::new("error", "error/commands-and-namespaces")
        .step(doc! {"noSuchCommand": 1})
        .step(doc! {"find": ""})
        .step(doc! {"find": 5})
        .step(doc! {"find": COLL, "filter": 5})
        .step(doc! {"find": COLL, "nosuchoption": 1})
        .step(doc! {"insert": COLL})
        .step(doc! {"insert": COLL, "documents": [{"_id": [1]}]})
        .step(doc! {"insert": COLL, "documents": [{"_id": {"$gt": 1}}]})
        .step(doc! {"update": COLL, "updates": [{"q": {}}]})
        .step(doc! {"delete": COLL, "deletes": [{"q": {}, "limit": 5}]})
        .step(doc! {"count": COLL, "query": {"$bad": 1}})
        .step(doc! {"distinct": COLL})
        .step(find_sorted(doc! {}));
    let cursors = Case::new("error", "error/cursors-and-collections")
        .insert((0..10).map(|i| doc! {"_id": i}).collect())
        .step(doc! {"find": COLL, "sort": {"_id": 1}, "batchSize": 3})
        .get_more(4)
        .get_more(100)
        .get_more(1)
        .step(doc! {"find": COLL, "filter": {"_id": {"$gte": 2}}, "batchSize": 2})
        .kill_cursor()
        .get_more(1)
        .step(doc! {"getMore": 123_456_i64, "collection": COLL})
        .step(doc! {"getMore": 0_i64, "collection": COLL})
        .step(doc! {"killCursors": COLL, "cursors": [123_456_i64]})
        .step(doc! {"create": COLL})
        .step(doc! {"create": "fresh"})
        .step(doc! {"create": "fresh"})
        .step(doc! {"listCollections": 1, "nameOnly": true, "filter": {"name": "fresh"}})
        .step(doc! {"drop": "fresh"})
        .step(doc! {"drop": "fresh"})
        .step(doc! {"count": "nosuchcoll"})
        .step(doc! {"find": "nosuchcoll"});
    vec![commands, cursors]
}
