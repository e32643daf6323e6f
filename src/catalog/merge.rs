//! Merges the declarations of every layer into one [`Catalog`].
//!
//! Tool names, aliases and toolset names share one namespace. Layers are
//! taken highest precedence first (registry, packs, built-ins): a name
//! declared twice in one layer is an error naming both places; a name that a
//! higher layer already holds is shadowed (a warning, an error under strict
//! validation). Alias targets and toolset members are resolved once every
//! name is known; an unknown one gets a did-you-mean. Names whose normalised
//! keys collide are reported, since no drifted name can be repaired to them.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::{
    error::Problems, raw::did_you_mean, Catalog, Name, Place, Source, Target, Tool, ToolId, Toolset, ToolsetId,
};
use crate::resolve::{normalise::normalised_key, suggest::SuggestIndex};

/// Precedence: a smaller layer wins. The tools of an MCP server form a layer
/// of their own just below the files of the layer that names the server, so
/// a file's tool shadows a server's tool of the same name, and no server can
/// make the catalogue invalid by listing a name another already uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Layer(u32);

impl Layer {
    pub const REGISTRY: Layer = Layer(0);
    pub const PACKS: Layer = Layer(1 << 20);
    pub const BUILTIN: Layer = Layer(2 << 20);

    /// The layer of the files of a source: the registry or the packs.
    pub fn of(source: &Source) -> Layer {
        match source {
            Source::Registry => Layer::REGISTRY,
            _ => Layer::PACKS,
        }
    }

    /// The tools of the `index`th MCP server (the order in which servers are
    /// named), just below the files of the `base` layer.
    pub fn mcp(base: Layer, index: usize) -> Layer {
        Layer(base.0 + 1 + index as u32)
    }
}

/// A tool entry; `tool` is `None` when the entry is broken (already reported),
/// but its name still takes part in duplicate checks.
#[derive(Clone)]
pub struct ToolDecl {
    pub name: Option<String>,
    pub layer: Layer,
    pub place: Place,
    pub tool: Option<Tool>,
    /// The entry's own `aliases`, each with its place.
    pub aliases: Vec<(String, Place)>,
}

#[derive(Clone)]
pub struct AliasDecl {
    pub alias: String,
    pub target: String,
    pub layer: Layer,
    pub place: Place,
}

#[derive(Clone)]
pub struct ToolsetDecl {
    pub name: String,
    pub members: Vec<String>,
    pub layer: Layer,
    pub place: Place,
}

