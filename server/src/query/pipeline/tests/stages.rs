//! Proves each stage's output and mongod's error codes on edge inputs.
//! How: small hand-written pipelines over in-memory documents, compared with expected output.

use super::{MapEnv, code_of, ctx, fails, run, run_env, stages_of};
use crate::query::pipeline::{OutputMode, Pipeline, WhenMatched, WhenNotMatched, output};
use bson::{Bson, Document, bson, doc};

fn docs(v: Bson) -> Vec<Document> {
    stages_of(v)
}

#[test]
fn parse_errors_have_mongod_codes() {
    assert_eq!(fails(bson!([{"$foo": 1}]), vec![]), 40324);
    assert_eq!(fails(bson!([{"$match": {}, "$limit": 1}]), vec![]), 40323);
    assert_eq!(fails(bson!([{}]), vec![]), 40323);
    assert_eq!(fails(bson!([{"$out": "x"}, {"$limit": 1}]), vec![]), 40601);
    assert_eq!(
        fails(bson!([{"$merge": "x"}, {"$limit": 1}]), vec![]),
        40601
    );
    assert_eq!(fails(bson!([{"$limit": 0}]), vec![]), 15958);
    assert_eq!(fails(bson!([{"$limit": "a"}]), vec![]), 15957);
    assert_eq!(fails(bson!([{"$skip": -1}]), vec![]), 15956);
    assert_eq!(fails(bson!([{"$match": 1}]), vec![]), 15959);
    assert_eq!(fails(bson!([{"$sort": {}}]), vec![]), 15976);
    assert_eq!(fails(bson!([{"$sort": {"a": 2}}]), vec![]), 15975);
    assert_eq!(
        fails(bson!([{"$group": {"n": {"$sum": 1}}}]), vec![]),
        15955
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "n": {"$bogus": 1}}}]),
            vec![]
        ),
        15952
    );
    assert_eq!(
        fails(bson!([{"$group": {"_id": null, "n": {}}}]), vec![]),
        40238
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "a.b": {"$sum": 1}}}]),
            vec![]
        ),
        40235
    );
    assert_eq!(fails(bson!([{"$unwind": "a"}]), vec![]), 28818);
    assert_eq!(
        fails(bson!([{"$unwind": {"path": "$a", "x": 1}}]), vec![]),
        28811
    );
    assert_eq!(fails(bson!([{"$unwind": 5}]), vec![]), 15981);
    assert_eq!(fails(bson!([{"$count": ""}]), vec![]), 40157);
    assert_eq!(fails(bson!([{"$count": "$a"}]), vec![]), 40158);
    assert_eq!(fails(bson!([{"$count": "a.b"}]), vec![]), 40160);
    assert_eq!(fails(bson!([{"$project": {}}]), vec![]), 51272);
    assert_eq!(
        fails(bson!([{"$project": {"a": 1, "b": 0}}]), vec![]),
        31254
    );
    assert_eq!(
        fails(bson!([{"$project": {"b": 0, "a": 1}}]), vec![]),
        31253
    );
    assert_eq!(
        fails(bson!([{"$project": {"a": 1, "a.b": 1}}]), vec![]),
        31250
    );
    assert_eq!(fails(bson!([{"$sample": {"size": -1}}]), vec![]), 28747);
    assert_eq!(fails(bson!([{"$sample": {}}]), vec![]), 28749);
    assert_eq!(fails(bson!([{"$facet": {}}]), vec![]), 40169);
    assert_eq!(
        fails(bson!([{"$facet": {"a": [{"$out": "x"}]}}]), vec![]),
        40600
    );
    assert_eq!(
        fails(bson!([{"$limit": 1}, {"$documents": []}]), vec![]),
        40602
    );
    assert_eq!(fails(bson!([{"$unset": []}]), vec![]), 31119);
    assert_eq!(fails(bson!([{"$sortByCount": "a"}]), vec![]), 40148);
    assert_eq!(fails(bson!([{"$replaceRoot": {}}]), vec![]), 40231);
    assert_eq!(
        fails(
            bson!([{"$lookup": {"from": "f", "localField": "a"}}]),
            vec![]
        ),
        9
    );
    assert_eq!(
        fails(bson!([{"$project": {"a": {"$bogus": 1}}}]), vec![]),
        168
    );
}

