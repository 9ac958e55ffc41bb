//! The page file (`pages.db`) and the rules for changing it. Pages 0 and 1 are the meta slots
//! (`meta`); every other page belongs to a B+tree, to a checkpoint blob, or is free. All page
//! bytes pass through the buffer pool (`pool`), whose size is the cache setting.
//!
//! Copy-on-write by checkpoint: a page allocated since the last checkpoint cut is *fresh* and may
//! be changed in place; any other page is referenced by a checkpoint on disk, so `write` copies
//! it to a fresh page and frees the old one. A cut (under the engine's locks, so it sees whole
//! write batches) seals the fresh set: those pages make up the checkpoint and are written
//! without locks while writers go on copying. A dirty page may be written to its own location at
//! any time (eviction): no meta references a fresh or sealed page's location.
//!
//! Reuse rule: a page freed after cut t is referenced by checkpoints up to t, so it becomes
//! allocatable only once both meta slots hold checkpoints cut after t. That keeps both slots
//! openable, so a torn or corrupt newest meta can fall back to the other one.
//!
//! Every page written carries a crc32 of its id and bytes (in the header's `link_b` field), so a
//! torn, misdirected or rotten page read back is an error naming the page, never bad data.

pub mod meta;
pub mod pool;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use bson::{Binary, Bson, Document, spec::BinarySubtype};

use crate::backend::{Backend, BackendFile};
use crate::btree::page::{self, PAGE_SIZE_BYTES, Page};
use crate::error::{Result, StorageError};
use crate::limits::CHECKPOINT_SYNC_SLICE_BYTES;
pub use meta::{META_SLOTS, Meta, Slot};
use pool::Victim;
pub use pool::{FRAME_OVERHEAD_BYTES, PageRef, Pool};

/// A page's number: its byte offset in the file is `id * PAGE_SIZE_BYTES`.
pub type PageId = u32;

/// Hashes page ids for the pool's map and the fresh set: one multiplication (ids are dense small
/// integers, and the pool is looked up several times per tree operation; SipHash showed up at
/// the top of profiles). Not for keys a client chooses.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (u64::from(n) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type IdBuild = std::hash::BuildHasherDefault<IdHasher>;

/// Name of the page file in the data directory.
pub const PAGE_FILE_NAME: &str = "pages.db";
/// The pool never holds fewer frames than this, whatever the cache setting (a tree operation
/// pins a root-to-leaf path and a sibling or two).
pub const POOL_FRAMES_MIN: usize = 16;
/// Bytes of blob data per blob page (the rest is the page header).
pub const BLOB_PAGE_PAYLOAD_BYTES: usize = PAGE_SIZE_BYTES - page::HEADER_SIZE_BYTES;

struct Alloc {
    /// Number of the last cut (0 before the first).
    cuts: u64,
    /// The checkpoint number each meta slot holds (0: nothing usable).
    slots: [u64; META_SLOTS as usize],
    /// Pages `[0, high_water)` exist in the file's address space.
    high_water: PageId,
    free: BTreeSet<PageId>,
    /// Pages freed after cut `tag`, by tag.
    freed: BTreeMap<u64, Vec<PageId>>,
    fresh: HashSet<PageId, IdBuild>,
}

impl Alloc {
    /// Moves every freed page no slot can reference any more to `free`.
    fn release(&mut self) {
        let oldest = self.slots.iter().copied().min().unwrap_or(0);
        let keep = self.freed.split_off(&oldest);
        for (_, pages) in std::mem::replace(&mut self.freed, keep) {
            self.free.extend(pages);
        }
    }
}

/// What a restart finds in the page file.
pub struct Opened {
    /// The meta opened from and the catalog part of its blob; `None` before any checkpoint.
    pub checkpoint: Option<(Meta, Document)>,
    /// Why the newest slot was passed over, when it was.
    pub fallback_reason: Option<String>,
}

