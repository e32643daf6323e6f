//! The model door's settings (`model_door:`, `--model-listen`): an
//! OpenAI-compatible endpoint in front of model servers (docs/model-door.md).

use std::{net::SocketAddr, time::Duration};

use serde::Deserialize;

use super::doors::Door;
use crate::{catalog::Secret, env::Env};

/// The model door in the list of doors ([`super::doors::DOORS`]).
pub(crate) const DOOR: Door = Door {
    name: "model",
    section: "model_door",
    listen_key: "model_door.listen",
    flag: "model-listen",
    env: "TOOLGATE_MODEL_LISTEN",
    help: "Serve the model door (an OpenAI-compatible endpoint)",
    serves: "model door (OpenAI-compatible)",
    path: "/v1",
    address: |doors| doors.model.as_ref().map(|model| model.listen),
    authenticates: |_, principals| principals,
    // Its upstreams, keys and limits are read at start only.
    restarts: |running, next| {
        running.model.as_deref().map(ModelSettings::fixed) != next.model.as_deref().map(ModelSettings::fixed)
    },
    origins: |doors| doors.model.as_ref().map_or(&[], |model| model.allowed_origins.as_slice()),
};

/// `model_door:` of the configuration file (off unless a listen address
/// is set): an OpenAI-compatible endpoint in front of model servers.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelDoorConfig {
    pub(crate) listen: Option<String>,
    #[serde(default)]
    pub(crate) upstreams: Vec<UpstreamConfig>,
    /// Where a request whose model no upstream's `models` matches goes;
    /// with one upstream, that one.
    pub(crate) default_upstream: Option<String>,
    /// Pass every response through unchanged.
    #[serde(default)]
    pub(crate) strict: bool,
    /// What the compiled tool lists kept may hold, in bytes.
    pub(crate) tools_cache_bytes: Option<u64>,
    /// The most tools a request's list may declare to be read against.
    pub(crate) max_tools: Option<usize>,
    /// The most bytes of patterns a request's tools may declare.
    pub(crate) max_pattern_bytes: Option<usize>,
    /// Browser origins allowed to call; a request with another `Origin`
    /// header is refused (403).
    #[serde(default)]
    pub(crate) allowed_origins: Vec<String>,
    /// The door's requests one principal keeps open at once (the
    /// anonymous caller is one principal; default 64).
    pub(crate) requests_per_principal: Option<std::num::NonZeroUsize>,
    /// What a stream does with structured tool calls (default `hold`).
    #[serde(default)]
    pub(crate) stream_calls: StreamCalls,
    /// Extra requests the door makes when an answer holds a call it cannot
    /// make ready (default 0: none).
    pub(crate) retry: Option<u32>,
    /// The most extra requests `x-toolgate-retry` may ask for (default 2;
    /// 0: the header is not read).
    pub(crate) retry_max: Option<u32>,
}

/// `model_door.stream_calls`: what a stream does with the model's
/// structured tool calls.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StreamCalls {
    /// Each call is held until the choice ends, then sent complete,
    /// repaired where one meaning is possible.
    #[default]
    Hold,
    /// A call whose name is a declared tool's exactly and whose arguments
    /// are well-formed JSON so far streams as it comes: what goes wrong
    /// later in it is no longer repaired (latency for repair).
    PassWellFormed,
}

/// `model_door.upstreams[]`: one OpenAI-compatible model server.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpstreamConfig {
    pub(crate) name: String,
    /// The API's base, e.g. `http://127.0.0.1:8000/v1`.
    pub(crate) base_url: String,
    /// The environment variable holding the upstream's API key.
    pub(crate) api_key_env: Option<String>,
    /// Globs of the model names it serves (`*` any run, `?` one character);
    /// none: every model.
    #[serde(default)]
    pub(crate) models: Vec<String>,
    /// How long one request may take, streaming included (default 600s).
    pub(crate) timeout: Option<String>,
    /// Upstreams (by name) that get the request, in order, when this one
    /// fails before its first byte (connection, timeout, 429, 5xx).
    #[serde(default)]
    pub(crate) fallback: Vec<String>,
    /// How the upstream is reached: through this proxy (an http(s) URL),
    /// or `env` to honour `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY`;
    /// unset: directly, whatever the environment says.
    pub(crate) proxy: Option<String>,
    /// The APIs it speaks (default all three); a request goes only to an
    /// upstream that speaks its API.
    pub(crate) apis: Option<Vec<Api>>,
}

/// An API the door speaks (`model_door.upstreams[].apis`).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Api {
    /// Chat Completions: `POST /v1/chat/completions`.
    Chat,
    /// Responses: `POST /v1/responses`.
    Responses,
    /// Messages: `POST /v1/messages`.
    Messages,
}

