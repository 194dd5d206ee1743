//! TLS to the broker (`mqtts://`): rustls with the ring provider; the
//! broker's certificate is checked against `ca_file` (PEM) or, without
//! one, the system's CA certificates.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::Path;
use std::sync::Arc;
use telestore_engine::error::{Error, Result};

/// The TLS client configuration for a broker.
pub fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig> {
    let bad = |m: String| Error::invalid("mqtt", m);
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(f) => {
            let what = |e: &dyn std::fmt::Display| bad(format!("ca_file {}: {e}", f.display()));
            for cert in CertificateDer::pem_file_iter(f).map_err(|e| what(&e))? {
                roots
                    .add(cert.map_err(|e| what(&e))?)
                    .map_err(|e| what(&e))?;
            }
            if roots.is_empty() {
                return Err(what(&"no certificate in it"));
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                // A system certificate rustls cannot use is skipped, as
                // browsers skip it.
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(bad(
                    "no system CA certificates found: set [mqtt] ca_file".into()
                ));
            }
        }
    }
    // The ring provider: rustls marks it deprecated because it has no
    // post-quantum key exchange, which aws-lc-rs has; aws-lc's C build is
    // not worth it for a loopback-or-LAN broker connection yet.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
