//! Index key extraction, mongod style: a key pattern (`{a: 1, "b.c": -1}`) and a document give
//! the set of encoded index keys (without the RecordId suffix), sorted and deduplicated.
//!
//! Path rules, following mongod's B-tree key generator:
//! - a dotted path walks embedded documents; a path step that meets an array fans out over the
//!   array's elements (documents continue the path; scalars and nested arrays give null), unless
//!   the step is all digits, which then picks that array position and does not fan out;
//! - a path that ends on an array indexes each element (one level: `[[1, 2]]` indexes `[1, 2]`);
//!   an empty trailing array indexes `undefined`, as mongod does; either makes the key multikey;
//! - a missing field (or a path ending in a scalar) indexes as null;
//! - compound keys are the cartesian product of the fields' values; at most one field may own an
//!   array that the other fields do not share (shared prefixes like `a.b`/`a.c` through the same
//!   array `a` are allowed), otherwise error 171 "cannot index parallel arrays [x] [y]";
//! - sparse: a document whose indexed fields are all missing gives no keys (a null value counts
//!   as present).
//!
//! Field names containing dots are not looked up as a whole (mongod deprecated that). There is no
//! key size limit (mongod has none since 4.2); long keys go to the B+tree's overflow area. The
//! number of keys one document may produce is capped at `KEYS_PER_DOCUMENT_MAX`.

use crate::keycode;
use bson::raw::RawDocument;
use bson::{Bson, Document, RawBson, RawBsonRef};
use std::sync::Arc;

/// Guards against cartesian blow-up (e.g. `{a.b: 1, a.c: 1}` over a 10k-element array).
pub const KEYS_PER_DOCUMENT_MAX: usize = 100_000;
/// Path components per indexed field; deeper paths cannot match a valid BSON document.
pub const PATH_DEPTH_MAX: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// mongod code 171 CannotIndexParallelArrays.
    #[error("cannot index parallel arrays [{0}] [{1}]")]
    ParallelArrays(String, String),
    /// mongod code 67 CannotCreateIndex.
    #[error("{0}")]
    BadPattern(String),
    /// A special index type ("text", "2dsphere", "hashed", ...) this module does not build.
    #[error("index type \"{0}\" is not supported")]
    UnsupportedType(String),
    /// mongod code 16766: a hashed field met an array.
    #[error(
        "Error: hashed indexes do not currently support array values. Found array at path: {0}"
    )]
    HashedArray(String),
    /// mongod code 16755: a `2dsphere` field holds something that is not a valid location.
    #[error("Can't extract geo keys: {0}")]
    Geo(String),
    /// mongod code 16804: a `2d` field holds something other than a coordinate pair.
    #[error("geo values must be 'legacy coordinate pairs' for 2d indexes")]
    FlatNotPair,
    /// mongod code 13027: a `2d` coordinate outside the index's `[min, max)`.
    #[error("point not in interval of [ {0}, {1} )")]
    FlatOutOfRange(String, String),
    /// mongod code 17262: a document's `language_override` field names an unknown language.
    #[error("language override unsupported: {0}")]
    LanguageOverride(String),
    /// mongod code 16675: a compound text index's prefix field holds an array.
    #[error("cannot have a multi-key as a prefix to a text index")]
    TextPrefixArray,
    /// mongod has no such limit; ours bounds memory (code 67 as the nearest match).
    #[error("document would produce more than {KEYS_PER_DOCUMENT_MAX} index keys")]
    TooManyKeys,
}

impl KeyError {
    /// The mongod error code to report.
    pub fn code(&self) -> i32 {
        match self {
            KeyError::ParallelArrays(..) => 171,
            KeyError::BadPattern(_) | KeyError::TooManyKeys => 67,
            KeyError::UnsupportedType(_) => 67,
            KeyError::HashedArray(_) => 16766,
            KeyError::Geo(_) => 16755,
            KeyError::FlatNotPair => 16804,
            KeyError::FlatOutOfRange(..) => 13027,
            KeyError::LanguageOverride(_) => 17262,
            KeyError::TextPrefixArray => 16675,
        }
    }
}

