//! Who calls, and what they may run (docs/architecture.md, "Identity").
//!
//! A caller is proven by its credentials, never by its arguments: an API key
//! or a client certificate names a principal (`principals`), and a signed
//! token beside it names the end user the call acts for (`users`). What a
//! principal may run is its grants, resolved once per catalogue snapshot
//! into tool sets (`grants`).
//!
//! Everything here is rebuilt from the settings on every reload and swapped
//! with the snapshot it belongs to, so a request never sees one
//! configuration's principals with another's keys or grants. With no
//! principals configured nothing is checked, as before identity existed.
//!
//! A new authentication method is a file here (how its credential proves a
//! caller), a variant of `Proof`, and its settings in `config`. This
//! module never calls the executor: the executor uses the caller it is
//! given.

mod cert;
pub(crate) mod conditions;
pub(crate) mod dev;
pub(crate) mod grants;
pub(crate) mod oauth;
pub(crate) mod principals;
pub(crate) mod users;

use std::{sync::Arc, time::Duration};

pub(crate) use cert::names_of;
pub(crate) use grants::Granted;
pub use oauth::OauthConfig;
pub(crate) use oauth::OauthVerifier;
pub use principals::{hash_key, PrincipalConfig};
pub(crate) use principals::{new_key, Principals};
pub(crate) use users::UsersConfig;

use crate::telemetry::throttle::{self, Throttle};
pub use users::{JwtConfig, UserVerifier};

/// The one answer to every failed authentication: it never says whether a
/// key, a principal or a user exists.
pub(crate) const UNAUTHENTICATED: &str = "missing or invalid credentials";

/// Who a call is for, as authenticated from the transport and the request's
/// metadata. The default (no principal, no user) is the caller of a gateway
/// without principals: every tool is available to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub(crate) principal: Option<Arc<str>>,
    /// The end user the call acts for, from a verified token.
    pub(crate) user: Option<Arc<User>>,
    /// How the principal proved itself.
    pub(crate) proof: Proof,
}

/// How a caller proved who it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Proof {
    /// Nothing was asked: the gateway has no principals.
    #[default]
    None,
    /// An API key (`authorization: Bearer …`).
    ApiKey,
    /// A client certificate (mTLS), alone or with a key of the same
    /// principal.
    Certificate,
    /// The process that started the gateway on its own stdio, naming the
    /// principal whose grants apply (`mcp-stdio --principal`).
    Local,
    /// An OAuth access token for the MCP front door (`mcp_front_door.oauth`).
    OAuth,
}

impl Proof {
    /// The word audit lines use.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Proof::None => "none",
            Proof::ApiKey => "api_key",
            Proof::Certificate => "certificate",
            Proof::Local => "local",
            Proof::OAuth => "oauth",
        }
    }
}

/// An end user: a verified token's issuer and subject (the pair is the
/// user: two issuers' subjects never meet), and the token itself (passed on
/// only to tools that ask for it).
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    /// The token's `iss` (the issuer configured for it).
    pub(crate) issuer: Arc<str>,
    /// The token's `sub`.
    pub(crate) id: String,
    pub(crate) token: String,
    /// The gateway takes users from another issuer too (`users.jwt` and
    /// `mcp_front_door.oauth` name different issuers), and this one is not
    /// `users.jwt`'s: a bound parameter gets the issuer with the subject.
    pub(crate) qualified: bool,
    /// The token's claims (its verified payload), which conditions read as
    /// `user.claims`; kept apart from `token`, which an access token leaves
    /// empty (it is never passed on).
    pub(crate) claims: Arc<serde_json::Map<String, serde_json::Value>>,
}

impl User {
    /// The user as one text, for keys: the issuer and the subject, apart.
    pub(crate) fn key(&self) -> String {
        format!("{}\0{}", self.issuer, self.id)
    }

    /// The value `bind: {…: user}` fills: the subject, or `ISSUER#SUBJECT`
    /// for a user of an issuer beside `users.jwt`'s (see `qualified`), so
    /// that a tool never takes one issuer's user for another's.
    pub(crate) fn bound(&self) -> String {
        match self.qualified {
            true => format!("{}#{}", self.issuer, self.id),
            false => self.id.clone(),
        }
    }
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User").field("issuer", &self.issuer).field("id", &self.id).finish_non_exhaustive()
    }
}

impl Caller {
    /// What a tool is told about who calls: `(principal, user)` (the user's
    /// subject; its issuer is [`Caller::user_issuer`]).
    pub(crate) fn identity(&self) -> (Option<&str>, Option<&str>) {
        (self.principal.as_deref(), self.user.as_ref().map(|u| u.id.as_str()))
    }

    /// The issuer of the user's token, when the call has a user.
    pub(crate) fn user_issuer(&self) -> Option<&str> {
        self.user.as_ref().map(|u| &*u.issuer)
    }
}

