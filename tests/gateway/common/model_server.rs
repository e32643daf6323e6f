//! A scripted OpenAI-compatible model server on 127.0.0.1:0 (axum): each
//! model name answers one malformed form a real model writes, whole or
//! streamed (server-sent events, split as a real server splits), and the
//! server remembers the `Authorization` each request brought.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};
use futures::StreamExt;
use serde_json::{json, Value};

/// What a model writes, by model name: `(content, tool calls)`.
fn script(model: &str) -> (Option<&'static str>, Option<Value>) {
    match model {
        // A drifted name, Python-ish arguments (`drift-exact`: in a whole
        // answer that a tree of serde_json values would not write again
        // byte for byte).
        "drift" | "drift-exact" => (
            None,
            Some(
                json!([{"id": "call_1", "type": "function", "function": {"name": "GetWeather", "arguments": "{'city': 'Paris',}"}}]),
            ),
        ),
        // A call written as text the server's parser missed.
        "text-call" => {
            (Some("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"), None)
        }
        "two-calls" => {
            (Some("<get_weather><city>Paris</city></get_weather>\n<get_weather><city>Rome</city></get_weather>"), None)
        }
        "think-call" => (Some("<think>The user wants the weather.</think>\ncall:get_weather{city: \"Oslo\"}"), None),
        // Two structured calls (streamed at one index, or without one, as
        // some servers send them: `-same-index`, `-no-index`).
        m if m.starts_with("two-structured") => (
            None,
            Some(json!([
                {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            ])),
        ),
        // Calls as strict tools get them: an optional parameter left out,
        // a number written as text.
        "strict-drift" => (
            None,
            Some(
                json!([{"id": "call_1", "type": "function", "function": {"name": "GetWeather", "arguments": "{'city': 'Paris'}"}}]),
            ),
        ),
        "strict-text" => {
            (Some("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"), None)
        }
        "strict-days" => (
            None,
            Some(
                json!([{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": \"3\"}"}}]),
            ),
        ),
        // Codex's shell tool as models get it wrong: a drifted name with
        // Python-ish arguments, and the call written as text.
        "codex-drift" => (
            None,
            Some(json!([{"id": "call_1", "type": "function", "function": {"name": "ExecCommand", "arguments": "{'cmd': 'echo ran > ran.txt',}"}}])),
        ),
        "codex-text" => (
            Some("<tool_call>\n{\"name\": \"exec_command\", \"arguments\": {\"cmd\": \"echo ran > ran.txt\"}}\n</tool_call>"),
            None,
        ),
        // Claude Code's Bash tool as models get it wrong: its name in
        // another case, and the call written as text.
        "claude-drift" => (
            None,
            Some(json!([{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"echo ran > ran.txt\"}"}}])),
        ),
        "claude-text" => (
            Some("<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"echo ran > ran.txt\"}}\n</tool_call>"),
            None,
        ),
        // A call inside prose: text it stays.
        "prose" => (Some("Sure, I could call get_weather(city='Paris') for you, if you like."), None),
        // A call that names no declared tool: never invented.
        "unknown" => (Some("<tool_call>{\"name\": \"delete_everything\", \"arguments\": {}}</tool_call>"), None),
        _ => (Some("Hello."), None),
    }
}

/// The second chance's scripts, given the texts of the conversation's
/// last turn of tool outputs (none: the user spoke last).
/// `retry-call`: a call of a tool nobody declared (`lookup_forecast`);
/// told what went wrong (an output that names it), the call meant; once
/// that call's result is in, the final text. `retry-never`: the undeclared
/// call whatever it is told. `retry-two`: the undeclared call beside a good
/// one; told, both good. (`-usage`: as `-usage` streams say.)
fn retry_script(model: &str, outputs: &[String]) -> (Option<&'static str>, Option<Value>) {
    let model = model.trim_end_matches("-usage");
    let call = |id: &str, name: &str, arguments: &str| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}});
    let bad = call("call_1", "lookup_forecast", "{\"place\": \"Paris\"}");
    let told = outputs.iter().any(|o| o.contains("lookup_forecast"));
    if !outputs.is_empty() && !told && model != "retry-never" {
        return (Some("It is sunny."), None);
    }
    let calls = match (model, told) {
        ("retry-two", false) => json!([bad, call("call_2", "get_weather", "{\"city\": \"London\"}")]),
        ("retry-two", true) => json!([
            call("call_3", "get_weather", "{\"city\": \"Paris\"}"),
            call("call_4", "get_weather", "{\"city\": \"London\"}"),
        ]),
        ("retry-call", true) => json!([call("call_2", "get_weather", "{\"city\": \"Paris\"}")]),
        _ => json!([bad]),
    };
    (None, Some(calls))
}

