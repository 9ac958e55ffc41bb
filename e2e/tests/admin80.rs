//! Proves the mongod 8.0 admin surface of issue 14 part 4: `$listLocalSessions`/`$listSessions`
//! list the sessions the server has seen (an explicit driver session shows up with its id), and
//! their spec and placement errors carry mongod's codes. How: a real `cairn` process driven by
//! the Rust driver; sessions are made by the driver itself (no sleeps, no timing assertions).

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn agg(
    db: &mongodb::Database,
    pipeline: Vec<Document>,
) -> mongodb::error::Result<Vec<Document>> {
    db.aggregate(pipeline).await?.try_collect().await
}

#[tokio::test]
async fn sessions_the_driver_used_are_listed() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let mut session = client.start_session().await.unwrap();
    let c = client.database("ls").collection::<Document>("c");
    c.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .await
        .unwrap();
    let Bson::Binary(id) = session.id().get("id").unwrap().clone() else {
        panic!("session id is not binary");
    };

    let admin = client.database("admin");
    let local = agg(
        &admin,
        vec![
            doc! { "$listLocalSessions": {} },
            doc! { "$match": { "_id.id": id.clone() } },
        ],
    )
    .await
    .unwrap();
    assert_eq!(local.len(), 1, "{local:?}");
    let key = local[0].get_document("_id").unwrap();
    // Without authentication, uid is the SHA-256 of the empty string.
    assert_eq!(
        key.get_binary_generic("uid").unwrap()[..4],
        [0xe3, 0xb0, 0xc4, 0x42]
    );
    assert!(local[0].get_datetime("lastUse").is_ok());

    let config = client.database("config");
    let all = config
        .collection::<Document>("system.sessions")
        .aggregate(vec![doc! { "$listSessions": { "allUsers": true } }])
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert!(
        all.iter()
            .any(|d| d.get_document("_id").unwrap().get("id") == Some(&Bson::Binary(id.clone())))
    );

    // endSessions forgets it.
    admin
        .run_command(doc! { "endSessions": [ { "id": id.clone() } ] })
        .await
        .unwrap();
    let after = agg(
        &admin,
        vec![
            doc! { "$listLocalSessions": { "allUsers": true } },
            doc! { "$match": { "_id.id": id } },
        ],
    )
    .await
    .unwrap();
    assert!(after.is_empty(), "{after:?}");
}

#[tokio::test]
async fn list_sessions_errors_are_mongods() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let admin = client.database("admin");
    let sessions = client
        .database("config")
        .collection::<Document>("system.sessions");
    let code =
        |r: mongodb::error::Result<Vec<Document>>| r.map(|_| 0).unwrap_or_else(|e| error_code(&e));

    assert_eq!(
        code(agg(&admin, vec![doc! { "$listLocalSessions": 1 }]).await),
        14
    );
    assert_eq!(
        code(
            agg(
                &admin,
                vec![doc! { "$listLocalSessions": { "allUsers": 1 } }]
            )
            .await
        ),
        14
    );
    assert_eq!(
        code(agg(&admin, vec![doc! { "$listLocalSessions": { "x": 1 } }]).await),
        40415
    );
    assert_eq!(
        code(agg(&admin, vec![doc! { "$listLocalSessions": { "allUsers": true, "users": [{ "user": "a", "db": "b" }] } }]).await),
        12
    );
    assert_eq!(
        code(
            agg(
                &admin,
                vec![doc! { "$match": {} }, doc! { "$listLocalSessions": {} }]
            )
            .await
        ),
        40602
    );
    // $listSessions only on config.system.sessions.
    assert_eq!(
        code(agg(&admin, vec![doc! { "$listSessions": {} }]).await),
        73
    );
    let not_first = sessions
        .aggregate(vec![doc! { "$match": {} }, doc! { "$listSessions": {} }])
        .await
        .map(|_| 0)
        .unwrap_or_else(|e| error_code(&e));
    assert_eq!(not_first, 40602);
    let listed = sessions
        .aggregate(vec![
            doc! { "$listSessions": { "users": [{ "user": "nobody", "db": "x" }] } },
        ])
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert!(listed.is_empty());
}