/// A request's credentials, as a front door found them in its transport
/// and metadata. Every value of a repeated header is kept, so that two
/// values can be refused rather than one picked.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Credentials<'a> {
    /// Every `authorization` value (`None` for one that is not visible
    /// ASCII).
    pub(crate) authorization: &'a [Option<&'a str>],
    /// Every `x-api-key` value, where a door reads it as an API key (the
    /// model door: the Messages API's own header).
    pub(crate) api_key: &'a [Option<&'a str>],
    /// The names of the client certificate (subject CN, DNS and URI SANs),
    /// when the connection presented one.
    pub(crate) certificate: Option<&'a [String]>,
    /// Every value of the user-token header (`Identity::user_header`).
    pub(crate) user_token: &'a [Option<&'a str>],
    /// Where the request came from, for the log of a refusal.
    pub(crate) peer: Option<std::net::SocketAddr>,
    /// Whether an OAuth access token may be the credential (the MCP front
    /// door, when `mcp_front_door.oauth` is set).
    pub(crate) access_tokens: bool,
}

/// A request's credentials as any HTTP request carries them (gRPC's
/// metadata are its HTTP/2 headers): the one place where a front door's
/// request is read for them. Holds every value of the headers that carry
/// credentials; [`Presented::credentials`] lends them out.
pub(crate) struct Presented<'a> {
    authorization: Vec<Option<&'a str>>,
    api_key: Vec<Option<&'a str>>,
    user_token: Vec<Option<&'a str>>,
    certificate: Option<Vec<String>>,
    peer: Option<std::net::SocketAddr>,
    access_tokens: bool,
}

impl<'a> Presented<'a> {
    /// What `headers`, a request to a gateway of `identity`, present; with
    /// `certificate`, the DER of the end-entity certificate the connection
    /// presented when the listener's client CA in use now still trusts it;
    /// the peer; and whether an OAuth access token may be the credential.
    pub(crate) fn of(
        identity: &Identity,
        headers: &'a http::HeaderMap,
        certificate: Option<&[u8]>,
        peer: Option<std::net::SocketAddr>,
        access_tokens: bool,
    ) -> Self {
        fn values(headers: &http::HeaderMap, name: impl http::header::AsHeaderName) -> Vec<Option<&str>> {
            headers.get_all(name).iter().map(|v| v.to_str().ok()).collect()
        }
        Self {
            authorization: values(headers, http::header::AUTHORIZATION),
            api_key: Vec::new(),
            user_token: identity.user_header().map(|name| values(headers, name)).unwrap_or_default(),
            certificate: certificate.map(names_of),
            peer,
            access_tokens,
        }
    }

    /// The same, with the `x-api-key` values of `headers` as API keys
    /// beside `authorization` (the model door: the Messages API's header).
    /// A request presenting both must name one principal.
    pub(crate) fn with_api_key(mut self, headers: &'a http::HeaderMap) -> Self {
        self.api_key = headers.get_all("x-api-key").iter().map(|v| v.to_str().ok()).collect();
        self
    }

    pub(crate) fn credentials(&self) -> Credentials<'_> {
        Credentials {
            authorization: &self.authorization,
            api_key: &self.api_key,
            certificate: self.certificate.as_deref(),
            user_token: &self.user_token,
            peer: self.peer,
            access_tokens: self.access_tokens,
        }
    }

    /// Whether an `authorization` header was sent (a refusal then says the
    /// token is invalid, not missing).
    pub(crate) fn sent_authorization(&self) -> bool {
        !self.authorization.is_empty() || !self.api_key.is_empty()
    }
}

/// Why credentials proved no one: for the operator's log only (the caller
/// hears [`UNAUTHENTICATED`], whatever the reason). Never holds a
/// credential.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("no credential")]
    Missing,
    #[error("a malformed or repeated authorization header")]
    Malformed,
    #[error("an API key of no principal")]
    UnknownKey,
    #[error("credentials naming different principals, or a certificate naming two")]
    Mixed,
    #[error("a user token that does not verify: {0}")]
    UserToken(String),
    #[error("a repeated or malformed user-token header")]
    UserTokenHeader,
    #[error("an access token that does not verify: {0}")]
    AccessToken(String),
    #[error("an access token without the scope '{0}'")]
    Scope(String),
    #[error("an access token of a client that is no principal's (and no oauth.principal)")]
    NoPrincipal,
    #[error("an access token beside a user token")]
    TwoUsers,
}

/// A request whose credentials prove no caller. Front doors answer it with
/// [`UNAUTHENTICATED`] and nothing more.
#[derive(Debug, thiserror::Error)]
#[error("{UNAUTHENTICATED}")]
pub(crate) struct Unauthenticated {
    /// A valid access token without a scope the resource asks for (MCP
    /// answers 403 `insufficient_scope`).
    pub(crate) insufficient_scope: bool,
}

