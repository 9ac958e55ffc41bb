//! `SimBackend`: an in-memory `Backend` for crash tests. Every file has a written image (what
//! reads see) and a durable image (what survives a crash); `sync` copies one to the other, and
//! directory entries become durable only on `sync_dir`. A crash can be armed to happen at the
//! n-th sync: that sync fails and every later call fails too. `crash_image` then builds the
//! backend a restarted process would find, optionally keeping a prefix of the unsynced bytes
//! (a torn write).
//!
//! Two failures can be switched on for disk-full and I/O-error tests: `set_disk_full` makes
//! every write and growth fail with ENOSPC, and `fail_syncs(n)` makes the next `n` file syncs
//! fail with EIO the way Linux fails them: the unsynced bytes are dropped from the way to the
//! disk while reads still see them, so from then on a sync makes durable only what was written
//! after the failure ("fsyncgate"; a later successful sync proves nothing about older bytes).
//!
//! Group-commit tests hold syncs at a gate (`hold_syncs`): a sync then blocks, without the
//! state lock so writes go on, until `release_syncs`; `wait_for_held_syncs` says when a sync
//! is waiting there, so a test orders threads by events, never by sleeping.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::backend::{Backend, BackendFile};
use crate::error::{Result, StorageError};

#[derive(Default, Clone)]
struct SimFileData {
    written: Vec<u8>,
    durable: Vec<u8>,
    /// A sync failed once: syncs copy only the `dirty` ranges from then on.
    writeback_lost: bool,
    /// Byte ranges written since the last sync (used once `writeback_lost`).
    dirty: Vec<(usize, usize)>,
}

#[derive(Default)]
struct SimState {
    files: HashMap<u64, SimFileData>,
    names: HashMap<String, u64>,
    durable_names: HashMap<String, u64>,
    next_file_id: u64,
    syncs: u64,
    crash_at_sync: Option<u64>,
    crashed: bool,
    locked: bool,
    disk_full: bool,
    syncs_to_fail: u64,
}

fn disk_full_error() -> io::Error {
    io::Error::from_raw_os_error(28)
}

/// Syncs held back for a test (see the module comment).
#[derive(Default)]
struct Gate {
    held: bool,
    /// Syncs blocked at the gate now.
    waiting: u64,
}

/// The simulated backend; clones share one state.
#[derive(Clone, Default)]
pub struct SimBackend {
    state: Arc<Mutex<SimState>>,
    gate: Arc<(Mutex<Gate>, Condvar)>,
}

fn crash_error() -> io::Error {
    io::Error::other("simulated crash")
}

impl SimBackend {
    pub fn new() -> SimBackend {
        SimBackend::default()
    }

