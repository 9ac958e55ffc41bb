//! Plans over a wildcard index (`storage::wildcard`): one candidate per path of the filter's
//! top-level conjunction that the index covers, scanning that path's `(path, value)` keys. The
//! plan's key pattern is mongod's `{$_path: 1, <path>: 1}` and its bounds say so in explain.
//!
//! The rules, as mongod's: equality (an empty object included), `$in`, ranges, `$exists: true`
//! and a prefix regex use the index; `null`, objects and arrays as values, `$exists: false`
//! and negations do not (the index holds no key for a missing field nor for a whole object or
//! array); paths with a numeric component (`a.0`, an array position or a field name) do not
//! either. Whether the path is multikey comes from the index's multikey entries for the path
//! and each of its prefixes; a multikey path keeps one predicate's bounds and never provides a
//! sort. Covered plans are never made (`is_plain` is false for these key patterns).

use super::bounds::{ValueInterval, conjunction, field_intervals_by, op_intervals};
use super::{IndexFlags, IndexPlan, sort_direction};
use crate::query::matcher::{Filter, Op, RegexPred};
use bson::{Bson, Document, doc};
use std::ops::Bound;
use storage::keycode::encode_bson_key;
use storage::wildcard::{Coverage, PATH_FIELD, WildcardSpec, multikey_key};
use storage::{Collection, Direction, IndexInfo};

/// Whether a plan scans a wildcard index.
pub fn is_wildcard_plan(p: &IndexPlan) -> bool {
    p.key_pattern.contains_key(PATH_FIELD)
}

/// The candidate plans of a wildcard index for a filter, one per usable path.
pub fn candidates(
    coll: &Collection,
    ix: &IndexInfo,
    filter: &Filter,
    sort: Option<&Document>,
) -> Vec<IndexPlan> {
    let Ok(Some(spec)) = WildcardSpec::from_index(&ix.spec.key, &ix.spec.extra) else {
        return Vec::new();
    };
    // Only a simple index under the simple collation gives bounds (a collated wildcard
    // index keeps mapped keys, but its plans are not built yet).
    if !matches!(super::collated::fit(ix), super::collated::Fit::Same(None)) {
        return Vec::new();
    }
    if spec.is_compound() {
        return super::wildcard_compound::candidates(coll, ix, &spec, filter);
    }
    let preds = conjunction(filter);
    let mut paths: Vec<&str> = preds.iter().map(|(p, _)| *p).collect();
    paths.sort_unstable();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| candidate(coll, ix, &spec, &preds, path, sort))
        .collect()
}

/// The components of `path` and whether it is multikey in `ix`, when the wildcard term covers
/// it and it can be planned on (no empty, `$`-prefixed or positional component).
pub(super) fn plannable_path<'p>(
    coll: &Collection,
    ix: &IndexInfo,
    spec: &WildcardSpec,
    path: &'p str,
) -> Option<(Vec<&'p str>, bool)> {
    let components: Vec<&str> = path.split('.').collect();
    let unusable =
        |c: &&str| c.is_empty() || c.starts_with('$') || c.bytes().all(|b| b.is_ascii_digit());
    if components.iter().any(unusable) || spec.coverage(&components) != Coverage::Included {
        return None;
    }
    let multikey = (1..=components.len())
        .any(|n| has_multikey_entry(coll, &ix.spec.name, &components[..n].join(".")));
    Some((components, multikey))
}

fn candidate(
    coll: &Collection,
    ix: &IndexInfo,
    spec: &WildcardSpec,
    preds: &[(&str, &Op)],
    path: &str,
    sort: Option<&Document>,
) -> Option<IndexPlan> {
    let (components, multikey) = plannable_path(coll, ix, spec, path)?;
    let exists = preds
        .iter()
        .any(|(p, op)| *p == path && matches!(op, Op::Exists));
    let (values, subpaths) = match field_intervals_by(preds, path, multikey, value_intervals) {
        Some(values) => (values, false),
        // `$exists: true` alone: every key of the path, and those of the paths under it (an
        // object value has keys at its leaves only), unless the projection cuts that subtree.
        None if exists && spec.covers_subtree(&components) => (
            vec![ValueInterval {
                lo: Bson::MinKey,
                hi: Bson::MaxKey,
            }],
            true,
        ),
        None => return None,
    };
    let key = |v: &Bson| encode_bson_key(&[Bson::String(path.to_owned()), v.clone()], &[]);
    let mut intervals: Vec<(Vec<u8>, Vec<u8>)> = values
        .iter()
        .map(|iv| (key(&iv.lo), storage::keys::prefix_end(&key(&iv.hi))))
        .collect();
    let mut path_bounds = vec![ValueInterval::point(Bson::String(path.to_owned()))];
    if subpaths {
        // Paths `a.<anything>` sort between "a." and "a/" ('/' follows '.').
        let (lo, hi) = (format!("{path}."), format!("{path}/"));
        intervals.push((
            encode_bson_key(&[Bson::String(lo.clone())], &[]),
            encode_bson_key(&[Bson::String(hi.clone())], &[]),
        ));
        path_bounds.push(ValueInterval {
            lo: Bson::String(lo),
            hi: Bson::String(hi),
        });
    }
    intervals.sort();
    let sort_dir = sort
        .filter(|_| !multikey && !subpaths && intervals.len() == 1)
        .and_then(|s| sort_direction(&doc! { path: 1 }, s));
    Some(IndexPlan {
        index_name: ix.spec.name.clone(),
        key_pattern: doc! { PATH_FIELD: 1, path: 1 },
        // Several keys of one document may fall in the bounds: the scan must skip repeats.
        multikey: multikey || subpaths,
        field_bounds: vec![
            (PATH_FIELD.to_owned(), path_bounds),
            (path.to_owned(), values),
        ],
        intervals,
        direction: sort_dir.unwrap_or(Direction::Forward),
        provides_sort: sort_dir.is_some(),
        flags: IndexFlags::of(ix),
    })
}

