//! `dump`: mongodump's directory layout (see `layout`). Each collection is read with one `find`
//! cursor, so it is as consistent as the server's cursor (on cairn one snapshot per cursor; on
//! mongod, what mongodump without --oplog gives). Views get a metadata file only; `system.*`
//! collections are skipped, as are the admin, config and local databases unless named.

use std::io::Write;
use std::path::{Path, PathBuf};

use bson::{Document, RawDocumentBuf, doc};
use clap::Args;
use futures_util::TryStreamExt;

use crate::archive::ArchiveWriter;
use crate::common::{Bar, ConnArgs, Tally, ns_selected};
use crate::extjson;
use crate::layout::{Metadata, uuid_hex};
use crate::writer::BATCH_BYTES_MAX;

#[derive(Debug, Clone, Args)]
pub struct DumpArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
    /// Only documents matching this Extended JSON filter (needs --collection).
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// Output directory.
    #[arg(long, short = 'o', default_value = "dump")]
    pub out: PathBuf,
    /// gzip every file (.bson.gz, .metadata.json.gz), or the whole archive.
    #[arg(long)]
    pub gzip: bool,
    /// One archive file instead of a directory (`--archive` alone: standard output).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", require_equals = true)]
    pub archive: Option<String>,
    /// Namespace patterns to include (`db.*`), repeatable.
    #[arg(long = "nsInclude")]
    pub ns_include: Vec<String>,
    #[arg(long = "nsExclude")]
    pub ns_exclude: Vec<String>,
}

