//! Proves text indexes (compound ones included) answer `$text` as a simple reference matcher
//! does, score as mongod's formula promises (monotone in term frequency and weight), list and
//! explain themselves in mongod's shapes and refuse bad input with mongod's codes. How: a real
//! `cairn` process through the Rust driver, seeded random documents checked against a reference
//! written here.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, explain, winning};
use futures_util::TryStreamExt;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::collections::{BTreeSet, HashSet};
use storage::text::language;
use storage::text::tokenize::{self, Fold};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

pub(crate) fn seed() -> u64 {
    let seed = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CAIRN_SEED={seed}");
    seed
}

pub(crate) async fn all(c: &mongodb::Collection<Document>, filter: Document) -> Vec<Document> {
    c.find(filter).await.unwrap().try_collect().await.unwrap()
}

fn ids(docs: &[Document]) -> BTreeSet<i32> {
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

const WORDS: &[&str] = &[
    "run", "running", "runs", "runner", "coffee", "coffees", "tea", "the", "and", "of", "green",
    "greener", "house", "houses", "fish", "fishing", "fished", "blue", "sky", "skies", "café",
    "Cafe", "CAFE", "river", "rivers", "stone",
];

/// A random sentence of 1..8 words.
pub(crate) fn sentence(rng: &mut impl Rng) -> String {
    let n = rng.random_range(1..8);
    (0..n)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

/// The reference: English, fields `title` and `body`, written from the rules in the docs.
fn reference(doc: &Document, words: &[&str], negated: &[&str], phrase: Option<&str>) -> bool {
    let en = language::lookup("english").unwrap();
    let texts: Vec<&str> = ["title", "body"]
        .iter()
        .filter_map(|f| doc.get_str(f).ok())
        .collect();
    let doc_terms: HashSet<String> = texts
        .iter()
        .flat_map(|t| tokenize::terms(t, en, Fold::default()))
        .collect();
    let query_terms = |ws: &[&str]| -> Vec<String> {
        ws.iter()
            .filter_map(|w| tokenize::term(w, en, Fold::default()))
            .collect()
    };
    let mut positive = query_terms(words);
    if let Some(p) = phrase {
        positive.extend(tokenize::terms(p, en, Fold::default()));
    }
    let any = positive.iter().any(|t| doc_terms.contains(t));
    let none_negated = !query_terms(negated).iter().any(|t| doc_terms.contains(t));
    let phrase_ok = phrase.is_none_or(|p| {
        let p = tokenize::fold_text(p, Fold::default());
        texts
            .iter()
            .any(|t| tokenize::fold_text(t, Fold::default()).contains(&p))
    });
    any && none_negated && phrase_ok
}

#[tokio::test]
async fn text_search_matches_the_reference() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_ref");
    let c = db.collection::<Document>("docs");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let docs: Vec<Document> = (0..400)
        .map(|i| {
            let mut d = doc! { "_id": i, "title": sentence(&mut rng) };
            if rng.random_bool(0.7) {
                d.insert("body", sentence(&mut rng));
            }
            d
        })
        .collect();
    c.insert_many(docs.clone()).await.unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "title": "text", "body": "text" })
            .build(),
    )
    .await
    .unwrap();
    let mut nonempty = 0;
    for round in 0..60 {
        let n = rng.random_range(1..4);
        let words: Vec<&str> = (0..n)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect();
        let negated: Vec<&str> = if round % 3 == 0 {
            vec![WORDS[rng.random_range(0..WORDS.len())]]
        } else {
            vec![]
        };
        let phrase = (round % 4 == 1).then(|| {
            let title = docs[rng.random_range(0..docs.len())]
                .get_str("title")
                .unwrap();
            title.split(' ').take(2).collect::<Vec<_>>().join(" ")
        });
        let mut search = words.join(" ");
        for w in &negated {
            search.push_str(&format!(" -{w}"));
        }
        if let Some(p) = &phrase {
            search.push_str(&format!(" \"{p}\""));
        }
        let expected: BTreeSet<i32> = docs
            .iter()
            .filter(|d| reference(d, &words, &negated, phrase.as_deref()))
            .map(|d| d.get_i32("_id").unwrap())
            .collect();
        let filter = doc! { "$text": { "$search": search.clone() } };
        let found = ids(&all(&c, filter.clone()).await);
        assert_eq!(found, expected, "$search {search:?}");
        // count goes through the matcher, not the TEXT_OR stage: same answer.
        let counted = c.count_documents(filter.clone()).await.unwrap();
        assert_eq!(counted as usize, expected.len(), "count {search:?}");
        let piped: Vec<Document> = c
            .aggregate(vec![doc! { "$match": filter }])
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(ids(&piped), expected, "aggregate {search:?}");
        nonempty += usize::from(!expected.is_empty() && expected.len() < docs.len());
    }
    assert!(
        nonempty > 20,
        "the queries must select something: {nonempty}"
    );
}

