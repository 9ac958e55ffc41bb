//! Authentication and TLS helpers for tests and benchmarks: a small SCRAM client that speaks
//! over any blocking stream (raw TCP or rustls), so tests can see the server's exact error
//! codes and the benchmark can time each step without a driver's pool and monitors in the way;
//! and a CA, server and client certificate generated on the spot (rcgen).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bson::{Bson, Document, doc};
use hmac::{KeyInit, Mac};
use sha2::Digest;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Send one OP_MSG command and return the reply body (whatever its `ok`).
pub fn command<S: Read + Write>(s: &mut S, body: &Document) -> std::io::Result<Document> {
    let raw = bson::RawDocumentBuf::try_from(body).map_err(std::io::Error::other)?;
    let frame =
        wire::encode_msg(1, 0, &wire::OpMsg::new(raw), None).map_err(std::io::Error::other)?;
    s.write_all(&frame)?;
    s.flush()?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = usize::try_from(i32::from_le_bytes(len)).map_err(std::io::Error::other)?;
    if !(16..=48_000_000).contains(&n) {
        return Err(std::io::Error::other(format!("bad reply length {n}")));
    }
    let mut reply = vec![0u8; n];
    reply[..4].copy_from_slice(&len);
    s.read_exact(&mut reply[4..])?;
    let m = wire::decode(&reply).map_err(std::io::Error::other)?;
    match m.body {
        wire::Body::Msg(msg) => {
            Document::try_from(msg.body.as_ref()).map_err(std::io::Error::other)
        }
        _ => Err(std::io::Error::other("reply is not OP_MSG")),
    }
}

/// The `code` of a reply, 0 when it says `ok: 1`.
pub fn reply_code(reply: &Document) -> i32 {
    if reply.get_f64("ok").unwrap_or(0.0) == 1.0 {
        0
    } else {
        reply.get_i32("code").unwrap_or(-1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mech {
    Sha1,
    Sha256,
}

impl Mech {
    pub fn name(self) -> &'static str {
        match self {
            Mech::Sha1 => "SCRAM-SHA-1",
            Mech::Sha256 => "SCRAM-SHA-256",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mech::Sha1 => {
                let mut m = <hmac::Hmac<sha1::Sha1> as KeyInit>::new_from_slice(key)
                    .expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mech::Sha256 => {
                let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key)
                    .expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mech::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mech::Sha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    /// SaltedPassword, which drivers cache per (password, salt, iterations).
    pub fn salted_password(
        self,
        user: &str,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Vec<u8> {
        let mut out = vec![0u8; if self == Mech::Sha1 { 20 } else { 32 }];
        match self {
            Mech::Sha1 => {
                let digest: String =
                    md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes())
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                pbkdf2::pbkdf2_hmac::<sha1::Sha1>(digest.as_bytes(), salt, iterations, &mut out);
            }
            // ASCII passwords only: SASLprep leaves them as they are.
            Mech::Sha256 => {
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password.as_bytes(), salt, iterations, &mut out)
            }
        }
        out
    }
}

/// A login to run over a stream.
pub struct Login<'a> {
    pub user: &'a str,
    pub password: &'a str,
    pub db: &'a str,
    pub mech: Mech,
    /// Carry the first step in `hello` (`speculativeAuthenticate`), as drivers do.
    pub speculative: bool,
    /// Send a wrong proof (a test of the server's failure path).
    pub wrong_proof: bool,
    /// A SaltedPassword computed earlier (drivers cache it), else derived here.
    pub salted: Option<&'a [u8]>,
}

/// How a login ended: `Err(reply)` with the server's failing reply.
pub type LoginResult = Result<Vec<u8>, Document>;

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes,
    })
}

fn payload_of(reply: &Document) -> Vec<u8> {
    reply
        .get_binary_generic("payload")
        .cloned()
        .unwrap_or_default()
}

