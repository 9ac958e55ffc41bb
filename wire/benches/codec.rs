//! Measures the codec's throughput on the shapes a server sees most: an insert batch arriving
//! (plain and compressed) and a find reply built by splicing stored documents.
//! Run: `cargo bench -p cairn-wire --bench codec`.

use bson::{RawDocumentBuf, rawdoc};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use wire::{Compressor, DocumentSequence, MsgWriter, OpMsg, decode, encode_msg};

const BATCH_DOCUMENT_COUNT: i32 = 1000;

fn stored(i: i32) -> RawDocumentBuf {
    rawdoc! {
        "_id": i, "name": format!("user{i}"), "age": i % 90, "tags": ["a", "b", "c"],
        "address": { "city": "Lyon", "zip": "69001", "geo": [4.83, 45.76] }, "score": f64::from(i) * 1.5,
    }
}

fn insert_batch() -> OpMsg {
    let documents = (0..BATCH_DOCUMENT_COUNT)
        .map(|i| stored(i).into())
        .collect();
    OpMsg {
        flags: 0,
        body: rawdoc! { "insert": "users", "ordered": true, "$db": "app" },
        sequences: vec![DocumentSequence {
            identifier: "documents".into(),
            documents,
        }],
    }
}

fn decode_insert(c: &mut Criterion) {
    let msg = insert_batch();
    let mut group = c.benchmark_group("decode_insert_1000_docs");
    for compressor in [
        None,
        Some(Compressor::Snappy),
        Some(Compressor::Zlib),
        Some(Compressor::Zstd),
    ] {
        let frame = encode_msg(1, 0, &msg, compressor).expect("encode");
        let plain_len = encode_msg(1, 0, &msg, None).expect("encode").len();
        group.throughput(Throughput::Bytes(plain_len as u64));
        let name = compressor.map_or("plain", Compressor::name);
        group.bench_function(name, |b| {
            b.iter(|| decode(black_box(&frame)).expect("decode"))
        });
    }
    group.finish();
}

fn encode_reply(c: &mut Criterion) {
    let docs: Vec<RawDocumentBuf> = (0..101).map(stored).collect();
    let mut group = c.benchmark_group("encode_find_reply_101_docs");
    for compressor in [None, Some(Compressor::Snappy), Some(Compressor::Zstd)] {
        let name = compressor.map_or("plain", Compressor::name);
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut w = MsgWriter::new(2, 1, 0);
                let body = w.body();
                body.begin_document("cursor").begin_array("firstBatch");
                for doc in &docs {
                    body.append_raw_document("", doc);
                }
                body.end()
                    .append_i64("id", 0)
                    .append_str("ns", "app.users")
                    .end()
                    .append_f64("ok", 1.0);
                w.finish(compressor).expect("finish")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decode_insert, encode_reply);
criterion_main!(benches);
