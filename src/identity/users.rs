//! End users (docs/architecture.md, "Identity"): the user an agent acts for, proven by
//! a JWT the caller sends in a metadata header, verified against the keys of
//! a JWKS (a file, or a URL fetched at start and refreshed). Only RS256,
//! ES256 and EdDSA are accepted, each key only for its own algorithm; `iss`,
//! `aud`, `exp` and `nbf` are checked with 60 s of leeway. A verified token
//! is remembered by its SHA-256 until it expires, so a conversation pays for
//! one signature check, not one per call.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use arc_swap::ArcSwap;
use jsonwebtoken::{
    jwk::{Jwk, JwkSet},
    Algorithm, DecodingKey, Validation,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::User;

/// The metadata header that carries the user's token, by default.
pub(crate) const DEFAULT_USER_HEADER: &str = "x-toolgate-user-token";
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 60;
/// How often a JWKS URL is fetched again; sooner after a failure.
const REFRESH: Duration = Duration::from_secs(300);
const RETRY: Duration = Duration::from_secs(30);
/// Verified tokens remembered at most; past it, expired ones are dropped,
/// then all.
const MAX_CACHED: usize = 10_000;

/// `users:` of the configuration file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsersConfig {
    pub(crate) jwt: Option<JwtConfig>,
}

/// `users.jwt:`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    pub issuer: String,
    pub audience: String,
    /// A JWKS file (relative to the configuration file)…
    pub jwks_file: Option<PathBuf>,
    /// …or a URL, fetched at start and every 5 minutes.
    pub jwks_url: Option<String>,
    /// The metadata header carrying the token (default `x-toolgate-user-token`).
    pub header: Option<String>,
}

impl JwtConfig {
    /// The settings' own shape, without reading or fetching anything: one
    /// of `jwks_file` or `jwks_url`, and a URL that parses.
    pub(crate) fn check(&self) -> Result<(), String> {
        match (&self.jwks_file, &self.jwks_url) {
            (Some(_), None) => Ok(()),
            (None, Some(url)) => match url::Url::parse(url) {
                Ok(_) => Ok(()),
                Err(err) => Err(format!("users.jwt.jwks_url '{url}': {err}")),
            },
            _ => Err("users.jwt needs one of jwks_file or jwks_url".to_owned()),
        }
    }
}

/// Why a user token was refused (for the log; the caller is told only that
/// its credentials are invalid).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("no keys to verify user tokens with yet")]
    NoKeys,
    #[error("the token's algorithm is not RS256, ES256 or EdDSA")]
    Algorithm,
    #[error("no key of the JWKS matches the token (kid and algorithm)")]
    NoKey,
    /// A `sub` that names no one, or could not travel to a tool intact.
    #[error("the token's subject is empty or holds control characters")]
    Subject,
    /// A claim read here (`sub`, `exp`, `scope`, `client_id`…) of another type.
    #[error("the token's claims are not as expected: {0}")]
    Claims(String),
    #[error("{0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
}

/// The claims read from a verified token.
#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    /// OAuth access tokens: the granted scopes, space-separated (RFC 9068)…
    scope: Option<String>,
    /// …or as some authorization servers write them (a list, or text).
    scp: Option<serde_json::Value>,
    /// The OAuth client the token was issued to (RFC 9068), or OpenID's `azp`.
    client_id: Option<String>,
    azp: Option<String>,
}

/// What a verified token proves.
#[derive(Debug)]
pub(crate) struct Verified {
    pub(crate) user: Arc<User>,
    exp: u64,
    /// Its scopes (`scope` or `scp`).
    pub(crate) scopes: Vec<String>,
    /// Its client (`client_id`, else `azp`).
    pub(crate) client_id: Option<String>,
}

/// A key of the JWKS, with the one algorithm it verifies.
struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// Verifies user tokens.
pub struct UserVerifier {
    config: JwtConfig,
    header: String,
    keys: ArcSwap<Vec<Key>>,
    /// Verified tokens by their SHA-256.
    verified: Mutex<HashMap<[u8; 32], Arc<Verified>>>,
    /// Whether a tool that asks may be given the token (a user token); an
    /// access token for the gateway itself is never passed on.
    forwardable: bool,
    /// Its users are told apart from `users.jwt`'s by their issuer where a
    /// parameter is bound to the user ([`User::qualified`]).
    qualified: bool,
}

impl std::fmt::Debug for UserVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserVerifier").field("config", &self.config).field("keys", &self.keys.load().len()).finish()
    }
}

impl UserVerifier {
    /// From the configuration; a JWKS file is read now (an error names the
    /// file). A URL is fetched by `UserVerifier::keep_keys_fresh`.
    pub fn new(config: JwtConfig) -> Result<Self, String> {
        config.check()?;
        let header = config.header.clone().unwrap_or_else(|| DEFAULT_USER_HEADER.to_owned()).to_ascii_lowercase();
        let keys = match &config.jwks_file {
            Some(file) => {
                let bytes = crate::catalog::read_bounded(file)
                    .map_err(|why| format!("users.jwt.jwks_file {}: {why}", file.display()))?;
                keys_of(&bytes).map_err(|why| format!("users.jwt.jwks_file {}: {why}", file.display()))?
            }
            None => Vec::new(),
        };
        Ok(Self {
            config,
            header,
            keys: ArcSwap::from_pointee(keys),
            verified: Mutex::default(),
            forwardable: true,
            qualified: false,
        })
    }

    /// A verifier of OAuth access tokens for the gateway (`audience` is the
    /// resource): as [`UserVerifier::new`], but the users it proves carry no
    /// token, so none reaches a tool or an upstream server. `qualified`:
    /// the gateway's `users.jwt` names another issuer.
    pub(crate) fn for_access_tokens(config: JwtConfig, qualified: bool) -> Result<Self, String> {
        Ok(Self { forwardable: false, qualified, ..Self::new(config)? })
    }

