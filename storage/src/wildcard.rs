//! Wildcard index keys: `{"$**": 1}` (every field but `_id`), `{"a.$**": 1}` (the field `a` and
//! everything under it) and `{"$**": 1}` with `wildcardProjection` (the paths a projection
//! includes or excludes; `_id` only when the projection says `_id: 1`).
//!
//! A document gives one key per leaf it has: `(path, value)` encoded as a two-field key, the
//! dotted path as a string and then the value, so the path is part of the key and one path's
//! entries are contiguous. Leaves follow mongod's wildcard key generator:
//! - objects are walked, not indexed; an empty object is a leaf `{}`;
//! - an array is expanded one level: its scalars and nested arrays are leaves at the array's
//!   path, its objects are walked with the array's path as prefix (no positions in paths);
//!   an empty array is the leaf `undefined`;
//! - a missing field gives nothing (a wildcard index is sparse by nature).
//!
//! Multikey paths are recorded in the index itself, as mongod does: a document with an array
//! at path `p` also gives the key `(1, p)`. Its first field is a number, so these entries sort
//! before every `(path, value)` key (strings) and a point look-up says whether any document
//! has an array at `p` now (see `multikey_key`). The entries come and go with the documents
//! that give them, through the ordinary index maintenance.

use crate::keycode;
use crate::keys::{ExtractedKeys, KEYS_PER_DOCUMENT_MAX, KeyError};
use bson::raw::RawDocument;
use bson::{Bson, Document, RawBsonRef};

/// The key-pattern field of a whole-document wildcard index.
pub const WILDCARD: &str = "$**";
/// The name explain gives the path part of a wildcard key.
pub const PATH_FIELD: &str = "$_path";
/// The projection option of a `$**` index.
pub const PROJECTION: &str = "wildcardProjection";

/// Whether a key-pattern field is a wildcard term (`$**` or `a.b.$**`).
pub fn is_wildcard_field(field: &str) -> bool {
    field == WILDCARD || field.ends_with(".$**")
}

/// Whether a key pattern has a wildcard term.
pub fn is_wildcard_key(key: &Document) -> bool {
    key.keys().any(|k| is_wildcard_field(k))
}

/// Where a path stands with respect to what the index covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// The path and everything under it is indexed (less any deeper exclusion).
    Included,
    /// Not indexed, nor anything under it.
    Excluded,
    /// Not indexed itself, but a path under it is (an ancestor of an included path).
    Descend,
}

/// What a wildcard index indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct WildcardSpec {
    /// The projection's paths (or the `a.$**` prefix), split at dots; `_id` is kept apart.
    paths: Vec<Vec<String>>,
    /// `paths` are included (otherwise excluded).
    include: bool,
    /// The top-level `_id` field is indexed.
    id: bool,
    /// A compound wildcard index's other fields: `(position in the key pattern, path split at
    /// dots)`; empty for a plain wildcard index.
    regular: Vec<(usize, Vec<String>)>,
    /// The wildcard term's position in the key pattern.
    position: usize,
}

impl WildcardSpec {
    /// The spec of a wildcard index from its key pattern and options; `None` for other indexes.
    pub fn from_index(key: &Document, extra: &Document) -> Result<Option<WildcardSpec>, KeyError> {
        let Some((position, field)) = key.keys().enumerate().find(|(_, k)| is_wildcard_field(k))
        else {
            return Ok(None);
        };
        let regular = regular_fields(key)?;
        let mut spec = Self::of_term(field, extra)?;
        spec.position = position;
        spec.regular = regular;
        if let Some((_, path)) = spec
            .regular
            .iter()
            .find(|(_, path)| spec.coverage(path) != Coverage::Excluded)
        {
            return Err(KeyError::BadPattern(format!(
                "The regular field '{}' of a compound wildcard index must not be indexed by its wildcard term; exclude it with 'wildcardProjection'",
                path.join(".")
            )));
        }
        Ok(Some(spec))
    }

