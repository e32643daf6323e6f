//! Turns raw entries into catalogue values: a tool (the name rule, the
//! description, the backend settings with `${VAR}` expanded, the
//! `parameters` schema compiled) and an MCP server's settings. Relative paths
//! resolve against the declaring file's folder.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use super::{
    error::CatalogProblems,
    expand::expand,
    raw::{RawAnnotations, RawBackend, RawMcpServer, RawMcpTransport, RawTool},
    schema::SchemaCache,
    Backend, BindSource, Binding, BuiltinTool, CommandBackend, HttpBackend, McpServer, McpTransport, Place,
    Presentation, Secret, Source, Tool, DEFAULT_MAX_CONCURRENCY, DEFAULT_MCP_STARTUP_TIMEOUT, DEFAULT_TIMEOUT,
};
use crate::{env::Env, similar};

/// What every model provider accepts as a tool name: `^[A-Za-z0-9_-]{1,64}$`.
pub(crate) fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub(crate) const NAME_RULE: &str = "a name has 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'";

/// The file a raw entry came from.
pub(crate) struct FileContext<'a> {
    pub(crate) origin: &'a Arc<str>,
    /// The folder of the file, against which relative paths resolve.
    pub(crate) dir: &'a Path,
    pub(crate) source: &'a Source,
    pub(crate) env: &'a Env,
    /// The schemas compiled so far in this load.
    pub(crate) schemas: &'a SchemaCache,
}

/// Builds the tool, or reports why not. `None` when anything is wrong.
pub(crate) fn tool(raw: RawTool, file: &FileContext<'_>, problems: &mut CatalogProblems) -> Option<Tool> {
    let origin: &str = file.origin;
    let path = raw.path.as_str();
    let mut ok = !raw.broken;

    match &raw.name {
        Some(name) if is_valid_name(name) => {}
        Some(name) => {
            problems.error(origin, format!("{path}.name"), format!("invalid tool name '{name}': {NAME_RULE}"));
            ok = false;
        }
        None => ok = false,
    }
    match raw.description.as_deref().map(str::trim) {
        Some("") => {
            problems.error(origin, format!("{path}.description"), "must not be empty: it is what the model reads");
            ok = false;
        }
        Some(_) => {}
        None => ok = false,
    }
    for (i, alias) in raw.aliases.iter().enumerate() {
        if !is_valid_name(alias) {
            problems.error(origin, format!("{path}.aliases[{i}]"), format!("invalid alias '{alias}': {NAME_RULE}"));
            ok = false;
        }
    }
    if raw.title.as_deref().is_some_and(|t| t.trim().is_empty()) {
        problems.error(origin, format!("{path}.title"), "must not be empty when given (or leave it out)");
        ok = false;
    }
    if raw.max_concurrency == Some(0) {
        problems.error(origin, format!("{path}.max_concurrency"), "must be at least 1");
        ok = false;
    }
    let backend = match raw.backend {
        Some(backend) => backend_of(backend, path, file, problems),
        None => None,
    };
    let mut binding = None;
    if !raw.bind.is_empty() && raw.parameters.is_none() {
        problems.error(origin, format!("{path}.bind"), "binds parameters, but the tool declares no parameters");
        ok = false;
    }
    let parameters = match (raw.parameters, &backend) {
        (Some(json), _) if !raw.bind.is_empty() => {
            binding = bound(&raw.bind, &json, path, file, problems);
            let model_facing = binding.as_ref().map(|(_, reduced)| reduced.clone()).unwrap_or(json);
            match file.schemas.compile(model_facing) {
                Ok(schema) => Some(schema),
                Err(message) => {
                    problems.error(origin, format!("{path}.parameters"), message);
                    None
                }
            }
        }
        (Some(json), _) => match file.schemas.compile(json) {
            Ok(schema) => Some(schema),
            Err(message) => {
                problems.error(origin, format!("{path}.parameters"), message);
                None
            }
        },
        (None, Some(Backend::Builtin(builtin))) => {
            Some(file.schemas.compile(builtin.parameters()).expect("built-in schemas are valid"))
        }
        (None, _) => Some(
            file.schemas
                .compile(serde_json::json!({"type": "object", "properties": {}}))
                .expect("the default schema is valid"),
        ),
    };
    let binding = match binding {
        Some((parameters_bound, _)) => Some(Arc::new(parameters_bound)),
        None if raw.bind.is_empty() => None,
        None => return None,
    };
    let (Some(backend), Some(parameters), true) = (backend, parameters, ok) else { return None };
    let idempotent = raw.idempotent.unwrap_or(false);
    let presentation = presentation(raw.title, raw.annotations, idempotent);
    Some(Tool {
        name: raw.name?,
        description: raw.description?.trim().to_owned(),
        parameters,
        binding,
        aliases: raw.aliases,
        source: file.source.clone(),
        idempotent,
        timeout: raw.timeout.unwrap_or(DEFAULT_TIMEOUT),
        max_concurrency: raw.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
        backend,
        declared_at: Place { origin: file.origin.clone(), path: raw.path },
        presentation,
    })
}

