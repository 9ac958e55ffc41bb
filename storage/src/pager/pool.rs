//! The buffer pool: a bounded set of page frames over the page file, with clock eviction. A frame
//! is shared as `Arc<Frame>`; holding the Arc pins it (the clock skips frames held elsewhere).
//! A dirty victim is written before it is dropped; while that write runs outside the pool's lock
//! the frame sits in `writing`, where lookups still find it, and if someone dirtied it again
//! meanwhile it goes back into the pool instead of being dropped. `inflight` counts those writes
//! so a checkpoint can wait for them before it syncs.
//!
//! The pool never decides whether a page may be changed in place; that is the pager's
//! copy-on-write rule. It only keeps bytes and writes dirty ones to their own location.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::PageId;
use crate::btree::page::Page;

/// Bytes a frame costs beyond its page: Arc, locks, map and clock entries (an estimate used
/// to turn the cache setting into a frame count).
pub const FRAME_OVERHEAD_BYTES: u64 = 160;

/// One cached page.
pub struct Frame {
    page: RwLock<Page>,
    dirty: AtomicBool,
    /// The pool's count of dirty frames, kept as this frame's flag changes (so stats never
    /// walk the pool).
    dirty_frames: Arc<AtomicI64>,
    /// The pager's cut number when this page was allocated (`u64::MAX`: not known, e.g. read
    /// back from disk); equal to the current number means the page may change in place.
    fresh_cut: AtomicU64,
}

impl Frame {
    fn new(page: Page, dirty: bool, dirty_frames: &Arc<AtomicI64>) -> Frame {
        if dirty {
            dirty_frames.fetch_add(1, Ordering::Relaxed);
        }
        Frame {
            page: RwLock::new(page),
            dirty: AtomicBool::new(dirty),
            dirty_frames: dirty_frames.clone(),
            fresh_cut: AtomicU64::new(u64::MAX),
        }
    }