/// What an indexed field stores for a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldKind {
    /// The value itself, in the key encoding (ascending or descending).
    Ordered,
    /// mongod's 64-bit hash of the value (`crate::hashed`), as an int64; arrays are refused.
    Hashed,
    /// S2 cell ids of a location (`crate::geo`), as int64s; a document without a location in
    /// this field gives no keys at all (mongod's `2dsphere` version 2 and 3 rule).
    Sphere,
    /// A `2d` field: a legacy pair within `[min, max)` on both axes, mapped linearly onto the
    /// sphere's longitude/latitude box and stored as that point's S2 leaf cell (int64).
    Flat { min: f64, max: f64 },
    /// A text index's `_fts` field: the keys come from `crate::text` (see `KeyPattern::text`).
    Text,
}

/// The value a key pattern gives a hashed field.
pub const HASHED: &str = "hashed";
/// The value a key pattern gives a spherical geo field.
pub const SPHERE: &str = "2dsphere";
/// The value a key pattern gives a flat (legacy) geo field.
pub const FLAT: &str = "2d";
/// The default `[min, max)` of a `2d` index.
pub const FLAT_RANGE_DEFAULT: (f64, f64) = (-180.0, 180.0);

/// One indexed field: its path split at dots, whether it sorts descending, what it stores.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyField {
    pub path: String,
    pub components: Vec<String>,
    pub descending: bool,
    pub kind: FieldKind,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeyPattern {
    pub fields: Vec<KeyField>,
    /// What a text index indexes; set by `with_text`, required when a field is `Text`.
    pub text: Option<Box<crate::text::TextSpec>>,
    /// What a wildcard index indexes; set by `with_wildcard` (`crate::wildcard`).
    pub wildcard: Option<Box<crate::wildcard::WildcardSpec>>,
    /// A collated index's string mapping; set by `with_collation`.
    pub collation: Option<KeyCollation>,
}

/// How a collated index stores strings: a function (the server's collation, compiled) from a
/// string to the string kept in its place, whose byte order is the collated order (a sort key
/// carried as a string, see docs/FORMAT.md). Strings at any depth of a value are mapped, so
/// objects and arrays holding strings order by the collation too; other values are unchanged.
#[derive(Clone)]
pub struct KeyCollation(pub Arc<dyn Fn(&str) -> String + Send + Sync>);

impl std::fmt::Debug for KeyCollation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyCollation")
    }
}

impl PartialEq for KeyCollation {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl KeyCollation {
    /// `value` with its strings mapped; `None` when it holds no string (use it as it is).
    pub fn map(&self, value: RawBsonRef<'_>) -> Option<RawBson> {
        if !raw_has_strings(value) {
            return None;
        }
        let owned = Bson::try_from(RawBson::from(value)).ok()?;
        RawBson::try_from(self.map_bson(&owned)).ok()
    }

    /// [`KeyCollation::map`] over an owned value (symbols become strings, as they compare).
    pub fn map_bson(&self, value: &Bson) -> Bson {
        match value {
            Bson::String(s) | Bson::Symbol(s) => Bson::String((self.0)(s)),
            Bson::Document(d) => Bson::Document(
                d.iter()
                    .map(|(k, v)| (k.clone(), self.map_bson(v)))
                    .collect(),
            ),
            Bson::Array(a) => Bson::Array(a.iter().map(|v| self.map_bson(v)).collect()),
            other => other.clone(),
        }
    }
}

fn raw_has_strings(value: RawBsonRef<'_>) -> bool {
    match value {
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => true,
        RawBsonRef::Document(d) => d
            .into_iter()
            .map_while(Result::ok)
            .any(|(_, v)| raw_has_strings(v)),
        RawBsonRef::Array(a) => a.into_iter().map_while(Result::ok).any(raw_has_strings),
        _ => false,
    }
}

/// The keys of one document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractedKeys {
    /// Encoded keys, ascending, no duplicates, without RecordId.
    pub keys: Vec<Vec<u8>>,
    /// True when any indexed path went through an array.
    pub multikey: bool,
    /// Per pattern field: whether its path went through an array in this document.
    pub multikey_fields: Vec<bool>,
}

