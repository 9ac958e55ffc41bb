//! Checkpoints: a consistent image of the in-memory state (catalog, every collection's record
//! map, every index's B+tree, per-segment byte counts) as of one log sequence, so a restart
//! replays only the log after it. Written to `checkpoint-<sequence>.ckpt` through a temporary
//! name, synced, renamed, directory synced; older checkpoints are then removed. A checkpoint is
//! written only after its sequence is durable in the log, so every location it names exists.
//! Layout in docs/FORMAT.md; the whole file is covered by one trailing crc32.

use std::collections::HashMap;
use std::sync::Arc;

use bson::Document;

use crate::backend::Backend;
use crate::btree::BTree;
use crate::catalog::{CatalogEntry, Replay, ReplayColl, snapshot_document};
use crate::collection::{CollState, Collection};
use crate::commit::Ticket;
use crate::engine::Inner;
use crate::error::{Result, StorageError};
use crate::index::IndexSpec;
use crate::log::Loc;
use crate::record::u64_at;

pub const CHECKPOINT_MAGIC: &[u8; 8] = b"CAIRNCKP";
pub const CHECKPOINT_FORMAT_VERSION: u32 = 1;
pub const CKPT_MAGIC_OFFSET: usize = 0;
pub const CKPT_VERSION_OFFSET: usize = CKPT_MAGIC_OFFSET + 8;
pub const CKPT_RESERVED_OFFSET: usize = CKPT_VERSION_OFFSET + 4;
pub const CKPT_SEQUENCE_OFFSET: usize = CKPT_RESERVED_OFFSET + 4;
pub const CKPT_TAIL_SEGMENT_OFFSET: usize = CKPT_SEQUENCE_OFFSET + 8;
pub const CKPT_TAIL_OFFSET_OFFSET: usize = CKPT_TAIL_SEGMENT_OFFSET + 8;
pub const CKPT_HEADER_SIZE: usize = CKPT_TAIL_OFFSET_OFFSET + 8;
pub const CKPT_CRC_SIZE: usize = 4;

/// Where log replay resumes after a checkpoint.
pub(crate) struct Start {
    pub segment: u64,
    pub offset: u64,
    pub next_sequence: u64,
    /// Used bytes of the segments before `segment`.
    pub used_bytes: HashMap<u64, u64>,
}

/// A loaded checkpoint.
pub(crate) struct Loaded {
    pub start: Start,
    pub replay: Replay,
    /// (collection id, index name) -> (spec, tree, multikey).
    pub trees: HashMap<(u64, String), (IndexSpec, BTree, bool)>,
}

fn file_name(sequence: u64) -> String {
    format!("checkpoint-{sequence:016x}.ckpt")
}

fn parse_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("checkpoint-")?.strip_suffix(".ckpt")?;
    u64::from_str_radix(hex, 16).ok()
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Serializes one collection's state.
fn write_collection(w: &mut Writer, id: u64, st: &CollState) {
    w.u64(id);
    w.u64(st.data_bytes);
    w.u64(st.records.len() as u64);
    for (rid, loc) in &st.records {
        w.u64(*rid);
        w.u64(loc.segment);
        w.u64(loc.offset);
        w.u32(loc.size);
    }
    w.u32(st.indexes.len() as u32);
    for ix in &st.indexes {
        w.bytes(ix.spec.name.as_bytes());
        w.u8(u8::from(ix.multikey));
        w.bytes(&ix.tree_checkpoint());
    }
}

/// Takes a checkpoint now; returns its sequence.
pub(crate) fn take(inner: &Inner) -> Result<u64> {
    let lock = || StorageError::Poisoned("lock poisoned".into());
    let cat = inner.catalog.read().map_err(|_| lock())?;
    let colls: Vec<Arc<Collection>> = cat.by_id.values().cloned().collect();
    let mut guards = Vec::with_capacity(colls.len());
    for c in &colls {
        guards.push(c.read()?);
    }
    // Every appended data record is applied while we hold all collection read locks.
    let (segment, offset, next_sequence) = inner.shared.log.position()?;
    let mut entries = Vec::with_capacity(colls.len());
    for (c, st) in colls.iter().zip(&guards) {
        let meta = c.meta.read().map_err(|_| lock())?.clone();
        entries.push(CatalogEntry {
            id: c.id,
            db: meta.db,
            name: meta.name,
            uuid: c.uuid,
            options: meta.options,
            indexes: st.indexes.iter().map(|i| i.spec.clone()).collect(),
            next_record_id: st.next_record_id,
        });
    }
    let mut w = Writer(Vec::new());
    w.0.extend_from_slice(CHECKPOINT_MAGIC);
    w.u32(CHECKPOINT_FORMAT_VERSION);
    w.u32(0);
    w.u64(next_sequence - 1);
    w.u64(segment);
    w.u64(offset);
    let catalog = snapshot_document(&entries, cat.next_collection_id)
        .to_vec()
        .map_err(|e| StorageError::InvalidDocument(e.to_string()))?;
    w.bytes(&catalog);
    let usage = inner.shared.log.segment_usage();
    w.u32(usage.len() as u32);
    for (id, used, live) in usage {
        w.u64(id);
        w.u64(used);
        w.u64(live);
    }
    w.u32(colls.len() as u32);
    for (c, st) in colls.iter().zip(&guards) {
        write_collection(&mut w, c.id, st);
    }
    drop(guards);
    drop(cat);
    let crc = crc32fast::hash(&w.0);
    w.u32(crc);
    let sequence = next_sequence - 1;
    Ticket {
        sequence,
        record_ids: Vec::new(),
        commit: inner.shared.commit.clone(),
    }
    .wait_durable_blocking()?;
    write_file(inner.backend.as_ref(), sequence, &w.0)?;
    Ok(sequence)
}

