//! Index filters (`planCacheSetFilter`): for one query shape of one collection, the indexes
//! the planner may consider. A query of that shape plans among those indexes only (and the
//! collection scan), ignores `hint` as mongod does, and explain says `indexFilterSet: true`.
//!
//! A shape is mongod's for index filters: the filter's structure (`cache::filter_shape`:
//! fields, operators and value types), the sort, the projection and the collation, so a filter
//! set for one projection or collation leaves queries with another alone. The projection counts
//! by the fields it needs, as mongod encodes it: an inclusion by its sorted field names (with
//! `_id` unless excluded), one that needs the whole document (an exclusion) like none at all;
//! computed fields count by their names, where mongod counts the fields they read. The
//! collation is the one the query runs under: a filter set without one stands for the
//! collection's default. Only `find` (and its explain) tells the planner its projection
//! ([`projection_scope`]); aggregate, count and distinct plan as projection-less queries.
//!
//! Filters live in memory, by namespace, as in mongod: they do not survive a restart, and they
//! go with their collection: dropped with it or its database ([`forget`], [`forget_db`]),
//! moved by a rename within its database ([`rename`]).

use super::cache::filter_shape;
use crate::error::CommandResult;
use crate::query::collation::{Collation, Spec};
use bson::{Bson, Document};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use storage::{Collection, IndexInfo};

/// A query shape as index filters key it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    query: Document,
    sort: Document,
    projection: Option<Vec<String>>,
    /// As given; `None` stands for the collection's default collation.
    collation: Option<Spec>,
}

/// One filter: its shape, and the document `planCacheListFilters` shows.
struct Entry {
    shape: Shape,
    listed: Document,
}

static FILTERS: Mutex<BTreeMap<String, Vec<Entry>>> = Mutex::new(BTreeMap::new());

fn filters() -> std::sync::MutexGuard<'static, BTreeMap<String, Vec<Entry>>> {
    FILTERS.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    static PROJECTION: RefCell<Option<Arc<Document>>> = const { RefCell::new(None) };
}

/// Makes `projection` the running query's (for the filters' shape) until the scope drops.
pub fn projection_scope(projection: Option<&Document>) -> crate::scoped::Installed<Arc<Document>> {
    crate::scoped::replace(&PROJECTION, projection.cloned().map(Arc::new))
}

fn is_exclusion(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => !b,
        Bson::Int32(n) => *n == 0,
        Bson::Int64(n) => *n == 0,
        Bson::Double(n) => *n == 0.0,
        _ => false,
    }
}

/// The fields a projection stands for in a shape; `None` when it needs the whole document.
fn projection_shape(projection: &Document) -> Option<Vec<String>> {
    if projection
        .iter()
        .any(|(k, v)| k != "_id" && is_exclusion(v))
    {
        return None;
    }
    let mut fields: Vec<String> = projection
        .iter()
        .filter(|(_, v)| !is_exclusion(v))
        .map(|(k, _)| k.clone())
        .collect();
    if fields.is_empty() {
        return None;
    }
    if !projection.contains_key("_id") {
        fields.push("_id".into());
    }
    fields.sort();
    Some(fields)
}

impl Shape {
    /// The shape a plan-cache command names (`query`, `sort`, `projection`, `collation`, each
    /// an object already); a bad collation gets its parse error.
    pub fn of_command(named: &Document) -> CommandResult<Shape> {
        let part = |k: &str| named.get_document(k).cloned().unwrap_or_default();
        let collation = match named.get_document("collation") {
            Ok(c) => Some(Spec::parse(c)?),
            Err(_) => None,
        };
        Ok(Shape {
            query: filter_shape(&part("query")),
            sort: part("sort"),
            projection: projection_shape(&part("projection")),
            collation,
        })
    }

    /// The collation as the command gave it.
    pub fn collation(&self) -> Option<&Spec> {
        self.collation.as_ref()
    }

    /// The collation a filter of this shape is for on `coll` (`None`: the simple one).
    fn collation_on(&self, coll: &Collection) -> Option<Collation> {
        let spec = match &self.collation {
            Some(s) => Some(s.clone()),
            None => coll.default_collation().and_then(|c| Spec::parse(&c).ok()),
        };
        match spec {
            Some(Spec::Locale(c)) => Some(c),
            _ => None,
        }
    }

