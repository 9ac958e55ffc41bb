//! Proves `mapReduce` and `$accumulator` against a real `cairn` process with the Rust driver:
//! on seeded data, mapReduce (query, sort, limit, scope, finalize, NumberLong values, Code and
//! string functions, both command spellings) gives the same numbers as the equivalent `$group`;
//! `out` replaces, merges and reduces into a collection (also in another database) with
//! mongod 7's reply shapes; bad commands get mongod's codes; `$accumulator` matches `$avg`;
//! `collation` governs the query and the grouping of keys.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

const MAP: &str =
    "function() { emit(this.cust, {n: 1, total: this.price * factor, qty: this.qty}); }";
const REDUCE: &str = "function(key, values) {
    var r = {n: 0, total: 0, qty: 0};
    values.forEach(function(v) { r.n += v.n; r.total += v.total; r.qty += v.qty; });
    return r;
}";

/// 3,000 orders over 37 customers from a fixed linear congruential sequence.
async fn seed(db: &mongodb::Database) {
    let mut x: u64 = 12345;
    let docs: Vec<Document> = (0..3000)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 33) as i64;
            doc! {"_id": i, "cust": format!("c{}", r % 37), "price": (r % 500) as i32,
            "qty": r % 9 + 1 + (1_i64 << 33), "status": if r % 4 == 0 { "B" } else { "A" }}
        })
        .collect();
    db.collection::<Document>("orders")
        .insert_many(docs)
        .await
        .unwrap();
}

fn num(v: Option<&Bson>) -> f64 {
    match v {
        Some(Bson::Int32(i)) => f64::from(*i),
        Some(Bson::Int64(i)) => *i as f64,
        Some(Bson::Double(d)) => *d,
        other => panic!("not a number: {other:?}"),
    }
}

/// `(key, n, total, qty)` per customer, by key.
type Row = (String, f64, f64, f64);

fn rows_of_mr(reply: &Document, field: &str) -> Vec<Row> {
    reply
        .get_array(field)
        .unwrap()
        .iter()
        .map(|d| {
            let d = d.as_document().unwrap();
            let v = d.get_document("value").unwrap();
            (
                d.get_str("_id").unwrap().to_string(),
                num(v.get("n")),
                num(v.get("total")),
                num(v.get("qty")),
            )
        })
        .collect()
}

async fn rows_of_group(db: &mongodb::Database, head: Vec<Document>, factor: i32) -> Vec<Row> {
    let mut pipeline = head;
    pipeline.push(doc! {"$group": {"_id": "$cust", "n": {"$sum": 1},
    "total": {"$sum": {"$multiply": ["$price", factor]}}, "qty": {"$sum": "$qty"}}});
    pipeline.push(doc! {"$sort": {"_id": 1}});
    let docs: Vec<Document> = db
        .collection::<Document>("orders")
        .aggregate(pipeline)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    docs.iter()
        .map(|d| {
            (
                d.get_str("_id").unwrap().to_string(),
                num(d.get("n")),
                num(d.get("total")),
                num(d.get("qty")),
            )
        })
        .collect()
}

fn code(s: &str) -> Bson {
    Bson::JavaScriptCode(s.to_string())
}

