//! The query planner: turns a filter (and a sort) into a collection scan, an `_id` point look-up
//! or an index scan, and explains the choice in mongod's shapes.
//!
//! Candidates come from every visible index whose leading field(s) the filter constrains
//! (equality, `$in`, ranges, `null` on non-sparse indexes), from an index whose key order gives
//! the requested sort, and from `hint`. Partial indexes are used only when the filter contains
//! every condition of their filter expression. The choice is a short trial, like mongod's
//! multi-planner: each candidate counts its index entries up to `TRIAL_KEYS_MAX`; the fewest
//! wins, and a plan that also provides the sort wins ties. A top-level `$or` whose every branch
//! has an index candidate becomes an index union (`or`); an inclusion projection of key fields
//! is answered from the keys (`covered`); `count` and `distinct` may read keys only (`keyscan`);
//! `min`/`max` bound a hinted index scan (`minmax`).

pub mod bounds;
pub mod cache;
pub mod collated;
pub mod covered;
pub mod explain;
pub mod filters;
pub mod keyscan;
pub mod minmax;
pub mod or;
pub mod wildcard;
pub mod wildcard_compound;

use crate::query::matcher::Filter;
use crate::query::sort::SortSpec;
use bounds::{ValueInterval, byte_intervals, conjunction};
use bson::{Bson, Document, doc};
use std::ops::Bound;
use storage::{Collection, Direction, IndexInfo};

/// Index entries a candidate may read during the trial.
pub const TRIAL_KEYS_MAX: usize = 10_000;
/// Most `$or` branches planned as an index union (more: collection scan).
pub const OR_BRANCHES_MAX: usize = 64;

#[derive(Debug, Clone)]
pub struct IndexPlan {
    pub index_name: String,
    pub key_pattern: Document,
    pub multikey: bool,
    /// Per leading field, the value intervals (explain's `indexBounds`).
    pub field_bounds: Vec<(String, Vec<ValueInterval>)>,
    /// Byte intervals `[lo, hi)` over encoded keys, in scan order for `Forward`.
    pub intervals: Vec<(Vec<u8>, Vec<u8>)>,
    pub direction: Direction,
    /// The scan's order satisfies the requested sort (no SORT stage needed).
    pub provides_sort: bool,
    /// The index's `unique`, `sparse` and partial options, for explain.
    pub flags: IndexFlags,
}

/// Index options explain reports (`isUnique`, `isSparse`, `isPartial`, `collation`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexFlags {
    pub unique: bool,
    pub sparse: bool,
    pub partial: bool,
    /// A collated index's collation: its keys hold sort keys, not the strings themselves.
    pub collation: Option<Document>,
}

