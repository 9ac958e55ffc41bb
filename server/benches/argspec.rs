//! The cost argument validation adds to insertOne and findOne by `_id`, measured on the parse
//! path a command takes before it reaches storage: the body's bytes decoded into a `Document`,
//! its fields checked, its options read. `before` is the hand-rolled check (an allowed-names
//! list, then the typed readers), `after` the declarative table (`argspec::check`) then the
//! same readers; both run side by side in one process. Bodies are what the Rust driver sends
//! (the inserted documents travel in a document sequence, outside the body).

use bson::{Document, doc, oid::ObjectId, spec::BinarySubtype};
use cairn_server::commands::{args, argspec};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn session() -> Document {
    doc! { "id": bson::Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] } }
}

fn insert_body() -> Vec<u8> {
    let body = doc! { "insert": "c", "ordered": true, "$db": "bench", "lsid": session() };
    bson::RawDocumentBuf::try_from(&body)
        .expect("encodes")
        .into_bytes()
}

fn find_body() -> Vec<u8> {
    let body = doc! {
        "find": "c", "filter": { "_id": ObjectId::new() }, "limit": 1, "singleBatch": true,
        "$db": "bench", "lsid": session(),
    };
    bson::RawDocumentBuf::try_from(&body)
        .expect("encodes")
        .into_bytes()
}

const FIND_FIELDS: &[&str] = &[
    "filter",
    "projection",
    "sort",
    "hint",
    "skip",
    "limit",
    "batchSize",
    "singleBatch",
    "max",
    "min",
    "returnKey",
    "showRecordId",
    "let",
    "allowDiskUse",
    "collation",
    "tailable",
    "awaitData",
    "noCursorTimeout",
    "oplogReplay",
    "allowPartialResults",
    "readOnce",
    "term",
    "ntoreturn",
    "isSuffix",
];

fn read_insert(body: &Document) -> bool {
    let ordered = args::opt_bool(body, "insert", "ordered").expect("bool");
    let bypass = args::opt_bool(body, "insert", "bypassDocumentValidation").expect("bool");
    ordered.unwrap_or(true) && !bypass.unwrap_or(false)
}

fn read_find(body: &Document) -> usize {
    let filter = args::opt_doc(body, "find", "filter")
        .expect("doc")
        .map_or(0, Document::len);
    let limit = args::opt_i64(body, "find", "limit")
        .expect("int")
        .unwrap_or(0);
    let skip = args::opt_non_negative(body, "find", "skip")
        .expect("int")
        .unwrap_or(0);
    let batch = args::opt_non_negative(body, "find", "batchSize")
        .expect("int")
        .unwrap_or(0);
    let single = args::opt_bool(body, "find", "singleBatch")
        .expect("bool")
        .unwrap_or(false);
    filter + (limit + skip + batch) as usize + usize::from(single)
}

fn bench(c: &mut Criterion) {
    let insert = insert_body();
    let find = find_body();
    let decode = |bytes: &[u8]| Document::from_reader(bytes).expect("decodes");

    let mut g = c.benchmark_group("insertOne parse path");
    g.bench_function("before", |b| {
        b.iter(|| {
            let body = decode(black_box(&insert));
            args::check_fields(
                &body,
                "insert",
                &["documents", "ordered", "bypassDocumentValidation"],
            )
            .expect("valid");
            read_insert(&body)
        })
    });
    g.bench_function("after", |b| {
        b.iter(|| {
            let body = decode(black_box(&insert));
            argspec::check(&argspec::specs::INSERT, &body).expect("valid");
            read_insert(&body)
        })
    });
    g.finish();

    let mut g = c.benchmark_group("findOne by _id parse path");
    g.bench_function("before", |b| {
        b.iter(|| {
            let body = decode(black_box(&find));
            args::check_fields(&body, "find", FIND_FIELDS).expect("valid");
            read_find(&body)
        })
    });
    g.bench_function("after", |b| {
        b.iter(|| {
            let body = decode(black_box(&find));
            argspec::check(&argspec::specs::FIND, &body).expect("valid");
            read_find(&body)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
