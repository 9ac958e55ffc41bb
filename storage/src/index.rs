//! Secondary (and `_id`) indexes of one collection: the spec, the multikey flag, the optional
//! partial-filter predicate, and an ordered map of entries `encoded key ++ RecordId (8 bytes,
//! big-endian) -> RecordId`. Encoded keys are self-delimiting, so entry order is (key, RecordId)
//! order and the entries of one key are contiguous. Unique checks look for an entry of the same
//! key with another RecordId. The catalog stores specs; entries are rebuilt from documents at
//! recovery.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bson::{Bson, Document, RawDocument, doc};

use crate::error::{Result, StorageError};
use crate::limits::INDEX_KEY_SIZE_MAX;
use crate::tempkey;

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

/// Encodes key values for `pattern` the way index entries are encoded (for scan bounds).
pub fn encode_index_key(pattern: &Document, values: &[Bson]) -> Vec<u8> {
    tempkey::encode(pattern, values)
}

/// One key of a document.
pub(crate) struct KeyEntry {
    pub bytes: Vec<u8>,
    pub values: Vec<Bson>,
}

pub(crate) struct Index {
    pub spec: IndexSpec,
    pub multikey: bool,
    filter: Option<Predicate>,
    entries: BTreeMap<Vec<u8>, u64>,
}

fn entry_key(key: &[u8], rid: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 8);
    k.extend_from_slice(key);
    k.extend_from_slice(&rid.to_be_bytes());
    k
}

impl Index {
    pub fn new(spec: IndexSpec, compiler: Option<&FilterCompiler>) -> Index {
        let filter = match (&spec.partial_filter, compiler) {
            (Some(f), Some(c)) => Some(c(f)),
            _ => None,
        };
        Index {
            spec,
            multikey: false,
            filter,
            entries: BTreeMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Approximate memory held by entries.
    pub fn size_bytes(&self) -> u64 {
        self.entries.keys().map(|k| k.len() as u64 + 40).sum()
    }

    /// The keys `doc` contributes (none when the partial filter rejects it).
    pub fn keys_of(&self, doc: &RawDocument) -> Result<(Vec<KeyEntry>, bool)> {
        if let Some(f) = &self.filter
            && !f(doc)
        {
            return Ok((Vec::new(), false));
        }
        let (keys, multikey) = tempkey::extract(&self.spec.key, doc, self.spec.sparse)?;
        let mut out = Vec::with_capacity(keys.len());
        for values in keys {
            let bytes = tempkey::encode(&self.spec.key, &values);
            if bytes.len() > INDEX_KEY_SIZE_MAX {
                return Err(StorageError::LimitExceeded("index key too large".into()));
            }
            out.push(KeyEntry { bytes, values });
        }
        Ok((out, multikey))
    }

    /// A RecordId other than `rid` holding `key`, if any.
    pub fn conflict(&self, key: &[u8], rid: u64) -> Option<u64> {
        let lo = entry_key(key, 0);
        let hi = entry_key(key, u64::MAX);
        self.entries
            .range(lo..=hi)
            .map(|(_, r)| *r)
            .find(|r| *r != rid)
    }

    /// The duplicate-key error for `entry`.
    pub fn duplicate(&self, entry: &KeyEntry) -> StorageError {
        let mut key_value = Document::new();
        for ((field, _), v) in self.spec.key.iter().zip(&entry.values) {
            key_value.insert(field.clone(), v.clone());
        }
        StorageError::DuplicateKey {
            index: self.spec.name.clone(),
            key_pattern: Box::new(self.spec.key.clone()),
            key_value: Box::new(key_value),
        }
    }

    pub fn insert(&mut self, key: &[u8], rid: u64) -> bool {
        self.entries.insert(entry_key(key, rid), rid).is_none()
    }

    pub fn remove(&mut self, key: &[u8], rid: u64) -> bool {
        self.entries.remove(&entry_key(key, rid)).is_some()
    }

    /// Loads sorted, unique-checked entries in one go (index build).
    pub fn load(&mut self, entries: Vec<(Vec<u8>, u64)>) {
        self.entries = entries
            .into_iter()
            .map(|(k, rid)| (entry_key(&k, rid), rid))
            .collect();
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
        let split = |(k, rid): (&Vec<u8>, &u64)| (k[..k.len() - 8].to_vec(), *rid);
        let range = self.entries.range((lo, hi));
        if forward {
            range.take(limit).map(split).collect()
        } else {
            range.rev().take(limit).map(split).collect()
        }
    }
}

/// BTreeMap::range panics on inverted bounds; treat them as empty.
fn range_is_empty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}