/// Whether some document has an array at `path` (its multikey entry is in the index). The
/// entry is the smallest key with its bytes as a prefix; in a compound index a real key may
/// start with the same bytes (a leading regular value 1), so only an exact match counts.
pub(super) fn has_multikey_entry(coll: &Collection, index: &str, path: &str) -> bool {
    let key = multikey_key(path);
    let end = storage::keys::prefix_end(&key);
    coll.index_scan(
        index,
        Bound::Included(&key),
        Bound::Excluded(&end),
        Direction::Forward,
        None,
        1,
    )
    // Unknown counts as multikey: the plan stays correct, only less tight.
    .map_or(true, |found| found.first().is_some_and(|(k, _)| *k == key))
}

/// The value intervals one operator allows on a wildcard path (`None`: not through the index).
pub(super) fn value_intervals(op: &Op) -> Option<Vec<ValueInterval>> {
    match op {
        // An empty object is a leaf of its own; any other object has keys at its leaves only.
        Op::Eq(Bson::Document(d)) if d.is_empty() => {
            Some(vec![ValueInterval::point(Bson::Document(Document::new()))])
        }
        Op::Eq(Bson::Document(_)) => None,
        Op::In { values, .. } if values.iter().any(|v| matches!(v, Bson::Document(_))) => None,
        Op::Regex(r) => prefix_regex(r),
        // As for a sparse index: `null` also matches a missing field, which has no key.
        op => op_intervals(op, true),
    }
}

/// A regex anchored at the start with a literal prefix (`/^abc/`, no options but `s`): the
/// strings from the prefix up to its successor, and the regex itself as a stored value.
fn prefix_regex(r: &RegexPred) -> Option<Vec<ValueInterval>> {
    if !(r.options.is_empty() || r.options == "s") || r.pattern.contains('|') {
        return None;
    }
    let rest = r.pattern.strip_prefix('^')?;
    let literal = |c: &char| c.is_ascii_alphanumeric() || matches!(c, '_' | ' ' | '-');
    let mut prefix: String = rest.chars().take_while(literal).collect();
    // A quantifier may take the last literal away (`^ab?`).
    if matches!(rest[prefix.len()..].chars().next(), Some('?' | '*' | '{')) {
        prefix.pop();
    }
    let last = prefix.chars().last()?;
    let mut upper = prefix.clone();
    upper.pop();
    upper.push(char::from(last as u8 + 1));
    // The regex as a value (`{a: /^x/}` also matches a stored /^x/); a pattern holding NUL
    // cannot be a stored value, and then the index is not used.
    let stored = bson::Regex {
        pattern: r.pattern.clone().try_into().ok()?,
        options: r.options.clone().try_into().ok()?,
    };
    Some(vec![
        ValueInterval {
            lo: Bson::String(prefix),
            hi: Bson::String(upper),
        },
        ValueInterval::point(Bson::RegularExpression(stored)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intervals(filter: Document) -> Option<Vec<ValueInterval>> {
        let f = Filter::parse(&filter).unwrap();
        let preds = conjunction(&f);
        field_intervals_by(&preds, "a", false, value_intervals)
    }

    #[test]
    fn what_a_wildcard_path_answers() {
        assert_eq!(intervals(doc! { "a": 5 }).unwrap().len(), 1);
        assert_eq!(intervals(doc! { "a": {} }).unwrap().len(), 1);
        assert_eq!(intervals(doc! { "a": { "$in": [1, 2] } }).unwrap().len(), 2);
        assert_eq!(
            intervals(doc! { "a": { "$gt": 1, "$lt": 4 } }).unwrap(),
            vec![ValueInterval {
                lo: Bson::Int32(1),
                hi: Bson::Int32(4)
            }]
        );
        for refused in [
            doc! { "a": null },
            doc! { "a": { "b": 1 } },
            doc! { "a": [1, 2] },
            doc! { "a": { "$in": [1, { "b": 1 }] } },
            doc! { "a": { "$in": [1, null] } },
            doc! { "a": { "$regex": "abc" } },
            doc! { "a": { "$regex": "^abc", "$options": "i" } },
            doc! { "a": { "$regex": "^a|b" } },
            doc! { "a": { "$exists": true } },
        ] {
            assert!(intervals(refused.clone()).is_none(), "{refused}");
        }
    }

    #[test]
    fn prefix_regexes() {
        let ivs = intervals(doc! { "a": { "$regex": "^abc" } }).unwrap();
        assert_eq!(ivs[0].lo, Bson::String("abc".into()));
        assert_eq!(ivs[0].hi, Bson::String("abd".into()));
        let ivs = intervals(doc! { "a": { "$regex": "^abc?d" } }).unwrap();
        assert_eq!(ivs[0].lo, Bson::String("ab".into()));
        assert!(intervals(doc! { "a": { "$regex": "^[ab]" } }).is_none());
    }
}
