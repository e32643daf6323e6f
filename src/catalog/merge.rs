//! Merges the declarations of every layer into one [`Catalog`].
//!
//! Tool names, aliases and toolset names share one namespace. Layers are
//! taken highest precedence first (registry, packs, built-ins): a name
//! declared twice in one layer is an error naming both places; a name that a
//! higher layer already holds is shadowed (a warning, an error under strict
//! validation). Alias targets and toolset members are resolved once every
//! name is known; an unknown one gets a did-you-mean. Names whose normalised
//! keys collide are reported, since no drifted name can be repaired to them.

use std::{collections::HashMap, sync::Arc};

use sha2::{Digest, Sha256};

use super::{error::CatalogProblems, Catalog, Name, Place, Source, Target, Tool, ToolId, Toolset, ToolsetId};
use crate::similar::{self, normalised_key, SuggestIndex};

/// Precedence: a smaller layer wins. The tools of an MCP server form a layer
/// of their own just below the files of the layer that names the server, so
/// a file's tool shadows a server's tool of the same name, and no server can
/// make the catalogue invalid by listing a name another already uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Layer(u32);

impl Layer {
    pub(crate) const REGISTRY: Layer = Layer(0);
    pub(crate) const PACKS: Layer = Layer(1 << 20);
    pub(crate) const BUILTIN: Layer = Layer(2 << 20);

    /// The layer of the files of a source: the registry or the packs.
    pub(crate) fn of(source: &Source) -> Layer {
        match source {
            Source::Registry => Layer::REGISTRY,
            _ => Layer::PACKS,
        }
    }

    /// The tools of the `index`th MCP server (the order in which servers are
    /// named), just below the files of the `base` layer.
    pub(crate) fn mcp(base: Layer, index: usize) -> Layer {
        Layer(base.0 + 1 + index as u32)
    }
}

/// A tool entry; `tool` is `None` when the entry is broken (already reported),
/// but its name still takes part in duplicate checks.
#[derive(Clone)]
pub(crate) struct ToolDecl {
    pub(crate) name: Option<String>,
    pub(crate) layer: Layer,
    pub(crate) place: Place,
    /// Shared with the catalogues assembled from these declarations (a
    /// tool given aliases from elsewhere gets a copy of its own).
    pub(crate) tool: Option<Arc<Tool>>,
    /// The entry's own `aliases`, each with its place.
    pub(crate) aliases: Vec<(String, Place)>,
}

#[derive(Clone)]
pub(crate) struct AliasDecl {
    pub(crate) alias: String,
    pub(crate) target: String,
    pub(crate) layer: Layer,
    pub(crate) place: Place,
}

#[derive(Clone)]
pub(crate) struct ToolsetDecl {
    pub(crate) name: String,
    pub(crate) members: Vec<String>,
    pub(crate) layer: Layer,
    pub(crate) place: Place,
}

#[derive(Clone, Default)]
pub(crate) struct Declarations {
    pub(crate) tools: Vec<ToolDecl>,
    pub(crate) aliases: Vec<AliasDecl>,
    pub(crate) toolsets: Vec<ToolsetDecl>,
    /// Configured MCP servers whose tools have not arrived (not connected
    /// yet, or unavailable).
    pub(crate) pending: Vec<PendingServer>,
    /// Lists of names kept outside the catalogue (principals' grants),
    /// checked against it.
    pub(crate) grants: Vec<GrantDecl>,
    /// Each federated tool as listed and as pinned.
    pub(crate) pins: Vec<super::PinState>,
}

/// Names a principal may use (tool, alias or toolset names), declared
/// outside the catalogue: each must name something in it, as a toolset
/// member must (a name a server still to come may list is a warning until
/// it does). Grants that are not names (`"*"`) are left out by their owner.
#[derive(Clone, Debug)]
pub(crate) struct GrantDecl {
    /// Who is granted, for messages: `principal 'support-bot'`.
    pub(crate) owner: String,
    /// Each name with its index in the list it came from.
    pub(crate) names: Vec<(usize, String)>,
    /// Where the list is: the configuration file, `principals[0] (support-bot).tools`.
    pub(crate) place: Place,
    /// The names are keys of a map (`rate_limits.tools.NAME`), not items
    /// of a list (`….tools[0]`).
    pub(crate) keyed: bool,
}

