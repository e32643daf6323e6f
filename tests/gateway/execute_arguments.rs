//! Execute, arguments: repairs of common slips, the exact messages of bad
//! JSON, wrong names and wrong values, limits, and dry runs. An invalid call
//! never reaches its backend.

use toolgate::proto::v1::{ErrorKind, ExecuteRequest, ExpectedParameters, RepairKind, Violation};

use crate::common::{
    backend::{self, HttpBackend},
    error, execute, kind, TestGateway,
};

fn registry(http: &HttpBackend) -> String {
    format!(
        r#"
tools:
  - name: web_search
    description: Search the web.
    parameters:
      type: object
      properties:
        query: {{type: string, minLength: 1}}
        limit: {{type: integer, minimum: 1, maximum: 20}}
        lang: {{type: string, enum: [en, fr, de]}}
      required: [query]
      additionalProperties: false
    backend: {{http: {{url: "{echo}"}}}}
  - name: reschedule_delivery
    description: Move a delivery.
    parameters:
      type: object
      properties:
        code: {{type: string, pattern: "^PK-"}}
        day: {{type: integer, minimum: 1, maximum: 7}}
        note: {{type: string, maxLength: 10}}
        email: {{type: string, format: email}}
        items:
          type: array
          items: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
      required: [code, day]
      additionalProperties: false
    backend: {{http: {{url: "{echo}"}}}}
  - name: open_tool
    description: Takes anything.
    parameters:
      type: object
      properties: {{max_results: {{type: integer}}}}
    backend: {{http: {{url: "{echo}"}}}}
"#,
        echo = http.url("/echo")
    )
}

async fn gateway(http: &HttpBackend) -> TestGateway {
    TestGateway::registry(&registry(http)).start().await
}

fn violations(pairs: &[(&str, &str)]) -> Vec<Violation> {
    pairs.iter().map(|(f, d)| Violation { field: f.to_string(), description: d.to_string() }).collect()
}