/// Who may call under one configuration: its principals and the verifier of
/// its users' tokens. Part of each snapshot.
#[derive(Debug)]
pub(crate) struct Identity {
    principals: Principals,
    users: Option<Arc<UserVerifier>>,
    /// Access tokens of the MCP front door, when `mcp_front_door.oauth` is set.
    oauth: Option<Arc<OauthVerifier>>,
    /// Browser origins each HTTP door takes requests from, by door name.
    origins: Vec<(&'static str, Vec<String>)>,
    /// Refusals are logged at WARN, one every 10 s at most.
    refusals: Throttle,
}

/// At most one refused request is logged at WARN in this time.
const REFUSAL_LOG_PERIOD: Duration = Duration::from_secs(10);

impl Identity {
    pub(crate) fn new(
        principals: Principals,
        users: Option<Arc<UserVerifier>>,
        oauth: Option<Arc<OauthVerifier>>,
    ) -> Self {
        Self { principals, users, oauth, origins: Vec::new(), refusals: Throttle::new(REFUSAL_LOG_PERIOD) }
    }

    /// The same, taking browser requests to each door from its origins
    /// (its `allowed_origins`), by door name.
    pub(crate) fn with_origins(mut self, origins: Vec<(&'static str, Vec<String>)>) -> Self {
        self.origins = origins;
        self
    }

    /// The door's `allowed_origins` (none: loopback origins only); they
    /// reload with the identity.
    pub(crate) fn allowed_origins(&self, door: &str) -> &[String] {
        self.origins.iter().find(|(name, _)| *name == door).map_or(&[], |(_, origins)| origins.as_slice())
    }

    /// The MCP front door's access-token verifier, when `oauth` is set.
    pub(crate) fn oauth(&self) -> Option<&Arc<OauthVerifier>> {
        self.oauth.as_ref()
    }

    pub(crate) fn principals(&self) -> &Principals {
        &self.principals
    }

    /// The verifier of users' tokens, when `users.jwt` is configured.
    pub(crate) fn users(&self) -> Option<&Arc<UserVerifier>> {
        self.users.as_ref()
    }

    /// The metadata header that carries a user's token (lowercase), when
    /// users are configured.
    pub(crate) fn user_header(&self) -> Option<&str> {
        self.users.as_deref().map(UserVerifier::header)
    }

    /// The caller these credentials prove: the principal (when principals
    /// are configured) and the user (when a token is sent and users are
    /// configured). Any failure is the one [`Unauthenticated`]; why is
    /// logged (never the credential), one line every 10 s at most.
    pub(crate) fn authenticate(&self, credentials: &Credentials<'_>) -> Result<Caller, Unauthenticated> {
        self.proven(credentials).map_err(|why| {
            let peer = credentials.peer.map_or_else(|| "-".to_owned(), |p| p.to_string());
            match self.refusals.allow() {
                Some(skipped) => tracing::warn!(peer, "authentication refused: {why}{}", throttle::more(skipped)),
                None => tracing::debug!(peer, "authentication refused: {why}"),
            }
            Unauthenticated { insufficient_scope: matches!(why, Refusal::Scope(_)) }
        })
    }

    /// The caller of a process that serves its own stdio: the principal it
    /// names (required when principals are configured; unknown is an
    /// error), and the user of a token it holds, verified like any other.
    pub(crate) fn local(&self, principal: Option<&str>, user_token: Option<&str>) -> Result<Caller, String> {
        let mut caller = match (principal, self.principals.is_empty()) {
            (None, true) => Caller::default(),
            (None, false) => {
                return Err("principals are configured: name the one whose grants apply with --principal".to_owned())
            }
            (Some(name), _) => match self.principals.grants().find(|(n, _)| &***n == name) {
                Some((name, _)) => Caller { principal: Some(Arc::clone(name)), user: None, proof: Proof::Local },
                None => return Err(format!("no principal is named '{name}' in the configuration")),
            },
        };
        if let Some(token) = user_token.map(str::trim).filter(|t| !t.is_empty()) {
            let users = self.users.as_ref().ok_or("a user token was given, and users.jwt is not configured")?;
            caller.user = Some(users.verify(token).map_err(|why| format!("the user token was refused: {why}"))?);
        }
        Ok(caller)
    }

    fn proven(&self, credentials: &Credentials<'_>) -> Result<Caller, Refusal> {
        let oauth = self.oauth.as_ref().filter(|_| credentials.access_tokens);
        let mut caller = match (self.principals.is_empty(), oauth) {
            (true, None) => Caller::default(),
            (false, None) => self.principals.authenticate(credentials)?,
            // A bearer value that is no principal's key may be an access
            // token.
            (_, Some(oauth)) => match self.principals.authenticate(credentials) {
                Err(Refusal::UnknownKey) => match credentials.authorization {
                    [Some(value)] => {
                        let token = principals::bearer(value).ok_or(Refusal::Malformed)?;
                        oauth.authenticate(token, &self.principals)?
                    }
                    _ => return Err(Refusal::Malformed),
                },
                other => other?,
            },
        };
        let Some(users) = &self.users else { return Ok(caller) };
        if caller.proof == Proof::OAuth && !credentials.user_token.is_empty() {
            return Err(Refusal::TwoUsers);
        }
        match credentials.user_token {
            [] => {}
            [Some(token)] => match users.verify(token.trim()) {
                Ok(user) => caller.user = Some(user),
                Err(why) => return Err(Refusal::UserToken(why.to_string())),
            },
            _ => return Err(Refusal::UserTokenHeader),
        }
        Ok(caller)
    }
}