    /// The spec of the wildcard term `field` alone.
    fn of_term(field: &str, extra: &Document) -> Result<WildcardSpec, KeyError> {
        let projection = match extra.get(PROJECTION) {
            None => None,
            Some(Bson::Document(p)) => Some(p),
            Some(_) => {
                return Err(KeyError::BadPattern(
                    "The field 'wildcardProjection' must be an object".into(),
                ));
            }
        };
        if field != WILDCARD {
            if projection.is_some() {
                return Err(KeyError::BadPattern(
                    "The field 'wildcardProjection' is only allowed in an index with a key of { \"$**\": ... }".into(),
                ));
            }
            let prefix = &field[..field.len() - ".$**".len()];
            let components: Vec<String> = prefix.split('.').map(str::to_owned).collect();
            if components
                .iter()
                .any(|c| c.is_empty() || c.starts_with('$'))
            {
                return Err(KeyError::BadPattern(format!(
                    "Index key contains an illegal field name: {field}"
                )));
            }
            return Ok(WildcardSpec {
                id: components[0] == "_id",
                paths: vec![components],
                include: true,
                regular: Vec::new(),
                position: 0,
            });
        }
        let Some(projection) = projection else {
            return Ok(WildcardSpec {
                paths: Vec::new(),
                include: false,
                id: false,
                regular: Vec::new(),
                position: 0,
            });
        };
        let mut flat = Vec::new();
        flatten(projection, "", &mut flat)?;
        if flat.is_empty() {
            return Err(KeyError::BadPattern(
                "The 'wildcardProjection' field can't be an empty object".into(),
            ));
        }
        let mut id = false;
        let mut mode: Option<bool> = None;
        let mut paths = Vec::new();
        for (path, included) in flat {
            if path == "_id" {
                id = included;
                continue;
            }
            match mode {
                Some(m) if m != included => {
                    return Err(KeyError::BadPattern(format!(
                        "Cannot do {} on field {path} in {} projection",
                        if included { "inclusion" } else { "exclusion" },
                        if m { "inclusion" } else { "exclusion" },
                    )));
                }
                _ => mode = Some(included),
            }
            paths.push(path.split('.').map(str::to_owned).collect());
        }
        Ok(WildcardSpec {
            paths,
            include: mode.unwrap_or(id),
            id,
            regular: Vec::new(),
            position: 0,
        })
    }

    /// A compound index's regular fields: `(position in the key pattern, dotted path)`.
    pub fn regular_fields(&self) -> Vec<(usize, String)> {
        self.regular
            .iter()
            .map(|(i, p)| (*i, p.join(".")))
            .collect()
    }

    /// The wildcard term's position in the key pattern.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Whether the index has regular fields besides its wildcard term.
    pub fn is_compound(&self) -> bool {
        !self.regular.is_empty()
    }

    /// How `path` (split at dots) stands with respect to the index.
    pub fn coverage<S: AsRef<str>>(&self, path: &[S]) -> Coverage {
        let Some(first) = path.first() else {
            return Coverage::Descend;
        };
        if first.as_ref() == "_id" {
            return if self.id {
                Coverage::Included
            } else {
                Coverage::Excluded
            };
        }
        let prefix_of = |short: &[String], long: &[S]| {
            short.len() <= long.len() && short.iter().zip(long).all(|(a, b)| a == b.as_ref())
        };
        let under = self.paths.iter().any(|q| prefix_of(q, path));
        match (self.include, under) {
            (true, true) => Coverage::Included,
            (false, true) => Coverage::Excluded,
            (false, false) => Coverage::Included,
            (true, false) => {
                let above = self.paths.iter().any(|q| {
                    q.len() > path.len() && q.iter().zip(path).all(|(a, b)| a == b.as_ref())
                });
                if above {
                    Coverage::Descend
                } else {
                    Coverage::Excluded
                }
            }
        }
    }

    /// Whether every path under `path` is indexed as `path` is (no deeper projection path), so
    /// the index holds a key for each document that has the field at all.
    pub fn covers_subtree<S: AsRef<str>>(&self, path: &[S]) -> bool {
        self.coverage(path) == Coverage::Included
            && (path[0].as_ref() == "_id"
                || !self.paths.iter().any(|q| {
                    q.len() > path.len() && q.iter().zip(path).all(|(a, b)| a == b.as_ref())
                }))
    }

