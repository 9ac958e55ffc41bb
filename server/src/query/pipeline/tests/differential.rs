//! Proves random chains of `$match $sort $skip $limit $unwind $project $group $count` agree
//! with a straightforward reference implementation, fed decoded documents and fed raw ones (the
//! stages' raw paths). How: seeded random documents (seed printed, set it with CAIRN_SEED) run
//! through both; results compared exactly (sums with a tolerance).

use super::{MapEnv, run_env, run_env_raw};
use bson::{Bson, Document, doc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use storage::order::compare_bson;

const ROUNDS: usize = 300;
const DOCS_MAX: usize = 40;

fn random_scalar(rng: &mut StdRng) -> Option<Bson> {
    match rng.random_range(0..8) {
        0 => None,
        1 => Some(Bson::Null),
        2 => Some(Bson::Int32(rng.random_range(-5..6))),
        3 => Some(Bson::Int64(rng.random_range(-5..6))),
        4 => Some(Bson::Double(f64::from(rng.random_range(-10..11)) / 2.0)),
        5 => Some(Bson::String(
            ["a", "b", "B", ""][rng.random_range(0..4)].to_string(),
        )),
        6 => Some(Bson::Int32(rng.random_range(0..3))),
        _ => Some(Bson::Boolean(rng.random_bool(0.5))),
    }
}

fn random_doc(rng: &mut StdRng, i: usize) -> Document {
    let mut d = doc! {"_id": i32::try_from(i).unwrap_or(0)};
    for field in ["a", "g"] {
        if let Some(v) = random_scalar(rng) {
            d.insert(field, v);
        }
    }
    if rng.random_bool(0.7) {
        let n = rng.random_range(0..4);
        let items: Vec<Bson> = (0..n).filter_map(|_| random_scalar(rng)).collect();
        d.insert("arr", items);
    }
    d
}

fn is_number(v: &Bson) -> bool {
    matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))
}

fn as_f64(v: &Bson) -> f64 {
    match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        _ => 0.0,
    }
}

/// One stage with its reference implementation.
enum Step {
    MatchGt(i32),
    SortA(bool),
    Skip(usize),
    Limit(usize),
    Unwind,
    ProjectAG,
    GroupG,
    Count,
    AddFieldsB,
    UnsetArr,
    SortByCountG,
    LookupSelf,
    Facet(Box<Step>, Box<Step>),
}

impl Step {
    fn random(rng: &mut StdRng) -> Step {
        match rng.random_range(0..13) {
            8 => Step::AddFieldsB,
            9 => Step::UnsetArr,
            10 => Step::SortByCountG,
            11 => Step::LookupSelf,
            12 => Step::Facet(
                Box::new(Step::random_simple(rng)),
                Box::new(Step::random_simple(rng)),
            ),
            _ => Step::random_simple(rng),
        }
    }

    fn random_simple(rng: &mut StdRng) -> Step {
        match rng.random_range(0..8) {
            0 => Step::MatchGt(rng.random_range(-3..4)),
            1 => Step::SortA(rng.random_bool(0.5)),
            2 => Step::Skip(rng.random_range(0..5)),
            3 => Step::Limit(rng.random_range(1..10)),
            4 => Step::Unwind,
            5 => Step::ProjectAG,
            6 => Step::GroupG,
            _ => Step::Count,
        }
    }