#[test]
fn match_filters_and_streams() {
    let input = docs(bson!([{"a": 1}, {"a": [1, 2]}, {"a": null}, {}, {"a": "x"}]));
    assert_eq!(run(bson!([{"$match": {"a": 1}}]), input.clone()).len(), 2);
    assert_eq!(
        run(bson!([{"$match": {"a": null}}]), input.clone()).len(),
        2
    );
    let out = run(bson!([{"$match": {"$expr": {"$eq": ["$a", "x"]}}}]), input);
    assert_eq!(out, docs(bson!([{"a": "x"}])));
}

#[test]
fn project_inclusion_exclusion_and_computed() {
    let input = docs(
        bson!([{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, 5, [{"c": 2}]]}]),
    );
    let out = run(bson!([{"$project": {"b.c": 1, "a": 1}}]), input.clone());
    assert_eq!(out, docs(bson!([{"_id": 1, "a": 1, "b": {"c": 2}}])));
    let out = run(bson!([{"$project": {"_id": 0, "e.c": 1}}]), input.clone());
    assert_eq!(out, docs(bson!([{"e": [{"c": 1}, [{"c": 2}]]}])));
    let out = run(bson!([{"$project": {"b": 0, "e": 0}}]), input.clone());
    assert_eq!(out, docs(bson!([{"_id": 1, "a": 1}])));
    let out = run(bson!([{"$project": {"_id": 0}}]), input.clone());
    assert_eq!(out[0].get("_id"), None);
    let out = run(
        bson!([{"$project": {"x": {"$add": ["$a", 1]}, "y": "$b.d", "z": "$nope", "lit": "text"}}]),
        input.clone(),
    );
    assert_eq!(
        out,
        docs(bson!([{"_id": 1, "x": 2, "y": 3, "lit": "text"}]))
    );
    let out = run(
        bson!([{"$project": {"b": {"c": 1, "n": {"$literal": 7}}}}]),
        input.clone(),
    );
    assert_eq!(out, docs(bson!([{"_id": 1, "b": {"c": 2, "n": 7}}])));
    let out = run(
        bson!([{"$project": {"q": "$$REMOVE", "a": 1}}]),
        input.clone(),
    );
    assert_eq!(out, docs(bson!([{"_id": 1, "a": 1}])));
    // Computed fields (even `_id`) follow the included ones; scalars in arrays become documents
    // when a computed field lands in them.
    let out = run(
        bson!([{"$project": {"_id": "$a", "a": 1, "e.k": {"$literal": 0}}}]),
        input,
    );
    assert_eq!(
        out,
        docs(bson!([{"a": 1, "_id": 1, "e": [{"k": 0}, {"k": 0}, [{"k": 0}]]}]))
    );
}

#[test]
fn add_fields_merges_and_unset_removes() {
    let input = docs(bson!([{"_id": 1, "a": {"b": 1}, "arr": [{"k": 1}, {"k": 2}]}]));
    let out = run(
        bson!([{"$addFields": {"a": {"c": "$a.b"}, "arr.z": 9, "n": "$$NOW"}}]),
        input.clone(),
    );
    assert_eq!(out[0].get_document("a").ok(), Some(&doc! {"b": 1, "c": 1}));
    assert_eq!(
        out[0].get("arr"),
        Some(&bson!([{"k": 1, "z": 9}, {"k": 2, "z": 9}]))
    );
    assert_eq!(out[0].get("n"), Some(&Bson::DateTime(ctx().now)));
    let out = run(
        bson!([{"$set": {"a": "$$REMOVE", "x.y.z": 1}}]),
        input.clone(),
    );
    assert_eq!(
        out,
        docs(bson!([{"_id": 1, "arr": [{"k": 1}, {"k": 2}], "x": {"y": {"z": 1}}}]))
    );
    let out = run(bson!([{"$unset": ["a.b", "arr.k"]}]), input);
    assert_eq!(out, docs(bson!([{"_id": 1, "a": {}, "arr": [{}, {}]}])));
}

#[test]
fn group_keys_unify_numeric_types() {
    let input = docs(
        bson!([{"k": 1, "v": 1}, {"k": 1.0, "v": 2}, {"k": 1_i64, "v": 3}, {"v": 4}, {"k": null, "v": 5}]),
    );
    let out = run(
        bson!([{"$group": {"_id": "$k", "s": {"$sum": "$v"}, "c": {"$count": {}}}}]),
        input,
    );
    assert_eq!(
        out,
        docs(bson!([{"_id": 1, "s": 6, "c": 3}, {"_id": null, "s": 9, "c": 2}]))
    );
}

