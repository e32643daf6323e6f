//! Streaming as users feel it (docs/model-door.md, "Streaming"): through
//! the real binary, a scripted model server sends an answer's first
//! deltas and then waits; what the door must not hold reaches the client
//! while the model still waits, and what may be a call is held and lifted.

use futures::StreamExt;
use serde_json::{json, Value};

use crate::{
    common::{model_server, CatalogDir},
    model_door::{chat, serve},
};

/// A streamed request whose user message the `say-hold` model says in the
/// pieces `|` marks, with the tools a coding agent declares.
fn request(said: &str) -> String {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    let tools = [
        ("get_weather", object(json!({"city": {"type": "string"}}), &["city"])),
        ("grep", object(json!({"pattern": {"type": "string"}, "path": {"type": "string"}}), &["pattern"])),
        ("task", object(json!({"description": {"type": "string"}}), &["description"])),
    ];
    let tools: Vec<Value> = tools
        .into_iter()
        .map(|(name, parameters)| json!({"type": "function", "function": {"name": name, "parameters": parameters}}))
        .collect();
    json!({"model": "say-hold", "stream": true, "messages": [{"role": "user", "content": said}], "tools": tools})
        .to_string()
}

/// The text and the calls' names of the events in `body` so far.
fn read(body: &str) -> (String, Vec<String>) {
    let (mut text, mut calls) = (String::new(), Vec::new());
    for line in body.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let Ok(chunk) = serde_json::from_str::<Value>(line) else { continue };
        let delta = &chunk["choices"][0]["delta"];
        text.push_str(delta["content"].as_str().unwrap_or_default());
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            calls.extend(call["function"]["name"].as_str().map(str::to_owned));
        }
    }
    (text, calls)
}

/// Every case: what the model says, in pieces; all but the last reach the
/// client while the model waits (unless they may be a call: then
/// nothing), and the whole answer is the same text, or the calls lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn words_fences_and_tool_words_stream_from_their_first_delta() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    for (said, calls) in [
        // A plain answer: its first delta.
        ("Hello|, world.", vec![]),
        ("The| weather is fine.", vec![]),
        // A fence, released once its first line is not a call.
        ("```python\n|import os\n|print(os.getcwd())\n```", vec![]),
        ("```bash\n|grep -rn |TODO src/\n```", vec![]),
        // A word that names a tool, then words.
        ("grep| -rn| TODO| is what I would run.", vec![]),
        ("task| is done|.", vec![]),
        // After a thought.
        ("<think>|The user says hi.|</think>|\n\n|Hi|!", vec![]),
        // What may still be a call is held, then lifted.
        ("get_weather|(city=|\"Oslo\"|)", vec!["get_weather"]),
        ("```json\n|{\"name\": \"grep\", |\"arguments\": {\"pattern\": \"x\"}}|\n```", vec!["grep"]),
        ("grep|: {\"pattern\": |\"TODO\"|}", vec!["grep"]),
    ] {
        let before = match calls.is_empty() {
            true => said[..said.rfind('|').unwrap()].replace('|', ""),
            false => String::new(),
        };
        upstream.seen.release.send_replace(false);
        let answer = chat(&url, request(said)).await;
        assert_eq!(answer.status(), 200, "{said:?}");
        let mut body = answer.bytes_stream();
        let mut got = String::new();
        // What is not held arrives while the model waits (a door that held
        // it would never send it: the wait fails).
        let first = async {
            while read(&got).0 != before {
                let piece = body.next().await.unwrap_or_else(|| panic!("{said:?}: the stream ended at {got:?}"));
                got.push_str(&String::from_utf8_lossy(&piece.unwrap()));
                assert!(before.starts_with(&read(&got).0), "{said:?}: {got:?}");
            }
        };
        if tokio::time::timeout(std::time::Duration::from_secs(20), first).await.is_err() {
            panic!("{said:?}: held while the model waits; sent only {got:?}");
        }
        upstream.seen.release.send_replace(true);
        while let Some(piece) = body.next().await {
            got.push_str(&String::from_utf8_lossy(&piece.unwrap()));
        }
        let (text, names) = read(&got);
        match calls.is_empty() {
            true => assert_eq!(text, said.replace('|', ""), "{said:?}: {got}"),
            false => assert_eq!(text, "", "{said:?}: {got}"),
        }
        assert_eq!(names, calls, "{said:?}: {got}");
    }
}

/// With `model_door.stream_calls: pass_well_formed`, a call of a declared
/// tool whose arguments begin well-formed streams as it comes (its first
/// pieces reach the client while the model waits); a drifted name or
/// arguments that begin malformed are held and repaired at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn well_formed_calls_stream_as_they_come_when_configured() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let keys = "  stream_calls: pass_well_formed\n";
    let (_gateway, url, _log) = crate::model_door::serve_with(&dir, &upstream.base_url(), keys, "", &[]);
    for (said, before, arguments) in [
        ("grep\n{\"pattern\": |\"TO|DO\"}", "{\"pattern\": \"TO", "{\"pattern\": \"TODO\"}"),
        // Held: a name that is no declared tool's exactly, arguments that
        // begin malformed; both repaired when the call ends.
        ("Grep\n{\"pattern\": |\"TO|DO\"}", "", "{\"pattern\": \"TODO\"}"),
        ("grep\n{'pattern': |'TO|DO'}", "", "{\"pattern\":\"TODO\"}"),
    ] {
        upstream.seen.release.send_replace(false);
        let mut body = request(said);
        body = body.replace("say-hold", "say-call-hold");
        let answer = chat(&url, body).await;
        let mut body = answer.bytes_stream();
        let mut got = String::new();
        let first = async {
            while arguments_of(&got) != before {
                let piece =
                    body.next().await.unwrap_or_else(|| panic!("{said:?}: the stream ended at {got:?}")).unwrap();
                got.push_str(&String::from_utf8_lossy(&piece));
            }
        };
        if tokio::time::timeout(std::time::Duration::from_secs(20), first).await.is_err() {
            panic!("{said:?}: held while the model waits; sent only {got:?}");
        }
        upstream.seen.release.send_replace(true);
        while let Some(piece) = body.next().await {
            got.push_str(&String::from_utf8_lossy(&piece.unwrap()));
        }
        assert_eq!(read(&got).1, ["grep"], "{said:?}: {got}");
        assert_eq!(arguments_of(&got), arguments, "{said:?}: {got}");
        assert!(got.contains("\"finish_reason\":\"tool_calls\""), "{said:?}: {got}");
    }
}

/// The arguments of the first call in the events of `body`, as streamed.
fn arguments_of(body: &str) -> String {
    let mut arguments = String::new();
    for line in body.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let Ok(chunk) = serde_json::from_str::<Value>(line) else { continue };
        for call in chunk["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
            arguments.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
    }
    arguments
}