impl IndexFlags {
    pub fn of(ix: &IndexInfo) -> IndexFlags {
        IndexFlags {
            unique: ix.spec.unique || ix.spec.name == storage::ID_INDEX_NAME,
            sparse: ix.spec.sparse,
            partial: ix.spec.partial_filter.is_some(),
            collation: ix.spec.collation().cloned(),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Plan {
    CollScan {
        direction: Direction,
    },
    /// An `_id` look-up; the value as the `_id` index keys it (see `collated::id_lookup`).
    IdPoint(Bson),
    Index(IndexPlan),
    /// A clustered collection read in its `_id` order (`for_collection`): mongod 7.0's
    /// CLUSTERED_IXSCAN (a collection scan bounded by `minRecord`/`maxRecord`), or its COLLSCAN
    /// when no `_id` bound is given but the order serves the sort. It runs over the `_id`
    /// index; what it reads counts as documents examined, and it is never covered.
    Clustered(IndexPlan),
    /// An index union: each branch of a top-level `$or` scans its own index; RecordIds seen
    /// before are skipped. With `merge`, every branch's index gives that sort and the branches
    /// are merged in sort order (SORT_MERGE); without, they are read one after the other (OR).
    Or {
        branches: Vec<IndexPlan>,
        merge: Option<(SortSpec, Document)>,
    },
}

impl Plan {
    /// mongod's `planSummary`: `COLLSCAN`, `IDHACK`, `IXSCAN { a: 1 }` (one per `$or` branch).
    pub fn summary(&self) -> String {
        let ixscan = |p: &IndexPlan| {
            let fields: Vec<String> = p
                .key_pattern
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            format!("IXSCAN {{ {} }}", fields.join(", "))
        };
        match self {
            Plan::CollScan { .. } => "COLLSCAN".into(),
            Plan::IdPoint(_) => "IDHACK".into(),
            Plan::Index(p) => ixscan(p),
            Plan::Clustered(p) if p.field_bounds.is_empty() => "COLLSCAN".into(),
            Plan::Clustered(_) => "CLUSTERED_IXSCAN".into(),
            Plan::Or { branches, .. } => branches.iter().map(ixscan).collect::<Vec<_>>().join(", "),
        }
    }

    pub fn provides_sort(&self) -> bool {
        match self {
            Plan::Index(p) | Plan::Clustered(p) => p.provides_sort,
            Plan::Or { merge, .. } => merge.is_some(),
            _ => false,
        }
    }
}

pub struct Choice {
    pub winner: Plan,
    pub rejected: Vec<Plan>,
}

/// Whether the index key pattern gives `sort` in forward or backward order.
fn sort_direction(key: &Document, sort: &Document) -> Option<Direction> {
    if sort.is_empty() || sort.len() > key.len() {
        return None;
    }
    let sign = |v: &Bson| crate::query::types::as_f64(v).map(|f| f < 0.0);
    let mut dir = None;
    for ((sf, sv), (kf, kv)) in sort.iter().zip(key.iter()) {
        if sf != kf {
            return None;
        }
        let same = sign(sv)? == sign(kv)?;
        match dir {
            None => dir = Some(same),
            Some(d) if d != same => return None,
            _ => {}
        }
    }
    dir.map(|same| {
        if same {
            Direction::Forward
        } else {
            Direction::Backward
        }
    })
}

/// Whether the key pattern gives `sort` once its leading fields fixed to one point by the bounds
/// are skipped (index `{a: 1, c: 1}` with `a: 5` gives the sort `{c: 1}`).
fn sort_direction_after_points(
    key: &Document,
    sort: &Document,
    field_bounds: &[(String, Vec<ValueInterval>)],
) -> Option<Direction> {
    let points = key
        .keys()
        .take_while(|k| {
            field_bounds
                .iter()
                .any(|(f, ivs)| f == *k && ivs.len() == 1 && ivs[0].is_point())
        })
        .count();
    (0..=points).find_map(|skip| {
        let rest: Document = key
            .iter()
            .skip(skip)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        sort_direction(&rest, sort)
    })
}

/// A partial index may answer only filters that include every condition of its expression.
pub(crate) fn implies(filter_doc: &Document, partial: &Document) -> bool {
    partial.iter().all(|(k, v)| filter_doc.get(k) == Some(v))
}

/// The candidate plan of one index for a filter (and sort), if the index can help.
pub fn index_candidate(
    ix: &IndexInfo,
    filter: &Filter,
    sort: Option<&Document>,
    forced: bool,
) -> Option<IndexPlan> {
    // A text index answers `$text` only, through its own stage (`exec::text`).
    if storage::text::is_text_key(&ix.spec.key) {
        return None;
    }
    // A wildcard index plans per path (`wildcard::candidates`).
    if storage::wildcard::is_wildcard_key(&ix.spec.key) {
        return None;
    }
    // An index of another collation than the query's bounds non-string values only and
    // never gives the order (`collated`); a hint still gets its full scan, the filter deciding.
    let fit = collated::fit(ix);
    let sort = sort.filter(|_| matches!(fit, collated::Fit::Same(_)));
    let preds = conjunction(filter);
    let mut field_bounds = Vec::new();
    let mut product = 1usize;
    for (field, kind) in &ix.spec.key {
        let ivs = if is_sphere(kind) {
            preds
                .iter()
                .filter(|(p, _)| p == field)
                .find_map(|(_, op)| bounds::geo_intervals(op))
        } else if is_flat(kind) {
            let range = storage::flat_range(&ix.spec);
            preds
                .iter()
                .filter(|(p, _)| p == field)
                .find_map(|(_, op)| bounds::flat_geo_intervals(op, range))
        } else {
            collated::field_intervals(&fit, &preds, field, ix.multikey, ix.spec.sparse)
        };
        let ivs = if is_hashed(kind) {
            ivs.and_then(bounds::hashed_points)
        } else {
            ivs
        };
        match ivs {
            Some(ivs)
                if !field_bounds.is_empty()
                    && product.saturating_mul(ivs.len()) > bounds::INTERVALS_MAX =>
            {
                break;
            }
            Some(ivs) => {
                product = product.saturating_mul(ivs.len());
                let is_range = ivs.iter().any(|iv| !iv.is_point());
                field_bounds.push((field.clone(), ivs));
                if is_range {
                    break;
                }
            }
            None => break,
        }
    }
    // A geo index holds only documents with a location: it answers geo predicates only.
    let geo_bound = |f: &String| field_bounds.iter().any(|(b, _)| b == f);
    if ix
        .spec
        .key
        .iter()
        .any(|(f, kind)| is_geo(kind) && !geo_bound(f))
    {
        return None;
    }
    let sort_dir = sort
        .and_then(|s| sort_direction_after_points(&ix.spec.key, s, &field_bounds))
        .filter(|_| !ix.multikey);
    if field_bounds.is_empty() && sort_dir.is_none() && !forced {
        return None;
    }
    let fields: Vec<Vec<ValueInterval>> = field_bounds.iter().map(|(_, v)| v.clone()).collect();
    let intervals = if fields.is_empty() {
        vec![(Vec::new(), vec![0xFF; 64])]
    } else {
        byte_intervals(&ix.spec.key, &fields)
    };
    // Several intervals of a leading `$in` come out in index order, which breaks a sort only when
    // the sort is on a later field; keep it simple: several intervals never provide the sort.
    let provides_sort = sort_dir.is_some()
        && (intervals.len() == 1 || field_bounds.iter().all(|(_, v)| v.len() == 1));
    Some(IndexPlan {
        index_name: ix.spec.name.clone(),
        key_pattern: ix.spec.key.clone(),
        multikey: ix.multikey,
        field_bounds,
        intervals,
        direction: sort_dir.unwrap_or(Direction::Forward),
        provides_sort,
        flags: IndexFlags::of(ix),
    })
}

/// Every unforced candidate plan of one index: its `index_candidate`, or for a wildcard index
/// one plan per usable path (`wildcard::candidates`).
pub(crate) fn candidates_of(
    coll: &Collection,
    ix: &IndexInfo,
    filter: &Filter,
    sort: Option<&Document>,
) -> Vec<IndexPlan> {
    let mut plans: Vec<IndexPlan> = index_candidate(ix, filter, sort, false)
        .into_iter()
        .collect();
    plans.extend(wildcard::candidates(coll, ix, filter, sort));
    plans
}

/// A key-pattern value that makes the field hashed (`{a: "hashed"}`).
pub fn is_hashed(kind: &Bson) -> bool {
    kind.as_str() == Some(storage::keys::HASHED)
}

/// A key-pattern value that makes the field a spherical geo field (`{loc: "2dsphere"}`).
pub fn is_sphere(kind: &Bson) -> bool {
    kind.as_str() == Some(storage::keys::SPHERE)
}

/// A key-pattern value that makes the field a flat (legacy) geo field (`{loc: "2d"}`).
pub fn is_flat(kind: &Bson) -> bool {
    kind.as_str() == Some(storage::keys::FLAT)
}

/// Either kind of geo field.
pub fn is_geo(kind: &Bson) -> bool {
    is_sphere(kind) || is_flat(kind)
}

/// Whether every field of a key pattern stores its value as it is (no hashed or geo fields), so
/// keys can be decoded back into values (covered plans, key-only scans).
pub fn is_plain(key: &Document) -> bool {
    key.values().all(|v| !matches!(v, Bson::String(_)))
        && !key
            .keys()
            .any(|k| k == storage::wildcard::PATH_FIELD || storage::wildcard::is_wildcard_field(k))
}

/// The `_id` look-up as an index plan (how an `IdPoint` executes).
pub fn id_index_plan(id: &Bson) -> IndexPlan {
    let key_pattern = bson::doc! { "_id": 1 };
    let field_bounds = vec![("_id".to_string(), vec![ValueInterval::point(id.clone())])];
    // What `byte_intervals` gives a point on `{_id: 1}`, with the key encoded once (every
    // look-up by `_id` plans this).
    let key = storage::keycode::encode_bson_key(std::slice::from_ref(id), &[false]);
    let intervals = vec![(key.clone(), storage::keys::prefix_end(&key))];
    IndexPlan {
        index_name: storage::ID_INDEX_NAME.to_string(),
        key_pattern,
        multikey: false,
        field_bounds,
        intervals,
        direction: Direction::Forward,
        provides_sort: false,
        flags: IndexFlags {
            unique: true,
            ..IndexFlags::default()
        },
    }
}

/// The indexes a key-only plan (COUNT_SCAN, DISTINCT_SCAN) may read: not a clustered
/// collection's `_id` index, which is its record order (mongod scans it as documents).
pub fn key_only_indexes(coll: &Collection) -> Vec<IndexInfo> {
    let mut indexes = coll.indexes();
    if coll.is_clustered() {
        indexes.retain(|ix| ix.spec.name != storage::ID_INDEX_NAME);
    }
    indexes
}

/// The whole `_id` index in `direction`: a clustered collection's scan in its own order.
pub fn clustered_order_plan(direction: Direction) -> IndexPlan {
    IndexPlan {
        index_name: storage::ID_INDEX_NAME.to_string(),
        key_pattern: doc! { "_id": 1 },
        multikey: false,
        field_bounds: Vec::new(),
        intervals: vec![(Vec::new(), vec![0xFF; 64])],
        direction,
        provides_sort: false,
        flags: IndexFlags {
            unique: true,
            ..IndexFlags::default()
        },
    }
}

/// Index entries in a plan's intervals, counted up to `cap`.
pub(crate) fn trial_count(coll: &Collection, plan: &IndexPlan, cap: usize) -> usize {
    let mut n = 0;
    for (lo, hi) in &plan.intervals {
        let got = coll
            .index_scan(
                &plan.index_name,
                Bound::Included(lo),
                Bound::Excluded(hi),
                Direction::Forward,
                None,
                cap - n,
            )
            .map_or(0, |v| v.len());
        n += got;
        if n >= cap {
            break;
        }
    }
    n
}

/// The `_id` value of a filter that is exactly `{_id: <scalar>}` or `{_id: {$eq: <scalar>}}`.
pub fn id_point(filter: &Document) -> Option<&Bson> {
    if filter.len() != 1 {
        return None;
    }
    let v = filter.get("_id")?;
    let v = match v {
        Bson::Document(d) if d.len() == 1 && d.contains_key("$eq") => d.get("$eq")?,
        v => v,
    };
    match v {
        Bson::Document(_)
        | Bson::Array(_)
        | Bson::RegularExpression(_)
        | Bson::Null
        | Bson::Undefined => None,
        Bson::MinKey | Bson::MaxKey => None,
        v => Some(v),
    }
}

/// Choose a plan. `hint` is an index name already validated by the caller.
pub fn choose(
    coll: &Collection,
    filter: &Filter,
    filter_doc: &Document,
    sort: Option<&Document>,
    hint: Option<&str>,
) -> Choice {
    choose_cached(coll, filter, filter_doc, sort, hint, true).0
}

/// Ties a filter's `$text` to the collection's text index, if it has one (see `query::text`).
pub fn bind_text(coll: &Collection, filter: &Filter) {
    let Some(query) = crate::query::text::text_of(filter) else {
        return;
    };
    if query.bound().is_some() {
        return;
    }
    for ix in coll.indexes().into_iter().filter(|ix| !ix.spec.hidden) {
        if let Ok(Some(spec)) = storage::text::TextSpec::from_index(&ix.spec.key, &ix.spec.extra) {
            query.bind(&ix.spec.name, spec);
            return;
        }
    }
}

/// [`choose`], saying whether the plan came from the plan cache; with `record` false (explain)
/// the cache is read but never written. The winner's summary is noted on the operation (for
/// the profiler and the slow-query line).
pub fn choose_cached(
    coll: &Collection,
    filter: &Filter,
    filter_doc: &Document,
    sort: Option<&Document>,
    hint: Option<&str>,
    record: bool,
) -> (Choice, bool) {
    bind_text(coll, filter);
    let (choice, cached) = choose_plan(coll, filter, filter_doc, sort, hint, record);
    let choice = for_transaction(for_collection(coll, choice));
    crate::interrupt::note_plan(|| choice.winner.summary());
    if record {
        match (cached, choice.rejected.is_empty()) {
            (true, _) => crate::interrupt::note_from_plan_cache(),
            (false, false) => {
                crate::interrupt::note_flags(crate::interrupt::plan_flags::FROM_MULTI_PLANNER)
            }
            (false, true) => {}
        }
    }
    (choice, cached)
}

/// On a clustered collection the `_id` index is the collection's own order: its plans become
/// clustered scans, an `_id` look-up too (mongod 7.0 has no IDHACK there). Elsewhere the
/// choice is unchanged.
pub fn for_collection(coll: &Collection, choice: Choice) -> Choice {
    if !coll.is_clustered() {
        return choice;
    }
    let clustered = |plan: Plan| match plan {
        Plan::IdPoint(id) => Plan::Clustered(id_index_plan(&id)),
        Plan::Index(p) if p.index_name == storage::ID_INDEX_NAME => Plan::Clustered(p),
        p => p,
    };
    Choice {
        winner: clustered(choice.winner),
        rejected: choice.rejected.into_iter().map(clustered).collect(),
    }
}

/// Inside a transaction (or a snapshot read) an index plan still finds every document the
/// reader may see: `exec::scan` re-reads each entry's document as the reader sees it and adds
/// the documents changed since its snapshot, the filter deciding. It does not keep the index's
/// order (a document whose key changed after the snapshot sits at its new key, the added ones
/// come last), so no plan provides the sort there: the SORT stage is added back, and an index
/// union reads its branches one after the other instead of merging them. Elsewhere the choice
/// is unchanged. The plan cache is not involved: the choice is the same as outside, only the
/// way it runs differs.
pub fn for_transaction(choice: Choice) -> Choice {
    if !crate::txn::active() {
        return choice;
    }
    let unsorted = |plan: Plan| match plan {
        Plan::Index(p) => Plan::Index(IndexPlan {
            provides_sort: false,
            ..p
        }),
        Plan::Clustered(p) => Plan::Clustered(IndexPlan {
            provides_sort: false,
            ..p
        }),
        Plan::Or { branches, .. } => Plan::Or {
            branches: branches
                .into_iter()
                .map(|p| IndexPlan {
                    provides_sort: false,
                    ..p
                })
                .collect(),
            merge: None,
        },
        p => p,
    };
    Choice {
        winner: unsorted(choice.winner),
        rejected: choice.rejected.into_iter().map(unsorted).collect(),
    }
}

fn choose_plan(
    coll: &Collection,
    filter: &Filter,
    filter_doc: &Document,
    sort: Option<&Document>,
    hint: Option<&str>,
    record: bool,
) -> (Choice, bool) {
    if hint.is_none()
        && let Some(id) = id_point(filter_doc)
        && let Some(id) = collated::id_lookup(coll, id)
    {
        let choice = Choice {
            winner: Plan::IdPoint(id),
            rejected: vec![],
        };
        return (choice, false);
    }
    // An index filter for this shape limits the candidates and overrides `hint` (mongod); the
    // plan cache is bypassed, so its entries never name an index the filter excludes.
    // Query settings' index hints come first (mongod 8.0), then an index filter.
    let allowed = filters::hinted(coll).or_else(|| filters::allowed(coll, filter_doc, sort));
    let hint = hint.filter(|_| allowed.is_none());
    let mut indexes = coll.indexes();
    if let Some(allowed) = &allowed {
        indexes.retain(|ix| filters::permits(allowed, ix));
    }
    if let Some(name) = hint
        && let Some(ix) = indexes.iter().find(|i| i.spec.name == name)
        && let Some(p) = index_candidate(ix, filter, sort, true).or_else(|| {
            wildcard::candidates(coll, ix, filter, sort)
                .into_iter()
                .next()
        })
    {
        let choice = Choice {
            winner: Plan::Index(p),
            rejected: vec![],
        };
        return (choice, false);
    }
    let key = (hint.is_none() && allowed.is_none())
        .then(|| cache::Key::with_indexes(coll, &indexes, filter_doc, sort));
    if let Some(key) = &key
        && let Some(name) = cache::get(key, coll)
    {
        let planned = indexes
            .iter()
            .find(|ix| ix.spec.name == name && !ix.spec.hidden)
            .and_then(|ix| index_candidate(ix, filter, sort, false))
            .filter(|p| !p.field_bounds.is_empty() || p.provides_sort);
        match planned {
            Some(p) => {
                let choice = Choice {
                    winner: Plan::Index(p),
                    rejected: vec![],
                };
                return (choice, true);
            }
            None => cache::remove(key),
        }
    }
    let choice = choose_by_trial(coll, &indexes, filter, filter_doc, sort);
    if record
        && let (Some(key), Some((works, Plan::Index(p)))) = (&key, &choice.1)
        && !wildcard::is_wildcard_plan(p)
    {
        let from = doc! {
            "query": filter_doc.clone(),
            "sort": sort.cloned().unwrap_or_default(),
            "projection": {},
        };
        cache::put(key, coll, from, p, *works);
    }
    (choice.0, false)
}

/// The trial among the candidates, and the winner's trial count when there was a trial.
fn choose_by_trial(
    coll: &Collection,
    indexes: &[IndexInfo],
    filter: &Filter,
    filter_doc: &Document,
    sort: Option<&Document>,
) -> (Choice, Option<(u64, Plan)>) {
    let mut candidates: Vec<IndexPlan> = indexes
        .iter()
        .filter(|ix| !ix.spec.hidden)
        .filter(|ix| {
            ix.spec
                .partial_filter
                .as_ref()
                .is_none_or(|p| implies(filter_doc, p))
        })
        .flat_map(|ix| candidates_of(coll, ix, filter, sort))
        .filter(|p| !p.field_bounds.is_empty() || p.provides_sort)
        .collect();
    let union = or::or_candidate(coll, indexes, filter_doc, sort);
    if candidates.is_empty() && union.is_none() {
        let choice = Choice {
            winner: Plan::CollScan {
                direction: Direction::Forward,
            },
            rejected: vec![],
        };
        return (choice, None);
    }
    let mut scored: Vec<(usize, bool, Plan)> = candidates
        .drain(..)
        .map(|p| {
            let keys = if p.field_bounds.is_empty() {
                TRIAL_KEYS_MAX
            } else {
                trial_count(coll, &p, TRIAL_KEYS_MAX)
            };
            (keys, !p.provides_sort, Plan::Index(p))
        })
        .collect();
    if let Some((keys, plan)) = union {
        scored.push((keys, !plan.provides_sort(), plan));
    }
    // Stable: among equals the single-index plans (pushed first) win over the union.
    scored.sort_by_key(|a| (a.0, a.1));
    let works = scored.first().map(|s| s.0 as u64).unwrap_or(0);
    let mut plans = scored.into_iter().map(|(_, _, p)| p);
    let winner = plans.next().unwrap_or(Plan::CollScan {
        direction: Direction::Forward,
    });
    let mut rejected: Vec<Plan> = plans.collect();
    rejected.push(Plan::CollScan {
        direction: Direction::Forward,
    });
    let trial = Some((works, winner.clone()));
    (Choice { winner, rejected }, trial)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn sort_directions() {
        assert_eq!(
            sort_direction(&doc! { "a": 1, "b": -1 }, &doc! { "a": 1 }),
            Some(Direction::Forward)
        );
        assert_eq!(
            sort_direction(&doc! { "a": 1, "b": -1 }, &doc! { "a": -1, "b": 1 }),
            Some(Direction::Backward)
        );
        assert_eq!(
            sort_direction(&doc! { "a": 1, "b": -1 }, &doc! { "a": 1, "b": 1 }),
            None
        );
        assert_eq!(sort_direction(&doc! { "a": 1 }, &doc! { "b": 1 }), None);
        let point = vec![("a".to_string(), vec![ValueInterval::point(Bson::Int32(5))])];
        let key = doc! { "a": 1, "c": -1 };
        assert_eq!(
            sort_direction_after_points(&key, &doc! { "c": 1 }, &point),
            Some(Direction::Backward)
        );
        assert_eq!(
            sort_direction_after_points(&key, &doc! { "c": 1 }, &[]),
            None,
            "no point on a"
        );
    }

    #[test]
    fn id_point_intervals_are_the_general_ones() {
        for id in [
            Bson::Int32(7),
            Bson::String("k".into()),
            Bson::Double(-0.0),
            Bson::Document(doc! { "a": 1 }),
            Bson::Null,
        ] {
            let general = byte_intervals(
                &doc! { "_id": 1 },
                &[vec![ValueInterval::point(id.clone())]],
            );
            assert_eq!(id_index_plan(&id).intervals, general, "{id:?}");
        }
    }

    #[test]
    fn partial_implication() {
        assert!(implies(
            &doc! { "a": 1, "status": "A" },
            &doc! { "status": "A" }
        ));
        assert!(!implies(&doc! { "a": 1 }, &doc! { "status": "A" }));
    }

    #[test]
    fn clustered_collections_plan_id_as_clustered_scans() {
        let dir = tempfile::tempdir().unwrap();
        let engine = storage::Engine::open(dir.path(), storage::EngineOptions::default()).unwrap();
        let spec = doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_", "unique": true };
        let plain = engine.create_collection("t", "p", Document::new()).unwrap();
        let clustered = engine
            .create_collection("t", "c", doc! { "clusteredIndex": spec })
            .unwrap();
        let legacy = engine
            .create_collection("t", "b", doc! { "clusteredIndex": true })
            .unwrap();
        assert!(clustered.is_clustered() && !plain.is_clustered() && !legacy.is_clustered());
        let summary = |coll: &Collection, filter: Document, sort: Option<Document>| {
            let f = Filter::parse(&filter).unwrap();
            let choice = choose(coll, &f, &filter, sort.as_ref(), None);
            (choice.winner.summary(), choice.winner.provides_sort())
        };
        let point = doc! { "_id": 5 };
        let range = doc! { "_id": { "$gt": 3 } };
        assert_eq!(summary(&plain, point.clone(), None).0, "IDHACK");
        assert_eq!(summary(&clustered, point, None).0, "CLUSTERED_IXSCAN");
        assert_eq!(summary(&plain, range.clone(), None).0, "IXSCAN { _id: 1 }");
        assert_eq!(summary(&clustered, range, None).0, "CLUSTERED_IXSCAN");
        assert_eq!(
            summary(&clustered, doc! {}, Some(doc! { "_id": -1 })),
            ("COLLSCAN".to_string(), true),
            "the order serves the sort without bounds"
        );
        assert_eq!(summary(&clustered, doc! { "a": 1 }, None).0, "COLLSCAN");
        let names = |c: &Collection| -> Vec<String> {
            key_only_indexes(c)
                .into_iter()
                .map(|i| i.spec.name)
                .collect()
        };
        assert_eq!(names(&plain), vec!["_id_".to_string()]);
        assert!(
            names(&clustered).is_empty(),
            "no COUNT_SCAN over the clustered order"
        );
    }

    #[test]
    fn id_point_lookup_shapes() {
        assert!(id_point(&doc! { "_id": 1 }).is_some());
        assert!(id_point(&doc! { "_id": { "$eq": "x" } }).is_some());
        assert!(id_point(&doc! { "_id": { "$gt": 1 } }).is_none());
        assert!(id_point(&doc! { "_id": 1, "a": 2 }).is_none());
        assert!(id_point(&doc! { "_id": [1] }).is_none());
    }
}
