//! The I/O seam: every byte the engine reads or writes goes through `Backend` (a directory of
//! named files) and `BackendFile` (positional reads and writes, sync, length). `FileBackend` is
//! the real one; `sim::SimBackend` keeps a written and a durable image so tests can crash between
//! them. Implementations must make `sync` a data sync (fdatasync) and `sync_dir` make creates,
//! renames and removes in the directory durable. Inside a `crate::nowait` scope the real files
//! read only what the page cache holds and refuse every other call.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Result, StorageError};
use crate::nowait;

/// Name of the lock file in the data directory.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// One open file.
pub trait BackendFile: Send + Sync {
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes all of `data` at `offset` (not yet durable).
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes everything written so far durable (fdatasync).
    fn sync(&self) -> io::Result<()>;
    /// Truncates or extends (with zeros) to `len_bytes`.
    fn set_len(&self, len_bytes: u64) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A directory of named files.
pub trait Backend: Send + Sync {
    /// Takes the exclusive lock on the directory, or fails with `StorageError::Locked`.
    fn lock(&self) -> Result<()>;
    /// Opens an existing file for reading and writing.
    fn open(&self, name: &str) -> io::Result<Arc<dyn BackendFile>>;
    /// Creates (or truncates) a file.
    fn create(&self, name: &str) -> io::Result<Arc<dyn BackendFile>>;
    /// Names of all files in the directory.
    fn list(&self) -> io::Result<Vec<String>>;
    fn remove(&self, name: &str) -> io::Result<()>;
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Makes the directory's entries durable.
    fn sync_dir(&self) -> io::Result<()>;
    /// A human-readable location, used in error messages.
    fn describe(&self) -> String;
    /// Releases the lock taken by `lock`.
    fn unlock(&self) {}
}

/// The real backend: files in one directory of the local filesystem.
pub struct FileBackend {
    dir: PathBuf,
    lock_file: Mutex<Option<File>>,
}

impl FileBackend {
    /// Uses `dir`, creating it if missing.
    pub fn new(dir: &Path) -> io::Result<FileBackend> {
        std::fs::create_dir_all(dir)?;
        Ok(FileBackend {
            dir: dir.to_path_buf(),
            lock_file: Mutex::new(None),
        })
    }
}

/// Fails (refused) inside a no-wait scope: opening, creating, listing, renaming and removing
/// files and syncing the directory may all wait for the disk.
fn refuse_in_scope() -> io::Result<()> {
    if nowait::active() {
        return Err(nowait::refuse());
    }
    Ok(())
}

struct RealFile(File);

impl BackendFile for RealFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if nowait::active() {
            return nowait::read_cached(&self.0, offset, buf);
        }
        self.0.read_exact_at(buf, offset)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if nowait::active() {
            return Err(nowait::refuse());
        }
        self.0.write_all_at(data, offset)
    }
    fn sync(&self) -> io::Result<()> {
        if nowait::active() {
            return Err(nowait::refuse());
        }
        self.0.sync_data()
    }
    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        if nowait::active() {
            return Err(nowait::refuse());
        }
        self.0.set_len(len_bytes)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl Backend for FileBackend {
    fn lock(&self) -> Result<()> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(LOCK_FILE_NAME))?;
        // File::try_lock is stable since 1.89; the toolchain here is 1.95.
        #[allow(clippy::incompatible_msrv)]
        let locked = file.try_lock();
        match locked {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StorageError::Locked {
                    dir: self.describe(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
        // The lock lives as long as the file handle; keep it until the backend is dropped.
        let mut slot = self
            .lock_file
            .lock()
            .map_err(|_| io::Error::other("lock poisoned"))?;
        *slot = Some(file);
        Ok(())
    }
    fn open(&self, name: &str) -> io::Result<Arc<dyn BackendFile>> {
        refuse_in_scope()?;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.dir.join(name))?;
        Ok(Arc::new(RealFile(f)))
    }
    fn create(&self, name: &str) -> io::Result<Arc<dyn BackendFile>> {
        refuse_in_scope()?;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.dir.join(name))?;
        Ok(Arc::new(RealFile(f)))
    }
    fn list(&self) -> io::Result<Vec<String>> {
        refuse_in_scope()?;
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            if let Some(name) = entry?.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        refuse_in_scope()?;
        std::fs::remove_file(self.dir.join(name))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        refuse_in_scope()?;
        std::fs::rename(self.dir.join(from), self.dir.join(to))
    }
    fn sync_dir(&self) -> io::Result<()> {
        refuse_in_scope()?;
        File::open(&self.dir)?.sync_all()
    }
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
    fn unlock(&self) {
        if let Ok(mut slot) = self.lock_file.lock() {
            *slot = None;
        }
    }
}
