//! Proves TLS on a real `cairn` process: certificates made in the test (rcgen); the driver
//! connects with `tls=true&tlsCAFile=...`; `requireTLS` refuses plaintext; `preferTLS` serves
//! both on one port; SCRAM over TLS; `--tlsCAFile` demands a client certificate. How: the
//! official Rust driver and raw connections against servers started with each mode.

use bson::{Document, doc};
use cairn_e2e::auth::{command, make_tls_files, reply_code, tls_client_config, tls_connect};
use cairn_e2e::{RawConn, Server};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn ping(uri: &str) -> Result<(), mongodb::error::Error> {
    let c = mongodb::Client::with_uri_str(uri).await?;
    c.database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .map(|_| ())
}

fn tls_uri(s: &Server, ca: &std::path::Path, extra: &str) -> String {
    format!(
        "mongodb://localhost:{}/?directConnection=true&serverSelectionTimeoutMS=3000&tls=true&tlsCAFile={}{extra}",
        s.port,
        ca.display()
    )
}

fn plain_uri(s: &Server) -> String {
    format!(
        "mongodb://127.0.0.1:{}/?directConnection=true&serverSelectionTimeoutMS=2000",
        s.port
    )
}

#[tokio::test]
async fn require_tls_serves_tls_and_refuses_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let f = make_tls_files(dir.path());
    let server_pem = f.server.to_str().unwrap();
    let s = Server::start(
        BIN,
        &[
            "--tlsMode",
            "requireTLS",
            "--tlsCertificateKeyFile",
            server_pem,
        ],
    );
    ping(&tls_uri(&s, &f.ca, "")).await.expect("TLS ping");
    let c = mongodb::Client::with_uri_str(tls_uri(&s, &f.ca, ""))
        .await
        .unwrap();
    let coll = c.database("t").collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1, "x": "y".repeat(100_000) })
        .await
        .unwrap();
    let back = coll.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(back.get_str("x").unwrap().len(), 100_000);
    assert!(
        ping(&plain_uri(&s)).await.is_err(),
        "plaintext served under requireTLS"
    );
    let mut raw = RawConn::connect(&s.addr());
    raw.send(
        &wire::encode_msg(
            1,
            0,
            &wire::OpMsg::new(bson::rawdoc! { "ping": 1, "$db": "admin" }),
            None,
        )
        .unwrap(),
    )
    .unwrap();
    let mut b = [0u8; 1];
    let read = std::io::Read::read(&mut raw.stream, &mut b);
    assert!(
        matches!(read, Ok(0))
            || read
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "plaintext answered under requireTLS: {read:?}"
    );
    // A client that does not trust the CA is refused by its own side of the handshake.
    let other = tempfile::tempdir().unwrap();
    let g = make_tls_files(other.path());
    assert!(ping(&tls_uri(&s, &g.ca, "")).await.is_err());
}

#[tokio::test]
async fn prefer_tls_serves_both_and_scram_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let f = make_tls_files(dir.path());
    let s = Server::start(
        BIN,
        &[
            "--auth",
            "--tlsMode",
            "preferTLS",
            "--tlsCertificateKeyFile",
            f.server.to_str().unwrap(),
        ],
    );
    // The localhost exception over plain TCP, then logins over both.
    let open = mongodb::Client::with_uri_str(plain_uri(&s)).await.unwrap();
    open.database("admin")
        .run_command(doc! { "createUser": "u", "pwd": "u-pw", "roles": ["root"] })
        .await
        .unwrap();
    let creds = "u:u-pw@";
    let plain = format!(
        "mongodb://{creds}127.0.0.1:{}/?directConnection=true&serverSelectionTimeoutMS=3000",
        s.port
    );
    let tls = tls_uri(&s, &f.ca, "").replace("mongodb://", &format!("mongodb://{creds}"));
    for uri in [
        plain,
        tls.clone(),
        format!("{tls}&authMechanism=SCRAM-SHA-1"),
    ] {
        let c = mongodb::Client::with_uri_str(&uri).await.unwrap();
        c.database("t")
            .collection::<Document>("c")
            .insert_one(doc! { "a": 1 })
            .await
            .expect(&uri);
    }
    // Raw TLS, to see one handshake end to end.
    let cfg = tls_client_config(&f.ca_der);
    let mut t = tls_connect(&s.addr(), &cfg).unwrap();
    let r = command(&mut t, &doc! { "hello": 1, "$db": "admin" }).unwrap();
    assert_eq!(reply_code(&r), 0);
    let r = command(&mut t, &doc! { "find": "c", "$db": "t" }).unwrap();
    assert_eq!(reply_code(&r), 13, "TLS is not authentication");
}

#[tokio::test]
async fn ca_file_demands_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let f = make_tls_files(dir.path());
    let s = Server::start(
        BIN,
        &[
            "--tlsMode",
            "requireTLS",
            "--tlsCertificateKeyFile",
            f.server.to_str().unwrap(),
            "--tlsCAFile",
            f.ca.to_str().unwrap(),
        ],
    );
    assert!(
        ping(&tls_uri(&s, &f.ca, "")).await.is_err(),
        "no client certificate, yet served"
    );
    let with_cert = tls_uri(
        &s,
        &f.ca,
        &format!("&tlsCertificateKeyFile={}", f.client.display()),
    );
    ping(&with_cert).await.expect("client certificate accepted");
}

#[test]
fn tls_without_a_certificate_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["--port", "0", "--tlsMode", "requireTLS", "--dbpath"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tlsCertificateKeyFile"), "{err}");
}