    fn stage(&self) -> Bson {
        match self {
            Step::MatchGt(t) => bson::bson!({"$match": {"a": {"$gt": *t}}}),
            // `_id` breaks ties so that both sides agree on one order.
            Step::SortA(desc) => {
                bson::bson!({"$sort": {"a": if *desc { -1 } else { 1 }, "_id": 1}})
            }
            Step::Skip(n) => bson::bson!({"$skip": i64::try_from(*n).unwrap_or(0)}),
            Step::Limit(n) => bson::bson!({"$limit": i64::try_from(*n).unwrap_or(1)}),
            Step::Unwind => bson::bson!({"$unwind": "$arr"}),
            Step::ProjectAG => bson::bson!({"$project": {"a": 1, "g": 1}}),
            Step::GroupG => {
                bson::bson!({"$group": {"_id": "$g", "s": {"$sum": "$a"}, "n": {"$count": {}}, "m": {"$max": "$a"}}})
            }
            Step::Count => bson::bson!({"$count": "a"}),
            Step::AddFieldsB => bson::bson!({"$addFields": {"b": "$g"}}),
            Step::UnsetArr => bson::bson!({"$unset": "arr"}),
            Step::SortByCountG => bson::bson!({"$sortByCount": "$g"}),
            Step::LookupSelf => {
                bson::bson!({"$lookup": {"from": "self", "localField": "g", "foreignField": "a", "as": "j"}})
            }
            Step::Facet(x, y) => bson::bson!({"$facet": {"x": [x.stage()], "y": [y.stage()]}}),
        }
    }

    fn reference(&self, docs: Vec<Document>, foreign: &[Document]) -> Vec<Document> {
        match self {
            Step::MatchGt(t) => docs
                .into_iter()
                .filter(|d| {
                    d.get("a")
                        .is_some_and(|a| is_number(a) && as_f64(a) > f64::from(*t))
                })
                .collect(),
            Step::SortA(desc) => {
                let mut docs = docs;
                docs.sort_by(|x, y| {
                    let key = |d: &Document| d.get("a").cloned().unwrap_or(Bson::Null);
                    let o = compare_bson(&key(x), &key(y));
                    let o = if *desc { o.reverse() } else { o };
                    o.then_with(|| {
                        compare_bson(
                            &x.get("_id").cloned().unwrap_or(Bson::Null),
                            &y.get("_id").cloned().unwrap_or(Bson::Null),
                        )
                    })
                });
                docs
            }
            Step::Skip(n) => docs.into_iter().skip(*n).collect(),
            Step::Limit(n) => docs.into_iter().take(*n).collect(),
            Step::Unwind => reference_unwind(docs),
            Step::ProjectAG => docs
                .into_iter()
                .map(|d| {
                    let mut out = Document::new();
                    for k in ["_id", "a", "g"] {
                        if let Some(v) = d.get(k) {
                            out.insert(k, v.clone());
                        }
                    }
                    out
                })
                .collect(),
            Step::GroupG => reference_group(docs),
            Step::Count if docs.is_empty() => vec![],
            Step::Count => vec![doc! {"a": i32::try_from(docs.len()).unwrap_or(i32::MAX)}],
            Step::AddFieldsB => docs
                .into_iter()
                .map(|mut d| {
                    match d.get("g").cloned() {
                        Some(g) => d.insert("b", g),
                        None => d.remove("b"),
                    };
                    d
                })
                .collect(),
            Step::UnsetArr => docs
                .into_iter()
                .map(|mut d| {
                    d.remove("arr");
                    d
                })
                .collect(),
            Step::SortByCountG => reference_sort_by_count(docs),
            Step::LookupSelf => reference_lookup(docs, foreign),
            Step::Facet(x, y) => {
                let wrap =
                    |out: Vec<Document>| Bson::Array(out.into_iter().map(Bson::Document).collect());
                vec![
                    doc! {"x": wrap(x.reference(docs.clone(), foreign)), "y": wrap(y.reference(docs, foreign))},
                ]
            }
        }
    }
}