/// A message's content as text (a string, or its blocks' texts).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            blocks.iter().map(|b| text_of(b.get("text").or(b.get("content")).unwrap_or(b))).collect()
        }
        other => other.to_string(),
    }
}

/// The ids of the calls of a Chat conversation's assistant turns that no
/// `tool` message answers (as OpenAI refuses them), if any.
fn unanswered_chat(messages: &[Value]) -> Option<String> {
    let answered: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").map(|m| &m["tool_call_id"]).collect();
    let missing: Vec<String> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|call| !answered.contains(&&call["id"]))
        .map(|call| call["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

#[derive(Clone, Default)]
pub struct Seen {
    pub authorization: Arc<Mutex<Vec<Option<String>>>>,
    /// The names of every header of every request, in order.
    pub headers: Arc<Mutex<Vec<Vec<String>>>>,
    /// The body of every chat request, in order.
    pub bodies: Arc<Mutex<Vec<Value>>>,
    /// The `x-api-key` of every Messages request, in order.
    pub api_keys: Arc<Mutex<Vec<Option<String>>>>,
    /// The query string of every Responses request, in order.
    pub queries: Arc<Mutex<Vec<String>>>,
    /// What the `hold` model's streams wait for after their first chunk.
    pub release: Arc<tokio::sync::watch::Sender<bool>>,
}

pub struct ModelServer {
    pub addr: SocketAddr,
    pub seen: Seen,
}

impl ModelServer {
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn last_authorization(&self) -> Option<String> {
        self.seen.authorization.lock().unwrap().last().cloned().flatten()
    }
}

/// How an answer of `model` ends: `tool_calls` with calls, `length` for a
/// model whose name ends in `-length` (cut by its token limit), else `stop`.
fn finish_of(model: &str, calls: &Option<Value>) -> &'static str {
    match (calls.is_some(), model.ends_with("-length")) {
        (true, _) => "tool_calls",
        (false, true) => "length",
        (false, false) => "stop",
    }
}

fn completion(model: &str, content: Option<&str>, calls: Option<Value>) -> Value {
    let finish = finish_of(model, &calls);
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": calls}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
}

/// A chunk of the stream; a model named `…-usage` puts its usage in the
/// finish chunk, as vLLM does with continuous usage stats.
fn chunk(model: &str, delta: Value, finish: Option<&str>) -> String {
    let mut chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    if finish.is_some() && model.ends_with("-usage") {
        chunk["usage"] = json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18});
    }
    format!("data: {chunk}\n\n")
}

