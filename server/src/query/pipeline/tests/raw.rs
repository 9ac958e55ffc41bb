//! Proves the stages' raw paths (`Stage::run_raw`: `$match`, `$group`, `$project`,
//! `$addFields`, `$unset`, top-k `$sort`, `$limit`, `$skip`, `$count`) give exactly what the
//! decoded paths give. How: seeded random documents whose fields are missing, scalars of every
//! numeric type, sub-documents, arrays of documents and arrays of scalars, run through a fixed
//! list of pipelines fed decoded (the reference) and fed raw; outputs compared exactly.

use super::{MapEnv, run_env, run_env_raw};
use bson::{Bson, Decimal128, Document, bson, doc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn scalar(rng: &mut StdRng) -> Bson {
    match rng.random_range(0..9) {
        0 => Bson::Int32(rng.random_range(-3..4)),
        1 => Bson::Int64(rng.random_range(-3..4)),
        2 => Bson::Double(f64::from(rng.random_range(-6..7)) / 2.0),
        3 => Bson::Decimal128("2.5".parse::<Decimal128>().expect("decimal")),
        4 => Bson::String(["x", "y", ""][rng.random_range(0..3)].into()),
        5 => Bson::Null,
        6 => Bson::Boolean(rng.random_bool(0.5)),
        7 => Bson::Array(vec![]),
        _ => Bson::Int32(1),
    }
}

fn value(rng: &mut StdRng, depth: usize) -> Option<Bson> {
    match rng.random_range(0..6) {
        0 => None,
        1 | 2 => Some(scalar(rng)),
        3 if depth < 2 => {
            let mut d = Document::new();
            for k in ["b", "z"] {
                if let Some(v) = value(rng, depth + 1) {
                    d.insert(k, v);
                }
            }
            Some(Bson::Document(d))
        }
        4 if depth < 2 => Some(Bson::Array(
            (0..rng.random_range(0..3))
                .filter_map(|_| value(rng, depth + 1))
                .collect(),
        )),
        _ => Some(scalar(rng)),
    }
}

fn random_doc(rng: &mut StdRng, i: i32) -> Document {
    let mut d = doc! {"_id": i};
    for k in ["a", "c", "e"] {
        if let Some(v) = value(rng, 0) {
            d.insert(k, v);
        }
    }
    d
}

fn pipelines() -> Vec<Bson> {
    vec![
        bson!([{"$project": {"a.b": 1, "c": 1}}]),
        bson!([{"$project": {"_id": 0, "a.b": 1}}]),
        bson!([{"$project": {"a": {"b": 1}, "x": {"$add": ["$c", 1]}, "_id": {"$literal": 7}}}]),
        bson!([{"$project": {"a.x": {"$literal": 1}, "c": 1}}]),
        bson!([{"$project": {"a.b": 0}}]),
        bson!([{"$project": {"c": 0, "_id": 0}}]),
        bson!([{"$unset": ["c", "a.z"]}]),
        bson!([{"$addFields": {"c": "$a.b", "n": 1, "gone": "$$REMOVE"}}]),
        bson!([{"$set": {"_id": "$c", "a": "$nothing"}}]),
        bson!([{"$set": {"a.z": 1}}]),
        bson!([{"$sort": {"a.b": -1, "_id": 1}}, {"$limit": 3}]),
        bson!([{"$sort": {"a": 1, "_id": -1}}, {"$skip": 2}, {"$limit": 2}]),
        bson!([{"$sort": {"c": -1, "_id": 1}}, {"$limit": 1}]),
        bson!([{"$sort": {"e": 1}}, {"$limit": 50}]),
        bson!([{"$group": {
            "_id": "$a.b",
            "s": {"$sum": "$c"}, "av": {"$avg": "$c"}, "mn": {"$min": "$c"},
            "mx": {"$max": "$a.b"}, "f": {"$first": "$c"}, "l": {"$last": "$a"},
            "p": {"$push": "$a.b"}, "n": {"$count": {}}, "one": {"$sum": 1},
        }}]),
        bson!([{"$group": {"_id": null, "n": {"$count": {}}, "s": {"$sum": "$e"}}}]),
        bson!([{"$group": {"_id": {"x": "$c", "y": "$e"}, "p": {"$push": "$_id"}}}]),
        bson!([{"$group": {"_id": "$a", "s": {"$avg": "$a.b"}}}]),
        bson!([{"$match": {"c": {"$gt": 0}}}, {"$project": {"c": 1}}, {"$count": "n"}]),
        bson!([{"$skip": 3}, {"$set": {"k": {"$type": "$a"}}}, {"$limit": 4}]),
        bson!([{"$match": {"a.b": {"$exists": true}}}, {"$group": {"_id": "$c", "n": {"$sum": 1}}}]),
    ]
}

#[test]
fn raw_paths_match_the_decoded_paths() {
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("raw seed: {seed} (set CAIRN_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..40 {
        let n = rng.random_range(0..60);
        let input: Vec<Document> = (0..n).map(|i| random_doc(&mut rng, i)).collect();
        for p in pipelines() {
            let env = MapEnv::default();
            let decoded = run_env(p.clone(), input.clone(), &env);
            let raw = run_env_raw(p.clone(), input.clone(), &env);
            match (decoded, raw) {
                (Ok(d), Ok(r)) => assert_eq!(r, d, "seed {seed} round {round} pipeline {p}"),
                (Err(d), Err(r)) => assert_eq!(
                    (r.code, r.message),
                    (d.code, d.message),
                    "seed {seed} round {round} pipeline {p}"
                ),
                (d, r) => panic!("seed {seed} round {round} pipeline {p}: {d:?} vs {r:?}"),
            }
        }
    }
}
