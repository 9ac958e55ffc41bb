//! Writes tried in a no-wait scope (`storage::nowait`): a write whose locks and pages are at hand
//! goes through and settles the scope; one that would wait is refused before its batch reaches
//! the log and leaves nothing behind (no record, no index entry, a sound collection, a log that
//! still takes writes); after a refusal no write starts in that scope.

use bson::{RawDocumentBuf, doc};
use storage::{Engine, EngineOptions, IndexSpec, WriteOp, nowait};

fn raw(d: bson::Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&d).expect("encodes")
}

fn insert(i: i64) -> WriteOp<'static> {
    // Spread keys (a multiplicative hash of i) so that the index's leaves are many and cold.
    let a = i.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64);
    WriteOp::Insert(raw(doc! {"_id": i, "a": a, "pad": "x".repeat(200)}).into())
}

fn sound(c: &storage::Collection) {
    let report = c.validate().expect("validate");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_write_with_its_pages_at_hand_stands_and_settles_the_scope() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    let c = e.create_collection("db", "c", doc! {}).unwrap();
    c.write(vec![insert(1)]).unwrap();
    let ticket = {
        let _scope = nowait::enter_write();
        let t = c.write(vec![insert(2)]).expect("cached write");
        assert!(nowait::settled(), "the append settled the scope");
        assert!(!nowait::active(), "nothing more is refused");
        assert!(!nowait::refused());
        assert!(nowait::in_scope());
        t
    };
    assert!(!nowait::in_scope());
    ticket.wait_durable_blocking().unwrap();
    assert_eq!(c.count(), 2);
    sound(&c);
}

#[test]
fn a_read_scope_refuses_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    let c = e.create_collection("db", "c", doc! {}).unwrap();
    {
        let _scope = nowait::enter();
        assert!(c.write(vec![insert(1)]).is_err());
        assert!(nowait::refused() && !nowait::settled());
    }
    assert_eq!(c.count(), 0);
}

#[test]
fn after_a_refusal_no_write_starts_in_the_scope() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    let c = e.create_collection("db", "c", doc! {}).unwrap();
    {
        let _scope = nowait::enter_write();
        let _ = nowait::refuse();
        assert!(c.write(vec![insert(1)]).is_err());
        assert!(!nowait::settled());
    }
    assert_eq!(c.count(), 0);
    c.write(vec![insert(1)]).unwrap();
    assert_eq!(c.count(), 1);
}

#[test]
fn creating_a_collection_is_refused_in_a_scope() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    {
        let _scope = nowait::enter_write();
        assert!(e.create_collection("db", "c", doc! {}).is_err());
        assert!(nowait::refused());
    }
    assert!(e.collection("db", "c").is_none());
    e.create_collection("db", "c", doc! {}).unwrap();
}

/// Index pages neither in the buffer pool nor in the page cache: the insert is refused at the
/// reads before it changes anything, and the same insert outside the scope then succeeds.
#[test]
fn a_write_whose_index_pages_are_cold_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions {
        // A pool of a few dozen pages: most of the index is not in it.
        cache_size_bytes: 256 * 1024,
        ..EngineOptions::default()
    };
    let e = Engine::open(dir.path(), opts).unwrap();
    let c = e.create_collection("db", "c", doc! {}).unwrap();
    let spec = IndexSpec {
        name: "a_1".into(),
        key: doc! {"a": 1},
        ..IndexSpec::default()
    };
    e.create_index("db", "c", spec, &|_, _| {}).unwrap();
    let n = 20_000;
    for chunk in (0..n).collect::<Vec<i64>>().chunks(500) {
        c.write(chunk.iter().map(|&i| insert(i)).collect()).unwrap();
    }
    e.checkpoint().unwrap();
    let pages = std::fs::File::open(dir.path().join("pages.db")).unwrap();
    let mut refused = 0;
    for i in n..n + 20 {
        rustix::fs::fadvise(&pages, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let before = c.count();
        let attempt = {
            let _scope = nowait::enter_write();
            let out = c.write(vec![insert(i)]);
            (out.is_ok(), nowait::refused(), nowait::settled())
        };
        match attempt {
            (true, false, true) => assert_eq!(c.count(), before + 1),
            (false, true, false) => {
                refused += 1;
                assert_eq!(c.count(), before, "a refused write left a record");
                // Outside a scope the same write goes through: the log was not poisoned.
                c.write(vec![insert(i)]).unwrap();
            }
            other => panic!("a write ended as (ok, refused, settled) = {other:?}"),
        }
    }
    if !nowait::supported() {
        eprintln!("this filesystem does not support RWF_NOWAIT reads");
        return;
    }
    assert!(refused > 0, "no insert of 20 met a cold index page");
    assert_eq!(c.count(), (n + 20) as u64);
    sound(&c);
}