/// The events of a streamed answer: the role, the text in pieces of 7
/// characters (or each call's name, then its arguments in pieces), the
/// finish, `[DONE]`.
fn events(model: &str, content: Option<&str>, calls: Option<Value>) -> Vec<String> {
    let mut events = vec![chunk(model, json!({"role": "assistant", "content": ""}), None)];
    if let Some(content) = content {
        let chars: Vec<char> = content.chars().collect();
        // `…-one`: the text in one delta, else in pieces of 7 characters.
        let size = if model.ends_with("-one") { chars.len().max(1) } else { 7 };
        for piece in chars.chunks(size) {
            events.push(chunk(model, json!({"content": piece.iter().collect::<String>()}), None));
        }
    }
    let finish = match &calls {
        Some(calls) => {
            for (i, call) in calls.as_array().unwrap().iter().enumerate() {
                let index = match model {
                    m if m.ends_with("-same-index") => Some(0),
                    m if m.ends_with("-no-index") => None,
                    _ => Some(i),
                };
                let at = |mut delta: Value| {
                    if let Some(index) = index {
                        delta["index"] = json!(index);
                    }
                    json!({"tool_calls": [delta]})
                };
                let head = at(
                    json!({"id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}),
                );
                events.push(chunk(model, head, None));
                let arguments: Vec<char> = call["function"]["arguments"].as_str().unwrap().chars().collect();
                for piece in arguments.chunks(5) {
                    let delta = at(json!({"function": {"arguments": piece.iter().collect::<String>()}}));
                    events.push(chunk(model, delta, None));
                }
            }
            "tool_calls"
        }
        None => finish_of(model, &None),
    };
    events.push(chunk(model, json!({}), Some(finish)));
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// `n` choices of the same answer: a whole completion's choices, or a
/// stream's events of each choice interleaved, each with its `index`.
fn choices(model: &str, content: Option<&str>, calls: Option<Value>, stream: bool, n: u64) -> Response {
    if !stream {
        let mut body = completion(model, content, calls);
        let one = body["choices"][0].clone();
        let each = |i: u64| {
            let mut choice = one.clone();
            choice["index"] = json!(i);
            choice
        };
        body["choices"] = (0..n).map(each).collect();
        return ([("content-type", "application/json")], body.to_string()).into_response();
    }
    let one = events(model, content, calls);
    let (done, one) = one.split_last().unwrap();
    let mut all = Vec::new();
    for event in one {
        for i in 0..n {
            let mut chunk: Value = serde_json::from_str(event.strip_prefix("data: ").unwrap().trim()).unwrap();
            chunk["choices"][0]["index"] = json!(i);
            all.push(Ok::<_, std::io::Error>(Bytes::from(format!("data: {chunk}\n\n"))));
        }
    }
    all.push(Ok(Bytes::from(done.clone())));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures::stream::iter(all)))
        .unwrap()
}

/// The answer of `model` writing `content` and `calls`, whole or streamed;
/// a model named `…-cr` or `…-crlf` ends its stream's lines so.
fn answer(model: &str, content: Option<&str>, calls: Option<Value>, stream: bool) -> Response {
    if !stream {
        let mut body = completion(model, content, calls).to_string();
        if model == "drift-exact" {
            // A number past 64 bits, an escaped letter, spaces after colons.
            body = body.replace("\"created\":1,", "\"created\": 17330000000000000000001, ");
            body = body.replace("\"object\":", "\"system_fingerprint\": \"fp_caf\\u00e9\", \"object\":");
        }
        return ([("content-type", "application/json")], body).into_response();
    }
    let ends = [("-crlf", "\r\n"), ("-cr", "\r")].into_iter().find(|(suffix, _)| model.ends_with(suffix));
    let ends = ends.map_or("\n", |(_, ends)| ends);
    let events = events(model, content, calls)
        .into_iter()
        .map(move |e| Ok::<_, std::io::Error>(Bytes::from(e.replace('\n', ends))));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures::stream::iter(events)))
        .unwrap()
}

