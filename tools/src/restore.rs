//! `restore`: mongorestore over mongodump's layout (see `layout`). Per collection: read and
//! check the metadata, `--drop`, create the collection with its options (or the view), insert
//! the `.bson` documents in unordered batches from `--numInsertionWorkers` tasks while a thread
//! reads and checks the file, then rebuild the indexes. A damaged file is reported with its byte
//! offset; every document before the damage is restored and counted, none after it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bson::{Document, RawDocumentBuf, doc};
use clap::Args;
use tokio::sync::{Mutex, mpsc};

use crate::common::{Bar, ConnArgs, Tally, ns_selected};
use crate::layout::{self, BsonReader, DumpEntry, Metadata};
use crate::writer::{BATCH_BYTES_MAX, BATCH_COUNT_MAX, Target, WriteMode};

#[derive(Debug, Clone, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// A dump directory, one database's directory (with --db), or one .bson file.
    #[arg(default_value = "dump")]
    pub path: PathBuf,
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
    /// Drop each collection before restoring it.
    #[arg(long)]
    pub drop: bool,
    #[arg(long = "nsInclude")]
    pub ns_include: Vec<String>,
    #[arg(long = "nsExclude")]
    pub ns_exclude: Vec<String>,
    #[arg(long = "noIndexRestore")]
    pub no_index_restore: bool,
    #[arg(long = "noOptionsRestore")]
    pub no_options_restore: bool,
    #[arg(long = "stopOnError")]
    pub stop_on_error: bool,
    #[arg(
        long = "numInsertionWorkersPerCollection",
        short = 'j',
        default_value_t = 2
    )]
    pub workers: usize,
    /// Directory layout: accepted, gzip is recognised by the .gz names. Archive: the archive
    /// is one gzip stream (also assumed when its name ends in .gz).
    #[arg(long)]
    pub gzip: bool,
    /// Read a mongodump archive instead of a directory (`--archive` alone: standard input).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", require_equals = true)]
    pub archive: Option<String>,
}

pub async fn run(args: RestoreArgs) -> anyhow::Result<crate::Report> {
    if let Some(path) = args.archive.clone() {
        return restore_archive(&path, &args).await;
    }
    let entries = find_entries(&args)?;
    let client = args.conn.client().await?;
    let tally = Arc::new(Tally::new(args.conn.quiet));
    let quiet_bar = Bar::new("", None, true);
    for e in entries {
        let ns = format!("{}.{}", e.db, e.collection);
        if e.collection.starts_with("system.")
            || !ns_selected(&ns, &args.ns_include, &args.ns_exclude)
        {
            continue;
        }
        if let Err(why) = restore_one(&client, &e, &args, &tally).await {
            tally.failed.fetch_add(1, Ordering::Relaxed);
            tally.problem(&quiet_bar, format!("{ns}: {why:#}"));
            if args.stop_on_error {
                break;
            }
        }
    }
    let ok = tally.ok.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    Ok(tally.report(format!(
        "{ok} document(s) restored successfully. {failed} document(s) failed to restore."
    )))
}

/// The collections to restore from the path given.
fn find_entries(args: &RestoreArgs) -> anyhow::Result<Vec<DumpEntry>> {
    let path = &args.path;
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if meta.is_file() {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let stem = name
            .strip_suffix(".bson")
            .or(name.strip_suffix(".bson.gz"))
            .ok_or_else(|| anyhow::anyhow!("{} is not a .bson file", path.display()))?;
        let parent = path.parent().unwrap_or(Path::new("."));
        let db = match &args.db {
            Some(d) => d.clone(),
            None => parent
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_owned)
                .ok_or_else(|| anyhow::anyhow!("--db is needed to restore {}", path.display()))?,
        };
        let gz = if name.ends_with(".gz") { ".gz" } else { "" };
        let metadata = parent.join(format!("{stem}.metadata.json{gz}"));
        return Ok(vec![DumpEntry {
            db,
            collection: args.collection.clone().unwrap_or_else(|| stem.to_owned()),
            bson: Some(path.clone()),
            metadata: metadata.exists().then_some(metadata),
        }]);
    }
    let has_subdirs = std::fs::read_dir(path)?
        .filter_map(Result::ok)
        .any(|e| e.path().is_dir());
    let mut entries = Vec::new();
    match &args.db {
        // `restore --db x dump/x`: the directory holds the collections themselves.
        Some(db) if !has_subdirs => entries = layout::scan_db_dir(path, db)?,
        _ => {
            let mut dirs: Vec<PathBuf> = std::fs::read_dir(path)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            for d in dirs {
                let Some(db) = d.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
                    continue;
                };
                if args.db.as_ref().is_some_and(|want| *want != db) {
                    continue;
                }
                entries.extend(layout::scan_db_dir(&d, &db)?);
            }
        }
    }
    if let Some(c) = &args.collection {
        entries.retain(|e| e.collection == *c);
    }
    Ok(entries)
}

