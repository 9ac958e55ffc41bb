//! Changing an index's options in place (`collMod`): `expireAfterSeconds` and `hidden` change
//! nothing about the index's entries, so the index is kept and only its spec changes, logged as
//! one `ModifyIndex` catalog record. A collection's options (the validator and its level and
//! action) are replaced the same way, as one `SetOptions` record.

use crate::catalog::CatalogOp;
use crate::engine::Engine;
use crate::error::{Result, StorageError};
use crate::index::IndexSpec;

impl Engine {
    /// Apply `change` to the spec of index `name`; returns the spec as it was. The change may
    /// not touch the name or the key pattern.
    pub fn modify_index(
        &self,
        db: &str,
        coll: &str,
        name: &str,
        change: &dyn Fn(&mut IndexSpec),
    ) -> Result<IndexSpec> {
        let c = self.existing(db, coll)?;
        let mut st = c.write_state()?;
        let ix = st
            .indexes
            .iter_mut()
            .find(|i| i.spec.name == name)
            .ok_or_else(|| StorageError::IndexNotFound(name.to_string()))?;
        let old = ix.spec.clone();
        let mut new = old.clone();
        change(&mut new);
        if new.name != old.name || new.key != old.key || new.partial_filter != old.partial_filter {
            return Err(StorageError::InvalidIndex(
                "collMod may change only expireAfterSeconds and hidden".into(),
            ));
        }
        if new == old {
            return Ok(old);
        }
        let mut note = crate::engine::ddl_note("collMod", c.id, db, coll, c.uuid);
        note.insert("index", new.to_document());
        note.insert("oldIndex", old.to_document());
        let op = CatalogOp::ModifyIndex {
            id: c.id,
            spec: new.clone(),
        };
        let ticket = self.log_catalog_noted(&[op], &[note])?;
        ix.spec = new;
        drop(st);
        ticket.wait_durable_blocking()?;
        Ok(old)
    }
}

impl Engine {
    /// Replace the options of `db.coll` (as `create` stored them); returns the old ones.
    pub fn set_collection_options(
        &self,
        db: &str,
        coll: &str,
        options: bson::Document,
    ) -> Result<bson::Document> {
        let c = self.existing(db, coll)?;
        // The state lock orders this change with checkpoints' cuts, as for index changes.
        let st = c.write_state()?;
        let mut note = crate::engine::ddl_note("collMod", c.id, db, coll, c.uuid);
        note.insert("options", options.clone());
        note.insert("oldOptions", c.options());
        let op = CatalogOp::SetOptions {
            id: c.id,
            options: options.clone(),
        };
        let ticket = self.log_catalog_noted(&[op], &[note])?;
        let old = {
            let mut meta = c
                .meta
                .write()
                .map_err(|_| StorageError::Poisoned("meta lock poisoned".into()))?;
            std::mem::replace(&mut meta.options, options)
        };
        drop(st);
        ticket.wait_durable_blocking()?;
        Ok(old)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Engine, EngineOptions, IndexSpec, WriteOp};
    use bson::{RawDocumentBuf, doc};

    #[test]
    fn modified_spec_survives_reopen_and_keeps_entries() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
            let c = e.create_collection("d", "c", doc! {}).unwrap();
            let docs = (0..10).map(|i| {
                WriteOp::Insert(
                    RawDocumentBuf::try_from(&doc! { "_id": i, "t": i })
                        .unwrap()
                        .into(),
                )
            });
            c.write(docs.collect())
                .unwrap()
                .wait_durable_blocking()
                .unwrap();
            let spec = IndexSpec {
                name: "t_1".into(),
                key: doc! { "t": 1 },
                expire_after_seconds: Some(60),
                ..IndexSpec::default()
            };
            e.create_index("d", "c", spec, &|_, _| {}).unwrap();
            let old = e
                .modify_index("d", "c", "t_1", &|s| s.expire_after_seconds = Some(5))
                .unwrap();
            assert_eq!(old.expire_after_seconds, Some(60));
            e.modify_index("d", "c", "t_1", &|s| s.hidden = true)
                .unwrap();
            assert!(
                e.modify_index("d", "c", "t_1", &|s| s.key = doc! { "x": 1 })
                    .is_err()
            );
            assert!(e.modify_index("d", "c", "nope", &|_| {}).is_err());
            e.close().unwrap();
        }
        let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
        let c = e.collection("d", "c").unwrap();
        let ix = c
            .indexes()
            .into_iter()
            .find(|i| i.spec.name == "t_1")
            .unwrap();
        assert_eq!(ix.spec.expire_after_seconds, Some(5));
        assert!(ix.spec.hidden);
        assert_eq!(ix.entries, 10);
    }

    #[test]
    fn collection_options_survive_reopen_with_and_without_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
            e.create_collection("d", "c", doc! { "a": 1 }).unwrap();
            let old = e
                .set_collection_options("d", "c", doc! { "validator": { "x": 1 } })
                .unwrap();
            assert_eq!(old, doc! { "a": 1 });
            assert!(e.set_collection_options("d", "nope", doc! {}).is_err());
            // No checkpoint: replay applies the record.
        }
        let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
        let c = e.collection("d", "c").unwrap();
        assert_eq!(c.options(), doc! { "validator": { "x": 1 } });
        e.checkpoint().unwrap();
        e.close().unwrap();
        let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
        assert_eq!(
            e.collection("d", "c").unwrap().options(),
            doc! { "validator": { "x": 1 } }
        );
    }
}
