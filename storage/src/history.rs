//! The write history (the server's oplog and change streams), read from the log itself: with
//! `EngineOptions::history_bytes` every data write is a batch led by a STAMP record (timestamp,
//! wall clock, one op code per data record, deleted ids and update diffs), so reading the
//! segments in order yields every committed write in commit order, with no second write path.
//!
//! Only durable batches are returned (a write nobody has been told about yet never shows, and
//! nothing shown can be lost by a crash). Positions are (segment, offset) of a batch's begin
//! record; they stay valid while the segment exists: compaction leaves the newest
//! `history_bytes` of log alone, and the history starts at the oldest segment of the unbroken
//! run of segments ending at the current one.

use bson::{Document, RawDocumentBuf};

use crate::compact::Chunked;
use crate::engine::Engine;
use crate::error::{Result, StorageError};
use crate::record::{self, Decoded, Kind, SEGMENT_HEADER_SIZE};

/// Where a batch starts in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HistoryPos {
    pub segment: u64,
    pub offset: u64,
}

/// One data write of a batch.
#[derive(Clone, Debug)]
pub struct HistoryOp {
    /// `record::OP_INSERT`, `OP_REPLACE`, `OP_UPDATE` or `OP_DELETE`.
    pub code: u8,
    pub collection_id: u64,
    pub record_id: u64,
    /// The new version (inserts, replacements, updates).
    pub document: Option<RawDocumentBuf>,
    /// Updates: the `$v: 2` diff; deletes: `{_id}`.
    pub details: Option<Document>,
    /// The version before this op (replacements, updates, deletes), when the collection kept
    /// pre-images at the time of the write (`changeStreamPreAndPostImages`).
    pub pre_image: Option<RawDocumentBuf>,
}

/// One committed, stamped write batch.
#[derive(Clone, Debug)]
pub struct HistoryBatch {
    /// The first op's timestamp (seconds << 32 | increment); op `i` has `timestamp + i`.
    pub timestamp: u64,
    pub wall_ms: i64,
    pub pos: HistoryPos,
    pub ops: Vec<HistoryOp>,
    /// What the writer noted about the whole batch (a transaction: `{lsid, txnNumber}`).
    pub note: Option<Document>,
}

/// A read's batches and where the next read goes on.
pub struct HistoryRead {
    pub batches: Vec<HistoryBatch>,
    pub next: HistoryPos,
}

impl Engine {
    /// The newest timestamp given to a batch (0: none yet).
    pub fn last_timestamp(&self) -> u64 {
        self.inner.shared.log.last_timestamp()
    }

    /// A watch told whenever more of the log is durable.
    pub fn durable_watch(&self) -> crate::commit::DurableWatch {
        self.inner.shared.commit.subscribe()
    }

    /// The oldest position the history still holds.
    pub fn history_start(&self) -> HistoryPos {
        let usage = self.inner.shared.log.segment_usage();
        let mut first = self.inner.shared.log.current_segment();
        for (id, _, _) in usage.iter().rev() {
            if *id + 1 == first || *id == first {
                first = *id;
            } else if *id < first {
                break;
            }
        }
        HistoryPos {
            segment: first,
            offset: SEGMENT_HEADER_SIZE as u64,
        }
    }

    /// Where the next batch will go: a history read from here sees only later writes.
    pub fn history_end(&self) -> Result<HistoryPos> {
        let (segment, offset, _) = self.inner.shared.log.position()?;
        Ok(HistoryPos { segment, offset })
    }

    /// Whether `pos` still lies inside the history.
    pub fn history_holds(&self, pos: HistoryPos) -> bool {
        pos >= self.history_start()
    }