    /// The metadata header that carries the token (lowercase).
    pub(crate) fn header(&self) -> &str {
        &self.header
    }

    /// The configuration it was built from.
    pub(crate) fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// With a JWKS URL: fetches it now (a failure warns; tokens are refused
    /// until keys arrive), then again every 5 minutes, and 30 s after a
    /// failure; a failed refresh keeps the last keys. The refresh ends by
    /// itself once the verifier is dropped (a reload replaced it). Must run
    /// inside the Tokio runtime.
    pub(crate) fn keep_keys_fresh(self: &Arc<Self>) {
        let Some(url) = self.config.jwks_url.clone() else { return };
        let verifier = Arc::downgrade(self);
        let client = match crate::tls::client_builder().timeout(Duration::from_secs(5)).build() {
            Ok(client) => client,
            Err(err) => {
                tracing::warn!("cannot build the client that fetches the JWKS for user tokens: {err}");
                return;
            }
        };
        tokio::spawn(async move {
            loop {
                let keys = fetch(&client, &url).await;
                let Some(verifier) = verifier.upgrade() else { return };
                let next = match keys {
                    Ok(keys) => {
                        tracing::info!(keys = keys.len(), "user token keys fetched from the JWKS URL");
                        verifier.keys.store(Arc::new(keys));
                        REFRESH
                    }
                    Err(why) => {
                        tracing::warn!("cannot fetch the JWKS for user tokens ({why}); the last keys stay");
                        RETRY
                    }
                };
                drop(verifier);
                tokio::time::sleep(next).await;
            }
        });
    }

    /// The user a token proves.
    pub fn verify(&self, token: &str) -> Result<Arc<User>, TokenError> {
        self.verified(token).map(|verified| Arc::clone(&verified.user))
    }

    /// What a token proves: its user, scopes and client.
    pub(crate) fn verified(&self, token: &str) -> Result<Arc<Verified>, TokenError> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if let Some(verified) = crate::lock::lock(&self.verified).get(&digest) {
            if now <= verified.exp + LEEWAY_SECONDS {
                return Ok(Arc::clone(verified));
            }
        }
        let header = jsonwebtoken::decode_header(token)?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA) {
            return Err(TokenError::Algorithm);
        }
        let keys = self.keys.load();
        if keys.is_empty() {
            return Err(TokenError::NoKeys);
        }
        let key = keys
            .iter()
            .find(|k| k.algorithm == header.alg && (header.kid.is_none() || k.kid == header.kid))
            .ok_or(TokenError::NoKey)?;
        let mut validation = Validation::new(key.algorithm);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        // Every claim, for conditions (`user.claims`); those read here typed.
        let all = jsonwebtoken::decode::<serde_json::Value>(token, &key.key, &validation)?.claims;
        let claims = Claims::deserialize(&all).map_err(|err| TokenError::Claims(err.to_string()))?;
        // The subject reaches tools as a header and an environment variable,
        // and scopes once-only records: it must name someone, in text that
        // travels intact.
        if claims.sub.is_empty() || claims.sub.chars().any(char::is_control) {
            return Err(TokenError::Subject);
        }
        let token = if self.forwardable { token.to_owned() } else { String::new() };
        let mut scopes: Vec<String> =
            claims.scope.iter().flat_map(|s| s.split_whitespace()).map(str::to_owned).collect();
        match claims.scp {
            Some(serde_json::Value::String(text)) => scopes.extend(text.split_whitespace().map(str::to_owned)),
            Some(serde_json::Value::Array(list)) => {
                scopes.extend(list.iter().filter_map(|s| s.as_str()).map(str::to_owned));
            }
            _ => {}
        }
        let verified = Arc::new(Verified {
            user: Arc::new(User {
                issuer: Arc::from(self.config.issuer.as_str()),
                id: claims.sub,
                token,
                qualified: self.qualified,
                claims: match all {
                    serde_json::Value::Object(claims) => Arc::new(claims),
                    _ => Arc::default(),
                },
            }),
            exp: claims.exp,
            scopes,
            client_id: claims.client_id.or(claims.azp),
        });
        let mut cache = crate::lock::lock(&self.verified);
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, v| now <= v.exp + LEEWAY_SECONDS);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(digest, Arc::clone(&verified));
        Ok(verified)
    }
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<Key>, String> {
    let response = client.get(url).send().await.map_err(|err| err.without_url().to_string())?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status().as_u16()));
    }
    let bytes = response.bytes().await.map_err(|err| err.without_url().to_string())?;
    keys_of(&bytes)
}

/// The usable keys of a JWKS: each with the one algorithm it serves (its
/// `alg`, else the one its key type implies), RS256, ES256 and EdDSA only.
/// Keys of other kinds are skipped; a set with none usable is an error.
fn keys_of(bytes: &[u8]) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_slice(bytes).map_err(|err| format!("not a JWKS (JSON Web Key Set): {err}"))?;
    let keys: Vec<Key> = set.keys.iter().filter_map(key_of).collect();
    match keys.is_empty() {
        true => Err("no RS256, ES256 or EdDSA key in the JWKS".to_owned()),
        false => Ok(keys),
    }
}

fn key_of(jwk: &Jwk) -> Option<Key> {
    use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve};
    let implied = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => Algorithm::EdDSA,
        // Symmetric keys are never accepted: a public key must not verify HS*.
        _ => return None,
    };
    let algorithm = match jwk.common.key_algorithm {
        None => implied,
        Some(declared) => format!("{declared:?}").parse::<Algorithm>().ok().filter(|&a| a == implied)?,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key { kid: jwk.common.key_id.clone(), algorithm, key })
}
