//! Process-wide TLS set-up: rustls with the ring provider, chosen once at
//! start (by the CLI, or by whoever embeds the gateway) before any HTTP
//! client or MCP HTTP session is built.

use std::sync::Once;

/// Installs ring as rustls' process-wide crypto provider; later calls do nothing.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