/// Starts the server; it serves until the test's runtime ends.
pub async fn start() -> ModelServer {
    let seen = Seen::default();
    let chat = post(|State(seen): State<Seen>, headers: HeaderMap, body: Bytes| async move {
        let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
        seen.authorization.lock().unwrap().push(authorization);
        seen.headers.lock().unwrap().push(headers.keys().map(|name| name.as_str().to_owned()).collect());
        let asked: Value = serde_json::from_slice(&body).unwrap();
        seen.bodies.lock().unwrap().push(asked.clone());
        let model = asked["model"].as_str().unwrap_or_default().to_owned();
        if model.starts_with("retry-") {
            let messages = asked["messages"].as_array().cloned().unwrap_or_default();
            if let Some(unanswered) = unanswered_chat(&messages) {
                let message = format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to \
                     each 'tool_call_id'. The following tool_call_ids did not have response messages: {unanswered}"
                );
                let error = json!({"error": {"message": message, "type": "invalid_request_error"}});
                return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
            }
            let at = messages.iter().rposition(|m| m["role"] != "tool").map_or(0, |at| at + 1);
            let outputs: Vec<String> = messages[at..].iter().map(|m| text_of(&m["content"])).collect();
            let (content, calls) = retry_script(&model, &outputs);
            return answer(&model, content, calls, asked["stream"].as_bool().unwrap_or(false));
        }
        if model == "broken" {
            return (StatusCode::INTERNAL_SERVER_ERROR, "{\"error\": {\"message\": \"the model crashed\"}}")
                .into_response();
        }
        if model == "huge" {
            // Longer than the door reads to repair.
            let content = "a".repeat(17 * 1024 * 1024);
            let body = completion(&model, Some(&content), None).to_string();
            return ([("content-type", "application/json")], body).into_response();
        }
        // `hold`: a stream's first chunk, then nothing until released.
        if model == "hold" {
            let mut release = seen.release.subscribe();
            let first = chunk(&model, json!({"role": "assistant", "content": ""}), None);
            let rest = [chunk(&model, json!({"content": "Done."}), None), chunk(&model, json!({}), Some("stop"))];
            let rest = rest.concat() + "data: [DONE]\n\n";
            let events = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(first))]).chain(
                futures::stream::once(async move {
                    let _ = release.wait_for(|released| *released).await;
                    Ok(Bytes::from(rest))
                }),
            );
            return Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(events))
                .unwrap();
        }
        // `say-hold`: the user's last message in the pieces its `|` marks,
        // each a delta; the last waits until released.
        // `say-call-hold`: a call's name, a newline, its arguments' text in
        // the pieces `|` marks, as one structured call's deltas.
        if model == "say-hold" || model == "say-call-hold" {
            let said = asked["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str());
            let said = said.unwrap_or_default();
            let (name, said) = match model.as_str() {
                "say-call-hold" => said.split_once('\n').unwrap_or_default(),
                _ => ("", said),
            };
            let delta = |i: usize, piece: &str| match name {
                "" => json!({"content": piece}),
                _ if i == 0 => json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": piece}}]}),
                _ => json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            };
            let pieces: Vec<&str> = said.split('|').collect();
            let finish = if name.is_empty() { "stop" } else { "tool_calls" };
            let mut sent = vec![chunk(&model, json!({"role": "assistant", "content": ""}), None)];
            sent.extend(
                pieces[..pieces.len() - 1].iter().enumerate().map(|(i, piece)| chunk(&model, delta(i, piece), None)),
            );
            let last = delta(pieces.len() - 1, pieces[pieces.len() - 1]);
            let rest = chunk(&model, last, None) + &chunk(&model, json!({}), Some(finish));
            let rest = rest + "data: [DONE]\n\n";
            let mut release = seen.release.subscribe();
            let events = futures::stream::iter(sent.into_iter().map(|e| Ok::<_, std::io::Error>(Bytes::from(e))))
                .chain(futures::stream::once(async move {
                    let _ = release.wait_for(|released| *released).await;
                    Ok(Bytes::from(rest))
                }));
            return Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(events))
                .unwrap();
        }
        // A conversation that already holds a tool's result: the final answer.
        let answered = asked["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        // `say-call`: the user's last message is a call's name, a newline
        // and its arguments' text, sent as a structured call.
        if model == "say-call" {
            let said = asked["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str());
            let (name, arguments) = said.unwrap_or_default().split_once('\n').unwrap_or_default();
            let call =
                json!([{"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}]);
            let stream = asked["stream"].as_bool().unwrap_or(false);
            return answer(&model, None, Some(call), stream);
        }
        // `say`: the user's last message, as the model's text.
        if model == "say" || model == "say-length" || model == "say-one" {
            let said = asked["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str());
            let said = said.unwrap_or_default().to_owned();
            let stream = asked["stream"].as_bool().unwrap_or(false);
            return answer(&model, Some(&said), None, stream);
        }
        let (content, calls) = match answered {
            true => (Some("It is sunny."), None),
            false => script(["-usage", "-crlf", "-cr"].iter().fold(model.as_str(), |m, s| m.trim_end_matches(s))),
        };
        let stream = asked["stream"].as_bool().unwrap_or(false);
        if let Some(n) = asked["n"].as_u64().filter(|n| *n > 1) {
            return choices(&model, content, calls, stream, n);
        }
        if !stream || model != "cut" {
            return answer(&model, content, calls, stream);
        }
        let mut events: Vec<Result<Bytes, std::io::Error>> =
            events(&model, content, calls).into_iter().map(|e| Ok(Bytes::from(e))).collect();
        events.truncate(2);
        events.push(Err(std::io::Error::other("the model server went away")));
        let stream = futures::StreamExt::then(futures::stream::iter(events), |event| async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            event
        });
        Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
    });
    let models = get(|| async {
        let list = json!({"object": "list", "data": [{"id": "qwen3-coder", "object": "model", "owned_by": "test"}]});
        ([("content-type", "application/json")], list.to_string()).into_response()
    });
    let app = Router::new()
        .route("/v1/chat/completions", chat)
        .route("/v1/responses", post(responses))
        .route("/v1/responses/{id}", get(stored_response))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/models", models)
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models/{id}", get(model_of))
        .route("/v1/completions", post(completions))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    ModelServer { addr, seen }
}

/// `POST /v1/responses`: the same scripts as Responses output items (a
/// call as a `function_call` item, text as a `message`), whole; streamed
/// as the Responses API's events. A conversation that holds a call's
/// output gets the final answer.
async fn responses(State(seen): State<Seen>, headers: HeaderMap, uri: axum::http::Uri, body: Bytes) -> Response {
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    seen.authorization.lock().unwrap().push(authorization);
    seen.headers.lock().unwrap().push(headers.keys().map(|name| name.as_str().to_owned()).collect());
    seen.queries.lock().unwrap().push(uri.query().unwrap_or_default().to_owned());
    let asked: Value = serde_json::from_slice(&body).unwrap();
    let model = asked["model"].as_str().unwrap_or_default().to_owned();
    let answered = asked["input"].as_array().is_some_and(|items| {
        items.iter().any(|item| item["type"] == "function_call_output" || item["type"] == "custom_tool_call_output")
    });
    let items = asked["input"].as_array().cloned().unwrap_or_default();
    let (content, calls) = match (model.starts_with("retry-"), answered) {
        (true, _) => {
            let outputs: Vec<&Value> = items.iter().filter(|i| i["type"] == "function_call_output").collect();
            let missing = items
                .iter()
                .filter(|i| i["type"] == "function_call")
                .find(|call| !outputs.iter().any(|o| o["call_id"] == call["call_id"]));
            if let Some(call) = missing {
                let message =
                    format!("No tool output found for function call {}.", call["call_id"].as_str().unwrap_or_default());
                let error = json!({"error": {"message": message, "type": "invalid_request_error"}});
                return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
            }
            let at = items.iter().rposition(|i| i["type"] != "function_call_output").map_or(0, |at| at + 1);
            let last: Vec<String> = items[at..].iter().map(|i| text_of(&i["output"])).collect();
            retry_script(&model, &last)
        }
        (false, true) => (Some("It is sunny."), None),
        (false, false) => script(&model),
    };
    let mut output = Vec::new();
    if let Some(text) = content {
        output.push(json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}));
    }
    for (i, call) in calls.iter().flat_map(|c| c.as_array().cloned().unwrap_or_default()).enumerate() {
        output.push(json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": call["id"],
            "name": call["function"]["name"], "arguments": call["function"]["arguments"], "status": "completed"}));
    }
    let response = json!({
        "id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": model,
        "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "error": null,
        "incomplete_details": null, "instructions": null, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    });
    if !asked["stream"].as_bool().unwrap_or(false) {
        return ([("content-type", "application/json")], response.to_string()).into_response();
    }
    let events = response_events(&response);
    Response::builder().header("content-type", "text/event-stream").body(Body::from(events.concat())).unwrap()
}

