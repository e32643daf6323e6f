//! The MCP front door as an OAuth 2.1 resource server (MCP authorization,
//! RFC 9728): access tokens issued by the configured authorization server
//! for this resource are credentials there. A token is verified as a user
//! token is (issuer, audience = `resource`, expiry, the algorithm of its
//! key); its `sub` is the user, its client (`client_id`, or `azp`) picks the
//! principal whose grants apply (one whose `oauth_client_id` it is, else
//! `oauth.principal`), and it must hold every scope `oauth.scopes` asks for.
//! The token is never passed on: the user it proves carries none.

use std::{path::PathBuf, sync::Arc};

use serde_json::{json, Value};

use serde::Deserialize;

use super::{Caller, JwtConfig, Principals, Proof, Refusal, UserVerifier};

/// `mcp_front_door.oauth:` (MCP authorization): access tokens of an
/// authorization server, verified like `users.jwt` tokens, are credentials
/// at the MCP front door.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OauthConfig {
    /// The canonical URI of the MCP endpoint; tokens must name it as their
    /// audience.
    pub resource: String,
    /// Where clients get tokens (the protected resource metadata says).
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// The tokens' `iss`.
    pub issuer: String,
    /// The authorization server's JWKS: a file (relative to the configuration
    /// file)…
    pub jwks_file: Option<PathBuf>,
    /// …or a URL, fetched at start and every 5 minutes.
    pub jwks_url: Option<String>,
    /// Scopes every token must hold (`scope`, space-separated, or `scp`);
    /// none required when empty.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Whose grants apply to a token's caller, unless a principal's
    /// `oauth_client_id` is the token's `client_id` (or `azp`).
    pub principal: Option<String>,
}

impl OauthConfig {
    /// The settings' own shape: a `resource` URL without a fragment, an
    /// issuer, one key set, and a `principal` that names a principal.
    pub(crate) fn check(&self, principals: &Principals) -> Result<(), String> {
        let resource = url::Url::parse(&self.resource)
            .map_err(|err| format!("mcp_front_door.oauth.resource '{}': {err}", self.resource))?;
        if !matches!(resource.scheme(), "https" | "http") || resource.fragment().is_some() {
            return Err(format!(
                "mcp_front_door.oauth.resource '{}': an http(s) URI without a fragment",
                self.resource
            ));
        }
        if self.issuer.trim().is_empty() {
            return Err("mcp_front_door.oauth.issuer must not be empty".to_owned());
        }
        for server in &self.authorization_servers {
            url::Url::parse(server)
                .map_err(|err| format!("mcp_front_door.oauth.authorization_servers '{server}': {err}"))?;
        }
        self.jwt().check().map_err(|why| why.replace("users.jwt", "mcp_front_door.oauth"))?;
        if let Some(name) = &self.principal {
            if !principals.grants().any(|(n, _)| &**n == name) {
                let names = principals.grants().map(|(n, _)| &**n);
                let statement = format!("mcp_front_door.oauth.principal: no principal is named '{name}'");
                return Err(crate::similar::did_you_mean(&statement, name, names, String::new));
            }
        }
        Ok(())
    }

    /// How its tokens are verified: as `users.jwt` tokens whose audience is
    /// the resource.
    pub(crate) fn jwt(&self) -> JwtConfig {
        JwtConfig {
            issuer: self.issuer.clone(),
            audience: self.resource.clone(),
            jwks_file: self.jwks_file.clone(),
            jwks_url: self.jwks_url.clone(),
            header: None,
        }
    }
}

/// The well-known path of protected resource metadata (RFC 9728).
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Verifies access tokens, and describes the resource.
#[derive(Debug)]
pub(crate) struct OauthVerifier {
    config: OauthConfig,
    tokens: Arc<UserVerifier>,
    /// Its users are told apart from `users.jwt`'s by their issuer.
    qualified: bool,
}

