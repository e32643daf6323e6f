//! Principals (docs/architecture.md, "Identity"):
//! configured in the configuration file, each with a credential (an API key,
//! of which only the SHA-256 is kept, or a client certificate's subject)
//! and grants (the tool, alias and toolset names it may use, or `"*"`).

use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{
    conditions::{self, Condition},
    grants::is_every_tool,
    Caller, Credentials, Proof, Refusal,
};
use crate::catalog::{GrantDecl, Place};

/// A `principals[]` entry of the configuration file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalConfig {
    pub(crate) name: String,
    /// Hex SHA-256 of the principal's API key (`authorization: Bearer <key>`).
    pub(crate) api_key_sha256: Option<String>,
    /// A client certificate's subject common name, or one of its DNS or URI
    /// subject alternative names (mTLS).
    pub(crate) client_cert: Option<String>,
    /// Grants: tool, alias or toolset names, or `"*"` for every tool.
    #[serde(default)]
    pub(crate) tools: Vec<String>,
    /// The OAuth client whose access tokens act as this principal at the
    /// MCP front door (the token's `client_id`, or `azp`).
    pub(crate) oauth_client_id: Option<String>,
    /// This principal's own request limit (instead of
    /// `rate_limits.principal`).
    pub(crate) rate: Option<crate::state::RateConfig>,
    /// Conditions over arguments: a tool, alias or toolset name, or `"*"`,
    /// to `{if: CEL, message}` ([`super::conditions`]); in order.
    #[serde(default)]
    pub(crate) when: serde_json::Map<String, serde_json::Value>,
}

/// A validated principal.
#[derive(Clone, Debug)]
pub(crate) struct Principal {
    pub(crate) name: Arc<str>,
    key_sha256: Option<[u8; 32]>,
    client_cert: Option<String>,
    oauth_client_id: Option<String>,
    tools: Vec<String>,
    /// Its `when:` entries, compiled, in order.
    conditions: Arc<[Condition]>,
    /// `principals[0] (support-bot)`.
    path: String,
}

/// Every configured principal, checked: each has a name and a credential, no
/// two share a name, a key or a certificate subject.
#[derive(Clone, Debug, Default)]
pub(crate) struct Principals {
    list: Vec<Principal>,
    /// The configuration file they were read from.
    origin: String,
}