/// What MCP clients are shown of a registry tool: its `title` and
/// `annotations`, `idempotentHint` derived from `idempotent` when the
/// annotations do not say. A tool with neither (most tools) shares one of
/// two presentations with every other such tool of every load.
fn presentation(title: Option<String>, annotations: Option<RawAnnotations>, idempotent: bool) -> Arc<Presentation> {
    static PLAIN: std::sync::LazyLock<[Arc<Presentation>; 2]> =
        std::sync::LazyLock::new(|| [false, true].map(|idempotent| Arc::new(presented(None, None, idempotent))));
    match (&title, &annotations) {
        (None, None) => Arc::clone(&PLAIN[usize::from(idempotent)]),
        _ => Arc::new(presented(title, annotations, idempotent)),
    }
}

fn presented(title: Option<String>, annotations: Option<RawAnnotations>, idempotent: bool) -> Presentation {
    let hints = annotations.unwrap_or_default();
    let mut map = serde_json::Map::new();
    let given = [
        ("readOnlyHint", hints.read_only_hint),
        ("destructiveHint", hints.destructive_hint),
        ("idempotentHint", Some(hints.idempotent_hint.unwrap_or(idempotent))),
        ("openWorldHint", hints.open_world_hint),
    ];
    for (key, value) in given {
        if let Some(value) = value {
            map.insert(key.to_owned(), serde_json::Value::Bool(value));
        }
    }
    Presentation { title: title.map(|t| t.trim().to_owned()), annotations: Some(map), ..Presentation::default() }
}

/// Checks `bind:` against the tool's schema (each entry names a declared
/// parameter, bound to `user` or `principal`); the binding, its whole
/// schema compiled, and the schema without the bound parameters: what the
/// model sees, in every list, format and hint.
fn bound(
    bind: &[(String, String)],
    json: &serde_json::Value,
    path: &str,
    file: &FileContext<'_>,
    problems: &mut CatalogProblems,
) -> Option<(Binding, serde_json::Value)> {
    let origin: &str = file.origin;
    let properties = json.get("properties").and_then(serde_json::Value::as_object);
    let mut parameters = Vec::new();
    let mut ok = true;
    for (name, source) in bind {
        let at = format!("{path}.bind.{name}");
        let source = match source.as_str() {
            "user" => BindSource::User,
            "principal" => BindSource::Principal,
            other => {
                problems.error(origin, at, format!("binds to '{other}'; a parameter binds to user or principal"));
                ok = false;
                continue;
            }
        };
        if !properties.is_some_and(|p| p.contains_key(name)) {
            problems.error(
                origin,
                at,
                format!("'{name}' is not a parameter of the tool (not in parameters.properties)"),
            );
            ok = false;
            continue;
        }
        parameters.push((name.clone(), source));
    }
    if !ok {
        return None;
    }
    let full = match file.schemas.compile(json.clone()) {
        Ok(schema) => schema,
        Err(message) => {
            problems.error(origin, format!("{path}.parameters"), message);
            return None;
        }
    };
    let mut reduced = json.clone();
    if let Some(properties) = reduced.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
        for (name, _) in &parameters {
            properties.shift_remove(name);
        }
    }
    if let Some(required) = reduced.get_mut("required").and_then(serde_json::Value::as_array_mut) {
        required.retain(|r| !parameters.iter().any(|(name, _)| r == name));
    }
    Some((Binding { parameters, full }, reduced))
}

