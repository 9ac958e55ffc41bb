//! The catalog: which collections exist (by numeric id, never reused), their names, UUIDs,
//! options and index specs, and their next RecordId. DDL changes are `Catalog` log records
//! holding one BSON document each; compaction writes a `CatalogSnapshot` with the whole catalog
//! before it deletes old segments. Replay rebuilds the catalog and the record maps from those
//! records; data records of a collection whose creation was compacted away wait ("orphans") until
//! the snapshot that names the collection.

use std::collections::{BTreeMap, HashMap};

use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};

use crate::collection::doc_bytes;
use crate::error::{Result, StorageError};
use crate::index::IndexSpec;
use crate::log::Loc;
use crate::record::{Kind, PAYLOAD_DOCUMENT_OFFSET, PAYLOAD_RECORD_ID_OFFSET, u64_at};
use crate::recovery::Item;

/// A collection as the catalog sees it.
#[derive(Clone, Debug)]
pub(crate) struct CatalogEntry {
    pub id: u64,
    pub db: String,
    pub name: String,
    pub uuid: bson::Uuid,
    pub options: Document,
    pub indexes: Vec<IndexSpec>,
    pub next_record_id: u64,
}

impl CatalogEntry {
    pub fn to_document(&self) -> Document {
        doc! {
            "id": self.id as i64,
            "db": &self.db,
            "name": &self.name,
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: self.uuid.bytes().to_vec() },
            "options": self.options.clone(),
            "indexes": self.indexes.iter().map(|s| Bson::Document(s.to_document())).collect::<Vec<_>>(),
            "nextRecordId": self.next_record_id as i64,
        }
    }

    pub fn from_document(d: &Document) -> Result<CatalogEntry> {
        let bad = |w: &str| StorageError::InvalidDocument(format!("catalog entry: {w}"));
        let uuid = match d.get("uuid") {
            Some(Bson::Binary(b)) => b.to_uuid().map_err(|_| bad("uuid"))?,
            _ => return Err(bad("uuid")),
        };
        let mut indexes = Vec::new();
        for s in d.get_array("indexes").map_err(|_| bad("indexes"))? {
            let Bson::Document(s) = s else {
                return Err(bad("index"));
            };
            indexes.push(IndexSpec::from_document(s)?);
        }
        Ok(CatalogEntry {
            id: d.get_i64("id").map_err(|_| bad("id"))? as u64,
            db: d.get_str("db").map_err(|_| bad("db"))?.to_string(),
            name: d.get_str("name").map_err(|_| bad("name"))?.to_string(),
            uuid,
            options: d
                .get_document("options")
                .map_err(|_| bad("options"))?
                .clone(),
            indexes,
            next_record_id: d.get_i64("nextRecordId").unwrap_or(0) as u64,
        })
    }
}

/// A DDL change as logged.
#[derive(Clone, Debug)]
pub(crate) enum CatalogOp {
    Create(CatalogEntry),
    Drop { id: u64 },
    Rename { id: u64, db: String, name: String },
    CreateIndex { id: u64, spec: IndexSpec },
    DropIndex { id: u64, name: String },
}

impl CatalogOp {
    pub fn to_document(&self) -> Document {
        match self {
            CatalogOp::Create(e) => doc! {"op": "create", "entry": e.to_document()},
            CatalogOp::Drop { id } => doc! {"op": "drop", "id": *id as i64},
            CatalogOp::Rename { id, db, name } => {
                doc! {"op": "rename", "id": *id as i64, "db": db, "name": name}
            }
            CatalogOp::CreateIndex { id, spec } => {
                doc! {"op": "createIndex", "id": *id as i64, "spec": spec.to_document()}
            }
            CatalogOp::DropIndex { id, name } => {
                doc! {"op": "dropIndex", "id": *id as i64, "name": name}
            }
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_document().to_vec().unwrap_or_default()
    }

    pub fn from_document(d: &Document) -> Result<CatalogOp> {
        let bad = |w: &str| StorageError::InvalidDocument(format!("catalog op: {w}"));
        let id = || d.get_i64("id").map(|i| i as u64).map_err(|_| bad("id"));
        let s = |k: &str| d.get_str(k).map(str::to_string).map_err(|_| bad(k));
        Ok(match d.get_str("op").map_err(|_| bad("op"))? {
            "create" => CatalogOp::Create(CatalogEntry::from_document(
                d.get_document("entry").map_err(|_| bad("entry"))?,
            )?),
            "drop" => CatalogOp::Drop { id: id()? },
            "rename" => CatalogOp::Rename {
                id: id()?,
                db: s("db")?,
                name: s("name")?,
            },
            "createIndex" => CatalogOp::CreateIndex {
                id: id()?,
                spec: IndexSpec::from_document(d.get_document("spec").map_err(|_| bad("spec"))?)?,
            },
            "dropIndex" => CatalogOp::DropIndex {
                id: id()?,
                name: s("name")?,
            },
            _ => return Err(bad("unknown op")),
        })
    }
}

/// The whole-catalog snapshot document.
pub(crate) fn snapshot_document(entries: &[CatalogEntry], next_collection_id: u64) -> Document {
    doc! {
        "nextCollectionId": next_collection_id as i64,
        "collections": entries.iter().map(|e| Bson::Document(e.to_document())).collect::<Vec<_>>(),
    }
}

/// One collection during replay.
pub(crate) struct ReplayColl {
    /// None while only data records have been seen (an orphan).
    pub entry: Option<CatalogEntry>,
    pub records: BTreeMap<u64, Loc>,
    pub data_bytes: u64,
}

/// Replay state: collections by id plus live bytes per segment.
#[derive(Default)]
pub(crate) struct Replay {
    pub colls: BTreeMap<u64, ReplayColl>,
    pub next_collection_id: u64,
    pub live_bytes: HashMap<u64, i64>,
    /// After a checkpoint: per collection, each RecordId the replayed tail touched, with its
    /// location as of the checkpoint (indexes are fixed up from these).
    pub changed: Option<HashMap<u64, HashMap<u64, Option<Loc>>>>,
}

impl Replay {
    fn release(live: &mut HashMap<u64, i64>, loc: &Loc) {
        *live.entry(loc.segment).or_default() -= i64::from(loc.size);
    }