    fn state(&self) -> io::Result<MutexGuard<'_, SimState>> {
        let st = self
            .state
            .lock()
            .map_err(|_| io::Error::other("sim poisoned"))?;
        if st.crashed {
            return Err(crash_error());
        }
        Ok(st)
    }

    /// Makes the `n`-th sync from now (1-based; file and directory syncs both count) crash.
    pub fn crash_at_sync(&self, n: u64) {
        if let Ok(mut st) = self.state.lock() {
            st.crash_at_sync = Some(st.syncs + n);
        }
    }

    /// While on, every write and every growth of a file fails with ENOSPC.
    pub fn set_disk_full(&self, full: bool) {
        if let Ok(mut st) = self.state.lock() {
            st.disk_full = full;
        }
    }

    /// The next `n` file syncs fail with EIO and lose the unsynced bytes' way to the disk.
    pub fn fail_syncs(&self, n: u64) {
        if let Ok(mut st) = self.state.lock() {
            st.syncs_to_fail = n;
        }
    }

    /// A copy of a file's durable bytes (what a crash now would leave).
    pub fn durable_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let st = self.state.lock().ok()?;
        let id = st.durable_names.get(name)?;
        st.files.get(id).map(|f| f.durable.clone())
    }

    /// From now on every file and directory sync blocks until `release_syncs`.
    pub fn hold_syncs(&self) {
        self.gate_lock().held = true;
    }

    /// Lets held syncs (and later ones) through.
    pub fn release_syncs(&self) {
        self.gate_lock().held = false;
        self.gate.1.notify_all();
    }

    /// Blocks until at least `n` syncs wait at the gate.
    pub fn wait_for_held_syncs(&self, n: u64) {
        let mut g = self.gate_lock();
        while g.waiting < n {
            g = self.gate.1.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn gate_lock(&self) -> MutexGuard<'_, Gate> {
        self.gate.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where a sync waits while the gate is held.
    fn pass_gate(&self) {
        let mut g = self.gate_lock();
        if !g.held {
            return;
        }
        g.waiting += 1;
        self.gate.1.notify_all();
        while g.held {
            g = self.gate.1.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g.waiting -= 1;
    }

    /// Number of syncs so far.
    pub fn sync_count(&self) -> u64 {
        self.state.lock().map(|s| s.syncs).unwrap_or(0)
    }

    /// Whether the armed crash has happened.
    pub fn has_crashed(&self) -> bool {
        self.state.lock().map(|s| s.crashed).unwrap_or(true)
    }

    /// Crashes now: later calls on this backend fail.
    pub fn crash(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.crashed = true;
        }
    }

    /// The directory a restarted process would see: durable entries with their durable bytes.
    /// `torn` picks, per file, how much of the unsynced changed range survives (0.0 none,
    /// 1.0 all), modelling a write that reached the disk partly.
    pub fn crash_image(&self, torn: f64) -> SimBackend {
        let st = match self.state.lock() {
            Ok(st) => st,
            Err(p) => p.into_inner(),
        };
        let mut files = HashMap::new();
        for id in st.durable_names.values() {
            if let Some(f) = st.files.get(id) {
                let image = torn_image(f, torn);
                files.insert(
                    *id,
                    SimFileData {
                        written: image.clone(),
                        durable: image,
                        ..SimFileData::default()
                    },
                );
            }
        }
        let state = SimState {
            files,
            names: st.durable_names.clone(),
            durable_names: st.durable_names.clone(),
            next_file_id: st.next_file_id,
            ..SimState::default()
        };
        SimBackend {
            state: Arc::new(Mutex::new(state)),
            gate: Arc::default(),
        }
    }

    /// Flips one bit of a file's written and durable images (corruption tests).
    pub fn flip_bit(&self, name: &str, offset: u64, bit: u8) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        let Some(id) = st.names.get(name).copied() else {
            return false;
        };
        let Some(f) = st.files.get_mut(&id) else {
            return false;
        };
        let Ok(i) = usize::try_from(offset) else {
            return false;
        };
        if i >= f.written.len() {
            return false;
        }
        f.written[i] ^= 1 << (bit % 8);
        if i < f.durable.len() {
            f.durable[i] ^= 1 << (bit % 8);
        }
        true
    }

    /// A copy of a file's written bytes.
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let st = self.state.lock().ok()?;
        let id = st.names.get(name)?;
        st.files.get(id).map(|f| f.written.clone())
    }

    /// Sets a file's written and durable length (torn-tail tests).
    pub fn truncate(&self, name: &str, len_bytes: usize) {
        if let Ok(mut st) = self.state.lock()
            && let Some(id) = st.names.get(name).copied()
            && let Some(f) = st.files.get_mut(&id)
        {
            f.written.truncate(len_bytes);
            f.durable.truncate(len_bytes);
        }
    }

    fn count_sync(st: &mut SimState) -> io::Result<()> {
        st.syncs += 1;
        if st.crash_at_sync == Some(st.syncs) {
            st.crashed = true;
            return Err(crash_error());
        }
        Ok(())
    }
}

/// The durable image plus a prefix (by `torn` fraction) of the range where written differs.
fn torn_image(f: &SimFileData, torn: f64) -> Vec<u8> {
    let mut image = f.durable.clone();
    let first_diff =
        (0..f.written.len().max(image.len())).find(|&i| f.written.get(i) != image.get(i));
    let Some(start) = first_diff else {
        return image;
    };
    let end = f.written.len();
    let keep = ((end.saturating_sub(start)) as f64 * torn.clamp(0.0, 1.0)) as usize;
    if image.len() < start + keep {
        image.resize(start + keep, 0);
    }
    image[start..start + keep].copy_from_slice(&f.written[start..start + keep]);
    image
}

struct SimFile {
    backend: SimBackend,
    id: u64,
}

impl SimFileData {
    fn sync_ok(&mut self) {
        if self.writeback_lost {
            self.durable.resize(self.written.len(), 0);
            for &(start, end) in &self.dirty {
                let end = end.min(self.written.len());
                if start < end {
                    self.durable[start..end].copy_from_slice(&self.written[start..end]);
                }
            }
        } else {
            self.durable = self.written.clone();
        }
        self.dirty.clear();
    }