/// Builds an MCP server's settings, or reports why not.
pub(crate) fn mcp_server(
    raw: RawMcpServer,
    file: &FileContext<'_>,
    pins: Option<&Arc<super::Pins>>,
    problems: &mut CatalogProblems,
) -> Option<McpServer> {
    let origin: &str = file.origin;
    let path = raw.path.as_str();
    if !is_valid_name(&raw.name) {
        problems.error(origin, path, format!("invalid MCP server name '{}': {NAME_RULE}", raw.name));
    }
    let settings = raw.settings?;
    let prefix = settings.prefix.unwrap_or_default();
    if !prefix.is_empty() && !is_valid_name(&prefix) {
        problems.error(origin, format!("{path}.prefix"), format!("invalid prefix '{prefix}': {NAME_RULE}"));
        return None;
    }
    if reserved(&settings.env, &settings.headers, path, origin, problems) {
        return None;
    }
    let env = secrets(&settings.env, &format!("{path}.env"), file, problems);
    let headers = secrets(&settings.headers, &format!("{path}.headers"), file, problems);
    let transport = match settings.transport {
        RawMcpTransport::Stdio(argv) => {
            let argv = arguments(&argv, &format!("{path}.command"), file, problems);
            let cwd = match settings.cwd {
                Some(cwd) => expanded(&cwd, format!("{path}.cwd"), file, problems).map(|c| file.dir.join(c)),
                None => Some(file.dir.to_path_buf()),
            };
            let mut argv = argv?;
            let program = program_path(argv.remove(0), file.dir);
            McpTransport::Stdio { program, args: argv, cwd: cwd?, env: env? }
        }
        RawMcpTransport::Http(url) => {
            let url = expanded(&url, format!("{path}.url"), file, problems)?;
            McpTransport::Http { url: http_url(url, &format!("{path}.url"), origin, problems)?, headers: headers? }
        }
    };
    Some(McpServer {
        name: raw.name,
        transport,
        prefix,
        include: settings.include,
        exclude: settings.exclude,
        timeout: settings.timeout.unwrap_or(DEFAULT_TIMEOUT),
        startup_timeout: settings.startup_timeout.unwrap_or(DEFAULT_MCP_STARTUP_TIMEOUT),
        declared_in: file.source.clone(),
        declared_at: Place { origin: file.origin.clone(), path: raw.path },
        pin: settings.pin.unwrap_or_default(),
        pins: pins.cloned(),
    })
}

/// `text` with `${VAR}` expanded, or `None` with the problem reported.
fn expanded(text: &str, path: String, file: &FileContext<'_>, problems: &mut CatalogProblems) -> Option<String> {
    match expand(text, file.env) {
        Ok(value) => Some(value),
        Err(message) => {
            problems.error(file.origin, path, message);
            None
        }
    }
}

/// `name: value` settings with `${VAR}` expanded, kept as secrets; every
/// missing variable is reported before `None` is returned.
fn secrets(
    pairs: &[(String, String)],
    path: &str,
    file: &FileContext<'_>,
    problems: &mut CatalogProblems,
) -> Option<Vec<(String, Secret)>> {
    let values: Vec<Option<(String, Secret)>> = pairs
        .iter()
        .map(|(name, value)| {
            Some((name.clone(), Secret::new(expanded(value, format!("{path}.{name}"), file, problems)?)))
        })
        .collect();
    values.into_iter().collect()
}

/// Whether `env` or `headers` (of the backend or server at `path`) set one
/// of the names through which the gateway says who calls
/// ([`super::identity_names`]): each is an error, since the tool would then
/// hear of a caller on calls that have none.
fn reserved(
    env: &[(String, String)],
    headers: &[(String, String)],
    path: &str,
    origin: &str,
    problems: &mut CatalogProblems,
) -> bool {
    use super::identity_names::{HEADER_PREFIX, PRINCIPAL_ENV, USER_ENV, USER_ISSUER_ENV};
    let mut found = false;
    for (name, _) in headers {
        let head = name.as_bytes().get(..HEADER_PREFIX.len());
        if head.is_some_and(|head| head.eq_ignore_ascii_case(HEADER_PREFIX.as_bytes())) {
            let message = format!("'{name}' is the gateway's: it tells the tool who calls, and no tool may set it");
            problems.error(origin, format!("{path}.headers.{name}"), message);
            found = true;
        }
    }
    for (name, _) in env {
        if [PRINCIPAL_ENV, USER_ENV, USER_ISSUER_ENV].contains(&name.as_str()) {
            let message = format!("'{name}' is the gateway's: it tells the tool who calls, and no tool may set it");
            problems.error(origin, format!("{path}.env.{name}"), message);
            found = true;
        }
    }
    found
}

/// An argv with `${VAR}` expanded; every missing variable is reported.
fn arguments(
    argv: &[String],
    path: &str,
    file: &FileContext<'_>,
    problems: &mut CatalogProblems,
) -> Option<Vec<String>> {
    let values: Vec<Option<String>> =
        argv.iter().enumerate().map(|(i, arg)| expanded(arg, format!("{path}[{i}]"), file, problems)).collect();
    values.into_iter().collect()
}

