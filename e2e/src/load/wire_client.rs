//! A minimal MongoDB client over one TCP connection: OP_MSG commands built with the `wire`
//! crate, the same commands the official driver sends for `cairn-load`'s operations (`find` with
//! `limit: 1, singleBatch: true` for a read; `insert`/`update` with the statement in a document
//! sequence and `writeConcern: {w: 1, j: true}`; a ranged `find` with `getMore` until the cursor
//! is exhausted for a scan), each with the connection's session id as the driver's implicit
//! session sends it. It does none of the driver's other work (server selection, a pool
//! checked out through a worker task, monitoring, retries, typed replies), so it measures the
//! server with about as light a client as `tokio-postgres` is on the PostgreSQL side
//! (`--mongo-client wire`; docs/BENCHMARKS.md). No TLS, authentication or compression.

use crate::load::target::{Outcome, text};
use bson::{RawDocument, RawDocumentBuf, rawdoc};
use mongodb::options::{ClientOptions, ServerAddress};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wire::{Body, DocumentSequence, FrameReader, OpMsg, SharedDocument};

pub struct WireConn {
    stream: TcpStream,
    reader: FrameReader,
    db: String,
    coll: String,
    lsid: RawDocumentBuf,
    request_id: i32,
}

/// Where a `mongodb://` URI points, refusing what this client does not do.
async fn address(uri: &str) -> Outcome<String> {
    let o = ClientOptions::parse(uri).await.map_err(text)?;
    if o.credential.is_some() || o.tls.is_some() {
        return Err("--mongo-client wire speaks plain TCP without authentication".into());
    }
    match o.hosts.first() {
        Some(ServerAddress::Tcp { host, port }) => Ok(format!("{host}:{}", port.unwrap_or(27017))),
        _ => Err(format!(
            "--mongo-client wire needs a host:port URI, not {uri}"
        )),
    }
}

impl WireConn {
    /// Connects and says hello (the driver's handshake, without its metadata's detail).
    pub async fn connect(uri: &str, db: &str, coll: &str) -> Outcome<WireConn> {
        let stream = TcpStream::connect(address(uri).await?)
            .await
            .map_err(text)?;
        stream.set_nodelay(true).map_err(text)?;
        let id = bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: bson::Uuid::new().bytes().to_vec(),
        };
        let mut c = WireConn {
            stream,
            reader: FrameReader::new(),
            db: db.to_string(),
            coll: coll.to_string(),
            lsid: rawdoc! { "id": id },
            request_id: 0,
        };
        c.command(
            rawdoc! {
                "hello": 1,
                "helloOk": true,
                "client": { "driver": { "name": "cairn-load-wire", "version": env!("CARGO_PKG_VERSION") } },
                "$db": "admin",
            },
            None,
        )
        .await?;
        Ok(c)
    }

    /// Sends `body` (plus a document sequence) and returns the reply's body, an error unless
    /// it says `ok: 1`.
    async fn command(
        &mut self,
        body: RawDocumentBuf,
        sequence: Option<(&str, RawDocumentBuf)>,
    ) -> Outcome<RawDocumentBuf> {
        self.request_id = self.request_id.wrapping_add(1);
        let mut msg = OpMsg::new(body);
        if let Some((identifier, doc)) = sequence {
            msg.sequences.push(DocumentSequence {
                identifier: identifier.to_string(),
                documents: vec![SharedDocument::from(doc)],
            });
        }
        let frame = wire::encode_msg(self.request_id, 0, &msg, None).map_err(text)?;
        self.stream.write_all(&frame).await.map_err(text)?;
        let reply = loop {
            if let Some(m) = self.reader.next_message().map_err(text)? {
                break m;
            }
            let n = self
                .stream
                .read_buf(self.reader.buffer_mut())
                .await
                .map_err(text)?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
        };
        let Body::Msg(reply) = reply.body else {
            return Err("the reply was not an OP_MSG".into());
        };
        let ok = match reply.body.get("ok").map_err(text)? {
            Some(bson::RawBsonRef::Double(v)) => v == 1.0,
            Some(bson::RawBsonRef::Int32(v)) => v == 1,
            Some(bson::RawBsonRef::Int64(v)) => v == 1,
            _ => false,
        };
        if !ok {
            return Err(format!("command failed: {:?}", reply.body));
        }
        Ok(reply.body)
    }

    /// A write command; an error when it reports a write error or a write-concern error.
    async fn write(
        &mut self,
        mut body: RawDocumentBuf,
        seq: &str,
        doc: RawDocumentBuf,
    ) -> Outcome<()> {
        body.append(bson::cstr!("ordered"), true);
        body.append(bson::cstr!("writeConcern"), rawdoc! { "w": 1, "j": true });
        body.append(bson::cstr!("lsid"), self.lsid.clone());
        body.append(bson::cstr!("$db"), self.db.as_str());
        let reply = self.command(body, Some((seq, doc))).await?;
        if reply.get("writeErrors").map_err(text)?.is_some()
            || reply.get("writeConcernError").map_err(text)?.is_some()
        {
            return Err(format!("write failed: {reply:?}"));
        }
        Ok(())
    }

    /// The record with `_id: key`, whether it was found.
    pub async fn read(&mut self, key: i64) -> Outcome<bool> {
        let body = rawdoc! {
            "find": self.coll.as_str(),
            "limit": 1i64,
            "singleBatch": true,
            "filter": { "_id": key },
            "lsid": self.lsid.clone(),
            "$db": self.db.as_str(),
        };
        let reply = self.command(body, None).await?;
        Ok(batch_len(&reply, "firstBatch")? > 0)
    }

    pub async fn insert(&mut self, doc: RawDocumentBuf) -> Outcome<()> {
        let body = rawdoc! { "insert": self.coll.as_str() };
        self.write(body, "documents", doc).await
    }

    pub async fn update(&mut self, key: i64, field: &str, value: &str) -> Outcome<()> {
        let body = rawdoc! { "update": self.coll.as_str() };
        let mut set = RawDocumentBuf::new();
        set.append(<&bson::raw::CStr>::try_from(field).map_err(text)?, value);
        let statement = rawdoc! { "q": { "_id": key }, "u": { "$set": set } };
        self.write(body, "updates", statement).await
    }

    /// Up to `length` records from `_id: key` on, in `_id` order; whether any was found.
    pub async fn scan(&mut self, key: i64, length: i64) -> Outcome<bool> {
        let body = rawdoc! {
            "find": self.coll.as_str(),
            "filter": { "_id": { "$gte": key } },
            "sort": { "_id": 1 },
            "limit": length,
            "lsid": self.lsid.clone(),
            "$db": self.db.as_str(),
        };
        let mut reply = self.command(body, None).await?;
        let mut n = batch_len(&reply, "firstBatch")?;
        loop {
            let id = cursor(&reply)?.get_i64("id").map_err(text)?;
            if id == 0 {
                return Ok(n > 0);
            }
            let more = rawdoc! {
                "getMore": id,
                "collection": self.coll.as_str(),
                "lsid": self.lsid.clone(),
                "$db": self.db.as_str(),
            };
            reply = self.command(more, None).await?;
            n += batch_len(&reply, "nextBatch")?;
        }
    }
}

fn cursor(reply: &RawDocument) -> Outcome<&RawDocument> {
    reply.get_document("cursor").map_err(text)
}

fn batch_len(reply: &RawDocument, batch: &str) -> Outcome<usize> {
    Ok(cursor(reply)?
        .get_array(batch)
        .map_err(text)?
        .into_iter()
        .count())
}