impl Api {
    /// Every API, the default of an upstream.
    pub(crate) const ALL: [Api; 3] = [Api::Chat, Api::Responses, Api::Messages];

    /// As `apis` names it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }
}

/// The model door's settings, when it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModelSettings {
    pub(crate) listen: SocketAddr,
    pub(crate) upstreams: Vec<Upstream>,
    /// Index into `upstreams`.
    pub(crate) default_upstream: Option<usize>,
    pub(crate) strict: bool,
    pub(crate) tools: ToolLimits,
    /// `model_door.allowed_origins` (they reload).
    pub(crate) allowed_origins: Vec<String>,
    /// `model_door.requests_per_principal`.
    pub(crate) requests_per_principal: usize,
    /// `model_door.stream_calls`.
    pub(crate) stream_calls: StreamCalls,
    /// `model_door.retry`.
    pub(crate) retry: u32,
    /// `model_door.retry_max`.
    pub(crate) retry_max: u32,
}

/// `model_door.requests_per_principal` when unset.
pub(crate) const DEFAULT_REQUESTS_PER_PRINCIPAL: usize = 64;

impl ModelSettings {
    /// What a reload cannot change: everything but the origins.
    fn fixed(&self) -> ModelSettings {
        ModelSettings { allowed_origins: Vec::new(), ..self.clone() }
    }
}

/// What a request's tools may make the door compile and keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ToolLimits {
    /// `model_door.tools_cache_bytes`.
    pub(crate) cache_bytes: u64,
    /// `model_door.max_tools`.
    pub(crate) max_tools: usize,
    /// `model_door.max_pattern_bytes`.
    pub(crate) max_pattern_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self { cache_bytes: 64 * 1024 * 1024, max_tools: 512, max_pattern_bytes: 64 * 1024 }
    }
}

/// One upstream, checked: its key read from the environment at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Upstream {
    pub(crate) name: String,
    /// Without a trailing `/`.
    pub(crate) base_url: String,
    pub(crate) api_key: Option<Secret>,
    /// `models`, each compiled once here (`*` any run, `?` one character,
    /// `[…]` one of a set).
    pub(crate) models: Vec<glob::Pattern>,
    pub(crate) timeout: Duration,
    pub(crate) proxy: UpstreamProxy,
    /// `apis` (default all three).
    pub(crate) apis: Vec<Api>,
    /// `fallback`, as places in the settings' `upstreams`.
    pub(crate) fallback: Vec<usize>,
}

impl Upstream {
    /// Whether it speaks `api`.
    pub(crate) fn speaks(&self, api: Api) -> bool {
        self.apis.contains(&api)
    }
}

/// `model_door.upstreams[].proxy`, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum UpstreamProxy {
    /// Directly (the proxy variables are not read).
    #[default]
    None,
    /// As `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` say.
    Env,
    /// Through this proxy.
    Url(String),
}

impl ModelSettings {
    /// What is likely wrong though allowed, one line each: a `base_url`
    /// that does not end in `/v1` (the door adds only the API's path to it,
    /// and OpenAI-compatible servers serve under `/v1`: a vLLM then answers
    /// 404 to every request).
    pub(crate) fn warnings(&self) -> Vec<String> {
        let paths = self.upstreams.iter().enumerate().filter_map(|(i, upstream)| {
            let url = url::Url::parse(&upstream.base_url).ok()?;
            let ends = url.path().trim_end_matches('/').ends_with("/v1");
            (!ends).then(|| {
                format!(
                    "model_door.upstreams[{i}].base_url: '{}' does not end in /v1: the door adds only \
                     /chat/completions, /responses, /messages or /models to it, and OpenAI-compatible servers \
                     (vLLM, Ollama, llama.cpp, SGLang, LM Studio) serve them under /v1 (e.g. \
                     http://127.0.0.1:8000/v1)",
                    upstream.base_url
                )
            })
        });
        paths.collect()
    }
}

/// `model_door.upstreams[].timeout` when unset.
pub(crate) const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);

