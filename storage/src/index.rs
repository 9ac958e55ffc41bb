//! Secondary (and `_id`) indexes of one collection: the spec, the multikey flag, the optional
//! partial-filter predicate, and a `btree::BTree` of entries `keycode key ++ RecordId (8 bytes,
//! big-endian) -> RecordId`; keys come from `keys::KeyPattern`. Encoded keys are self-delimiting, so entry order is (key, RecordId)
//! order and the entries of one key are contiguous. Unique checks look for an entry of the same
//! key with another RecordId. The catalog stores specs; entries are rebuilt from documents at
//! recovery.

use std::ops::Bound;
use std::sync::Arc;

use bson::{Bson, Document, RawDocument, doc};

use crate::btree::BTree;
use crate::error::{Result, StorageError};
use crate::keycode;
use crate::keys::KeyPattern;
use crate::limits::INDEX_KEY_SIZE_MAX;

/// A compiled partial-filter predicate.
pub type Predicate = Box<dyn Fn(&RawDocument) -> bool + Send + Sync>;
/// Compiles a `partialFilterExpression` into a predicate (supplied by the server).
pub type FilterCompiler = Arc<dyn Fn(&Document) -> Predicate + Send + Sync>;

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

pub(crate) struct Index {
    pub spec: IndexSpec,
    pub multikey: bool,
    pattern: KeyPattern,
    filter: Option<Predicate>,
    entries: BTree,
}

fn entry_key(key: &[u8], rid: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + keycode::RECORD_ID_SIZE);
    k.extend_from_slice(key);
    keycode::append_record_id(&mut k, rid);
    k
}

impl Index {
    pub fn new(spec: IndexSpec, compiler: Option<&FilterCompiler>) -> Result<Index> {
        let pattern = KeyPattern::parse(&spec.key)?;
        let filter = match (&spec.partial_filter, compiler) {
            (Some(f), Some(c)) => Some(c(f)),
            _ => None,
        };
        Ok(Index {
            spec,
            multikey: false,
            pattern,
            filter,
            entries: BTree::new(),
        })
    }

    /// An index over a checkpointed tree.
    pub fn from_tree(
        spec: IndexSpec,
        compiler: Option<&FilterCompiler>,
        tree: BTree,
        multikey: bool,
    ) -> Result<Index> {
        let mut ix = Index::new(spec, compiler)?;
        ix.entries = tree;
        ix.multikey = multikey;
        Ok(ix)
    }

    /// The entries as a checkpoint image.
    pub fn tree_checkpoint(&self) -> Vec<u8> {
        self.entries.to_checkpoint()
    }

    pub fn len(&self) -> u64 {
        self.entries.len()
    }

    /// Memory held by the entries.
    pub fn size_bytes(&self) -> u64 {
        self.entries.memory_bytes() as u64
    }

    /// The encoded keys `doc` contributes (none when the partial filter rejects it) and whether
    /// an indexed path went through an array.
    pub fn keys_of(&self, doc: &RawDocument) -> Result<(Vec<Vec<u8>>, bool)> {
        if let Some(f) = &self.filter
            && !f(doc)
        {
            return Ok((Vec::new(), false));
        }
        let ex = self.pattern.extract(doc, self.spec.sparse)?;
        if ex.keys.iter().any(|k| k.len() > INDEX_KEY_SIZE_MAX) {
            return Err(StorageError::LimitExceeded("index key too large".into()));
        }
        Ok((ex.keys, ex.multikey))
    }

    /// A RecordId other than `rid` holding `key`, if any.
    pub fn conflict(&self, key: &[u8], rid: u64) -> Option<u64> {
        let lo = entry_key(key, 0);
        let hi = entry_key(key, u64::MAX);
        self.entries
            .range(Bound::Included(&lo), Bound::Included(&hi), false)
            .map(|(_, r)| r)
            .find(|r| *r != rid)
    }

    /// The duplicate-key error for encoded `key`, with the key decoded back to values.
    pub fn duplicate(&self, key: &[u8]) -> StorageError {
        let values = keycode::decode_key(key, &self.pattern.descending()).unwrap_or_default();
        let mut key_value = Document::new();
        for ((field, _), v) in self.spec.key.iter().zip(values) {
            key_value.insert(field.clone(), v);
        }
        StorageError::DuplicateKey {
            index: self.spec.name.clone(),
            key_pattern: Box::new(self.spec.key.clone()),
            key_value: Box::new(key_value),
        }
    }

    pub fn insert(&mut self, key: &[u8], rid: u64) -> bool {
        self.entries.insert(&entry_key(key, rid), rid).is_none()
    }

    pub fn remove(&mut self, key: &[u8], rid: u64) -> bool {
        self.entries.remove(&entry_key(key, rid)).is_some()
    }

    /// Replaces all entries by `entries`, sorted by (key, rid) without repeats (index build).
    pub fn load(&mut self, entries: Vec<(Vec<u8>, u64)>) -> Result<()> {
        let tree = BTree::bulk_build(
            entries
                .into_iter()
                .map(|(k, rid)| (entry_key(&k, rid), rid)),
        )
        .map_err(|e| StorageError::InvalidIndex(format!("index build: {e}")))?;
        self.entries = tree;
        Ok(())
    }

    /// Entries between key bounds, resuming strictly after `after`, at most `limit`.
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        forward: bool,
        after: Option<(&[u8], u64)>,
        limit: usize,
    ) -> Vec<(Vec<u8>, u64)> {
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
        if range_is_empty(&lo, &hi) {
            return Vec::new();
        }
        self.entries
            .range(
                lo.as_ref().map(Vec::as_slice),
                hi.as_ref().map(Vec::as_slice),
                !forward,
            )
            .take(limit)
            .map(|(k, rid)| (keycode::split_record_id(k).0.to_vec(), rid))
            .collect()
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