    fn mark_dirty(&mut self, start: usize, end: usize) {
        if !self.writeback_lost {
            return;
        }
        match self.dirty.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => self.dirty.push((start, end)),
        }
    }
}

impl SimFile {
    fn with<T>(&self, f: impl FnOnce(&mut SimFileData) -> io::Result<T>) -> io::Result<T> {
        let mut st = self.backend.state()?;
        let data = st
            .files
            .get_mut(&self.id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "sim file gone"))?;
        f(data)
    }

    fn disk_full(&self) -> io::Result<bool> {
        Ok(self.backend.state()?.disk_full)
    }
}

impl BackendFile for SimFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.with(|d| {
            let start = usize::try_from(offset).map_err(io::Error::other)?;
            let end = start + buf.len();
            if end > d.written.len() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past end",
                ));
            }
            buf.copy_from_slice(&d.written[start..end]);
            Ok(())
        })
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.disk_full()? {
            // Half of it lands, as a real short write into the last free blocks may.
            let half = &data[..data.len() / 2];
            let _ = self.with(|d| {
                let start = usize::try_from(offset).map_err(io::Error::other)?;
                let end = (start + half.len()).min(d.written.len());
                if start < end {
                    d.written[start..end].copy_from_slice(&half[..end - start]);
                    d.mark_dirty(start, end);
                }
                Ok(())
            });
            return Err(disk_full_error());
        }
        self.with(|d| {
            let start = usize::try_from(offset).map_err(io::Error::other)?;
            let end = start + data.len();
            if d.written.len() < end {
                d.written.resize(end, 0);
            }
            d.written[start..end].copy_from_slice(data);
            d.mark_dirty(start, end);
            Ok(())
        })
    }
    fn sync(&self) -> io::Result<()> {
        self.backend.pass_gate();
        let mut st = self.backend.state()?;
        SimBackend::count_sync(&mut st)?;
        let fail = st.syncs_to_fail > 0;
        if fail {
            st.syncs_to_fail -= 1;
        }
        if let Some(d) = st.files.get_mut(&self.id) {
            if fail {
                // The kernel calls the pages clean without having written them.
                d.writeback_lost = true;
                d.dirty.clear();
                return Err(io::Error::from_raw_os_error(5));
            }
            d.sync_ok();
        }
        Ok(())
    }
    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        let full = self.disk_full()?;
        self.with(|d| {
            let new_len = usize::try_from(len_bytes).map_err(io::Error::other)?;
            let old_len = d.written.len();
            if full && new_len > old_len {
                return Err(disk_full_error());
            }
            d.written.resize(new_len, 0);
            if new_len > old_len {
                d.mark_dirty(old_len, new_len);
            }
            Ok(())
        })
    }
    fn len(&self) -> io::Result<u64> {
        self.with(|d| Ok(d.written.len() as u64))
    }
}

impl Backend for SimBackend {
    fn lock(&self) -> Result<()> {
        let mut st = self.state()?;
        if st.locked {
            return Err(StorageError::Locked {
                dir: self.describe(),
            });
        }
        st.locked = true;
        Ok(())
    }
    fn open(&self, name: &str) -> io::Result<Arc<dyn BackendFile>> {
        let st = self.state()?;
        let id = *st
            .names
            .get(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, name.to_string()))?;
        Ok(Arc::new(SimFile {
            backend: self.clone(),
            id,
        }))
    }
    fn create(&self, name: &str) -> io::Result<Arc<dyn BackendFile>> {
        let mut st = self.state()?;
        let id = st.next_file_id;
        st.next_file_id += 1;
        st.files.insert(id, SimFileData::default());
        st.names.insert(name.to_string(), id);
        Ok(Arc::new(SimFile {
            backend: self.clone(),
            id,
        }))
    }
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.state()?.names.keys().cloned().collect())
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        let mut st = self.state()?;
        st.names
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, name.to_string()))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut st = self.state()?;
        let id = st
            .names
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, from.to_string()))?;
        st.names.insert(to.to_string(), id);
        Ok(())
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.pass_gate();
        let mut st = self.state()?;
        SimBackend::count_sync(&mut st)?;
        st.durable_names = st.names.clone();
        Ok(())
    }
    fn describe(&self) -> String {
        "<simulated>".to_string()
    }
    fn unlock(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.locked = false;
        }
    }
}
