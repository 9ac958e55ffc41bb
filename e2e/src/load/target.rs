//! The two kinds of system the operations run against, one connection per worker: a MongoDB URI
//! through the official driver (documents `{_id: <int64>, field0.., fieldN}`, every write
//! `w: 1, j: true`), and PostgreSQL through `tokio-postgres` (table `(id bigint primary key, doc
//! jsonb)`, every statement its own commit with `synchronous_commit = on`). The key is the
//! primary key on both sides, so no workload needs a secondary or expression index.
//!
//! Reads fetch the whole record without decoding it on the client (raw BSON; jsonb as text), so
//! the client's CPU goes to the protocol, not to parsing documents it throws away.

use crate::compare::sweep::postgres;
use crate::load::keys::Rng;
use crate::load::workload::{Op, Shape};
use bson::{Document, RawDocumentBuf, doc};
use futures_util::TryStreamExt;
use mongodb::options::{Acknowledgment, ClientOptions, WriteConcern};
use mongodb::{Client, Collection};
use std::time::Duration;
use tokio_postgres::Statement;

use crate::load::wire_client::WireConn;

pub const TABLE: &str = "usertable";
/// Records per insert batch while loading, and batches in flight.
pub const LOAD_BATCH_COUNT: u64 = 1000;
pub const LOAD_IN_FLIGHT: usize = 4;
const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(30);

pub type Outcome<T> = Result<T, String>;

pub(crate) fn text<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Which system a measurement is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    Mongo,
    Postgres,
}

impl System {
    pub fn label(self) -> &'static str {
        match self {
            System::Mongo => "cairn",
            System::Postgres => "PostgreSQL",
        }
    }
}

fn durable() -> WriteConcern {
    WriteConcern::builder()
        .w(Acknowledgment::Nodes(1))
        .journal(true)
        .build()
}

/// A driver client whose pool holds exactly `connections` connections for the workers.
pub async fn mongo_client(uri: &str, connections: usize) -> Outcome<Client> {
    let mut options = ClientOptions::parse(uri).await.map_err(text)?;
    options.server_selection_timeout = Some(SERVER_SELECTION_TIMEOUT);
    options.max_pool_size = Some(connections as u32);
    options.min_pool_size = Some(connections as u32);
    Client::with_options(options).map_err(text)
}

pub fn mongo_collection(client: &Client, db: &str) -> Collection<Document> {
    client.database(db).collection_with_options(TABLE, {
        let mut o = mongodb::options::CollectionOptions::default();
        o.write_concern = Some(durable());
        o
    })
}

fn mongo_record(key: u64, fields: &[(String, String)]) -> Document {
    let mut d = doc! { "_id": key as i64 };
    for (name, value) in fields {
        d.insert(name.clone(), value.clone());
    }
    d
}

fn json_record(fields: &[(String, String)]) -> serde_json::Value {
    serde_json::Value::Object(
        fields
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect(),
    )
}

/// Drop the table and fill it with records `0..records`.
pub async fn load_mongo(uri: &str, db: &str, records: u64, shape: Shape, seed: u64) -> Outcome<()> {
    let client = mongo_client(uri, LOAD_IN_FLIGHT).await?;
    let coll = mongo_collection(&client, db);
    coll.drop().await.map_err(text)?;
    let mut tasks = Vec::new();
    for t in 0..LOAD_IN_FLIGHT as u64 {
        let coll = coll.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed ^ (t << 32));
            let mut first = t * LOAD_BATCH_COUNT;
            while first < records {
                let last = (first + LOAD_BATCH_COUNT).min(records);
                let batch: Vec<Document> = (first..last)
                    .map(|k| mongo_record(k, &shape.record(&mut rng)))
                    .collect();
                coll.insert_many(batch).await.map_err(text)?;
                first += LOAD_BATCH_COUNT * LOAD_IN_FLIGHT as u64;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(text)??;
    }
    Ok(())
}