#[test]
fn group_compound_id_and_order() {
    let input = docs(bson!([{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 1, "b": 2}]));
    let out = run(
        bson!([{"$group": {"_id": {"a": "$a", "b": "$b"}, "n": {"$sum": 1}}}, {"$sort": {"n": -1}}]),
        input,
    );
    assert_eq!(
        out,
        docs(bson!([{"_id": {"a": 1, "b": 2}, "n": 2}, {"_id": {"a": 1, "b": 3}, "n": 1}]))
    );
}

#[test]
fn sort_arrays_missing_and_stability() {
    let input = docs(bson!([
        {"i": 0, "a": [3, 1]}, {"i": 1, "a": 2}, {"i": 2}, {"i": 3, "a": null},
        {"i": 4, "a": "s"}, {"i": 5, "a": 2.0}, {"i": 6, "a": [5]},
    ]));
    let ids = |out: Vec<Document>| {
        out.iter()
            .map(|d| d.get_i32("i").unwrap_or(-1))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(run(bson!([{"$sort": {"a": 1}}]), input.clone())),
        vec![2, 3, 0, 1, 5, 6, 4]
    );
    assert_eq!(
        ids(run(bson!([{"$sort": {"a": -1}}]), input.clone())),
        vec![4, 6, 0, 1, 5, 2, 3]
    );
    // Top-k through $sort + $skip + $limit keeps the same answer as a full sort.
    assert_eq!(
        ids(run(
            bson!([{"$sort": {"a": 1}}, {"$skip": 2}, {"$limit": 3}]),
            input
        )),
        vec![0, 1, 5]
    );
}

#[test]
fn sort_then_limit_is_top_k_over_many() {
    let input: Vec<Document> = (0..1000)
        .map(|i| doc! {"v": (i * 7919) % 1000, "i": i})
        .collect();
    let out = run(bson!([{"$sort": {"v": -1}}, {"$limit": 3}]), input);
    let vs: Vec<i32> = out.iter().filter_map(|d| d.get_i32("v").ok()).collect();
    assert_eq!(vs, vec![999, 998, 997]);
}

