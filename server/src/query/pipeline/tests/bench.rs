//! Measures `$group` by key, and `$sort`+`$limit` (top-k) against a full `$sort`.
//! How: ignored test over CAIRN_BENCH_DOCS generated documents (default 200000); prints timings.

use super::{MapEnv, ctx, stages_of};
use crate::query::pipeline::Pipeline;
use bson::{Bson, Document, bson, doc};
use std::time::Instant;

fn time(label: &str, pipeline: Bson, input: &[Document]) {
    let mut c = ctx();
    c.allow_disk_use = true;
    let p = Pipeline::parse(&stages_of(pipeline), &c).expect("parses");
    let start = Instant::now();
    let out = p.run_vec(input.to_vec(), &MapEnv::default()).expect("runs");
    println!(
        "{label}: {} docs in, {} out, {:?}",
        input.len(),
        out.len(),
        start.elapsed()
    );
}

#[test]
#[ignore]
fn bench_group_and_top_k() {
    let n: usize = std::env::var("CAIRN_BENCH_DOCS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let input: Vec<Document> = (0..n)
        .map(|i| doc! {"_id": i as i64, "k": (i % 1000) as i32, "v": ((i * 7919) % 100_003) as i64, "s": "abcdefgh"})
        .collect();
    time(
        "$group by k ($sum, $avg, $max)",
        bson!([{"$group": {"_id": "$k", "s": {"$sum": "$v"}, "a": {"$avg": "$v"}, "m": {"$max": "$v"}}}]),
        &input,
    );
    time(
        "$sort + $limit 10 (top-k)",
        bson!([{"$sort": {"v": -1}}, {"$limit": 10}]),
        &input,
    );
    time(
        "$sort (full) then $limit after $project",
        bson!([{"$sort": {"v": -1}}, {"$project": {"v": 1}}, {"$limit": 10}]),
        &input,
    );
    time(
        "$match + $project",
        bson!([{"$match": {"k": {"$lt": 100}}}, {"$project": {"v": 1, "w": {"$add": ["$v", 1]}}}]),
        &input,
    );
}