fn read_metadata(path: &Path) -> anyhow::Result<(Metadata, Vec<String>)> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut layout::open(path)?, &mut text)?;
    Metadata::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

async fn restore_one(
    client: &mongodb::Client,
    e: &DumpEntry,
    args: &RestoreArgs,
    tally: &Arc<Tally>,
) -> anyhow::Result<()> {
    let ns = format!("{}.{}", e.db, e.collection);
    let bar = Bar::new(
        &ns,
        e.bson
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| m.len()),
        args.conn.quiet,
    );
    let meta = match &e.metadata {
        Some(p) => {
            let (m, warnings) = read_metadata(p)?;
            for w in warnings {
                tally.problem(&bar, format!("{}: {w}", p.display()));
            }
            Some(m)
        }
        None => None,
    };
    let db = client.database(&e.db);
    if args.drop {
        db.collection::<Document>(&e.collection).drop().await?;
    }
    if let Some(m) = &meta {
        create(&db, &e.collection, m, args.no_options_restore).await?;
    }
    if let Some(p) = &e.bson {
        let target = Target::new(
            client,
            &e.db,
            &e.collection,
            WriteMode::Insert,
            vec!["_id".into()],
            args.stop_on_error,
        );
        insert_file(p, target, args, tally, &bar).await?;
    }
    bar.finish();
    if let Some(m) = meta.filter(|_| !args.no_index_restore) {
        rebuild_indexes(&db, &e.collection, m).await?;
    }
    if !args.conn.quiet {
        eprintln!("finished restoring {ns}");
    }
    Ok(())
}

/// createIndexes with the dumped specs (all but `_id_`, without the legacy `ns` field).
async fn rebuild_indexes(db: &mongodb::Database, coll: &str, m: Metadata) -> anyhow::Result<()> {
    let specs: Vec<Document> = m
        .indexes
        .into_iter()
        .filter(|i| i.get_str("name").is_ok_and(|n| n != "_id_"))
        .map(|mut i| {
            i.remove("ns");
            i
        })
        .collect();
    if !specs.is_empty() {
        db.run_command(doc! { "createIndexes": coll, "indexes": specs })
            .await
            .map_err(|err| anyhow::anyhow!("rebuilding indexes: {err}"))?;
    }
    Ok(())
}

/// Create the collection with its options, or the view; an existing collection is kept.
async fn create(
    db: &mongodb::Database,
    name: &str,
    m: &Metadata,
    no_options: bool,
) -> anyhow::Result<()> {
    if m.kind != "view" && (no_options || m.options.is_empty()) {
        return Ok(());
    }
    let mut cmd = doc! { "create": name };
    for (k, v) in &m.options {
        cmd.insert(k.clone(), v.clone());
    }
    match db.run_command(cmd).await {
        Ok(_) => Ok(()),
        Err(err) if cairn_code(&err) == Some(48) => Ok(()), // NamespaceExists
        Err(err) => Err(anyhow::anyhow!("creating the collection: {err}")),
    }
}

fn cairn_code(e: &mongodb::error::Error) -> Option<i32> {
    match e.kind.as_ref() {
        mongodb::error::ErrorKind::Command(c) => Some(c.code),
        _ => None,
    }
}

/// A batch of documents and the byte offset of each.
type Batch = (Vec<RawDocumentBuf>, Vec<u64>, u64);

