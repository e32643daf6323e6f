//! Raw shapes of a catalogue file, and how YAML values are read into them
//! ([`Reader`]): each entry and each field on its own, with its path, so
//! that one bad field never hides the next problem, and an unknown key gets
//! a did-you-mean. A broken entry keeps its name, so duplicates are still
//! found. What this module returns is unchecked beyond its YAML shape; the
//! rules of the catalogue are applied in `build` and `merge`. The text of a
//! file reaches these values through [`super::yaml`].

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_yaml::{Mapping, Value};

use super::error::CatalogProblems;
use crate::similar;

pub(crate) const TOP_LEVEL_KEYS: &[&str] = &["tools", "toolsets", "aliases", "mcp_servers", "mcp_pins"];
pub(crate) const TOOL_KEYS: &[&str] = &[
    "name",
    "title",
    "description",
    "aliases",
    "parameters",
    "idempotent",
    "timeout",
    "max_concurrency",
    "backend",
    "bind",
    "annotations",
];
/// Keys every tool entry must have, and why, for the message.
const REQUIRED_TOOL_KEYS: &[(&str, &str)] =
    &[("name", ""), ("description", " (it is what the model reads)"), ("backend", " (one of: http, command, builtin)")];
pub(crate) const BACKEND_KEYS: &[&str] = &["http", "command", "builtin"];
pub(crate) const HTTP_KEYS: &[&str] = &["url", "headers", "follow_redirects", "use_env_proxy", "forward_user_token"];
pub(crate) const COMMAND_KEYS: &[&str] = &["argv", "cwd", "env"];
pub(crate) const MCP_SERVER_KEYS: &[&str] =
    &["command", "url", "env", "cwd", "headers", "prefix", "include", "exclude", "timeout", "startup_timeout", "pin"];

/// One catalogue file, as written.
#[derive(Debug, Default)]
pub(crate) struct RawFile {
    pub(crate) toolsets: Vec<RawToolset>,
    pub(crate) aliases: Vec<RawAlias>,
    pub(crate) mcp_servers: Vec<RawMcpServer>,
    /// `mcp_pins`: the pins file of this file's servers, as written.
    pub(crate) mcp_pins: Option<String>,
    /// Not valid YAML (reported): none of its tools is kept.
    pub(crate) unreadable: bool,
}

/// A `tools[i]` entry. `None` fields were absent or broken (the problem is
/// already reported); `broken` says whether anything was.
#[derive(Debug, Default)]
pub(crate) struct RawTool {
    /// `tools[3] (reschedule_delivery)`
    pub(crate) path: String,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) aliases: Vec<String>,
    pub(crate) parameters: Option<serde_json::Value>,
    pub(crate) idempotent: Option<bool>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_concurrency: Option<u32>,
    pub(crate) backend: Option<RawBackend>,
    /// `bind: {parameter: user | principal}`.
    pub(crate) bind: Vec<(String, String)>,
    /// `title`, shown to MCP clients.
    pub(crate) title: Option<String>,
    /// `annotations`: the four MCP hints.
    pub(crate) annotations: Option<RawAnnotations>,
    pub(crate) broken: bool,
}

/// A tool's `annotations`: hints passed to MCP clients, independent of the
/// tool's own `idempotent` setting.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawAnnotations {
    pub(crate) read_only_hint: Option<bool>,
    pub(crate) destructive_hint: Option<bool>,
    pub(crate) idempotent_hint: Option<bool>,
    pub(crate) open_world_hint: Option<bool>,
}

#[derive(Debug)]
pub(crate) enum RawBackend {
    Http {
        url: String,
        headers: Vec<(String, String)>,
        follow_redirects: bool,
        use_env_proxy: bool,
        forward_user_token: bool,
    },
    Command {
        argv: Vec<String>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
    },
    Builtin(String),
}

#[derive(Debug)]
pub(crate) struct RawToolset {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) members: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct RawAlias {
    pub(crate) path: String,
    pub(crate) alias: String,
    pub(crate) target: String,
}

/// An `mcp_servers.<name>` entry; `None` when broken (already reported).
#[derive(Debug)]
pub(crate) struct RawMcpServer {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) settings: Option<RawMcpSettings>,
}

#[derive(Debug)]
pub(crate) struct RawMcpSettings {
    pub(crate) transport: RawMcpTransport,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: Option<String>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) prefix: Option<String>,
    pub(crate) include: Option<Vec<String>>,
    pub(crate) exclude: Vec<String>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) startup_timeout: Option<Duration>,
    pub(crate) pin: Option<super::pins::PinMode>,
}

#[derive(Debug)]
pub(crate) enum RawMcpTransport {
    /// `command: [argv…]`: a child process speaking MCP on stdio.
    Stdio(Vec<String>),
    /// `url: …`: streamable HTTP.
    Http(String),
}

