//! Replay: applies the log records after the checkpoint (every record, if there is none) to the
//! collections built from the checkpoint blob. A PUT or DELETE names the index keys it removed,
//! so replay updates the record tree and indexes without reading any earlier document version;
//! the only document bytes it reads are the ones in the record itself. Indexes created in the
//! replayed tail have no checkpointed tree: they are marked and rebuilt from the documents once
//! replay ends. Segments' live bytes are the sum of the collections' per-segment counts.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, RwLock};

use bson::RawDocument;

use crate::btree::Tree;
use crate::catalog::{CatalogEntry, CatalogOp};
use crate::collection::{CollMeta, CollState, Collection, Shared};
use crate::error::{Result, StorageError};
use crate::index::{FilterCompiler, Index};
use crate::log::Loc;
use crate::pager::Pager;
use crate::record::{self, Kind};
use crate::recovery::Item;

/// One collection during replay: its state (trees included) and catalog facts.
pub(crate) struct ReplayColl {
    pub entry: CatalogEntry,
    pub state: CollState,
    /// Idents of indexes created in the tail, to rebuild after replay.
    pub rebuild: HashSet<u32>,
}

pub(crate) struct Replay<'a> {
    pub pager: &'a Pager,
    pub compiler: Option<&'a FilterCompiler>,
    pub colls: BTreeMap<u64, ReplayColl>,
    pub next_collection_id: u64,
}

fn lost(what: &str) -> StorageError {
    StorageError::InvalidDocument(format!("replay: {what}"))
}

impl Replay<'_> {
    pub fn apply(&mut self, item: Item<'_>) -> Result<()> {
        let name = record::segment_file_name(item.loc.segment);
        let bad = |why: &str| StorageError::corruption(&name, item.loc.offset, why);
        match item.kind {
            Kind::Put | Kind::Delete | Kind::Move => {
                let data = record::parse_data(item.kind, item.payload).map_err(bad)?;
                let pager = self.pager;
                let compiler = self.compiler;
                let Some(c) = self.colls.get_mut(&data.collection_id) else {
                    return Err(bad(
                        "data record for a collection the catalog does not know",
                    ));
                };
                let mut loc = item.loc;
                loc.doc_size = data.document.map_or(0, |d| d.len() as u32);
                apply_data(pager, compiler, c, item.kind, &data, loc)?;
            }
            Kind::Catalog => {
                let d =
                    bson::Document::from_reader(item.payload).map_err(|e| bad(&e.to_string()))?;
                self.apply_op(CatalogOp::from_document(&d)?)?;
            }
            Kind::BatchBegin | Kind::BatchEnd => {}
        }
        Ok(())
    }

    fn apply_op(&mut self, op: CatalogOp) -> Result<()> {
        let pager = self.pager;
        match op {
            CatalogOp::Create(e) => {
                self.next_collection_id = self.next_collection_id.max(e.id + 1);
                let state = CollState::new(pager, self.compiler)?;
                self.colls.insert(
                    e.id,
                    ReplayColl {
                        entry: e,
                        state,
                        rebuild: HashSet::new(),
                    },
                );
            }
            CatalogOp::Drop { id } => {
                if let Some(c) = self.colls.remove(&id) {
                    free_state(pager, &c.state)?;
                }
            }
            CatalogOp::Rename { id, db, name } => {
                let c = self.colls.get_mut(&id).ok_or_else(|| lost("rename"))?;
                c.entry.db = db;
                c.entry.name = name;
            }
            CatalogOp::CreateIndex { id, ident, spec } => {
                let c = self.colls.get_mut(&id).ok_or_else(|| lost("createIndex"))?;
                let ix = Index::new(spec, ident, self.compiler, Tree::create(pager)?)?;
                c.state.indexes.retain(|i| i.spec.name != ix.spec.name);
                c.state.indexes.push(ix);
                c.state.next_index_ident = c.state.next_index_ident.max(ident + 1);
                c.rebuild.insert(ident);
            }
            CatalogOp::ModifyIndex { id, spec } => {
                let c = self.colls.get_mut(&id).ok_or_else(|| lost("modifyIndex"))?;
                if let Some(ix) = c
                    .state
                    .indexes
                    .iter_mut()
                    .find(|i| i.spec.name == spec.name)
                {
                    ix.spec = spec;
                }
            }
            CatalogOp::DropIndex { id, name } => {
                let c = self.colls.get_mut(&id).ok_or_else(|| lost("dropIndex"))?;
                if let Some(pos) = c.state.indexes.iter().position(|i| i.spec.name == name) {
                    let ix = c.state.indexes.remove(pos);
                    c.rebuild.remove(&ix.ident);
                    free_tree(pager, &ix.tree)?;
                }
            }
        }
        Ok(())
    }

    /// Turns replayed collections into live ones; indexes created in the tail are rebuilt.
    pub fn finish(
        self,
        shared: &Arc<Shared>,
        backend: &Arc<dyn crate::backend::Backend>,
    ) -> Result<Vec<Arc<Collection>>> {
        let mut out = Vec::with_capacity(self.colls.len());
        for (id, rc) in self.colls {
            let ReplayColl {
                entry,
                mut state,
                rebuild,
            } = rc;
            state.next_record_id = state.next_record_id.max(entry.next_record_id);
            let c = Arc::new(Collection {
                id,
                uuid: entry.uuid,
                meta: RwLock::new(CollMeta {
                    db: entry.db,
                    name: entry.name,
                    options: entry.options,
                }),
                state: RwLock::new(state),
                shared: shared.clone(),
            });
            if !rebuild.is_empty() {
                crate::index_build::rebuild(&c, &rebuild, backend, self.compiler)?;
            }
            out.push(c);
        }
        Ok(out)
    }
}

