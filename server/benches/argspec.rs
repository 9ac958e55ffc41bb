//! The cost argument validation adds to insertOne and findOne by `_id`, measured on the parse
//! path a command takes before it reaches storage: the body's bytes decoded into a `Document`,
//! its fields checked, its options read. `before` is the hand-rolled check (an allowed-names
//! list, then the typed readers), `after` the declarative table (`argspec::check`) then the
//! same readers; both run side by side in one process. Bodies are what the Rust driver sends
//! (the inserted documents travel in a document sequence, outside the body).

use bson::{Document, doc, oid::ObjectId, spec::BinarySubtype};
use cairn_server::commands::{args, argspec};
use criterion::{Criterion, criterion_group};
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

fn decode(bytes: &[u8]) -> Document {
    Document::from_reader(bytes).expect("decodes")
}

fn insert_before(body: &[u8]) -> bool {
    let body = decode(body);
    args::check_fields(
        &body,
        "insert",
        &["documents", "ordered", "bypassDocumentValidation"],
    )
    .expect("valid");
    read_insert(&body)
}

fn insert_after(body: &[u8]) -> bool {
    let body = decode(body);
    argspec::check(&argspec::specs::INSERT, &body).expect("valid");
    read_insert(&body)
}

fn find_before(body: &[u8]) -> usize {
    let body = decode(body);
    args::check_fields(&body, "find", FIND_FIELDS).expect("valid");
    read_find(&body)
}

fn find_after(body: &[u8]) -> usize {
    let body = decode(body);
    argspec::check(&argspec::specs::FIND, &body).expect("valid");
    read_find(&body)
}

fn bench(c: &mut Criterion) {
    let insert = insert_body();
    let find = find_body();
    let mut g = c.benchmark_group("insertOne parse path");
    g.bench_function("before", |b| b.iter(|| insert_before(black_box(&insert))));
    g.bench_function("after", |b| b.iter(|| insert_after(black_box(&insert))));
    g.finish();
    let mut g = c.benchmark_group("findOne by _id parse path");
    g.bench_function("before", |b| b.iter(|| find_before(black_box(&find))));
    g.bench_function("after", |b| b.iter(|| find_after(black_box(&find))));
    g.finish();
}

/// `ARGSPEC_RUN=<insert|find>-<before|after>:<n>` runs that path n times and exits, for
/// instruction counts under `valgrind --tool=callgrind` (two counts, n and 2n, differ by n
/// runs of the path alone); without it, the criterion groups run.
fn main() {
    if let Ok(run) = std::env::var("ARGSPEC_RUN") {
        let (path, n) = run.split_once(':').expect("ARGSPEC_RUN=<path>:<n>");
        let n: usize = n.parse().expect("a count");
        let (insert, find) = (insert_body(), find_body());
        let mut sum = 0usize;
        for _ in 0..n {
            sum += match path {
                "insert-before" => usize::from(insert_before(black_box(&insert))),
                "insert-after" => usize::from(insert_after(black_box(&insert))),
                "find-before" => find_before(black_box(&find)),
                "find-after" => find_after(black_box(&find)),
                other => panic!("unknown path {other}"),
            };
        }
        println!("{path} x{n}: {sum}");
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

criterion_group!(benches, bench);
