//! TLS for the gateway's listeners (gRPC and MCP), terminated by the
//! gateway with tokio-rustls rather than by tonic, whose TLS configuration
//! cannot change once built: the server's certificate, key and client CA
//! are re-read on SIGHUP ([`ServerTls::reload`]) and apply to every
//! connection accepted after, while connections already open keep theirs.
//! Client certificates are optional (a caller may use an API key instead);
//! when one is presented it must chain to the client CA. The handshake of
//! each accepted connection is the accept path's (`server/handshake.rs`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use arc_swap::ArcSwap;
use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::{danger::ClientCertVerifier, WebPkiClientVerifier},
    RootCertStore, ServerConfig,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use tokio_rustls::TlsAcceptor;

/// `tls:` of the configuration file; paths relative to the file.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) client_ca: Option<PathBuf>,
}

/// The listener's TLS configuration, replaced whole on reload.
pub(crate) struct ServerTls {
    files: TlsConfig,
    config: ArcSwap<ServerConfig>,
    /// The same, offering HTTP/1.1 besides HTTP/2 (the MCP listener).
    config_http1: ArcSwap<ServerConfig>,
    /// The client CA's verifier of the configuration in use, to check again
    /// the certificates of connections made before the CA changed.
    verifier: ArcSwap<Option<Arc<dyn ClientCertVerifier>>>,
    /// What [`ServerTls::trusts`] found, by the end-entity certificate's
    /// SHA-256; cleared with every reload.
    checked: Mutex<HashMap<[u8; 32], bool>>,
}

/// Certificates whose check is remembered at most (then all are forgotten).
const MAX_CHECKED: usize = 10_000;

impl ServerTls {
    /// Reads the certificate chain, key and client CA; the error names the
    /// file and what is wrong with it.
    pub(crate) fn load(files: &TlsConfig) -> Result<Self, String> {
        let (config, verifier) = build(files)?;
        Ok(Self {
            files: files.clone(),
            config_http1: ArcSwap::from_pointee(with_http1(&config)),
            config: ArcSwap::from_pointee(config),
            verifier: ArcSwap::from_pointee(verifier),
            checked: Mutex::default(),
        })
    }

    /// Reads the files again (certificate rotation). On an error the
    /// configuration in use stays, and the error says why. New connections
    /// use the new files; connections already open keep their TLS session,
    /// but their client certificate is checked again against the new client
    /// CA on every call ([`ServerTls::trusts`]).
    pub(crate) fn reload(&self) -> Result<(), String> {
        let (config, verifier) = build(&self.files)?;
        self.config_http1.store(Arc::new(with_http1(&config)));
        self.config.store(Arc::new(config));
        self.verifier.store(Arc::new(verifier));
        crate::lock::lock(&self.checked).clear();
        Ok(())
    }

    /// The end-entity certificate of `chain` (what a connection presented)
    /// when `tls`, the listener's, still trusts the chain ([`Self::trusts`]).
    pub(crate) fn vouched<'c>(
        tls: Option<&ServerTls>,
        chain: Option<&'c [CertificateDer<'static>]>,
    ) -> Option<&'c [u8]> {
        let chain = chain.filter(|chain| tls.is_some_and(|tls| tls.trusts(chain)))?;
        chain.first().map(|end_entity| end_entity.as_ref())
    }

    /// Whether the client CA in use now (re-read on reload) still vouches for
    /// this chain, presented when its connection was made: a connection made
    /// before the CA was rotated proves nothing the new CA does not.
    pub(crate) fn trusts(&self, chain: &[CertificateDer<'_>]) -> bool {
        let Some((end_entity, intermediates)) = chain.split_first() else { return false };
        let digest: [u8; 32] = Sha256::digest(end_entity.as_ref()).into();
        let mut checked = crate::lock::lock(&self.checked);
        if let Some(&trusted) = checked.get(&digest) {
            return trusted;
        }
        let verifier = self.verifier.load();
        let trusted = verifier.as_ref().as_ref().is_some_and(|verifier| {
            verifier.verify_client_cert(end_entity, intermediates, rustls::pki_types::UnixTime::now()).is_ok()
        });
        if checked.len() >= MAX_CHECKED {
            checked.clear();
        }
        checked.insert(digest, trusted);
        trusted
    }

    /// What accepts a connection's handshake now (`http1`: offering
    /// HTTP/1.1 too).
    pub(crate) fn acceptor(&self, http1: bool) -> TlsAcceptor {
        match http1 {
            true => TlsAcceptor::from(self.config_http1.load_full()),
            false => TlsAcceptor::from(self.config.load_full()),
        }
    }
}

/// `config` offering HTTP/1.1 after HTTP/2 in ALPN: MCP clients speak either.
fn with_http1(config: &ServerConfig) -> ServerConfig {
    let mut config = config.clone();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// The server configuration of `files`, and its client certificate
/// verifier when there is a client CA.
#[allow(clippy::type_complexity)]
fn build(files: &TlsConfig) -> Result<(ServerConfig, Option<Arc<dyn ClientCertVerifier>>), String> {
    let read = |what: &str, path: &std::path::Path| {
        crate::catalog::read_bounded(path).map_err(|why| format!("the TLS {what} {}: {why}", path.display()))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read("certificate", &files.cert)?)
        .collect::<Result<_, _>>()
        .map_err(|err| format!("the TLS certificate {}: {err}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!("the TLS certificate {}: no certificate in it", files.cert.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(&read("key", &files.key)?)
        .map_err(|err| format!("the TLS key {}: {err}", files.key.display()))?;
    let builder = ServerConfig::builder();
    let mut client_verifier: Option<Arc<dyn ClientCertVerifier>> = None;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&read("client CA", ca)?) {
                let cert = cert.map_err(|err| format!("the TLS client CA {}: {err}", ca.display()))?;
                roots.add(cert).map_err(|err| format!("the TLS client CA {}: {err}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
                .allow_unauthenticated()
                .build()
                .map_err(|err| format!("the TLS client CA {}: {err}", ca.display()))?;
            client_verifier = Some(Arc::clone(&verifier));
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|err| {
        format!("the TLS certificate {} and key {}: {err}", files.cert.display(), files.key.display())
    })?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok((config, client_verifier))
}