#[tokio::test]
async fn inline_results_match_group() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("mr");
    seed(&db).await;

    // Code-typed functions (as mongosh sends them), a query and a scope.
    let reply = db
        .run_command(
            doc! {"mapReduce": "orders", "map": code(MAP), "reduce": code(REDUCE),
            "query": {"status": "A"}, "scope": {"factor": 2}, "out": {"inline": 1}},
        )
        .await
        .unwrap();
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
    let by_group = rows_of_group(&db, vec![doc! {"$match": {"status": "A"}}], 2).await;
    assert_eq!(by_group.len(), 37);
    assert_eq!(rows_of_mr(&reply, "results"), by_group);

    // Strings (as pymongo's command form may send them), the lowercase spelling, sort + limit.
    let reply = db
        .run_command(doc! {"mapreduce": "orders", "map": MAP, "reduce": REDUCE,
        "sort": {"_id": -1}, "limit": 100, "scope": {"factor": 1}, "out": {"inline": 1},
        "verbose": true})
        .await
        .unwrap();
    let head = vec![doc! {"$sort": {"_id": -1}}, doc! {"$limit": 100}];
    assert_eq!(
        rows_of_mr(&reply, "results"),
        rows_of_group(&db, head, 1).await
    );

    // finalize sees (key, reduced value); a key emitted once is not reduced.
    let reply = db
        .run_command(doc! {"mapReduce": "orders",
        "map": "function() { emit(this._id % 2 == 0 ? 'even' : 'odd', this.qty); \
                if (this._id == 7) emit('seven', NumberLong('9007199254740993')); }",
        "reduce": "function(k, vs) { return Array.sum(vs); }",
        "finalize": "function(k, v) { return k == 'seven' ? v : {k: k, v: v}; }",
        "out": {"inline": 1}})
        .await
        .unwrap();
    let results = reply.get_array("results").unwrap();
    assert_eq!(results.len(), 3);
    let seven = results[2].as_document().unwrap();
    assert_eq!(
        seven,
        &doc! {"_id": "seven", "value": 9_007_199_254_740_993_i64}
    );
    let even = results[0]
        .as_document()
        .unwrap()
        .get_document("value")
        .unwrap();
    assert_eq!(even.get_str("k").unwrap(), "even");
    let total_qty: f64 = rows_of_group(&db, vec![], 1)
        .await
        .iter()
        .map(|r| r.3)
        .sum();
    let odd = results[1]
        .as_document()
        .unwrap()
        .get_document("value")
        .unwrap();
    assert_eq!(num(even.get("v")) + num(odd.get("v")), total_qty);
}

