//! Proves an aggregate whose first stage is `$text` reads the text index and that
//! `{$meta: "textScore"}` gives find's scores in every later stage, and never leaks. How: a real
//! `cairn` process through the Rust driver, seeded documents compared with find's answers.

use crate::text_indexes::{all, clean, piped, scores, seed, sentence};
use bson::{Document, doc};
use cairn_e2e::{Server, error_code, winning};
use futures_util::TryStreamExt;
use rand::SeedableRng;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

#[tokio::test]
async fn aggregate_scores_equal_find_through_every_stage() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_agg");
    let c = db.collection::<Document>("docs");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let docs: Vec<Document> = (0..300)
        .map(|i| doc! { "_id": i, "title": sentence(&mut rng), "body": sentence(&mut rng), "k": i % 3 })
        .collect();
    c.insert_many(docs).await.unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "title": "text", "body": "text" })
            .build(),
    )
    .await
    .unwrap();
    let meta = || doc! { "$meta": "textScore" };
    for search in [
        "coffee",
        "river fishing",
        "green -tea",
        "\"blue sky\" stone",
    ] {
        let text = doc! { "$match": { "$text": { "$search": search } } };
        let found: Vec<Document> = c
            .find(doc! { "$text": { "$search": search } })
            .projection(doc! { "s": meta() })
            .sort(doc! { "s": meta() })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let expected = scores(&found, "s");
        // $project, then $sort by the score: find's scores, highest first.
        let projected = piped(
            &c,
            vec![
                text.clone(),
                doc! { "$project": { "s": meta() } },
                doc! { "$sort": { "x": meta() } },
            ],
        )
        .await;
        assert_eq!(scores(&projected, "s"), expected, "$project {search:?}");
        let order: Vec<f64> = projected.iter().map(|d| d.get_f64("s").unwrap()).collect();
        assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");
        // $addFields keeps the document; the score field never reaches the client.
        let added = piped(
            &c,
            vec![
                text.clone(),
                doc! { "$addFields": { "s": meta(), "root": "$$ROOT" } },
            ],
        )
        .await;
        assert_eq!(scores(&added, "s"), expected, "$addFields {search:?}");
        assert!(added.iter().all(|d| clean(d) && d.contains_key("title")));
        // $replaceRoot, an inclusion $project and $unwind carry the score.
        let carried = piped(
            &c,
            vec![
                text.clone(),
                doc! { "$replaceRoot": { "newRoot": { "_id": "$_id", "w": ["a", "b"] } } },
                doc! { "$project": { "w": 1 } },
                doc! { "$unwind": "$w" },
                doc! { "$set": { "s": meta() } },
            ],
        )
        .await;
        assert_eq!(carried.len(), 2 * expected.len());
        assert_eq!(scores(&carried, "s"), expected, "$replaceRoot {search:?}");
        // $group reads it; after $group it is gone (missing, as in mongod).
        let grouped = piped(
            &c,
            vec![
                text.clone(),
                doc! { "$group": { "_id": "$k", "t": { "$sum": meta() }, "n": { "$sum": 1 } } },
                doc! { "$project": { "t": 1, "n": 1, "gone": meta() } },
            ],
        )
        .await;
        let total: f64 = grouped.iter().map(|g| g.get_f64("t").unwrap()).sum();
        let want: f64 = expected.values().sum();
        assert!((total - want).abs() < 1e-9, "{total} {want}");
        assert!(grouped.iter().all(|g| !g.contains_key("gone")));
        // Top-k by score after $sort and $limit.
        let top = piped(
            &c,
            vec![
                text.clone(),
                doc! { "$sort": { "x": meta(), "_id": 1 } },
                doc! { "$limit": 3 },
                doc! { "$project": { "s": meta() } },
            ],
        )
        .await;
        let mut best: Vec<f64> = expected.values().copied().collect();
        best.sort_by(|a, b| b.total_cmp(a));
        best.truncate(3);
        let got: Vec<f64> = top.iter().map(|d| d.get_f64("s").unwrap()).collect();
        assert_eq!(got, best, "top 3 {search:?}");
        // $lookup keeps the outer document's score; $facet's sub-pipelines see it, and the
        // documents its arrays hold leave without the field.
        let joined = piped(
            &c,
            vec![
                text.clone(),
                doc! { "$lookup": { "from": "docs", "localField": "_id", "foreignField": "_id", "as": "me" } },
                doc! { "$project": { "s": meta(), "me._id": 1 } },
            ],
        )
        .await;
        assert_eq!(scores(&joined, "s"), expected, "$lookup {search:?}");
        let faceted = piped(
            &c,
            vec![
                text.clone(),
                doc! { "$facet": { "all": [{ "$addFields": { "s": meta() } }] } },
            ],
        )
        .await;
        let all: Vec<Document> = faceted[0]
            .get_array("all")
            .unwrap()
            .iter()
            .filter_map(|d| d.as_document().cloned())
            .collect();
        assert_eq!(scores(&all, "s"), expected, "$facet {search:?}");
        assert!(faceted.iter().all(clean));
    }
}