    /// Up to `max_batches` stamped durable batches from `from` on (about `max_bytes` of
    /// documents at most, but always at least one batch when one is there).
    pub fn history_read(
        &self,
        from: HistoryPos,
        max_batches: usize,
        max_bytes: usize,
    ) -> Result<HistoryRead> {
        let log = &self.inner.shared.log;
        let durable = self.inner.shared.commit.durable_sequence();
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let mut pos = from.max(self.history_start());
        let current = log.current_segment();
        'segments: loop {
            let (file, used) = match log.segment_file(pos.segment) {
                Ok(x) => x,
                Err(_) if pos.segment < current => {
                    pos = HistoryPos {
                        segment: pos.segment + 1,
                        offset: SEGMENT_HEADER_SIZE as u64,
                    };
                    continue;
                }
                Err(e) => return Err(e),
            };
            let name = record::segment_file_name(pos.segment);
            let mut reader = Chunked {
                file,
                used,
                buf: Vec::new(),
                start: pos.offset,
            };
            let mut at = pos.offset;
            let mut batch: Option<Open> = None;
            while at < used {
                let bytes_at = reader.record_at(at, &name)?;
                let r = match record::decode(bytes_at) {
                    Decoded::Record(r) => r,
                    Decoded::End => break,
                    Decoded::Bad(why) => return Err(StorageError::corruption(&name, at, why)),
                };
                if r.sequence > durable {
                    break 'segments;
                }
                let size = r.size as u64;
                let bad = |w: &str| StorageError::corruption(&name, at, w);
                match (r.kind, batch.as_mut()) {
                    (Kind::BatchBegin, _) => batch = Some(Open::new(at)),
                    (Kind::Stamp, Some(open)) => {
                        let s = record::parse_stamp(r.payload).map_err(bad)?;
                        open.codes = s.ops.to_vec();
                        open.details = Document::from_reader(s.details).unwrap_or_default();
                        open.batch = Some(HistoryBatch {
                            timestamp: s.timestamp,
                            wall_ms: s.wall_ms,
                            pos: HistoryPos {
                                segment: pos.segment,
                                offset: open.start,
                            },
                            ops: Vec::with_capacity(s.ops.len()),
                            note: open
                                .details
                                .get_document(crate::write::STAMP_NOTE_KEY)
                                .ok()
                                .cloned(),
                        });
                    }
                    (Kind::Put | Kind::Delete, Some(open)) if open.batch.is_some() => {
                        let data = record::parse_data(r.kind, r.payload).map_err(bad)?;
                        let document = match data.document {
                            Some(d) => Some(
                                RawDocumentBuf::from_bytes(d.to_vec())
                                    .map_err(|e| bad(&e.to_string()))?,
                            ),
                            None => None,
                        };
                        bytes += document.as_ref().map_or(0, |d| d.as_bytes().len());
                        open.push(data.collection_id, data.record_id, document);
                    }
                    (Kind::PreImage, Some(open)) if open.batch.is_some() => {
                        let data = record::parse_data(r.kind, r.payload).map_err(bad)?;
                        let image = data
                            .document
                            .map(|d| RawDocumentBuf::from_bytes(d.to_vec()))
                            .transpose()
                            .map_err(|e| bad(&e.to_string()))?;
                        bytes += image.as_ref().map_or(0, |d| d.as_bytes().len());
                        open.pre_image = image;
                    }
                    (Kind::Catalog, Some(open)) if open.batch.is_some() => {
                        let i = open.batch.as_ref().map_or(0, |b| b.ops.len());
                        let id = open
                            .details
                            .get_document(i.to_string())
                            .ok()
                            .and_then(|d| d.get_i64("id").ok())
                            .unwrap_or(0);
                        open.push(id as u64, 0, None);
                    }
                    (Kind::BatchEnd, _) => {
                        if let Some(mut o) = batch.take() {
                            // Codes past the records describe the batch as a whole.
                            while o
                                .batch
                                .as_ref()
                                .is_some_and(|b| b.ops.len() < o.codes.len())
                            {
                                o.push(0, 0, None);
                            }
                            if let Some(b) = o.batch {
                                out.push(b);
                            }
                        }
                        pos.offset = at + size;
                        if out.len() >= max_batches || bytes >= max_bytes {
                            break 'segments;
                        }
                    }
                    _ => {}
                }
                at += size;
                if batch.is_none() {
                    pos.offset = at;
                }
            }
            if pos.segment >= current {
                break;
            }
            pos = HistoryPos {
                segment: pos.segment + 1,
                offset: SEGMENT_HEADER_SIZE as u64,
            };
        }
        Ok(HistoryRead {
            batches: out,
            next: pos,
        })
    }

    /// The collection with this id, if it still exists.
    pub fn collection_by_id(&self, id: u64) -> Option<std::sync::Arc<crate::Collection>> {
        self.inner.catalog.read().ok()?.by_id.get(&id).cloned()
    }
}

/// A batch being read: its begin offset, and once its stamp is read, the batch.
struct Open {
    start: u64,
    codes: Vec<u8>,
    details: Document,
    batch: Option<HistoryBatch>,
    /// A pre-image read, for the next data record.
    pre_image: Option<RawDocumentBuf>,
}

impl Open {
    fn new(start: u64) -> Open {
        Open {
            start,
            codes: Vec::new(),
            details: Document::new(),
            batch: None,
            pre_image: None,
        }
    }