pub async fn load_postgres(uri: &str, records: u64, shape: Shape, seed: u64) -> Outcome<()> {
    let admin = postgres::connect(uri).await?;
    admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {TABLE};
             CREATE TABLE {TABLE} (id bigint PRIMARY KEY, doc jsonb NOT NULL);"
        ))
        .await
        .map_err(text)?;
    let sql =
        format!("INSERT INTO {TABLE} (id, doc) SELECT * FROM unnest($1::bigint[], $2::jsonb[])");
    let mut tasks = Vec::new();
    for t in 0..LOAD_IN_FLIGHT as u64 {
        let (uri, sql) = (uri.to_string(), sql.clone());
        tasks.push(tokio::spawn(async move {
            let client = postgres::connect(&uri).await?;
            let stmt = client.prepare(&sql).await.map_err(text)?;
            let mut rng = Rng::new(seed ^ (t << 32));
            let mut first = t * LOAD_BATCH_COUNT;
            while first < records {
                let last = (first + LOAD_BATCH_COUNT).min(records);
                let ids: Vec<i64> = (first..last).map(|k| k as i64).collect();
                let docs: Vec<serde_json::Value> = (first..last)
                    .map(|_| json_record(&shape.record(&mut rng)))
                    .collect();
                client.execute(&stmt, &[&ids, &docs]).await.map_err(text)?;
                first += LOAD_BATCH_COUNT * LOAD_IN_FLIGHT as u64;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(text)??;
    }
    admin
        .batch_execute(&format!("VACUUM ANALYZE {TABLE}"))
        .await
        .map_err(text)
}

/// PostgreSQL statements of one connection.
pub struct PgStatements {
    read: Statement,
    update: Statement,
    insert: Statement,
    scan: Statement,
}

/// Which client speaks to a MongoDB URI.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum MongoClient {
    /// The official Rust driver (`mongodb`), as applications use it.
    #[default]
    Driver,
    /// `wire_client`: the same commands over a bare connection, a client as light as
    /// `tokio-postgres`, so the figures are the server's.
    Wire,
}

/// One worker's connection.
pub enum Conn {
    Wire(Box<WireConn>),
    Mongo {
        coll: Collection<Document>,
        raw: Collection<RawDocumentBuf>,
    },
    Postgres {
        client: tokio_postgres::Client,
        stmts: Box<PgStatements>,
    },
}

impl Conn {
    pub fn mongo(client: &Client, db: &str) -> Conn {
        let coll = mongo_collection(client, db);
        let raw = coll.clone_with_type::<RawDocumentBuf>();
        Conn::Mongo { coll, raw }
    }

    pub async fn wire(uri: &str, db: &str) -> Outcome<Conn> {
        Ok(Conn::Wire(Box::new(
            WireConn::connect(uri, db, TABLE).await?,
        )))
    }

    pub async fn postgres(uri: &str) -> Outcome<Conn> {
        let client = postgres::connect(uri).await?;
        let prepare = |sql: String| {
            let client = &client;
            async move { client.prepare(&sql).await.map_err(text) }
        };
        let stmts = PgStatements {
            read: prepare(format!("SELECT doc::text FROM {TABLE} WHERE id = $1")).await?,
            update: prepare(format!(
                "UPDATE {TABLE} SET doc = doc || jsonb_build_object($2::text, $3::text) \
                 WHERE id = $1"
            ))
            .await?,
            insert: prepare(format!("INSERT INTO {TABLE} (id, doc) VALUES ($1, $2)")).await?,
            scan: prepare(format!(
                "SELECT doc::text FROM {TABLE} WHERE id >= $1 ORDER BY id LIMIT $2"
            ))
            .await?,
        };
        Ok(Conn::Postgres {
            client,
            stmts: Box::new(stmts),
        })
    }

    /// Run `op` on record `key` (for an insert: the new record's number). `Ok(false)` when a
    /// read found no record.
    pub async fn run(&mut self, op: Op, key: u64, shape: &Shape, rng: &mut Rng) -> Outcome<bool> {
        match op {
            Op::Read => self.read(key).await,
            Op::Update => self.update(key, shape, rng).await.map(|()| true),
            Op::Insert => self.insert(key, &shape.record(rng)).await.map(|()| true),
            Op::Scan => self.scan(key, shape.scan_length(rng)).await,
            Op::ReadModifyWrite => {
                let found = self.read(key).await?;
                self.update(key, shape, rng).await?;
                Ok(found)
            }
        }
    }

    async fn read(&mut self, key: u64) -> Outcome<bool> {
        match self {
            Conn::Wire(c) => c.read(key as i64).await,
            Conn::Mongo { raw, .. } => {
                let d = raw.find_one(doc! { "_id": key as i64 }).await;
                Ok(d.map_err(text)?.is_some())
            }
            Conn::Postgres { client, stmts } => {
                let rows = client.query(&stmts.read, &[&(key as i64)]).await;
                Ok(!rows.map_err(text)?.is_empty())
            }
        }
    }

    async fn update(&mut self, key: u64, shape: &Shape, rng: &mut Rng) -> Outcome<()> {
        let field = Shape::field_name(rng.below(shape.fields.max(1) as u64) as usize);
        let value = shape.value(rng);
        match self {
            Conn::Wire(c) => c.update(key as i64, &field, &value).await,
            Conn::Mongo { coll, .. } => {
                let set = doc! { "$set": { field: value } };
                coll.update_one(doc! { "_id": key as i64 }, set)
                    .await
                    .map(drop)
                    .map_err(text)
            }
            Conn::Postgres { client, stmts } => client
                .execute(&stmts.update, &[&(key as i64), &field, &value])
                .await
                .map(drop)
                .map_err(text),
        }
    }

    async fn insert(&mut self, key: u64, fields: &[(String, String)]) -> Outcome<()> {
        match self {
            Conn::Wire(c) => {
                let doc = RawDocumentBuf::try_from(&mongo_record(key, fields)).map_err(text)?;
                c.insert(doc).await
            }
            Conn::Mongo { coll, .. } => coll
                .insert_one(mongo_record(key, fields))
                .await
                .map(drop)
                .map_err(text),
            Conn::Postgres { client, stmts } => client
                .execute(&stmts.insert, &[&(key as i64), &json_record(fields)])
                .await
                .map(drop)
                .map_err(text),
        }
    }

    async fn scan(&mut self, key: u64, length: u64) -> Outcome<bool> {
        match self {
            Conn::Wire(c) => c.scan(key as i64, length as i64).await,
            Conn::Mongo { raw, .. } => {
                let mut cursor = raw
                    .find(doc! { "_id": { "$gte": key as i64 } })
                    .sort(doc! { "_id": 1 })
                    .limit(length as i64)
                    .await
                    .map_err(text)?;
                let mut n = 0u64;
                while cursor.try_next().await.map_err(text)?.is_some() {
                    n += 1;
                }
                Ok(n > 0)
            }
            Conn::Postgres { client, stmts } => {
                let rows = client
                    .query(&stmts.scan, &[&(key as i64), &(length as i64)])
                    .await
                    .map_err(text)?;
                Ok(!rows.is_empty())
            }
        }
    }
}
