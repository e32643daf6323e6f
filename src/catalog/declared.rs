//! Tools a request declares for itself (the model door's `tools`: a name,
//! a description and a JSON schema each), as a catalogue of their own. No
//! gateway tool is among them and none of them is ever run: the model door
//! repairs a model's calls against them and hands the calls back.

use std::sync::Arc;

use serde_json::Value;

use super::{
    build::{is_valid_name, NAME_RULE},
    error::CatalogProblems,
    merge::{merge, Declarations, Layer, ToolDecl},
    Backend, Catalog, Place, Presentation, Schema, Severity, Source, Tool, DEFAULT_MAX_CONCURRENCY, DEFAULT_TIMEOUT,
};

/// A function a request declared: its name, description and parameters
/// (a JSON schema; absent or `{}` is an object without parameters, as
/// OpenAI reads it).
pub(crate) struct DeclaredTool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Option<Value>,
}

/// The catalogue of `tools`, or why there is none: a name outside the
/// rule, a name twice, a schema that does not compile. All or nothing: a
/// tool left out would let a call naming it be taken for another.
pub(crate) fn catalog(tools: Vec<DeclaredTool>) -> Result<Catalog, String> {
    let origin: Arc<str> = Arc::from("request");
    let mut decls = Declarations::default();
    for (i, declared) in tools.into_iter().enumerate() {
        if !is_valid_name(&declared.name) {
            return Err(format!("tools[{i}]: invalid tool name '{}': {NAME_RULE}", declared.name));
        }
        let schema = match declared.parameters {
            None => serde_json::json!({"type": "object"}),
            Some(Value::Object(map)) if map.is_empty() => serde_json::json!({"type": "object"}),
            Some(schema) => schema,
        };
        let parameters =
            Schema::compile(schema).map_err(|why| format!("tools[{i}] ({}): parameters: {why}", declared.name))?;
        let place = Place { origin: Arc::clone(&origin), path: format!("tools[{i}]") };
        let tool = Tool {
            name: declared.name.clone(),
            description: declared.description,
            parameters: Arc::new(parameters),
            binding: None,
            aliases: Vec::new(),
            source: Source::Request,
            idempotent: false,
            timeout: DEFAULT_TIMEOUT,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            backend: Backend::Declared,
            declared_at: place.clone(),
            presentation: Arc::new(Presentation::default()),
        };
        let decl = ToolDecl {
            name: Some(declared.name),
            layer: Layer::REGISTRY,
            place,
            tool: Some(Arc::new(tool)),
            aliases: Vec::new(),
        };
        decls.tools.push(decl);
    }
    let mut problems = CatalogProblems::default();
    let catalog = merge(decls, &mut problems, None);
    match problems.into_vec().into_iter().find(|p| p.severity == Severity::Error) {
        Some(problem) => Err(format!("{}: {}", problem.path, problem.message)),
        None => Ok(catalog),
    }
}