    /// The keys of one document (see the module comment).
    pub fn extract(&self, doc: &RawDocument) -> Result<ExtractedKeys, KeyError> {
        self.extract_collated(doc, None)
    }

    /// [`WildcardSpec::extract`] for a collated index: values' strings mapped (paths never),
    /// a compound index's regular values too.
    pub fn extract_collated(
        &self,
        doc: &RawDocument,
        collation: Option<&crate::keys::KeyCollation>,
    ) -> Result<ExtractedKeys, KeyError> {
        let around = if self.is_compound() {
            Some(self.regular_values(doc)?)
        } else {
            None
        };
        let mut walk = Walk {
            spec: self,
            collation,
            path: Vec::new(),
            keys: Vec::new(),
            multikey: false,
            around,
            leaves: 0,
        };
        walk.object(doc)?;
        // A compound index holds every document: one with nothing under the wildcard term
        // gets its regular values with `(MinKey, MinKey)` as path and value.
        if walk.leaves == 0 && walk.around.is_some() {
            walk.push_compound(RawBsonRef::MinKey, RawBsonRef::MinKey)?;
        }
        let mut keys = walk.keys;
        keys.sort_unstable();
        keys.dedup();
        let mut multikey_fields = vec![false; self.regular.len() + 1];
        multikey_fields[self.position] = walk.multikey;
        Ok(ExtractedKeys {
            keys,
            multikey: walk.multikey,
            multikey_fields,
        })
    }

    /// The values of the regular fields of a compound index, split at the wildcard term's
    /// position: missing is null, as in any index; an array is refused (mongod allows no
    /// multikey regular field in a compound wildcard index).
    fn regular_values<'d>(
        &self,
        doc: &'d RawDocument,
    ) -> Result<(Vec<RawBsonRef<'d>>, Vec<RawBsonRef<'d>>), KeyError> {
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for (position, path) in &self.regular {
            let value = regular_value(doc, path)?;
            if *position < self.position {
                before.push(value);
            } else {
                after.push(value);
            }
        }
        Ok((before, after))
    }
}

/// The key of the value `value` at dotted `path`.
pub fn key(path: &str, value: RawBsonRef<'_>) -> Vec<u8> {
    keycode::encode_key(&[RawBsonRef::String(path), value], &[false, false])
}

/// The entry a document with an array at dotted `path` adds (see the module comment).
pub fn multikey_key(path: &str) -> Vec<u8> {
    keycode::encode_key(
        &[RawBsonRef::Int32(1), RawBsonRef::String(path)],
        &[false, false],
    )
}

/// The regular (non-wildcard) fields of a key pattern with their positions; each must be an
/// ascending or descending number, not a special index type.
fn regular_fields(key: &Document) -> Result<Vec<(usize, Vec<String>)>, KeyError> {
    if key.keys().filter(|k| is_wildcard_field(k)).count() > 1 {
        return Err(KeyError::BadPattern(
            "A compound wildcard index can only have one wildcard term".into(),
        ));
    }
    let mut out = Vec::new();
    for (position, (field, kind)) in key.iter().enumerate() {
        if is_wildcard_field(field) {
            continue;
        }
        if !matches!(
            kind,
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
        ) {
            return Err(KeyError::BadPattern(format!(
                "A compound wildcard index cannot have a '{kind}' field: {field}"
            )));
        }
        let path: Vec<String> = field.split('.').map(str::to_owned).collect();
        if path.iter().any(|c| c.is_empty() || c.starts_with('$')) {
            return Err(KeyError::BadPattern(format!(
                "Index key contains an illegal field name: {field}"
            )));
        }
        out.push((position, path));
    }
    Ok(out)
}

/// The value at `path` of a compound index's regular field (null when missing).
fn regular_value<'d>(doc: &'d RawDocument, path: &[String]) -> Result<RawBsonRef<'d>, KeyError> {
    let mut current = doc;
    for (i, component) in path.iter().enumerate() {
        let Ok(Some(value)) = current.get(component) else {
            return Ok(RawBsonRef::Null);
        };
        match value {
            RawBsonRef::Array(_) => {
                return Err(KeyError::BadPattern(format!(
                    "Compound wildcard indexes do not allow an array in a regular field; found one at '{}'",
                    path[..=i].join(".")
                )));
            }
            RawBsonRef::Document(d) if i + 1 < path.len() => current = d,
            _ if i + 1 < path.len() => return Ok(RawBsonRef::Null),
            v => return Ok(v),
        }
    }
    Ok(RawBsonRef::Null)
}