impl ModelDoorConfig {
    /// The settings on `listen`, or every problem, one a line.
    pub(super) fn settings(self, listen: SocketAddr, env: &Env) -> Result<ModelSettings, Vec<String>> {
        let mut problems = Vec::new();
        if self.upstreams.is_empty() {
            problems.push("model_door.upstreams: name at least one model server".to_owned());
        }
        let mut upstreams: Vec<Upstream> = Vec::new();
        let fallbacks: Vec<Vec<String>> = self.upstreams.iter().map(|u| u.fallback.clone()).collect();
        for (i, raw) in self.upstreams.into_iter().enumerate() {
            let at = format!("model_door.upstreams[{i}]");
            if raw.name.trim().is_empty() {
                problems.push(format!("{at}.name: an upstream needs a name"));
            } else if upstreams.iter().any(|u| u.name == raw.name) {
                problems.push(format!("{at}.name: '{}' names two upstreams", raw.name));
            }
            match url::Url::parse(&raw.base_url) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {}
                _ => problems.push(format!(
                    "{at}.base_url: '{}' is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)",
                    raw.base_url
                )),
            }
            let api_key = match &raw.api_key_env {
                Some(var) => match env.get(var) {
                    Some(key) if !key.is_empty() => Some(Secret::new(key.to_owned())),
                    _ => {
                        problems.push(format!("{at}.api_key_env: the environment variable {var} is not set"));
                        None
                    }
                },
                None => None,
            };
            let timeout = match raw.timeout.as_deref().map(str::trim) {
                None => DEFAULT_UPSTREAM_TIMEOUT,
                Some(text) => match humantime::parse_duration(text) {
                    Ok(timeout) if !timeout.is_zero() => timeout,
                    _ => {
                        problems.push(format!("{at}.timeout: '{text}' is not a duration (e.g. 600s, 10m)"));
                        DEFAULT_UPSTREAM_TIMEOUT
                    }
                },
            };
            let proxy = match raw.proxy.as_deref().map(str::trim) {
                None => UpstreamProxy::None,
                Some("env") => UpstreamProxy::Env,
                Some(text) => match url::Url::parse(text) {
                    Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                        UpstreamProxy::Url(text.to_owned())
                    }
                    _ => {
                        problems.push(format!("{at}.proxy: '{text}' is neither `env` nor an http(s) URL"));
                        UpstreamProxy::None
                    }
                },
            };
            let models = raw.models.iter().enumerate().filter_map(|(j, text)| match glob::Pattern::new(text) {
                Ok(pattern) => Some(pattern),
                Err(why) => {
                    problems.push(format!("{at}.models[{j}]: '{text}' is not a glob: {}", why.msg));
                    None
                }
            });
            let models = models.collect();
            let apis = raw.apis.unwrap_or_else(|| Api::ALL.to_vec());
            if apis.is_empty() {
                problems.push(format!("{at}.apis: name at least one of chat, responses, messages"));
            }
            upstreams.push(Upstream {
                fallback: Vec::new(),
                apis,
                name: raw.name,
                base_url: raw.base_url.trim_end_matches('/').to_owned(),
                api_key,
                models,
                timeout,
                proxy,
            });
        }
        for (i, raw) in fallbacks.iter().enumerate() {
            for (j, name) in raw.iter().enumerate() {
                match upstreams.iter().position(|u| &u.name == name) {
                    Some(at) if at == i => {
                        problems.push(format!("model_door.upstreams[{i}].fallback[{j}]: '{name}' is this upstream"));
                    }
                    Some(at) => upstreams[i].fallback.push(at),
                    None => {
                        problems.push(format!("model_door.upstreams[{i}].fallback[{j}]: no upstream is named '{name}'"))
                    }
                }
            }
        }
        let default_upstream = match &self.default_upstream {
            Some(name) => match upstreams.iter().position(|u| &u.name == name) {
                Some(at) => Some(at),
                None => {
                    let statement = format!("model_door.default_upstream: no upstream is named '{name}'");
                    let names = upstreams.iter().map(|u| u.name.as_str());
                    problems.push(crate::similar::did_you_mean(&statement, name, names, String::new));
                    None
                }
            },
            None => (upstreams.len() == 1).then_some(0),
        };
        let defaults = ToolLimits::default();
        let tools = ToolLimits {
            cache_bytes: self.tools_cache_bytes.unwrap_or(defaults.cache_bytes),
            max_tools: self.max_tools.unwrap_or(defaults.max_tools),
            max_pattern_bytes: self.max_pattern_bytes.unwrap_or(defaults.max_pattern_bytes),
        };
        for (key, value) in [
            ("tools_cache_bytes", tools.cache_bytes),
            ("max_tools", tools.max_tools as u64),
            ("max_pattern_bytes", tools.max_pattern_bytes as u64),
        ] {
            if value == 0 {
                problems.push(format!("model_door.{key}: must be at least 1"));
            }
        }
        match problems.is_empty() {
            true => {
                let (strict, allowed_origins) = (self.strict, self.allowed_origins);
                let requests_per_principal =
                    self.requests_per_principal.map_or(DEFAULT_REQUESTS_PER_PRINCIPAL, std::num::NonZeroUsize::get);
                Ok(ModelSettings {
                    listen,
                    upstreams,
                    default_upstream,
                    strict,
                    tools,
                    allowed_origins,
                    requests_per_principal,
                    stream_calls: self.stream_calls,
                    retry: self.retry.unwrap_or(0),
                    retry_max: self.retry_max.unwrap_or(2),
                })
            }
            false => Err(problems),
        }
    }
}