impl OauthVerifier {
    /// From the settings; a JWKS file is read now. `previous` (of the
    /// snapshot before a reload) is kept when the settings are the same and
    /// its keys come from a URL, with the keys it fetched.
    ///
    /// `users_issuer` is `users.jwt.issuer`, when set: a different issuer
    /// here makes this verifier's users [`User::qualified`](crate::identity::User).
    pub(crate) fn new(
        config: &OauthConfig,
        previous: Option<&Arc<OauthVerifier>>,
        users_issuer: Option<&str>,
    ) -> Result<Self, String> {
        let qualified = users_issuer.is_some_and(|issuer| issuer != config.issuer);
        let kept = previous.filter(|p| &p.config == config && config.jwks_url.is_some() && p.qualified == qualified);
        let tokens = match kept {
            Some(previous) => Arc::clone(&previous.tokens),
            None => {
                let tokens = Arc::new(
                    UserVerifier::for_access_tokens(config.jwt(), qualified)
                        .map_err(|why| why.replace("users.jwt", "mcp_front_door.oauth"))?,
                );
                tokens.keep_keys_fresh();
                tokens
            }
        };
        Ok(Self { config: config.clone(), tokens, qualified })
    }

    /// The caller an access token proves, under `principals`.
    pub(crate) fn authenticate(&self, token: &str, principals: &Principals) -> Result<Caller, Refusal> {
        let verified = self.tokens.verified(token).map_err(|why| Refusal::AccessToken(why.to_string()))?;
        if let Some(missing) = self.config.scopes.iter().find(|s| !verified.scopes.contains(s)) {
            return Err(Refusal::Scope(missing.clone()));
        }
        let by_client = verified.client_id.as_deref().and_then(|id| principals.by_client_id(id));
        let principal = match (by_client, &self.config.principal) {
            (Some(name), _) => Some(Arc::clone(name)),
            (None, Some(name)) => Some(Arc::clone(principals.named(name).ok_or(Refusal::NoPrincipal)?)),
            // No principals at all: an OAuth caller may use every tool, as
            // any caller of a gateway without principals may.
            (None, None) if principals.is_empty() => None,
            (None, None) => return Err(Refusal::NoPrincipal),
        };
        Ok(Caller { principal, user: Some(Arc::clone(&verified.user)), proof: Proof::OAuth })
    }

    /// The scopes a token must hold.
    pub(crate) fn scopes(&self) -> &[String] {
        &self.config.scopes
    }

    /// The protected resource metadata (RFC 9728).
    pub(crate) fn metadata(&self) -> Value {
        let mut metadata = json!({
            "resource": self.config.resource,
            "authorization_servers": self.config.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.config.scopes.is_empty() {
            metadata["scopes_supported"] = json!(self.config.scopes);
        }
        metadata
    }

    /// Where the metadata is served for this resource: the well-known path
    /// between the resource's host and its path (RFC 9728, section 3.1).
    pub(crate) fn metadata_url(&self) -> String {
        match url::Url::parse(&self.config.resource) {
            Ok(mut url) => {
                let path = url.path().trim_end_matches('/').to_owned();
                url.set_path(&format!("{METADATA_PATH}{path}"));
                url.set_query(None);
                url.to_string()
            }
            Err(_) => self.config.resource.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier(resource: &str) -> OauthVerifier {
        let jwks = tempfile::NamedTempFile::new().unwrap();
        let key = r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","alg":"EdDSA"}]}"#;
        std::fs::write(jwks.path(), key).unwrap();
        let config = OauthConfig {
            resource: resource.to_owned(),
            authorization_servers: vec!["https://idp.example.com".to_owned()],
            issuer: "https://idp.example.com".to_owned(),
            jwks_file: Some(jwks.path().to_owned()),
            jwks_url: None,
            scopes: vec!["tools".to_owned()],
            principal: None,
        };
        OauthVerifier::new(&config, None, None).unwrap()
    }

    #[test]
    fn the_metadata_url_puts_the_well_known_path_before_the_resources_path() {
        assert_eq!(
            verifier("https://tools.example.com/mcp").metadata_url(),
            "https://tools.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            verifier("https://tools.example.com").metadata_url(),
            "https://tools.example.com/.well-known/oauth-protected-resource"
        );
        let metadata = verifier("https://tools.example.com/mcp").metadata();
        assert_eq!(metadata["scopes_supported"], json!(["tools"]));
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }
}