impl KeyPattern {
    /// Parses `{field: 1 | -1, ...}`; any positive number is ascending, any negative descending.
    pub fn parse(pattern: &Document) -> Result<KeyPattern, KeyError> {
        if pattern.is_empty() {
            return Err(KeyError::BadPattern("Index keys cannot be empty.".into()));
        }
        let mut fields = Vec::with_capacity(pattern.len());
        for (path, direction) in pattern {
            let (descending, kind) = match direction {
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                    (direction_of(direction)?, FieldKind::Ordered)
                }
                Bson::String(kind) if kind == HASHED => (false, FieldKind::Hashed),
                Bson::String(kind) if kind == SPHERE => (false, FieldKind::Sphere),
                Bson::String(kind) if kind == crate::text::TEXT && path == crate::text::FTS => {
                    (false, FieldKind::Text)
                }
                Bson::String(kind) if kind == FLAT => (
                    false,
                    FieldKind::Flat {
                        min: FLAT_RANGE_DEFAULT.0,
                        max: FLAT_RANGE_DEFAULT.1,
                    },
                ),
                Bson::String(kind) => return Err(KeyError::UnsupportedType(kind.clone())),
                other => {
                    return Err(KeyError::BadPattern(format!(
                        "Values in the index key pattern can't be {other}"
                    )));
                }
            };
            let components = if crate::wildcard::is_wildcard_field(path) {
                path.split('.').map(str::to_owned).collect()
            } else {
                split_path(path)?
            };
            fields.push(KeyField {
                path: path.clone(),
                components,
                descending,
                kind,
            });
        }
        Ok(KeyPattern {
            fields,
            text: None,
            wildcard: None,
            collation: None,
        })
    }

    /// Sets the string mapping of a collated index (`None`: the simple collation).
    pub fn with_collation(mut self, collation: Option<KeyCollation>) -> KeyPattern {
        self.collation = collation;
        self
    }

    /// Sets what a wildcard index indexes (`None` for other index types).
    pub fn with_wildcard(mut self, spec: Option<crate::wildcard::WildcardSpec>) -> KeyPattern {
        self.wildcard = spec.map(Box::new);
        self
    }

    /// Sets what a text index indexes (`None` for other index types).
    pub fn with_text(mut self, text: Option<crate::text::TextSpec>) -> KeyPattern {
        self.text = text.map(Box::new);
        self
    }

    /// Sets the `[min, max)` of the `2d` fields (the index's `min`/`max` options).
    pub fn with_flat_range(mut self, range: (f64, f64)) -> KeyPattern {
        for f in &mut self.fields {
            if let FieldKind::Flat { min, max } = &mut f.kind {
                (*min, *max) = range;
            }
        }
        self
    }

    pub fn descending(&self) -> Vec<bool> {
        self.fields.iter().map(|f| f.descending).collect()
    }

    /// Encodes one key from one value per field (for bounds and point lookups), strings mapped
    /// as the index stores them.
    pub fn encode(&self, values: &[RawBsonRef<'_>]) -> Vec<u8> {
        let Some(c) = &self.collation else {
            return keycode::encode_key(values, &self.descending());
        };
        let mapped: Vec<Option<RawBson>> = values.iter().map(|v| c.map(*v)).collect();
        let values: Vec<RawBsonRef<'_>> = values
            .iter()
            .zip(&mapped)
            .map(|(v, m)| m.as_ref().map_or(*v, RawBson::as_raw_bson_ref))
            .collect();
        keycode::encode_key(&values, &self.descending())
    }

    /// The keys `doc` produces. With `sparse`, a document missing every indexed field gives none.
    pub fn extract(&self, doc: &RawDocument, sparse: bool) -> Result<ExtractedKeys, KeyError> {
        if let Some(text) = &self.text {
            return text.extract(doc);
        }
        if let Some(wildcard) = &self.wildcard {
            return wildcard.extract_collated(doc, self.collation.as_ref());
        }
        if self.fields.iter().any(|f| f.kind == FieldKind::Text) {
            return Err(KeyError::UnsupportedType(crate::text::TEXT.into()));
        }
        let mut per_field: Vec<FieldValues<'_>> = Vec::with_capacity(self.fields.len());
        for field in &self.fields {
            let mut values = FieldValues::default();
            let geo = matches!(field.kind, FieldKind::Sphere | FieldKind::Flat { .. });
            walk(
                RawBsonRef::Document(doc),
                &field.components,
                0,
                geo,
                &mut values,
            );
            per_field.push(values);
        }
        check_parallel(&per_field)?;
        if let Some(field) = self
            .fields
            .iter()
            .zip(&per_field)
            .find(|(f, v)| f.kind == FieldKind::Hashed && !v.arrays.is_empty())
        {
            return Err(KeyError::HashedArray(field.0.path.clone()));
        }
        let multikey_fields: Vec<bool> = per_field.iter().map(|f| !f.arrays.is_empty()).collect();
        if sparse && per_field.iter().all(|f| f.all_missing()) {
            return Ok(ExtractedKeys {
                keys: Vec::new(),
                multikey: false,
                multikey_fields,
            });
        }
        let (keys, cells) = self.product(&per_field)?;
        // A geometry covered by several cells is in the index several times: multikey too.
        let mut multikey_fields = multikey_fields;
        for (flag, many) in multikey_fields.iter_mut().zip(cells) {
            *flag |= many;
        }
        let multikey = multikey_fields.iter().any(|&m| m);
        Ok(ExtractedKeys {
            keys,
            multikey,
            multikey_fields,
        })
    }

    /// Every combination of one encoded value per field, and per field whether it is a geo
    /// field that gave several cells.
    fn product(
        &self,
        per_field: &[FieldValues<'_>],
    ) -> Result<(Vec<Vec<u8>>, Vec<bool>), KeyError> {
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        let mut cells = Vec::with_capacity(self.fields.len());
        for (field, values) in self.fields.iter().zip(per_field) {
            let encoded = values.encoded(field, self.collation.as_ref())?;
            if encoded.is_empty() {
                return Ok((Vec::new(), vec![false; self.fields.len()]));
            }
            cells.push(field.kind != FieldKind::Ordered && encoded.len() > 1);
            if keys.len().saturating_mul(encoded.len()) > KEYS_PER_DOCUMENT_MAX {
                return Err(KeyError::TooManyKeys);
            }
            keys = keys
                .iter()
                .flat_map(|prefix| {
                    encoded.iter().map(move |value| {
                        let mut key = prefix.clone();
                        key.extend_from_slice(value);
                        key
                    })
                })
                .collect();
        }
        keys.sort_unstable();
        keys.dedup();
        Ok((keys, cells))
    }
}

/// An exclusive upper bound for every stored key (RecordId included) that starts with
/// `prefix`, a whole number of encoded fields: the next byte after a field is a type byte (at
/// most 0xF5, inverted MinKey) or a RecordId byte, so nine 0xFF bytes sort above them all.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = Vec::with_capacity(prefix.len() + keycode::RECORD_ID_SIZE + 1);
    end.extend_from_slice(prefix);
    end.extend_from_slice(&[0xFF; keycode::RECORD_ID_SIZE + 1]);
    end
}

