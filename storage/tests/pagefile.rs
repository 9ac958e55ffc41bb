//! Proves the page file's open rules: a clean shutdown leaves nothing to replay; a torn or
//! corrupt newest meta slot falls back to the other one (its pages and the log after it are
//! intact, so nothing acknowledged is lost); two damaged slots refuse to open naming the file;
//! a damaged page named by the checkpoint is an error at read, never wrong data. How: writes on
//! the simulated backend, checkpoints, then damage to chosen bytes of `pages.db` and reopen.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bson::{Document, doc};
use common::{all_docs, raw, small_opts};
use storage::pager::{META_SLOTS, Meta, PAGE_FILE_NAME, Slot};
use storage::sim::SimBackend;
use storage::{Engine, IndexSpec, StorageError, WriteOp};

fn open(sim: &SimBackend) -> storage::Result<Engine> {
    Engine::open_with_backend(Arc::new(sim.clone()), small_opts())
}

/// Inserts `n` documents starting at `from`, recording them in `model`.
fn insert(engine: &Engine, model: &mut BTreeMap<u64, Document>, from: i64, n: i64) {
    let c = engine.collection("db", "c").expect("collection");
    for i in from..from + n {
        let d = doc! {"_id": i, "v": i % 13, "pad": "p".repeat(200)};
        let t = c
            .write(vec![WriteOp::Insert(raw(&d).into())])
            .expect("insert");
        t.wait_durable_blocking().expect("durable");
        model.insert(t.record_ids[0], d);
    }
}

/// Two checkpoints with writes between and after them, then a crash: returns the image and
/// the model of everything acknowledged.
fn two_checkpoints() -> (SimBackend, BTreeMap<u64, Document>) {
    let live = SimBackend::new();
    let mut model = BTreeMap::new();
    let engine = open(&live).expect("open");
    engine
        .create_collection("db", "c", doc! {})
        .expect("create");
    let spec = IndexSpec {
        name: "v_1".into(),
        key: doc! {"v": 1},
        ..IndexSpec::default()
    };
    engine
        .create_index("db", "c", spec, &|_, _| {})
        .expect("index");
    insert(&engine, &mut model, 0, 300);
    engine.checkpoint().expect("first");
    insert(&engine, &mut model, 300, 300);
    engine.checkpoint().expect("second");
    insert(&engine, &mut model, 600, 50);
    live.crash();
    drop(engine);
    (live.crash_image(0.0), model)
}

/// The meta slot holding the newest checkpoint.
fn newest_slot(sim: &SimBackend) -> u64 {
    let bytes = sim.file_bytes(PAGE_FILE_NAME).expect("page file");
    (0..u64::from(META_SLOTS))
        .filter_map(
            |s| match Meta::decode(&bytes[s as usize * 4096..][..4096]) {
                Slot::Valid(m) => Some((m.checkpoint, s)),
                _ => None,
            },
        )
        .max()
        .expect("a valid slot")
        .1
}

fn check_reopened(sim: &SimBackend, model: &BTreeMap<u64, Document>) {
    let engine = open(sim).expect("falls back and opens");
    let c = engine.collection("db", "c").expect("collection");
    assert_eq!(&all_docs(&c), model);
    let report = c.validate().expect("validate");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        engine
            .check_page_accounting()
            .expect("accounting")
            .is_empty()
    );
    // And it goes on: a write, a checkpoint, a clean reopen.
    c.write(vec![WriteOp::Insert(raw(&doc! {"_id": -1}).into())])
        .expect("write")
        .wait_durable_blocking()
        .expect("durable");
    engine.close().expect("close");
    let engine = open(sim).expect("reopen");
    assert_eq!(
        engine.collection("db", "c").expect("c").count() as usize,
        model.len() + 1
    );
}