impl Principals {
    /// Checks the configuration's principals; every problem, one line each
    /// (`file: principals[1] (billing): …`).
    pub(crate) fn from_config(configs: &[PrincipalConfig], origin: &str) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let mut list: Vec<Principal> = Vec::new();
        for (i, config) in configs.iter().enumerate() {
            let name = config.name.trim();
            let path = match name.is_empty() {
                true => format!("principals[{i}]"),
                false => format!("principals[{i}] ({name})"),
            };
            let mut problem = |message: String| problems.push(format!("{origin}: {path}: {message}"));
            if name.is_empty() {
                problem("a principal needs a name".to_owned());
            } else if name.len() > 128 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.@:".contains(&b)) {
                // It travels in HTTP headers, environment variables and logs.
                problem(format!(
                    "invalid principal name '{name}': 1 to 128 characters from A-Z, a-z, 0-9 and - _ . @ :"
                ));
            }
            let key_sha256 = match config.api_key_sha256.as_deref().map(str::trim) {
                None => None,
                Some(hex) => match parse_sha256(hex) {
                    Some(digest) => Some(digest),
                    None => {
                        problem("api_key_sha256 must be 64 hexadecimal digits (toolgate auth hash-key)".to_owned());
                        None
                    }
                },
            };
            let client_cert = config.client_cert.as_deref().map(str::trim).filter(|c| !c.is_empty());
            let oauth_client_id = config.oauth_client_id.as_deref().map(str::trim).filter(|c| !c.is_empty());
            if config.api_key_sha256.is_none() && client_cert.is_none() && oauth_client_id.is_none() {
                problem("a principal needs a credential: api_key_sha256, client_cert or oauth_client_id".to_owned());
            }
            let (conditions, broken) = conditions::compile_all(&config.when);
            for why in broken {
                problem(format!("when.{why}"));
            }
            if config.tools.is_empty() {
                problem("a principal needs grants: tools: [tool, alias or toolset names] or [\"*\"]".to_owned());
            }
            for earlier in &list {
                if !name.is_empty() && &*earlier.name == name {
                    problem(format!("the principal name '{name}' is also used at {}", earlier.path));
                }
                if key_sha256.is_some() && earlier.key_sha256 == key_sha256 {
                    problem(format!("the same API key is also the key of {}", earlier.path));
                }
                if client_cert.is_some() && earlier.client_cert.as_deref() == client_cert {
                    problem(format!("the same certificate subject is also that of {}", earlier.path));
                }
                if oauth_client_id.is_some() && earlier.oauth_client_id.as_deref() == oauth_client_id {
                    problem(format!("the same oauth_client_id is also that of {}", earlier.path));
                }
            }
            list.push(Principal {
                name: name.into(),
                key_sha256,
                client_cert: client_cert.map(str::to_owned),
                oauth_client_id: oauth_client_id.map(str::to_owned),
                tools: config.tools.clone(),
                conditions: conditions.into(),
                path,
            });
        }
        match problems.is_empty() {
            true => Ok(Self { list, origin: origin.to_owned() }),
            false => Err(problems),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether any principal is identified by a client certificate.
    pub(crate) fn use_certificates(&self) -> bool {
        self.list.iter().any(|p| p.client_cert.is_some())
    }

    /// Each principal's name and grants.
    pub(crate) fn grants(&self) -> impl Iterator<Item = (&Arc<str>, &[String])> {
        self.list.iter().map(|p| (&p.name, p.tools.as_slice()))
    }

    /// Each principal's grants, to be checked against the catalogue at every
    /// assembly.
    pub(crate) fn grant_decls(&self) -> Vec<GrantDecl> {
        let origin: Arc<str> = self.origin.as_str().into();
        let decl = |p: &Principal| GrantDecl {
            owner: format!("principal '{}'", p.name),
            names: p.tools.iter().enumerate().filter(|(_, n)| !is_every_tool(n)).map(|(i, n)| (i, n.clone())).collect(),
            place: Place { origin: Arc::clone(&origin), path: format!("{}.tools", p.path) },
            keyed: false,
        };
        let when = |p: &Principal| GrantDecl {
            owner: format!("principal '{}' when", p.name),
            names: p.conditions.iter().filter(|c| !c.covers_every_tool()).map(|c| (0, c.covers.clone())).collect(),
            place: Place { origin: Arc::clone(&origin), path: format!("{}.when", p.path) },
            keyed: true,
        };
        self.list.iter().map(decl).chain(self.list.iter().filter(|p| !p.conditions.is_empty()).map(when)).collect()
    }

    /// Each principal's name and conditions over arguments.
    pub(crate) fn conditions(&self) -> impl Iterator<Item = (&Arc<str>, &Arc<[Condition]>)> {
        self.list.iter().map(|p| (&p.name, &p.conditions))
    }

    /// The caller these credentials prove, or the one failure answer. A key
    /// and a certificate presented together must both name the same
    /// principal.
    pub(crate) fn authenticate(&self, credentials: &Credentials<'_>) -> Result<Caller, Refusal> {
        let by_bearer = match credentials.authorization {
            [] => None,
            [Some(value)] => Some(self.by_key(bearer(value).ok_or(Refusal::Malformed)?).ok_or(Refusal::UnknownKey)?),
            // Invisible characters, or more than one value.
            _ => return Err(Refusal::Malformed),
        };
        // `x-api-key` (where a door reads it): the key as it is.
        let by_api_key = match credentials.api_key {
            [] => None,
            [Some(value)] => Some(self.by_key(value.trim()).ok_or(Refusal::UnknownKey)?),
            _ => return Err(Refusal::Malformed),
        };
        let by_key = match (by_bearer, by_api_key) {
            (Some(a), Some(b)) if !Arc::ptr_eq(&a.name, &b.name) => return Err(Refusal::Mixed),
            (a, b) => a.or(b),
        };
        let by_cert = match credentials.certificate {
            Some(names) => self.by_certificate(names)?,
            None => None,
        };
        let (principal, proof) = match (by_key, by_cert) {
            (Some(a), Some(b)) if Arc::ptr_eq(&a.name, &b.name) => (a, Proof::Certificate),
            (Some(_), Some(_)) => return Err(Refusal::Mixed),
            (Some(p), None) => (p, Proof::ApiKey),
            (None, Some(p)) => (p, Proof::Certificate),
            (None, None) => return Err(Refusal::Missing),
        };
        Ok(Caller { principal: Some(Arc::clone(&principal.name)), user: None, proof })
    }

    /// The principal an OAuth client acts as (its `oauth_client_id`).
    pub(crate) fn by_client_id(&self, client_id: &str) -> Option<&Arc<str>> {
        self.list.iter().find(|p| p.oauth_client_id.as_deref() == Some(client_id)).map(|p| &p.name)
    }

    /// The principal of this name.
    pub(crate) fn named(&self, name: &str) -> Option<&Arc<str>> {
        self.list.iter().find(|p| &*p.name == name).map(|p| &p.name)
    }

    /// The principal whose key hashes to this key's SHA-256; every stored
    /// hash is compared, in constant time.
    fn by_key(&self, key: &str) -> Option<&Principal> {
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let mut found = None;
        for principal in &self.list {
            if let Some(stored) = &principal.key_sha256 {
                if bool::from(stored.ct_eq(&digest)) {
                    found = Some(principal);
                }
            }
        }
        found
    }

    /// The principal a certificate names; a certificate that names two is
    /// refused. A certificate naming none is no credential (a key may still
    /// be).
    fn by_certificate(&self, names: &[String]) -> Result<Option<&Principal>, Refusal> {
        let mut matching = self.list.iter().filter(|p| p.client_cert.as_ref().is_some_and(|c| names.contains(c)));
        match (matching.next(), matching.next()) {
            (Some(_), Some(_)) => Err(Refusal::Mixed),
            (found, _) => Ok(found),
        }
    }
}