    fn push(&mut self, collection_id: u64, record_id: u64, document: Option<RawDocumentBuf>) {
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let i = b.ops.len();
        b.ops.push(HistoryOp {
            code: self.codes.get(i).copied().unwrap_or(record::OP_REPLACE),
            collection_id,
            record_id,
            document,
            details: self.details.get_document(i.to_string()).ok().cloned(),
            pre_image: self.pre_image.take(),
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::record::{OP_COMMAND, OP_DELETE, OP_INSERT, OP_REPLACE, OP_UPDATE};
    use crate::{Engine, EngineOptions, WriteOp};
    use bson::{Document, rawdoc};

    fn open(dir: &std::path::Path) -> Engine {
        let opts = EngineOptions {
            segment_size_bytes: 64 << 10,
            background_compaction: false,
            history_bytes: Some(1 << 20),
            ..EngineOptions::default()
        };
        Engine::open(dir, opts).expect("open")
    }

    #[test]
    fn stamped_writes_read_back_in_order_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut last = 0;
        for round in 0..2 {
            let e = open(dir.path());
            assert!(e.last_timestamp() >= last, "clock went back");
            let c = match e.collection("t", "c") {
                Some(c) => c,
                None => e.create_collection("t", "c", Document::new()).unwrap(),
            };
            let t = c
                .write(vec![WriteOp::Insert(
                    rawdoc! { "_id": round, "a": 1 }.into(),
                )])
                .unwrap();
            t.wait_durable_blocking().unwrap();
            let rid = t.record_ids[0];
            assert!(t.timestamp > last);
            let t2 = c
                .write(vec![WriteOp::Update(rid, rawdoc! { "_id": round, "a": 2 })])
                .unwrap();
            let t3 = c
                .write(vec![
                    WriteOp::Replace(rid, rawdoc! { "_id": round, "b": 1 }),
                    WriteOp::Delete(rid),
                ])
                .unwrap();
            t3.wait_durable_blocking().unwrap();
            assert!(t.timestamp < t2.timestamp && t2.timestamp < t3.timestamp);
            last = t3.timestamp;
            let read = e.history_read(e.history_start(), 100, 1 << 20).unwrap();
            let all: Vec<u8> = read
                .batches
                .iter()
                .flat_map(|b| b.ops.iter().map(|o| o.code))
                .collect();
            // The collection's create is in the history too.
            assert_eq!(all[0], OP_COMMAND);
            let ops: Vec<u8> = all.into_iter().filter(|c| *c != OP_COMMAND).collect();
            let one = [OP_INSERT, OP_UPDATE, OP_REPLACE, OP_DELETE];
            assert_eq!(ops.len(), one.len() * (round as usize + 1));
            assert_eq!(&ops[ops.len() - 4..], &one);
            let b = &read.batches[read.batches.len() - 1];
            assert_eq!(b.timestamp + 1, t3.timestamp);
            assert_eq!(
                b.ops[1].details.as_ref().unwrap(),
                &bson::doc! { "_id": round }
            );
            let upd = &read.batches[read.batches.len() - 2].ops[0];
            assert_eq!(
                upd.details.as_ref().unwrap(),
                &bson::doc! { "u": { "a": 2 } }
            );
            // Reading on from the end finds nothing new.
            let again = e.history_read(read.next, 100, 1 << 20).unwrap();
            assert!(again.batches.is_empty());
            if round == 0 {
                e.close().unwrap();
            }
        }
    }

    #[test]
    fn pre_images_follow_the_collection_option_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let start = e.history_end().unwrap();
        let kept = e
            .create_collection(
                "t",
                "kept",
                bson::doc! { "changeStreamPreAndPostImages": { "enabled": true } },
            )
            .unwrap();
        let plain = e.create_collection("t", "plain", Document::new()).unwrap();
        for c in [&kept, &plain] {
            let t = c
                .write(vec![WriteOp::Insert(rawdoc! { "_id": 1, "v": 0 }.into())])
                .unwrap();
            let rid = t.record_ids[0];
            c.write(vec![
                WriteOp::Update(rid, rawdoc! { "_id": 1, "v": 1 }),
                // A second op on the same document in one batch sees the first's version.
                WriteOp::Replace(rid, rawdoc! { "_id": 1, "w": 2 }),
            ])
            .unwrap();
            c.write(vec![WriteOp::Delete(rid)])
                .unwrap()
                .wait_durable_blocking()
                .unwrap();
        }
        // Turned off: later writes keep none.
        e.set_collection_options("t", "kept", Document::new())
            .unwrap();
        let t = kept
            .write(vec![WriteOp::Insert(rawdoc! { "_id": 2 }.into())])
            .unwrap();
        kept.write(vec![WriteOp::Delete(t.record_ids[0])])
            .unwrap()
            .wait_durable_blocking()
            .unwrap();
        e.close().unwrap();
        let e = open(dir.path());
        assert_eq!(e.collection("t", "kept").unwrap().count(), 0);
        let read = e.history_read(start, 100, 1 << 20).unwrap();
        let images = |id: u64| -> Vec<Option<Document>> {
            read.batches
                .iter()
                .flat_map(|b| &b.ops)
                .filter(|o| o.collection_id == id && o.code != OP_COMMAND)
                .map(|o| {
                    o.pre_image
                        .as_ref()
                        .map(|d| Document::try_from(d.as_ref()).unwrap())
                })
                .collect()
        };
        assert_eq!(
            images(kept.id),
            vec![
                None,
                Some(bson::doc! { "_id": 1, "v": 0 }),
                Some(bson::doc! { "_id": 1, "v": 1 }),
                Some(bson::doc! { "_id": 1, "w": 2 }),
                None,
                None,
            ]
        );
        assert_eq!(images(plain.id), vec![None; 4]);
    }

    #[test]
    fn catalog_changes_are_command_ops_with_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let start = e.history_end().unwrap();
        for n in ["a", "b", "c"] {
            e.create_collection("d", n, Document::new()).unwrap();
        }
        e.rename_collection("d", "a", "d", "b", true).unwrap();
        e.drop_database("d").unwrap();
        e.close().unwrap();
        // Read after a reopen: the notes come from the log.
        let e = open(dir.path());
        let read = e.history_read(start, 100, 1 << 20).unwrap();
        let notes: Vec<(String, String)> = read
            .batches
            .iter()
            .flat_map(|b| &b.ops)
            .map(|o| {
                assert_eq!(o.code, OP_COMMAND);
                let d = o.details.as_ref().unwrap();
                (
                    d.get_str("op").unwrap().to_string(),
                    d.get_str("coll").unwrap_or("").to_string(),
                )
            })
            .collect();
        let want = [
            ("create", "a"),
            ("create", "b"),
            ("create", "c"),
            ("dropTarget", "b"),
            ("rename", "a"),
            ("drop", "b"),
            ("drop", "c"),
            ("dropDatabase", ""),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(notes, want);
        // Every op has its own timestamp, the batch-wide dropDatabase too.
        let last = read.batches.last().unwrap();
        assert_eq!(last.ops.len(), 3);
        assert_eq!(last.timestamp + 2, e.last_timestamp());
    }
    #[test]
    fn index_and_option_changes_are_noted_with_their_specs() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let start = e.history_end().unwrap();
        e.create_collection("d", "c", bson::doc! { "capped": true, "size": 4096_i64 })
            .unwrap();
        let spec = crate::IndexSpec {
            name: "t_1".into(),
            key: bson::doc! { "t": 1 },
            ..crate::IndexSpec::default()
        };
        e.create_index("d", "c", spec, &|_, _| {}).unwrap();
        e.modify_index("d", "c", "t_1", &|s| s.hidden = true)
            .unwrap();
        e.set_collection_options("d", "c", bson::doc! { "capped": true, "size": 8192_i64 })
            .unwrap();
        e.drop_index("d", "c", "t_1").unwrap();
        e.close().unwrap();
        let e = open(dir.path());
        let read = e.history_read(start, 100, 1 << 20).unwrap();
        let notes: Vec<Document> = read
            .batches
            .iter()
            .flat_map(|b| &b.ops)
            .map(|o| o.details.clone().unwrap())
            .collect();
        let ops: Vec<&str> = notes.iter().map(|n| n.get_str("op").unwrap()).collect();
        assert_eq!(
            ops,
            [
                "create",
                "createIndexes",
                "collMod",
                "collMod",
                "dropIndexes"
            ]
        );
        assert_eq!(
            notes[0]
                .get_document("options")
                .unwrap()
                .get_i64("size")
                .ok(),
            Some(4096)
        );
        let built = notes[1].get_document("spec").unwrap();
        assert_eq!(built.get_str("name").ok(), Some("t_1"));
        assert_eq!(
            notes[2]
                .get_document("index")
                .unwrap()
                .get_bool("hidden")
                .ok(),
            Some(true)
        );
        assert!(
            notes[2]
                .get_document("oldIndex")
                .unwrap()
                .get("hidden")
                .is_none()
        );
        assert_eq!(
            notes[3]
                .get_document("oldOptions")
                .unwrap()
                .get_i64("size")
                .ok(),
            Some(4096)
        );
        assert_eq!(
            notes[3]
                .get_document("options")
                .unwrap()
                .get_i64("size")
                .ok(),
            Some(8192)
        );
        assert_eq!(
            notes[4].get_document("spec").unwrap().get_str("name").ok(),
            Some("t_1")
        );
        assert!(notes.iter().all(|n| n.get_str("coll").ok() == Some("c")));
    }
}
