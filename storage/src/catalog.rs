//! The catalog as logged: which collections exist (by numeric id, never reused), their names,
//! UUIDs, options and index specs (each index with an `ident`, its number within the collection,
//! which the log's removed-key lists refer to). DDL changes are `Catalog` log records holding one
//! BSON document each; a checkpoint stores the whole catalog in its blob (`checkpoint`).

use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};

use crate::error::{Result, StorageError};
use crate::index::IndexSpec;

/// The ident of every collection's `_id` index.
pub const ID_INDEX_IDENT: u32 = 0;

/// A collection as the catalog sees it.
#[derive(Clone, Debug)]
pub(crate) struct CatalogEntry {
    pub id: u64,
    pub db: String,
    pub name: String,
    pub uuid: bson::Uuid,
    pub options: Document,
    /// (ident, spec) of every index.
    pub indexes: Vec<(u32, IndexSpec)>,
    pub next_record_id: u64,
}

fn index_document(ident: u32, spec: &IndexSpec) -> Document {
    let mut d = spec.to_document();
    d.insert("ident", i64::from(ident));
    d
}

fn index_from_document(d: &Document) -> Result<(u32, IndexSpec)> {
    let ident = d
        .get_i64("ident")
        .ok()
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| StorageError::InvalidDocument("catalog index: ident".into()))?;
    Ok((ident, IndexSpec::from_document(d)?))
}

impl CatalogEntry {
    pub fn to_document(&self) -> Document {
        doc! {
            "id": self.id as i64,
            "db": &self.db,
            "name": &self.name,
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: self.uuid.bytes().to_vec() },
            "options": self.options.clone(),
            "indexes": self.indexes.iter().map(|(i, s)| Bson::Document(index_document(*i, s))).collect::<Vec<_>>(),
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
            indexes.push(index_from_document(s)?);
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
    Drop {
        id: u64,
    },
    Rename {
        id: u64,
        db: String,
        name: String,
    },
    /// A built index joins the collection (replay rebuilds it unless a later checkpoint has it).
    CreateIndex {
        id: u64,
        ident: u32,
        spec: IndexSpec,
    },
    /// An index's options change; its entries stay.
    ModifyIndex {
        id: u64,
        spec: IndexSpec,
    },
    DropIndex {
        id: u64,
        name: String,
    },
    /// The collection's options are replaced (`collMod` of a validator); its data stays.
    SetOptions {
        id: u64,
        options: Document,
    },
}

impl CatalogOp {
    pub fn to_document(&self) -> Document {
        match self {
            CatalogOp::Create(e) => doc! {"op": "create", "entry": e.to_document()},
            CatalogOp::Drop { id } => doc! {"op": "drop", "id": *id as i64},
            CatalogOp::Rename { id, db, name } => {
                doc! {"op": "rename", "id": *id as i64, "db": db, "name": name}
            }
            CatalogOp::CreateIndex { id, ident, spec } => {
                doc! {"op": "createIndex", "id": *id as i64, "spec": index_document(*ident, spec)}
            }
            CatalogOp::ModifyIndex { id, spec } => {
                doc! {"op": "modifyIndex", "id": *id as i64, "spec": spec.to_document()}
            }
            CatalogOp::DropIndex { id, name } => {
                doc! {"op": "dropIndex", "id": *id as i64, "name": name}
            }
            CatalogOp::SetOptions { id, options } => {
                doc! {"op": "setOptions", "id": *id as i64, "options": options.clone()}
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
        let spec = || d.get_document("spec").map_err(|_| bad("spec"));
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
            "createIndex" => {
                let (ident, spec) = index_from_document(spec()?)?;
                CatalogOp::CreateIndex {
                    id: id()?,
                    ident,
                    spec,
                }
            }
            "modifyIndex" => CatalogOp::ModifyIndex {
                id: id()?,
                spec: IndexSpec::from_document(spec()?)?,
            },
            "dropIndex" => CatalogOp::DropIndex {
                id: id()?,
                name: s("name")?,
            },
            "setOptions" => CatalogOp::SetOptions {
                id: id()?,
                options: d
                    .get_document("options")
                    .map_err(|_| bad("options"))?
                    .clone(),
            },
            _ => return Err(bad("unknown op")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip() {
        let entry = CatalogEntry {
            id: 3,
            db: "d".into(),
            name: "c".into(),
            uuid: bson::Uuid::new(),
            options: doc! {"capped": false},
            indexes: vec![(ID_INDEX_IDENT, IndexSpec::id_index())],
            next_record_id: 9,
        };
        let spec = IndexSpec {
            name: "a_1".into(),
            key: doc! {"a": 1},
            ..IndexSpec::default()
        };
        let ops = [
            CatalogOp::Create(entry),
            CatalogOp::Drop { id: 3 },
            CatalogOp::Rename {
                id: 3,
                db: "e".into(),
                name: "f".into(),
            },
            CatalogOp::CreateIndex {
                id: 3,
                ident: 4,
                spec: spec.clone(),
            },
            CatalogOp::ModifyIndex { id: 3, spec },
            CatalogOp::DropIndex {
                id: 3,
                name: "a_1".into(),
            },
        ];
        for op in ops {
            let back = CatalogOp::from_document(&op.to_document()).expect("parses");
            assert_eq!(back.to_document(), op.to_document());
        }
    }
}