/// The token of `Bearer <token>` (the scheme in any case, one space or
/// more); `None` for any other shape.
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim_start();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(char::is_whitespace))
        .then_some(token)
}

fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let mut digest = [0u8; 32];
    (base16ct::mixed::decode(hex, &mut digest).ok()?.len() == digest.len()).then_some(digest)
}

/// The hex SHA-256 of an API key, as `api_key_sha256` holds it.
pub fn hash_key(key: &str) -> String {
    base16ct::lower::encode_string(&Sha256::digest(key.trim().as_bytes()))
}

/// A fresh random API key (32 random bytes, hex, `tg_` first) and its hash.
pub(crate) fn new_key() -> (String, String) {
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random source works");
    let key = format!("tg_{}", base16ct::lower::encode_string(&bytes));
    let hash = hash_key(&key);
    (key, hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principals() -> Principals {
        let configs = vec![
            PrincipalConfig {
                name: "bot".into(),
                api_key_sha256: Some(hash_key("k1")),
                client_cert: None,
                tools: vec!["*".into()],
                oauth_client_id: None,
                rate: None,
                when: Default::default(),
            },
            PrincipalConfig {
                name: "agent".into(),
                api_key_sha256: Some(hash_key("k2")),
                client_cert: Some("agent.example".into()),
                tools: vec!["echo".into()],
                oauth_client_id: None,
                rate: None,
                when: Default::default(),
            },
        ];
        Principals::from_config(&configs, "toolgate.yaml").unwrap()
    }

    fn auth(p: &Principals, authorization: &[Option<&str>], cert: Option<&[String]>) -> Result<String, Refusal> {
        let credentials = Credentials {
            authorization,
            api_key: &[],
            certificate: cert,
            user_token: &[],
            peer: None,
            access_tokens: false,
        };
        p.authenticate(&credentials).map(|c| c.principal.unwrap().to_string())
    }

    #[test]
    fn a_key_hash_is_64_hex_digits_in_either_case() {
        let hash = hash_key("k");
        assert_eq!(hash.len(), 64);
        let digest = parse_sha256(&hash).unwrap();
        assert_eq!(parse_sha256(&hash.to_uppercase()), Some(digest));
        // A sign is no digit (an integer parser takes `+f` for 15).
        assert_eq!(parse_sha256(&format!("+f{}", &hash[2..])), None);
        assert_eq!(parse_sha256(&hash[2..]), None);
        assert_eq!(parse_sha256(&format!("{hash}00")), None);
    }

    #[test]
    fn keys_and_certificates_name_principals() {
        let p = principals();
        assert_eq!(auth(&p, &[Some("Bearer k1")], None).unwrap(), "bot");
        assert_eq!(auth(&p, &[Some("bearer   k2")], None).unwrap(), "agent");
        let names = ["agent.example".to_owned()];
        assert_eq!(auth(&p, &[], Some(&names)).unwrap(), "agent");
        assert_eq!(auth(&p, &[Some("Bearer k2")], Some(&names)).unwrap(), "agent");
        for bad in [
            &[][..],
            &[Some("Bearer")],
            &[Some("Bearer ")],
            &[Some("Basic k1")],
            &[Some("k1")],
            &[Some("Bearer k3")],
            &[None],
            &[Some("Bearer k1"), Some("Bearer k1")],
        ] {
            assert!(auth(&p, bad, None).is_err(), "{bad:?}");
        }
        // A key of one principal with the certificate of another.
        assert_eq!(auth(&p, &[Some("Bearer k1")], Some(&names)), Err(Refusal::Mixed));
        assert_eq!(auth(&p, &[Some("Bearer k3")], None), Err(Refusal::UnknownKey));
        assert_eq!(auth(&p, &[], None), Err(Refusal::Missing));
    }

    #[test]
    fn configuration_problems_name_both_places() {
        let config = |name: &str, key: Option<&str>, cert: Option<&str>| PrincipalConfig {
            name: name.into(),
            api_key_sha256: key.map(hash_key),
            client_cert: cert.map(str::to_owned),
            tools: vec!["*".into()],
            oauth_client_id: None,
            rate: None,
            when: Default::default(),
        };
        let problems = Principals::from_config(
            &[
                config("a", Some("k"), Some("c")),
                config("b", Some("k"), None),
                config("c", None, Some("c")),
                config("d", None, None),
            ],
            "t.yaml",
        )
        .unwrap_err();
        assert_eq!(
            problems,
            [
                "t.yaml: principals[1] (b): the same API key is also the key of principals[0] (a)",
                "t.yaml: principals[2] (c): the same certificate subject is also that of principals[0] (a)",
                "t.yaml: principals[3] (d): a principal needs a credential: api_key_sha256, client_cert or oauth_client_id",
            ]
        );
    }

    #[test]
    fn new_keys_hash_to_what_they_print() {
        let (key, hash) = new_key();
        assert!(key.starts_with("tg_") && key.len() == 67, "{key}");
        assert_eq!(hash_key(&key), hash);
        assert_eq!(parse_sha256(&hash), Some(Sha256::digest(key.as_bytes()).into()));
    }
}