/// A projection document as `(dotted path, included)` pairs, nested documents flattened.
fn flatten(p: &Document, prefix: &str, out: &mut Vec<(String, bool)>) -> Result<(), KeyError> {
    for (k, v) in p {
        if k.is_empty() || k.starts_with('$') {
            return Err(KeyError::BadPattern(format!(
                "Invalid field name in 'wildcardProjection': {k}"
            )));
        }
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let included = match v {
            Bson::Document(sub) => {
                flatten(sub, &path, out)?;
                continue;
            }
            Bson::Boolean(b) => *b,
            Bson::Int32(i) => *i != 0,
            Bson::Int64(i) => *i != 0,
            Bson::Double(f) => *f != 0.0,
            other => {
                return Err(KeyError::BadPattern(format!(
                    "The 'wildcardProjection' value of {path} must be a number or a boolean, not {other}"
                )));
            }
        };
        out.push((path, included));
    }
    Ok(())
}

struct Walk<'s, 'd> {
    spec: &'s WildcardSpec,
    collation: Option<&'s crate::keys::KeyCollation>,
    path: Vec<String>,
    keys: Vec<Vec<u8>>,
    multikey: bool,
    /// A compound index's regular values before and after the wildcard term.
    around: Option<(Vec<RawBsonRef<'d>>, Vec<RawBsonRef<'d>>)>,
    /// `(path, value)` leaves seen.
    leaves: usize,
}