    /// Whether the running query (`filter`, `sort`, its projection and collator) is of this
    /// shape on `coll`.
    fn matches(&self, coll: &Collection, filter: &Document, sort: &Document) -> bool {
        let projection = crate::scoped::current(&PROJECTION);
        let running = crate::query::collator::current().map(|c| c.spec().clone());
        self.sort == *sort
            && self.projection == projection.and_then(|p| projection_shape(&p))
            && self.query == filter_shape(filter)
            && self.collation_on(coll) == running
    }
}

/// Records a filter of `shape` (`listed` is what `planCacheListFilters` shows), replacing one
/// of the same shape.
pub fn set(ns: &str, shape: Shape, listed: Document) {
    let mut all = filters();
    let list = all.entry(ns.to_string()).or_default();
    list.retain(|f| f.shape != shape);
    list.push(Entry { shape, listed });
}

/// Forgets the filter of one shape, or every filter of `ns`.
pub fn clear(ns: &str, shape: Option<&Shape>) {
    let mut all = filters();
    match shape {
        None => {
            all.remove(ns);
        }
        Some(shape) => {
            if let Some(list) = all.get_mut(ns) {
                list.retain(|f| f.shape != *shape);
            }
        }
    }
}

/// Forgets the filters of a dropped collection (`db.coll`).
pub fn forget(ns: &str) {
    filters().remove(ns);
}

/// Forgets the filters of every collection of a dropped database.
pub fn forget_db(db: &str) {
    let prefix = format!("{db}.");
    filters().retain(|ns, _| !ns.starts_with(&prefix));
}

/// A rename: the target's filters go (it was dropped or did not exist); the source's follow
/// the collection within its database and are dropped with it across databases.
pub fn rename(from: &str, to: &str) {
    let mut all = filters();
    all.remove(to);
    let moved = all.remove(from);
    let same_db = from.split_once('.').map(|(d, _)| d) == to.split_once('.').map(|(d, _)| d);
    if let (true, Some(list)) = (same_db, moved) {
        all.insert(to.to_string(), list);
    }
}

/// The filters of `ns`, as `planCacheListFilters` shows them.
pub fn list(ns: &str) -> Vec<Document> {
    filters()
        .get(ns)
        .map(|l| l.iter().map(|f| f.listed.clone()).collect())
        .unwrap_or_default()
}

/// Index hints a running query brings from outside the planner (mongod 8.0's query settings,
/// `crate::query_settings`): the indexes allowed on a namespace, or None when it names none.
pub trait AllowedIndexes: Send + Sync {
    fn allowed_on(&self, db: &str, coll: &str) -> Option<Vec<Bson>>;
}

thread_local! {
    static HINTS: RefCell<Option<Arc<dyn AllowedIndexes>>> = const { RefCell::new(None) };
}

/// Keeps a query's index hints current for the planner on this thread until dropped.
pub type HintsGuard = crate::scoped::Installed<Arc<dyn AllowedIndexes>>;

/// Makes `hints` the running query's index hints on this thread.
pub fn hints_scope(hints: Arc<dyn AllowedIndexes>) -> HintsGuard {
    crate::scoped::replace(&HINTS, Some(hints))
}

/// The indexes the running query's hints allow on `coll` (None: no hints for it).
pub fn hinted(coll: &Collection) -> Option<Vec<Bson>> {
    let hints = crate::scoped::current(&HINTS)?;
    let (db, name) = coll.namespace();
    hints.allowed_on(&db, &name)
}

