//! Proves `$lookup` (equality through a foreign index, equality through the hash table, that
//! table past its memory bound, and `let` + sub-pipeline) and `$graphLookup` equal a nested-loop
//! reference on random data, run whole and suspended (pulled one result at a time, as a cursor
//! runs them). How: seeded random local and foreign documents (seed printed, set
//! it with CAIRN_SEED); the reference compares every local value with every foreign value
//! through `storage::order`, and re-parses the sub-pipeline per document with the value inlined.

use super::{MapEnv, ctx, stages_of};
use crate::error::CommandResult;
use crate::query::pipeline::{ParseContext, Pipeline, PipelineEnv};
use bson::{Bson, Document, doc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use storage::order::compare_bson;

const ROUNDS: usize = 120;
const DOCS_MAX: usize = 30;

fn random_value(rng: &mut StdRng, depth: usize) -> Option<Bson> {
    match rng.random_range(0..9) {
        0 => None,
        1 => Some(Bson::Null),
        2 => Some(Bson::Int32(rng.random_range(0..4))),
        3 => Some(Bson::Int64(rng.random_range(0..4))),
        4 => Some(Bson::Double(f64::from(rng.random_range(0..8)) / 2.0)),
        5 => Some(Bson::String(
            ["a", "b", ""][rng.random_range(0..3)].to_string(),
        )),
        6 if depth == 0 => {
            let n = rng.random_range(0..3);
            Some(Bson::Array(
                (0..n).filter_map(|_| random_value(rng, 1)).collect(),
            ))
        }
        _ => Some(Bson::Int32(rng.random_range(0..2))),
    }
}

fn random_doc(rng: &mut StdRng, i: usize) -> Document {
    let mut d = doc! {"_id": i32::try_from(i).unwrap_or(0)};
    if let Some(v) = random_value(rng, 0) {
        d.insert("k", v);
    }
    d.insert("n", rng.random_range(0..3));
    d
}

/// The values a path reaches for a join: array elements, plus the array itself on the foreign
/// side; missing as null.
fn join_values(d: &Document, foreign: bool) -> Vec<Bson> {
    match d.get("k") {
        None => vec![Bson::Null],
        Some(Bson::Array(items)) => {
            let mut out = items.clone();
            if foreign {
                out.push(Bson::Array(items.clone()));
            }
            out
        }
        Some(v) => vec![v.clone()],
    }
}

fn equal(a: &Bson, b: &Bson) -> bool {
    compare_bson(a, b) == Ordering::Equal
}

fn reference_equality(local: &[Document], foreign: &[Document]) -> Vec<Document> {
    local
        .iter()
        .map(|l| {
            let lv = join_values(l, false);
            let hits: Vec<Bson> = foreign
                .iter()
                .filter(|f| {
                    let fv = join_values(f, true);
                    lv.iter().any(|a| fv.iter().any(|b| equal(a, b)))
                })
                .cloned()
                .map(Bson::Document)
                .collect();
            let mut out = l.clone();
            out.insert("j", hits);
            out
        })
        .collect()
}

/// An environment whose foreign "index" hands back every document whose field is present (a
/// superset, which the stage must filter), and counts its probes.
struct IndexedEnv(MapEnv);

impl PipelineEnv for IndexedEnv {
    fn collection_docs(&self, db: &str, coll: &str) -> CommandResult<Vec<Document>> {
        self.0.collection_docs(db, coll)
    }
    fn lookup_candidates(
        &self,
        _db: &str,
        coll: &str,
        _field: &str,
        _values: &[Bson],
    ) -> CommandResult<Option<Vec<Document>>> {
        Ok(Some(self.0.0.get(coll).cloned().unwrap_or_default()))
    }
}

/// Counts the documents read again by id.
struct CountingEnv(MapEnv, std::cell::Cell<usize>);

impl PipelineEnv for CountingEnv {
    fn collection_docs(&self, db: &str, coll: &str) -> CommandResult<Vec<Document>> {
        self.0.collection_docs(db, coll)
    }
    fn fetch_raw(
        &self,
        db: &str,
        coll: &str,
        id: u64,
    ) -> CommandResult<Option<bson::RawDocumentBuf>> {
        self.1.set(self.1.get() + 1);
        self.0.fetch_raw(db, coll, id)
    }
}

fn run(
    pipeline: Bson,
    input: Vec<Document>,
    env: &dyn PipelineEnv,
    cx: &ParseContext,
) -> Vec<Document> {
    let p = match Pipeline::parse(&stages_of(pipeline), cx) {
        Ok(p) => p,
        Err(e) => panic!("parse: {e:?}"),
    };
    let suspended = run_suspended(&p, &input, env);
    let out = match p.run_vec(input, env) {
        Ok(out) => out,
        Err(e) => panic!("run: {e:?}"),
    };
    assert_eq!(
        suspended, out,
        "a suspended run gives what a whole run gives"
    );
    out
}

/// The pipeline as a cursor runs it: suspended, one result pulled at a time, the join state
/// kept in the run between pulls.
fn run_suspended(p: &Pipeline, input: &[Document], env: &dyn PipelineEnv) -> Vec<Document> {
    let mut docs: std::collections::VecDeque<bson::RawDocumentBuf> = input
        .iter()
        .map(|d| bson::RawDocumentBuf::try_from(d).expect("encodes"))
        .collect();
    let mut next = || Ok(docs.pop_front());
    let mut run = p.suspend(0);
    let mut out = Vec::new();
    loop {
        match p.pull(&mut run, &mut next, env) {
            Ok(Some(raw)) => out.push(Document::try_from(raw.as_ref()).expect("decodes")),
            Ok(None) => return out,
            Err(e) => panic!("suspended run: {e:?}"),
        }
    }
}

fn seeded() -> StdRng {
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("lookup seed: {seed} (set CAIRN_SEED to replay)");
    StdRng::seed_from_u64(seed)
}

#[test]
fn equality_lookup_matches_the_nested_loop_by_every_route() {
    let mut rng = seeded();
    let mut refetched_count = 0;
    for round in 0..ROUNDS {
        let local: Vec<Document> = (0..rng.random_range(0..DOCS_MAX))
            .map(|i| random_doc(&mut rng, i))
            .collect();
        let foreign: Vec<Document> = (0..rng.random_range(0..DOCS_MAX))
            .map(|i| random_doc(&mut rng, 100 + i))
            .collect();
        let env = MapEnv([("f".to_string(), foreign.clone())].into_iter().collect());
        let expected = reference_equality(&local, &foreign);
        let stage = bson::bson!([{"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}}]);
        let hashed = run(stage.clone(), local.clone(), &env, &ctx());
        assert_eq!(hashed, expected, "hash table, round {round}");
        let indexed = run(stage.clone(), local.clone(), &IndexedEnv(env), &ctx());
        assert_eq!(indexed, expected, "index, round {round}");
        // A bound that holds a few foreign documents: the rest are read again by id.
        let env = CountingEnv(
            MapEnv([("f".to_string(), foreign.clone())].into_iter().collect()),
            std::cell::Cell::new(0),
        );
        let mut small = ctx();
        small.memory_max_bytes = 3000;
        let refetched = run(stage, local.clone(), &env, &small);
        assert_eq!(refetched, expected, "past the memory bound, round {round}");
        refetched_count += env.1.get();
    }
    assert!(refetched_count > 0, "the memory bound was never reached");
}

#[test]
fn let_lookup_parsed_once_matches_a_per_document_parse() {
    let mut rng = seeded();
    for round in 0..ROUNDS {
        let local: Vec<Document> = (0..rng.random_range(0..DOCS_MAX))
            .map(|i| random_doc(&mut rng, i))
            .collect();
        let foreign: Vec<Document> = (0..rng.random_range(0..DOCS_MAX))
            .map(|i| random_doc(&mut rng, 100 + i))
            .collect();
        let env = MapEnv([("f".to_string(), foreign.clone())].into_iter().collect());
        // `v` shadows a command-level `v`; the nested `$lookup` reads the outer `$$v`.
        let stage = bson::bson!([{"$lookup": {"from": "f", "let": {"v": "$k", "m": "$n"}, "pipeline": [
            {"$match": {"$expr": {"$and": [{"$eq": ["$k", "$$v"]}, {"$gte": ["$n", "$$m"]}]}}},
            {"$lookup": {"from": "f", "let": {"w": "$n"}, "pipeline": [
                {"$match": {"$expr": {"$and": [{"$eq": ["$n", "$$w"]}, {"$eq": ["$k", "$$v"]}]}}},
                {"$project": {"_id": 1}}
            ], "as": "inner"}}
        ], "as": "j"}}]);
        let cx = match ctx().with_let(&doc! {"v": "shadowed"}) {
            Ok(c) => c,
            Err(e) => panic!("let: {e:?}"),
        };
        let got = run(stage, local.clone(), &env, &cx);
        let expected: Vec<Document> = local
            .iter()
            .map(|l| {
                let v = l.get("k").cloned().unwrap_or(Bson::Null);
                let m = l.get("n").cloned().unwrap_or(Bson::Null);
                let inlined = bson::bson!([
                    {"$match": {"$expr": {"$and": [{"$eq": ["$k", {"$literal": v.clone()}]}, {"$gte": ["$n", {"$literal": m}]}]}}}
                ]);
                let mut hits = run(inlined, foreign.clone(), &env, &ctx());
                for h in &mut hits {
                    let w = h.get("n").cloned().unwrap_or(Bson::Null);
                    let inner = bson::bson!([
                        {"$match": {"$expr": {"$and": [{"$eq": ["$n", {"$literal": w}]}, {"$eq": ["$k", {"$literal": v.clone()}]}]}}},
                        {"$project": {"_id": 1}}
                    ]);
                    let found = run(inner, foreign.clone(), &env, &ctx());
                    h.insert("inner", found);
                }
                let mut out = l.clone();
                out.insert("j", hits);
                out
            })
            .collect();
        assert_eq!(got, expected, "round {round}");
    }
}

#[test]
fn graph_lookup_matches_a_breadth_first_reference() {
    let mut rng = seeded();
    for round in 0..ROUNDS {
        let nodes: Vec<Document> = (0..rng.random_range(0..DOCS_MAX))
            .map(|i| {
                let next = rng.random_range(0..DOCS_MAX as i32);
                doc! {"_id": i32::try_from(i).unwrap_or(0), "next": next, "n": rng.random_range(0..3)}
            })
            .collect();
        let starts: Vec<Document> = (0..5).map(|i| doc! {"_id": i, "s": i * 3}).collect();
        let env = MapEnv([("g".to_string(), nodes.clone())].into_iter().collect());
        let stage = bson::bson!([{"$graphLookup": {"from": "g", "startWith": "$s", "connectFromField": "next",
            "connectToField": "_id", "as": "r", "maxDepth": 3, "depthField": "d",
            "restrictSearchWithMatch": {"n": {"$lt": 2}}}}]);
        for memory in [usize::MAX, 800] {
            let mut cx = ctx();
            cx.memory_max_bytes = memory.min(ctx().memory_max_bytes);
            let got = run(stage.clone(), starts.clone(), &env, &cx);
            for (s, g) in starts.iter().zip(&got) {
                let mut want: Vec<(i32, i64)> = Vec::new();
                let mut frontier = vec![s.get_i32("s").unwrap_or(0)];
                for depth in 0..=3i64 {
                    let mut next = Vec::new();
                    for id in frontier {
                        let hit = nodes.iter().find(|n| n.get_i32("_id").ok() == Some(id));
                        if let Some(n) = hit
                            && n.get_i32("n").unwrap_or(9) < 2
                            && !want.iter().any(|(w, _)| *w == id)
                        {
                            want.push((id, depth));
                            next.push(n.get_i32("next").unwrap_or(-1));
                        }
                    }
                    frontier = next;
                }
                let mut found: Vec<(i32, i64)> = g
                    .get_array("r")
                    .map(|a| {
                        a.iter()
                            .filter_map(Bson::as_document)
                            .map(|d| (d.get_i32("_id").unwrap_or(-1), d.get_i64("d").unwrap_or(-1)))
                            .collect()
                    })
                    .unwrap_or_default();
                found.sort_unstable();
                want.sort_unstable();
                assert_eq!(found, want, "round {round}, memory {memory}, start {s}");
            }
        }
    }
}
