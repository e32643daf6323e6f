//! Process-wide TLS set-up: rustls with the ring provider, chosen once at
//! start (by the CLI, or by whoever embeds the gateway) before any HTTP
//! client or MCP HTTP session is built; and the trust roots of every HTTPS
//! client the gateway builds.

use std::sync::{Once, OnceLock};

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
    let builder = reqwest::Client::builder();
    match fallback_roots() {
        Some(roots) => builder.tls_certs_merge(roots.iter().cloned()),
        None => builder,
    }
}

/// The bundled roots when the system has no CA certificate (looked at once,
/// `SSL_CERT_FILE` and `SSL_CERT_DIR` honoured), else `None`.
fn fallback_roots() -> Option<&'static [reqwest::Certificate]> {
    static ROOTS: OnceLock<Option<Vec<reqwest::Certificate>>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            if !rustls_native_certs::load_native_certs().certs.is_empty() {
                return None;
            }
            tracing::warn!(
                "no CA certificates on this system: HTTPS servers are verified against the bundled Mozilla roots"
            );
            let bundled = webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter();
            Some(bundled.filter_map(|der| reqwest::Certificate::from_der(der).ok()).collect())
        })
        .as_deref()
}
