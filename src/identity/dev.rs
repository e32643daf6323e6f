//! `toolgate auth dev-token`: user tokens and access tokens for trying
//! identity without an identity provider. An Ed25519 signing key is made
//! once in a folder (or reused), its public half written there as a JWKS,
//! and each token signed with it: issuer `toolgate-dev` and audience
//! `toolgate` unless told otherwise, for a configuration of `users.jwt:
//! {issuer: toolgate-dev, audience: toolgate, jwks_file: DIR/jwks.json}`;
//! with the MCP endpoint's URL as audience, scopes and a client id, an
//! access token for `mcp_front_door.oauth`. For development only: anyone
//! with the folder can sign.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use base64::Engine;
use jsonwebtoken::{
    jwk::{
        AlgorithmParameters, CommonParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, OctetKeyPairParameters,
        OctetKeyPairType, PublicKeyUse,
    },
    Algorithm, EncodingKey, Header,
};
use ring::signature::{Ed25519KeyPair, KeyPair};

/// The issuer of development tokens.
pub(crate) const ISSUER: &str = "toolgate-dev";
/// The audience of development tokens.
pub(crate) const AUDIENCE: &str = "toolgate";
/// The signing key's file in the folder (PKCS #8, DER, mode 0600).
const KEY_FILE: &str = "signing-key.p8";
/// The public keys' file in the folder.
pub(crate) const JWKS_FILE: &str = "jwks.json";

/// The claims of a development token besides its times.
pub(crate) struct Claims<'a> {
    /// `sub`: the user.
    pub(crate) sub: &'a str,
    /// `iss`.
    pub(crate) iss: &'a str,
    /// `aud`: `toolgate` for a user token; the MCP endpoint's URL (the
    /// `oauth.resource`) for an access token.
    pub(crate) aud: &'a str,
    /// `scope`, space-separated, when any.
    pub(crate) scopes: &'a [String],
    /// `client_id`, when given.
    pub(crate) client_id: Option<&'a str>,
}

/// What [`dev_token`] made.
pub(crate) struct DevToken {
    /// The signed token.
    pub(crate) token: String,
    /// `DIR/signing-key.p8`, the private key.
    pub(crate) key: PathBuf,
    /// `DIR/jwks.json`, for `users.jwt.jwks_file`.
    pub(crate) jwks: PathBuf,
    /// Whether the signing key was made now (else an earlier one was reused).
    pub(crate) new_key: bool,
}

/// Signs a token of `claims` valid for `ttl`, with the key in `dir` (made,
/// with `dir`, when missing); writes `dir/jwks.json` each time.
pub(crate) fn dev_token(dir: &Path, claims: &Claims<'_>, ttl: Duration) -> Result<DevToken, String> {
    if claims.sub.trim().is_empty() {
        return Err("--sub must name the user (the token's subject)".to_owned());
    }
    if claims.iss.trim().is_empty() || claims.aud.trim().is_empty() {
        return Err("--iss and --aud must not be empty".to_owned());
    }
    if let Some(scope) = claims.scopes.iter().find(|s| s.is_empty() || s.contains(char::is_whitespace)) {
        return Err(format!("--scope '{scope}': one scope a flag, without spaces (repeat --scope for more)"));
    }
    let key_path = dir.join(KEY_FILE);
    let (pkcs8, new_key) = match std::fs::read(&key_path) {
        Ok(bytes) => (bytes, false),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => (make_key(dir, &key_path)?, true),
        Err(err) => return Err(format!("cannot read {}: {err}", key_path.display())),
    };
    let pair = Ed25519KeyPair::from_pkcs8(&pkcs8).map_err(|_| {
        format!("{} is not an Ed25519 key in PKCS #8 (delete it to make a new one)", key_path.display())
    })?;
    let public = pair.public_key().as_ref();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(public);
    // The key's id: its first characters, so a new key gets a new id.
    let kid = format!("toolgate-dev-{}", &x[..12]);
    let jwk = Jwk {
        common: CommonParameters {
            public_key_use: Some(PublicKeyUse::Signature),
            key_algorithm: Some(KeyAlgorithm::EdDSA),
            key_id: Some(kid.clone()),
            ..CommonParameters::default()
        },
        algorithm: AlgorithmParameters::OctetKeyPair(OctetKeyPairParameters {
            key_type: OctetKeyPairType::OctetKeyPair,
            curve: EllipticCurve::Ed25519,
            x,
        }),
    };
    let jwks = dir.join(JWKS_FILE);
    let text = serde_json::to_string_pretty(&JwkSet { keys: vec![jwk] }).expect("a JWKS serialises");
    std::fs::write(&jwks, text + "\n").map_err(|err| format!("cannot write {}: {err}", jwks.display()))?;
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
    let mut body = serde_json::json!({
        "iss": claims.iss,
        "aud": claims.aud,
        "sub": claims.sub,
        "iat": now,
        "exp": now + ttl.as_secs().max(1),
    });
    if !claims.scopes.is_empty() {
        body["scope"] = claims.scopes.join(" ").into();
    }
    if let Some(client_id) = claims.client_id {
        body["client_id"] = client_id.into();
    }
    let header = Header { kid: Some(kid), ..Header::new(Algorithm::EdDSA) };
    let token = jsonwebtoken::encode(&header, &body, &EncodingKey::from_ed_der(&pkcs8))
        .map_err(|err| format!("cannot sign the token: {err}"))?;
    Ok(DevToken { token, key: key_path, jwks, new_key })
}

/// Makes `dir` and a new Ed25519 key in it, readable by its owner only.
fn make_key(dir: &Path, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::create_dir_all(dir).map_err(|err| format!("cannot make {}: {err}", dir.display()))?;
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
        .map_err(|_| "cannot make a signing key: no randomness".to_owned())?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    file.write_all(pkcs8.as_ref()).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(pkcs8.as_ref().to_vec())
}