#[derive(Clone, Default)]
pub struct Declarations {
    pub tools: Vec<ToolDecl>,
    pub aliases: Vec<AliasDecl>,
    pub toolsets: Vec<ToolsetDecl>,
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
pub fn merge(decls: Declarations, problems: &mut Problems) -> Catalog {
    let mut claims: HashMap<String, Claim> = HashMap::new();
    let mut claim = |problems: &mut Problems, name: &str, kind: Kind, layer: Layer, place: &Place, usable: bool| {
        if let Some(held) = claims.get(name) {
            let (what, held_kind) = (kind.word(), held.kind.word());
            if held.layer == layer {
                problems.error(
                    &place.origin,
                    place.path.clone(),
                    format!("duplicate name '{name}': {what} here and {held_kind} at {}", held.place),
                );
            } else {
                problems.warning(
                    &place.origin,
                    place.path.clone(),
                    format!("{what} '{name}' is shadowed by the {held_kind} of that name at {}", held.place),
                );
            }
            return false;
        }
        claims.insert(name.to_owned(), Claim { kind, layer, place: place.clone(), usable });
        true
    };

    // 1. Names, layer by layer, highest precedence first.
    let mut tools: Vec<(Tool, Vec<(String, Place)>)> = Vec::new();
    let mut aliases: Vec<AliasDecl> = Vec::new();
    let mut toolsets: Vec<ToolsetDecl> = Vec::new();
    let mut layers: Vec<Layer> = decls.tools.iter().map(|d| d.layer).collect();
    layers.extend(decls.aliases.iter().map(|d| d.layer).chain(decls.toolsets.iter().map(|d| d.layer)));
    layers.sort();
    layers.dedup();
    let (mut tool_decls, mut alias_decls, mut toolset_decls) = (decls.tools, decls.aliases, decls.toolsets);
    for layer in layers {
        let (here, rest): (Vec<_>, Vec<_>) = tool_decls.into_iter().partition(|d| d.layer == layer);
        tool_decls = rest;
        for decl in here {
            let Some(name) = &decl.name else { continue };
            if !claim(problems, name, Kind::Tool, layer, &decl.place, decl.tool.is_some()) {
                continue;
            }
            if let Some(tool) = decl.tool {
                let mut own = Vec::new();
                for (alias, place) in decl.aliases {
                    if claim(problems, &alias, Kind::Alias, layer, &place, true) {
                        own.push((alias, place));
                    }
                }
                tools.push((tool, own));
            }
        }
        let (here, rest): (Vec<_>, Vec<_>) = alias_decls.into_iter().partition(|d| d.layer == layer);
        alias_decls = rest;
        for decl in here {
            if claim(problems, &decl.alias, Kind::Alias, layer, &decl.place, true) {
                aliases.push(decl);
            }
        }
        let (here, rest): (Vec<_>, Vec<_>) = toolset_decls.into_iter().partition(|d| d.layer == layer);
        toolset_decls = rest;
        for decl in here {
            if claim(problems, &decl.name, Kind::Toolset, layer, &decl.place, true) {
                toolsets.push(decl);
            }
        }
    }

    // 2. Tools, sorted by name; their own aliases.
    tools.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let mut names: HashMap<String, Name> = HashMap::new();
    let mut alias_places: Vec<(String, ToolId, Place)> = Vec::new();
    let mut tools: Vec<Tool> = tools
        .into_iter()
        .enumerate()
        .map(|(i, (mut tool, own))| {
            let id = ToolId(i as u32);
            names.insert(tool.name.clone(), Name::Tool(id));
            tool.aliases.clear();
            for (alias, place) in own {
                names.insert(alias.clone(), Name::Alias(id));
                tool.aliases.push(alias.clone());
                alias_places.push((alias, id, place));
            }
            tool
        })
        .collect();

    // 3. Top-level aliases: the target is a tool or another alias. Near names
    // are looked for among every declared tool, broken entries included.
    let tool_names: Vec<&str> =
        claims.iter().filter(|(_, c)| c.kind != Kind::Toolset).map(|(n, _)| n.as_str()).collect();
    let mut pending = aliases;
    loop {
        let before = pending.len();
        let mut waiting = Vec::new();
        for decl in pending {
            match names.get(&decl.target).copied() {
                Some(Name::Tool(id) | Name::Alias(id)) => {
                    names.insert(decl.alias.clone(), Name::Alias(id));
                    tools[id.0 as usize].aliases.push(decl.alias.clone());
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
    for decl in pending {
        let (alias, target) = (&decl.alias, &decl.target);
        let message = match claims.get(target).map(|c| (c.kind, c.usable)) {
            Some((Kind::Tool, _)) => continue, // a broken entry, already reported
            Some((Kind::Toolset, _)) => format!("alias '{alias}' names toolset '{target}'; an alias names one tool"),
            Some((Kind::Alias, _)) => format!("alias '{alias}' names alias '{target}', which leads to no tool"),
            None => {
                let near = did_you_mean(target, tool_names.iter().copied());
                unknown("alias", alias, "tool", target, near)
            }
        };
        problems.error(&decl.place.origin, decl.place.path.clone(), message);
    }

    // 4. Toolsets, members expanded (nested toolsets included).
    let toolset_ids: HashMap<String, usize> = toolsets.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
    for (i, decl) in toolsets.iter().enumerate() {
        names.insert(decl.name.clone(), Name::Toolset(ToolsetId(i as u32)));
    }
    let mut expanded: Vec<Option<Vec<ToolId>>> = vec![None; toolsets.len()];
    for i in 0..toolsets.len() {
        expand_toolset(i, &toolsets, &toolset_ids, &names, &claims, &mut expanded, &mut Vec::new(), problems);
    }
    let toolsets: Vec<Toolset> = toolsets
        .into_iter()
        .zip(expanded)
        .map(|(decl, tools)| Toolset { name: decl.name, tools: tools.unwrap_or_default() })
        .collect();

    // 5. Normalised keys, and the names whose keys collide.
    let mut keys: HashMap<String, Vec<ToolId>> = HashMap::new();
    let mut first_place: HashMap<String, (String, ToolId, Place)> = HashMap::new();
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
                first_place.insert(key, (name, id, place));
            }
            Some((other, _, other_place)) => problems.warning(
                &place.origin,
                place.path.clone(),
                format!(
                    "'{name}' and '{other}' (at {other_place}) have the same normalised key '{key}', \
                     so a drifted name cannot be repaired to either; rename one"
                ),
            ),
        }
    }

    // 6. The suggestion index: tool names, aliases and toolset names.
    let mut entries: Vec<(String, Target)> = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let target = Target::Tool(ToolId(i as u32));
        entries.push((tool.name.clone(), target));
        entries.extend(tool.aliases.iter().map(|a| (a.clone(), target)));
    }
    entries.extend(toolsets.iter().enumerate().map(|(i, t)| (t.name.clone(), Target::Toolset(ToolsetId(i as u32)))));
    let index = SuggestIndex::new(entries);

    let version = version_of(&tools, &toolsets);
    Catalog { tools, toolsets, names, keys, index, version }
}

#[allow(clippy::too_many_arguments)]
fn expand_toolset(
    i: usize,
    decls: &[ToolsetDecl],
    ids: &HashMap<String, usize>,
    names: &HashMap<String, Name>,
    claims: &HashMap<String, Claim>,
    expanded: &mut Vec<Option<Vec<ToolId>>>,
    visiting: &mut Vec<usize>,
    problems: &mut Problems,
) -> Vec<ToolId> {
    if let Some(done) = &expanded[i] {
        return done.clone();
    }
    let decl = &decls[i];
    if visiting.contains(&i) {
        let cycle: Vec<&str> = visiting.iter().map(|&v| decls[v].name.as_str()).collect();
        problems.error(
            &decl.place.origin,
            decl.place.path.clone(),
            format!("toolset '{}' includes itself through {}", decl.name, cycle.join(" -> ")),
        );
        return Vec::new();
    }
    if decl.members.is_empty() {
        problems.warning(&decl.place.origin, decl.place.path.clone(), format!("toolset '{}' is empty", decl.name));
    }
    visiting.push(i);
    let mut tools: Vec<ToolId> = Vec::new();
    for (m, member) in decl.members.iter().enumerate() {
        let found = match names.get(member) {
            Some(Name::Tool(id) | Name::Alias(id)) => vec![*id],
            Some(Name::Toolset(_)) => {
                expand_toolset(ids[member], decls, ids, names, claims, expanded, visiting, problems)
            }
            None => {
                // A broken tool entry is already reported.
                if !claims.get(member).is_some_and(|c| c.kind == Kind::Tool && !c.usable) {
                    let near = did_you_mean(member, claims.keys().map(String::as_str));
                    let path = format!("{}[{m}]", decl.place.path);
                    problems.error(&decl.place.origin, path, unknown("toolset", &decl.name, "tool", member, near));
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
    visiting.pop();
    expanded[i] = Some(tools.clone());
    tools
}

fn unknown(owner_kind: &str, owner: &str, kind: &str, name: &str, near: Option<&str>) -> String {
    match near {
        Some(near) => format!("{owner_kind} '{owner}' names unknown {kind} '{name}', did you mean '{near}'?"),
        None => format!("{owner_kind} '{owner}' names unknown {kind} '{name}'"),
    }
}

/// A hash of everything a client sees: it changes whenever the snapshot does.
fn version_of(tools: &[Tool], toolsets: &[Toolset]) -> String {
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
    hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}
