//! Which upstream serves a request: among the upstreams that speak its API
//! (`apis`), the first whose `models` globs match the request's `model`
//! (an upstream without `models` serves every model), else
//! `default_upstream` if it speaks that API.

use crate::config::{Api, ModelSettings, Upstream};

/// The upstream for `model` in `api`, if any.
pub(super) fn upstream<'s>(settings: &'s ModelSettings, model: &str, api: Api) -> Option<&'s Upstream> {
    let speaking = settings.upstreams.iter().filter(|u| u.speaks(api));
    let matching = speaking.clone().find(|u| u.models.is_empty() || u.models.iter().any(|glob| glob.matches(model)));
    matching.or_else(|| settings.default_upstream.map(|at| &settings.upstreams[at]).filter(|u| u.speaks(api)))
}

/// The upstreams that may serve `model` in `api`, in the order they are
/// tried (failover): the one [`upstream`] picks, then its `fallback`
/// upstreams that speak `api`, then every other upstream whose `models`
/// match, in the configuration's order; each once.
pub(super) fn candidates<'s>(settings: &'s ModelSettings, model: &str, api: Api) -> Vec<&'s Upstream> {
    let Some(first) = upstream(settings, model, api) else { return Vec::new() };
    let mut tried = vec![first];
    let fallback = first.fallback.iter().map(|&at| &settings.upstreams[at]).filter(|u| u.speaks(api));
    let matching = settings
        .upstreams
        .iter()
        .filter(|u| u.speaks(api) && (u.models.is_empty() || u.models.iter().any(|glob| glob.matches(model))));
    for next in fallback.chain(matching) {
        if !tried.iter().any(|u| std::ptr::eq(*u, next)) {
            tried.push(next);
        }
    }
    tried
}

/// The upstream for a request of `api` that names no model (a stored
/// response's retrieval): `default_upstream` if it speaks `api`, else the
/// first upstream that does.
pub(super) fn any(settings: &ModelSettings, api: Api) -> Option<&Upstream> {
    let default = settings.default_upstream.map(|at| &settings.upstreams[at]).filter(|u| u.speaks(api));
    default.or_else(|| settings.upstreams.iter().find(|u| u.speaks(api)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(name: &str, models: &[&str]) -> Upstream {
        let models = models.iter().map(|m| glob::Pattern::new(m).unwrap()).collect();
        let (name, base_url) = (name.to_owned(), String::new());
        let apis = Api::ALL.to_vec();
        let (timeout, proxy) = (Default::default(), Default::default());
        Upstream { name, base_url, api_key: None, models, timeout, proxy, apis, fallback: Vec::new() }
    }

    #[test]
    fn the_first_upstream_whose_globs_match_serves_else_the_default() {
        let settings = ModelSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstreams: vec![upstream("oss", &["gpt-oss-*", "q?en*"]), upstream("hub", &["*/*"]), upstream("rest", &[])],
            default_upstream: Some(0),
            strict: false,
            tools: Default::default(),
            allowed_origins: Vec::new(),
            requests_per_principal: 64,
            stream_calls: Default::default(),
            retry: 0,
            retry_max: 2,
        };
        let served = |model| super::upstream(&settings, model, Api::Chat).map(|u| u.name.as_str());
        assert_eq!(served("gpt-oss-20b"), Some("oss"));
        assert_eq!(served("qwen3"), Some("oss"));
        assert_eq!(served("Qwen/Qwen3-8B"), Some("hub"), "a `*` crosses a `/`");
        assert_eq!(served("gpt-4o"), Some("rest"), "no models: every model");
        let settings = ModelSettings { upstreams: vec![upstream("oss", &["a?c"])], ..settings };
        assert_eq!(super::upstream(&settings, "ac", Api::Chat).map(|u| u.name.as_str()), Some("oss"), "the default");
    }
}