#[tokio::test]
async fn missing_and_unexpected_arguments_get_the_parameter_hint() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let response = execute(&mut gw.client, "web_search", r#"{"q": "rust"}"#).await;
    let err = error(&response);
    assert_eq!(
        err.message,
        "missing a required argument: 'query'; unexpected argument: 'q'. \
         Expected parameters for 'web_search' — required: ['query'], optional: ['limit', 'lang']."
    );
    assert_eq!(
        err.expected_parameters,
        Some(ExpectedParameters { required: vec!["query".into()], optional: vec!["limit".into(), "lang".into()] })
    );
    assert_eq!(
        err.violations,
        violations(&[("/query", "missing a required argument: 'query'"), ("/q", "unexpected argument: 'q'")])
    );
    assert!(err.retryable);
    assert_eq!(response.tool, "web_search");
    // A misspelt key names the parameter it is near, among those not given;
    // one far from every parameter names none.
    let response = execute(&mut gw.client, "web_search", r#"{"qeury": "rust", "lan": "en", "limit": 3}"#).await;
    let err = error(&response);
    assert!(
        err.message.starts_with(
            "missing a required argument: 'query'; unexpected argument: 'qeury', did you mean 'query'?; \
             unexpected argument: 'lan', did you mean 'lang'? Expected"
        ),
        "{}",
        err.message
    );
    let response = execute(&mut gw.client, "web_search", r#"{"query": "rust", "limt": 3, "zzz": 1}"#).await;
    assert!(error(&response)
        .message
        .starts_with("unexpected argument: 'limt', did you mean 'limit'?; unexpected argument: 'zzz'. Expected"));
    assert_eq!(http.seen.calls(), 0, "an invalid call never reaches the backend");
}

#[tokio::test]
async fn wrong_values_are_each_named_without_a_hint() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let args = r#"{"code": 1001, "day": 9, "note": "ring twice, then wait", "email": "nope", "items": [{"name": "a"}, {"nam": "b"}]}"#;
    let response = execute(&mut gw.client, "reschedule_delivery", args).await;
    let err = error(&response);
    assert_eq!(
        err.message,
        "'code' must be a string, got integer; 'day' must be between 1 and 7, got 9; \
         'note' must be at most 10 characters long, got 21; 'email' must be a valid email, got 'nope'; \
         missing a required field: 'items/1/name'"
    );
    assert!(err.expected_parameters.is_none());
    assert_eq!(err.violations.len(), 5);
    assert_eq!(err.violations[4].field, "/items/1/name");
    let response =
        execute(&mut gw.client, "reschedule_delivery", r#"{"code": "PK-1", "day": 1, "items": [{"name": 7}]}"#).await;
    let err = error(&response);
    assert_eq!(err.message, "'items/0/name' must be a string, got integer");
    assert_eq!(err.violations[0].field, "/items/0/name");
    let response = execute(&mut gw.client, "reschedule_delivery", r#"{"code": "XX-1", "day": true}"#).await;
    assert_eq!(
        error_of(&response),
        "'code' must match the pattern '^PK-', got 'XX-1'; 'day' must be an integer, got boolean"
    );
    let response = execute(&mut gw.client, "web_search", r#"{"query": "", "lang": "es", "limit": 2.5}"#).await;
    assert_eq!(
        error_of(&response),
        "'query' must be at least 1 characters long, got 0; 'lang' must be one of ['en', 'fr', 'de'], got 'es'; \
         'limit' must be an integer, got number"
    );
    assert_eq!(http.seen.calls(), 0);
}

fn error_of(response: &toolgate::proto::v1::ExecuteResponse) -> String {
    error(response).message.clone()
}

#[tokio::test]
async fn name_problems_come_first_then_values_then_the_hint() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let response = execute(&mut gw.client, "reschedule_delivery", r#"{"day": 0, "driver": "bob"}"#).await;
    assert_eq!(
        error_of(&response),
        "missing a required argument: 'code'; unexpected argument: 'driver'; 'day' must be between 1 and 7, got 0. \
         Expected parameters for 'reschedule_delivery' — required: ['code', 'day'], optional: ['note', 'email', 'items']."
    );
}

#[tokio::test]
async fn json_slips_and_argument_names_are_repaired_and_recorded() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let emitted = "```json\n{'Query': 'rust', 'Limit': 5, 'lang': None,}\n```";
    // lang: None → null for an optional parameter that does not allow it:
    // left out, and recorded.
    let response = execute(&mut gw.client, "web_search", emitted).await;
    assert!(response.ok, "{response:?}");
    assert_eq!(response.arguments_json, r#"{"query":"rust","limit":5}"#);
    let last = response.repairs.last().unwrap();
    assert_eq!((last.kind, last.original.as_str()), (RepairKind::ArgumentValue as i32, "lang: null"));
    // A required parameter sent as null is the model's to fix.
    let response = execute(&mut gw.client, "web_search", r#"{"query": null}"#).await;
    assert!(error_of(&response).contains("'query'"), "{}", error_of(&response));
    let emitted = "```json\n{'Query': 'rust', 'Limit': 5,}\n```";
    let response = execute(&mut gw.client, "web_search", emitted).await;
    assert!(response.ok, "{response:?}");
    let kinds: Vec<(i32, &str, &str)> =
        response.repairs.iter().map(|r| (r.kind, r.original.as_str(), r.repaired.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (RepairKind::ArgumentsJson as i32, emitted, r#"{"Query": "rust", "Limit": 5}"#),
            (RepairKind::ArgumentName as i32, "Query", "query"),
            (RepairKind::ArgumentName as i32, "Limit", "limit"),
        ]
    );
    assert_eq!(response.arguments_json, r#"{"query":"rust","limit":5}"#);
    assert_eq!(http.seen.last_body().unwrap(), r#"{"query":"rust","limit":5}"#, "the backend gets the repaired call");
    // Argument names are repaired even where extra arguments are allowed.
    let response = execute(&mut gw.client, "open_tool", r#"{"MaxResults": 3, "other": true}"#).await;
    assert!(response.ok);
    assert_eq!(response.arguments_json, r#"{"max_results":3,"other":true}"#);
}

#[tokio::test]
async fn valid_arguments_reach_the_backend_exactly_as_emitted() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let emitted = "{ \"query\" : \"rust\",\n  \"limit\": 20 }";
    let response = execute(&mut gw.client, "web_search", emitted).await;
    assert!(response.ok && response.repairs.is_empty());
    assert_eq!(response.arguments_json, emitted);
    assert_eq!(http.seen.last_body().unwrap(), emitted);
    assert_eq!(response.result_json, emitted, "the result is passed through unchanged");
}

#[tokio::test]
async fn strict_repairs_nothing_and_says_where_json_broke() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let strict = |tool: &str, args: &str| ExecuteRequest {
        tool: tool.into(),
        arguments_json: args.into(),
        strict: Some(true),
        ..Default::default()
    };
    let response = gw.client.execute(strict("web_search", r#"{"query": "x",}"#)).await.unwrap().into_inner();
    assert_eq!(error_of(&response), "arguments are not valid JSON: trailing comma at line 1 column 15");
    let response = gw.client.execute(strict("web_search", r#"{"Query": "x"}"#)).await.unwrap().into_inner();
    assert!(error_of(&response)
        .starts_with("missing a required argument: 'query'; unexpected argument: 'Query', did you mean 'query'? "));
    assert!(response.repairs.is_empty());
    let response = execute(&mut gw.client, "web_search", r#"{"query": "x" "limit": 5}"#).await;
    assert_eq!(error_of(&response), "arguments are not valid JSON: expected ',' or '}' at line 1 column 15");
    assert_eq!(http.seen.calls(), 0);
}

#[tokio::test]
async fn bad_argument_shapes_are_clear_in_band_errors() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let cases = [
        ("[1, 2]", "arguments must be a JSON object, got an array".to_owned()),
        ("\"query\"", "arguments must be a JSON object, got a string".to_owned()),
        (r#"{"query": NaN}"#, "arguments are not valid JSON: expected value at line 1 column 11".to_owned()),
        (&"[".repeat(200_000), "arguments are nested deeper than 64 levels".to_owned()),
    ];
    for (args, expected) in cases {
        let response = execute(&mut gw.client, "web_search", args).await;
        assert_eq!(kind(&response), ErrorKind::InvalidArguments);
        assert_eq!(error_of(&response), expected);
    }
    let big = format!(r#"{{"query": "{}"}}"#, "x".repeat(3 * 1024 * 1024));
    let response = execute(&mut gw.client, "web_search", &big).await;
    assert_eq!(error_of(&response), format!("arguments are {} bytes long; the limit is 1 MiB", big.len()));
    // An empty arguments string means {}.
    let response = execute(&mut gw.client, "open_tool", "").await;
    assert!(response.ok);
    assert_eq!(response.arguments_json, "{}");
    assert_eq!(http.seen.calls(), 1, "only the valid call ran");
}

#[tokio::test]
async fn a_dry_run_validates_and_runs_nothing() {
    let http = backend::start().await;
    let mut gw = gateway(&http).await;
    let request = ExecuteRequest {
        tool: "WebSearch".into(),
        arguments_json: r#"{"query": "rust",}"#.into(),
        dry_run: true,
        ..Default::default()
    };
    let response = gw.client.execute(request.clone()).await.unwrap().into_inner();
    assert!(response.ok);
    assert_eq!(response.tool, "web_search");
    assert_eq!(response.arguments_json, r#"{"query":"rust"}"#);
    assert!(response.result_json.is_empty());
    assert_eq!(response.repairs.len(), 2);
    let invalid = ExecuteRequest { arguments_json: "{}".into(), ..request };
    let response = gw.client.execute(invalid).await.unwrap().into_inner();
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    assert_eq!(http.seen.calls(), 0);
}

#[tokio::test]
async fn values_spelt_as_another_type_are_coerced_when_one_reading_exists() {
    let registry = r#"
tools:
  - name: book_room
    description: Book a room.
    parameters:
      type: object
      properties:
        nights: {type: integer, minimum: 1}
        breakfast: {type: boolean}
        guests: {type: array, items: {type: string}}
        size: {type: string, enum: [Single, Double]}
      required: [nights]
      additionalProperties: false
    backend: {builtin: echo}
"#;
    let mut gw = TestGateway::registry(registry).start().await;
    let response = execute(
        &mut gw.client,
        "book_room",
        r#"{"nights": "3", "breakfast": "True", "guests": "ann", "size": "double"}"#,
    )
    .await;
    assert!(response.ok, "{response:?}");
    assert_eq!(response.arguments_json, r#"{"nights":3,"breakfast":true,"guests":["ann"],"size":"Double"}"#);
    let kinds: Vec<i32> = response.repairs.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![RepairKind::ArgumentValue as i32; 4]);
    assert_eq!(response.repairs[0].original, r#"nights: "3""#);
    assert_eq!(response.repairs[0].repaired, "nights: 3");

    // Lossy or ambiguous: the model hears about what it sent.
    let response = execute(&mut gw.client, "book_room", r#"{"nights": "3.5", "breakfast": "yes"}"#).await;
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    assert!(response.repairs.is_empty());
    assert!(
        error(&response).message.contains(r#"'nights' must be an integer, got string"#),
        "{}",
        error(&response).message
    );
    // A coercion that would still leave the call invalid is not kept.
    let response = execute(&mut gw.client, "book_room", r#"{"nights": "0"}"#).await;
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    assert!(error(&response).message.contains("got string"), "{}", error(&response).message);

    // Strict: nothing is coerced.
    let request = ExecuteRequest {
        tool: "book_room".into(),
        arguments_json: r#"{"nights": "3"}"#.into(),
        strict: Some(true),
        ..Default::default()
    };
    let response = gw.client.execute(request).await.unwrap().into_inner();
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    assert!(response.repairs.is_empty());
}

#[tokio::test]
async fn arguments_in_an_envelope_or_beside_call_metadata_are_unwrapped() {
    let registry = r#"
tools:
  - name: find_file
    description: Find a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path], additionalProperties: false}
    backend: {builtin: echo}
  - name: run_input
    description: Has a real input parameter.
    parameters: {type: object, properties: {input: {type: object}}, required: [input], additionalProperties: false}
    backend: {builtin: echo}
"#;
    let mut gw = TestGateway::registry(registry).start().await;
    for arguments in [
        r#"{"arguments": {"path": "/tmp"}}"#,
        r#"{"name": "find_file", "type": "function", "input": {"path": "/tmp"}}"#,
        r#"{"path": "/tmp", "type": "tool_use", "id": "toolu_1"}"#,
        r#"{"args.path": "/tmp"}"#,
    ] {
        let response = execute(&mut gw.client, "find_file", arguments).await;
        assert!(response.ok, "{arguments}: {response:?}");
        assert_eq!(response.arguments_json, r#"{"path":"/tmp"}"#, "{arguments}");
        assert_eq!(response.repairs[0].kind, RepairKind::ArgumentsEnvelope as i32, "{arguments}");
    }
    // Two readings, or a real `input` parameter: no unwrapping.
    let response =
        execute(&mut gw.client, "find_file", r#"{"arguments": {"path": "/a"}, "params": {"path": "/b"}}"#).await;
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    let response = execute(&mut gw.client, "run_input", r#"{"input": {"path": "/tmp"}}"#).await;
    assert!(response.ok && response.repairs.is_empty(), "{response:?}");
    // Strict: nothing is unwrapped.
    let request = ExecuteRequest {
        tool: "find_file".into(),
        arguments_json: r#"{"arguments": {"path": "/tmp"}}"#.into(),
        strict: Some(true),
        ..Default::default()
    };
    assert_eq!(kind(&gw.client.execute(request).await.unwrap().into_inner()), ErrorKind::InvalidArguments);
}

#[tokio::test]
async fn argument_syntax_with_one_reading_is_repaired() {
    let registry = r#"
tools:
  - name: find_file
    description: Find a file.
    parameters:
      type: object
      properties: {path: {type: string}, depth: {type: integer}}
      required: [path]
      additionalProperties: false
    backend: {builtin: echo}
  - name: list_rooms
    description: Everything optional.
    parameters:
      type: object
      properties: {floor: {type: integer}, near: {type: array, items: {type: object, properties: {floor: {type: integer}}}}}
      additionalProperties: false
    backend: {builtin: echo}
"#;
    let mut gw = TestGateway::registry(registry).start().await;
    // Values are coerced at depth, named by their path.
    let response = execute(&mut gw.client, "list_rooms", r#"{"near": [{"floor": "2"}]}"#).await;
    assert_eq!(response.result_json, r#"{"near":[{"floor":2}]}"#, "{response:?}");
    assert_eq!(response.repairs[0].original, r#"near/0/floor: "2""#);
    let json = RepairKind::ArgumentsJson as i32;
    for (tool, emitted, expected, kinds) in [
        ("find_file", "{\"path\": \"/tmp\"}}", r#"{"path":"/tmp"}"#, vec![json]),
        ("find_file", "{\"path\": \"/tmp\"}\nI will now search.", r#"{"path":"/tmp"}"#, vec![json]),
        ("find_file", "{\u{201c}path\u{201d}: \u{201c}/tmp\u{201d}}", r#"{"path":"/tmp"}"#, vec![json]),
        ("find_file", "{{\"path\": \"/tmp\"}}", r#"{"path":"/tmp"}"#, vec![json]),
        ("find_file", "{path: \"/tmp\", depth: 2}", r#"{"path":"/tmp","depth":2}"#, vec![json]),
        ("find_file", r#""\"{\\\"path\\\": \\\"/tmp\\\"}\"""#, r#"{"path":"/tmp"}"#, vec![json]),
        ("find_file", r#"[{"path": "/tmp"}]"#, r#"{"path":"/tmp"}"#, vec![RepairKind::ArgumentsEnvelope as i32]),
        ("list_rooms", "null", "{}", vec![json]),
        ("list_rooms", "\"\"", "{}", vec![json]),
    ] {
        let response = execute(&mut gw.client, tool, emitted).await;
        assert!(response.ok, "{emitted}: {response:?}");
        assert_eq!(response.result_json, expected, "{emitted}");
        assert_eq!(response.repairs.iter().map(|r| r.kind).collect::<Vec<_>>(), kinds, "{emitted}");
        assert_eq!(response.repairs[0].original, emitted);
    }
    // More than one reading, or a required parameter: errors.
    for (tool, emitted, message) in [
        ("find_file", r#"{"path": "/a"}{"path": "/b"}"#, "2 tool calls arrived in one ('find_file'), and none was run"),
        ("find_file", r#"{"path": "/a"#, "arguments are not valid JSON: EOF while parsing"),
        ("find_file", "null", "arguments must be a JSON object, got null"),
        (
            "find_file",
            r#"[{"path": "/a"}, {"path": "/b"}]"#,
            "2 tool calls arrived in one ('find_file'), and none was run",
        ),
    ] {
        let response = execute(&mut gw.client, tool, emitted).await;
        assert!(error_of(&response).starts_with(message), "{emitted}: {}", error_of(&response));
        assert!(response.repairs.is_empty());
    }
    // Strict: none of them is repaired.
    let request = ExecuteRequest {
        tool: "find_file".into(),
        arguments_json: "{\"path\": \"/tmp\"}}".into(),
        strict: Some(true),
        ..Default::default()
    };
    let response = gw.client.execute(request).await.unwrap().into_inner();
    assert_eq!(error_of(&response), "arguments are not valid JSON: trailing characters at line 1 column 17");
}
