//! Recovery from damaged files: a data directory written by a small workload (inserts,
//! replacements, deletes, an index, a checkpoint, more writes after it) has bytes overwritten
//! where the input says; opening it then either fails with a storage error or yields an engine
//! whose collections validate and scan without a panic.
#![no_main]

use bson::doc;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use storage::sim::SimBackend;
use storage::{Backend, Direction, Engine, EngineOptions, IndexSpec, WriteOp};

fn options() -> EngineOptions {
    EngineOptions {
        segment_size_bytes: 16 << 10,
        background_compaction: false,
        preallocate_segments: false,
        checkpoint_interval_ms: 0,
        checkpoint_log_bytes: 1 << 30,
        ..EngineOptions::default()
    }
}

fn raw(d: &bson::Document) -> bson::RawDocumentBuf {
    bson::RawDocumentBuf::try_from(d).expect("encodes")
}

/// The undamaged directory, made once per fuzzing process.
fn base() -> &'static SimBackend {
    static BASE: OnceLock<SimBackend> = OnceLock::new();
    BASE.get_or_init(|| {
        let sim = SimBackend::new();
        let engine = Engine::open_with_backend(Arc::new(sim.clone()), options()).expect("open");
        let c = engine
            .create_collection("db", "c", doc! {})
            .expect("create");
        let spec = IndexSpec {
            name: "u_1".into(),
            key: doc! {"u": 1},
            unique: true,
            ..IndexSpec::default()
        };
        engine
            .create_index("db", "c", spec, &|_, _| {})
            .expect("index");
        let mut rids = Vec::new();
        for round in 0..6i64 {
            let ops = (0..8)
                .map(|i| {
                    WriteOp::Insert(raw(
                        &doc! {"_id": round * 8 + i, "u": round * 8 + i, "p": "x".repeat(40)},
                    ))
                })
                .collect();
            let t = c.write(ops).expect("write");
            rids.extend(t.record_ids.clone());
            t.wait_durable_blocking().expect("durable");
            if round == 2 {
                engine.checkpoint().expect("checkpoint");
            }
        }
        let t = c
            .write(vec![
                WriteOp::Replace(rids[3], raw(&doc! {"_id": 3i64, "u": 1000i64})),
                WriteOp::Delete(rids[5]),
            ])
            .expect("write");
        t.wait_durable_blocking().expect("durable");
        drop(engine);
        sim.crash_image(0.0)
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let sim = base().crash_image(0.0);
    let mut names = sim.list().expect("list");
    names.sort();
    if names.is_empty() {
        return;
    }
    let name = &names[usize::from(data[0]) % names.len()];
    let file = sim.open(name).expect("open file");
    let len = file.len().expect("len");
    if len == 0 {
        return;
    }
    let offset = u64::from(u32::from_le_bytes([data[1], data[2], data[3], data[4]])) % len;
    file.write_at(offset, &data[5..]).expect("patch");
    let Ok(engine) = Engine::open_with_backend(Arc::new(sim), options()) else {
        return;
    };
    for info in engine.collections("db") {
        let Some(c) = engine.collection("db", &info.name) else {
            continue;
        };
        let _ = c.validate();
        let mut after = None;
        while let Ok(page) = c.scan(Direction::Forward, after, 16) {
            let Some(last) = page.last() else { break };
            after = Some(last.0);
        }
    }
});