/// Applies one data record; returns the location it superseded.
fn apply_data(
    pager: &Pager,
    _compiler: Option<&FilterCompiler>,
    c: &mut ReplayColl,
    kind: Kind,
    data: &record::DataPayload<'_>,
    loc: Loc,
) -> Result<Option<Loc>> {
    let rid = data.record_id;
    let st = &mut c.state;
    if kind == Kind::Move {
        // Only the place changes; a move of a document deleted later in the tail is fine.
        return if st.loc(pager, rid)?.is_some() {
            st.put_loc(pager, rid, loc)
        } else {
            Ok(None)
        };
    }
    for (ident, key) in &data.removed {
        if c.rebuild.contains(ident) {
            continue;
        }
        if let Some(ix) = st.indexes.iter_mut().find(|i| i.ident == *ident) {
            ix.remove(pager, key, rid)?;
        }
    }
    let Some(doc) = data.document else {
        return st.remove_loc(pager, rid);
    };
    let doc = RawDocument::from_bytes(doc).map_err(|e| {
        StorageError::corruption(
            &record::segment_file_name(loc.segment),
            loc.offset,
            e.to_string(),
        )
    })?;
    for ix in st.indexes.iter_mut() {
        if c.rebuild.contains(&ix.ident) {
            continue;
        }
        let (keys, multikey) = ix.keys_of(doc)?;
        for k in keys {
            ix.insert(pager, &k, rid)?;
        }
        ix.multikey |= multikey;
    }
    st.put_loc(pager, rid, loc)
}

/// Frees every page of a collection's trees.
pub(crate) fn free_state(pager: &Pager, st: &CollState) -> Result<()> {
    free_tree(pager, &st.records)?;
    for ix in &st.indexes {
        free_tree(pager, &ix.tree)?;
    }
    Ok(())
}

pub(crate) fn free_tree(pager: &Pager, tree: &Tree) -> Result<()> {
    for id in tree.all_pages(pager)? {
        pager.free(id)?;
    }
    Ok(())
}
