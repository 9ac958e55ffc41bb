//! `LazyFs`: an in-memory FUSE filesystem that loses, on a simulated power cut, everything not
//! made durable (the idea of LazyFS, which Jepsen uses). kill -9 leaves the page cache intact, so
//! it never tests fsync; this does. Every file keeps the bytes reads see and the bytes a power
//! cut keeps: `fsync`/`fdatasync` copy one to the other; a directory's entries (creates, renames,
//! removes) become durable only on `fsync` of that directory. `cut` freezes it (every later write
//! and sync fails with EIO, as on a machine that lost power); `restore` then drops what was not
//! durable, as the disk would look after reboot, and unfreezes it.
//!
//! Replies carry `FOPEN_DIRECT_IO` and zero cache lifetimes, so the kernel keeps no page cache of
//! its own that could hide lost bytes from the restarted process. Locks (`flock`) are the
//! kernel's local ones. Linux only; mounting needs root (or `/dev/fuse` access).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

const NO_CACHE: Duration = Duration::ZERO;
const BLOCK_SIZE: u32 = 4096;

#[derive(Default)]
struct Node {
    dir: bool,
    /// What reads see (files).
    data: Vec<u8>,
    /// What survives a power cut (files).
    durable: Vec<u8>,
    /// Byte ranges of `data` changed since the last fsync (copying only these keeps an fsync of
    /// a big preallocated segment cheap).
    dirty: Vec<(usize, usize)>,
    /// Entries as they are now (directories).
    children: BTreeMap<OsString, u64>,
    /// Entries as a power cut leaves them (directories).
    durable_children: BTreeMap<OsString, u64>,
}

#[derive(Default)]
struct State {
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    frozen: bool,
}

/// Shared handle: the mounted filesystem and the test both hold one.
#[derive(Clone, Default)]
pub struct LazyFs {
    state: Arc<Mutex<State>>,
}

/// A mounted `LazyFs`; unmounted when dropped.
pub struct Mounted {
    pub fs: LazyFs,
    session: Option<fuser::BackgroundSession>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
    }
}

impl LazyFs {
    pub fn new() -> LazyFs {
        let fs = LazyFs::default();
        let mut st = fs.lock();
        st.next_ino = 2;
        st.nodes.insert(
            1,
            Node {
                dir: true,
                ..Node::default()
            },
        );
        drop(st);
        fs
    }

    /// Mounts a fresh filesystem at `at` (an empty directory).
    pub fn mount(at: &Path) -> std::io::Result<Mounted> {
        let fs = LazyFs::new();
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("cairn-lazyfs".into()),
            fuser::MountOption::CUSTOM("default_permissions".into()),
        ];
        config.n_threads = Some(4);
        let session = fuser::spawn_mount(fs.clone(), at, &config)?;
        Ok(Mounted {
            fs,
            session: Some(session),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The power goes out: from now on every write and sync fails.
    pub fn cut(&self) {
        self.lock().frozen = true;
    }

    /// The machine reboots: only durable bytes and entries remain; writes work again.
    pub fn restore(&self) {
        let mut st = self.lock();
        for node in st.nodes.values_mut() {
            node.data = node.durable.clone();
            node.dirty.clear();
            node.children = node.durable_children.clone();
        }
        // Drop what no durable entry reaches.
        let mut reachable = vec![1u64];
        let mut i = 0;
        while i < reachable.len() {
            if let Some(n) = st.nodes.get(&reachable[i]) {
                reachable.extend(n.children.values().copied());
            }
            i += 1;
        }
        st.nodes.retain(|ino, _| reachable.contains(ino));
        st.frozen = false;
    }

    /// Makes every directory entry under the root durable now (test set-up: a data directory
    /// that exists before the server starts, as an operator made it).
    pub fn sync_tree(&self) {
        let mut st = self.lock();
        for node in st.nodes.values_mut() {
            if node.dir {
                node.durable_children = node.children.clone();
            }
        }
    }
}

impl Node {
    fn mark(&mut self, start: usize, end: usize) {
        match self.dirty.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => self.dirty.push((start, end)),
        }
    }

    fn sync(&mut self) {
        self.durable.resize(self.data.len(), 0);
        for (start, end) in std::mem::take(&mut self.dirty) {
            let end = end.min(self.data.len());
            if start < end {
                self.durable[start..end].copy_from_slice(&self.data[start..end]);
            }
        }
    }
}

fn attr(ino: u64, node: &Node) -> FileAttr {
    let size = node.data.len() as u64;
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: if node.dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: if node.dir { 0o755 } else { 0o644 },
        nlink: if node.dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        flags: 0,
        blksize: BLOCK_SIZE,
    }
}

