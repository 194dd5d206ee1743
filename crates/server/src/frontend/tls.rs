//! TLS on the daemon's own ports (HTTP, the binary protocol, Flight):
//! rustls with the ring provider (as for MQTT), a certificate chain and
//! key from PEM files, optionally client certificates checked against a
//! CA. The configuration is built again from the same files on
//! [`Tls::reload`] (SIGHUP): new connections get the new certificate,
//! open ones keep theirs; a reload that fails keeps the old one and says
//! why. A client certificate is checked by the TLS layer only: what a
//! client may do is still its token's.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use telestore_engine::error::{Error, Result};
use telestore_engine::util::sync::RwLockExt;
use tokio_rustls::TlsAcceptor;

/// Where the certificate, its key and the client CA are (the
/// configuration file's `[tls]` table).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// PEM: the server's certificate, then its chain.
    pub cert: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM: the CAs a client certificate must chain to; with it, a client
    /// without a valid certificate is refused in the handshake.
    pub client_ca: Option<PathBuf>,
}

/// Which listener a connection came on: its ALPN protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// HTTP/2 or HTTP/1.1.
    Http = 0,
    /// gRPC: HTTP/2 only.
    Flight = 1,
    /// The binary protocol: no ALPN.
    Binary = 2,
}

/// The TLS configuration of every listener, reloadable.
pub struct Tls {
    files: TlsFiles,
    configs: RwLock<[Arc<ServerConfig>; 3]>,
    /// Reloads that took, and that failed (the old configuration stayed).
    pub reloads: AtomicU64,
    /// Reloads (SIGHUP) that failed and kept the old certificate.
    pub failed_reloads: AtomicU64,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

impl Tls {
    /// Read the files; an error names the file and what is wrong with it.
    pub fn load(files: TlsFiles) -> Result<Arc<Tls>> {
        let configs = build(&files)?;
        Ok(Arc::new(Tls {
            files,
            configs: RwLock::new(configs),
            reloads: AtomicU64::new(0),
            failed_reloads: AtomicU64::new(0),
        }))
    }

    /// Read the files again (SIGHUP). On an error the configuration in
    /// use stays, and the error is returned to be logged.
    pub fn reload(&self) -> Result<()> {
        match build(&self.files) {
            Ok(c) => {
                *self.configs.write_or_recover() = c;
                self.reloads.fetch_add(1, Relaxed);
                Ok(())
            }
            Err(e) => {
                self.failed_reloads.fetch_add(1, Relaxed);
                Err(e)
            }
        }
    }

    /// The acceptor for a new connection on `port`.
    pub fn acceptor(&self, port: Port) -> TlsAcceptor {
        let c = self.configs.read_or_recover();
        TlsAcceptor::from(c[port as usize].clone())
    }

    /// The server side of a TLS handshake on `stream`, which must end
    /// within `timeout` (every listener runs it in the connection's own
    /// task, so a slow client holds up no other).
    pub async fn accept<S>(
        &self,
        port: Port,
        stream: S,
        timeout: std::time::Duration,
    ) -> std::io::Result<tokio_rustls::server::TlsStream<S>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        match tokio::time::timeout(timeout, self.acceptor(port).accept(stream)).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no TLS handshake within the timeout",
            )),
        }
    }
}

fn bad(file: &Path, e: &dyn std::fmt::Display) -> Error {
    Error::invalid("tls", format!("{}: {e}", file.display()))
}

fn certs(file: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let all = CertificateDer::pem_file_iter(file)
        .map_err(|e| bad(file, &e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(file, &e))?;
    if all.is_empty() {
        return Err(bad(file, &"no certificate in it"));
    }
    Ok(all)
}

/// One configuration per [`Port`], from the files.
fn build(files: &TlsFiles) -> Result<[Arc<ServerConfig>; 3]> {
    let chain = certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| bad(&files.key, &e))?;
    // The ring provider, as for MQTT (crates/server/src/mqtt/tls.rs says why).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::invalid("tls", e.to_string()))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs(ca)? {
                roots.add(c).map_err(|e| bad(ca, &e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad(ca, &e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let base = builder.with_single_cert(chain, key).map_err(|e| {
        bad(
            &files.key,
            &format!("{e} (does the key belong to {}?)", files.cert.display()),
        )
    })?;
    let with = |alpn: &[&[u8]]| {
        let mut c = base.clone();
        c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(c)
    };
    Ok([with(&[b"h2", b"http/1.1"]), with(&[b"h2"]), with(&[])])
}