/// An MCP server whose tools are still to come. A toolset member or alias
/// target that it may list is a warning, not an error, until it lists its
/// tools: an unreachable server is a warning, and must not stop the start
/// through a toolset that names one of its tools. The catalogue is
/// assembled again when its tools arrive, and checked again then.
#[derive(Clone)]
pub(crate) struct PendingServer {
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) include: Option<Vec<String>>,
    pub(crate) exclude: Vec<String>,
}

impl PendingServer {
    /// Whether `name` may be one of this server's tools once it lists them.
    fn may_list(&self, name: &str) -> bool {
        let Some(tool) = name.strip_prefix(self.prefix.as_str()) else { return false };
        !tool.is_empty()
            && self.include.as_ref().is_none_or(|names| names.iter().any(|n| n == tool))
            && !self.exclude.iter().any(|n| n == tool)
    }
}

/// The warning for a member or target that a pending server may list.
fn still_to_come(pending: &[PendingServer], statement: &str, name: &str) -> Option<String> {
    let server = pending.iter().find(|s| s.may_list(name))?;
    Some(format!(
        "{statement}: '{name}' may be a tool of the MCP server '{}', whose tools have not arrived; \
         left out until they do",
        server.name
    ))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tool,
    Alias,
    Toolset,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Alias => "alias",
            Kind::Toolset => "toolset",
        }
    }
}

struct Claim {
    kind: Kind,
    layer: Layer,
    place: Place,
    /// For a tool: whether its entry built (false: broken, already reported).
    usable: bool,
}

/// Merges every declaration into a catalogue; problems go to `problems`.
/// Each phase is a function of its own, run in this order.
pub(crate) fn merge(mut decls: Declarations, problems: &mut CatalogProblems, previous: Option<&Catalog>) -> Catalog {
    let pins = std::mem::take(&mut decls.pins);
    let mut claims = Claims { held: HashMap::new(), problems, pending: decls.pending.clone() };
    let decls_grants = std::mem::take(&mut decls.grants);
    let claimed = claims.claim_layers(decls);
    let (mut tools, mut names, mut alias_places) = number_tools(claimed.tools);
    claims.attach_aliases(claimed.aliases, &mut tools, &mut names, &mut alias_places);
    let toolsets = claims.expand_toolsets(claimed.toolsets, &mut names);
    claims.check_grants(&decls_grants, &names);
    // Every name is claimed and checked: the claims go before the indexes
    // are built (at 10,000 tools, 1.5 MB less at the peak of a reload).
    let Claims { problems, .. } = claims;
    let keys = normalised_keys(&tools, alias_places, problems);
    let index = suggestion_index(&tools, &toolsets, previous);
    let version = version_of(&tools, &toolsets);
    let before = Arc::new(std::sync::Mutex::new(previous.and_then(Catalog::search_index_or_before)));
    let search = Arc::default();
    Catalog { tools, toolsets, names, keys, index, version, search, before, pins }
}

/// Every name claimed so far, and where problems go.
struct Claims<'p> {
    held: HashMap<String, Claim>,
    problems: &'p mut CatalogProblems,
    pending: Vec<PendingServer>,
}

/// A claimed tool with the own aliases it claimed.
type ClaimedTool = (Arc<Tool>, Vec<(String, Place)>);

/// The declarations whose names were claimed, highest precedence first.
struct Claimed {
    tools: Vec<ClaimedTool>,
    aliases: Vec<AliasDecl>,
    toolsets: Vec<ToolsetDecl>,
}

