//! Proves collation end to end through the Rust driver: the server's collated sort of a unicode
//! corpus equals ICU4X's own order (the reference is the `icu_collator` crate used directly,
//! not cairn's mapping of the spec), equality at strengths 1-3, and that find, count,
//! distinct, aggregate, update, delete and findAndModify apply the operation's collation, a
//! collection's default collation applies when the command names none, and an index keyed in
//! the simple order is not used under another collation while one keyed by it is.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, explain, winning};
use futures_util::TryStreamExt;
use icu_collator::options::{CollatorOptions, Strength};
use icu_collator::preferences::CollationNumericOrdering;
use icu_collator::{CollatorBorrowed, CollatorPreferences};
use mongodb::options::{Collation, CollationStrength};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// The corpus the unit tests sort too (one file, included by both).
const CORPUS: &[&str] = include!("../../server/src/query/collator/corpus.in");

fn reference(locale: &str, strength: Strength, numeric: bool) -> CollatorBorrowed<'static> {
    let loc: icu_locale_core::Locale = locale.parse().unwrap();
    let mut prefs = CollatorPreferences::from(&loc);
    prefs.numeric_ordering = Some(if numeric {
        CollationNumericOrdering::True
    } else {
        CollationNumericOrdering::False
    });
    let mut options = CollatorOptions::default();
    options.strength = Some(strength);
    CollatorBorrowed::try_new(prefs, options).unwrap()
}

fn collation(locale: &str, strength: CollationStrength) -> Collation {
    Collation::builder()
        .locale(locale.to_string())
        .strength(strength)
        .build()
}

async fn corpus(db: &mongodb::Database, name: &str) -> mongodb::Collection<Document> {
    let c = db.collection::<Document>(name);
    let docs: Vec<Document> = CORPUS
        .iter()
        .enumerate()
        .map(|(i, s)| doc! { "_id": i as i32, "s": *s })
        .collect();
    c.insert_many(docs).await.unwrap();
    c
}

#[tokio::test]
async fn server_sort_equals_icu_order() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("coll_sort");
    let c = corpus(&db, "words").await;
    let cases = [
        ("en", CollationStrength::Tertiary, Strength::Tertiary, false),
        ("en", CollationStrength::Primary, Strength::Primary, false),
        (
            "en",
            CollationStrength::Secondary,
            Strength::Secondary,
            true,
        ),
        ("tr", CollationStrength::Tertiary, Strength::Tertiary, false),
        ("de", CollationStrength::Tertiary, Strength::Tertiary, false),
        ("sv", CollationStrength::Tertiary, Strength::Tertiary, false),
    ];
    for (locale, strength, icu_strength, numeric) in cases {
        let mut spec = collation(locale, strength);
        spec.numeric_ordering = Some(numeric);
        let got: Vec<i32> = c
            .find(doc! {})
            .sort(doc! { "s": 1, "_id": 1 })
            .collation(spec.clone())
            .await
            .unwrap()
            .try_collect::<Vec<Document>>()
            .await
            .unwrap()
            .iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect();
        let icu = reference(locale, icu_strength, numeric);
        let mut want: Vec<i32> = (0..CORPUS.len() as i32).collect();
        want.sort_by(|&x, &y| {
            icu.compare(CORPUS[x as usize], CORPUS[y as usize])
                .then(x.cmp(&y))
        });
        assert_eq!(got, want, "find sort under {locale} {strength:?}");
        // $sort in a pipeline follows the same order.
        let piped: Vec<i32> = c
            .aggregate(vec![doc! { "$sort": { "s": -1, "_id": -1 } }])
            .collation(spec.clone())
            .await
            .unwrap()
            .try_collect::<Vec<Document>>()
            .await
            .unwrap()
            .iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect();
        want.reverse();
        assert_eq!(piped, want, "$sort under {locale} {strength:?}");
        // $sort then $limit keeps the top k by encoded keys: the same order.
        let top: Vec<i32> = c
            .aggregate(vec![
                doc! { "$sort": { "s": -1, "_id": -1 } },
                doc! { "$limit": 10 },
            ])
            .collation(spec)
            .await
            .unwrap()
            .try_collect::<Vec<Document>>()
            .await
            .unwrap()
            .iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect();
        assert_eq!(top, want[..10], "top-k under {locale} {strength:?}");
    }
    // Without a collation strings still sort by bytes.
    let plain: Vec<String> = c
        .find(doc! { "s": { "$in": ["b", "B", "á"] } })
        .sort(doc! { "s": 1 })
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_str("s").unwrap().to_string())
        .collect();
    assert_eq!(plain, ["B", "b", "á"]);
}

