//! Secondary (and `_id`) indexes of one collection: the spec, the multikey flag, the optional
//! partial-filter predicate, and a paged `btree::Tree` of entries `keycode key ++ RecordId (8
//! bytes, big-endian)` with empty values; keys come from `keys::KeyPattern`. Encoded keys are
//! self-delimiting, so entry order is (key, RecordId) order and the entries of one key are
//! contiguous. Unique checks look for an entry of the same key with another RecordId.

use std::ops::Bound;
use std::sync::Arc;

use bson::{Bson, Document, RawDocument, doc};

use crate::btree::Tree;
use crate::error::{Result, StorageError};
use crate::keycode;
use crate::keys::{KeyCollation, KeyPattern};
use crate::limits::INDEX_KEY_SIZE_MAX;
use crate::pager::Pager;

/// A compiled partial-filter predicate.
pub type Predicate = Box<dyn Fn(&RawDocument) -> bool + Send + Sync>;
/// Compiles a `partialFilterExpression` into a predicate (supplied by the server).
pub type FilterCompiler = Arc<dyn Fn(&Document) -> Predicate + Send + Sync>;
/// Compiles an index's `collation` (the normalised spec) into its string mapping (supplied by
/// the server); an error names what is wrong with the spec.
pub type CollationCompiler =
    Arc<dyn Fn(&Document) -> std::result::Result<KeyCollation, String> + Send + Sync>;

/// What the server supplies to turn index options into code. Without a collation compiler an
/// index with a `collation` cannot be opened or created: its keys would be wrong.
#[derive(Clone, Default)]
pub struct IndexCompilers {
    pub filter: Option<FilterCompiler>,
    pub collation: Option<CollationCompiler>,
}

/// An index definition as stored in the catalog.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct IndexSpec {
    pub name: String,
    /// Key pattern, e.g. `{a: 1, "b.c": -1}`.
    pub key: Document,
    pub unique: bool,
    pub sparse: bool,
    pub partial_filter: Option<Document>,
    pub expire_after_seconds: Option<i64>,
    pub hidden: bool,
    /// Any other options, kept and returned as given.
    pub extra: Document,
}

/// Name of the index every collection has.
pub const ID_INDEX_NAME: &str = "_id_";
/// The option (in `IndexSpec::extra`, and in a collection's options) naming a collation.
pub const COLLATION: &str = "collation";

impl IndexSpec {
    /// The `_id` index spec.
    pub fn id_index() -> IndexSpec {
        IndexSpec {
            name: ID_INDEX_NAME.into(),
            key: doc! {"_id": 1},
            unique: true,
            ..IndexSpec::default()
        }
    }

    /// The `_id` index of a collection with `options`: it has the collection's default
    /// collation, as in mongod.
    pub fn id_index_for(options: &Document) -> IndexSpec {
        let mut spec = IndexSpec::id_index();
        if let Ok(c) = options.get_document(COLLATION) {
            spec.extra.insert(COLLATION, c.clone());
        }
        spec
    }

    /// The index's collation (normalised), `None` for the simple collation.
    pub fn collation(&self) -> Option<&Document> {
        self.extra.get_document(COLLATION).ok()
    }

    /// Whether both index the same keys: the same key pattern and collation and, for wildcard
    /// indexes, the same `wildcardProjection` (mongod lets `{$**: 1}` exist once per
    /// projection, and a key pattern once per collation).
    pub fn same_key(&self, other: &IndexSpec) -> bool {
        let projection = |s: &IndexSpec| s.extra.get(crate::wildcard::PROJECTION).cloned();
        self.key == other.key
            && projection(self) == projection(other)
            && self.collation() == other.collation()
    }

    /// The catalog form.
    pub fn to_document(&self) -> Document {
        let mut d = doc! {"name": &self.name, "key": self.key.clone()};
        if self.unique {
            d.insert("unique", true);
        }
        if self.sparse {
            d.insert("sparse", true);
        }
        if let Some(p) = &self.partial_filter {
            d.insert("partialFilterExpression", p.clone());
        }
        if let Some(s) = self.expire_after_seconds {
            d.insert("expireAfterSeconds", s);
        }
        if self.hidden {
            d.insert("hidden", true);
        }
        if !self.extra.is_empty() {
            d.insert("extra", self.extra.clone());
        }
        d
    }

    /// Back from the catalog form.
    pub fn from_document(d: &Document) -> Result<IndexSpec> {
        let bad = |what: &str| StorageError::InvalidIndex(format!("catalog index spec: {what}"));
        Ok(IndexSpec {
            name: d.get_str("name").map_err(|_| bad("name"))?.to_string(),
            key: d.get_document("key").map_err(|_| bad("key"))?.clone(),
            unique: d.get_bool("unique").unwrap_or(false),
            sparse: d.get_bool("sparse").unwrap_or(false),
            partial_filter: d.get_document("partialFilterExpression").ok().cloned(),
            expire_after_seconds: d.get_i64("expireAfterSeconds").ok(),
            hidden: d.get_bool("hidden").unwrap_or(false),
            extra: d.get_document("extra").ok().cloned().unwrap_or_default(),
        })
    }
}