/// A numeric direction: negative is descending; zero and NaN are rejected as mongod does.
fn direction_of(direction: &Bson) -> Result<bool, KeyError> {
    let holder = bson::doc! { "d": direction.clone() };
    let raw =
        bson::RawDocumentBuf::try_from(&holder).map_err(|e| KeyError::BadPattern(e.to_string()))?;
    let value = raw.get("d").ok().flatten().unwrap_or(RawBsonRef::Null);
    let mut encoded = Vec::new();
    keycode::encode_value(&mut encoded, value);
    match encoded.first().copied() {
        Some(keycode::TYPE_NUMBER_NEG | keycode::TYPE_NUMBER_NEG_INF) => Ok(true),
        Some(keycode::TYPE_NUMBER_POS | keycode::TYPE_NUMBER_POS_INF) => Ok(false),
        _ => Err(KeyError::BadPattern(format!(
            "Values in the index key pattern can't be {direction}"
        ))),
    }
}

fn split_path(path: &str) -> Result<Vec<String>, KeyError> {
    let components: Vec<String> = path.split('.').map(str::to_owned).collect();
    if components.iter().any(String::is_empty) || components.len() > PATH_DEPTH_MAX {
        return Err(KeyError::BadPattern(format!(
            "Index key contains an illegal field name: {path}"
        )));
    }
    if components[0].starts_with('$') {
        return Err(KeyError::BadPattern(format!(
            "Index key contains an illegal field name: {path}"
        )));
    }
    Ok(components)
}

