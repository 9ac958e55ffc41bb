//! `dump`: mongodump's directory layout (see `layout`). Each collection is read with one `find`
//! cursor, so it is as consistent as the server's cursor (on cairn one snapshot per cursor; on
//! mongod, what mongodump without --oplog gives). Views get a metadata file only; `system.*`
//! collections are skipped, as are the admin, config and local databases unless named.

use std::io::Write;
use std::path::{Path, PathBuf};

use bson::{Document, RawDocumentBuf, doc};
use clap::Args;
use futures_util::TryStreamExt;

use crate::common::{Bar, ConnArgs, Tally, ns_selected};
use crate::extjson;
use crate::layout::{Metadata, uuid_hex};

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
    /// gzip every file (.bson.gz, .metadata.json.gz).
    #[arg(long)]
    pub gzip: bool,
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
            let dir = args.out.join(&db_name);
            std::fs::create_dir_all(&dir)?;
            let n = dump_collection(&db, &spec, &dir, &filter, &args).await?;
            tally.ok.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            if !args.conn.quiet {
                eprintln!("done dumping {ns} ({n} document(s))");
            }
        }
    }
    let ok = tally.ok.load(std::sync::atomic::Ordering::Relaxed);
    Ok(tally.report(format!("{ok} document(s) dumped to {}", args.out.display())))
}

/// Write one collection's metadata and documents; the number of documents.
async fn dump_collection(
    db: &mongodb::Database,
    spec: &Document,
    dir: &Path,
    filter: &Document,
    args: &DumpArgs,
) -> anyhow::Result<u64> {
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
    let meta = Metadata {
        options: spec.get_document("options").cloned().unwrap_or_default(),
        indexes,
        uuid: spec
            .get_document("info")
            .ok()
            .and_then(|i| i.get("uuid"))
            .and_then(uuid_hex),
        collection_name: name.to_owned(),
        kind: kind.clone(),
    };
    let gz = if args.gzip { ".gz" } else { "" };
    let mut meta_out = create(&dir.join(format!("{name}.metadata.json{gz}")), args.gzip)?;
    meta_out.write_all(meta.to_json().as_bytes())?;
    meta_out.finish()?;
    if kind == "view" {
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
    Ok(n)
}

/// A buffered output file, gzipped or not; `finish` writes the gzip trailer and flushes, so
/// an I/O error at the end is reported rather than lost in a drop.
enum Out {
    Plain(std::io::BufWriter<std::fs::File>),
    Gz(flate2::write::GzEncoder<std::io::BufWriter<std::fs::File>>),
}

impl Out {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Plain(w) => w.write_all(b),
            Out::Gz(w) => w.write_all(b),
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