/// Encodes key values (one per key-pattern field) the way index entries are encoded, for scan
/// bounds: `storage::keycode` with the pattern's descending fields inverted.
pub fn encode_index_key(pattern: &Document, values: &[Bson]) -> Vec<u8> {
    let descending = KeyPattern::parse(pattern)
        .map(|p| p.descending())
        .unwrap_or_default();
    keycode::encode_bson_key(values, &descending)
}

/// The `[min, max)` of a `2d` index (its `min`/`max` options, kept in `extra`).
pub fn flat_range(spec: &IndexSpec) -> (f64, f64) {
    let get = |name: &str, default: f64| match spec.extra.get(name) {
        Some(Bson::Double(f)) => *f,
        Some(Bson::Int32(i)) => f64::from(*i),
        Some(Bson::Int64(i)) => *i as f64,
        _ => default,
    };
    let (min, max) = crate::keys::FLAT_RANGE_DEFAULT;
    (get("min", min), get("max", max))
}

pub(crate) struct Index {
    pub spec: IndexSpec,
    /// The index's number within its collection (named by the log's removed-key lists).
    pub ident: u32,
    pub multikey: bool,
    pattern: KeyPattern,
    filter: Option<Predicate>,
    pub tree: Tree,
}

pub(crate) fn entry_key(key: &[u8], rid: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + keycode::RECORD_ID_SIZE);
    k.extend_from_slice(key);
    keycode::append_record_id(&mut k, rid);
    k
}

/// What an index computes from a document, without a tree: used by live indexes and builds.
pub(crate) struct KeyMaker {
    pub spec: IndexSpec,
    pattern: KeyPattern,
    filter: Option<Predicate>,
}

/// The string mapping of a collated index, from the server's compiler.
fn key_collation(
    spec: &IndexSpec,
    compilers: Option<&IndexCompilers>,
) -> Result<Option<KeyCollation>> {
    let Some(c) = spec.collation() else {
        return Ok(None);
    };
    let compiler = compilers
        .and_then(|k| k.collation.as_ref())
        .ok_or_else(|| {
            StorageError::InvalidIndex(format!(
                "index {} has a collation and no collation compiler was given",
                spec.name
            ))
        })?;
    compiler(c)
        .map(Some)
        .map_err(|why| StorageError::InvalidIndex(format!("index {}: {why}", spec.name)))
}

impl KeyMaker {
    pub fn new(spec: IndexSpec, compiler: Option<&IndexCompilers>) -> Result<KeyMaker> {
        let collation = key_collation(&spec, compiler)?;
        let pattern = KeyPattern::parse(&spec.key)?
            .with_flat_range(flat_range(&spec))
            .with_text(crate::text::TextSpec::from_index(&spec.key, &spec.extra)?)
            .with_wildcard(crate::wildcard::WildcardSpec::from_index(
                &spec.key,
                &spec.extra,
            )?)
            .with_collation(collation);
        let filter = match (
            &spec.partial_filter,
            compiler.and_then(|c| c.filter.as_ref()),
        ) {
            (Some(f), Some(c)) => Some(c(f)),
            _ => None,
        };
        Ok(KeyMaker {
            spec,
            pattern,
            filter,
        })
    }

    /// The encoded keys `doc` contributes (none when the partial filter rejects it), sorted
    /// without repeats, and whether an indexed path went through an array.
    pub fn keys_of(&self, doc: &RawDocument) -> Result<(Vec<Vec<u8>>, bool)> {
        keys_of(&self.pattern, self.filter.as_ref(), self.spec.sparse, doc)
    }

    /// The duplicate-key error for encoded `key`, with the key decoded back to values.
    pub fn duplicate(&self, key: &[u8]) -> StorageError {
        duplicate(&self.spec, &self.pattern, key)
    }
}

fn keys_of(
    pattern: &KeyPattern,
    filter: Option<&Predicate>,
    sparse: bool,
    doc: &RawDocument,
) -> Result<(Vec<Vec<u8>>, bool)> {
    if let Some(f) = filter
        && !f(doc)
    {
        return Ok((Vec::new(), false));
    }
    let ex = pattern.extract(doc, sparse)?;
    if ex.keys.iter().any(|k| k.len() > INDEX_KEY_SIZE_MAX) {
        return Err(StorageError::LimitExceeded("index key too large".into()));
    }
    let mut keys = ex.keys;
    keys.sort_unstable();
    keys.dedup();
    Ok((keys, ex.multikey))
}

fn duplicate(spec: &IndexSpec, pattern: &KeyPattern, key: &[u8]) -> StorageError {
    let values = keycode::decode_key(key, &pattern.descending()).unwrap_or_default();
    let mut key_value = Document::new();
    for ((field, _), v) in spec.key.iter().zip(values) {
        let v = match v {
            Bson::String(s) if pattern.collation.is_some() => Bson::String(sort_key_hex(&s)),
            v => v,
        };
        key_value.insert(field.clone(), v);
    }
    StorageError::DuplicateKey {
        index: spec.name.clone(),
        key_pattern: Box::new(spec.key.clone()),
        key_value: Box::new(key_value),
        collation: spec.collation().cloned().map(Box::new),
    }
}