/// A Responses answer as its stream's events: created, each item added,
/// its text or arguments in pieces of 7 characters, done, completed.
fn response_events(response: &Value) -> Vec<String> {
    let mut events = Vec::new();
    let mut push = |mut event: Value| {
        event["sequence_number"] = events.len().into();
        events.push(format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap()));
    };
    let mut created = response.clone();
    created["status"] = "in_progress".into();
    created["output"] = json!([]);
    push(json!({"type": "response.created", "response": created}));
    for (at, item) in response["output"].as_array().unwrap().iter().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("message") => {
                added["content"] = json!([]);
                added["status"] = "in_progress".into();
                push(json!({"type": "response.output_item.added", "output_index": at, "item": added}));
                let text = item["content"][0]["text"].as_str().unwrap();
                let part = json!({"type": "output_text", "text": "", "annotations": []});
                push(
                    json!({"type": "response.content_part.added", "item_id": id, "output_index": at, "content_index": 0, "part": part}),
                );
                let chars: Vec<char> = text.chars().collect();
                for piece in chars.chunks(7) {
                    let delta: String = piece.iter().collect();
                    push(
                        json!({"type": "response.output_text.delta", "item_id": id, "output_index": at, "content_index": 0, "delta": delta}),
                    );
                }
                push(
                    json!({"type": "response.output_text.done", "item_id": id, "output_index": at, "content_index": 0, "text": text}),
                );
                push(
                    json!({"type": "response.content_part.done", "item_id": id, "output_index": at, "content_index": 0, "part": item["content"][0]}),
                );
            }
            _ => {
                added["arguments"] = "".into();
                added["status"] = "in_progress".into();
                push(json!({"type": "response.output_item.added", "output_index": at, "item": added}));
                let arguments = item["arguments"].as_str().unwrap();
                let chars: Vec<char> = arguments.chars().collect();
                for piece in chars.chunks(7) {
                    let delta: String = piece.iter().collect();
                    push(
                        json!({"type": "response.function_call_arguments.delta", "item_id": id, "output_index": at, "delta": delta}),
                    );
                }
                push(
                    json!({"type": "response.function_call_arguments.done", "item_id": id, "output_index": at, "arguments": arguments}),
                );
            }
        }
        push(json!({"type": "response.output_item.done", "output_index": at, "item": item}));
    }
    push(json!({"type": "response.completed", "response": response}));
    events
}

