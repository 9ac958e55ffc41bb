//! Writing batches of documents to one collection in one of mongoimport's modes, and the
//! batch sizes. A batch is unordered (every good document lands even when some fail) unless the
//! run stops on the first error; the per-document failures come back with their batch index so
//! the caller can name the input line or byte offset.

use bson::{Bson, Document, RawDocumentBuf, doc};
use mongodb::error::ErrorKind;

/// Input bytes per batch: big enough to amortise the round trip, far below the 48 MB message
/// limit, small enough that `--numInsertionWorkers` batches in flight stay cheap in memory.
pub const BATCH_BYTES_MAX: usize = 4 << 20;
/// Documents per batch unless `--batchSize` says otherwise (the wire limit is 100,000).
pub const BATCH_COUNT_MAX: usize = 10_000;

/// mongoimport's `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WriteMode {
    /// Insert; documents whose _id exists fail (duplicate key) and are reported.
    Insert,
    /// Replace the document matching --upsertFields, or insert it.
    Upsert,
    /// Set the new fields on the document matching --upsertFields, or insert it.
    Merge,
    /// Delete one document matching --upsertFields.
    Delete,
}

/// Where and how batches are written.
#[derive(Debug, Clone)]
pub struct Target {
    pub db: mongodb::Database,
    pub coll: mongodb::Collection<RawDocumentBuf>,
    pub mode: WriteMode,
    pub upsert_fields: Vec<String>,
    /// Ordered writes: stop a batch at its first failure (with --stopOnError).
    pub ordered: bool,
}

/// One failed document of a batch: its index in the batch and the server's reason.
pub type Failure = (usize, String);

impl Target {
    pub fn new(
        client: &mongodb::Client,
        db: &str,
        coll: &str,
        mode: WriteMode,
        upsert_fields: Vec<String>,
        ordered: bool,
    ) -> Target {
        let db = client.database(db);
        Target {
            coll: db.collection(coll),
            db,
            mode,
            upsert_fields,
            ordered,
        }
    }

    /// Write one batch; Err only for failures that are not about one document (network, auth).
    pub async fn write(&self, docs: Vec<RawDocumentBuf>) -> anyhow::Result<Vec<Failure>> {
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        match self.mode {
            WriteMode::Insert => self.insert(docs).await,
            _ => self.by_filter(docs).await,
        }
    }

    async fn insert(&self, docs: Vec<RawDocumentBuf>) -> anyhow::Result<Vec<Failure>> {
        match self.coll.insert_many(docs).ordered(self.ordered).await {
            Ok(_) => Ok(Vec::new()),
            Err(e) => match e.kind.as_ref() {
                ErrorKind::InsertMany(m) if m.write_errors.is_some() => Ok(m
                    .write_errors
                    .iter()
                    .flatten()
                    .map(|w| (w.index, format!("{} (code {})", w.message, w.code)))
                    .collect()),
                _ => Err(anyhow::anyhow!(
                    "insert into {}: {e}",
                    self.coll.namespace()
                )),
            },
        }
    }

    /// upsert, merge and delete: one `update` or `delete` command per batch. Documents lacking
    /// an upsert field cannot be matched; in upsert and merge modes they are inserted, as
    /// mongoimport does, and in delete mode they fail.
    async fn by_filter(&self, docs: Vec<RawDocumentBuf>) -> anyhow::Result<Vec<Failure>> {
        let mut statements = Vec::with_capacity(docs.len());
        let mut positions = Vec::with_capacity(docs.len());
        let mut inserts = Vec::new();
        let mut failures = Vec::new();
        for (i, raw) in docs.into_iter().enumerate() {
            let doc = Document::try_from(raw.as_ref())?;
            let Some(filter) = self.filter(&doc) else {
                match self.mode {
                    WriteMode::Delete => {
                        failures.push((i, "missing an --upsertFields field".into()))
                    }
                    _ => inserts.push((i, raw)),
                }
                continue;
            };
            positions.push(i);
            statements.push(match self.mode {
                WriteMode::Delete => doc! { "q": filter, "limit": 1 },
                WriteMode::Upsert => doc! { "q": filter, "u": doc, "upsert": true },
                _ => {
                    let mut set = doc;
                    set.remove("_id");
                    doc! { "q": filter, "u": { "$set": set }, "upsert": true }
                }
            });
        }
        if !statements.is_empty() {
            let name = self.coll.name();
            let command = match self.mode {
                WriteMode::Delete => {
                    doc! { "delete": name, "deletes": statements, "ordered": self.ordered }
                }
                _ => doc! { "update": name, "updates": statements, "ordered": self.ordered },
            };
            let reply = self.db.run_command(command).await?;
            if let Ok(errors) = reply.get_array("writeErrors") {
                for e in errors.iter().filter_map(Bson::as_document) {
                    let index = e.get_i32("index").unwrap_or(0).max(0) as usize;
                    let at = positions.get(index).copied().unwrap_or(index);
                    let msg = e.get_str("errmsg").unwrap_or("write error");
                    failures.push((
                        at,
                        format!("{msg} (code {})", e.get_i32("code").unwrap_or(0)),
                    ));
                }
            }
        }
        if !inserts.is_empty() {
            let (at, raws): (Vec<usize>, Vec<RawDocumentBuf>) = inserts.into_iter().unzip();
            for (j, msg) in self.insert(raws).await? {
                failures.push((at[j], msg));
            }
        }
        Ok(failures)
    }

    /// The equality filter on the upsert fields, None when the document lacks one of them.
    fn filter(&self, doc: &Document) -> Option<Document> {
        let mut filter = Document::new();
        for path in &self.upsert_fields {
            filter.insert(path.clone(), lookup(doc, path)?.clone());
        }
        Some(filter)
    }
}

/// The value at a dotted path through subdocuments.
pub fn lookup<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut value = doc.get(parts.next()?)?;
    for p in parts {
        value = value.as_document()?.get(p)?;
    }
    Some(value)
}