fn reference_sort_by_count(docs: Vec<Document>) -> Vec<Document> {
    let mut groups: Vec<(Bson, i32)> = Vec::new();
    for d in docs {
        let key = d.get("g").cloned().unwrap_or(Bson::Null);
        match groups
            .iter_mut()
            .find(|(k, _)| compare_bson(k, &key) == Ordering::Equal)
        {
            Some((_, n)) => *n += 1,
            None => groups.push((key, 1)),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    groups
        .into_iter()
        .map(|(k, n)| doc! {"_id": k, "count": n})
        .collect()
}

/// `$lookup` by nested loops: equal values (missing reads as null) join.
fn reference_lookup(docs: Vec<Document>, foreign: &[Document]) -> Vec<Document> {
    docs.into_iter()
        .map(|mut d| {
            let local = d.get("g").cloned().unwrap_or(Bson::Null);
            let joined: Vec<Bson> = foreign
                .iter()
                .filter(|f| {
                    compare_bson(&f.get("a").cloned().unwrap_or(Bson::Null), &local)
                        == Ordering::Equal
                })
                .map(|f| Bson::Document(f.clone()))
                .collect();
            d.insert("j", joined);
            d
        })
        .collect()
}

fn reference_unwind(docs: Vec<Document>) -> Vec<Document> {
    let mut out = Vec::new();
    for d in docs {
        match d.get("arr") {
            Some(Bson::Array(items)) => {
                for item in items {
                    let mut c = d.clone();
                    c.insert("arr", item.clone());
                    out.push(c);
                }
            }
            None | Some(Bson::Null) => {}
            Some(_) => out.push(d),
        }
    }
    out
}

fn reference_group(docs: Vec<Document>) -> Vec<Document> {
    // (key, values of `a`, number of documents)
    let mut groups: Vec<(Bson, Vec<Bson>, i32)> = Vec::new();
    for d in docs {
        let key = d.get("g").cloned().unwrap_or(Bson::Null);
        let a = d.get("a").cloned();
        match groups
            .iter_mut()
            .find(|(k, _, _)| compare_bson(k, &key) == Ordering::Equal)
        {
            Some((_, values, n)) => {
                values.extend(a);
                *n += 1;
            }
            None => groups.push((key, a.into_iter().collect(), 1)),
        }
    }
    groups
        .into_iter()
        .map(|(key, values, n)| {
            let numbers: Vec<&Bson> = values.iter().filter(|v| is_number(v)).collect();
            let sum = if numbers.iter().any(|v| matches!(v, Bson::Double(_))) {
                Bson::Double(numbers.iter().map(|v| as_f64(v)).sum())
            } else if numbers.iter().any(|v| matches!(v, Bson::Int64(_))) {
                Bson::Int64(numbers.iter().map(|v| as_f64(v) as i64).sum())
            } else {
                Bson::Int32(numbers.iter().map(|v| as_f64(v) as i32).sum())
            };
            let max = values
                .iter()
                .filter(|v| !matches!(v, Bson::Null))
                // mongod keeps the first of equal maxima.
                .fold(None::<&Bson>, |best, v| match best {
                    Some(b) if compare_bson(v, b) != Ordering::Greater => Some(b),
                    _ => Some(v),
                })
                .cloned()
                .unwrap_or(Bson::Null);
            doc! {"_id": key, "s": sum, "n": n, "m": max}
        })
        .collect()
}

#[test]
fn random_pipelines_match_the_reference() {
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("differential seed: {seed} (set CAIRN_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..ROUNDS {
        let n = rng.random_range(0..DOCS_MAX);
        let input: Vec<Document> = (0..n).map(|i| random_doc(&mut rng, i)).collect();
        let steps: Vec<Step> = (0..rng.random_range(1..5))
            .map(|_| Step::random(&mut rng))
            .collect();
        let pipeline = Bson::Array(steps.iter().map(Step::stage).collect());
        let mut expected = input.clone();
        for s in &steps {
            expected = s.reference(expected, &input);
        }
        let mut env = MapEnv::default();
        env.0.insert("self".into(), input.clone());
        let got_raw = run_env_raw(pipeline.clone(), input.clone(), &env)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let got =
            run_env(pipeline.clone(), input, &env).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(
            got, expected,
            "seed {seed} round {round} pipeline {pipeline}"
        );
        // The same pipeline fed raw documents (as from a collection scan) agrees too.
        assert_eq!(
            got_raw, expected,
            "raw input: seed {seed} round {round} pipeline {pipeline}"
        );
    }
}
