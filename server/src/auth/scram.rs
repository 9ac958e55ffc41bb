//! SCRAM (RFC 5802; SHA-256 per RFC 7677) as MongoDB speaks it, server side: deriving the stored
//! credential from a password, and the two-message exchange that checks a client's proof.
//! MongoDB's variations: SCRAM-SHA-1 hashes `HEX(MD5(user ":mongo:" password))` instead of the
//! password, SCRAM-SHA-256 SASLpreps the password, user names are never SASLprepped, and channel
//! binding is not offered. Pure functions and one state value: no I/O, no storage; the caller
//! looks up the credential between the two steps. Secrets never appear in errors or `Debug`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bson::{Bson, Document, doc};
use hmac::{KeyInit, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The SCRAM mechanisms, by their SASL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

/// Every mechanism, in the order mongod lists them.
pub const MECHANISMS: [Mechanism; 2] = [Mechanism::Sha1, Mechanism::Sha256];

/// Smallest iteration count a stored credential may have (mongod's bounds of
/// `scramIterationCount` and `scramSHA256IterationCount`).
pub const ITERATIONS_MIN_SHA1: i64 = 5000;
pub const ITERATIONS_MIN_SHA256: i64 = 4096;
/// Random bytes of a server nonce (base64: 32 characters).
const SERVER_NONCE_BYTES: usize = 24;

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    pub fn parse(name: &str) -> Option<Mechanism> {
        MECHANISMS.into_iter().find(|m| m.name() == name)
    }

    /// Salt length of new credentials, as mongod makes them (16 and 28 bytes).
    pub fn salt_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 16,
            Mechanism::Sha256 => 28,
        }
    }

    fn hash_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 20,
            Mechanism::Sha256 => 32,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length, so `new_from_slice` cannot fail here.
        match self {
            Mechanism::Sha1 => {
                let mut m = <hmac::Hmac<Sha1> as KeyInit>::new_from_slice(key)
                    .expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::Sha256 => {
                let mut m = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key)
                    .expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_len()];
        match self {
            Mechanism::Sha1 => pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, &mut out),
            Mechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

/// What went wrong in a conversation. `Malformed` texts name the part, never its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramError {
    Malformed(&'static str),
    /// The proof does not match the stored key.
    WrongProof,
}

/// `HEX(MD5(user ":mongo:" password))`: what SCRAM-SHA-1 salts and iterates.
pub fn mongo_digest(user: &str, password: &str) -> String {
    let d = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// One mechanism's stored credential: enough to check a proof, not enough to make one.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub iteration_count: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("iteration_count", &self.iteration_count)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// Derive from a password. `digested`: the password is already `mongo_digest`ed (mongod's
    /// `digestPassword: false`, SCRAM-SHA-1 only). Err when SASLprep refuses the password.
    pub fn derive(
        mechanism: Mechanism,
        user: &str,
        password: &str,
        digested: bool,
        salt: Vec<u8>,
        iterations: u32,
    ) -> Result<Credential, &'static str> {
        let input = match mechanism {
            Mechanism::Sha1 if digested => password.to_string(),
            Mechanism::Sha1 => mongo_digest(user, password),
            Mechanism::Sha256 => stringprep::saslprep(password)
                .map_err(|_| "the password contains characters SASLprep prohibits")?
                .into_owned(),
        };
        let salted = mechanism.salted_password(input.as_bytes(), &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        Ok(Credential {
            iteration_count: iterations,
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(&salted, b"Server Key"),
        })
    }

    /// A fresh random salt of the mechanism's length.
    pub fn new_salt(mechanism: Mechanism) -> Vec<u8> {
        let mut salt = vec![0u8; mechanism.salt_len()];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut salt);
        salt
    }

    /// The shape mongod stores under `credentials.<mechanism>`.
    pub fn to_document(&self) -> Document {
        doc! {
            "iterationCount": self.iteration_count as i32,
            "salt": B64.encode(&self.salt),
            "storedKey": B64.encode(&self.stored_key),
            "serverKey": B64.encode(&self.server_key),
        }
    }

    pub fn from_document(mechanism: Mechanism, d: &Document) -> Option<Credential> {
        let iterations = match d.get("iterationCount")? {
            Bson::Int32(i) => u32::try_from(*i).ok()?,
            Bson::Int64(i) => u32::try_from(*i).ok()?,
            _ => return None,
        };
        let b64 = |k: &str| d.get_str(k).ok().and_then(|s| B64.decode(s).ok());
        let c = Credential {
            iteration_count: iterations,
            salt: b64("salt")?,
            stored_key: b64("storedKey")?,
            server_key: b64("serverKey")?,
        };
        let ok = c.stored_key.len() == mechanism.hash_len()
            && c.server_key.len() == mechanism.hash_len();
        ok.then_some(c)
    }
}

