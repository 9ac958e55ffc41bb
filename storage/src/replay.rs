//! Replay: applies the log records after the checkpoint (every record, if there is none) to the
//! collections built from the checkpoint blob. A PUT or DELETE names the index keys it removed,
//! so replay updates the record tree and indexes without reading any earlier document version;
//! the only document bytes it reads are the ones in the record itself. Indexes created in the
//! replayed tail have no checkpointed tree: they are marked and rebuilt from the documents once
//! replay ends. Segments' live bytes are the sum of the collections' per-segment counts.
//!
//! Index changes are not applied record by record: they are buffered per index (up to a memory
//! bound), sorted by entry key (stably, so the changes to one entry keep their log order) and
//! applied in key order, so each leaf is visited once per flush instead of once per change: a
//! tail of random keys over indexes larger than the cache would otherwise read a page for most
//! changes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use bson::RawDocument;

use crate::btree::Tree;
use crate::catalog::{CatalogEntry, CatalogOp};
use crate::collection::{CollMeta, CollState, Collection, Shared};
use crate::error::{Result, StorageError};
use crate::index::{Index, IndexCompilers, IndexSpec, entry_key};
use crate::limits::REPLAY_INDEX_BUFFER_BYTES;
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
    /// Index changes not applied yet: ident -> (entry key, insert?) in log order.
    pub pending: HashMap<u32, Vec<(Vec<u8>, bool)>>,
}

impl ReplayColl {
    pub fn new(entry: CatalogEntry, state: CollState) -> ReplayColl {
        ReplayColl {
            entry,
            state,
            rebuild: HashSet::new(),
            pending: HashMap::new(),
        }
    }

    /// Applies the buffered index changes, each index's in entry-key order.
    fn flush(&mut self, pager: &Pager) -> Result<()> {
        for (ident, mut ops) in std::mem::take(&mut self.pending) {
            let Some(ix) = self.state.indexes.iter_mut().find(|i| i.ident == ident) else {
                continue;
            };
            ops.sort_by(|a, b| a.0.cmp(&b.0));
            for (entry, insert) in ops {
                if insert {
                    ix.tree.insert(pager, &entry, &[])?;
                } else {
                    ix.tree.remove(pager, &entry)?;
                }
            }
        }
        Ok(())
    }
}

pub(crate) struct Replay<'a> {
    pub pager: &'a Pager,
    pub compiler: Option<&'a IndexCompilers>,
    pub colls: BTreeMap<u64, ReplayColl>,
    pub next_collection_id: u64,
    /// Bytes of buffered index changes over all collections.
    pub pending_bytes: usize,
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
                self.pending_bytes += apply_data(pager, compiler, c, item.kind, &data, loc)?;
                if self.pending_bytes >= REPLAY_INDEX_BUFFER_BYTES {
                    self.flush()?;
                }
            }
            Kind::Catalog => {
                // Catalog changes may drop or add indexes: buffered changes go in first.
                self.flush()?;
                let d =
                    bson::Document::from_reader(item.payload).map_err(|e| bad(&e.to_string()))?;
                self.apply_op(CatalogOp::from_document(&d)?)?;
            }
            Kind::BatchBegin | Kind::BatchEnd => {}
            // Pre-images are for the history (change streams); the data is in the next record.
            Kind::PreImage => {
                record::parse_data(item.kind, item.payload).map_err(bad)?;
            }
            // A stamp describes its batch for the history; replay needs nothing from it.
            Kind::Stamp => {
                record::parse_stamp(item.payload).map_err(bad)?;
            }
        }
        Ok(())
    }

    /// Applies every buffered index change.
    pub fn flush(&mut self) -> Result<()> {
        for c in self.colls.values_mut() {
            c.flush(self.pager)?;
        }
        self.pending_bytes = 0;
        Ok(())
    }

    fn apply_op(&mut self, op: CatalogOp) -> Result<()> {
        let pager = self.pager;
        match op {
            CatalogOp::Create(e) => {
                self.next_collection_id = self.next_collection_id.max(e.id + 1);
                let id_spec = e
                    .indexes
                    .iter()
                    .find(|(_, s)| s.name == crate::index::ID_INDEX_NAME)
                    .map_or_else(IndexSpec::id_index, |(_, s)| s.clone());
                let state = CollState::new(pager, self.compiler, id_spec)?;
                self.colls.insert(e.id, ReplayColl::new(e, state));
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
            CatalogOp::SetOptions { id, options } => {
                let c = self.colls.get_mut(&id).ok_or_else(|| lost("setOptions"))?;
                c.entry.options = options;
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
        mut self,
        shared: &Arc<Shared>,
        backend: &Arc<dyn crate::backend::Backend>,
    ) -> Result<Vec<Arc<Collection>>> {
        self.flush()?;
        let compiler = self.compiler;
        let mut out = Vec::with_capacity(self.colls.len());
        for (id, rc) in self.colls {
            let ReplayColl {
                entry,
                mut state,
                rebuild,
                ..
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
                write_ops: Default::default(),
            });
            if !rebuild.is_empty() {
                crate::index_build::rebuild(&c, &rebuild, backend, compiler)?;
            }
            out.push(c);
        }
        Ok(out)
    }
}

/// Applies one data record to the record tree and buffers its index changes; returns the bytes
/// buffered.
fn apply_data(
    pager: &Pager,
    _compiler: Option<&IndexCompilers>,
    c: &mut ReplayColl,
    kind: Kind,
    data: &record::DataPayload<'_>,
    loc: Loc,
) -> Result<usize> {
    let rid = data.record_id;
    let st = &mut c.state;
    if kind == Kind::Move {
        // Only the place changes; a move of a document deleted later in the tail is fine.
        if st.loc(pager, rid)?.is_some() {
            st.put_loc(pager, rid, loc)?;
        }
        return Ok(0);
    }
    let mut bytes = 0;
    for (ident, key) in &data.removed {
        if !c.rebuild.contains(ident) && st.indexes.iter().any(|i| i.ident == *ident) {
            let entry = entry_key(key, rid);
            bytes += entry.len() + BUFFERED_OP_OVERHEAD_BYTES;
            c.pending.entry(*ident).or_default().push((entry, false));
        }
    }
    let Some(doc) = data.document else {
        st.remove_loc(pager, rid)?;
        return Ok(bytes);
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
        let ops = c.pending.entry(ix.ident).or_default();
        for k in keys {
            let entry = entry_key(&k, rid);
            bytes += entry.len() + BUFFERED_OP_OVERHEAD_BYTES;
            ops.push((entry, true));
        }
        ix.multikey |= multikey;
    }
    st.put_loc(pager, rid, loc)?;
    Ok(bytes)
}

/// Memory a buffered index change costs besides its key (vector slot, flag, allocation).
const BUFFERED_OP_OVERHEAD_BYTES: usize = 48;

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
