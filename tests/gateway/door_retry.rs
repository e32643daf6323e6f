//! The door's second chance (docs/model-door.md, "Second chance"): through
//! the real binary, a scripted model server that calls a tool nobody
//! declared until the conversation tells it what went wrong.

use serde_json::{json, Value};

use crate::{
    common::{model_server, CatalogDir},
    model_door::{http, serve_with},
};

fn request(model: &str) -> Value {
    let parameters = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    json!({"model": model, "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_be_made_is_asked_again_within_the_budget() {
    let (collector, received) = crate::common::otlp::receiver(std::time::Duration::ZERO).await;
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let endpoint = format!("http://{collector}");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let (gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "  retry: 1\n", "", &env);
    let client = http();
    let ask = |model: &str, header: Option<&str>| {
        let mut sent = client.post(format!("{url}/chat/completions")).json(&request(model));
        if let Some(n) = header {
            sent = sent.header("x-toolgate-retry", n);
        }
        sent.send()
    };

    // Corrected on the second try: the framework sees only the call meant.
    let answer = ask("retry-call", None).await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "1");
    let said: Value = answer.json().await.unwrap();
    let call = &said["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!((&call["name"], &call["arguments"]), (&json!("get_weather"), &json!("{\"city\": \"Paris\"}")), "{said}");
    assert_eq!(said["usage"]["total_tokens"], 30, "the tries' usage summed: {said}");
    // The model was told, in the call's own turn, what Execute says.
    let asked_again = upstream.seen.bodies.lock().unwrap().last().cloned().unwrap();
    let messages = asked_again["messages"].as_array().unwrap();
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["tool_calls"][0]["function"]["name"], "lookup_forecast");
    assert_eq!((&messages[2]["role"], &messages[2]["tool_call_id"]), (&json!("tool"), &json!("call_1")));
    let told = messages[2]["content"].as_str().unwrap();
    assert!(told.contains("lookup_forecast") && told.contains("get_weather"), "{told}");
    assert_eq!(asked_again["stream"], false);

    // Exhausted: the header asks for two, three requests are made, and
    // the last answer passes as it came.
    let before = upstream.seen.bodies.lock().unwrap().len();
    let answer = ask("retry-never", Some("2")).await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "2");
    let said: Value = answer.json().await.unwrap();
    assert_eq!(said["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "lookup_forecast");
    assert_eq!(upstream.seen.bodies.lock().unwrap().len() - before, 3);

    // Prose is never asked again; a header that is no number is 400.
    let before = upstream.seen.bodies.lock().unwrap().len();
    let answer = ask("prose", Some("2")).await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "0");
    assert_eq!(upstream.seen.bodies.lock().unwrap().len() - before, 1);
    assert_eq!(ask("drift", Some("many")).await.unwrap().status(), 400);

    // Each try is an event of the generation's span, and the tries count
    // in toolgate.model_door.retries by outcome (flushed on the way out).
    assert!(std::process::Command::new("kill").args(["-TERM", &gateway.id().to_string()]).status().unwrap().success());
    tokio::task::spawn_blocking(move || gateway.wait().unwrap()).await.unwrap();
    let events = received.span_events();
    let tries = events.iter().filter(|(_, event, _)| event == "toolgate.retry").count();
    assert_eq!(tries, 3, "one try corrected, two exhausted: {events:?}");
    assert!(received.metric_names().contains(&"toolgate.model_door.retries".to_owned()));
}
