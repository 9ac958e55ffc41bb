//! One small trait over cairn's engine and the peer key-value stores (redb, fjall, sled), so
//! every benchmark drives all four with the same calls and the same durability: a write
//! returns only after the store has synced it (fdatasync or stronger).
//!
//! Keys are dense integers `0..n` in insertion order. The KV stores use them big-endian as the
//! key and hold the document's BSON bytes as the value; cairn stores the same document and keeps
//! the RecordId it assigned to each key, so a key lookup is a RecordId lookup.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::spec::BinarySubtype;
use bson::{Binary, RawDocument, RawDocumentBuf, rawdoc};
use storage::{Collection, Direction, Engine, EngineOptions, RecordId, WriteOp};

/// Value sizes of the put benchmarks (bytes of the `v` field).
pub const VALUE_SIZES: [usize; 4] = [64, 128, 256, 512];
/// Records per commit in the bulk rows.
pub const BULK_BATCH_COUNT: usize = 1000;
/// Records fetched per call when scanning (cairn's scan returns pages).
const SCAN_PAGE_COUNT: usize = 10_000;

/// The document stored for key `id`: `{_id: id, n: 0, v: <value_len bytes>}`.
pub fn make_doc(id: u64, n: i64, value_len: usize) -> RawDocumentBuf {
    let bytes: Vec<u8> = (0..value_len).map(|i| (i as u64 ^ id) as u8).collect();
    let v = Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    };
    rawdoc! { "_id": id as i64, "n": n, "v": v }
}

/// The same document with `n` incremented (the "update one field" row).
pub fn bump_field(doc: &RawDocument) -> RawDocumentBuf {
    let id = doc.get_i64("_id").expect("_id");
    let n = doc.get_i64("n").expect("n");
    let v = doc.get_binary("v").expect("v");
    let v = Binary {
        subtype: BinarySubtype::Generic,
        bytes: v.bytes.to_vec(),
    };
    rawdoc! { "_id": id, "n": n + 1, "v": v }
}

/// The `_id` of a stored document, read without decoding the rest.
pub fn id_of(bytes: &[u8]) -> i64 {
    RawDocument::from_bytes(bytes)
        .and_then(|d| d.get_i64("_id"))
        .expect("stored document has an int64 _id")
}

/// What every engine under test offers.
pub trait Store {
    fn name(&self) -> &'static str;
    /// Inserts `(key, doc)` pairs as one atomic, durable commit.
    fn put(&mut self, items: &[(u64, RawDocumentBuf)]);
    /// Replaces existing keys as one durable commit.
    fn update(&mut self, items: &[(u64, RawDocumentBuf)]);
    /// The document under `key`, handed to `f`.
    fn get(&self, key: u64, f: &mut dyn FnMut(&[u8]));
    /// `count` records in key order starting at `from`, each handed to `f`; returns how many.
    fn scan(&self, from: u64, count: usize, f: &mut dyn FnMut(&[u8])) -> usize;
}

/// Opens the named engine in `dir` (fresh).
pub fn open_store(name: &str, dir: &Path) -> Box<dyn Store> {
    match name {
        "cairn" => Box::new(Cairn::open(dir)),
        "redb" => Box::new(Redb::open(dir)),
        "fjall" => Box::new(Fjall::open(dir)),
        "sled" => Box::new(Sled::open(dir)),
        other => panic!("unknown engine {other}"),
    }
}

/// The engines compared, cairn first.
pub const ENGINES: [&str; 4] = ["cairn", "redb", "fjall", "sled"];

pub struct Cairn {
    engine: Engine,
    coll: Arc<Collection>,
    rids: Vec<RecordId>,
}

impl Cairn {
    pub fn open(dir: &Path) -> Cairn {
        let engine = Engine::open(dir, EngineOptions::default()).expect("open cairn");
        let coll = engine
            .create_collection("bench", "c", bson::Document::new())
            .expect("create collection");
        Cairn {
            engine,
            coll,
            rids: Vec::new(),
        }
    }

    pub fn collection(&self) -> &Arc<Collection> {
        &self.coll
    }

    fn rid(&self, key: u64) -> RecordId {
        self.rids[key as usize]
    }
}

impl Drop for Cairn {
    fn drop(&mut self) {
        let _ = self.engine.close();
    }
}