impl Claims<'_> {
    /// Claims `name`; a name already held is a duplicate (same layer: an
    /// error) or shadowed (a lower layer: a warning), and is not claimed.
    fn claim(&mut self, name: &str, kind: Kind, layer: Layer, place: &Place, usable: bool) -> bool {
        if let Some(held) = self.held.get(name) {
            let (what, held_kind) = (kind.word(), held.kind.word());
            if held.layer == layer {
                self.problems.error(
                    &place.origin,
                    place.path.clone(),
                    format!("duplicate name '{name}': {what} here and {held_kind} at {}", held.place),
                );
            } else {
                self.problems.warning(
                    &place.origin,
                    place.path.clone(),
                    format!("{what} '{name}' is shadowed by the {held_kind} of that name at {}", held.place),
                );
            }
            return false;
        }
        self.held.insert(name.to_owned(), Claim { kind, layer, place: place.clone(), usable });
        true
    }

    /// Phase 1: names, layer by layer, highest precedence first; in each
    /// layer tools (with their own aliases), then aliases, then toolsets.
    fn claim_layers(&mut self, decls: Declarations) -> Claimed {
        let mut claimed = Claimed { tools: Vec::new(), aliases: Vec::new(), toolsets: Vec::new() };
        let mut layers: Vec<Layer> = decls.tools.iter().map(|d| d.layer).collect();
        layers.extend(decls.aliases.iter().map(|d| d.layer).chain(decls.toolsets.iter().map(|d| d.layer)));
        layers.sort();
        layers.dedup();
        let (mut tool_decls, mut alias_decls, mut toolset_decls) = (decls.tools, decls.aliases, decls.toolsets);
        for layer in layers {
            let here;
            (here, tool_decls) = tool_decls.into_iter().partition(|d: &ToolDecl| d.layer == layer);
            for decl in here {
                let Some(name) = &decl.name else { continue };
                if !self.claim(name, Kind::Tool, layer, &decl.place, decl.tool.is_some()) {
                    continue;
                }
                if let Some(tool) = decl.tool {
                    let own = decl.aliases.into_iter().filter(|(a, p)| self.claim(a, Kind::Alias, layer, p, true));
                    claimed.tools.push((tool, own.collect()));
                }
            }
            let here;
            (here, alias_decls) = alias_decls.into_iter().partition(|d: &AliasDecl| d.layer == layer);
            claimed
                .aliases
                .extend(here.into_iter().filter(|d| self.claim(&d.alias, Kind::Alias, layer, &d.place, true)));
            let here;
            (here, toolset_decls) = toolset_decls.into_iter().partition(|d: &ToolsetDecl| d.layer == layer);
            claimed
                .toolsets
                .extend(here.into_iter().filter(|d| self.claim(&d.name, Kind::Toolset, layer, &d.place, true)));
        }
        claimed
    }

    /// Phase 3: top-level aliases. The target is a tool or another alias
    /// (resolved until nothing changes). Near names are looked for among
    /// every declared tool, broken entries included.
    fn attach_aliases(
        &mut self,
        aliases: Vec<AliasDecl>,
        tools: &mut [Arc<Tool>],
        names: &mut HashMap<String, Name>,
        alias_places: &mut Vec<(String, ToolId, Place)>,
    ) {
        let mut pending = aliases;
        loop {
            let before = pending.len();
            let mut waiting = Vec::new();
            for decl in pending {
                match names.get(&decl.target).copied() {
                    Some(Name::Tool(id) | Name::Alias(id)) => {
                        names.insert(decl.alias.clone(), Name::Alias(id));
                        Arc::make_mut(&mut tools[id.0 as usize]).aliases.push(decl.alias.clone());
                        alias_places.push((decl.alias, id, decl.place));
                    }
                    _ => waiting.push(decl),
                }
            }
            pending = waiting;
            if pending.is_empty() || pending.len() == before {
                break;
            }
        }
        let tool_names: Vec<&str> =
            self.held.iter().filter(|(_, c)| c.kind != Kind::Toolset).map(|(n, _)| n.as_str()).collect();
        let mut found = Vec::new();
        for decl in pending {
            let (alias, target) = (&decl.alias, &decl.target);
            let message = match self.held.get(target).map(|c| c.kind) {
                Some(Kind::Tool) => continue, // a broken entry, already reported
                Some(Kind::Toolset) => format!("alias '{alias}' names toolset '{target}'; an alias names one tool"),
                Some(Kind::Alias) => format!("alias '{alias}' names alias '{target}', which leads to no tool"),
                None => {
                    let statement = format!("alias '{alias}' names unknown tool '{target}'");
                    if let Some(warning) = still_to_come(&self.pending, &format!("alias '{alias}'"), target) {
                        found.push((decl.place, warning, true));
                        continue;
                    }
                    similar::did_you_mean(&statement, target, tool_names.iter().copied(), String::new)
                }
            };
            found.push((decl.place, message, false));
        }
        for (place, message, pending) in found {
            match pending {
                true => self.problems.warning(&place.origin, place.path, message),
                false => self.problems.error(&place.origin, place.path, message),
            }
        }
    }

    /// Phase 4b: every granted name names a tool, alias or toolset; an
    /// unknown one is an error with a did-you-mean, or a warning
    /// while a server still to come may list it.
    fn check_grants(&mut self, grants: &[GrantDecl], names: &HashMap<String, Name>) {
        for grant in grants {
            for (i, name) in &grant.names {
                if names.contains_key(name) {
                    continue;
                }
                let path = match grant.keyed {
                    true => format!("{}.{name}", grant.place.path),
                    false => format!("{}[{i}]", grant.place.path),
                };
                if let Some(warning) = still_to_come(&self.pending, &grant.owner, name) {
                    self.problems.warning(&grant.place.origin, path, warning);
                    continue;
                }
                let statement = match grant.keyed {
                    true => format!("{} names unknown tool '{name}'", grant.owner),
                    false => format!("{} is granted unknown tool '{name}'", grant.owner),
                };
                let message = similar::did_you_mean(&statement, name, names.keys().map(String::as_str), String::new);
                self.problems.error(&grant.place.origin, path, message);
            }
        }
    }

    /// Phase 4: toolsets, members expanded (nested toolsets included), each
    /// tool once in declared order; a cycle or an unknown member is an error.
    fn expand_toolsets(&mut self, decls: Vec<ToolsetDecl>, names: &mut HashMap<String, Name>) -> Vec<Toolset> {
        for (i, decl) in decls.iter().enumerate() {
            names.insert(decl.name.clone(), Name::Toolset(ToolsetId(i as u32)));
        }
        let mut expansion = Expansion {
            decls: &decls,
            ids: decls.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect(),
            names,
            expanded: vec![None; decls.len()],
            visiting: Vec::new(),
        };
        for i in 0..decls.len() {
            expansion.expand(i, self);
        }
        let expanded = expansion.expanded;
        decls
            .into_iter()
            .zip(expanded)
            .map(|(decl, tools)| Toolset { name: decl.name, tools: tools.unwrap_or_default() })
            .collect()
    }
}