async fn docs_of(c: mongodb::Collection<Document>) -> Vec<Document> {
    c.find(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn out_to_collections() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("mr");
    seed(&db).await;
    let cmd = |out: Bson| {
        doc! {"mapReduce": "orders", "map": MAP, "reduce": REDUCE, "scope": {"factor": 1}, "out": out}
    };
    let inline = db
        .run_command(cmd(Bson::Document(doc! {"inline": 1})))
        .await
        .unwrap();
    let expected: Vec<Bson> = inline.get_array("results").unwrap().clone();

    // Replace: the collection holds exactly the results; an old document is gone.
    let out = db.collection::<Document>("totals");
    out.insert_one(doc! {"_id": "stale"}).await.unwrap();
    let reply = db
        .run_command(cmd(Bson::String("totals".into())))
        .await
        .unwrap();
    assert_eq!(reply, doc! {"result": "totals", "ok": 1.0});
    let stored: Vec<Bson> = docs_of(out.clone())
        .await
        .into_iter()
        .map(Bson::Document)
        .collect();
    assert_eq!(stored, expected);

    // Merge: results overwrite by key; other documents stay.
    out.insert_one(doc! {"_id": "zz-other", "value": 1})
        .await
        .unwrap();
    out.update_one(doc! {"_id": "c0"}, doc! {"$set": {"value": "old"}})
        .await
        .unwrap();
    db.run_command(cmd(Bson::Document(doc! {"merge": "totals"})))
        .await
        .unwrap();
    let stored = docs_of(out.clone()).await;
    assert_eq!(stored.len(), expected.len() + 1);
    assert_eq!(Bson::Document(stored[0].clone()), expected[0]);

    // Reduce: the existing value and the new one are reduced together, so counts double.
    db.run_command(cmd(Bson::Document(doc! {"reduce": "totals"})))
        .await
        .unwrap();
    let stored = docs_of(out.clone()).await;
    let first = expected[0]
        .as_document()
        .unwrap()
        .get_document("value")
        .unwrap();
    let now = stored[0].get_document("value").unwrap();
    assert_eq!(num(now.get("n")), 2.0 * num(first.get("n")));
    assert_eq!(
        stored.last().unwrap(),
        &doc! {"_id": "zz-other", "value": 1}
    );

    // Another database: the reply names it.
    let reply = db
        .run_command(cmd(Bson::Document(
            doc! {"replace": "t2", "db": "elsewhere"},
        )))
        .await
        .unwrap();
    assert_eq!(
        reply,
        doc! {"result": {"db": "elsewhere", "collection": "t2"}, "ok": 1.0}
    );
    let other = docs_of(client.database("elsewhere").collection("t2")).await;
    assert_eq!(other.len(), expected.len());
}

#[tokio::test]
async fn bad_commands_get_mongods_codes() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("mr");
    seed(&db).await;
    db.run_command(doc! {"create": "view", "viewOn": "orders", "pipeline": []})
        .await
        .unwrap();
    let base = doc! {"mapReduce": "orders", "map": MAP, "reduce": REDUCE,
    "scope": {"factor": 1}, "out": {"inline": 1}};
    let code_with = |f: &dyn Fn(&mut Document)| {
        let mut d = base.clone();
        f(&mut d);
        let db = db.clone();
        async move { error_code(&db.run_command(d).await.unwrap_err()) }
    };
    assert_eq!(
        code_with(&|d| {
            d.remove("map");
        })
        .await,
        40414
    );
    assert_eq!(
        code_with(&|d| {
            d.remove("out");
        })
        .await,
        40414
    );
    assert_eq!(
        code_with(&|d| {
            d.insert("map", 5);
        })
        .await,
        2,
        "mongod's code parser answers BadValue"
    );
    assert_eq!(
        code_with(&|d| {
            d.insert("out", doc! {"inline": 1, "merge": "x"});
        })
        .await,
        72,
        "'inline' must be alone: InvalidOptions"
    );
    assert_eq!(
        code_with(&|d| {
            d.insert("bogus", 1);
        })
        .await,
        40415
    );
    assert_eq!(
        code_with(&|d| {
            d.insert("mapReduce", "view");
        })
        .await,
        166
    );
    // A script error, and emit called wrongly, are 139.
    assert_eq!(
        code_with(&|d| {
            d.insert("reduce", "function() { throw new Error('no'); }");
        })
        .await,
        139
    );
    assert_eq!(
        code_with(&|d| {
            d.insert("map", "function() { emit(1); }");
        })
        .await,
        139
    );
    assert_eq!(
        code_with(&|d| {
            d.remove("scope");
        })
        .await,
        139,
        "factor undefined"
    );

    // maxTimeMS stops an endless map with 50; the server serves on.
    let mut endless = base.clone();
    endless.insert("map", "function() { for (;;) {} }");
    endless.insert("maxTimeMS", 300);
    assert_eq!(error_code(&db.run_command(endless).await.unwrap_err()), 50);
    // A missing collection reduces nothing.
    let mut missing = base.clone();
    missing.insert("mapReduce", "nope");
    let reply = db.run_command(missing).await.unwrap();
    assert_eq!(reply, doc! {"results": [], "ok": 1.0});
    // $where's code-with-scope sees its scope.
    let with_scope = Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
        code: "this._id < limit".into(),
        scope: doc! {"limit": 5},
    });
    let n = db
        .collection::<Document>("orders")
        .count_documents(doc! {"$where": with_scope})
        .await
        .unwrap();
    assert_eq!(n, 5);

    let off = Server::start(BIN, &["--noscripting"]);
    let e = off
        .client()
        .await
        .database("mr")
        .run_command(base.clone())
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 16395);
}