/// A checkpoint between its cut and its meta write.
pub struct Cut {
    pub meta: Meta,
    slot: PageId,
    sealed: Vec<PageId>,
    blob: Vec<u8>,
    blob_pages: Vec<PageId>,
}

/// Numbers for `EngineStats`.
#[derive(Clone, Debug, Default)]
pub struct PagerStats {
    pub frames_max: usize,
    pub frames: usize,
    pub frames_dirty: usize,
    pub pages_read: u64,
    pub pages_written: u64,
    pub pages_evicted: u64,
    pub pages_evicted_dirty: u64,
    pub page_count: u64,
    pub free_pages: u64,
}

pub struct Pager {
    file: Arc<dyn BackendFile>,
    pool: Pool,
    alloc: Mutex<Alloc>,
    /// `Alloc::cuts`, readable without the lock: a frame allocated at the current cut number
    /// is fresh without a look at the fresh set.
    cuts_now: std::sync::atomic::AtomicU64,
}

fn lock_err() -> StorageError {
    StorageError::Poisoned("page allocator lock poisoned".into())
}

fn corrupt(id: PageId, why: impl Into<String>) -> StorageError {
    StorageError::corruption(PAGE_FILE_NAME, u64::from(id) * PAGE_SIZE_BYTES as u64, why)
}