#[tokio::test]
async fn scores_grow_with_frequency_and_weight() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_score");
    let c = db.collection::<Document>("s");
    let docs: Vec<Document> = (1..=6)
        .map(|i| doc! { "_id": i, "body": format!("alpha {}", "beta ".repeat(i as usize)) })
        .chain([
            doc! { "_id": 7, "title": "beta alpha" },
            doc! { "_id": 8, "body": "beta alpha" },
        ])
        .collect();
    c.insert_many(docs).await.unwrap();
    db.run_command(doc! { "createIndexes": "s", "indexes": [{
        "key": { "title": "text", "body": "text" }, "name": "t", "weights": { "title": 5 },
    }] })
    .await
    .unwrap();
    let scored: Vec<Document> = c
        .find(doc! { "$text": { "$search": "beta" } })
        .projection(doc! { "score": { "$meta": "textScore" } })
        .sort(doc! { "score": { "$meta": "textScore" } })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let order: Vec<i32> = scored.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(order[0], 7, "the weighted title scores highest: {scored:?}");
    let by_frequency: Vec<i32> = order.iter().copied().filter(|i| *i <= 6).collect();
    assert_eq!(by_frequency, [6, 5, 4, 3, 2, 1], "{scored:?}");
    let score = |id: i32| {
        scored
            .iter()
            .find(|d| d.get_i32("_id").unwrap() == id)
            .and_then(|d| d.get_f64("score").ok())
            .unwrap()
    };
    assert!((score(7) - 5.0 * score(8)).abs() < 1e-9);
    assert!(
        scored
            .iter()
            .all(|d| d.contains_key("body") || d.contains_key("title"))
    );

    // Explain: TEXT_MATCH over TEXT_OR over the index, and what it read.
    let e = explain(
        &db,
        doc! { "find": "s", "filter": { "$text": { "$search": "beta -gamma" } } },
    )
    .await;
    let plan = winning(&e);
    assert_eq!(plan.get_str("stage").unwrap(), "TEXT_MATCH", "{plan}");
    assert_eq!(plan.get_str("indexName").unwrap(), "t");
    let parsed = plan.get_document("parsedTextQuery").unwrap();
    assert_eq!(
        parsed.get_array("terms").unwrap(),
        &vec![Bson::from("beta")]
    );
    assert_eq!(
        parsed.get_array("negatedTerms").unwrap(),
        &vec![Bson::from("gamma")]
    );
    let or = plan.get_document("inputStage").unwrap();
    assert_eq!(or.get_str("stage").unwrap(), "TEXT_OR");
    let stats = e.get_document("executionStats").unwrap();
    assert_eq!(
        stats
            .get_i64("nReturned")
            .or_else(|_| stats.get_i32("nReturned").map(i64::from))
            .unwrap(),
        8
    );
}