impl Store for Cairn {
    fn name(&self) -> &'static str {
        "cairn"
    }
    fn put(&mut self, items: &[(u64, RawDocumentBuf)]) {
        let ops = items
            .iter()
            .map(|(_, d)| WriteOp::Insert(d.clone().into()))
            .collect();
        let ticket = self.coll.write(ops).expect("cairn write");
        ticket.wait_durable_blocking().expect("cairn durable");
        for ((key, _), rid) in items.iter().zip(&ticket.record_ids) {
            debug_assert_eq!(*key as usize, self.rids.len());
            self.rids.push(*rid);
        }
    }
    fn update(&mut self, items: &[(u64, RawDocumentBuf)]) {
        let ops = items
            .iter()
            .map(|(k, d)| WriteOp::Replace(self.rid(*k), d.clone()))
            .collect();
        let ticket = self.coll.write(ops).expect("cairn replace");
        ticket.wait_durable_blocking().expect("cairn durable");
    }
    fn get(&self, key: u64, f: &mut dyn FnMut(&[u8])) {
        let doc = self.coll.get(self.rid(key)).expect("cairn get");
        f(doc.expect("present").as_bytes());
    }
    fn scan(&self, from: u64, count: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut after = (from > 0).then(|| self.rid(from - 1));
        let mut seen = 0;
        while seen < count {
            let want = (count - seen).min(SCAN_PAGE_COUNT);
            let page = self
                .coll
                .scan(Direction::Forward, after, want)
                .expect("cairn scan");
            for (_, d) in &page {
                f(d.as_bytes());
            }
            seen += page.len();
            match page.last() {
                Some((rid, _)) if page.len() == want => after = Some(*rid),
                _ => break,
            }
        }
        seen
    }
}

const REDB_TABLE: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("t");

pub struct Redb {
    db: redb::Database,
}

impl Redb {
    pub fn open(dir: &Path) -> Redb {
        let db = redb::Database::create(dir.join("redb.db")).expect("open redb");
        Redb { db }
    }
    fn commit(&mut self, items: &[(u64, RawDocumentBuf)]) {
        let mut txn = self.db.begin_write().expect("redb txn");
        txn.set_durability(redb::Durability::Immediate)
            .expect("durability");
        {
            let mut t = txn.open_table(REDB_TABLE).expect("redb table");
            for (k, d) in items {
                t.insert(*k, d.as_bytes()).expect("redb insert");
            }
        }
        txn.commit().expect("redb commit");
    }
}

impl Store for Redb {
    fn name(&self) -> &'static str {
        "redb"
    }
    fn put(&mut self, items: &[(u64, RawDocumentBuf)]) {
        self.commit(items);
    }
    fn update(&mut self, items: &[(u64, RawDocumentBuf)]) {
        self.commit(items);
    }
    fn get(&self, key: u64, f: &mut dyn FnMut(&[u8])) {
        use redb::ReadableDatabase;
        let txn = self.db.begin_read().expect("redb read");
        let t = txn.open_table(REDB_TABLE).expect("redb table");
        let v = t.get(key).expect("redb get").expect("present");
        f(v.value());
    }
    fn scan(&self, from: u64, count: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        use redb::ReadableDatabase;
        let txn = self.db.begin_read().expect("redb read");
        let t = txn.open_table(REDB_TABLE).expect("redb table");
        let mut seen = 0;
        for item in t.range(from..).expect("redb range").take(count) {
            let (_, v) = item.expect("redb item");
            f(v.value());
            seen += 1;
        }
        seen
    }
}

pub struct Fjall {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

impl Fjall {
    pub fn open(dir: &Path) -> Fjall {
        let db = fjall::Database::builder(dir.join("fjall"))
            .open()
            .expect("open fjall");
        let ks = db
            .keyspace("t", fjall::KeyspaceCreateOptions::default)
            .expect("fjall keyspace");
        Fjall { db, ks }
    }
    fn commit(&mut self, items: &[(u64, RawDocumentBuf)]) {
        let mut batch = self
            .db
            .batch()
            .durability(Some(fjall::PersistMode::SyncData));
        for (k, d) in items {
            batch.insert(&self.ks, k.to_be_bytes(), d.as_bytes());
        }
        batch.commit().expect("fjall commit");
    }
}

impl Store for Fjall {
    fn name(&self) -> &'static str {
        "fjall"
    }
    fn put(&mut self, items: &[(u64, RawDocumentBuf)]) {
        self.commit(items);
    }
    fn update(&mut self, items: &[(u64, RawDocumentBuf)]) {
        self.commit(items);
    }
    fn get(&self, key: u64, f: &mut dyn FnMut(&[u8])) {
        let v = self.ks.get(key.to_be_bytes()).expect("fjall get");
        f(&v.expect("present"));
    }
    fn scan(&self, from: u64, count: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut seen = 0;
        for g in self.ks.range(from.to_be_bytes()..).take(count) {
            let (_, v) = g.into_inner().expect("fjall item");
            f(&v);
            seen += 1;
        }
        seen
    }
}

