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
}

impl WildcardSpec {
    /// The spec of a wildcard index from its key pattern and options; `None` for other indexes.
    pub fn from_index(key: &Document, extra: &Document) -> Result<Option<WildcardSpec>, KeyError> {
        let Some(field) = key.keys().find(|k| is_wildcard_field(k)) else {
            return Ok(None);
        };
        if key.len() != 1 {
            return Err(KeyError::BadPattern(
                "compound wildcard indexes are not supported by cairn yet".into(),
            ));
        }
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
            return Ok(Some(WildcardSpec {
                id: components[0] == "_id",
                paths: vec![components],
                include: true,
            }));
        }
        let Some(projection) = projection else {
            return Ok(Some(WildcardSpec {
                paths: Vec::new(),
                include: false,
                id: false,
            }));
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
        Ok(Some(WildcardSpec {
            paths,
            include: mode.unwrap_or(id),
            id,
        }))
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

    /// [`WildcardSpec::extract`] for a collated index: values' strings mapped (paths never).
    pub fn extract_collated(
        &self,
        doc: &RawDocument,
        collation: Option<&crate::keys::KeyCollation>,
    ) -> Result<ExtractedKeys, KeyError> {
        let mut walk = Walk {
            spec: self,
            collation,
            path: Vec::new(),
            keys: Vec::new(),
            multikey: false,
        };
        walk.object(doc)?;
        let mut keys = walk.keys;
        keys.sort_unstable();
        keys.dedup();
        Ok(ExtractedKeys {
            keys,
            multikey: walk.multikey,
            multikey_fields: vec![walk.multikey],
        })
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

struct Walk<'s> {
    spec: &'s WildcardSpec,
    collation: Option<&'s crate::keys::KeyCollation>,
    path: Vec<String>,
    keys: Vec<Vec<u8>>,
    multikey: bool,
}

impl Walk<'_> {
    fn push(&mut self, key: Vec<u8>) -> Result<(), KeyError> {
        if self.keys.len() >= KEYS_PER_DOCUMENT_MAX {
            return Err(KeyError::TooManyKeys);
        }
        self.keys.push(key);
        Ok(())
    }

    fn leaf(&mut self, value: RawBsonRef<'_>) -> Result<(), KeyError> {
        let mapped = self.collation.and_then(|c| c.map(value));
        let value = mapped
            .as_ref()
            .map_or(value, bson::RawBson::as_raw_bson_ref);
        let k = key(&self.path.join("."), value);
        self.push(k)
    }

    fn object(&mut self, doc: &RawDocument) -> Result<(), KeyError> {
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
        value: RawBsonRef<'_>,
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

    #[test]
    fn multikey_entries_sort_before_path_entries() {
        assert!(multikey_key("zzz") < key("", RawBsonRef::MinKey));
    }
}