/// The client's first message, parsed.
#[derive(Debug, Clone)]
pub struct ClientFirst {
    /// `n,,` or `y,,` (with an authzid, `n,a=user,`): the final message must echo it.
    gs2_header: String,
    /// The user name with SCRAM's `=2C` / `=3D` escapes undone.
    pub user: String,
    nonce: String,
    bare: String,
}

/// Parse `gs2-header client-first-message-bare`.
pub fn parse_client_first(payload: &[u8]) -> Result<ClientFirst, ScramError> {
    let text = std::str::from_utf8(payload).map_err(|_| ScramError::Malformed("not UTF-8"))?;
    let mut parts = text.splitn(3, ',');
    let flag = parts.next().unwrap_or("");
    let authzid = parts.next().ok_or(ScramError::Malformed("no GS2 header"))?;
    let bare = parts.next().ok_or(ScramError::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => {
            return Err(ScramError::Malformed("channel binding is not supported"));
        }
        _ => return Err(ScramError::Malformed("bad GS2 channel binding flag")),
    }
    let mut attrs = bare.split(',');
    let user_attr = attrs.next().unwrap_or("");
    if user_attr.starts_with("m=") {
        return Err(ScramError::Malformed(
            "SCRAM mandatory extensions are not supported",
        ));
    }
    let user = user_attr
        .strip_prefix("n=")
        .ok_or(ScramError::Malformed("first attribute is not n="))
        .and_then(unescape_name)?;
    let nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(ScramError::Malformed("second attribute is not r="))?;
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(ScramError::Malformed("bad client nonce"));
    }
    if !authzid.is_empty() {
        match authzid.strip_prefix("a=").map(unescape_name) {
            Some(Ok(a)) if a == user => {}
            _ => return Err(ScramError::Malformed("authzid differs from the user name")),
        }
    }
    Ok(ClientFirst {
        gs2_header: format!("{flag},{authzid},"),
        user,
        nonce: nonce.to_string(),
        bare: bare.to_string(),
    })
}

fn unescape_name(s: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3);
        match esc {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("bad escape in the user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(ScramError::Malformed("empty user name"));
    }
    Ok(out)
}

/// A conversation after the server's first message: what the proof is checked against.
#[derive(Clone)]
pub struct Conversation {
    pub mechanism: Mechanism,
    pub user: String,
    gs2_header: String,
    nonce: String,
    /// `client-first-message-bare "," server-first-message`.
    auth_message_prefix: String,
    credential: Credential,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// A random server nonce (base64 of `SERVER_NONCE_BYTES` bytes).
pub fn new_server_nonce() -> String {
    let mut n = [0u8; SERVER_NONCE_BYTES];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut n);
    B64.encode(n)
}

