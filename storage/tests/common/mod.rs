//! Helpers shared by the storage integration tests: seeds, documents, model comparison.
#![allow(dead_code)]

use std::collections::BTreeMap;

use bson::{Document, RawDocumentBuf};
use rand::SeedableRng;
use rand::rngs::StdRng;
use storage::{Collection, Direction, EngineOptions};

/// The seed from `CAIRN_SEED`, or a fresh one; printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("{test}: CAIRN_SEED={seed}");
    seed
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

pub fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("document encodes")
}

/// Frames of the pool in `small_opts`: a tiny cache, so that eviction, page writes and reads
/// back happen every few operations.
pub const SMALL_CACHE_PAGES: u64 = 16;

pub fn small_opts() -> EngineOptions {
    EngineOptions {
        segment_size_bytes: 16 << 10,
        background_compaction: false,
        cache_size_bytes: SMALL_CACHE_PAGES * (4096 + storage::pager::FRAME_OVERHEAD_BYTES),
        // Checkpoints come from the tests (and from log volume), not from the clock.
        checkpoint_interval_ms: 0,
        checkpoint_log_bytes: 64 << 10,
        ..EngineOptions::default()
    }
}

/// Every document of `c` in RecordId order, read in pages.
pub fn all_docs(c: &Collection) -> BTreeMap<u64, Document> {
    try_all_docs(c).expect("scan")
}

/// `all_docs`, or the scan's error (a simulated backend that crashed fails the page reads).
#[allow(dead_code)]
pub fn try_all_docs(c: &Collection) -> storage::Result<BTreeMap<u64, Document>> {
    let mut out = BTreeMap::new();
    let mut after = None;
    loop {
        let page = c.scan(Direction::Forward, after, 37)?;
        let Some(last) = page.last() else { break };
        after = Some(last.0);
        for (rid, d) in page {
            out.insert(rid, Document::try_from(d).expect("stored document decodes"));
        }
    }
    Ok(out)
}
