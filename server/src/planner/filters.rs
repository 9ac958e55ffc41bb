//! Index filters (`planCacheSetFilter`): for one query shape of one collection, the indexes
//! the planner may consider. A query of that shape plans among those indexes only (and the
//! collection scan), ignores `hint` as mongod does, and explain says `indexFilterSet: true`.
//!
//! A shape here is the filter's structure (`cache::filter_shape`: fields, operators and value
//! types) and the sort; mongod's shape also holds the projection and collation, which the
//! planner is not told, so a filter applies whatever the query's projection. Filters live in
//! memory, by namespace, as in mongod (they do not survive a restart).

use super::cache::filter_shape;
use bson::{Bson, Document};
use std::collections::BTreeMap;
use std::sync::Mutex;
use storage::{Collection, IndexInfo};

static FILTERS: Mutex<BTreeMap<String, Vec<Document>>> = Mutex::new(BTreeMap::new());

fn filters() -> std::sync::MutexGuard<'static, BTreeMap<String, Vec<Document>>> {
    FILTERS.lock().unwrap_or_else(|p| p.into_inner())
}

fn field(d: &Document, key: &str) -> Document {
    d.get_document(key).cloned().unwrap_or_default()
}

/// Whether a stored filter (or a command's shape) is for the query `filter` sorted by `sort`.
fn same_shape(entry: &Document, filter: &Document, sort: &Document) -> bool {
    filter_shape(&field(entry, "query")) == filter_shape(filter) && field(entry, "sort") == *sort
}

/// Records `entry` (`{query, sort, projection, indexes}`), replacing a filter of its shape.
pub fn set(ns: &str, entry: Document) {
    let (query, sort) = (field(&entry, "query"), field(&entry, "sort"));
    let mut all = filters();
    let list = all.entry(ns.to_string()).or_default();
    list.retain(|f| !same_shape(f, &query, &sort));
    list.push(entry);
}

/// Forgets the filter of one shape (`query` and `sort`), or every filter of `ns`.
pub fn clear(ns: &str, shape: Option<(&Document, &Document)>) {
    let mut all = filters();
    match shape {
        None => {
            all.remove(ns);
        }
        Some((query, sort)) => {
            if let Some(list) = all.get_mut(ns) {
                list.retain(|f| !same_shape(f, query, sort));
            }
        }
    }
}

/// The filters of `ns`, as `planCacheListFilters` shows them.
pub fn list(ns: &str) -> Vec<Document> {
    filters().get(ns).cloned().unwrap_or_default()
}

/// The indexes (names or key patterns) a filter allows for this query, if one is set.
pub fn allowed(coll: &Collection, filter: &Document, sort: Option<&Document>) -> Option<Vec<Bson>> {
    let (db, name) = coll.namespace();
    let sort = sort.cloned().unwrap_or_default();
    let all = filters();
    let entry = all
        .get(&format!("{db}.{name}"))?
        .iter()
        .find(|f| same_shape(f, filter, &sort))?;
    Some(entry.get_array("indexes").cloned().unwrap_or_default())
}

/// Whether `ix` is one of `allowed` (by name or by key pattern).
pub fn permits(allowed: &[Bson], ix: &IndexInfo) -> bool {
    allowed.iter().any(|a| match a {
        Bson::String(name) => *name == ix.spec.name,
        Bson::Document(key) => *key == ix.spec.key,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn shapes_match_on_structure_and_sort_not_values() {
        let entry = doc! { "query": { "a": 1, "b": { "$gt": 2 } }, "sort": { "a": 1 } };
        assert!(same_shape(
            &entry,
            &doc! { "a": 7, "b": { "$gt": 9 } },
            &doc! { "a": 1 }
        ));
        assert!(!same_shape(
            &entry,
            &doc! { "a": 7, "b": { "$gt": 9 } },
            &doc! {}
        ));
        assert!(!same_shape(
            &entry,
            &doc! { "a": "x", "b": { "$gt": 9 } },
            &doc! { "a": 1 }
        ));
        assert!(!same_shape(&entry, &doc! { "a": 7 }, &doc! { "a": 1 }));
    }

    #[test]
    fn set_replaces_a_shape_and_clear_forgets() {
        let ns = "filters_unit.c";
        set(
            ns,
            doc! { "query": { "a": 1 }, "sort": {}, "indexes": ["a_1"] },
        );
        set(
            ns,
            doc! { "query": { "a": 2 }, "sort": {}, "indexes": ["b_1"] },
        );
        set(
            ns,
            doc! { "query": { "b": 2 }, "sort": {}, "indexes": ["b_1"] },
        );
        assert_eq!(
            list(ns).len(),
            2,
            "the second {{a}} filter replaced the first"
        );
        clear(ns, Some((&doc! { "a": 5 }, &doc! {})));
        assert_eq!(list(ns).len(), 1);
        clear(ns, None);
        assert!(list(ns).is_empty());
    }
}