/// A collated key's string is a sort key, not text: shown as the lower-case hex of the sort
/// key's bytes, as mongod shows a collated index's top-level key strings. The stored string
/// carries byte `b` as code point `b + 1` (see docs/FORMAT.md).
fn sort_key_hex(s: &str) -> String {
    s.chars()
        .map(|c| format!("{:02x}", (u32::from(c).saturating_sub(1)) & 0xFF))
        .collect()
}

impl Index {
    pub fn new(
        spec: IndexSpec,
        ident: u32,
        compiler: Option<&IndexCompilers>,
        tree: Tree,
    ) -> Result<Index> {
        let KeyMaker {
            spec,
            pattern,
            filter,
        } = KeyMaker::new(spec, compiler)?;
        Ok(Index {
            spec,
            ident,
            multikey: false,
            pattern,
            filter,
            tree,
        })
    }

    pub fn len(&self) -> u64 {
        self.tree.len
    }

    /// Bytes of the pages holding the entries.
    pub fn size_bytes(&self) -> u64 {
        self.tree.size_bytes()
    }

    /// The encoded key of one value per field, strings mapped as this index stores them.
    pub fn point_key(&self, values: &[bson::RawBsonRef<'_>]) -> Vec<u8> {
        self.pattern.encode(values)
    }

    /// See `KeyMaker::keys_of`.
    pub fn keys_of(&self, doc: &RawDocument) -> Result<(Vec<Vec<u8>>, bool)> {
        keys_of(&self.pattern, self.filter.as_ref(), self.spec.sparse, doc)
    }

    /// A RecordId other than `rid` holding `key`, if any.
    pub fn conflict(&self, pager: &Pager, key: &[u8], rid: u64) -> Result<Option<u64>> {
        self.conflict_except(pager, key, &|other| other == rid)
    }

    /// The first RecordId holding `key` that `skip` does not exclude.
    pub fn conflict_except(
        &self,
        pager: &Pager,
        key: &[u8],
        skip: &dyn Fn(u64) -> bool,
    ) -> Result<Option<u64>> {
        let lo = entry_key(key, 0);
        let hi = entry_key(key, u64::MAX);
        let mut found = None;
        self.tree.scan(
            pager,
            Bound::Included(&lo),
            Bound::Included(&hi),
            false,
            &mut |k, _| {
                let other = keycode::split_record_id(k).1;
                if !skip(other) {
                    found = Some(other);
                    return Ok(false);
                }
                Ok(true)
            },
        )?;
        Ok(found)
    }

    /// See `KeyMaker::duplicate`.
    pub fn duplicate(&self, key: &[u8]) -> StorageError {
        duplicate(&self.spec, &self.pattern, key)
    }

    /// Reads the pages an insert or removal of (`key`, `rid`) starts from, changing nothing: a
    /// write tried in a no-wait scope finds them refused here, before it changed anything.
    pub fn warm(&self, pager: &Pager, key: &[u8], rid: u64) -> Result<()> {
        self.tree.get(pager, &entry_key(key, rid)).map(|_| ())
    }

    pub fn insert(&mut self, pager: &Pager, key: &[u8], rid: u64) -> Result<bool> {
        Ok(self
            .tree
            .insert(pager, &entry_key(key, rid), &[])?
            .is_none())
    }

    pub fn remove(&mut self, pager: &Pager, key: &[u8], rid: u64) -> Result<bool> {
        Ok(self.tree.remove(pager, &entry_key(key, rid))?.is_some())
    }

    /// Entries between key bounds, resuming strictly after `after`, at most `limit`.
    pub fn scan(
        &self,
        pager: &Pager,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        forward: bool,
        after: Option<(&[u8], u64)>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, u64)>> {
        let lo = match lower {
            Bound::Included(k) => Bound::Included(entry_key(k, 0)),
            Bound::Excluded(k) => Bound::Excluded(entry_key(k, u64::MAX)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let hi = match upper {
            Bound::Included(k) => Bound::Included(entry_key(k, u64::MAX)),
            Bound::Excluded(k) => Bound::Excluded(entry_key(k, 0)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (lo, hi) = match (after, forward) {
            (Some((k, rid)), true) => (Bound::Excluded(entry_key(k, rid)), hi),
            (Some((k, rid)), false) => (lo, Bound::Excluded(entry_key(k, rid))),
            (None, _) => (lo, hi),
        };
        let mut out = Vec::new();
        if range_is_empty(&lo, &hi) || limit == 0 {
            return Ok(out);
        }
        self.tree.scan(
            pager,
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
            !forward,
            &mut |k, _| {
                let (key, rid) = keycode::split_record_id(k);
                out.push((key.to_vec(), rid));
                Ok(out.len() < limit)
            },
        )?;
        Ok(out)
    }
}

/// Inverted bounds select nothing.
fn range_is_empty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}