/// argv[0]: a relative path with a `/` resolves against `dir`; a bare name is
/// looked up on `PATH` when run.
fn program_path(program: String, dir: &Path) -> PathBuf {
    if program.contains('/') {
        dir.join(&program)
    } else {
        PathBuf::from(program)
    }
}

/// `program` if it can be run: a path (absolute by now) names an executable
/// file; a bare name is found on the `PATH` children inherit. The error names
/// the path looked at, or the `PATH`.
fn runnable(
    program: PathBuf,
    cwd: &Path,
    path: &str,
    file: &FileContext<'_>,
    problems: &mut CatalogProblems,
) -> Option<PathBuf> {
    let search = file.env.get("PATH").unwrap_or_default();
    match which::which_in(&program, Some(search), cwd) {
        Ok(_) => Some(program),
        Err(_) if program.is_absolute() => {
            let why = match std::fs::metadata(&program) {
                Ok(meta) if meta.is_dir() => "is a folder, not a program",
                Ok(_) => "is not executable",
                Err(_) => "does not exist",
            };
            problems.error(file.origin, path, format!("cannot run '{}': the file {why}", program.display()));
            None
        }
        Err(_) => {
            let message = format!(
                "cannot run '{}': no executable of that name on the PATH children inherit ({search})",
                program.display()
            );
            problems.error(file.origin, path, message);
            None
        }
    }
}

/// An http or https URL with a host. The text may hold an expanded secret, so
/// it is never echoed.
fn http_url(text: String, path: &str, origin: &str, problems: &mut CatalogProblems) -> Option<url::Url> {
    match url::Url::parse(&text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Some(u),
        Ok(u) => {
            problems.error(origin, path, format!("unsupported URL scheme '{}'; use http or https", u.scheme()));
            None
        }
        Err(err) => {
            problems.error(origin, path, format!("invalid URL: {err}"));
            None
        }
    }
}

fn backend_of(
    raw: RawBackend,
    tool_path: &str,
    file: &FileContext<'_>,
    problems: &mut CatalogProblems,
) -> Option<Backend> {
    let origin: &str = file.origin;
    match raw {
        RawBackend::Builtin(name) => match BuiltinTool::from_name(&name) {
            Some(builtin) => Some(Backend::Builtin(builtin)),
            None => {
                let known = BuiltinTool::ALL.map(BuiltinTool::name);
                let message = similar::did_you_mean(&format!("unknown built-in tool '{name}'"), &name, known, || {
                    format!("; built-ins are: {}", known.join(", "))
                });
                problems.error(origin, format!("{tool_path}.backend.builtin"), message);
                None
            }
        },
        RawBackend::Http { url, headers, follow_redirects, use_env_proxy, forward_user_token } => {
            let path = format!("{tool_path}.backend.http");
            if forward_user_token && headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization")) {
                let message = "forward_user_token sends the user's token as the Authorization header, and the tool \
                               configures its own: keep one";
                problems.error(origin, format!("{path}.forward_user_token"), message);
                return None;
            }
            if reserved(&[], &headers, &path, origin, problems) {
                return None;
            }
            let url = expanded(&url, format!("{path}.url"), file, problems);
            let headers = secrets(&headers, &format!("{path}.headers"), file, problems);
            let url = http_url(url?, &format!("{path}.url"), origin, problems);
            Some(Backend::Http(HttpBackend {
                url: url?,
                headers: headers?,
                follow_redirects,
                use_env_proxy,
                forward_user_token,
            }))
        }
        RawBackend::Command { argv, cwd, env } => {
            let path = format!("{tool_path}.backend.command");
            if argv.is_empty() || argv[0].trim().is_empty() {
                problems.error(origin, format!("{path}.argv"), "must name a program to run");
                return None;
            }
            if reserved(&env, &[], &path, origin, problems) {
                return None;
            }
            let argv = arguments(&argv, &format!("{path}.argv"), file, problems);
            let cwd = cwd.map(|c| expanded(&c, format!("{path}.cwd"), file, problems));
            let env = secrets(&env, &format!("{path}.env"), file, problems);
            let (mut argv, env) = (argv?, env?);
            let cwd = match cwd {
                Some(c) => file.dir.join(c?),
                None => file.dir.to_path_buf(),
            };
            let program = program_path(argv.remove(0), file.dir);
            let program = runnable(program, &cwd, &format!("{path}.argv[0]"), file, problems)?;
            Some(Backend::Command(CommandBackend { program, args: argv, cwd, env }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rule() {
        assert!(is_valid_name("web_search-2"));
        assert!(is_valid_name(&"a".repeat(64)));
        assert!(!is_valid_name(&"a".repeat(65)));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("web.search"));
        assert!(!is_valid_name("wéb"));
    }
}