#[tokio::test]
async fn the_score_survives_a_sort_that_spills() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_spill");
    let c = db.collection::<Document>("s");
    let docs: Vec<Document> = (0..200i32)
        .map(|i| doc! { "_id": i, "t": format!("alpha {}", "beta ".repeat(1 + (i % 7) as usize)), "pad": "x".repeat(200) })
        .collect();
    c.insert_many(docs).await.unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "t": "text" })
            .build(),
    )
    .await
    .unwrap();
    let found: Vec<Document> = c
        .find(doc! { "$text": { "$search": "beta" } })
        .projection(doc! { "s": { "$meta": "textScore" } })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    client
        .database("admin")
        .run_command(
            doc! { "setParameter": 1, "internalQueryMaxBlockingSortMemoryUsageBytes": 4096 },
        )
        .await
        .unwrap();
    let pipeline = vec![
        doc! { "$match": { "$text": { "$search": "beta" } } },
        doc! { "$sort": { "_id": -1 } },
        doc! { "$project": { "s": { "$meta": "textScore" } } },
    ];
    // The bound is in force: without allowDiskUse the sort fails, with it the sort spills.
    let held = c.aggregate(pipeline.clone()).await.unwrap_err();
    assert_eq!(error_code(&held), 292);
    let sorted: Vec<Document> = c
        .aggregate(pipeline)
        .allow_disk_use(true)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(sorted.len(), 200);
    assert_eq!(scores(&sorted, "s"), scores(&found, "s"));
    let ids: Vec<i32> = sorted.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]));
}

#[tokio::test]
async fn aggregate_text_errors_and_explain_follow_mongod() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("text_agg_errors");
    let c = db.collection::<Document>("e");
    c.insert_many(vec![
        doc! { "_id": 1, "t": "apple" },
        doc! { "_id": 2, "t": "apple banana" },
    ])
    .await
    .unwrap();
    let text = || doc! { "$match": { "$text": { "$search": "apple" } } };
    // No text index yet: 27, as find.
    let e = c.aggregate(vec![text()]).await.unwrap_err();
    assert_eq!(error_code(&e), 27);
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "t": "text" })
            .build(),
    )
    .await
    .unwrap();
    let meta = || doc! { "$meta": "textScore" };
    for (stages, code) in [
        (vec![doc! { "$project": { "s": meta() } }], 40218),
        (vec![doc! { "$sort": { "s": meta() } }], 40218),
        (
            vec![
                doc! { "$match": { "t": "apple" } },
                doc! { "$addFields": { "s": meta() } },
            ],
            40218,
        ),
        (
            vec![text(), doc! { "$project": { "s": { "$meta": "bogus" } } }],
            17308,
        ),
        (
            vec![text(), doc! { "$project": { "s": { "$meta": 1 } } }],
            17307,
        ),
        (vec![doc! { "$limit": 1 }, text()], 17313),
        (
            vec![doc! { "$lookup": { "from": "e", "pipeline": [text()], "as": "x" } }],
            17313,
        ),
        (vec![doc! { "$facet": { "f": [text()] } }], 40600),
    ] {
        let e = c.aggregate(stages.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{stages:?}");
    }
    // Kinds cairn never produces read as missing, never fail.
    let other = piped(
        &c,
        vec![
            text(),
            doc! { "$project": { "k": { "$meta": "indexKey" }, "s": meta() } },
        ],
    )
    .await;
    assert_eq!(other.len(), 2);
    assert!(
        other
            .iter()
            .all(|d| !d.contains_key("k") && d.contains_key("s"))
    );
    // $out writes documents without the score field.
    piped(
        &c,
        vec![
            text(),
            doc! { "$set": { "s": meta() } },
            doc! { "$out": "scored" },
        ],
    )
    .await;
    let written = all(&db.collection("scored"), doc! {}).await;
    assert_eq!(written.len(), 2);
    assert!(written.iter().all(|d| clean(d) && d.get_f64("s").is_ok()));
    // Explain: the text stages under $cursor, the $match folded into them.
    let e = db
        .run_command(doc! {
            "explain": { "aggregate": "e", "pipeline": [text(), { "$project": { "s": meta() } }], "cursor": {} },
            "verbosity": "queryPlanner",
        })
        .await
        .unwrap();
    let stages = e.get_array("stages").unwrap();
    let cursor = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap();
    assert_eq!(
        winning(cursor).get_str("stage").unwrap(),
        "TEXT_MATCH",
        "{e}"
    );
    let names: Vec<&str> = stages[1..]
        .iter()
        .filter_map(|s| s.as_document()?.keys().next().map(String::as_str))
        .collect();
    assert_eq!(names, ["$project"]);
}
