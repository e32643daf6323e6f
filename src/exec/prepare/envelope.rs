//! Arguments a client or template wrapped, or left call metadata beside
//! (non-strict only): `{"arguments": {...}}`, `{"name": "tool", "type":
//! "function", "input": {...}}`, `{"query": "x", "type": "function"}`,
//! `{"args.path": "/tmp"}`. The rule: every key the tool does not declare
//! is either call metadata (`name` equal to the tool's name, `type` of a
//! call kind, `id`), or there is exactly one other, an envelope, whose value
//! is an object (or all of them share one dotted prefix over declared
//! names). The result is taken only if it validates. A declared parameter
//! is never an envelope or metadata: a tool with a real `name`, `type`, `id`
//! or `input` parameter is never unwrapped through it.

use serde_json::{Map, Value};

/// Call kinds a `type` beside the arguments may name.
const CALL_TYPES: &[&str] = &["function", "tool_use", "tool_call", "function_call", "tool"];

/// The arguments `object` holds inside an envelope or beside call metadata,
/// if that reading exists (`declared`: the tool's parameters; `tool`: its
/// canonical name). The caller keeps it only if it validates.
pub(crate) fn unwrap(object: &Map<String, Value>, declared: &[String], tool: &str) -> Option<Map<String, Value>> {
    let undeclared: Vec<&String> = object.keys().filter(|k| !declared.contains(k)).collect();
    if undeclared.is_empty() {
        return None;
    }
    let metadata = |key: &str, value: &Value| match key {
        "name" => value.as_str() == Some(tool),
        "type" => value.as_str().is_some_and(|t| CALL_TYPES.contains(&t)),
        "id" => value.is_string(),
        _ => false,
    };
    let others: Vec<&String> = undeclared.iter().copied().filter(|k| !metadata(k, &object[k.as_str()])).collect();
    match others.as_slice() {
        // Only metadata beside the real arguments: drop it.
        [] => Some(object.iter().filter(|(k, _)| declared.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()),
        // One envelope holding an object, nothing declared beside it.
        [envelope] if undeclared.len() == object.len() && object[envelope.as_str()].is_object() => {
            object[envelope.as_str()].as_object().cloned()
        }
        // Keys flattened under one dotted prefix: `args.path`.
        _ => {
            let mut prefix: Option<&str> = None;
            let mut flat = Map::new();
            for (key, value) in object {
                if declared.contains(key) {
                    flat.insert(key.clone(), value.clone());
                    continue;
                }
                if metadata(key, value) {
                    continue;
                }
                let (head, rest) = key.split_once('.')?;
                if prefix.is_some_and(|p| p != head) || !declared.iter().any(|d| d == rest) || flat.contains_key(rest) {
                    return None;
                }
                prefix = Some(head);
                flat.insert(rest.to_owned(), value.clone());
            }
            Some(flat)
        }
    }
}

/// A whole call sent where only its arguments belong, the tool's name left
/// empty: `{"name": "get_weather", "arguments": {...}}`. The name, and the
/// text of the arguments under the one other key (an object serialised, or
/// the JSON text of one as sent, which the caller parses like any arguments,
/// under the same limits; none at all is `{}`), beside which only call
/// metadata (`type`, `id`) may lie. The name is then resolved like any
/// emitted name, inside the caller's available set.
pub(crate) fn named_call(object: &Map<String, Value>) -> Option<(String, String)> {
    let name = object.get("name")?.as_str()?;
    let mut arguments = None;
    for (key, value) in object {
        match key.as_str() {
            "name" => {}
            "type" if value.as_str().is_some_and(|t| CALL_TYPES.contains(&t)) => {}
            "id" if value.is_string() => {}
            _ if arguments.is_none() => arguments = Some(value),
            _ => return None,
        }
    }
    let text = match arguments {
        None => "{}".to_owned(),
        Some(inner @ Value::Object(_)) => serde_json::to_string(inner).expect("JSON values serialise"),
        Some(Value::String(text)) if text.trim_start().starts_with('{') => text.clone(),
        Some(_) => return None,
    };
    Some((name.to_owned(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: Value, declared: &[&str]) -> Option<Value> {
        let declared: Vec<String> = declared.iter().map(|d| d.to_string()).collect();
        unwrap(args.as_object().unwrap(), &declared, "search").map(Value::Object)
    }

    #[test]
    fn envelopes_and_metadata() {
        let q = serde_json::json!({"query": "x"});
        assert_eq!(run(serde_json::json!({"arguments": {"query": "x"}}), &["query"]), Some(q.clone()));
        assert_eq!(
            run(serde_json::json!({"name": "search", "type": "function", "input": {"query": "x"}}), &["query"]),
            Some(q.clone())
        );
        assert_eq!(
            run(serde_json::json!({"query": "x", "type": "function", "id": "call_1"}), &["query"]),
            Some(q.clone())
        );
        assert_eq!(run(serde_json::json!({"args.query": "x"}), &["query"]), Some(q));
    }

    #[test]
    fn readings_that_are_not_one_stay() {
        // A real `input` parameter is never an envelope.
        assert_eq!(run(serde_json::json!({"input": {"query": "x"}}), &["input", "query"]), None);
        // Two envelopes; an envelope beside a declared argument; a name of another tool.
        assert_eq!(run(serde_json::json!({"arguments": {"query": "x"}, "params": {"query": "y"}}), &["query"]), None);
        assert_eq!(run(serde_json::json!({"arguments": {"query": "x"}, "query": "y"}), &["query"]), None);
        assert_eq!(run(serde_json::json!({"name": "delete", "input": {"query": "x"}}), &["query"]), None);
        // Dotted keys under two prefixes, or over undeclared names.
        assert_eq!(run(serde_json::json!({"a.query": "x", "b.limit": 1}), &["query", "limit"]), None);
        assert_eq!(run(serde_json::json!({"args.other": "x"}), &["query"]), None);
    }

    fn call(args: Value) -> Option<(String, String)> {
        named_call(args.as_object().unwrap())
    }

    #[test]
    fn a_whole_call_in_the_arguments() {
        let expected = Some(("get_weather".to_owned(), r#"{"city":"Oslo"}"#.to_owned()));
        assert_eq!(call(serde_json::json!({"name": "get_weather", "arguments": {"city": "Oslo"}})), expected);
        // The JSON text of the arguments is kept as sent, for the parser.
        assert_eq!(
            call(serde_json::json!({"type": "function", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"})),
            Some(("get_weather".to_owned(), r#"{"city": "Oslo"}"#.to_owned()))
        );
        assert_eq!(call(serde_json::json!({"name": "now"})), Some(("now".to_owned(), "{}".to_owned())));
        // Two candidates for the arguments, no name, arguments not an object.
        assert_eq!(call(serde_json::json!({"name": "x", "arguments": {}, "input": {}})), None);
        assert_eq!(call(serde_json::json!({"arguments": {"city": "Oslo"}})), None);
        assert_eq!(call(serde_json::json!({"name": "x", "arguments": [1]})), None);
        assert_eq!(call(serde_json::json!({"name": "x", "arguments": "hello"})), None);
    }
}