/// Phase 2: tools sorted by name and numbered; the name table with each
/// tool's own aliases.
#[allow(clippy::type_complexity)]
fn number_tools(
    mut claimed: Vec<ClaimedTool>,
) -> (Vec<Arc<Tool>>, HashMap<String, Name>, Vec<(String, ToolId, Place)>) {
    claimed.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let mut names: HashMap<String, Name> = HashMap::new();
    let mut alias_places: Vec<(String, ToolId, Place)> = Vec::new();
    let tools = claimed
        .into_iter()
        .enumerate()
        .map(|(i, (mut tool, own))| {
            let id = ToolId(i as u32);
            names.insert(tool.name.clone(), Name::Tool(id));
            // The declared tool is shared unless its aliases differ (one
            // of its own was claimed by another name first).
            if !tool.aliases.iter().eq(own.iter().map(|(alias, _)| alias)) {
                Arc::make_mut(&mut tool).aliases = own.iter().map(|(alias, _)| alias.clone()).collect();
            }
            for (alias, place) in own {
                names.insert(alias.clone(), Name::Alias(id));
                alias_places.push((alias, id, place));
            }
            tool
        })
        .collect();
    (tools, names, alias_places)
}

/// The toolsets being expanded, with memo and cycle detection.
struct Expansion<'a> {
    decls: &'a [ToolsetDecl],
    ids: HashMap<String, usize>,
    names: &'a HashMap<String, Name>,
    expanded: Vec<Option<Vec<ToolId>>>,
    /// The toolsets on the current path, to report a cycle.
    visiting: Vec<usize>,
}