async fn insert_file(
    path: &Path,
    target: Target,
    args: &RestoreArgs,
    tally: &Arc<Tally>,
    bar: &Bar,
) -> anyhow::Result<()> {
    let workers = if args.stop_on_error {
        1
    } else {
        args.workers.max(1)
    };
    let (tx, rx) = mpsc::channel::<Batch>(workers * 2);
    let input =
        layout::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    let reader = std::thread::spawn(move || -> Result<(), String> {
        let mut r = BsonReader::new(input);
        let (mut docs, mut offsets, mut bytes) = (Vec::new(), Vec::new(), 0usize);
        let result = loop {
            let at = r.offset;
            match r.next_doc() {
                Ok(Some(d)) => {
                    bytes += d.as_bytes().len();
                    offsets.push(at);
                    docs.push(d);
                    if docs.len() >= BATCH_COUNT_MAX || bytes >= BATCH_BYTES_MAX {
                        let batch = (
                            std::mem::take(&mut docs),
                            std::mem::take(&mut offsets),
                            bytes as u64,
                        );
                        bytes = 0;
                        if tx.blocking_send(batch).is_err() {
                            return Ok(());
                        }
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        if !docs.is_empty() {
            let _ = tx.blocking_send((docs, offsets, bytes as u64));
        }
        result
    });
    let rx = Arc::new(Mutex::new(rx));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (rx, target, tally, bar) = (rx.clone(), target.clone(), tally.clone(), bar.clone());
        let file = path.display().to_string();
        tasks.push(tokio::spawn(async move {
            loop {
                // The receiver's lock is released before the batch is written.
                let next = rx.lock().await.recv().await;
                let Some((docs, offsets, bytes)) = next else {
                    break;
                };
                let n = docs.len() as u64;
                let failures = target.write(docs).await?;
                for (i, why) in &failures {
                    let at = offsets.get(*i).copied().unwrap_or(0);
                    tally.problem(&bar, format!("{file}: document at byte {at}: {why}"));
                }
                let failed = failures.len() as u64;
                tally.ok.fetch_add(n - failed, Ordering::Relaxed);
                tally.failed.fetch_add(failed, Ordering::Relaxed);
                bar.advance(n, bytes);
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader thread panicked"))?
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A namespace's documents read but not yet handed over: documents, offsets, bytes.
type Pending = (Vec<RawDocumentBuf>, Vec<u64>, usize);

/// What the archive reader thread hands over.
enum Msg {
    Prelude(Vec<(String, String, String)>),
    /// (db, collection, documents, their byte offsets in the archive)
    Docs(String, String, Vec<RawDocumentBuf>, Vec<u64>),
    Eof(String, String),
    Damage(String),
}

/// Read the archive on a thread, batching each namespace's documents.
fn read_archive(input: Box<dyn std::io::Read + Send>, tx: mpsc::Sender<Msg>) {
    use crate::archive::{ArchiveReader, Item};
    use std::collections::HashMap;
    let mut r = ArchiveReader::new(input);
    match r.prelude() {
        Ok((_, metas)) => {
            if tx.blocking_send(Msg::Prelude(metas)).is_err() {
                return;
            }
        }
        Err(e) => {
            let _ = tx.blocking_send(Msg::Damage(e));
            return;
        }
    }
    let mut pending: HashMap<(String, String), Pending> = HashMap::new();
    let flush = |key: (String, String), batch: Pending| {
        tx.blocking_send(Msg::Docs(key.0, key.1, batch.0, batch.1))
            .is_ok()
    };
    loop {
        match r.next_item() {
            Ok(Some(Item::Doc(db, coll, d, at))) => {
                let key = (db, coll);
                let entry = pending.entry(key.clone()).or_default();
                entry.2 += d.as_bytes().len();
                entry.0.push(d);
                entry.1.push(at);
                if (entry.0.len() >= BATCH_COUNT_MAX || entry.2 >= BATCH_BYTES_MAX)
                    && let Some(batch) = pending.remove(&key)
                    && !flush(key, batch)
                {
                    return;
                }
            }
            Ok(Some(Item::Eof(db, coll))) => {
                let key = (db.clone(), coll.clone());
                if let Some(batch) = pending.remove(&key)
                    && !flush(key, batch)
                {
                    return;
                }
                if tx.blocking_send(Msg::Eof(db, coll)).is_err() {
                    return;
                }
            }
            Ok(None) => break,
            Err(e) => {
                // Everything read before the damage is still restored.
                for (key, batch) in pending.drain() {
                    if !flush(key, batch) {
                        return;
                    }
                }
                let _ = tx.blocking_send(Msg::Damage(e));
                return;
            }
        }
    }
    for (key, batch) in pending.drain() {
        if !flush(key, batch) {
            return;
        }
    }
}

/// `restore --archive`: namespaces are created from the prelude's metadata, documents written
/// as they stream in, indexes built when a namespace's EOF header (and CRC) has been read.
async fn restore_archive(path: &str, args: &RestoreArgs) -> anyhow::Result<crate::Report> {
    let raw: Box<dyn std::io::Read + Send> = if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).map_err(|e| anyhow::anyhow!("cannot open {path}: {e}"))?)
    };
    let raw = std::io::BufReader::with_capacity(1 << 20, raw);
    let input: Box<dyn std::io::Read + Send> = if args.gzip || path.ends_with(".gz") {
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(raw)))
    } else {
        Box::new(raw)
    };
    let client = args.conn.client().await?;
    let tally = Arc::new(Tally::new(args.conn.quiet));
    let bar = Bar::new(&format!("archive {path}"), None, args.conn.quiet);
    let (tx, mut rx) = mpsc::channel::<Msg>(4);
    let reader = std::thread::spawn(move || read_archive(input, tx));
    let mut chosen: std::collections::HashMap<(String, String), (Metadata, Target)> =
        Default::default();
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Prelude(metas) => {
                for (db, coll, text) in metas {
                    let ns = format!("{db}.{coll}");
                    if coll.starts_with("system.")
                        || args.db.as_ref().is_some_and(|d| *d != db)
                        || args.collection.as_ref().is_some_and(|c| *c != coll)
                        || !ns_selected(&ns, &args.ns_include, &args.ns_exclude)
                    {
                        continue;
                    }
                    let (meta, warnings) = Metadata::parse(&text)
                        .map_err(|e| anyhow::anyhow!("{ns}: metadata: {e}"))?;
                    for w in warnings {
                        tally.problem(&bar, format!("{ns}: metadata: {w}"));
                    }
                    let database = client.database(&db);
                    if args.drop {
                        database.collection::<Document>(&coll).drop().await?;
                    }
                    create(&database, &coll, &meta, args.no_options_restore).await?;
                    let target = Target::new(
                        &client,
                        &db,
                        &coll,
                        WriteMode::Insert,
                        vec!["_id".into()],
                        args.stop_on_error,
                    );
                    chosen.insert((db, coll), (meta, target));
                }
            }
            Msg::Docs(db, coll, docs, offsets) => {
                let Some((_, target)) = chosen.get(&(db, coll)) else {
                    continue;
                };
                let n = docs.len() as u64;
                let bytes: u64 = docs.iter().map(|d| d.as_bytes().len() as u64).sum();
                let failures = target.write(docs).await?;
                for (i, why) in &failures {
                    let at = offsets.get(*i).copied().unwrap_or(0);
                    tally.problem(&bar, format!("{path}: document at byte {at}: {why}"));
                }
                tally
                    .ok
                    .fetch_add(n - failures.len() as u64, Ordering::Relaxed);
                tally
                    .failed
                    .fetch_add(failures.len() as u64, Ordering::Relaxed);
                bar.advance(n, bytes);
            }
            Msg::Eof(db, coll) => {
                let Some((meta, target)) = chosen.remove(&(db.clone(), coll.clone())) else {
                    continue;
                };
                if !args.no_index_restore {
                    rebuild_indexes(&target.db, &coll, meta).await?;
                }
                if !args.conn.quiet {
                    bar.println(&format!("finished restoring {db}.{coll}"));
                }
            }
            Msg::Damage(why) => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
                tally.problem(&bar, format!("{path}: {why}"));
            }
        }
    }
    let _ = reader.join();
    bar.finish();
    let ok = tally.ok.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    Ok(tally.report(format!(
        "{ok} document(s) restored successfully. {failed} document(s) failed to restore."
    )))
}