#[tokio::test]
async fn commands_apply_the_collation() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("coll_cmds");
    let c = db.collection::<Document>("people");
    c.insert_many(vec![
        doc! { "_id": 1, "name": "André", "n": 0 },
        doc! { "_id": 2, "name": "andre", "n": 0 },
        doc! { "_id": 3, "name": "ANDRE", "n": 0 },
        doc! { "_id": 4, "name": "Bob", "n": 0 },
        doc! { "_id": 5, "name": ["x", "ANDRÉ"], "n": 0 },
    ])
    .await
    .unwrap();
    let primary = collation("en", CollationStrength::Primary);
    let secondary = collation("en", CollationStrength::Secondary);
    let count = |filter: Document, col: Option<Collation>| {
        let c = c.clone();
        async move {
            match col {
                Some(col) => c.count_documents(filter).collation(col).await.unwrap(),
                None => c.count_documents(filter).await.unwrap(),
            }
        }
    };
    // Equality tables: strength 1 ignores accents and case, 2 only case, 3 neither.
    assert_eq!(
        count(doc! { "name": "andre" }, Some(primary.clone())).await,
        4
    );
    assert_eq!(
        count(doc! { "name": "andre" }, Some(secondary.clone())).await,
        2
    );
    assert_eq!(
        count(
            doc! { "name": "andre" },
            Some(collation("en", CollationStrength::Tertiary))
        )
        .await,
        1
    );
    assert_eq!(count(doc! { "name": "andre" }, None).await, 1);
    assert_eq!(
        count(doc! { "name": { "$ne": "andre" } }, Some(primary.clone())).await,
        1
    );
    assert_eq!(
        count(
            doc! { "name": { "$in": ["BOB", "zed"] } },
            Some(secondary.clone())
        )
        .await,
        1
    );
    assert_eq!(
        count(doc! { "name": { "$gt": "ANDRÉ" } }, Some(primary.clone())).await,
        2
    );
    // Regex is never collated.
    assert_eq!(
        count(
            doc! { "name": { "$regex": "^andre$" } },
            Some(primary.clone())
        )
        .await,
        1
    );

    // distinct collapses values equal at the strength.
    let values = c
        .distinct("name", doc! { "_id": { "$lte": 4 } })
        .collation(secondary.clone())
        .await
        .unwrap();
    assert_eq!(values.len(), 3, "{values:?}");
    // $group keys collapse the same way.
    let groups: Vec<Document> = c
        .aggregate(vec![
            doc! { "$match": { "_id": { "$lte": 4 } } },
            doc! { "$group": { "_id": "$name", "k": { "$sum": 1 } } },
            doc! { "$sort": { "k": -1 } },
        ])
        .collation(primary.clone())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[0].get_i32("k").unwrap(), 3);

    // update, findAndModify and delete filter under their collation.
    let r = c
        .update_many(doc! { "name": "ANDRE" }, doc! { "$inc": { "n": 1 } })
        .collation(secondary.clone())
        .await
        .unwrap();
    assert_eq!(r.matched_count, 2);
    let found = c
        .find_one_and_update(doc! { "name": "bob" }, doc! { "$set": { "n": 7 } })
        .collation(secondary.clone())
        .await
        .unwrap()
        .expect("bob under strength 2");
    assert_eq!(found.get_i32("_id").unwrap(), 4);
    assert!(
        c.find_one_and_update(doc! { "name": "bob" }, doc! { "$set": { "n": 8 } })
            .await
            .unwrap()
            .is_none()
    );
    let d = c
        .delete_many(doc! { "name": "andre" })
        .collation(primary)
        .await
        .unwrap();
    assert_eq!(d.deleted_count, 4);
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);

    // An unknown locale is mongod's BadValue.
    let e = c
        .find(doc! {})
        .collation(collation("xx", CollationStrength::Primary))
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 2);
}

#[tokio::test]
async fn collection_default_collation_and_indexes() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("coll_default");
    db.create_collection("ci")
        .collation(collation("en", CollationStrength::Secondary))
        .await
        .unwrap();
    let listed = db
        .run_command(doc! { "listCollections": 1, "filter": { "name": "ci" } })
        .await
        .unwrap();
    let info = listed
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let shown = info
        .get_document("options")
        .unwrap()
        .get_document("collation")
        .unwrap();
    assert_eq!(shown.get_str("locale").unwrap(), "en");
    assert_eq!(shown.get_i32("strength").unwrap(), 2);
    let c = db.collection::<Document>("ci");
    c.insert_many(vec![
        doc! { "_id": 1, "k": "abc" },
        doc! { "_id": 2, "k": "ABC" },
    ])
    .await
    .unwrap();
    // The default applies when the command names no collation; `simple` overrides it.
    assert_eq!(c.count_documents(doc! { "k": "Abc" }).await.unwrap(), 2);
    let simple = Collation::builder().locale("simple".to_string()).build();
    assert_eq!(
        c.count_documents(doc! { "k": "abc" })
            .collation(simple)
            .await
            .unwrap(),
        1
    );

    // An index in the simple order serves simple queries, not collated ones.
    let p = db.collection::<Document>("plain");
    p.insert_many((0..50).map(|i| doc! { "_id": i, "k": format!("v{i}") }))
        .await
        .unwrap();
    db.run_command(
        doc! { "createIndexes": "plain", "indexes": [{ "key": { "k": 1 }, "name": "k_1" }] },
    )
    .await
    .unwrap();
    let stage = |e: &Document| winning(e).get_str("stage").unwrap().to_string();
    let simple_plan = explain(&db, doc! { "find": "plain", "filter": { "k": "v7" } }).await;
    assert_eq!(stage(&simple_plan), "FETCH", "{simple_plan}");
    let collated = explain(
        &db,
        doc! { "find": "plain", "filter": { "k": "V7" }, "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(stage(&collated), "COLLSCAN", "{collated}");
    let hit = p
        .find(doc! { "k": "V7" })
        .collation(collation("en", CollationStrength::Secondary))
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap();
    assert_eq!(hit.len(), 1);
    assert_eq!(hit[0].get("_id"), Some(&Bson::Int32(7)));
    // An index keyed by that collation serves it (e2e/tests/collated_indexes.rs has more).
    db.run_command(doc! { "createIndexes": "plain", "indexes": [{ "key": { "k": -1 }, "name": "k_ci", "collation": { "locale": "en", "strength": 2 } }] })
        .await
        .unwrap();
    let keyed = explain(
        &db,
        doc! { "find": "plain", "filter": { "k": "V7" }, "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(stage(&keyed), "FETCH", "{keyed}");
}