impl Pager {
    /// Opens (or creates) the page file with a pool of `frames` pages and finds the checkpoint
    /// to start from.
    pub fn open(backend: &dyn Backend, frames: usize) -> Result<(Pager, Opened)> {
        let file = match backend.open(PAGE_FILE_NAME) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let f = backend.create(PAGE_FILE_NAME)?;
                f.set_len(u64::from(META_SLOTS) * PAGE_SIZE_BYTES as u64)?;
                f.sync()?;
                backend.sync_dir()?;
                f
            }
            Err(e) => return Err(e.into()),
        };
        let mut slots = Vec::new();
        for slot in 0..META_SLOTS {
            let mut b = vec![0u8; PAGE_SIZE_BYTES];
            let len = file.len()?;
            let end = (u64::from(slot) + 1) * PAGE_SIZE_BYTES as u64;
            if len >= end {
                file.read_at(u64::from(slot) * PAGE_SIZE_BYTES as u64, &mut b)?;
            }
            slots.push(Meta::decode(&b));
        }
        let pager = Pager {
            file,
            pool: Pool::new(frames),
            alloc: Mutex::new(Alloc {
                cuts: 0,
                slots: [0; META_SLOTS as usize],
                high_water: META_SLOTS,
                free: BTreeSet::new(),
                freed: BTreeMap::new(),
                fresh: HashSet::default(),
            }),
            cuts_now: std::sync::atomic::AtomicU64::new(0),
        };
        let opened = pager.choose(&slots)?;
        Ok((pager, opened))
    }

    /// Picks the newest slot whose meta and blob check out, falling back to the other one.
    fn choose(&self, slots: &[Slot]) -> Result<Opened> {
        let mut order: Vec<(usize, &Meta)> = slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Slot::Valid(m) => Some((i, m)),
                _ => None,
            })
            .collect();
        order.sort_by_key(|(_, m)| std::cmp::Reverse(m.checkpoint));
        let invalid: Vec<&str> = slots
            .iter()
            .filter_map(|s| match s {
                Slot::Invalid(why) => Some(*why),
                _ => None,
            })
            .collect();
        let mut fallback_reason = invalid.first().map(|w| format!("meta slot: {w}"));
        for (n, (slot, meta)) in order.iter().enumerate() {
            match self.read_blob(meta) {
                Ok((blob, blob_pages)) => {
                    let other = order
                        .get(n + 1)
                        .filter(|_| n == 0)
                        .map(|(_, m)| m.checkpoint);
                    let catalog = self.adopt(*slot, meta, other.unwrap_or(0), blob, blob_pages)?;
                    return Ok(Opened {
                        checkpoint: Some(((*meta).clone(), catalog)),
                        fallback_reason,
                    });
                }
                Err(e) => fallback_reason = Some(format!("checkpoint {}: {e}", meta.checkpoint)),
            }
        }
        if !order.is_empty() || invalid.len() == slots.len() {
            // A slot was written and nothing opens: that is damage, not a first start. (One
            // torn slot next to an empty one is a first checkpoint cut short.)
            return Err(StorageError::corruption(
                PAGE_FILE_NAME,
                0,
                fallback_reason.unwrap_or_else(|| "no usable meta slot".into()),
            ));
        }
        Ok(Opened {
            checkpoint: None,
            fallback_reason,
        })
    }

    /// Takes the allocator state of the chosen checkpoint.
    fn adopt(
        &self,
        slot: usize,
        meta: &Meta,
        other: u64,
        mut blob: Document,
        blob_pages: Vec<PageId>,
    ) -> Result<Document> {
        let ids = |blob: &mut Document, key: &str| -> Result<Vec<PageId>> {
            match blob.remove(key) {
                Some(Bson::Binary(b)) if b.bytes.len() % 4 == 0 => Ok(b
                    .bytes
                    .chunks_exact(4)
                    .map(|c| PageId::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()),
                _ => Err(corrupt(
                    meta.blob_page,
                    format!("checkpoint blob lacks {key}"),
                )),
            }
        };
        let free = ids(&mut blob, "free")?;
        let pending = ids(&mut blob, "pending")?;
        let mut a = self.alloc.lock().map_err(|_| lock_err())?;
        a.cuts = meta.checkpoint;
        self.cuts_now.store(a.cuts, Ordering::Release);
        a.slots = [0; META_SLOTS as usize];
        a.slots[slot] = meta.checkpoint;
        a.slots[1 - slot] = other;
        a.high_water = meta.page_count.max(META_SLOTS);
        a.free = free.into_iter().collect();
        // Freed before this checkpoint's cut: reusable once the next checkpoint is durable.
        a.freed.insert(meta.checkpoint - 1, pending);
        // The blob itself: referenced by this checkpoint only.
        a.freed.insert(meta.checkpoint, blob_pages);
        Ok(blob)
    }

    fn read_blob(&self, meta: &Meta) -> Result<(Document, Vec<PageId>)> {
        let len = usize::try_from(meta.blob_len).map_err(|_| corrupt(meta.blob_page, "blob"))?;
        let pages = len.div_ceil(BLOB_PAGE_PAYLOAD_BYTES);
        if pages as u64 > u64::from(meta.page_count) {
            return Err(corrupt(meta.blob_page, "blob longer than the page file"));
        }
        let mut out = Vec::with_capacity(len);
        let mut id = meta.blob_page;
        let mut ids = Vec::with_capacity(pages);
        for _ in 0..pages {
            ids.push(id);
            if id < META_SLOTS || id >= meta.page_count {
                return Err(corrupt(id, "blob chain leaves the page file"));
            }
            let p = self.read_from_disk(id)?;
            if p.kind() != page::KIND_BLOB {
                return Err(corrupt(id, "not a blob page"));
            }
            let want = (len - out.len()).min(BLOB_PAGE_PAYLOAD_BYTES);
            out.extend_from_slice(&p.payload()[..want]);
            id = p.link();
        }
        if crc32fast::hash(&out) != meta.blob_crc {
            return Err(corrupt(meta.blob_page, "blob checksum mismatch"));
        }
        let doc = Document::from_reader(out.as_slice())
            .map_err(|e| corrupt(meta.blob_page, e.to_string()))?;
        Ok((doc, ids))
    }

    fn alloc(&self) -> Result<MutexGuard<'_, Alloc>> {
        self.alloc.lock().map_err(|_| lock_err())
    }

    /// Reads a page through the pool.
    pub fn read(&self, id: PageId) -> Result<PageRef> {
        if let Some(f) = self.pool.get(id) {
            return Ok(f);
        }
        let page = self.read_from_disk(id)?;
        let mut victims = Vec::new();
        let frame =
            self.pool
                .insert_clean(id, Arc::new(self.pool.frame(page, false)), &mut victims);
        self.write_victims(victims)?;
        Ok(frame)
    }

    fn read_from_disk(&self, id: PageId) -> Result<Page> {
        let mut buf = vec![0u8; PAGE_SIZE_BYTES];
        self.file
            .read_at(u64::from(id) * PAGE_SIZE_BYTES as u64, &mut buf)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => corrupt(id, "page past the end of the file"),
                _ => StorageError::Io(e),
            })?;
        if !page::verify_crc(id, &buf) {
            return Err(corrupt(id, "page checksum mismatch"));
        }
        Page::from_bytes(&buf).ok_or_else(|| corrupt(id, "page"))
    }

    /// A new empty page of `kind`, fresh (changeable in place until the next cut).
    pub fn allocate(&self, kind: u8) -> Result<(PageId, PageRef)> {
        self.allocate_page(Page::new(kind))
    }

    /// A fresh page holding `page`.
    pub fn allocate_page(&self, page: Page) -> Result<(PageId, PageRef)> {
        let (id, cut) = {
            let mut a = self.alloc()?;
            let id = match a.free.pop_first() {
                Some(id) => id,
                None => {
                    let id = a.high_water;
                    a.high_water = id
                        .checked_add(1)
                        .ok_or_else(|| StorageError::LimitExceeded("page file full".into()))?;
                    id
                }
            };
            a.fresh.insert(id);
            (id, a.cuts)
        };
        let frame = Arc::new(self.pool.frame(page, true));
        frame.set_fresh_cut(cut);
        let mut victims = Vec::new();
        self.pool.insert_new(id, frame.clone(), &mut victims);
        self.write_victims(victims)?;
        Ok((id, frame))
    }

    /// The page to change in place of `id`: `id` itself when fresh, otherwise a fresh copy (the
    /// caller must then point the parent at the returned id; `id` is freed).
    pub fn write(&self, id: PageId) -> Result<(PageId, PageRef)> {
        let frame = self.read(id)?;
        self.write_frame(id, frame)
    }

    /// `write` for a page whose frame the caller holds already (no pool look-up when it is
    /// fresh).
    pub fn write_frame(&self, id: PageId, frame: PageRef) -> Result<(PageId, PageRef)> {
        let now = self.cuts_now.load(Ordering::Acquire);
        if frame.fresh_cut() == now {
            return Ok((id, frame));
        }
        // The frame may have been evicted and read back: the set knows.
        if self.alloc()?.fresh.contains(&id) {
            frame.set_fresh_cut(now);
            return Ok((id, frame));
        }
        let copy = frame.read().clone();
        drop(frame);
        let out = self.allocate_page(copy)?;
        self.free(id)?;
        Ok(out)
    }

    /// Whether `id` may be changed in place.
    pub fn is_fresh(&self, id: PageId) -> bool {
        self.alloc().is_ok_and(|a| a.fresh.contains(&id))
    }

    /// Gives `id` back. Its bytes stay readable until the reuse rule allows a new owner.
    pub fn free(&self, id: PageId) -> Result<()> {
        let mut a = self.alloc()?;
        let tag = a.cuts;
        let was_fresh = a.fresh.remove(&id);
        a.freed.entry(tag).or_default().push(id);
        drop(a);
        if was_fresh {
            // No checkpoint references it: its bytes are never needed again.
            self.pool.discard(id);
        }
        Ok(())
    }

    fn write_victims(&self, victims: Vec<Victim>) -> Result<()> {
        let mut result = Ok(());
        for v in victims {
            if result.is_ok() {
                let page = v.frame.take_for_write();
                if let Err(e) = self.write_page(v.id, page) {
                    v.frame.mark_dirty();
                    result = Err(e);
                }
            }
            self.pool.written(v);
        }
        result
    }

    fn write_page(&self, id: PageId, page: Page) -> Result<()> {
        let mut bytes = page.into_bytes();
        page::seal_crc(id, &mut bytes);
        self.file
            .write_at(u64::from(id) * PAGE_SIZE_BYTES as u64, &bytes[..])?;
        self.pool
            .counters
            .pages_written
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The cut: seals the fresh pages, lays out the blob (`catalog` plus the free-page lists)
    /// in pages past the high-water mark, and fixes the meta. Called while no write batch is
    /// half applied; cheap (no I/O).
    pub fn cut(&self, mut catalog: Document, log: (u64, u64, u64)) -> Result<Cut> {
        let mut a = self.alloc()?;
        let slot: usize = if a.slots[0] <= a.slots[1] { 0 } else { 1 };
        let other = a.slots[1 - slot];
        let number = a.cuts + 1;
        // Once this checkpoint is durable the slots hold `number` and `other`: pages freed
        // before cut `other` are unreferenced then.
        let mut free: Vec<PageId> = a.free.iter().copied().collect();
        let mut pending = Vec::new();
        for (tag, pages) in &a.freed {
            if *tag < other {
                free.extend(pages);
            } else {
                pending.extend(pages);
            }
        }
        // The blob's pages come from the free list when it has them (so the file does not grow
        // by a blob per checkpoint); taking them only shrinks the list it holds, so the count
        // computed first is enough.
        catalog.insert("pending", id_list(&pending));
        catalog.insert("free", id_list(&free));
        let size = encoded_len(&catalog)?;
        let n = size.div_ceil(BLOB_PAGE_PAYLOAD_BYTES).max(1);
        let mut blob_pages = Vec::with_capacity(n);
        for _ in 0..n {
            let id = match a.free.pop_first() {
                Some(id) => id,
                None => {
                    let id = a.high_water;
                    a.high_water = id
                        .checked_add(1)
                        .ok_or_else(|| StorageError::LimitExceeded("page file full".into()))?;
                    id
                }
            };
            blob_pages.push(id);
        }
        free.retain(|id| !blob_pages.contains(id));
        catalog.insert("free", id_list(&free));
        let blob = catalog
            .to_vec()
            .map_err(|e| StorageError::InvalidDocument(e.to_string()))?;
        // The blob is referenced by this checkpoint only.
        a.freed.entry(number).or_default().extend(&blob_pages);
        a.cuts = number;
        self.cuts_now.store(number, Ordering::Release);
        let sealed: Vec<PageId> = a.fresh.drain().collect();
        let meta = Meta {
            checkpoint: number,
            log_segment: log.0,
            log_offset: log.1,
            next_sequence: log.2,
            page_count: a.high_water,
            blob_page: blob_pages[0],
            blob_len: blob.len() as u64,
            blob_crc: crc32fast::hash(&blob),
        };
        Ok(Cut {
            meta,
            slot: slot as PageId,
            sealed,
            blob,
            blob_pages,
        })
    }

    /// Writes a cut's pages and blob, syncs, writes its meta, syncs. No lock is held that
    /// readers or writers need. On error the checkpoint is not durable (the caller stops
    /// writes: a failed sync leaves the page cache's state unknown).
    pub fn write_cut(&self, cut: &Cut) -> Result<()> {
        // In file order, and synced a slice at a time: one huge flush would make the log's own
        // syncs (and so every acknowledgement) wait behind it in the device queue.
        let mut sealed = cut.sealed.clone();
        sealed.sort_unstable();
        let mut unsynced = 0usize;
        for id in sealed {
            if let Some(f) = self.pool.peek(id)
                && f.is_dirty()
            {
                let page = f.take_for_write();
                if let Err(e) = self.write_page(id, page) {
                    f.mark_dirty();
                    return Err(e);
                }
                unsynced += PAGE_SIZE_BYTES;
                if unsynced >= CHECKPOINT_SYNC_SLICE_BYTES {
                    self.file.sync()?;
                    unsynced = 0;
                }
            }
        }
        self.pool.wait_idle();
        let mut chunks = cut.blob.chunks(BLOB_PAGE_PAYLOAD_BYTES);
        for (i, &id) in cut.blob_pages.iter().enumerate() {
            let mut p = Page::new(page::KIND_BLOB);
            p.set_payload(chunks.next().unwrap_or_default());
            p.set_link(cut.blob_pages.get(i + 1).copied().unwrap_or(page::NONE));
            self.write_page(id, p)?;
        }
        self.file.sync()?;
        self.file.write_at(
            u64::from(cut.slot) * PAGE_SIZE_BYTES as u64,
            &cut.meta.encode(),
        )?;
        self.file.sync()?;
        Ok(())
    }

    /// After `write_cut` succeeded: the slot now holds the new checkpoint; release what no slot
    /// references.
    pub fn finish_cut(&self, cut: Cut) -> Result<()> {
        let mut a = self.alloc()?;
        a.slots[cut.slot as usize] = cut.meta.checkpoint;
        a.release();
        Ok(())
    }

    /// The older of the two checkpoints in the meta slots (0 if a slot holds none).
    pub fn oldest_checkpoint(&self) -> u64 {
        self.alloc()
            .map(|a| a.slots.iter().copied().min().unwrap_or(0))
            .unwrap_or(0)
    }

    /// The number of the last cut.
    pub fn cuts(&self) -> u64 {
        self.alloc().map(|a| a.cuts).unwrap_or(0)
    }

    pub fn stats(&self) -> PagerStats {
        let (frames, frames_dirty) = self.pool.usage();
        let (page_count, free_pages) = self
            .alloc()
            .map(|a| (u64::from(a.high_water), a.free.len() as u64))
            .unwrap_or_default();
        let c = &self.pool.counters;
        PagerStats {
            frames_max: self.pool.capacity(),
            frames,
            frames_dirty,
            pages_read: c.pages_read.load(Ordering::Relaxed),
            pages_written: c.pages_written.load(Ordering::Relaxed),
            pages_evicted: c.pages_evicted.load(Ordering::Relaxed),
            pages_evicted_dirty: c.pages_evicted_dirty.load(Ordering::Relaxed),
            page_count,
            free_pages,
        }
    }

    /// (high-water mark, free or waiting pages with how often each is listed) for the page
    /// accounting check.
    pub fn accounting(&self) -> (PageId, std::collections::HashMap<PageId, u32>) {
        let mut listed = std::collections::HashMap::new();
        let Ok(a) = self.alloc() else {
            return (0, listed);
        };
        for id in a.free.iter().chain(a.freed.values().flatten()) {
            *listed.entry(*id).or_insert(0) += 1;
        }
        (a.high_water, listed)
    }

    /// Whether `id` is allocated: neither free nor waiting to be (checks and tests).
    pub fn is_allocated(&self, id: PageId) -> bool {
        self.alloc().is_ok_and(|a| {
            id >= META_SLOTS
                && id < a.high_water
                && !a.free.contains(&id)
                && !a.freed.values().any(|v| v.contains(&id))
        })
    }
}

/// Bytes `doc` encodes to.
fn encoded_len(doc: &Document) -> Result<usize> {
    doc.to_vec()
        .map(|v| v.len())
        .map_err(|e| StorageError::InvalidDocument(e.to_string()))
}

fn id_list(ids: &[PageId]) -> Bson {
    let mut bytes = Vec::with_capacity(ids.len() * 4);
    for id in ids {
        bytes.extend_from_slice(&id.to_le_bytes());
    }
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}