/// What one indexed path found in a document.
#[derive(Default)]
struct FieldValues<'a> {
    /// `None` is a place where the path was missing (indexes as null).
    values: Vec<Option<RawBsonRef<'a>>>,
    /// Dotted path prefixes at which an array was expanded.
    arrays: Vec<String>,
}

impl FieldValues<'_> {
    fn all_missing(&self) -> bool {
        self.values.iter().all(Option::is_none)
    }

    fn encoded(
        &self,
        field: &KeyField,
        collation: Option<&KeyCollation>,
    ) -> Result<Vec<Vec<u8>>, KeyError> {
        if field.kind == FieldKind::Sphere {
            let mut out = Vec::new();
            for v in self.values.iter().flatten() {
                let cells = crate::geo::keys_of(*v).map_err(KeyError::Geo)?;
                for cell in cells.into_iter().flatten() {
                    out.push(keycode::encode_key(&[RawBsonRef::Int64(cell)], &[false]));
                }
            }
            out.sort_unstable();
            out.dedup();
            return Ok(out);
        }
        if let FieldKind::Flat { min, max } = field.kind {
            let mut out = Vec::new();
            for v in self.values.iter().flatten() {
                for cell in crate::geo::flat_keys_of(*v, (min, max))? {
                    out.push(keycode::encode_key(&[RawBsonRef::Int64(cell)], &[false]));
                }
            }
            out.sort_unstable();
            out.dedup();
            return Ok(out);
        }
        let one = |v: RawBsonRef<'_>| {
            let mapped = collation.and_then(|c| c.map(v));
            let v = mapped.as_ref().map_or(v, RawBson::as_raw_bson_ref);
            one_value(field, v)
        };
        let mut out: Vec<Vec<u8>> = self
            .values
            .iter()
            .map(|v| one(v.unwrap_or(RawBsonRef::Null)))
            .collect();
        if out.is_empty() {
            out.push(one(RawBsonRef::Null));
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// The encoded key of one (already mapped) value of an ordered or hashed field.
fn one_value(field: &KeyField, v: RawBsonRef<'_>) -> Vec<u8> {
    match field.kind {
        FieldKind::Ordered => keycode::encode_key(&[v], &[field.descending]),
        FieldKind::Hashed | FieldKind::Sphere | FieldKind::Flat { .. } | FieldKind::Text => {
            keycode::encode_key(&[RawBsonRef::Int64(crate::hashed::hash64(v))], &[false])
        }
    }
}

/// The values `path` reaches in `doc` (arrays fanned out as for index keys; missing places
/// left out).
pub(crate) fn values_at<'a>(doc: &'a RawDocument, path: &[String]) -> Vec<RawBsonRef<'a>> {
    let mut out = FieldValues::default();
    walk(RawBsonRef::Document(doc), path, 0, false, &mut out);
    out.values.into_iter().flatten().collect()
}

/// Follows `path[depth..]` from `value`, collecting what the path reaches. With `whole`, the
/// value at the end of the path is taken as it is, arrays included (a location like `[x, y]`).
fn walk<'a>(
    value: RawBsonRef<'a>,
    path: &[String],
    depth: usize,
    whole: bool,
    out: &mut FieldValues<'a>,
) {
    let Some(step) = path.get(depth) else {
        match value {
            other if whole => out.values.push(Some(other)),
            RawBsonRef::Array(array) => {
                note_array(out, path, depth);
                let before = out.values.len();
                out.values
                    .extend(array.into_iter().map_while(Result::ok).map(Some));
                if out.values.len() == before {
                    out.values.push(Some(RawBsonRef::Undefined));
                }
            }
            other => out.values.push(Some(other)),
        }
        return;
    };
    match value {
        RawBsonRef::Document(doc) => match doc.get(step).ok().flatten() {
            Some(next) => walk(next, path, depth + 1, whole, out),
            None => out.values.push(None),
        },
        RawBsonRef::Array(array) if is_position(step) => {
            let element = step
                .parse::<usize>()
                .ok()
                .and_then(|i| array.get(i).ok().flatten());
            match element {
                Some(next) => walk(next, path, depth + 1, whole, out),
                None => out.values.push(None),
            }
        }
        RawBsonRef::Array(array) => {
            note_array(out, path, depth);
            let before = out.values.len();
            for element in array.into_iter().map_while(Result::ok) {
                match element {
                    RawBsonRef::Document(_) => walk(element, path, depth, whole, out),
                    _ => out.values.push(None),
                }
            }
            if out.values.len() == before {
                out.values.push(None);
            }
        }
        _ => out.values.push(None),
    }
}