    fn set_dirty(&self) {
        if !self.dirty.swap(true, Ordering::AcqRel) {
            self.dirty_frames.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn fresh_cut(&self) -> u64 {
        self.fresh_cut.load(Ordering::Acquire)
    }

    pub fn set_fresh_cut(&self, cut: u64) {
        self.fresh_cut.store(cut, Ordering::Release);
    }

    /// Shared access to the page bytes.
    pub fn read(&self) -> RwLockReadGuard<'_, Page> {
        self.page.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Exclusive access; marks the frame dirty. Only the pager hands out frames that may be
    /// written (fresh pages of the current epoch).
    pub fn write(&self) -> RwLockWriteGuard<'_, Page> {
        let g = self.page.write().unwrap_or_else(|p| p.into_inner());
        self.set_dirty();
        g
    }

    /// Marks the frame dirty again (its write failed).
    pub fn mark_dirty(&self) {
        self.set_dirty();
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// A copy of the bytes to write, clearing the dirty flag under the read lock: a writer that
    /// changes the page afterwards sets the flag again.
    pub fn take_for_write(&self) -> Page {
        let g = self.read();
        if self.dirty.swap(false, Ordering::AcqRel) {
            self.dirty_frames.fetch_sub(1, Ordering::Relaxed);
        }
        g.clone()
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if *self.dirty.get_mut() {
            self.dirty_frames.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

pub type PageRef = Arc<Frame>;

struct Slot {
    id: PageId,
    frame: PageRef,
    referenced: bool,
}

#[derive(Default)]
struct State {
    /// Resident pages: id -> index into `slots`.
    map: HashMap<PageId, usize, super::IdBuild>,
    slots: Vec<Slot>,
    hand: usize,
    /// Dirty victims being written outside the lock.
    writing: HashMap<PageId, PageRef, super::IdBuild>,
    inflight: usize,
}

/// Counters for `serverStatus.wiredTiger.cache`.
#[derive(Default)]
pub struct PoolCounters {
    pub pages_read: AtomicU64,
    pub pages_written: AtomicU64,
    pub pages_evicted: AtomicU64,
    /// Evictions that had to write the page first.
    pub pages_evicted_dirty: AtomicU64,
    /// Frames whose page changed since it was last written.
    pub dirty_frames: Arc<AtomicI64>,
}

pub struct Pool {
    capacity: usize,
    state: Mutex<State>,
    idle: Condvar,
    pub counters: PoolCounters,
}

/// A victim chosen while the lock was held, to write after releasing it.
pub struct Victim {
    pub id: PageId,
    pub frame: PageRef,
}

impl Pool {
    pub fn new(capacity: usize) -> Pool {
        Pool {
            capacity: capacity.max(super::POOL_FRAMES_MIN),
            state: Mutex::new(State::default()),
            idle: Condvar::new(),
            counters: PoolCounters::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The cached frame of `id`, if resident or being written.
    pub fn get(&self, id: PageId) -> Option<PageRef> {
        let mut st = self.state();
        if let Some(&i) = st.map.get(&id) {
            let slot = &mut st.slots[i];
            slot.referenced = true;
            return Some(slot.frame.clone());
        }
        st.writing.get(&id).cloned()
    }

    /// The cached frame of `id` without counting it as a use (checkpoint writes).
    pub fn peek(&self, id: PageId) -> Option<PageRef> {
        let st = self.state();
        if let Some(&i) = st.map.get(&id) {
            return Some(st.slots[i].frame.clone());
        }
        st.writing.get(&id).cloned()
    }

    /// Adds a frame read from disk, unless another thread got there first (then theirs is
    /// returned). Dirty victims to write come back in `victims`.
    pub fn insert_clean(&self, id: PageId, frame: PageRef, victims: &mut Vec<Victim>) -> PageRef {
        let mut st = self.state();
        if let Some(&i) = st.map.get(&id) {
            return st.slots[i].frame.clone();
        }
        if let Some(f) = st.writing.get(&id) {
            return f.clone();
        }
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        self.place(&mut st, id, frame.clone(), victims);
        frame
    }

    /// Adds (or replaces) the frame of a page the pager just allocated.
    pub fn insert_new(&self, id: PageId, frame: PageRef, victims: &mut Vec<Victim>) {
        let mut st = self.state();
        st.writing.remove(&id);
        if let Some(&i) = st.map.get(&id) {
            st.slots[i].frame = frame;
            st.slots[i].referenced = true;
            return;
        }
        self.place(&mut st, id, frame, victims);
    }

    /// Forgets `id` (its page was freed and its bytes are no longer needed).
    pub fn discard(&self, id: PageId) {
        let mut st = self.state();
        st.writing.remove(&id);
        if let Some(i) = st.map.remove(&id) {
            remove_slot(&mut st, i);
        }
    }

    fn place(&self, st: &mut State, id: PageId, frame: PageRef, victims: &mut Vec<Victim>) {
        while st.slots.len() >= self.capacity {
            match self.pick_victim(st) {
                Some(i) => {
                    let slot = remove_slot(st, i);
                    self.counters.pages_evicted.fetch_add(1, Ordering::Relaxed);
                    if slot.frame.is_dirty() {
                        self.counters
                            .pages_evicted_dirty
                            .fetch_add(1, Ordering::Relaxed);
                        st.writing.insert(slot.id, slot.frame.clone());
                        st.inflight += 1;
                        victims.push(Victim {
                            id: slot.id,
                            frame: slot.frame,
                        });
                    }
                }
                // Everything is pinned: go over capacity for now.
                None => break,
            }
        }
        let index = st.slots.len();
        st.slots.push(Slot {
            id,
            frame,
            referenced: true,
        });
        st.map.insert(id, index);
    }

    /// Clock: the first unpinned slot whose reference bit is clear, clearing bits on the way.
    fn pick_victim(&self, st: &mut State) -> Option<usize> {
        let n = st.slots.len();
        for _ in 0..2 * n {
            if st.hand >= n {
                st.hand = 0;
            }
            let i = st.hand;
            st.hand += 1;
            let slot = &mut st.slots[i];
            if Arc::strong_count(&slot.frame) > 1 {
                continue;
            }
            if slot.referenced {
                slot.referenced = false;
                continue;
            }
            return Some(i);
        }
        None
    }

    /// After a victim's bytes are on disk: drop it, or put it back if it was dirtied or taken
    /// again meanwhile.
    pub fn written(&self, victim: Victim) {
        let mut st = self.state();
        st.inflight -= 1;
        let current = st
            .writing
            .get(&victim.id)
            .is_some_and(|f| Arc::ptr_eq(f, &victim.frame));
        if current {
            st.writing.remove(&victim.id);
            // Two references: ours and nobody else's once `writing` let go.
            if victim.frame.is_dirty() || Arc::strong_count(&victim.frame) > 1 {
                let index = st.slots.len();
                st.slots.push(Slot {
                    id: victim.id,
                    frame: victim.frame,
                    referenced: true,
                });
                st.map.insert(victim.id, index);
            }
        }
        if st.inflight == 0 {
            self.idle.notify_all();
        }
    }

    /// Blocks until no eviction write is running.
    pub fn wait_idle(&self) {
        let mut st = self.state();
        while st.inflight > 0 {
            st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// (frames held, dirty frames).
    /// (frames held, dirty frames); constant time.
    pub fn usage(&self) -> (usize, usize) {
        let st = self.state();
        let dirty = self.counters.dirty_frames.load(Ordering::Relaxed).max(0) as usize;
        (st.slots.len() + st.writing.len(), dirty)
    }

    /// A frame for `page`, counted in this pool's dirty gauge.
    pub fn frame(&self, page: Page, dirty: bool) -> Frame {
        Frame::new(page, dirty, &self.counters.dirty_frames)
    }

    /// Ids of resident dirty pages (tests and checks).
    pub fn dirty_ids(&self) -> Vec<PageId> {
        let st = self.state();
        st.slots
            .iter()
            .filter(|s| s.frame.is_dirty())
            .map(|s| s.id)
            .collect()
    }
}

fn remove_slot(st: &mut State, i: usize) -> Slot {
    let slot = st.slots.swap_remove(i);
    st.map.remove(&slot.id);
    if let Some(moved) = st.slots.get(i) {
        st.map.insert(moved.id, i);
    }
    slot
}