impl Expansion<'_> {
    fn expand(&mut self, i: usize, claims: &mut Claims<'_>) -> Vec<ToolId> {
        if let Some(done) = &self.expanded[i] {
            return done.clone();
        }
        let decl = &self.decls[i];
        if self.visiting.contains(&i) {
            let cycle: Vec<&str> = self.visiting.iter().map(|&v| self.decls[v].name.as_str()).collect();
            claims.problems.error(
                &decl.place.origin,
                decl.place.path.clone(),
                format!("toolset '{}' includes itself through {}", decl.name, cycle.join(" -> ")),
            );
            return Vec::new();
        }
        if decl.members.is_empty() {
            claims.problems.warning(
                &decl.place.origin,
                decl.place.path.clone(),
                format!("toolset '{}' is empty", decl.name),
            );
        }
        self.visiting.push(i);
        let mut tools: Vec<ToolId> = Vec::new();
        for (m, member) in decl.members.iter().enumerate() {
            let found = match self.names.get(member) {
                Some(Name::Tool(id) | Name::Alias(id)) => vec![*id],
                Some(Name::Toolset(_)) => self.expand(self.ids[member], claims),
                None => {
                    // A broken tool entry is already reported.
                    let path = format!("{}[{m}]", decl.place.path);
                    let set = format!("toolset '{}'", decl.name);
                    if let Some(warning) = still_to_come(&claims.pending, &set, member) {
                        claims.problems.warning(&decl.place.origin, path, warning);
                    } else if !claims.held.get(member).is_some_and(|c| c.kind == Kind::Tool && !c.usable) {
                        let statement = format!("toolset '{}' names unknown tool '{member}'", decl.name);
                        let candidates = claims.held.keys().map(String::as_str);
                        let message = similar::did_you_mean(&statement, member, candidates, String::new);
                        claims.problems.error(&decl.place.origin, path, message);
                    }
                    Vec::new()
                }
            };
            for id in found {
                if !tools.contains(&id) {
                    tools.push(id);
                }
            }
        }
        self.visiting.pop();
        self.expanded[i] = Some(tools.clone());
        tools
    }
}

/// Phase 5: normalised keys of names and aliases; names whose keys collide
/// are reported, since no drifted name can be repaired to them.
fn normalised_keys(
    tools: &[Arc<Tool>],
    alias_places: Vec<(String, ToolId, Place)>,
    problems: &mut CatalogProblems,
) -> HashMap<String, Vec<ToolId>> {
    let mut keys: HashMap<String, Vec<ToolId>> = HashMap::new();
    let mut first_place: HashMap<String, (String, Place)> = HashMap::new();
    let own_names = tools.iter().enumerate().map(|(i, t)| (t.name.clone(), ToolId(i as u32), t.declared_at.clone()));
    for (name, id, place) in own_names.chain(alias_places) {
        let key = normalised_key(&name);
        let ids = keys.entry(key.clone()).or_default();
        if ids.contains(&id) {
            continue;
        }
        ids.push(id);
        match first_place.get(&key) {
            None => {
                first_place.insert(key, (name, place));
            }
            Some((other, other_place)) => problems.warning(
                &place.origin,
                place.path.clone(),
                format!(
                    "'{name}' and '{other}' (at {other_place}) have the same normalised key '{key}', \
                     so a drifted name cannot be repaired to either; rename one"
                ),
            ),
        }
    }
    keys
}

/// Phase 6: the suggestion index over tool names, aliases and toolset names.
/// The index of every tool, alias and toolset name; `previous`'s own when
/// it was built from the same names for the same targets.
fn suggestion_index(
    tools: &[Arc<Tool>],
    toolsets: &[Toolset],
    previous: Option<&Catalog>,
) -> Arc<SuggestIndex<Target>> {
    // Each tool's name and aliases, then each toolset's name.
    let names = || {
        let of_tools = tools.iter().enumerate().flat_map(|(i, tool)| {
            let target = Target::Tool(ToolId(i as u32));
            std::iter::once(&tool.name).chain(&tool.aliases).map(move |name| (name.as_str(), target))
        });
        let of_toolsets =
            toolsets.iter().enumerate().map(|(i, t)| (t.name.as_str(), Target::Toolset(ToolsetId(i as u32))));
        of_tools.chain(of_toolsets)
    };
    match previous {
        Some(previous) if previous.index.built_from(names()) => Arc::clone(&previous.index),
        _ => Arc::new(SuggestIndex::new(names().map(|(name, target)| (name.to_owned(), target)))),
    }
}

/// A hash of everything a client sees: it changes whenever the snapshot does.
fn version_of(tools: &[Arc<Tool>], toolsets: &[Toolset]) -> String {
    let mut hash = Sha256::new();
    for tool in tools {
        for part in [&tool.name, &tool.description, tool.parameters.text(), &tool.source.to_string()] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        for alias in &tool.aliases {
            hash.update(alias.as_bytes());
            hash.update([1]);
        }
        hash.update([tool.idempotent as u8, 2]);
    }
    for toolset in toolsets {
        hash.update(toolset.name.as_bytes());
        for id in &toolset.tools {
            hash.update(id.0.to_le_bytes());
        }
        hash.update([3]);
    }
    base16ct::lower::encode_string(&hash.finalize()[..8])
}