fn write_file(backend: &dyn Backend, sequence: u64, bytes: &[u8]) -> Result<()> {
    let name = file_name(sequence);
    let tmp = format!("{name}.tmp");
    let f = backend.create(&tmp)?;
    f.write_at(0, bytes)?;
    f.sync()?;
    backend.rename(&tmp, &name)?;
    backend.sync_dir()?;
    for other in backend.list()? {
        if other != name && (parse_file_name(&other).is_some() || other.starts_with("checkpoint-"))
        {
            backend.remove(&other)?;
        }
    }
    backend.sync_dir()?;
    Ok(())
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let end =
            end.ok_or_else(|| StorageError::InvalidDocument("checkpoint truncated".into()))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64_at(self.take(8)?, 0))
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = usize::try_from(self.u64()?)
            .map_err(|e| StorageError::InvalidDocument(e.to_string()))?;
        self.take(n)
    }
}

/// Loads the newest checkpoint, if any. Errors mean "do not trust it": replay everything.
pub(crate) fn load_latest(backend: &dyn Backend) -> Result<Option<Loaded>> {
    let mut newest = None;
    for name in backend.list()? {
        if name.starts_with("checkpoint-") && name.ends_with(".tmp") {
            backend.remove(&name)?;
        } else if let Some(seq) = parse_file_name(&name) {
            newest = newest.max(Some(seq));
        }
    }
    let Some(seq) = newest else { return Ok(None) };
    let name = file_name(seq);
    let f = backend.open(&name)?;
    let len =
        usize::try_from(f.len()?).map_err(|e| StorageError::InvalidDocument(e.to_string()))?;
    let mut b = vec![0u8; len];
    f.read_at(0, &mut b)?;
    let bad = |why: &str| StorageError::corruption(&name, 0, why);
    if len < CKPT_HEADER_SIZE + CKPT_CRC_SIZE || &b[..CKPT_VERSION_OFFSET] != CHECKPOINT_MAGIC {
        return Err(bad("not a checkpoint"));
    }
    let body = &b[..len - CKPT_CRC_SIZE];
    if crc32fast::hash(body).to_le_bytes() != b[len - CKPT_CRC_SIZE..] {
        return Err(bad("checksum mismatch"));
    }
    parse(body).map(Some).map_err(|e| bad(&e.to_string()))
}

fn parse(body: &[u8]) -> Result<Loaded> {
    let mut r = Reader {
        b: body,
        pos: CKPT_SEQUENCE_OFFSET,
    };
    let sequence = r.u64()?;
    let segment = r.u64()?;
    let offset = r.u64()?;
    let catalog = Document::from_reader(r.bytes()?)
        .map_err(|e| StorageError::InvalidDocument(e.to_string()))?;
    let mut replay = Replay::default();
    replay.load_snapshot(&catalog)?;
    let mut used_bytes = HashMap::new();
    for _ in 0..r.u32()? {
        let (id, used, live) = (r.u64()?, r.u64()?, r.u64()?);
        used_bytes.insert(id, used);
        replay.live_bytes.insert(id, live as i64);
    }
    let mut trees = HashMap::new();
    for _ in 0..r.u32()? {
        let id = r.u64()?;
        let data_bytes = r.u64()?;
        let mut records = std::collections::BTreeMap::new();
        for _ in 0..r.u64()? {
            let rid = r.u64()?;
            let loc = Loc {
                segment: r.u64()?,
                offset: r.u64()?,
                size: r.u32()?,
            };
            records.insert(rid, loc);
        }
        let specs: Vec<IndexSpec> = replay
            .colls
            .get(&id)
            .and_then(|c| c.entry.as_ref())
            .map(|e| e.indexes.clone())
            .unwrap_or_default();
        for _ in 0..r.u32()? {
            let name = String::from_utf8_lossy(r.bytes()?).into_owned();
            let multikey = r.u8()? != 0;
            let tree = BTree::from_checkpoint(r.bytes()?)
                .map_err(|e| StorageError::InvalidDocument(e.to_string()))?;
            if let Some(spec) = specs.iter().find(|s| s.name == name) {
                trees.insert((id, name), (spec.clone(), tree, multikey));
            }
        }
        let c: &mut ReplayColl = replay.coll(id);
        c.records = records;
        c.data_bytes = data_bytes;
    }
    replay.changed = Some(HashMap::new());
    Ok(Loaded {
        start: Start {
            segment,
            offset,
            next_sequence: sequence + 1,
            used_bytes,
        },
        replay,
        trees,
    })
}