impl State {
    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<u64, Errno> {
        let dir = self.nodes.get(&parent.0).ok_or(Errno::ENOENT)?;
        dir.children.get(name).copied().ok_or(Errno::ENOENT)
    }

    fn add(&mut self, parent: INodeNo, name: &OsStr, dir: bool) -> Result<(u64, FileAttr), Errno> {
        if self.frozen {
            return Err(Errno::EIO);
        }
        if self.child(parent, name).is_ok() {
            return Err(Errno::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let node = Node {
            dir,
            ..Node::default()
        };
        let a = attr(ino, &node);
        self.nodes.insert(ino, node);
        self.nodes
            .get_mut(&parent.0)
            .ok_or(Errno::ENOENT)?
            .children
            .insert(name.to_os_string(), ino);
        Ok((ino, a))
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let st = self.lock();
        match st.child(parent, name) {
            Ok(ino) => match st.nodes.get(&ino) {
                Some(n) => reply.entry(&NO_CACHE, &attr(ino, n), Generation(0)),
                None => reply.error(Errno::ENOENT),
            },
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().nodes.get(&ino.0) {
            Some(n) => reply.attr(&NO_CACHE, &attr(ino.0, n)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut st = self.lock();
        let frozen = st.frozen;
        let Some(n) = st.nodes.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(len) = size {
            if frozen {
                return reply.error(Errno::EIO);
            }
            let old = n.data.len();
            n.data.resize(len as usize, 0);
            if n.data.len() > old {
                n.mark(old, n.data.len());
            }
        }
        reply.attr(&NO_CACHE, &attr(ino.0, n));
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        match self.lock().add(parent, name, true) {
            Ok((_, a)) => reply.entry(&NO_CACHE, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.lock().add(parent, name, false) {
            Ok((ino, a)) => reply.created(
                &NO_CACHE,
                &a,
                Generation(0),
                FileHandle(ino),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        if st.frozen {
            return reply.error(Errno::EIO);
        }
        let removed = st
            .nodes
            .get_mut(&parent.0)
            .and_then(|d| d.children.remove(name));
        match removed {
            Some(_) => reply.ok(),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        if st.frozen {
            return reply.error(Errno::EIO);
        }
        let Some(ino) = st
            .nodes
            .get_mut(&parent.0)
            .and_then(|d| d.children.remove(name))
        else {
            return reply.error(Errno::ENOENT);
        };
        match st.nodes.get_mut(&newparent.0) {
            Some(d) => {
                d.children.insert(newname.to_os_string(), ino);
                reply.ok();
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(ino.0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let st = self.lock();
        let Some(n) = st.nodes.get(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let start = (offset as usize).min(n.data.len());
        let end = (start + size as usize).min(n.data.len());
        reply.data(&n.data[start..end]);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut st = self.lock();
        if st.frozen {
            return reply.error(Errno::EIO);
        }
        let Some(n) = st.nodes.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let start = offset as usize;
        let end = start + data.len();
        if n.data.len() < end {
            n.data.resize(end, 0);
        }
        n.data[start..end].copy_from_slice(data);
        n.mark(start, end);
        reply.written(data.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        if st.frozen {
            return reply.error(Errno::EIO);
        }
        match st.nodes.get_mut(&ino.0) {
            Some(n) => {
                n.sync();
                reply.ok();
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(ino.0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let st = self.lock();
        let Some(d) = st.nodes.get(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let mut entries: Vec<(u64, FileType, OsString)> = vec![
            (ino.0, FileType::Directory, ".".into()),
            (1, FileType::Directory, "..".into()),
        ];
        for (name, child) in &d.children {
            let kind = match st.nodes.get(child) {
                Some(n) if n.dir => FileType::Directory,
                _ => FileType::RegularFile,
            };
            entries.push((*child, kind, name.clone()));
        }
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        if st.frozen {
            return reply.error(Errno::EIO);
        }
        match st.nodes.get_mut(&ino.0) {
            Some(d) => {
                d.durable_children = d.children.clone();
                reply.ok();
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // Plenty of room: 64 GiB in 4 KiB blocks.
        let blocks = 16 << 20;
        reply.statfs(
            blocks,
            blocks,
            blocks,
            1 << 20,
            1 << 20,
            BLOCK_SIZE,
            255,
            BLOCK_SIZE,
        );
    }
}