/// `GET /v1/responses/{id}`: a stored response, saying the id and query
/// it was asked with.
async fn stored_response(axum::extract::Path(id): axum::extract::Path<String>, uri: axum::http::Uri) -> Response {
    let body = json!({"id": id, "object": "response", "status": "completed", "asked": uri.query().unwrap_or_default()});
    ([("content-type", "application/json")], body.to_string()).into_response()
}

/// `POST /v1/messages`: the same scripts in the Messages API's shapes (a
/// call as a `tool_use` block, whose `input` is always an object: the
/// drift is in its name; text as a `text` block), whole or streamed as its
/// events. A conversation that holds a tool's result gets the final
/// answer. The key it was sent in `x-api-key` is remembered.
async fn messages(State(seen): State<Seen>, headers: HeaderMap, body: Bytes) -> Response {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    seen.api_keys.lock().unwrap().push(key);
    let asked: Value = serde_json::from_slice(&body).unwrap();
    let model = asked["model"].as_str().unwrap_or_default().to_owned();
    let answered = asked["messages"].as_array().is_some_and(|messages| {
        messages.iter().any(|m| m["content"].as_array().is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result")))
    });
    let conversation = asked["messages"].as_array().cloned().unwrap_or_default();
    let (content, calls) = match (model.starts_with("retry-"), answered) {
        (true, _) => {
            // Every tool_use answered by a tool_result in the next message.
            for (at, message) in conversation.iter().enumerate().filter(|(_, m)| m["role"] == "assistant") {
                let uses = message["content"].as_array().cloned().unwrap_or_default();
                let next = conversation.get(at + 1).and_then(|m| m["content"].as_array().cloned()).unwrap_or_default();
                let missing = uses
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .find(|b| !next.iter().any(|r| r["type"] == "tool_result" && r["tool_use_id"] == b["id"]));
                if missing.is_some() {
                    let message = "messages: `tool_use` ids were found without `tool_result` blocks immediately after";
                    let error =
                        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
                    return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
                }
            }
            let last = conversation.last().and_then(|m| m["content"].as_array().cloned()).unwrap_or_default();
            let results: Vec<String> =
                last.iter().filter(|b| b["type"] == "tool_result").map(|b| text_of(&b["content"])).collect();
            retry_script(&model, &results)
        }
        (false, true) => (Some("It is sunny."), None),
        (false, false) => script(&model),
    };
    let mut blocks = Vec::new();
    if let Some(text) = content {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in calls.iter().flat_map(|c| c.as_array().cloned().unwrap_or_default()) {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        let input = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!({"city": "Paris"}));
        let id = call["id"].as_str().unwrap_or("call_1").replace("call_", "toolu_");
        blocks.push(json!({"type": "tool_use", "id": id, "name": call["function"]["name"], "input": input}));
    }
    let stop = if calls.is_some() { "tool_use" } else { "end_turn" };
    let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": blocks,
        "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}});
    if !asked["stream"].as_bool().unwrap_or(false) {
        return ([("content-type", "application/json")], message.to_string()).into_response();
    }
    let mut events = Vec::new();
    let mut push = |event: Value| events.push(format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap()));
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    push(json!({"type": "message_start", "message": start}));
    for (index, block) in message["content"].as_array().unwrap().iter().enumerate() {
        let (opened, text, delta) = match block["type"].as_str() {
            Some("text") => {
                (json!({"type": "text", "text": ""}), block["text"].as_str().unwrap().to_owned(), "text_delta")
            }
            _ => {
                let mut opened = block.clone();
                opened["input"] = json!({});
                (opened, block["input"].to_string(), "input_json_delta")
            }
        };
        push(json!({"type": "content_block_start", "index": index, "content_block": opened}));
        push(json!({"type": "ping"}));
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(7) {
            let piece: String = piece.iter().collect();
            let delta = match delta {
                "text_delta" => json!({"type": "text_delta", "text": piece}),
                _ => json!({"type": "input_json_delta", "partial_json": piece}),
            };
            push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        push(json!({"type": "content_block_stop", "index": index}));
    }
    push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
    );
    push(json!({"type": "message_stop"}));
    Response::builder().header("content-type", "text/event-stream").body(Body::from(events.concat())).unwrap()
}