/// Run the handshake and a SCRAM conversation; Ok(SaltedPassword) when the server accepted
/// and proved it knows the key.
pub fn login<S: Read + Write>(s: &mut S, l: &Login) -> std::io::Result<LoginResult> {
    let nonce = B64.encode(rand_bytes());
    let first_bare = format!(
        "n={},r={nonce}",
        l.user.replace('=', "=3D").replace(',', "=2C")
    );
    let first = format!("n,,{first_bare}");
    let start = doc! {
        "saslStart": 1, "mechanism": l.mech.name(), "payload": binary(first.clone().into_bytes()),
        "options": { "skipEmptyExchange": true }, "db": l.db,
    };
    let server_first = if l.speculative {
        let hello = command(
            s,
            &doc! { "hello": 1, "speculativeAuthenticate": start, "$db": "admin" },
        )?;
        match hello.get_document("speculativeAuthenticate") {
            Ok(spec) => payload_of(spec),
            Err(_) => return Ok(Err(hello)),
        }
    } else {
        command(s, &doc! { "hello": 1, "$db": "admin" })?;
        let mut start = start;
        start.remove("db");
        start.insert("$db", l.db);
        let r = command(s, &start)?;
        if reply_code(&r) != 0 {
            return Ok(Err(r));
        }
        payload_of(&r)
    };
    let server_first = String::from_utf8_lossy(&server_first).to_string();
    let attr = |k: &str| {
        server_first
            .split(',')
            .find_map(|a| a.strip_prefix(k))
            .unwrap_or("")
            .to_string()
    };
    let (r, salt, iterations) = (
        attr("r="),
        B64.decode(attr("s=")).unwrap_or_default(),
        attr("i=").parse::<u32>().unwrap_or(0),
    );
    let salted = match l.salted {
        Some(s) => s.to_vec(),
        None => l
            .mech
            .salted_password(l.user, l.password, &salt, iterations),
    };
    let without_proof = format!("c=biws,r={r}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let client_key = l.mech.hmac(&salted, b"Client Key");
    let stored_key = l.mech.hash(&client_key);
    let signature = l.mech.hmac(&stored_key, auth_message.as_bytes());
    let mut proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    if l.wrong_proof {
        proof[0] ^= 0xff;
    }
    let fin = format!("{without_proof},p={}", B64.encode(&proof));
    let r = command(
        s,
        &doc! { "saslContinue": 1, "conversationId": 1, "payload": binary(fin.into_bytes()), "$db": l.db },
    )?;
    if reply_code(&r) != 0 {
        return Ok(Err(r));
    }
    let server_key = l.mech.hmac(&salted, b"Server Key");
    let expected = format!(
        "v={}",
        B64.encode(l.mech.hmac(&server_key, auth_message.as_bytes()))
    );
    if payload_of(&r) != expected.as_bytes() || !r.get_bool("done").unwrap_or(false) {
        return Err(std::io::Error::other(
            "the server did not prove it knows the key",
        ));
    }
    Ok(Ok(salted))
}

fn rand_bytes() -> [u8; 18] {
    // Not a secret: a test nonce only needs to differ between conversations.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut out = [0u8; 18];
    out[..16].copy_from_slice(&t.to_le_bytes());
    out[16..].copy_from_slice(&(std::process::id() as u16).to_le_bytes());
    out
}

/// PEM files for TLS tests: a CA, a server certificate for `localhost` and 127.0.0.1 (chain and
/// key in one file, as `--tlsCertificateKeyFile` takes it), and a client certificate.
pub struct TlsFiles {
    pub ca: PathBuf,
    pub server: PathBuf,
    pub client: PathBuf,
    pub ca_der: Vec<u8>,
}

pub fn make_tls_files(dir: &Path) -> TlsFiles {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "cairn test CA");
    let ca_key = KeyPair::generate().expect("ca key");
    let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: Vec<String>, cn: &str| {
        let mut p = CertificateParams::new(names).expect("params");
        p.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("key");
        let cert = p.signed_by(&key, &issuer).expect("sign");
        format!("{}{}", cert.pem(), key.serialize_pem())
    };
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        server: dir.join("server.pem"),
        client: dir.join("client.pem"),
        ca_der: ca_cert.der().to_vec(),
    };
    std::fs::write(&files.ca, ca_cert.pem()).expect("write ca");
    std::fs::write(
        &files.server,
        leaf(vec!["localhost".into(), "127.0.0.1".into()], "localhost"),
    )
    .expect("write server");
    std::fs::write(&files.client, leaf(vec![], "cairn test client")).expect("write client");
    files
}

/// A rustls client configuration that trusts only `ca_der`.
pub fn tls_client_config(ca_der: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(ca_der.to_vec()))
        .expect("CA");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// A blocking TLS connection to `addr` as `localhost`.
pub fn tls_connect(
    addr: &str,
    config: &Arc<rustls::ClientConfig>,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    let tcp = std::net::TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(20)))?;
    let name =
        rustls::pki_types::ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    let conn =
        rustls::ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    // Drive the handshake now, so that callers can time it apart from the first command.
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}