#[tokio::test]
async fn accumulator_matches_avg() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("mr");
    seed(&db).await;
    let c = db.collection::<Document>("orders");
    let run = |acc: Document| {
        let c = c.clone();
        async move {
            let out: Vec<Document> = c
                .aggregate(vec![
                    doc! {"$group": {"_id": "$cust", "a": acc}},
                    doc! {"$sort": {"_id": 1}},
                ])
                .await?
                .try_collect()
                .await?;
            Ok::<_, mongodb::error::Error>(out)
        }
    };
    let js = doc! {"$accumulator": {
        "init": code("function() { return {n: 0, s: 0}; }"),
        "accumulate": code("function(st, p) { return {n: st.n + 1, s: st.s + p}; }"),
        "accumulateArgs": ["$price"],
        "merge": code("function(a, b) { return {n: a.n + b.n, s: a.s + b.s}; }"),
        "finalize": code("function(st) { return st.s / st.n; }"),
        "lang": "js",
    }};
    let by_js = run(js).await.unwrap();
    let by_avg = run(doc! {"$avg": "$price"}).await.unwrap();
    assert_eq!(by_js.len(), 37);
    for (a, b) in by_js.iter().zip(&by_avg) {
        assert_eq!(a.get("_id"), b.get("_id"));
        assert!((num(a.get("a")) - num(b.get("a"))).abs() < 1e-9, "{a} {b}");
    }
    let e = run(
        doc! {"$accumulator": {"accumulate": "function(s) { return s; }",
        "accumulateArgs": [], "merge": "function(a) { return a; }", "lang": "js"}},
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(&e), 4544707);
}

/// `(key, count)` rows of a mapReduce reply whose values are counts.
fn counts(reply: &Document) -> Vec<(String, f64)> {
    reply
        .get_array("results")
        .unwrap()
        .iter()
        .map(|d| {
            let d = d.as_document().unwrap();
            (d.get_str("_id").unwrap().to_string(), num(d.get("value")))
        })
        .collect()
}

#[tokio::test]
async fn collation_applies_to_query_and_keys() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("mrcoll");
    let docs: Vec<Document> = ["apple", "Apple", "APPLE", "banana", "Banana", "cherry"]
        .iter()
        .enumerate()
        .map(|(i, k)| doc! {"_id": i as i32, "k": *k})
        .collect();
    db.collection::<Document>("fruit")
        .insert_many(docs)
        .await
        .unwrap();
    let map = "function() { emit(this.k, 1); }";
    let reduce = "function(key, values) { return Array.sum(values); }";
    let run = |query: Document, collation: Option<Document>| {
        let mut cmd = doc! {"mapReduce": "fruit", "map": map, "reduce": reduce,
        "query": query, "out": {"inline": 1}};
        if let Some(c) = collation {
            cmd.insert("collation", c);
        }
        let db = db.clone();
        async move { db.run_command(cmd).await }
    };
    let ci = doc! {"locale": "en", "strength": 2};

    // Simple collation: six keys of their own, and the query matches one spelling.
    let reply = run(doc! {}, None).await.unwrap();
    assert_eq!(counts(&reply).len(), 6);
    let reply = run(doc! {"k": "apple"}, None).await.unwrap();
    assert_eq!(counts(&reply), vec![("apple".to_string(), 1.0)]);

    // Case-insensitive: keys equal under the collation group together (the first one seen
    // names the group), and the query matches every spelling.
    let reply = run(doc! {}, Some(ci.clone())).await.unwrap();
    assert_eq!(
        counts(&reply),
        vec![
            ("apple".to_string(), 3.0),
            ("banana".to_string(), 2.0),
            ("cherry".to_string(), 1.0)
        ]
    );
    let reply = run(doc! {"k": "BANANA"}, Some(ci.clone())).await.unwrap();
    assert_eq!(counts(&reply), vec![("banana".to_string(), 2.0)]);

    // A bad collation is refused as elsewhere.
    let e = run(doc! {}, Some(doc! {"locale": "xx_nope"}))
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 2);
}
