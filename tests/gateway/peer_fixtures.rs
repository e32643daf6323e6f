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
    /// Why the peer's expectation is outside what a reader of every format
    /// can be held to (its parser refuses a call it reads unframed, or
    /// rewrites a value): a call here is reported, not counted wrong.
    #[serde(default)]
    outside: Option<String>,
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
    // A schema of properties without `type` is an object's, as the peers
    // read it.
    let parameters = |schema: &Value| match schema.as_object() {
        Some(map) if map.is_empty() => json!({"type": "object"}),
        Some(map) if !map.contains_key("type") => {
            let mut map = map.clone();
            map.insert("type".to_owned(), json!("object"));
            Value::Object(map)
        }
        _ => schema.clone(),
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

/// Whether `received` is the peer's call: equal as JSON ([`same`]); or,
/// where the peer's arguments do not satisfy the tool's own schema (a peer
/// that never validates: `{"arg1": "123456"}` for an integer), the call
/// the schema makes of them: equal but for a value spelt as another type
/// that the schema wants (`"123456"` and 123456).
fn matches(received: &Value, expected: &Value, schema: Option<&Value>) -> bool {
    if same(received, expected) {
        return true;
    }
    let invalid = schema.is_some_and(|schema| !jsonschema::is_valid(schema, expected));
    invalid && same_spelt(received, expected)
}

/// Equal, a scalar's JSON text standing for the scalar.
fn same_spelt(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(text), other @ (Value::Number(_) | Value::Bool(_)))
        | (other @ (Value::Number(_) | Value::Bool(_)), Value::String(text)) => {
            serde_json::from_str::<Value>(text).is_ok_and(|parsed| same(&parsed, other))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_spelt(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_spelt(v, w)))
        }
        _ => same(a, b),
    }
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

/// A gateway on a fixture's tools, or why they cannot be declared here;
/// kept for the next fixture of the same tools.
type Started = (String, Result<TestGateway, String>);