/// The indexes (names or key patterns) a filter allows for this query, if one is set.
pub fn allowed(coll: &Collection, filter: &Document, sort: Option<&Document>) -> Option<Vec<Bson>> {
    let (db, name) = coll.namespace();
    let sort = sort.cloned().unwrap_or_default();
    let all = filters();
    let entry = all
        .get(&format!("{db}.{name}"))?
        .iter()
        .find(|f| f.shape.matches(coll, filter, &sort))?;
    Some(
        entry
            .listed
            .get_array("indexes")
            .cloned()
            .unwrap_or_default(),
    )
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

    fn shape(named: Document) -> Shape {
        Shape::of_command(&named).unwrap()
    }

    #[test]
    fn shapes_match_on_structure_and_sort_not_values() {
        let s = shape(doc! { "query": { "a": 1, "b": { "$gt": 2 } }, "sort": { "a": 1 } });
        let other = |named| shape(named) == s;
        assert!(other(
            doc! { "query": { "a": 7, "b": { "$gt": 9 } }, "sort": { "a": 1 } }
        ));
        assert!(!other(doc! { "query": { "a": 7, "b": { "$gt": 9 } } }));
        assert!(!other(
            doc! { "query": { "a": "x", "b": { "$gt": 9 } }, "sort": { "a": 1 } }
        ));
        assert!(!other(doc! { "query": { "a": 7 }, "sort": { "a": 1 } }));
    }

    #[test]
    fn projections_count_by_the_fields_they_need() {
        let p = |d: Document| projection_shape(&d);
        assert_eq!(p(doc! { "a": 1 }), p(doc! { "_id": 1, "a": true }));
        assert_ne!(p(doc! { "a": 1 }), p(doc! { "a": 1, "_id": 0 }));
        assert_ne!(p(doc! { "a": 1 }), p(doc! { "b": 1 }));
        assert_eq!(
            p(doc! { "a": 0 }),
            None,
            "an exclusion needs the whole document"
        );
        assert_eq!(p(doc! { "_id": 0 }), None);
        assert_eq!(p(doc! {}), None);
    }

    #[test]
    fn collations_are_part_of_the_shape() {
        let q = doc! { "query": { "a": 1 } };
        let mut fr = q.clone();
        fr.insert("collation", doc! { "locale": "fr" });
        assert_ne!(shape(q.clone()), shape(fr.clone()));
        assert_eq!(shape(fr.clone()), shape(fr));
        let mut bad = q;
        bad.insert("collation", doc! { "locale": "fr", "bogus": 1 });
        assert!(Shape::of_command(&bad).is_err());
    }

    #[test]
    fn set_replaces_a_shape_and_clear_forgets() {
        let ns = "filters_unit.c";
        let listed = |i: &str| doc! { "indexes": [i] };
        set(ns, shape(doc! { "query": { "a": 1 } }), listed("a_1"));
        set(ns, shape(doc! { "query": { "a": 2 } }), listed("b_1"));
        set(ns, shape(doc! { "query": { "b": 2 } }), listed("b_1"));
        let proj = doc! { "query": { "b": 2 }, "projection": { "b": 1 } };
        set(ns, shape(proj.clone()), listed("b_1"));
        assert_eq!(
            list(ns).len(),
            3,
            "the second {{a}} filter replaced the first"
        );
        clear(ns, Some(&shape(doc! { "query": { "a": 5 } })));
        assert_eq!(list(ns).len(), 2);
        clear(ns, Some(&shape(proj)));
        assert_eq!(list(ns).len(), 1);
        clear(ns, None);
        assert!(list(ns).is_empty());
    }

    #[test]
    fn filters_go_with_their_collection() {
        let a = shape(doc! { "query": { "a": 1 } });
        let listed = doc! { "indexes": ["a_1"] };
        set("filters_drop.c", a.clone(), listed.clone());
        set("filters_drop.d", a.clone(), listed.clone());
        set("filters_drop2.c", a.clone(), listed.clone());
        forget("filters_drop.c");
        assert!(list("filters_drop.c").is_empty());
        rename("filters_drop.d", "filters_drop.e");
        assert!(list("filters_drop.d").is_empty());
        assert_eq!(list("filters_drop.e").len(), 1);
        rename("filters_drop.e", "filters_drop3.e");
        assert!(list("filters_drop3.e").is_empty(), "not across databases");
        set("filters_drop.f", a, listed);
        forget_db("filters_drop");
        assert!(list("filters_drop.f").is_empty());
        assert_eq!(list("filters_drop2.c").len(), 1);
    }
}