#[tokio::test]
async fn specs_languages_and_errors_follow_mongod() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_errors");
    let c = db.collection::<Document>("e");
    c.insert_many(vec![
        doc! { "_id": 1, "t": "los corredores corren", "language": "spanish" },
        doc! { "_id": 2, "t": "the runners run" },
        doc! { "_id": 3, "t": "Die Häuser", "idioma": "x" },
    ])
    .await
    .unwrap();
    let none = db.collection::<Document>("none");
    none.insert_one(doc! { "t": "x" }).await.unwrap();
    let err = none
        .find(doc! { "$text": { "$search": "x" } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 27);
    db.run_command(
        doc! { "createIndexes": "e", "indexes": [{ "key": { "t": "text" }, "name": "t_text" }] },
    )
    .await
    .unwrap();
    let reply = db.run_command(doc! { "listIndexes": "e" }).await.unwrap();
    let listed: Vec<Document> = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap()
        .iter()
        .filter_map(|v| v.as_document().cloned())
        .collect();
    let text = listed
        .iter()
        .find(|i| i.get_str("name").is_ok_and(|n| n == "t_text"))
        .unwrap();
    assert_eq!(
        text.get_document("key").unwrap(),
        &doc! { "_fts": "text", "_ftsx": 1 },
        "{text}"
    );
    assert_eq!(text.get_document("weights").unwrap(), &doc! { "t": 1 });
    assert_eq!(text.get_str("default_language").unwrap(), "english");
    assert_eq!(text.get_str("language_override").unwrap(), "language");
    assert_eq!(text.get_i32("textIndexVersion").unwrap(), 3);
    // The same spec again is a no-op; another text index is 85.
    db.run_command(
        doc! { "createIndexes": "e", "indexes": [{ "key": { "t": "text" }, "name": "t_text" }] },
    )
    .await
    .unwrap();
    let second = db
        .run_command(doc! { "createIndexes": "e", "indexes": [{ "key": { "u": "text" }, "name": "u_text" }] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&second), 85);
    // Each document is stemmed in its own language; the query in $language.
    let es = all(
        &c,
        doc! { "$text": { "$search": "corriendo", "$language": "es" } },
    )
    .await;
    assert_eq!(ids(&es), BTreeSet::from([1]));
    let en = all(&c, doc! { "$text": { "$search": "running" } }).await;
    assert_eq!(ids(&en), BTreeSet::from([2]));
    let bad_language = c
        .insert_one(doc! { "t": "x", "language": "klingon" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&bad_language), 17262);
    for (filter, code) in [
        (
            doc! { "$or": [{ "$text": { "$search": "x" } }, { "a": 1 }] },
            2,
        ),
        (doc! { "$text": { "$search": 1 } }, 2),
        (
            doc! { "$text": { "$search": "x", "$language": "klingon" } },
            2,
        ),
    ] {
        let e = c.find(filter.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{filter}");
    }
    let meta = c
        .find(doc! {})
        .sort(doc! { "s": { "$meta": "textScore" } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&meta), 40218);
    let late = c
        .aggregate(vec![
            doc! { "$limit": 5 },
            doc! { "$match": { "$text": { "$search": "x" } } },
        ])
        .await
        .unwrap_err();
    assert_eq!(error_code(&late), 17313);
    // Updates and deletes filter with $text too.
    let updated = c
        .update_many(
            doc! { "$text": { "$search": "runner" } },
            doc! { "$set": { "hit": true } },
        )
        .await
        .unwrap();
    assert_eq!(updated.modified_count, 1);
    let deleted = c
        .delete_many(doc! { "$text": { "$search": "häuser" } })
        .await
        .unwrap();
    assert_eq!(deleted.deleted_count, 1);
}

pub(crate) async fn piped(
    c: &mongodb::Collection<Document>,
    stages: Vec<Document>,
) -> Vec<Document> {
    c.aggregate(stages)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

/// `_id` to the `field` of each document.
pub(crate) fn scores(docs: &[Document], field: &str) -> BTreeMap<i32, f64> {
    docs.iter()
        .map(|d| (d.get_i32("_id").unwrap(), d.get_f64(field).unwrap()))
        .collect()
}

/// True when no field name anywhere in `d` starts with `$` (the score field stays inside).
pub(crate) fn clean(d: &Document) -> bool {
    d.iter().all(|(k, v)| {
        !k.starts_with('$')
            && match v {
                Bson::Document(s) => clean(s),
                Bson::Array(items) => items.iter().all(|i| i.as_document().is_none_or(clean)),
                _ => true,
            }
    })
}

#[tokio::test]
async fn compound_text_indexes_equal_a_brute_force_evaluation() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_compound");
    let c = db.collection::<Document>("c");
    let plain = db.collection::<Document>("plain");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let cats = ["a", "b", "c"];
    let docs: Vec<Document> = (0..300)
        .map(|i| {
            let mut d = doc! { "_id": i, "title": sentence(&mut rng), "year": rng.random_range(2000..2006) };
            if rng.random_bool(0.9) {
                d.insert("cat", cats[rng.random_range(0..cats.len())]);
            }
            d
        })
        .collect();
    c.insert_many(docs.clone()).await.unwrap();
    plain.insert_many(docs.clone()).await.unwrap();
    db.run_command(doc! { "createIndexes": "c", "indexes": [{
        "key": { "cat": 1, "title": "text", "year": -1 }, "name": "ct",
    }] })
    .await
    .unwrap();
    plain
        .create_index(
            mongodb::IndexModel::builder()
                .keys(doc! { "title": "text" })
                .build(),
        )
        .await
        .unwrap();
    let listed = db.run_command(doc! { "listIndexes": "c" }).await.unwrap();
    let batch = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let ct = batch
        .iter()
        .filter_map(Bson::as_document)
        .find(|i| i.get_str("name").is_ok_and(|n| n == "ct"))
        .unwrap();
    assert_eq!(
        ct.get_document("key").unwrap(),
        &doc! { "cat": 1, "_fts": "text", "_ftsx": 1, "year": -1 }
    );
    let scored = |filter: Document| {
        let (c, plain) = (c.clone(), plain.clone());
        async move {
            let get = |coll: mongodb::Collection<Document>, f: Document| async move {
                let found: Vec<Document> = coll
                    .find(f)
                    .projection(doc! { "s": { "$meta": "textScore" } })
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
                scores(&found, "s")
            };
            (get(c, filter.clone()).await, get(plain, filter).await)
        }
    };
    let mut nonempty = 0;
    for round in 0..30 {
        let word = WORDS[rng.random_range(0..WORDS.len())];
        let cat = cats[round % cats.len()];
        let year = rng.random_range(2000..2006);
        let mut filter = doc! { "cat": cat, "$text": { "$search": word } };
        if round % 2 == 0 {
            filter.insert("year", doc! { "$gte": year });
        }
        let expected: BTreeSet<i32> = docs
            .iter()
            .filter(|d| reference(d, &[word], &[], None))
            .filter(|d| d.get_str("cat").is_ok_and(|c| c == cat))
            .filter(|d| round % 2 == 1 || d.get_i32("year").unwrap() >= year)
            .map(|d| d.get_i32("_id").unwrap())
            .collect();
        let (compound, single) = scored(filter.clone()).await;
        assert_eq!(
            compound.keys().copied().collect::<BTreeSet<_>>(),
            expected,
            "{filter}"
        );
        // The same documents and scores as a plain text index gives.
        assert_eq!(compound, single, "{filter}");
        let piped = piped(
            &c,
            vec![
                doc! { "$match": filter.clone() },
                doc! { "$project": { "s": { "$meta": "textScore" } } },
            ],
        )
        .await;
        assert_eq!(scores(&piped, "s"), compound, "aggregate {filter}");
        nonempty += usize::from(!expected.is_empty());
    }
    assert!(
        nonempty > 5,
        "the queries must select something: {nonempty}"
    );
    // A missing prefix field is null in the index.
    let (nulls, _) =
        scored(doc! { "cat": Bson::Null, "$text": { "$search": "coffee tea river" } }).await;
    let want: BTreeSet<i32> = docs
        .iter()
        .filter(|d| !d.contains_key("cat") && reference(d, &["coffee", "tea", "river"], &[], None))
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(nulls.keys().copied().collect::<BTreeSet<_>>(), want);

    // Without an equality on every prefix field: mongod's NoQueryExecutionPlans.
    for filter in [
        doc! { "$text": { "$search": "coffee" } },
        doc! { "cat": { "$in": ["a"] }, "$text": { "$search": "coffee" } },
    ] {
        let e = c.find(filter.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), 291, "{filter}");
        let e = c
            .aggregate(vec![doc! { "$match": filter.clone() }])
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), 291, "aggregate {filter}");
        let e = c.count_documents(filter.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), 291, "count {filter}");
        let e = c
            .update_many(filter.clone(), doc! { "$set": { "x": 1 } })
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), 291, "update {filter}");
        let e = c.delete_many(filter.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), 291, "delete {filter}");
    }
    // count with the prefix equality answers as find does.
    let filter = doc! { "cat": "a", "$text": { "$search": "coffee tea" } };
    let (found, _) = scored(filter.clone()).await;
    assert_eq!(
        c.count_documents(filter).await.unwrap() as usize,
        found.len()
    );
    // Explain: the prefix equality bounds the scans.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "cat": "b", "$text": { "$search": "coffee tea" } } },
    )
    .await;
    let plan = winning(&e);
    assert_eq!(plan.get_str("stage").unwrap(), "TEXT_MATCH", "{plan}");
    assert_eq!(
        plan.get_document("indexPrefix").unwrap(),
        &doc! { "cat": "b" }
    );
    let scans = plan
        .get_document("inputStage")
        .unwrap()
        .get_array("inputStages")
        .unwrap();
    assert_eq!(scans.len(), 2);
    let scan = scans[0].as_document().unwrap();
    assert_eq!(
        scan.get_document("keyPattern").unwrap(),
        &doc! { "cat": 1, "_fts": "text", "_ftsx": 1, "year": -1 }
    );
    assert!(
        scan.get_document("indexBounds")
            .unwrap()
            .contains_key("cat")
    );
    // A suffix predicate rejects entries before the fetch: only the matches are fetched.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "cat": "b", "$text": { "$search": "coffee tea river" }, "year": { "$gte": 2003 } } },
    )
    .await;
    let stats = e.get_document("executionStats").unwrap();
    let number = |k: &str| {
        stats
            .get_i64(k)
            .or_else(|_| stats.get_i32(k).map(i64::from))
            .unwrap()
    };
    assert!(number("nReturned") > 0, "{stats}");
    assert_eq!(number("totalDocsExamined"), number("nReturned"), "{stats}");
    assert!(number("totalKeysExamined") > number("nReturned"), "{stats}");
    // A prefix field holding an array refuses the write.
    let e = c
        .insert_one(doc! { "cat": ["a", "b"], "title": "x" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 16675);
}

#[tokio::test]
async fn compound_text_index_specs_follow_mongod() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_compound_specs");
    for key in [
        doc! { "a": "text", "b": 1, "c": "text" },
        doc! { "a": 1, "t": "text", "b": "hashed" },
        doc! { "a": 2, "t": "text" },
        doc! { "_fts": "text", "a": 1 },
    ] {
        let e = db
            .run_command(
                doc! { "createIndexes": "s", "indexes": [{ "key": key.clone(), "name": "x" }] },
            )
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), 67, "{key}");
    }
    for key in [
        doc! { "a": -1, "b": 1, "t": "text", "u": "text" },
        doc! { "t": "text", "z": 1 },
    ] {
        db.run_command(
            doc! { "createIndexes": "ok", "indexes": [{ "key": key.clone(), "name": "x" }] },
        )
        .await
        .unwrap();
        db.run_command(doc! { "dropIndexes": "ok", "index": "x" })
            .await
            .unwrap();
    }
}