async fn outcome(fixture: &Fixture, started: &mut Option<Started>) -> Outcome {
    let tools = tools(fixture);
    let yaml = registry(&tools);
    if started.as_ref().is_none_or(|(text, _)| *text != yaml) {
        let gateway = match TestGateway::registry(&yaml).try_start().await {
            Ok(gateway) => Ok(gateway),
            Err(toolgate::app::StartError::Catalogue(err)) => {
                Err(err.problems.iter().map(|p| p.message.clone()).collect::<Vec<_>>().join("; "))
            }
            Err(err) => panic!("start: {err}"),
        };
        *started = Some((yaml, gateway));
    }
    let gateway = match &started.as_ref().expect("started").1 {
        Ok(gateway) => gateway,
        Err(why) => return Outcome::Undeclarable(why.clone()),
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
            let schema = tools.iter().find(|(name, _)| *name == expected.name).map(|(_, schema)| schema);
            match response.tool == expected.name && matches(&received, &expected.arguments, schema) {
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

/// The ported files, in order, each with its name without `.json`.
fn peer_files() -> Vec<(String, File)> {
    let folder = repo().join("tests/data/peers");
    let mut paths: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    let json = paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "json"));
    json.map(|path| {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        (stem, serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap())
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peers_fixtures_are_repaired_or_held_and_none_is_run_wrongly() {
    let mut wrong = Vec::new();
    let mut report = Vec::new();
    for (stem, file) in peer_files() {
        let (mut repaired, mut held, mut outside, mut apart) = (0, Vec::new(), Vec::new(), Vec::new());
        let mut started = None;
        for fixture in &file.fixtures {
            match outcome(fixture, &mut started).await {
                Outcome::Repaired => repaired += 1,
                Outcome::Held(why) => held.push(format!("    {}: {why}", fixture.test)),
                Outcome::Wrong(why) if fixture.outside.is_some() => {
                    let reason = fixture.outside.as_deref().unwrap_or_default();
                    outside.push(format!("    {} (outside: {reason}): {why}", fixture.test))
                }
                Outcome::Wrong(why) => wrong.push(format!("{stem} {}: {why}", fixture.test)),
                Outcome::Undeclarable(why) => apart.push(format!("    {} (not run): {why}", fixture.test)),
            }
        }
        let one = file.fixtures.iter().filter(|f| f.calls.len() == 1).count();
        let wrongs = file.fixtures.len() - repaired - held.len() - outside.len() - apart.len();
        report.push(format!(
            "{stem} [{}]: {} ported ({one} of one call), {repaired} repaired, {} held, {wrongs} wrong, {} outside, \
             {} not run\n{}{}",
            file.family,
            file.fixtures.len(),
            held.len(),
            outside.len(),
            apart.len(),
            held.join("\n"),
            outside.iter().chain(&apart).map(|line| format!("\n{line}")).collect::<String>()
        ));
    }
    println!("{}", report.join("\n"));
    assert!(wrong.is_empty(), "run wrongly:\n{}", wrong.join("\n"));
}

/// The model's answer through the model door: its text and its calls
/// (name, arguments as JSON), put together from the stream when streamed.
async fn through_door(
    client: &reqwest::Client,
    url: &str,
    fixture: &Fixture,
    stream: bool,
) -> (String, Vec<(String, Value)>) {
    let tools: Vec<Value> = tools(fixture)
        .into_iter()
        .map(|(name, parameters)| json!({"type": "function", "function": {"name": name, "parameters": parameters}}))
        .collect();
    let body = json!({"model": "say", "messages": [{"role": "user", "content": fixture.text}], "tools": tools, "stream": stream});
    let answer = client.post(format!("{url}/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 200, "{}", fixture.test);
    let text = answer.text().await.unwrap();
    let arguments = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::String(text.to_owned()));
    if !stream {
        let completion: Value = serde_json::from_str(&text).unwrap();
        let message = &completion["choices"][0]["message"];
        let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
        let calls = calls.iter().map(|c| {
            (
                c["function"]["name"].as_str().unwrap().to_owned(),
                arguments(c["function"]["arguments"].as_str().unwrap()),
            )
        });
        return (message["content"].as_str().unwrap_or_default().to_owned(), calls.collect());
    }
    let (mut content, mut calls) = (String::new(), BTreeMap::<u64, (String, String)>::new());
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
        let chunk: Value = serde_json::from_str(data).unwrap();
        let delta = &chunk["choices"][0]["delta"];
        content.push_str(delta["content"].as_str().unwrap_or_default());
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let entry = calls.entry(call["index"].as_u64().unwrap()).or_default();
            entry.0.push_str(call["function"]["name"].as_str().unwrap_or_default());
            entry.1.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
    }
    (content, calls.into_values().map(|(name, args)| (name, arguments(&args))).collect())
}

/// Every fixture as a model's text through the model door (DESIGN-wave4
/// section 20: several calls, or a call inside prose, through the door):
/// the calls lifted in the order the peer expects, or the text left
/// exactly as it was; any other call, or a changed text, is wrong. Whole
/// and streamed answers must agree. Prints the tally per family.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_model_door_the_peers_calls_are_lifted_in_order_or_left_as_text() {
    let upstream = crate::common::model_server::start().await;
    let dir = crate::common::CatalogDir::new();
    let (_gateway, url, _log) = crate::model_door::serve(&dir, &upstream.base_url(), "");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let (mut wrong, mut report) = (Vec::new(), Vec::new());
    for (stem, file) in peer_files() {
        let (mut lifted, mut several, mut left, mut outside) = (0, 0, 0, 0);
        for fixture in &file.fixtures {
            let declared = tools(fixture);
            let whole = through_door(&client, &url, fixture, false).await;
            let streamed = through_door(&client, &url, fixture, true).await;
            if whole.1 != streamed.1 {
                wrong.push(format!("{stem} {}: whole {:?}, streamed {:?}", fixture.test, whole.1, streamed.1));
            }
            let (content, calls) = whole;
            let expected = &fixture.calls;
            let same_calls = calls.len() == expected.len()
                && calls.iter().zip(expected).all(|((name, args), e)| {
                    let schema = declared.iter().find(|(n, _)| *n == e.name).map(|(_, schema)| schema);
                    *name == e.name && matches(args, &e.arguments, schema)
                });
            match (calls.is_empty(), same_calls) {
                (true, _) if content != fixture.text => {
                    wrong.push(format!("{stem} {}: the text changed: {content:?}", fixture.test))
                }
                (true, _) => left += 1,
                (false, true) => {
                    lifted += 1;
                    several += usize::from(expected.len() > 1);
                }
                (false, false) if fixture.outside.is_some() => outside += 1,
                (false, false) => {
                    wrong.push(format!("{stem} {}: lifted {calls:?}, expected {:?}", fixture.test, expected.len()))
                }
            }
        }
        let with_calls = file.fixtures.iter().filter(|f| !f.calls.is_empty()).count();
        report.push(format!(
            "{stem} [{}]: {} ported ({with_calls} with calls), {lifted} lifted ({several} of several calls), {left} left \
             as text, {outside} outside",
            file.family,
            file.fixtures.len()
        ));
    }
    println!("{}", report.join("\n"));
    assert!(wrong.is_empty(), "wrong through the model door:\n{}", wrong.join("\n"));
}