pub struct Sled {
    db: sled::Db,
}

impl Sled {
    pub fn open(dir: &Path) -> Sled {
        let db = sled::open(dir.join("sled")).expect("open sled");
        Sled { db }
    }
    fn commit(&mut self, items: &[(u64, RawDocumentBuf)]) {
        if let [(k, d)] = items {
            self.db
                .insert(k.to_be_bytes(), d.as_bytes())
                .expect("sled insert");
        } else {
            let mut batch = sled::Batch::default();
            for (k, d) in items {
                batch.insert(&k.to_be_bytes(), d.as_bytes());
            }
            self.db.apply_batch(batch).expect("sled batch");
        }
        // sled's flush writes its buffers and fsyncs them.
        self.db.flush().expect("sled flush");
    }
}

impl Store for Sled {
    fn name(&self) -> &'static str {
        "sled"
    }
    fn put(&mut self, items: &[(u64, RawDocumentBuf)]) {
        self.commit(items);
    }
    fn update(&mut self, items: &[(u64, RawDocumentBuf)]) {
        self.commit(items);
    }
    fn get(&self, key: u64, f: &mut dyn FnMut(&[u8])) {
        let v = self.db.get(key.to_be_bytes()).expect("sled get");
        f(&v.expect("present"));
    }
    fn scan(&self, from: u64, count: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut seen = 0;
        for item in self.db.range(from.to_be_bytes()..).take(count) {
            let (_, v) = item.expect("sled item");
            f(&v);
            seen += 1;
        }
        seen
    }
}

/// Bytes the directory tree occupies on disk (allocated blocks, as `du` counts them).
pub fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in entries.flatten() {
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            total += disk_bytes(&e.path());
        } else {
            total += m.blocks() * 512;
        }
    }
    total
}

/// Which fdatasync is measured.
#[derive(Clone, Copy, Debug)]
pub enum SyncKind {
    /// Overwrite one byte inside a file that was written and synced in full beforehand: the
    /// size never changes, so only the data block is flushed.
    Preallocated,
    /// Append one byte: every sync also commits a size change to the filesystem journal.
    Appending,
}

/// A file for timing "write 1 byte + fdatasync" rounds; removed on drop.
pub struct SyncFile {
    file: File,
    path: std::path::PathBuf,
}

impl SyncFile {
    /// A fresh file under `dir`; a preallocated one is written and synced in full first, with
    /// room for `rounds` overwrites.
    pub fn new(dir: &Path, kind: SyncKind, rounds: usize) -> SyncFile {
        let path = dir.join(format!("fdatasync-{kind:?}"));
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .expect("open sync file");
        if let SyncKind::Preallocated = kind {
            file.write_all(&vec![0u8; rounds + 4096]).expect("prefill");
            file.sync_all().expect("sync prefill");
            file.seek(SeekFrom::Start(0)).expect("seek");
        }
        SyncFile { file, path }
    }

    /// One round: write the next byte and fdatasync it.
    pub fn round(&mut self) -> Duration {
        let t = Instant::now();
        self.file.write_all(&[1]).expect("write byte");
        self.file.sync_data().expect("fdatasync");
        t.elapsed()
    }
}

impl Drop for SyncFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Latency of each of `count` "write 1 byte + fdatasync" rounds in a file under `dir`.
pub fn fdatasync_latencies(dir: &Path, kind: SyncKind, count: usize) -> Vec<Duration> {
    let mut f = SyncFile::new(dir, kind, count);
    (0..count).map(|_| f.round()).collect()
}

/// The `pct`th percentile (0..=100) of a set of durations (zero when empty).
pub fn percentile(mut v: Vec<Duration>, pct: usize) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[(v.len() - 1) * pct.min(100) / 100]
}

/// Median of a set of durations (zero when empty).
pub fn median(mut v: Vec<Duration>) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[v.len() / 2]
}
