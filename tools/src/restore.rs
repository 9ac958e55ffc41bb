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
    /// Accepted for mongorestore compatibility; gzip is recognised by the .gz names.
    #[arg(long)]
    pub gzip: bool,
}

pub async fn run(args: RestoreArgs) -> anyhow::Result<crate::Report> {
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
    if let Some(m) = meta.filter(|m| !args.no_index_restore && !m.indexes.is_empty()) {
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
            db.run_command(doc! { "createIndexes": &e.collection, "indexes": specs })
                .await
                .map_err(|err| anyhow::anyhow!("rebuilding indexes: {err}"))?;
        }
    }
    if !args.conn.quiet {
        eprintln!("finished restoring {ns}");
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