    pub fn coll(&mut self, id: u64) -> &mut ReplayColl {
        self.colls.entry(id).or_insert_with(|| ReplayColl {
            entry: None,
            records: BTreeMap::new(),
            data_bytes: 0,
        })
    }

    fn remove(&mut self, id: u64) {
        if let Some(c) = self.colls.remove(&id) {
            for loc in c.records.values() {
                Self::release(&mut self.live_bytes, loc);
            }
        }
    }

    pub fn apply(&mut self, item: Item<'_>, segment_name: &dyn Fn(u64) -> String) -> Result<()> {
        let bad = |why: &str| {
            StorageError::corruption(&segment_name(item.loc.segment), item.loc.offset, why)
        };
        match item.kind {
            Kind::Put | Kind::Delete => {
                if item.payload.len() < PAYLOAD_DOCUMENT_OFFSET {
                    return Err(bad("data record payload too short"));
                }
                let cid = u64_at(item.payload, 0);
                let rid = u64_at(item.payload, PAYLOAD_RECORD_ID_OFFSET);
                let put = item.kind == Kind::Put;
                if let Some(changed) = &mut self.changed {
                    let before = self
                        .colls
                        .get(&cid)
                        .and_then(|c| c.records.get(&rid).copied());
                    changed.entry(cid).or_default().entry(rid).or_insert(before);
                }
                if put {
                    *self.live_bytes.entry(item.loc.segment).or_default() +=
                        i64::from(item.loc.size);
                }
                let c = self.coll(cid);
                let old = if put {
                    c.data_bytes += doc_bytes(&item.loc);
                    c.records.insert(rid, item.loc)
                } else {
                    c.records.remove(&rid)
                };
                if let Some(e) = &mut c.entry {
                    e.next_record_id = e.next_record_id.max(rid + 1);
                }
                if let Some(old) = old {
                    c.data_bytes = c.data_bytes.saturating_sub(doc_bytes(&old));
                    Self::release(&mut self.live_bytes, &old);
                }
            }
            Kind::Catalog => {
                let d = Document::from_reader(item.payload).map_err(|e| bad(&e.to_string()))?;
                self.apply_op(CatalogOp::from_document(&d)?);
            }
            Kind::CatalogSnapshot => {
                let d = Document::from_reader(item.payload).map_err(|e| bad(&e.to_string()))?;
                self.apply_snapshot(&d)?;
            }
            Kind::BatchBegin | Kind::BatchEnd => {}
        }
        Ok(())
    }

    fn apply_op(&mut self, op: CatalogOp) {
        match op {
            CatalogOp::Create(e) => {
                self.next_collection_id = self.next_collection_id.max(e.id + 1);
                let c = self.coll(e.id);
                let max_rid = c.records.keys().next_back().map_or(0, |r| r + 1);
                let mut e = e;
                e.next_record_id = e.next_record_id.max(max_rid);
                c.entry = Some(e);
            }
            CatalogOp::Drop { id } => self.remove(id),
            CatalogOp::Rename { id, db, name } => {
                if let Some(e) = self.colls.get_mut(&id).and_then(|c| c.entry.as_mut()) {
                    e.db = db;
                    e.name = name;
                }
            }
            CatalogOp::CreateIndex { id, spec } => {
                if let Some(e) = self.colls.get_mut(&id).and_then(|c| c.entry.as_mut()) {
                    e.indexes.retain(|s| s.name != spec.name);
                    e.indexes.push(spec);
                }
            }
            CatalogOp::DropIndex { id, name } => {
                if let Some(e) = self.colls.get_mut(&id).and_then(|c| c.entry.as_mut()) {
                    e.indexes.retain(|s| s.name != name);
                }
            }
        }
    }

    /// Starts from a checkpoint's catalog.
    pub fn load_snapshot(&mut self, d: &Document) -> Result<()> {
        self.apply_snapshot(d)
    }

    fn apply_snapshot(&mut self, d: &Document) -> Result<()> {
        let bad = || StorageError::InvalidDocument("catalog snapshot".into());
        let next = d.get_i64("nextCollectionId").map_err(|_| bad())? as u64;
        self.next_collection_id = self.next_collection_id.max(next);
        let mut named = Vec::new();
        for e in d.get_array("collections").map_err(|_| bad())? {
            let Bson::Document(e) = e else {
                return Err(bad());
            };
            let e = CatalogEntry::from_document(e)?;
            named.push(e.id);
            self.apply_op(CatalogOp::Create(e));
        }
        let gone: Vec<u64> = self
            .colls
            .keys()
            .filter(|id| !named.contains(id))
            .copied()
            .collect();
        for id in gone {
            self.remove(id);
        }
        Ok(())
    }

    /// Drops orphans left at the end (their collection was dropped).
    pub fn finish(&mut self) {
        let orphans: Vec<u64> = self
            .colls
            .iter()
            .filter(|(_, c)| c.entry.is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in orphans {
            self.remove(id);
        }
    }
}