#[test]
fn unwind_variants() {
    let input = docs(
        bson!([{"_id": 1, "a": [1, 2]}, {"_id": 2, "a": []}, {"_id": 3, "a": null}, {"_id": 4}, {"_id": 5, "a": 7}]),
    );
    let out = run(bson!([{"$unwind": "$a"}]), input.clone());
    assert_eq!(
        out,
        docs(bson!([{"_id": 1, "a": 1}, {"_id": 1, "a": 2}, {"_id": 5, "a": 7}]))
    );
    let out = run(
        bson!([{"$unwind": {"path": "$a", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}]),
        input,
    );
    assert_eq!(
        out,
        docs(bson!([
            {"_id": 1, "a": 1, "i": 0_i64}, {"_id": 1, "a": 2, "i": 1_i64}, {"_id": 2, "i": null},
            {"_id": 3, "a": null, "i": null}, {"_id": 4, "i": null}, {"_id": 5, "a": 7, "i": null},
        ]))
    );
    let nested = docs(bson!([{"x": {"y": [[1], 2]}}]));
    let out = run(bson!([{"$unwind": "$x.y"}]), nested);
    assert_eq!(out, docs(bson!([{"x": {"y": [1]}}, {"x": {"y": 2}}])));
}

#[test]
fn count_sort_by_count_replace_root() {
    let input =
        docs(bson!([{"t": "a", "d": {"x": 1}}, {"t": "b", "d": {"x": 2}}, {"t": "a", "d": 5}]));
    assert_eq!(
        run(bson!([{"$count": "n"}]), input.clone()),
        docs(bson!([{"n": 3}]))
    );
    assert_eq!(
        run(
            bson!([{"$match": {"t": "zz"}}, {"$count": "n"}]),
            input.clone()
        ),
        vec![]
    );
    let out = run(bson!([{"$sortByCount": "$t"}]), input.clone());
    assert_eq!(
        out,
        docs(bson!([{"_id": "a", "count": 2}, {"_id": "b", "count": 1}]))
    );
    let out = run(
        bson!([{"$limit": 2}, {"$replaceWith": "$d"}]),
        input.clone(),
    );
    assert_eq!(out, docs(bson!([{"x": 1}, {"x": 2}])));
    assert_eq!(
        fails(bson!([{"$replaceRoot": {"newRoot": "$d"}}]), input),
        40228
    );
}

#[test]
fn sample_sizes() {
    let input: Vec<Document> = (0..50).map(|i| doc! {"i": i}).collect();
    assert_eq!(
        run(bson!([{"$sample": {"size": 10}}]), input.clone()).len(),
        10
    );
    assert_eq!(
        run(bson!([{"$sample": {"size": 100}}]), input.clone()).len(),
        50
    );
    assert_eq!(run(bson!([{"$sample": {"size": 0}}]), input).len(), 0);
}

fn lookup_env() -> MapEnv {
    let mut env = MapEnv::default();
    env.0.insert(
        "f".into(),
        docs(bson!([
            {"_id": 10, "k": 1, "v": "one"}, {"_id": 11, "k": [2, 3], "v": "two-three"},
            {"_id": 12, "v": "nokey"}, {"_id": 13, "k": 1.0, "v": "one-double"},
        ])),
    );
    env
}

#[test]
fn lookup_equality_and_pipeline_forms() {
    let env = lookup_env();
    let input = docs(bson!([{"_id": 1, "k": 1}, {"_id": 2, "k": [3, 9]}, {"_id": 3}]));
    let out = run_env(
        bson!([{"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}},
        {"$project": {"ids": "$j._id"}}]),
        input.clone(),
        &env,
    )
    .expect("runs");
    assert_eq!(
        out,
        docs(
            bson!([{"_id": 1, "ids": [10, 13]}, {"_id": 2, "ids": [11]}, {"_id": 3, "ids": [12]}])
        )
    );
    let out = run_env(bson!([{"$lookup": {"from": "f", "let": {"key": "$k"},
        "pipeline": [{"$match": {"$expr": {"$eq": ["$k", "$$key"]}}}, {"$project": {"_id": 1}}], "as": "j"}}]),
        input.clone(), &env).expect("runs");
    assert_eq!(out[0].get("j"), Some(&bson!([{"_id": 10}, {"_id": 13}])));
    let out = run_env(
        bson!([{"$lookup": {"from": "f", "localField": "k", "foreignField": "k",
        "pipeline": [{"$count": "n"}], "as": "j"}}]),
        input,
        &env,
    )
    .expect("runs");
    assert_eq!(out[0].get("j"), Some(&bson!([{"n": 2}])));
}

#[test]
fn union_with_facet_and_documents() {
    let env = lookup_env();
    let input = docs(bson!([{"_id": 1}]));
    let out = run_env(bson!([{"$unionWith": {"coll": "f", "pipeline": [{"$match": {"k": 1}}, {"$project": {"v": 1}}]}}]), input.clone(), &env).expect("runs");
    assert_eq!(
        out,
        docs(bson!([{"_id": 1}, {"_id": 10, "v": "one"}, {"_id": 13, "v": "one-double"}]))
    );
    let out = run_env(
        bson!([{"$unionWith": "f"}, {"$count": "n"}]),
        input.clone(),
        &env,
    )
    .expect("runs");
    assert_eq!(out, docs(bson!([{"n": 5}])));
    let out = run(
        bson!([{"$documents": [{"a": 1}, {"a": 2}]}, {"$facet": {"n": [{"$count": "c"}], "top": [{"$sort": {"a": -1}}, {"$limit": 1}]}}]),
        vec![],
    );
    assert_eq!(out, docs(bson!([{"n": [{"c": 2}], "top": [{"a": 2}]}])));
}

#[test]
fn bucket_and_bucket_auto() {
    let input: Vec<Document> = [1, 5, 10, 12, 20, 99]
        .iter()
        .map(|v| doc! {"v": *v})
        .chain([doc! {"v": "s"}])
        .collect();
    let out = run(
        bson!([{"$bucket": {"groupBy": "$v", "boundaries": [0, 10, 20], "default": "other",
        "output": {"n": {"$sum": 1}, "vs": {"$push": "$v"}}}}]),
        input.clone(),
    );
    assert_eq!(
        out,
        docs(bson!([
            {"_id": 0, "n": 2, "vs": [1, 5]}, {"_id": 10, "n": 2, "vs": [10, 12]}, {"_id": "other", "n": 3, "vs": [20, 99, "s"]},
        ]))
    );
    assert_eq!(
        fails(
            bson!([{"$bucket": {"groupBy": "$v", "boundaries": [0, 10]}}]),
            input.clone()
        ),
        40066
    );
    assert_eq!(
        fails(
            bson!([{"$bucket": {"groupBy": "$v", "boundaries": [10, 0]}}]),
            vec![]
        ),
        40194
    );
    assert_eq!(
        fails(
            bson!([{"$bucket": {"groupBy": "$v", "boundaries": [0, "a"]}}]),
            vec![]
        ),
        40193
    );
    assert_eq!(
        fails(
            bson!([{"$bucket": {"groupBy": "$v", "boundaries": [0, 10], "default": 5}}]),
            vec![]
        ),
        40199
    );
    let nums: Vec<Document> = (1..=10).map(|v| doc! {"v": v}).collect();
    let out = run(
        bson!([{"$bucketAuto": {"groupBy": "$v", "buckets": 3}}]),
        nums,
    );
    let counts: Vec<i32> = out.iter().filter_map(|d| d.get_i32("count").ok()).collect();
    assert_eq!(counts, vec![3, 3, 4]);
    assert_eq!(out[0].get("_id"), Some(&bson!({"min": 1, "max": 4})));
    assert_eq!(out[2].get("_id"), Some(&bson!({"min": 7, "max": 10})));
}

#[test]
fn graph_lookup_walks_edges() {
    let mut env = MapEnv::default();
    env.0.insert(
        "people".into(),
        docs(bson!([
            {"_id": 1, "name": "a", "boss": null}, {"_id": 2, "name": "b", "boss": "a"},
            {"_id": 3, "name": "c", "boss": "b"}, {"_id": 4, "name": "d", "boss": "c"},
        ])),
    );
    let input = docs(bson!([{"start": "c"}]));
    let out = run_env(bson!([{"$graphLookup": {"from": "people", "startWith": "$start", "connectFromField": "boss",
        "connectToField": "name", "as": "chain", "depthField": "depth", "maxDepth": 1}},
        {"$project": {"_id": 0, "n": "$chain.name", "d": "$chain.depth"}}]), input, &env).expect("runs");
    assert_eq!(out, docs(bson!([{"n": ["c", "b"], "d": [0_i64, 1_i64]}])));
}

#[test]
fn redact_prunes_levels() {
    let input =
        docs(bson!([{"lvl": 1, "sub": {"lvl": 5, "x": 1}, "list": [{"lvl": 1}, {"lvl": 9}]}]));
    let out = run(
        bson!([{"$redact": {"$cond": [{"$gt": ["$lvl", 3]}, "$$PRUNE", "$$DESCEND"]}}]),
        input,
    );
    assert_eq!(out, docs(bson!([{"lvl": 1, "list": [{"lvl": 1}]}])));
}

#[test]
fn output_targets_and_merge_rules() {
    let p = Pipeline::parse(
        &stages_of(bson!([{"$match": {"a": 1}}, {"$sort": {"a": 1}}, {"$out": "target"}])),
        &ctx(),
    )
    .expect("parses");
    assert_eq!(p.leading_match(), Some(&doc! {"a": 1}));
    assert_eq!(p.leading_sort(), Some(&doc! {"a": 1}));
    let t = p.output_target().expect("has target");
    assert_eq!((t.db.as_str(), t.coll.as_str()), ("db", "target"));
    assert!(matches!(t.mode, OutputMode::Out));
    let p = Pipeline::parse(&stages_of(bson!([{"$merge": {"into": {"db": "o", "coll": "t"}, "on": "k",
        "whenMatched": [{"$set": {"n": {"$add": ["$n", "$$new.n"]}}}], "whenNotMatched": "discard"}}])), &ctx()).expect("parses");
    let t = p.output_target().expect("has target");
    let OutputMode::Merge {
        on,
        when_matched,
        when_not_matched,
    } = &t.mode
    else {
        panic!("merge")
    };
    assert_eq!(on, &vec!["k".to_string()]);
    assert_eq!(*when_not_matched, WhenNotMatched::Discard);
    let merged = output::merge_documents(
        Some(&doc! {"_id": 1, "k": 1, "n": 2}),
        &doc! {"k": 1, "n": 5},
        when_matched,
        *when_not_matched,
    )
    .expect("merges");
    assert_eq!(merged, Some(doc! {"_id": 1, "k": 1, "n": 7}));
    assert_eq!(
        output::merge_documents(None, &doc! {"k": 1}, when_matched, *when_not_matched).expect("ok"),
        None
    );
    let m = output::merge_documents(
        Some(&doc! {"_id": 1, "a": 1}),
        &doc! {"_id": 1, "b": 2},
        &WhenMatched::Merge,
        WhenNotMatched::Insert,
    )
    .expect("ok");
    assert_eq!(m, Some(doc! {"_id": 1, "a": 1, "b": 2}));
    let e = output::merge_documents(
        Some(&doc! {"_id": 1}),
        &doc! {"_id": 1},
        &WhenMatched::Fail,
        WhenNotMatched::Insert,
    )
    .expect_err("fails");
    assert_eq!(code_of(&e), 11000);
    let e = output::merge_documents(
        Some(&doc! {"_id": 1}),
        &doc! {"_id": 2},
        &WhenMatched::Replace,
        WhenNotMatched::Insert,
    )
    .expect_err("fails");
    assert_eq!(code_of(&e), 66);
}

#[test]
fn let_variables_and_memory_bound() {
    let c = ctx()
        .with_let(&doc! {"x": 5, "y": {"$add": ["$$x", 1]}})
        .expect("let parses");
    let p = Pipeline::parse(
        &stages_of(bson!([{"$project": {"_id": 0, "v": "$$y", "w": "$$x"}}])),
        &c,
    )
    .expect("parses");
    let out = p.run_vec(vec![doc! {}], &MapEnv::default()).expect("runs");
    assert_eq!(out, docs(bson!([{"v": 6, "w": 5}])));
    let mut small = ctx();
    small.memory_max_bytes = 1000;
    let input: Vec<Document> = (0..100)
        .map(|i| doc! {"k": i, "pad": "x".repeat(50)})
        .collect();
    let p = Pipeline::parse(&stages_of(bson!([{"$sort": {"k": -1}}])), &small).expect("parses");
    let e = p
        .run_vec(input.clone(), &MapEnv::default())
        .expect_err("over the bound");
    assert_eq!(code_of(&e), 292);
    let p = Pipeline::parse(
        &stages_of(bson!([{"$group": {"_id": "$k", "p": {"$push": "$pad"}}}])),
        &small,
    )
    .expect("parses");
    assert_eq!(
        code_of(
            &p.run_vec(input.clone(), &MapEnv::default())
                .expect_err("over")
        ),
        292
    );
    small.allow_disk_use = true;
    let p = Pipeline::parse(&stages_of(bson!([{"$sort": {"k": -1}}])), &small).expect("parses");
    assert_eq!(
        p.run_vec(input.clone(), &MapEnv::default())
            .expect("allowed")
            .len(),
        100
    );
    // A top-k holds only k documents, so it stays under the bound.
    small.allow_disk_use = false;
    let p = Pipeline::parse(
        &stages_of(bson!([{"$sort": {"k": -1}}, {"$limit": 2}])),
        &small,
    )
    .expect("parses");
    assert_eq!(
        p.run_vec(input, &MapEnv::default())
            .expect("top-k fits")
            .len(),
        2
    );
}

#[test]
fn edge_values_nan_dates_and_computed_id() {
    let input = docs(
        bson!([{"k": f64::NAN, "d": bson::DateTime::from_millis(5)}, {"k": f64::NAN, "d": bson::DateTime::from_millis(-5)}, {"k": 0.0}, {"k": -0.0}]),
    );
    let out = run(
        bson!([{"$group": {"_id": "$k", "n": {"$sum": 1}}}]),
        input.clone(),
    );
    let counts: Vec<i32> = out.iter().filter_map(|d| d.get_i32("n").ok()).collect();
    assert_eq!(counts, vec![2, 2], "NaN groups with NaN, -0 with 0");
    let out = run(
        bson!([{"$match": {"d": {"$exists": true}}}, {"$sort": {"d": 1}}, {"$project": {"_id": "$d", "x": {"$literal": 1}}}]),
        input,
    );
    assert_eq!(
        out[0],
        doc! {"_id": bson::DateTime::from_millis(-5), "x": 1}
    );
    assert_eq!(out[0].keys().next().map(String::as_str), Some("_id"));
}

#[test]
fn pipeline_is_send_and_sync_and_skips_pushed_stages() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Pipeline>();
    let p = Pipeline::parse(
        &stages_of(bson!([{"$match": {"a": 1}}, {"$count": "n"}])),
        &ctx(),
    )
    .expect("parses");
    let env = MapEnv::default();
    let out: Vec<Document> = p
        .run_skipping(
            1,
            Box::new(docs(bson!([{"a": 2}])).into_iter().map(Ok)),
            &env,
        )
        .expect("runs")
        .collect::<Result<_, _>>()
        .expect("no errors");
    assert_eq!(out, docs(bson!([{"n": 1}])));
    assert_eq!(
        p.stage_documents(),
        docs(bson!([{"$match": {"a": 1}}, {"$count": "n"}]))
    );
}

/// An environment that interrupts after a number of checks.
struct Interrupting(std::cell::Cell<u32>);

impl crate::query::pipeline::PipelineEnv for Interrupting {
    fn collection_docs(
        &self,
        _db: &str,
        _coll: &str,
    ) -> crate::error::CommandResult<Vec<Document>> {
        Ok(vec![])
    }

    fn check_interrupt(&self) -> crate::error::CommandResult<()> {
        let left = self.0.get();
        if left == 0 {
            return Err(crate::error::err(
                crate::error::ErrorCode::MaxTimeMSExpired,
                "operation exceeded time limit",
            ));
        }
        self.0.set(left - 1);
        Ok(())
    }
}

#[test]
fn blocking_stages_honour_interrupts_and_lookup_size() {
    let input: Vec<Document> = (0..100).map(|i| doc! {"k": i}).collect();
    let p =
        Pipeline::parse(&stages_of(bson!([{"$group": {"_id": "$k"}}])), &ctx()).expect("parses");
    let e = p
        .run_vec(input.clone(), &Interrupting(std::cell::Cell::new(10)))
        .expect_err("interrupted");
    assert_eq!(e.code, crate::error::ErrorCode::MaxTimeMSExpired);
    let mut env = MapEnv::default();
    env.0.insert(
        "big".into(),
        (0..50)
            .map(|i| doc! {"k": 1, "i": i, "pad": "y".repeat(100)})
            .collect(),
    );
    let mut small = ctx();
    small.memory_max_bytes = 2000;
    let p = Pipeline::parse(&stages_of(bson!([{"$lookup": {"from": "big", "localField": "k", "foreignField": "k", "as": "j"}}])), &small).expect("parses");
    assert_eq!(
        code_of(&p.run_vec(vec![doc! {"k": 1}], &env).expect_err("too large")),
        4568
    );
}

#[test]
fn inner_bindings_hide_pipeline_variables() {
    let c = ctx().with_let(&doc! {"x": 100}).expect("let parses");
    let p = Pipeline::parse(
        &stages_of(bson!([{"$project": {"_id": 0,
            "m": {"$map": {"input": [1, 2], "as": "x", "in": {"$add": ["$$x", 1]}}},
            "l": {"$let": {"vars": {"x": 5}, "in": "$$x"}},
            "o": "$$x", "r": "$$REMOVE"}}])),
        &c,
    )
    .expect("parses");
    let out = p.run_vec(vec![doc! {}], &MapEnv::default()).expect("runs");
    assert_eq!(out, docs(bson!([{"m": [2, 3], "l": 5, "o": 100}])));
}

#[test]
fn update_pipelines_allow_only_reshaping_stages() {
    let p = Pipeline::parse_update(
        &stages_of(bson!([{"$set": {"n": {"$add": ["$n", 1]}}}, {"$unset": "old"}, {"$replaceWith": {"$mergeObjects": ["$$ROOT", {"t": "$$NOW"}]}}])),
        &ctx(),
    )
    .expect("parses");
    let out = p
        .apply_update(doc! {"_id": 1, "n": 1, "old": true})
        .expect("applies");
    assert_eq!(out, doc! {"_id": 1, "n": 2, "t": ctx().now});
    let e =
        Pipeline::parse_update(&stages_of(bson!([{"$match": {}}])), &ctx()).expect_err("refused");
    assert_eq!(code_of(&e), 72);
    assert!(
        Pipeline::parse_update(&[], &ctx())
            .expect("empty is fine")
            .apply_update(doc! {"a": 1})
            .is_ok()
    );
}

#[test]
fn more_parse_codes_checked_against_mongod() {
    assert_eq!(fails(bson!([{"$unwind": {"path": 5}}]), vec![]), 28808);
    assert_eq!(fails(bson!([{"$unwind": ""}]), vec![]), 28812);
    assert_eq!(
        fails(
            bson!([{"$unwind": {"path": "$a", "includeArrayIndex": 1}}]),
            vec![]
        ),
        28810
    );
    assert_eq!(
        fails(bson!([{"$group": {"_id": null, "n": 1}}]), vec![]),
        40234
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "$n": {"$sum": 1}}}]),
            vec![]
        ),
        40236
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "n": {"$sum": 1, "$max": 1}}}]),
            vec![]
        ),
        40238
    );
    assert_eq!(fails(bson!([{"$sortByCount": 5}]), vec![]), 40149);
    assert_eq!(fails(bson!([{"$facet": {"a": [5]}}]), vec![]), 40171);
    assert_eq!(fails(bson!([{"$facet": {"a": []}}]), vec![]), 40172);
    assert_eq!(
        fails(
            bson!([{"$bucket": {"groupBy": "$a", "boundaries": 5}}]),
            vec![]
        ),
        40200
    );
    assert_eq!(
        fails(
            bson!([{"$bucket": {"groupBy": "$a", "boundaries": [0, 1], "output": {"n": 1}}}]),
            vec![]
        ),
        40203
    );
    assert_eq!(
        fails(
            bson!([{"$bucketAuto": {"groupBy": "$a", "buckets": "x"}}]),
            vec![]
        ),
        40241
    );
    assert_eq!(
        fails(
            bson!([{"$bucketAuto": {"groupBy": "$a", "buckets": 0}}]),
            vec![]
        ),
        40243
    );
    assert_eq!(
        fails(
            bson!([{"$bucketAuto": {"groupBy": "$a", "buckets": 2, "output": 1}}]),
            vec![]
        ),
        40244
    );
    assert_eq!(fails(bson!([{"$replaceRoot": 1}]), vec![]), 40229);
    assert_eq!(fails(bson!([{"$lookup": 1}]), vec![]), 40319);
    assert_eq!(
        fails(
            bson!([{"$lookup": {"localField": "a", "foreignField": "b", "as": "c"}}]),
            vec![]
        ),
        40320
    );
    assert_eq!(
        fails(
            bson!([{"$lookup": {"from": 1, "localField": "a", "foreignField": "b", "as": "c"}}]),
            vec![]
        ),
        40321
    );
    assert_eq!(fails(bson!([{"$project": {"a": {}}}]), vec![]), 51270);
    assert_eq!(fails(bson!([{"$project": {"": 1}}]), vec![]), 40352);
    assert_eq!(fails(bson!([{"$project": {"a.": 1}}]), vec![]), 40353);
    assert_eq!(fails(bson!([{"$addFields": {}}]), vec![]), 40177);
}

