//! The cursor reply of `find`, `getMore`, `aggregate` and the other cursor commands,
//! `{cursor: {firstBatch | nextBatch: [...], id, ns, atClusterTime?}, ok: 1, <gossip>}`, kept as
//! its parts until the connection writes it: `write_into` puts each document straight from the
//! batch into the reply frame (one copy, into a buffer sized for the whole reply), instead of
//! splicing it into an array, the array into a cursor document and that into a reply document
//! first (three more copies, each growing its buffer). Whoever must read the reply as a
//! document (the profiler, the slow-query log, a retryable write's record, mapReduce's inline
//! results) builds it with `to_raw`, paying those copies only then.

use bson::{RawBsonRef, RawDocumentBuf, Timestamp};
use wire::DocWriter;

/// Bytes a reply needs besides its documents, its `ns` and its gossip: the field names, the
/// id, `ok`, `atClusterTime`, and per document its type byte, array index and terminator
/// (counted separately, see `frame_bytes`).
const FIXED_BYTES: usize = 128;
/// Per document: element type, an index of up to 7 digits, its zero.
const PER_DOCUMENT_BYTES: usize = 9;
/// The OP_MSG frame around the body: header, flags, section kind, checksum.
const FRAME_BYTES: usize = 16 + 4 + 1 + 4;

/// One batch of a cursor, as the reply will carry it.
#[derive(Debug, Clone)]
pub struct CursorBatch {
    /// 0 when the cursor is exhausted (or never registered).
    pub id: i64,
    pub ns: String,
    /// `firstBatch` (the opening command) or `nextBatch` (getMore).
    pub first: bool,
    pub docs: Vec<RawDocumentBuf>,
    /// A snapshot read's `atClusterTime`, written in `cursor` after `ns`.
    pub at_cluster_time: Option<Timestamp>,
    /// Fields after `ok`: the cluster-time gossip of a replica-set member.
    pub trailer: Option<RawDocumentBuf>,
}

impl CursorBatch {
    pub fn new(id: i64, ns: &str, first: bool, docs: Vec<RawDocumentBuf>) -> CursorBatch {
        CursorBatch {
            id,
            ns: ns.to_string(),
            first,
            docs,
            at_cluster_time: None,
            trailer: None,
        }
    }

    /// The whole reply frame's size, or a little more: what the frame buffer is given up front
    /// so that it never grows while the documents go in.
    pub fn frame_bytes(&self) -> usize {
        let docs: usize = self
            .docs
            .iter()
            .map(|d| d.as_bytes().len() + PER_DOCUMENT_BYTES)
            .sum();
        let trailer = self.trailer.as_ref().map_or(0, |t| t.as_bytes().len());
        FRAME_BYTES + FIXED_BYTES + self.ns.len() + docs + trailer
    }

    /// Write the reply's fields into `w` (a reply body, or an empty document).
    pub fn write_into(&self, w: &mut DocWriter) {
        w.begin_document("cursor");
        w.begin_array(if self.first {
            "firstBatch"
        } else {
            "nextBatch"
        });
        for d in &self.docs {
            w.append_raw_document("", d);
        }
        w.end();
        w.append_i64("id", self.id);
        w.append_str("ns", &self.ns);
        if let Some(at) = self.at_cluster_time {
            w.append_bson("atClusterTime", RawBsonRef::Timestamp(at));
        }
        w.end();
        w.append_f64("ok", 1.0);
        for (key, value) in self.trailer.iter().flat_map(|t| t.iter().flatten()) {
            w.append_bson(key.as_str(), value);
        }
    }

    /// What the slow-query log and the profiler count from a cursor reply (`nreturned`, and
    /// `cursorid` while the cursor stays open), without building the reply.
    pub fn counts(&self) -> bson::Document {
        let mut counts = bson::doc! { "nreturned": self.docs.len() as i64 };
        if self.id != 0 {
            counts.insert("cursorid", self.id);
        }
        counts
    }

    /// The reply as one document (for the readers named in the module comment).
    pub fn to_raw(&self) -> RawDocumentBuf {
        let mut w = DocWriter::new();
        self.write_into(&mut w);
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{Document, doc};

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).expect("encodes")
    }

    #[test]
    fn the_reply_has_mongods_shape_and_order() {
        let mut b = CursorBatch::new(7, "d.c", true, vec![raw(doc! {"_id": 1})]);
        b.at_cluster_time = Some(Timestamp {
            time: 3,
            increment: 1,
        });
        b.trailer = Some(raw(
            doc! {"operationTime": Timestamp { time: 3, increment: 1 }},
        ));
        let got = Document::try_from(b.to_raw().as_ref()).expect("decodes");
        let want = doc! {
            "cursor": {
                "firstBatch": [{"_id": 1}], "id": 7i64, "ns": "d.c",
                "atClusterTime": Timestamp { time: 3, increment: 1 },
            },
            "ok": 1.0,
            "operationTime": Timestamp { time: 3, increment: 1 },
        };
        assert_eq!(got, want);
        let next = CursorBatch::new(0, "d.c", false, vec![]).to_raw();
        let next = Document::try_from(next.as_ref()).expect("decodes");
        assert_eq!(
            next,
            doc! {"cursor": {"nextBatch": [], "id": 0i64, "ns": "d.c"}, "ok": 1.0}
        );
    }

    #[test]
    fn counts_are_what_the_profiler_reads_from_the_reply() {
        for id in [0, 5] {
            let docs = vec![raw(doc! {"_id": 1}), raw(doc! {"_id": 2})];
            let b = CursorBatch::new(id, "d.c", false, docs);
            let reply = Document::try_from(b.to_raw().as_ref()).expect("decodes");
            let mut want = Document::new();
            crate::commands::profile::reply_counts("getMore", &reply, &mut want);
            assert_eq!(b.counts(), want);
        }
    }

    #[test]
    fn the_frame_estimate_covers_the_frame() {
        let docs: Vec<_> = (0..1000).map(|i| raw(doc! {"_id": i, "s": "x"})).collect();
        let b = CursorBatch::new(i64::MAX, "db.collection", false, docs);
        let mut w = wire::MsgWriter::new(1, 2, wire::FLAG_CHECKSUM_PRESENT);
        b.write_into(w.body());
        let frame = w.finish(None).expect("frame");
        assert!(
            frame.len() <= b.frame_bytes(),
            "{} > {}",
            frame.len(),
            b.frame_bytes()
        );
    }
}