fn is_position(step: &str) -> bool {
    !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit())
}

fn note_array(out: &mut FieldValues<'_>, path: &[String], depth: usize) {
    let prefix = path[..depth.min(path.len())].join(".");
    if !out.arrays.contains(&prefix) {
        out.arrays.push(prefix);
    }
}

/// At most one field may go through an array that no other field goes through too (fields that
/// share an array prefix, like `a.b` and `a.c` through `a`, are combined as a cartesian product).
fn check_parallel(per_field: &[FieldValues<'_>]) -> Result<(), KeyError> {
    let mut owner: Option<&str> = None;
    for (i, field) in per_field.iter().enumerate() {
        let shared = |array: &String| {
            per_field
                .iter()
                .enumerate()
                .any(|(j, other)| j != i && other.arrays.contains(array))
        };
        let Some(private) = field.arrays.iter().find(|a| !shared(a)) else {
            continue;
        };
        let name = last_component(private);
        match owner {
            Some(first) => return Err(KeyError::ParallelArrays(name.into(), first.into())),
            None => owner = Some(name),
        }
    }
    Ok(())
}

fn last_component(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

#[cfg(test)]
mod collation_tests {
    use super::*;
    use bson::{RawDocumentBuf, doc};

    /// Upper-casing stands in for a collation: "abc" and "ABC" become one key.
    fn upper() -> KeyCollation {
        KeyCollation(Arc::new(|s: &str| s.to_uppercase()))
    }

    fn keys(pattern: &KeyPattern, d: bson::Document) -> Vec<Vec<u8>> {
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        pattern.extract(&raw, false).unwrap().keys
    }

    #[test]
    fn strings_at_any_depth_are_mapped_and_other_values_kept() {
        let c = upper();
        let value = Bson::Document(doc! {
            "s": "ab", "n": 5, "arr": ["x", 1.5, { "deep": "y" }], "sym": Bson::Symbol("z".into()),
        });
        let mapped = c.map_bson(&value);
        assert_eq!(
            mapped,
            Bson::Document(doc! {
                "s": "AB", "n": 5, "arr": ["X", 1.5, { "deep": "Y" }], "sym": "Z",
            })
        );
        assert!(c.map(RawBsonRef::Int32(3)).is_none(), "no string: no copy");
    }

    #[test]
    fn collated_patterns_key_case_variants_alike() {
        let plain = KeyPattern::parse(&doc! { "a": 1, "b": -1 }).unwrap();
        let collated = plain.clone().with_collation(Some(upper()));
        let (x, y) = (
            doc! { "a": "abc", "b": ["q", 2] },
            doc! { "a": "ABC", "b": ["Q", 2] },
        );
        assert_ne!(keys(&plain, x.clone()), keys(&plain, y.clone()));
        assert_eq!(keys(&collated, x), keys(&collated, y));
        // Point keys for look-ups map the same way as extracted keys.
        let point = collated.encode(&[RawBsonRef::String("abc"), RawBsonRef::Int32(2)]);
        let extracted = keys(&collated, doc! { "a": "ABC", "b": 2 });
        assert_eq!(extracted, vec![point]);
        // Hashed fields hash the mapped value.
        let hashed = KeyPattern::parse(&doc! { "h": "hashed" })
            .unwrap()
            .with_collation(Some(upper()));
        assert_eq!(
            keys(&hashed, doc! { "h": "abc" }),
            keys(&hashed, doc! { "h": "ABC" })
        );
    }

    #[test]
    fn wildcard_keys_map_values_not_paths() {
        let spec = crate::wildcard::WildcardSpec::from_index(&doc! { "$**": 1 }, &doc! {})
            .unwrap()
            .unwrap();
        let pattern = KeyPattern::parse(&doc! { "$**": 1 })
            .unwrap()
            .with_wildcard(Some(spec))
            .with_collation(Some(upper()));
        let got = keys(&pattern, doc! { "name": "ann" });
        let want = crate::wildcard::key("name", RawBsonRef::String("ANN"));
        assert_eq!(got, vec![want]);
    }
}
