//! Proves the recovery rule: a torn tail is truncated and the log opens; a flipped bit anywhere
//! before the last record is refused with the segment file and offset (at open when the log is
//! scanned, at read time for segments a checkpoint spares from scanning). How: a seeded workload on
//! the simulated backend that crashes (no final checkpoint), then truncation or one bit flip at a
//! random offset of what was durable, then reopen.

mod common;

use std::sync::Arc;

use bson::doc;
use common::{all_docs, raw, rng, seed, small_opts};
use rand::Rng;
use storage::record::{self, Decoded, SEGMENT_HEADER_SIZE};
use storage::sim::SimBackend;
use storage::{Backend, Direction, Engine, StorageError, WriteOp};

const ROUNDS: usize = 60;

/// Writes a few hundred documents in batches, with a checkpoint halfway when asked, then
/// crashes; returns the restarted directory and its segment names, oldest first.
fn populate(checkpoint: bool) -> (SimBackend, Vec<String>) {
    let live = SimBackend::new();
    let engine = Engine::open_with_backend(Arc::new(live.clone()), small_opts()).expect("open");
    let c = engine
        .create_collection("db", "c", doc! {})
        .expect("create");
    for b in 0..60 {
        let ops = (0..5)
            .map(|i| WriteOp::Insert(raw(&doc! {"_id": b * 10 + i, "pad": "z".repeat(150)}).into()))
            .collect();
        c.write(ops).expect("write");
        if checkpoint && b == 40 {
            engine.checkpoint().expect("checkpoint");
        }
    }
    engine.flush().expect("flush");
    live.crash();
    drop(engine);
    let sim = live.crash_image(0.0);
    let mut names: Vec<String> = sim
        .list()
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".seg"))
        .collect();
    names.sort();
    (sim, names)
}

/// Offsets of the records of a segment image.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = SEGMENT_HEADER_SIZE;
    while let Decoded::Record(r) = record::decode(&bytes[pos..]) {
        out.push(pos);
        pos += r.size;
    }
    out.push(pos);
    out
}

#[test]
fn torn_tail_is_truncated() {
    let mut rng = rng(seed("torn_tail_is_truncated"));
    for _ in 0..ROUNDS / 3 {
        let (sim, names) = populate(rng.random_bool(0.5));
        let last = names.last().expect("a segment");
        let bytes = sim.file_bytes(last).expect("bytes");
        let offs = record_offsets(&bytes);
        let end = *offs.last().expect("end");
        // The last few records: written after any checkpoint, as a torn tail always is.
        let start = offs[offs.len().saturating_sub(6)];
        let cut = rng.random_range(start..end);
        sim.truncate(last, cut);
        let engine = Engine::open_with_backend(Arc::new(sim.clone()), small_opts())
            .expect("torn tail recovers");
        let c = engine.collection("db", "c").expect("coll");
        let n = all_docs(&c).len();
        assert!(
            (290..=300).contains(&n),
            "lost at most the torn batches, kept {n}"
        );
        assert_eq!(n % 5, 0, "batches are whole");
        c.write(vec![WriteOp::Insert(raw(&doc! {"_id": -1}).into())])
            .expect("write after truncation");
        engine.close().expect("close");
        let engine =
            Engine::open_with_backend(Arc::new(sim.clone()), small_opts()).expect("reopen");
        assert_eq!(
            engine.collection("db", "c").expect("coll").count() as usize,
            n + 1
        );
    }
}

/// With a checkpoint, old segments are not rescanned at open; damage must then surface when a
/// document is read (each read checks its record's crc), never as wrong data.
fn check_read_path(sim: &SimBackend, seg: &str, at: usize) {
    let engine = match Engine::open_with_backend(Arc::new(sim.clone()), small_opts()) {
        Err(StorageError::Corruption { segment, .. }) => {
            assert_eq!(segment, seg);
            return;
        }
        Err(other) => panic!("flip at {seg}:{at} gave {other}"),
        Ok(e) => e,
    };
    let c = engine.collection("db", "c").expect("coll");
    let mut after = None;
    let mut seen = 0;
    loop {
        match c.scan(Direction::Forward, after, 50) {
            Ok(page) if page.is_empty() => break,
            Ok(page) => {
                for (rid, d) in &page {
                    assert_eq!(
                        d.get_str("pad").expect("pad"),
                        "z".repeat(150),
                        "doc {rid} intact"
                    );
                    seen += 1;
                }
                after = page.last().map(|p| p.0);
            }
            Err(StorageError::Corruption {
                segment, offset, ..
            }) => {
                assert_eq!(segment, seg);
                assert!(offset as usize <= at);
                return;
            }
            Err(other) => panic!("flip at {seg}:{at}: read gave {other}"),
        }
    }
    assert_eq!(seen, 300, "flip at {seg}:{at} hit no live document");
}

#[test]
fn bit_flip_is_reported_with_segment_and_offset() {
    let mut rng = rng(seed("bit_flip_is_reported"));
    for _ in 0..ROUNDS {
        let keep_checkpoint = rng.random_bool(0.5);
        let (sim, names) = populate(keep_checkpoint);
        let seg = &names[rng.random_range(0..names.len())];
        let bytes = sim.file_bytes(seg).expect("bytes");
        let offs = record_offsets(&bytes);
        let is_last = seg == names.last().expect("last");
        // In the last segment, damage to the final record is indistinguishable from a torn tail.
        let limit = if is_last {
            offs[offs.len().saturating_sub(2)]
        } else {
            *offs.last().expect("end")
        };
        if limit == 0 {
            continue;
        }
        let at = rng.random_range(0..limit);
        assert!(sim.flip_bit(seg, at as u64, rng.random_range(0..8)));
        if keep_checkpoint {
            check_read_path(&sim, seg, at);
            continue;
        }
        match Engine::open_with_backend(Arc::new(sim.clone()), small_opts()) {
            Err(StorageError::Corruption {
                segment,
                offset,
                reason,
            }) => {
                assert_eq!(&segment, seg, "names the damaged segment ({reason})");
                assert!(
                    offset as usize <= at,
                    "offset {offset} at or before the flip {at}"
                );
                let msg = StorageError::Corruption {
                    segment: segment.clone(),
                    offset,
                    reason,
                }
                .to_string();
                assert!(msg.contains(seg.as_str()) && msg.contains(&offset.to_string()));
            }
            Err(other) => panic!("flip at {seg}:{at} gave {other}"),
            Ok(_) => panic!("flip at {seg}:{at} was not detected"),
        }
    }
}