pub(super) struct Reader<'a> {
    pub(super) origin: &'a str,
    pub(super) problems: &'a mut CatalogProblems,
}

impl Reader<'_> {
    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.problems.error(self.origin, path, message);
    }

    pub(super) fn tool(&mut self, index: usize, item: &Value) -> RawTool {
        let Value::Mapping(map) = item else {
            let path = format!("tools[{index}]");
            self.error(&path, format!("expected a tool (a mapping), found {}", kind(item)));
            return RawTool { path, broken: true, ..RawTool::default() };
        };
        let bare = format!("tools[{index}]");
        let before = self.problems.len();
        let name = self.field::<String>(map, &bare, "name").unwrap_or(None);
        let path = match &name {
            Some(name) => format!("{bare} ({name})"),
            None => bare,
        };
        let mut tool = RawTool { path, name, ..RawTool::default() };
        self.check_keys(map, &tool.path, TOOL_KEYS);
        for (key, why) in REQUIRED_TOOL_KEYS {
            if !map.contains_key(*key) {
                self.error(&tool.path, format!("missing field '{key}'{why}"));
            }
        }
        tool.description = self.field(map, &tool.path, "description").unwrap_or(None);
        tool.aliases = self.field(map, &tool.path, "aliases").unwrap_or(None).unwrap_or_default();
        tool.idempotent = self.field(map, &tool.path, "idempotent").unwrap_or(None);
        tool.max_concurrency = self.field(map, &tool.path, "max_concurrency").unwrap_or(None);
        tool.timeout = self.duration(map, &tool.path, "timeout");
        tool.parameters = self.json(map, &tool.path, "parameters");
        tool.backend = self.backend(map.get("backend"), &join(&tool.path, "backend"));
        tool.bind = self.string_map(map, &tool.path, "bind").unwrap_or_default();
        tool.title = self.field(map, &tool.path, "title").unwrap_or(None);
        tool.annotations = self.field(map, &tool.path, "annotations").unwrap_or(None);
        tool.broken = self.problems.len() != before;
        tool
    }

    fn backend(&mut self, value: Option<&Value>, path: &str) -> Option<RawBackend> {
        let value = value?;
        let Value::Mapping(map) = value else {
            self.error(path, format!("expected a mapping with one of: http, command, builtin; found {}", kind(value)));
            return None;
        };
        self.check_keys(map, path, BACKEND_KEYS);
        let present: Vec<&str> = BACKEND_KEYS.iter().copied().filter(|k| map.contains_key(*k)).collect();
        match present.as_slice() {
            [] => {
                self.error(path, "a backend needs one of: http, command, builtin");
                None
            }
            ["http"] => self.http(&map["http"], &join(path, "http")),
            ["command"] => self.command(&map["command"], &join(path, "command")),
            ["builtin"] => self.field::<String>(map, path, "builtin").ok().flatten().map(RawBackend::Builtin),
            several => {
                self.error(path, format!("a backend has exactly one kind; this one has {}", several.join(" and ")));
                None
            }
        }
    }

    fn http(&mut self, value: &Value, path: &str) -> Option<RawBackend> {
        let map = self.mapping(value, path)?;
        self.check_keys(map, path, HTTP_KEYS);
        let url = self.required::<String>(map, path, "url");
        let headers = self.string_map(map, path, "headers");
        let follow_redirects = self.field(map, path, "follow_redirects").unwrap_or(None).unwrap_or(false);
        let use_env_proxy = self.field(map, path, "use_env_proxy").unwrap_or(None).unwrap_or(false);
        let forward_user_token = self.field(map, path, "forward_user_token").unwrap_or(None).unwrap_or(false);
        Some(RawBackend::Http { url: url?, headers: headers?, follow_redirects, use_env_proxy, forward_user_token })
    }

    fn command(&mut self, value: &Value, path: &str) -> Option<RawBackend> {
        let map = self.mapping(value, path)?;
        self.check_keys(map, path, COMMAND_KEYS);
        let argv = self.required::<Vec<String>>(map, path, "argv");
        let cwd = self.field::<String>(map, path, "cwd");
        let env = self.string_map(map, path, "env");
        Some(RawBackend::Command { argv: argv?, cwd: cwd.ok()?, env: env? })
    }

    pub(super) fn toolsets(&mut self, value: Option<&Value>) -> Vec<RawToolset> {
        let Some(map) = value.and_then(|v| self.mapping(v, "toolsets")) else { return Vec::new() };
        let mut toolsets = Vec::new();
        for (key, members) in map {
            let Some(name) = self.key(key, "toolsets") else { continue };
            let path = format!("toolsets.{name}");
            if let Ok(members) = serde_yaml::from_value::<Vec<String>>(members.clone()) {
                toolsets.push(RawToolset { path, name, members });
            } else {
                self.error(&path, format!("expected a list of tool names, found {}", kind(members)));
            }
        }
        toolsets
    }

    pub(super) fn aliases(&mut self, value: Option<&Value>) -> Vec<RawAlias> {
        let Some(map) = value.and_then(|v| self.mapping(v, "aliases")) else { return Vec::new() };
        let mut aliases = Vec::new();
        for (key, target) in map {
            let Some(alias) = self.key(key, "aliases") else { continue };
            let path = format!("aliases.{alias}");
            match target {
                Value::String(target) => aliases.push(RawAlias { path, alias, target: target.clone() }),
                other => self.error(&path, format!("expected the name of a tool, found {}", kind(other))),
            }
        }
        aliases
    }

    pub(super) fn mcp_servers(&mut self, value: Option<&Value>) -> Vec<RawMcpServer> {
        let Some(map) = value.and_then(|v| self.mapping(v, "mcp_servers")) else { return Vec::new() };
        let mut servers = Vec::new();
        for (key, server) in map {
            let Some(name) = self.key(key, "mcp_servers") else { continue };
            let path = format!("mcp_servers.{name}");
            let settings = self.mcp_settings(server, &path);
            servers.push(RawMcpServer { path, name, settings });
        }
        servers
    }

    fn mcp_settings(&mut self, value: &Value, path: &str) -> Option<RawMcpSettings> {
        let Some(map) = self.mapping(value, path) else {
            self.error(path, "an MCP server needs either command (stdio) or url (streamable HTTP)");
            return None;
        };
        let before = self.problems.len();
        self.check_keys(map, path, MCP_SERVER_KEYS);
        let transport = match (map.contains_key("command"), map.contains_key("url")) {
            (true, false) => match self.required::<Vec<String>>(map, path, "command") {
                Some(argv) if !argv.is_empty() => Some(RawMcpTransport::Stdio(argv)),
                Some(_) => {
                    self.error(&join(path, "command"), "must name a program to run");
                    None
                }
                None => None,
            },
            (false, true) => self.required::<String>(map, path, "url").map(RawMcpTransport::Http),
            (true, true) => {
                self.error(path, "an MCP server has either command (stdio) or url (streamable HTTP), not both");
                None
            }
            (false, false) => {
                self.error(path, "an MCP server needs either command (stdio) or url (streamable HTTP)");
                None
            }
        };
        let settings = RawMcpSettings {
            transport: transport?,
            env: self.string_map(map, path, "env").unwrap_or_default(),
            cwd: self.field(map, path, "cwd").unwrap_or(None),
            headers: self.string_map(map, path, "headers").unwrap_or_default(),
            prefix: self.field(map, path, "prefix").unwrap_or(None),
            include: self.field(map, path, "include").unwrap_or(None),
            exclude: self.field(map, path, "exclude").unwrap_or(None).unwrap_or_default(),
            timeout: self.duration(map, path, "timeout"),
            startup_timeout: self.duration(map, path, "startup_timeout"),
            pin: self.pin_mode(map, path),
        };
        (self.problems.len() == before).then_some(settings)
    }

    /// `pin: off | warn | strict`.
    fn pin_mode(&mut self, map: &Mapping, path: &str) -> Option<super::pins::PinMode> {
        let text: String = self.field(map, path, "pin").ok()??;
        let mode = super::pins::PinMode::parse(&text);
        if mode.is_none() {
            self.error(&join(path, "pin"), format!("'{text}' is not a pin mode: off, warn or strict"));
        }
        mode
    }

    /// The top level's `mcp_pins`: a path to the pins file.
    pub(super) fn mcp_pins(&mut self, top: &Mapping) -> Option<String> {
        self.field(top, "", "mcp_pins").ok()?
    }

    // --- field helpers -------------------------------------------------

    /// Reads `key` as `T`; `Ok(None)` when absent, `Err` (reported) when malformed.
    fn field<T: DeserializeOwned>(&mut self, map: &Mapping, path: &str, key: &str) -> Result<Option<T>, ()> {
        let Some(value) = map.get(key) else { return Ok(None) };
        // Read in place: no copy of the value first.
        match T::deserialize(value) {
            Ok(v) => Ok(Some(v)),
            Err(err) => {
                self.error(&join(path, key), strip_location(&err.to_string()));
                Err(())
            }
        }
    }

    fn required<T: DeserializeOwned>(&mut self, map: &Mapping, path: &str, key: &str) -> Option<T> {
        match self.field::<T>(map, path, key) {
            Ok(Some(v)) => Some(v),
            Ok(None) => {
                self.error(path, format!("missing field '{key}'"));
                None
            }
            Err(()) => None,
        }
    }

    /// A mapping of strings to strings, in written order; `Some(empty)` when absent.
    fn string_map(&mut self, map: &Mapping, path: &str, key: &str) -> Option<Vec<(String, String)>> {
        let Some(value) = map.get(key) else { return Some(Vec::new()) };
        let path = join(path, key);
        let inner = self.mapping(value, &path)?;
        let mut pairs = Vec::new();
        let mut ok = true;
        for (k, v) in inner {
            let Some(k) = self.key(k, &path) else {
                ok = false;
                continue;
            };
            match v {
                Value::String(s) => pairs.push((k, s.clone())),
                other => {
                    ok = false;
                    self.error(&join(&path, &k), format!("expected a string, found {}", kind(other)));
                }
            }
        }
        ok.then_some(pairs)
    }

    fn duration(&mut self, map: &Mapping, path: &str, key: &str) -> Option<Duration> {
        let text: String = self.field(map, path, key).ok()??;
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d.is_zero() => {
                self.error(&join(path, key), "must be longer than zero");
                None
            }
            Ok(d) => Some(d),
            Err(err) => {
                self.error(&join(path, key), format!("invalid duration '{text}' ({err}); write e.g. 500ms, 5s or 1m"));
                None
            }
        }
    }

    /// A YAML value as JSON (key order kept).
    fn json(&mut self, map: &Mapping, path: &str, key: &str) -> Option<serde_json::Value> {
        let value = map.get(key)?;
        match serde_json::to_value(value) {
            Ok(json) => Some(json),
            Err(err) => {
                self.error(&join(path, key), format!("cannot be expressed as JSON: {err}"));
                None
            }
        }
    }

    pub(super) fn sequence<'v>(&mut self, value: Option<&'v Value>, path: &str) -> Option<&'v Vec<Value>> {
        match value? {
            Value::Sequence(items) => Some(items),
            Value::Null => None,
            other => {
                self.error(path, format!("expected a list, found {}", kind(other)));
                None
            }
        }
    }

    fn mapping<'v>(&mut self, value: &'v Value, path: &str) -> Option<&'v Mapping> {
        match value {
            Value::Mapping(map) => Some(map),
            Value::Null => None,
            other => {
                self.error(path, format!("expected a mapping, found {}", kind(other)));
                None
            }
        }
    }

    fn key(&mut self, key: &Value, path: &str) -> Option<String> {
        match key {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(path, format!("keys must be strings, found {}", kind(other)));
                None
            }
        }
    }

    /// Reports every key of `map` that is not in `allowed`, with a did-you-mean.
    fn check_keys(&mut self, map: &Mapping, path: &str, allowed: &[&str]) {
        for key in map.keys() {
            self.check_key(key, path, allowed);
        }
    }

    /// Reports `key` if it is not in `allowed`, with a did-you-mean.
    pub(super) fn check_key(&mut self, key: &Value, path: &str, allowed: &[&str]) {
        let Some(key) = self.key(key, path) else { return };
        if !allowed.contains(&key.as_str()) {
            let message =
                similar::did_you_mean(&format!("unknown field '{key}'"), &key, allowed.iter().copied(), || {
                    format!("; expected one of: {}", allowed.join(", "))
                });
            self.error(path, message);
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// serde_yaml appends "at line L column C"; the location is reported apart.
pub(super) fn strip_location(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(at) => &message[..at],
        None => message,
    }
}

#[cfg(test)]
mod tests {
    /// Every key the catalogue reader accepts is in the configuration
    /// reference, under the path a user writes.
    #[test]
    fn the_configuration_reference_lists_every_catalogue_key() {
        let doc = include_str!("../../docs/configuration.md");
        let annotations = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];
        let keys = super::TOP_LEVEL_KEYS
            .iter()
            .map(|k| k.to_string())
            .chain(super::TOOL_KEYS.iter().map(|k| format!("tools[].{k}")))
            .chain(super::BACKEND_KEYS.iter().map(|k| format!("tools[].backend.{k}")))
            .chain(super::HTTP_KEYS.iter().map(|k| format!("tools[].backend.http.{k}")))
            .chain(super::COMMAND_KEYS.iter().map(|k| format!("tools[].backend.command.{k}")))
            .chain(super::MCP_SERVER_KEYS.iter().map(|k| format!("mcp_servers.*.{k}")))
            .chain(annotations.iter().map(|k| format!("tools[].annotations.{k}")));
        let missing: Vec<String> = keys.filter(|key| !doc.contains(&format!("`{key}`"))).collect();
        assert!(missing.is_empty(), "docs/configuration.md does not list {missing:?}");
        // The annotations listed are the ones the reader knows.
        for hint in annotations {
            let yaml = format!("{hint}: true");
            assert!(serde_yaml::from_str::<super::RawAnnotations>(&yaml).is_ok(), "{hint}");
        }
    }
}