impl Conversation {
    /// Answer the client's first message: returns the state and `server-first-message`.
    pub fn start(
        mechanism: Mechanism,
        first: ClientFirst,
        credential: Credential,
        server_nonce: &str,
    ) -> (Conversation, String) {
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iteration_count
        );
        let conv = Conversation {
            mechanism,
            user: first.user,
            gs2_header: first.gs2_header,
            nonce,
            auth_message_prefix: format!("{},{server_first}", first.bare),
            credential,
        };
        (conv, server_first)
    }

    /// Check `client-final-message`; on success returns `server-final-message` (`v=...`).
    pub fn finish(&self, payload: &[u8]) -> Result<String, ScramError> {
        let text = std::str::from_utf8(payload).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let mut attrs = without_proof.split(',');
        let binding = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or(ScramError::Malformed("first attribute is not c="))?;
        if B64.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(ScramError::Malformed("channel binding does not match"));
        }
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or(ScramError::Malformed("second attribute is not r="))?;
        if nonce.as_bytes().ct_eq(self.nonce.as_bytes()).unwrap_u8() != 1 {
            return Err(ScramError::Malformed("nonce does not match"));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let m = self.mechanism;
        if proof.len() != m.hash_len() {
            return Err(ScramError::Malformed("proof has the wrong length"));
        }
        let auth_message = format!("{},{without_proof}", self.auth_message_prefix);
        let client_signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let stored_key = m.hash(&client_key);
        if stored_key.ct_eq(&self.credential.stored_key).unwrap_u8() != 1 {
            return Err(ScramError::WrongProof);
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver auth specification's SCRAM-SHA-1 example (user "user", password "pencil"),
    /// answered by this server side with the example's own server nonce and salt.
    #[test]
    fn sha1_example_conversation() {
        let first = parse_client_first(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
        let salt = B64.decode("rQ9ZY3MntBeuP3E1TDVC4w==").unwrap();
        let cred =
            Credential::derive(Mechanism::Sha1, "user", "pencil", false, salt, 10000).unwrap();
        let (conv, server_first) = Conversation::start(
            Mechanism::Sha1,
            first,
            cred,
            "Ho+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE",
        );
        assert_eq!(
            server_first,
            "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000"
        );
        let fin = conv
            .finish(b"c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,p=MC2T8BvbmWRckDw8oWl5IVghwCY=")
            .unwrap();
        assert_eq!(fin, "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=");
    }

    /// RFC 7677's SCRAM-SHA-256 example, which the auth specification repeats.
    #[test]
    fn sha256_example_conversation() {
        let first = parse_client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred =
            Credential::derive(Mechanism::Sha256, "user", "pencil", false, salt, 4096).unwrap();
        let (conv, server_first) = Conversation::start(
            Mechanism::Sha256,
            first,
            cred,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        );
        assert!(server_first.ends_with(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
        let fin = conv
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(fin, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        let wrong = conv.finish(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        );
        assert_eq!(wrong, Err(ScramError::WrongProof));
        let bad_nonce = conv.finish(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        );
        assert!(matches!(bad_nonce, Err(ScramError::Malformed(_))));
    }

    #[test]
    fn client_first_forms() {
        assert_eq!(
            parse_client_first(b"n,,n=a=2Cb=3Dc,r=x").unwrap().user,
            "a,b=c"
        );
        assert!(parse_client_first(b"p=tls-unique,,n=u,r=x").is_err());
        assert!(parse_client_first(b"n,,m=ext,n=u,r=x").is_err());
        assert!(parse_client_first(b"n,,n=u=2X,r=x").is_err());
        assert!(parse_client_first(b"n,,n=u").is_err());
        assert!(parse_client_first(b"n,,n=,r=x").is_err());
        assert!(parse_client_first(b"n,a=u,n=u,r=x").is_ok());
        assert!(parse_client_first(b"n,a=v,n=u,r=x").is_err());
        assert!(parse_client_first(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn credential_documents_round_trip() {
        let c = Credential::derive(Mechanism::Sha256, "u", "p", false, vec![7; 28], 4096).unwrap();
        let d = c.to_document();
        assert_eq!(Credential::from_document(Mechanism::Sha256, &d), Some(c));
        assert_eq!(Credential::from_document(Mechanism::Sha1, &d), None);
        assert_eq!(mongo_digest("user", "pencil").len(), 32);
        // SASLprep maps the non-ASCII space to a space and refuses control characters.
        assert!(
            Credential::derive(Mechanism::Sha256, "u", "a\u{7}b", false, vec![1], 4096).is_err()
        );
    }
}
