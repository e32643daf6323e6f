//! The inference servers' own parser tests as the oracle (DESIGN-wave4
//! section 20). `tests/data/peers/*.json` holds every fixture of each cited
//! test file (repository, path, commit, licence in the file): the model's
//! text and the calls the peer's parser expects, ported as data. Each is
//! sent through the server with a real client as one `Execute` (tool name
//! empty, the text as the arguments, the request's `tools` the fixture's):
//!
//! - one call expected: repaired to it (the tool, and the arguments the
//!   echo backend receives), or held (not run, with the answer saying why);
//!   run as anything else is **wrong**;
//! - several calls: never run (the answer says how many arrived; several
//!   calls, or a call inside prose, are the model door's to lift);
//! - none: never run.
//!
//! The test fails on any wrong dispatch and prints, per parser family, how
//! many fixtures were ported, repaired, held and wrong, and why each held
//! one was.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use toolgate::proto::v1::ExecuteRequest;

use crate::common::{repo, TestGateway};

#[derive(Deserialize)]
struct File {
    family: String,
    fixtures: Vec<Fixture>,
}

#[derive(Deserialize)]
struct Fixture {
    test: String,
    text: String,
    calls: Vec<Call>,
    /// Schemas the peer's test gave; else each is made from the calls.
    #[serde(default)]
    tools: Vec<Tool>,
}

#[derive(Deserialize)]
struct Call {
    name: String,
    /// An object; a peer may expect other JSON (a bare string), which no
    /// tool takes: such a call is to be held.
    arguments: Value,
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    parameters: Value,
}

/// What became of one fixture.
enum Outcome {
    Repaired,
    /// Not run, and why.
    Held(String),
    /// Run as something the peer did not expect, or run at all.
    Wrong(String),
    /// A tool of the fixture cannot be declared here (a name with a `.`,
    /// outside the names every provider accepts): counted apart.
    Undeclarable(String),
}

/// The JSON Schema type of a value, for a tool made from its calls.
fn schema_of(value: &Value) -> Value {
    match value {
        Value::String(_) => json!({"type": "string"}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"type": "integer"}),
        Value::Number(_) => json!({"type": "number"}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Array(_) => json!({"type": "array"}),
        Value::Object(_) => json!({"type": "object"}),
        Value::Null => json!({}),
    }
}

/// A tool made from its calls: its properties, and the arguments every
/// call of it gives (none read yet: `None`).
type Made = (Map<String, Value>, Option<Vec<String>>);

/// The fixture's tools: its own schemas, else one per tool its calls name,
/// every argument a property of the value's type, required when every call
/// of the tool gives it.
fn tools(fixture: &Fixture) -> Vec<(String, Value)> {
    // `{}` is how an OpenAI request writes a function without parameters:
    // an object schema with none.
    let parameters = |schema: &Value| match schema.as_object().is_some_and(Map::is_empty) {
        true => json!({"type": "object"}),
        false => schema.clone(),
    };
    let mut tools: Vec<(String, Value)> =
        fixture.tools.iter().map(|t| (t.name.clone(), parameters(&t.parameters))).collect();
    let mut made: BTreeMap<&str, Made> = BTreeMap::new();
    for call in &fixture.calls {
        if tools.iter().any(|(name, _)| *name == call.name) {
            continue;
        }
        let (properties, required) = made.entry(&call.name).or_default();
        let Some(arguments) = call.arguments.as_object() else { continue };
        for (key, value) in arguments {
            properties.entry(key.clone()).or_insert_with(|| schema_of(value));
        }
        let keys: Vec<String> = arguments.keys().cloned().collect();
        *required = Some(match required.take() {
            None => keys,
            Some(before) => before.into_iter().filter(|k| keys.contains(k)).collect(),
        });
    }
    for (name, (properties, required)) in made {
        let schema = json!({"type": "object", "properties": properties, "required": required.unwrap_or_default()});
        tools.push((name.to_owned(), schema));
    }
    tools
}

/// The catalogue of `tools`, each on the built-in echo.
fn registry(tools: &[(String, Value)]) -> String {
    let mut yaml = String::from("tools:\n");
    for (name, parameters) in tools {
        yaml.push_str(&format!(
            "  - name: {}\n    description: A tool of the fixture.\n    parameters: {parameters}\n    backend: {{builtin: echo}}\n",
            serde_json::to_string(name).unwrap()
        ));
    }
    if tools.is_empty() {
        yaml.push_str("  - name: get_weather\n    description: x\n    backend: {builtin: echo}\n");
    }
    yaml
}

/// Equal as JSON, numbers by value (`5.0` is `5`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

async fn outcome(fixture: &Fixture) -> Outcome {
    let tools = tools(fixture);
    let gateway = match TestGateway::registry(&registry(&tools)).try_start().await {
        Ok(gateway) => gateway,
        Err(toolgate::app::StartError::Catalogue(err)) => {
            return Outcome::Undeclarable(err.problems.iter().map(|p| p.message.clone()).collect::<Vec<_>>().join("; "))
        }
        Err(err) => panic!("start: {err}"),
    };
    let mut client = gateway.client.clone();
    let request = ExecuteRequest {
        tool: String::new(),
        arguments_json: fixture.text.clone(),
        tools: tools.iter().map(|(name, _)| name.clone()).collect(),
        ..Default::default()
    };
    let response = client.execute(request).await.expect("answered").into_inner();
    let said = response.error.as_ref().map(|e| e.message.clone()).unwrap_or_default();
    match (fixture.calls.as_slice(), response.ok) {
        ([expected], true) => {
            let received: Value = serde_json::from_str(&response.result_json).unwrap_or(Value::Null);
            match response.tool == expected.name && same(&received, &expected.arguments) {
                true => Outcome::Repaired,
                false => Outcome::Wrong(format!("ran {} with {}", response.tool, response.result_json)),
            }
        }
        ([_], false) => Outcome::Held(said),
        ([], true) => Outcome::Wrong(format!("no call expected; ran {} with {}", response.tool, response.result_json)),
        ([], false) => Outcome::Held(format!("no call: {said}")),
        (several, true) => Outcome::Wrong(format!("{} calls expected; ran {} alone", several.len(), response.tool)),
        (several, false) => Outcome::Held(format!("{} calls (the model door's): {said}", several.len())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peers_fixtures_are_repaired_or_held_and_none_is_run_wrongly() {
    let folder = repo().join("tests/data/peers");
    let mut files: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut wrong = Vec::new();
    let mut report = Vec::new();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let file: File = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let (mut repaired, mut held, mut apart) = (0, Vec::new(), Vec::new());
        for fixture in &file.fixtures {
            match outcome(fixture).await {
                Outcome::Repaired => repaired += 1,
                Outcome::Held(why) => held.push(format!("    {}: {why}", fixture.test)),
                Outcome::Wrong(why) => wrong.push(format!("{} {}: {why}", file.family, fixture.test)),
                Outcome::Undeclarable(why) => apart.push(format!("    {} (not run): {why}", fixture.test)),
            }
        }
        let one = file.fixtures.iter().filter(|f| f.calls.len() == 1).count();
        report.push(format!(
            "{}: {} ported ({one} of one call), {repaired} repaired, {} held, {} wrong, {} not run\n{}{}",
            file.family,
            file.fixtures.len(),
            held.len(),
            file.fixtures.len() - repaired - held.len() - apart.len(),
            apart.len(),
            held.join("\n"),
            apart.iter().map(|line| format!("\n{line}")).collect::<String>()
        ));
    }
    println!("{}", report.join("\n"));
    assert!(wrong.is_empty(), "run wrongly:\n{}", wrong.join("\n"));
}