#[test]
fn clean_shutdown_leaves_nothing_to_replay() {
    let sim = SimBackend::new();
    let mut model = BTreeMap::new();
    let engine = open(&sim).expect("open");
    engine
        .create_collection("db", "c", doc! {})
        .expect("create");
    insert(&engine, &mut model, 0, 200);
    engine.close().expect("close");
    drop(engine);
    let engine = open(&sim).expect("reopen");
    assert_eq!(engine.stats().open_replayed_records, 0);
    assert_eq!(all_docs(&engine.collection("db", "c").expect("c")), model);
}

#[test]
fn corrupt_newest_meta_falls_back_to_the_other_slot() {
    for bit in [0u64, 17, 200, 4095 * 8] {
        let (sim, model) = two_checkpoints();
        let slot = newest_slot(&sim);
        assert!(sim.flip_bit(PAGE_FILE_NAME, slot * 4096 + bit / 8, (bit % 8) as u8));
        check_reopened(&sim, &model);
    }
}

#[test]
fn torn_newest_meta_falls_back_to_the_other_slot() {
    for keep in [0usize, 8, 40, 70] {
        let (sim, model) = two_checkpoints();
        let slot = newest_slot(&sim);
        let mut bytes = sim.file_bytes(PAGE_FILE_NAME).expect("bytes");
        // Only the first `keep` bytes of the slot made it to disk.
        for b in &mut bytes[slot as usize * 4096 + keep..(slot as usize + 1) * 4096] {
            *b = 0;
        }
        let image = SimBackend::new();
        write_file(&image, &sim, PAGE_FILE_NAME, &bytes);
        check_reopened(&image, &model);
    }
}

/// A copy of `from` with file `name` replaced by `bytes`.
fn write_file(to: &SimBackend, from: &SimBackend, name: &str, bytes: &[u8]) {
    use storage::Backend;
    for n in from.list().expect("list") {
        let data = if n == name {
            bytes.to_vec()
        } else {
            from.file_bytes(&n).expect("bytes")
        };
        let f = to.create(&n).expect("create");
        f.write_at(0, &data).expect("write");
        f.sync().expect("sync");
    }
    to.sync_dir().expect("sync dir");
}

#[test]
fn two_damaged_slots_refuse_to_open() {
    let (sim, _) = two_checkpoints();
    for slot in 0..u64::from(META_SLOTS) {
        assert!(sim.flip_bit(PAGE_FILE_NAME, slot * 4096 + 30, 1));
    }
    match open(&sim) {
        Err(StorageError::Corruption { segment, .. }) => assert_eq!(segment, PAGE_FILE_NAME),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened with both meta slots damaged"),
    }
}

#[test]
fn a_damaged_tree_page_is_an_error_not_data() {
    let (sim, _) = two_checkpoints();
    let pages = sim.file_bytes(PAGE_FILE_NAME).expect("bytes").len() / 4096;
    let mut errors = 0;
    for page in META_SLOTS as usize..pages {
        let image = sim.crash_image(0.0);
        assert!(image.flip_bit(PAGE_FILE_NAME, (page * 4096 + 100) as u64, 3));
        // A free page's damage is harmless; a used one's must surface as corruption.
        match open(&image) {
            Err(StorageError::Corruption { segment, .. }) => {
                assert_eq!(segment, PAGE_FILE_NAME);
                errors += 1;
            }
            Err(e) => panic!("page {page}: {e}"),
            Ok(engine) => {
                let c = engine.collection("db", "c").expect("collection");
                match c.validate() {
                    Ok(r) if r.problems.is_empty() => {}
                    Ok(r) => {
                        assert!(
                            r.problems.iter().any(|p| p.contains(PAGE_FILE_NAME)),
                            "{:?}",
                            r.problems
                        );
                        errors += 1;
                    }
                    Err(StorageError::Corruption { segment, .. }) => {
                        assert_eq!(segment, PAGE_FILE_NAME);
                        errors += 1;
                    }
                    Err(e) => panic!("page {page}: {e}"),
                }
            }
        }
    }
    assert!(errors > 5, "damage found in {errors} pages");
}
