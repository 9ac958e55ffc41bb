//! Index filters (`planCacheSetFilter`): for one query shape of one collection, the indexes
//! the planner may consider. A query of that shape plans among those indexes only (and the
//! collection scan), ignores `hint` as mongod does, and explain says `indexFilterSet: true`.
//!
//! A shape here is the filter's structure (`cache::filter_shape`: fields, operators and value
//! types), the sort and the collation (a filter set with a `collation` applies to queries under
//! that collation, one without to queries under the simple collation); mongod's shape also
//! holds the projection, which the planner is not told, so a filter applies whatever the
//! query's projection. Filters live in
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

/// A filter entry's collation, normalised; `None` for none or the simple one.
fn entry_collation(entry: &Document) -> Option<Document> {
    let c = entry.get_document("collation").ok()?;
    match crate::query::collation::Spec::parse(c).ok()? {
        spec @ crate::query::collation::Spec::Locale(_) => Some(spec.to_document()),
        crate::query::collation::Spec::Simple => None,
    }
}

/// The current query's collation in the form `entry_collation` gives.
fn query_collation() -> Option<Document> {
    crate::query::collator::current()
        .map(|c| crate::query::collation::Spec::Locale(c.spec().clone()).to_document())
}

/// Records `entry` (`{query, sort, projection, collation?, indexes}`), replacing a filter of its
/// shape and collation.
pub fn set(ns: &str, entry: Document) {
    let (query, sort) = (field(&entry, "query"), field(&entry, "sort"));
    let collation = entry_collation(&entry);
    let mut all = filters();
    let list = all.entry(ns.to_string()).or_default();
    list.retain(|f| !same_shape(f, &query, &sort) || entry_collation(f) != collation);
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
    let collation = query_collation();
    let all = filters();
    let entry = all
        .get(&format!("{db}.{name}"))?
        .iter()
        .find(|f| same_shape(f, filter, &sort) && entry_collation(f) == collation)?;
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

    #[test]
    fn a_collation_makes_another_filter() {
        let ns = "filters_unit.collated";
        let en = doc! { "locale": "en", "strength": 2 };
        set(
            ns,
            doc! { "query": { "a": 1 }, "sort": {}, "indexes": ["a_1"] },
        );
        set(
            ns,
            doc! { "query": { "a": 1 }, "sort": {}, "collation": en.clone(), "indexes": ["a_en"] },
        );
        set(
            ns,
            doc! { "query": { "a": 1 }, "sort": {}, "collation": { "locale": "simple" }, "indexes": ["a_2"] },
        );
        let listed = list(ns);
        assert_eq!(
            listed.len(),
            2,
            "simple replaced the filter without a collation"
        );
        let engine_dir = tempfile::tempdir().unwrap();
        let engine =
            storage::Engine::open(engine_dir.path(), storage::EngineOptions::default()).unwrap();
        let coll = engine
            .create_collection("filters_unit", "collated", Document::new())
            .unwrap();
        let simple = allowed(&coll, &doc! { "a": 5 }, None).unwrap();
        assert_eq!(simple, vec![Bson::String("a_2".into())]);
        let spec = crate::query::collation::Spec::parse(&en).unwrap();
        let _scope =
            crate::query::collator::scope(crate::query::collator::for_spec(&spec).unwrap());
        let collated = allowed(&coll, &doc! { "a": 5 }, None).unwrap();
        assert_eq!(collated, vec![Bson::String("a_en".into())]);
        clear(ns, None);
    }
}