impl<'d> Walk<'_, 'd> {
    fn push(&mut self, key: Vec<u8>) -> Result<(), KeyError> {
        if self.keys.len() >= KEYS_PER_DOCUMENT_MAX {
            return Err(KeyError::TooManyKeys);
        }
        self.keys.push(key);
        Ok(())
    }

    fn leaf(&mut self, value: RawBsonRef<'d>) -> Result<(), KeyError> {
        self.leaves += 1;
        let mapped = self.collation.and_then(|c| c.map(value));
        let value = mapped
            .as_ref()
            .map_or(value, bson::RawBson::as_raw_bson_ref);
        let path = self.path.join(".");
        if self.around.is_some() {
            return self.push_compound(RawBsonRef::String(&path), value);
        }
        let k = key(&path, value);
        self.push(k)
    }

    /// The key `[before..., path, value, after...]` of a compound index.
    fn push_compound(
        &mut self,
        path: RawBsonRef<'_>,
        value: RawBsonRef<'_>,
    ) -> Result<(), KeyError> {
        let Some((before, after)) = &self.around else {
            return Ok(());
        };
        let mapped: Vec<Option<bson::RawBson>> = before
            .iter()
            .chain(after)
            .map(|v| self.collation.and_then(|c| c.map(*v)))
            .collect();
        let regular = before.iter().chain(after).zip(&mapped);
        let mut values: Vec<RawBsonRef<'_>> = regular
            .map(|(v, m)| m.as_ref().map_or(*v, bson::RawBson::as_raw_bson_ref))
            .collect();
        let after_values = values.split_off(before.len());
        values.push(path);
        values.push(value);
        values.extend(after_values);
        let k = keycode::encode_key(&values, &[]);
        self.push(k)
    }

    fn object(&mut self, doc: &'d RawDocument) -> Result<(), KeyError> {
        for element in doc.into_iter().map_while(Result::ok) {
            let (name, value) = element;
            self.path.push(name.as_str().to_owned());
            let coverage = self.spec.coverage(&self.path);
            if coverage != Coverage::Excluded {
                self.value(value, coverage == Coverage::Included, false)?;
            }
            self.path.pop();
        }
        Ok(())
    }

    fn value(
        &mut self,
        value: RawBsonRef<'d>,
        included: bool,
        in_array: bool,
    ) -> Result<(), KeyError> {
        match value {
            RawBsonRef::Document(d) if d.is_empty() => {
                if included {
                    self.leaf(value)?;
                }
            }
            RawBsonRef::Document(d) => self.object(d)?,
            RawBsonRef::Array(_) if in_array => {
                if included {
                    self.leaf(value)?;
                }
            }
            RawBsonRef::Array(array) => {
                self.multikey = true;
                let k = multikey_key(&self.path.join("."));
                self.push(k)?;
                let mut empty = true;
                for element in array.into_iter().map_while(Result::ok) {
                    empty = false;
                    self.value(element, included, true)?;
                }
                if empty && included {
                    self.leaf(RawBsonRef::Undefined)?;
                }
            }
            other => {
                if included {
                    self.leaf(other)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawDocumentBuf, doc};

    fn spec(key: Document, projection: Option<Document>) -> WildcardSpec {
        let extra = match projection {
            Some(p) => doc! { PROJECTION: p },
            None => Document::new(),
        };
        WildcardSpec::from_index(&key, &extra).unwrap().unwrap()
    }

    /// The (path, value) leaves of `d` and its multikey paths, decoded back.
    fn leaves(s: &WildcardSpec, d: Document) -> (Vec<(String, Bson)>, Vec<String>) {
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        let ex = s.extract(&raw).unwrap();
        let (mut out, mut multikey) = (Vec::new(), Vec::new());
        for k in &ex.keys {
            let values = keycode::decode_key(k, &[false, false]).unwrap();
            match &values[0] {
                Bson::String(p) => out.push((p.clone(), values[1].clone())),
                _ => multikey.push(values[1].as_str().unwrap().to_owned()),
            }
        }
        assert_eq!(ex.multikey, !multikey.is_empty());
        out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.to_string().cmp(&b.1.to_string())));
        (out, multikey)
    }

    fn l(path: &str, v: impl Into<Bson>) -> (String, Bson) {
        (path.to_owned(), v.into())
    }

    #[test]
    fn every_field_but_id() {
        let s = spec(doc! { "$**": 1 }, None);
        let (keys, mk) = leaves(&s, doc! { "_id": 7, "a": 1, "b": { "c": "x", "d": {} } });
        assert_eq!(
            keys,
            vec![l("a", 1), l("b.c", "x"), l("b.d", Document::new())]
        );
        assert!(mk.is_empty());
    }

    #[test]
    fn arrays_expand_one_level() {
        let s = spec(doc! { "$**": 1 }, None);
        let (keys, mk) = leaves(
            &s,
            doc! { "a": [1, { "b": 2 }, [3, 4]], "e": [], "f": { "g": [[]] } },
        );
        assert_eq!(
            keys,
            vec![
                l("a", 1),
                l("a", vec![Bson::Int32(3), Bson::Int32(4)]),
                l("a.b", 2),
                l("e", Bson::Undefined),
                l("f.g", Vec::<Bson>::new()),
            ]
        );
        assert_eq!(mk, vec!["a", "e", "f.g"]);
    }

    #[test]
    fn a_path_prefix_indexes_that_subtree() {
        let s = spec(doc! { "a.b.$**": 1 }, None);
        let (keys, _) = leaves(&s, doc! { "a": { "b": { "c": 1 }, "x": 2 }, "b": 3 });
        assert_eq!(keys, vec![l("a.b.c", 1)]);
        assert_eq!(s.coverage(&["a"]), Coverage::Descend);
        assert_eq!(s.coverage(&["a", "b"]), Coverage::Included);
        assert_eq!(s.coverage(&["a", "x"]), Coverage::Excluded);
    }

    #[test]
    fn projection_include_and_exclude() {
        let include = spec(
            doc! { "$**": 1 },
            Some(doc! { "a.b": 1, "c": true, "_id": 1 }),
        );
        let d = doc! { "_id": 1, "a": { "b": 2, "z": 3 }, "c": [4], "d": 5 };
        let (keys, mk) = leaves(&include, d.clone());
        assert_eq!(keys, vec![l("_id", 1), l("a.b", 2), l("c", 4)]);
        assert_eq!(mk, vec!["c"]);

        let exclude = spec(doc! { "$**": 1 }, Some(doc! { "a": { "z": 0 }, "d": 0 }));
        let (keys, _) = leaves(&exclude, d);
        assert_eq!(keys, vec![l("a.b", 2), l("c", 4)]);
        assert!(!exclude.covers_subtree(&["a"]));
        assert!(exclude.covers_subtree(&["c"]));
        assert!(!exclude.covers_subtree(&["_id"]));
    }

    #[test]
    fn projection_errors() {
        let bad = |key: Document, p: Document| {
            WildcardSpec::from_index(&key, &doc! { PROJECTION: p }).unwrap_err()
        };
        bad(doc! { "$**": 1 }, doc! { "a": 1, "b": 0 });
        bad(doc! { "$**": 1 }, doc! {});
        bad(doc! { "a.$**": 1 }, doc! { "a": 1 });
        bad(doc! { "$**": 1 }, doc! { "a": "yes" });
        assert!(WildcardSpec::from_index(&doc! { "$**": 1, "b": 1 }, &doc! {}).is_err());
        assert!(
            WildcardSpec::from_index(&doc! { "a": 1 }, &doc! {})
                .unwrap()
                .is_none()
        );
    }

    /// The keys of a compound index decoded back (multikey entries left out).
    fn compound_keys(s: &WildcardSpec, d: Document, fields: usize) -> Vec<Vec<Bson>> {
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        let ex = s.extract(&raw).unwrap();
        ex.keys
            .iter()
            .filter_map(|k| keycode::decode_key(k, &vec![false; fields]).ok())
            .filter(|values| values.len() == fields)
            .collect()
    }

    #[test]
    fn compound_keys_pair_regular_values_with_each_leaf() {
        let s = spec(doc! { "tenant": 1, "attrs.$**": 1, "n": -1 }, None);
        let keys = compound_keys(
            &s,
            doc! { "tenant": "t1", "attrs": { "a": 1, "b": [2, 3] }, "n": 5 },
            4,
        );
        let k = |path: &str, v: i32| {
            vec![
                Bson::from("t1"),
                Bson::from(path),
                Bson::Int32(v),
                Bson::Int32(5),
            ]
        };
        assert_eq!(
            keys,
            vec![k("attrs.a", 1), k("attrs.b", 2), k("attrs.b", 3)]
        );
        // Nothing under the wildcard term, a missing regular field: still one key.
        let keys = compound_keys(&s, doc! { "tenant": "t2", "other": 1 }, 4);
        assert_eq!(
            keys,
            vec![vec![
                Bson::from("t2"),
                Bson::MinKey,
                Bson::MinKey,
                Bson::Null
            ]]
        );
        // An array in a regular field is refused.
        let raw = RawDocumentBuf::try_from(&doc! { "tenant": [1], "attrs": { "a": 1 } }).unwrap();
        assert!(s.extract(&raw).is_err());
    }

    #[test]
    fn compound_spec_rules() {
        let ok = |key: Document, p: Option<Document>| {
            let extra = p.map(|p| doc! { PROJECTION: p }).unwrap_or_default();
            WildcardSpec::from_index(&key, &extra)
        };
        assert!(ok(doc! { "a": 1, "$**": 1 }, Some(doc! { "a": 0 })).is_ok());
        assert!(ok(doc! { "$**": 1, "e.a": 1 }, Some(doc! { "a": 1 })).is_ok());
        // The regular field must not be under the wildcard term.
        assert!(ok(doc! { "a": 1, "$**": 1 }, None).is_err());
        assert!(ok(doc! { "a": 1, "$**": 1 }, Some(doc! { "a": 1 })).is_err());
        assert!(ok(doc! { "a": 1, "a.$**": 1 }, None).is_err());
        // One wildcard term; no special types.
        assert!(ok(doc! { "a.$**": 1, "b.$**": 1 }, None).is_err());
        assert!(ok(doc! { "x": "hashed", "a.$**": 1 }, None).is_err());
    }

    #[test]
    fn multikey_entries_sort_before_path_entries() {
        assert!(multikey_key("zzz") < key("", RawBsonRef::MinKey));
    }
}