/// `POST /v1/embeddings`: one vector an input, `[0.5, 0.25, 1.0]`, as
/// floats or (`encoding_format: base64`, the openai SDK's default) as the
/// base64 of its little-endian f32s; its `model` says what it was asked,
/// and the caller's `authorization` is remembered.
async fn embeddings(State(seen): State<Seen>, headers: HeaderMap, body: Bytes) -> Response {
    use base64::Engine;
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    seen.authorization.lock().unwrap().push(authorization);
    let asked: Value = serde_json::from_slice(&body).unwrap();
    let inputs = match &asked["input"] {
        Value::Array(items) => items.len(),
        _ => 1,
    };
    let vector = [0.5f32, 0.25, 1.0];
    let embedding = match asked["encoding_format"].as_str() {
        Some("base64") => {
            let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
            json!(base64::engine::general_purpose::STANDARD.encode(bytes))
        }
        _ => json!(vector),
    };
    let data: Vec<Value> =
        (0..inputs).map(|index| json!({"object": "embedding", "index": index, "embedding": embedding})).collect();
    let body = json!({"object": "list", "data": data, "model": asked["model"],
        "usage": {"prompt_tokens": 2, "total_tokens": 2}});
    ([("content-type", "application/json")], body.to_string()).into_response()
}

/// `GET /v1/models/{id}`: that model.
async fn model_of(axum::extract::Path(id): axum::extract::Path<String>) -> Response {
    let body = json!({"id": id, "object": "model", "owned_by": "test"});
    ([("content-type", "application/json")], body.to_string()).into_response()
}

/// `POST /v1/completions` (the legacy API), streamed: three pieces of
/// text, each its own event, the last after the server is released.
async fn completions(State(seen): State<Seen>) -> Response {
    let event = |text: &str| {
        let chunk = json!({"id": "cmpl", "object": "text_completion", "choices": [{"index": 0, "text": text}]});
        Ok::<_, std::io::Error>(Bytes::from(format!("data: {chunk}\n\n")))
    };
    let mut release = seen.release.subscribe();
    let first = futures::stream::iter([event("def"), event(" add")]);
    let rest = futures::stream::once(async move {
        let _ = release.wait_for(|released| *released).await;
        Ok(Bytes::from(format!("{}data: [DONE]\n\n", String::from_utf8_lossy(&event("(a, b)").unwrap()))))
    });
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(first.chain(rest))).unwrap()
}

/// `POST /v1/messages/count_tokens`: a count, saying the query it was
/// asked with.
async fn count_tokens(uri: axum::http::Uri) -> Response {
    let body = json!({"input_tokens": 7, "asked": uri.query().unwrap_or_default()});
    ([("content-type", "application/json")], body.to_string()).into_response()
}