/// An environment whose "index" answers equality lookups on `k` and counts the calls.
struct IndexedEnv {
    docs: Vec<Document>,
    calls: std::cell::Cell<u32>,
}

impl crate::query::pipeline::PipelineEnv for IndexedEnv {
    fn collection_docs(
        &self,
        _db: &str,
        _coll: &str,
    ) -> crate::error::CommandResult<Vec<Document>> {
        panic!("the index should have served every lookup");
    }

    fn lookup_candidates(
        &self,
        _db: &str,
        _coll: &str,
        field: &str,
        values: &[Bson],
    ) -> crate::error::CommandResult<Option<Vec<Document>>> {
        self.calls.set(self.calls.get() + 1);
        assert_eq!(field, "k");
        Ok(Some(
            self.docs
                .iter()
                .filter(|d| d.get("k").is_some_and(|k| values.contains(k)))
                .cloned()
                .collect(),
        ))
    }
}

#[test]
fn lookup_uses_the_environment_index_when_offered() {
    let env = IndexedEnv {
        docs: docs(bson!([{"_id": 1, "k": 1}, {"_id": 2, "k": 2}, {"_id": 3, "k": 1}])),
        calls: std::cell::Cell::new(0),
    };
    let p = Pipeline::parse(&stages_of(bson!([{"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}}, {"$project": {"ids": "$j._id"}}])), &ctx()).expect("parses");
    let out = p
        .run_vec(
            docs(bson!([{"_id": 10, "k": 1}, {"_id": 11, "k": 5}])),
            &env,
        )
        .expect("runs");
    assert_eq!(
        out,
        docs(bson!([{"_id": 10, "ids": [1, 3]}, {"_id": 11, "ids": []}]))
    );
    assert_eq!(env.calls.get(), 2);
}
