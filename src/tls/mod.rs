//! TLS, all of it: rustls with the ring provider, chosen once at start (by
//! the CLI, or by whoever embeds the gateway) before any HTTP client or MCP
//! HTTP session is built; the trust roots of every HTTPS client the gateway
//! builds; and the listeners' certificates, key and client CA
//! ([`ServerTls`], re-read on reload).

mod listener;

use std::sync::{Once, OnceLock};

pub(crate) use listener::ServerTls;
pub use listener::TlsConfig;

/// Installs ring as rustls' process-wide crypto provider; later calls do nothing.
pub(crate) fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A builder for an HTTPS-capable client that verifies servers against the
/// system's CA certificates, or, on a system that has none (a minimal
/// container image without `ca-certificates`), against the bundled Mozilla
/// roots of `webpki-root-certs`: the gateway starts anywhere, and
/// certificate verification is never off. Every HTTP client the gateway
/// builds starts here.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_certs_only(roots().iter().cloned())
}

/// The roots every HTTPS client trusts, read once per process (`SSL_CERT_FILE`
/// and `SSL_CERT_DIR` honoured): the system's CA certificates that can serve
/// as trust anchors (one that cannot is skipped, as rustls' own verifier
/// skips it), or the bundled roots when there are none. Reading and decoding
/// the system's certificates takes a few milliseconds; once for every
/// client, not once per client, keeps them off each start, reload and MCP
/// connection.
fn roots() -> &'static [reqwest::Certificate] {
    static ROOTS: OnceLock<Vec<reqwest::Certificate>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let anchor = |der: &rustls::pki_types::CertificateDer<'_>| {
            rustls::RootCertStore::empty().add(der.clone().into_owned()).is_ok()
        };
        let system = rustls_native_certs::load_native_certs().certs;
        let usable: Vec<_> = system
            .iter()
            .filter(|der| anchor(der))
            .filter_map(|der| reqwest::Certificate::from_der(der).ok())
            .collect();
        if !usable.is_empty() {
            return usable;
        }
        tracing::warn!(
            "no CA certificates on this system: HTTPS servers are verified against the bundled Mozilla roots"
        );
        let bundled = webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter();
        bundled.filter_map(|der| reqwest::Certificate::from_der(der).ok()).collect()
    })
}