pub async fn run(args: DumpArgs) -> anyhow::Result<crate::Report> {
    if args.query.is_some() && args.collection.is_none() {
        anyhow::bail!("--query needs --collection");
    }
    if args.collection.is_some() && args.db.is_none() {
        anyhow::bail!("--collection needs --db");
    }
    let filter = match &args.query {
        Some(q) => extjson::parse_document(q).map_err(|e| anyhow::anyhow!("--query: {e}"))?,
        None => Document::new(),
    };
    let client = args.conn.client().await?;
    let dbs = match &args.db {
        Some(d) => vec![d.clone()],
        None => client
            .list_database_names()
            .await?
            .into_iter()
            .filter(|d| !matches!(d.as_str(), "admin" | "config" | "local"))
            .collect(),
    };
    let tally = Tally::new(args.conn.quiet);
    let mut chosen = Vec::new();
    for db_name in dbs {
        let db = client.database(&db_name);
        let mut specs: Vec<Document> = db
            .run_cursor_command(doc! { "listCollections": 1 })
            .await?
            .try_collect()
            .await?;
        specs.sort_by(|a, b| {
            a.get_str("name")
                .unwrap_or("")
                .cmp(b.get_str("name").unwrap_or(""))
        });
        for spec in specs {
            let name = spec.get_str("name").unwrap_or_default().to_owned();
            let ns = format!("{db_name}.{name}");
            if name.starts_with("system.")
                || args.collection.as_ref().is_some_and(|c| *c != name)
                || !ns_selected(&ns, &args.ns_include, &args.ns_exclude)
            {
                continue;
            }
            chosen.push((db.clone(), metadata_of(&db, &spec).await?));
        }
    }
    let target = match &args.archive {
        Some(a) => format!("archive {a}"),
        None => args.out.display().to_string(),
    };
    if let Some(path) = &args.archive {
        let version = client
            .database("admin")
            .run_command(doc! { "buildInfo": 1 })
            .await?
            .get_str("version")
            .unwrap_or("")
            .to_owned();
        let out: Box<dyn Write> = if path == "-" {
            Box::new(std::io::stdout().lock())
        } else {
            Box::new(
                std::fs::File::create(path)
                    .map_err(|e| anyhow::anyhow!("cannot create {path}: {e}"))?,
            )
        };
        let out = Out::new(std::io::BufWriter::with_capacity(1 << 20, out), args.gzip);
        let metas: Vec<_> = chosen
            .iter()
            .map(|(db, m)| (db.name().to_owned(), m.collection_name.clone(), m.to_json()))
            .collect();
        let mut w = ArchiveWriter::new(out, &version, &metas)?;
        for (db, meta) in &chosen {
            let n = dump_to_archive(db, meta, &mut w, &filter, &args).await?;
            tally.ok.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
        w.into_inner().finish()?;
    } else {
        for (db, meta) in &chosen {
            let dir = args.out.join(db.name());
            std::fs::create_dir_all(&dir)?;
            let n = dump_collection(db, meta, &dir, &filter, &args).await?;
            tally.ok.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let ok = tally.ok.load(std::sync::atomic::Ordering::Relaxed);
    Ok(tally.report(format!("{ok} document(s) dumped to {target}")))
}

/// A collection's metadata as mongodump records it (options, indexes, uuid, type).
async fn metadata_of(db: &mongodb::Database, spec: &Document) -> anyhow::Result<Metadata> {
    let name = spec.get_str("name")?;
    let kind = spec.get_str("type").unwrap_or("collection").to_owned();
    let indexes: Vec<Document> = if kind == "view" {
        Vec::new()
    } else {
        db.run_cursor_command(doc! { "listIndexes": name })
            .await?
            .try_collect()
            .await?
    };
    Ok(Metadata {
        options: spec.get_document("options").cloned().unwrap_or_default(),
        indexes,
        uuid: spec
            .get_document("info")
            .ok()
            .and_then(|i| i.get("uuid"))
            .and_then(uuid_hex),
        collection_name: name.to_owned(),
        kind,
    })
}

/// Write one collection's metadata and documents as files; the number of documents.
async fn dump_collection(
    db: &mongodb::Database,
    meta: &Metadata,
    dir: &Path,
    filter: &Document,
    args: &DumpArgs,
) -> anyhow::Result<u64> {
    let name = &meta.collection_name;
    let gz = if args.gzip { ".gz" } else { "" };
    let mut meta_out = create(&dir.join(format!("{name}.metadata.json{gz}")), args.gzip)?;
    meta_out.write_all(meta.to_json().as_bytes())?;
    meta_out.finish()?;
    if meta.kind == "view" {
        return Ok(0);
    }
    let coll = db.collection::<RawDocumentBuf>(name);
    let mut cursor = coll.find(filter.clone()).await?;
    let mut out = create(&dir.join(format!("{name}.bson{gz}")), args.gzip)?;
    let bar = Bar::new(&format!("{}.{name}", db.name()), None, args.conn.quiet);
    let mut n = 0u64;
    while let Some(d) = cursor.try_next().await? {
        out.write_all(d.as_bytes())?;
        n += 1;
        bar.advance(1, d.as_bytes().len() as u64);
    }
    out.finish()?;
    bar.finish();
    if !args.conn.quiet {
        eprintln!("done dumping {}.{name} ({n} document(s))", db.name());
    }
    Ok(n)
}

/// Write one collection's documents into the archive in segments of about `BATCH_BYTES_MAX`.
async fn dump_to_archive<W: Write>(
    db: &mongodb::Database,
    meta: &Metadata,
    w: &mut ArchiveWriter<W>,
    filter: &Document,
    args: &DumpArgs,
) -> anyhow::Result<u64> {
    let name = &meta.collection_name;
    let mut n = 0u64;
    if meta.kind != "view" {
        let mut cursor = db
            .collection::<RawDocumentBuf>(name)
            .find(filter.clone())
            .await?;
        let bar = Bar::new(&format!("{}.{name}", db.name()), None, args.conn.quiet);
        let (mut batch, mut bytes) = (Vec::new(), 0usize);
        while let Some(d) = cursor.try_next().await? {
            bytes += d.as_bytes().len();
            bar.advance(1, d.as_bytes().len() as u64);
            batch.push(d);
            n += 1;
            if bytes >= BATCH_BYTES_MAX {
                w.segment(db.name(), name, &batch)?;
                (batch, bytes) = (Vec::new(), 0);
            }
        }
        w.segment(db.name(), name, &batch)?;
        bar.finish();
    }
    w.eof(db.name(), name)?;
    if !args.conn.quiet {
        eprintln!("done dumping {}.{name} ({n} document(s))", db.name());
    }
    Ok(n)
}

/// A buffered output file, gzipped or not; `finish` writes the gzip trailer and flushes, so
/// an I/O error at the end is reported rather than lost in a drop.
enum Out<W: Write = std::io::BufWriter<std::fs::File>> {
    Plain(W),
    Gz(flate2::write::GzEncoder<W>),
}

impl<W: Write> Write for Out<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Out::Plain(w) => w.write(b),
            Out::Gz(w) => w.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Plain(w) => w.flush(),
            Out::Gz(w) => w.flush(),
        }
    }
}

impl<W: Write> Out<W> {
    fn new(w: W, gzip: bool) -> Self {
        if gzip {
            Out::Gz(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::fast(),
            ))
        } else {
            Out::Plain(w)
        }
    }

    fn finish(self) -> std::io::Result<()> {
        match self {
            Out::Plain(mut w) => w.flush(),
            Out::Gz(w) => w.finish()?.flush(),
        }
    }
}

fn create(path: &Path, gzip: bool) -> anyhow::Result<Out> {
    let f = std::fs::File::create(path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    let f = std::io::BufWriter::with_capacity(1 << 20, f);
    Ok(if gzip {
        Out::Gz(flate2::write::GzEncoder::new(
            f,
            flate2::Compression::fast(),
        ))
    } else {
        Out::Plain(f)
    })
}
