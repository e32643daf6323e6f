//! Which upstream serves a request: the first whose `models` globs match
//! the request's `model` (an upstream without `models` serves every
//! model), else `default_upstream`.

use crate::config::{ModelSettings, Upstream};

/// The upstream for `model`, if any.
pub(super) fn upstream<'s>(settings: &'s ModelSettings, model: &str) -> Option<&'s Upstream> {
    let matching =
        settings.upstreams.iter().find(|u| u.models.is_empty() || u.models.iter().any(|glob| glob.matches(model)));
    matching.or_else(|| settings.default_upstream.map(|at| &settings.upstreams[at]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(name: &str, models: &[&str]) -> Upstream {
        let models = models.iter().map(|m| glob::Pattern::new(m).unwrap()).collect();
        let (name, base_url) = (name.to_owned(), String::new());
        Upstream { name, base_url, api_key: None, models, timeout: Default::default(), proxy: Default::default() }
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
        };
        let served = |model| super::upstream(&settings, model).map(|u| u.name.as_str());
        assert_eq!(served("gpt-oss-20b"), Some("oss"));
        assert_eq!(served("qwen3"), Some("oss"));
        assert_eq!(served("Qwen/Qwen3-8B"), Some("hub"), "a `*` crosses a `/`");
        assert_eq!(served("gpt-4o"), Some("rest"), "no models: every model");
        let settings = ModelSettings { upstreams: vec![upstream("oss", &["a?c"])], ..settings };
        assert_eq!(super::upstream(&settings, "ac").map(|u| u.name.as_str()), Some("oss"), "the default");
    }
}
