//! TLS with rustls (no OpenSSL), mongod's `--tlsMode` on the one listener: `disabled` serves
//! plain connections; `allowTLS` and `preferTLS` serve both, telling them apart by the first
//! three bytes (a TLS ClientHello record starts `16 03 0x`; a MongoDB message starts with its
//! little-endian length, which would have to exceed 66 KB to look the same, and no first message
//! is that large); `requireTLS` closes plain connections. `--tlsCAFile` makes clients present a
//! certificate signed by one of its CAs (`--tlsAllowConnectionsWithoutCertificates` lets clients
//! without one in, `--tlsAllowInvalidCertificates` accepts any). The handshake (and the sniff)
//! is bounded by `limits::TLS_HANDSHAKE_MS_MAX`; it runs in the connection's own task, never in
//! the accept loop.

use crate::config::{Config, TlsMode};
use crate::limits;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// Bytes read before deciding between TLS and plain.
const SNIFF_BYTES: usize = 3;

/// The TLS side of the listener, built once at start-up.
pub struct Tls {
    pub mode: TlsMode,
    acceptor: Option<TlsAcceptor>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad certificate in {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", path.display()));
    }
    Ok(certs)
}

impl Tls {
    /// From the command line; Err names the file or option at fault.
    pub fn from_config(config: &Config) -> Result<Tls, String> {
        if config.tls_mode == TlsMode::Disabled {
            return Ok(Tls {
                mode: TlsMode::Disabled,
                acceptor: None,
            });
        }
        let key_file = config.tls_certificate_key_file.as_deref().ok_or_else(|| {
            format!(
                "--tlsMode {} needs --tlsCertificateKeyFile",
                config.tls_mode.name()
            )
        })?;
        let chain = load_certs(key_file)?;
        let key = PrivateKeyDer::from_pem_file(key_file)
            .map_err(|e| format!("no private key in {}: {e}", key_file.display()))?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &config.tls_ca_file {
            None => builder.with_no_client_auth(),
            Some(_) if config.tls_allow_invalid_certificates => {
                builder.with_client_cert_verifier(Arc::new(AcceptAnyClientCert(provider())))
            }
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in load_certs(ca)? {
                    roots
                        .add(c)
                        .map_err(|e| format!("bad CA certificate in {}: {e}", ca.display()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
                let verifier = if config.tls_allow_connections_without_certificates {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(
                    verifier
                        .build()
                        .map_err(|e| format!("TLS client verification: {e}"))?,
                )
            }
        };
        let server = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("TLS certificate and key in {}: {e}", key_file.display()))?;
        Ok(Tls {
            mode: config.tls_mode,
            acceptor: Some(TlsAcceptor::from(Arc::new(server))),
        })
    }
}

/// A TLS ClientHello record header: handshake (22), version 3.x.
pub fn looks_like_tls(first: &[u8]) -> bool {
    matches!(first, [0x16, 0x03, 0x00..=0x04, ..])
}

/// A connection as the listener hands it on.
pub enum Accepted {
    Plain(Prefixed<TcpStream>),
    Tls(Box<tokio_rustls::server::TlsStream<Prefixed<TcpStream>>>),
}

/// Decide what the connection speaks and finish the TLS handshake if it is TLS. Err: the
/// connection is to be closed (the reason is for the log).
pub async fn accept(tls: &Tls, stream: TcpStream) -> Result<Accepted, String> {
    let Some(acceptor) = &tls.acceptor else {
        return Ok(Accepted::Plain(Prefixed::new(Vec::new(), stream)));
    };
    let limit = Duration::from_millis(limits::TLS_HANDSHAKE_MS_MAX);
    let mut stream = stream;
    let mut first = [0u8; SNIFF_BYTES];
    match tokio::time::timeout(limit, stream.read_exact(&mut first)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(format!("closed before the first message: {e}")),
        Err(_) => return Err("no first message within the TLS handshake time".into()),
    }
    let stream = Prefixed::new(first.to_vec(), stream);
    if !looks_like_tls(&first) {
        if tls.mode == TlsMode::RequireTls {
            return Err("plaintext connection refused: --tlsMode requireTLS".into());
        }
        return Ok(Accepted::Plain(stream));
    }
    match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(s)) => Ok(Accepted::Tls(Box::new(s))),
        Ok(Err(e)) => Err(format!("TLS handshake failed: {e}")),
        Err(_) => Err("TLS handshake timed out".into()),
    }
}

/// A stream that first yields bytes already read from it (the sniffed ones).
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix,
            pos: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = (self.prefix.len() - self.pos).min(buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// `--tlsAllowInvalidCertificates` with `--tlsCAFile`: ask for a client certificate, accept
/// any (signatures are still checked, so the client holds the key of what it presented).
#[derive(Debug)]
struct AcceptAnyClientCert(Arc<rustls::crypto::CryptoProvider>);

impl ClientCertVerifier for AcceptAnyClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert!(looks_like_tls(&[0x16, 0x03, 0x01]));
        assert!(!looks_like_tls(&[0x16, 0x01, 0x00]));
        // A 278-byte MongoDB message: 16 01 00 00.
        assert!(!looks_like_tls(&278u32.to_le_bytes()[..3]));
        // The smallest message length that would look like TLS is over 66 KB.
        assert!(looks_like_tls(&0x0001_0316u32.to_le_bytes()[..3]));
    }

    #[tokio::test]
    async fn prefixed_replays_then_reads() {
        let (a, mut b) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut b, b"def")
            .await
            .unwrap();
        let mut p = Prefixed::new(b"abc".to_vec(), a);
        let mut out = [0u8; 6];
        p.read_exact(&mut out).await.unwrap();
        assert_eq!(&out, b"abcdef");
    }
}
