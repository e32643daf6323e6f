//! Tools a request declares for itself (the model door's `tools`: a name
//! and a JSON schema each), as a set of [`Tools`] of their own: no
//! catalogue, no backend. None of them is ever run: the model door repairs
//! a model's calls against them and hands the calls back.

use std::collections::HashMap;

use serde_json::Value;

use super::{
    build::{is_valid_name, NAME_RULE},
    Schema, ToolId, ToolView, Tools,
};
use crate::similar::{normalised_key, SuggestIndex};

/// A function a request declared: its name and parameters (a JSON schema;
/// absent or `{}` is an object without parameters, as OpenAI reads it),
/// and whether it is strict ([`Schema::strict`]).
pub(crate) struct DeclaredTool {
    pub(crate) name: String,
    pub(crate) parameters: Option<Value>,
    pub(crate) strict: bool,
}

/// The tools of one request, with the name tables reading asks of them.
pub(crate) struct DeclaredTools {
    /// In name order (code point order): a tool's index is its id.
    tools: Vec<(String, Schema)>,
    names: HashMap<String, ToolId>,
    keys: HashMap<String, Vec<ToolId>>,
    index: SuggestIndex<ToolId>,
}

impl DeclaredTools {
    /// The tools of `declared`, or why there are none: a name outside the
    /// rule, a name twice, a schema that does not compile. All or nothing:
    /// a tool left out would let a call naming it be taken for another.
    pub(crate) fn new(declared: Vec<DeclaredTool>) -> Result<Self, String> {
        let mut tools: Vec<(usize, String, Schema)> = Vec::with_capacity(declared.len());
        for (i, tool) in declared.into_iter().enumerate() {
            if !is_valid_name(&tool.name) {
                return Err(format!("tools[{i}]: invalid tool name '{}': {NAME_RULE}", tool.name));
            }
            let schema = match tool.parameters {
                None => serde_json::json!({"type": "object"}),
                Some(Value::Object(map)) if map.is_empty() => serde_json::json!({"type": "object"}),
                Some(schema) => schema,
            };
            let parameters =
                Schema::compile(schema).map_err(|why| format!("tools[{i}] ({}): parameters: {why}", tool.name))?;
            let parameters = if tool.strict { parameters.strict() } else { parameters };
            tools.push((i, tool.name, parameters));
        }
        tools.sort_by(|a, b| a.1.cmp(&b.1));
        if let Some(pair) = tools.windows(2).find(|pair| pair[0].1 == pair[1].1) {
            let (first, again) = (pair[0].0.min(pair[1].0), pair[0].0.max(pair[1].0));
            return Err(format!("tools[{again}]: tool '{}' is declared twice (first at tools[{first}])", pair[0].1));
        }
        let tools: Vec<(String, Schema)> = tools.into_iter().map(|(_, name, schema)| (name, schema)).collect();
        let ids = || tools.iter().enumerate().map(|(i, (name, _))| (name, ToolId(i as u32)));
        let names = ids().map(|(name, id)| (name.clone(), id)).collect();
        let mut keys: HashMap<String, Vec<ToolId>> = HashMap::new();
        for (name, id) in ids() {
            keys.entry(normalised_key(name)).or_default().push(id);
        }
        let index = SuggestIndex::new(ids().map(|(name, id)| (name.clone(), id)));
        Ok(Self { tools, names, keys, index })
    }
}

impl Tools for DeclaredTools {
    fn count(&self) -> usize {
        self.tools.len()
    }

    fn tool(&self, id: ToolId) -> ToolView<'_> {
        let (name, parameters) = &self.tools[id.0 as usize];
        ToolView { name, parameters, binding: None, federated: false }
    }

    fn named(&self, name: &str) -> Option<ToolId> {
        self.names.get(name).copied()
    }

    fn by_key(&self, key: &str) -> &[ToolId] {
        self.keys.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    fn nearest(&self, query: &str, cutoff: f64, accept: &dyn Fn(ToolId) -> bool) -> Option<&str> {
        let found = self.index.suggest(query, cutoff, 1, |id| accept(*id));
        let best = found.iter().map(|s| s.score).fold(f64::NEG_INFINITY, f64::max);
        found.iter().filter(|s| s.score == best).map(|s| self.tools[s.target.0 as usize].0.as_str()).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> DeclaredTool {
        DeclaredTool { name: name.to_owned(), parameters: None, strict: false }
    }

    #[test]
    fn a_name_declared_twice_is_refused_with_both_places() {
        let why = DeclaredTools::new(vec![tool("b"), tool("a"), tool("b")]).err().unwrap();
        assert_eq!(why, "tools[2]: tool 'b' is declared twice (first at tools[0])");
    }

    #[test]
    fn names_keys_and_the_nearest_name_are_the_declared_ones() {
        let tools = DeclaredTools::new(vec![tool("web_search"), tool("get_weather")]).unwrap();
        assert_eq!(tools.count(), 2);
        let weather = tools.named("get_weather").unwrap();
        assert_eq!(tools.tool(weather).name, "get_weather");
        assert_eq!(weather, ToolId(0), "ids in name order");
        assert_eq!(tools.by_key(&normalised_key("GetWeather")), &[weather]);
        assert_eq!(tools.nearest("web_serch", 0.5, &|_| true), Some("web_search"));
        assert_eq!(tools.nearest("web_serch", 0.5, &|id| id == weather), None);
    }
}
