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

use super::json::literal;
use crate::exec::limits::ArgumentLimits;

/// Call kinds a `type` beside the arguments may name.
pub(super) const CALL_TYPES: &[&str] = &["function", "tool_use", "tool_call", "function_call", "tool"];

/// The arguments `object` holds inside an envelope or beside call metadata,
/// if that reading exists (`declared`: the tool's parameters; `tool`: its
/// canonical name). The caller keeps it only if it validates.
pub(crate) fn unwrap(
    object: &Map<String, Value>,
    declared: &[String],
    tool: &str,
    limits: ArgumentLimits,
) -> Option<Map<String, Value>> {
    let undeclared: Vec<&String> = object.keys().filter(|k| !declared.contains(k)).collect();
    if undeclared.is_empty() {
        return None;
    }
    // Call metadata, or an empty wrapper (`"arguments": {}`) beside the
    // real arguments: nothing is lost by leaving it out.
    let metadata = |key: &str, value: &Value| match key {
        "name" => value.as_str() == Some(tool),
        "type" => value.as_str().is_some_and(|t| CALL_TYPES.contains(&t)),
        "id" => value.is_string(),
        _ => value.as_object().is_some_and(Map::is_empty) || value.as_str().is_some_and(|t| t.trim() == "{}"),
    };
    let others: Vec<&String> = undeclared.iter().copied().filter(|k| !metadata(k, &object[k.as_str()])).collect();
    match others.as_slice() {
        // Only metadata beside the real arguments: drop it.
        [] => Some(object.iter().filter(|(k, _)| declared.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()),
        // One envelope holding an object, nothing declared beside it.
        [envelope] if undeclared.len() == object.len() && object[envelope.as_str()].is_object() => {
            object[envelope.as_str()].as_object().cloned()
        }
        // One envelope holding the arguments' JSON text.
        [envelope]
            if undeclared.len() == object.len()
                && object[envelope.as_str()].as_str().is_some_and(|t| t.trim_start().starts_with('{')) =>
        {
            let text = object[envelope.as_str()].as_str().expect("a string");
            literal(text, limits).and_then(|inner| match inner {
                Value::Object(inner) => Some(inner),
                _ => None,
            })
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

/// The members of the only object parameter sent at the top level
/// (`{"status": "open"}` for a tool whose one object parameter `filter`
/// declares `status`): every sent key that is not a parameter must be a
/// member of that one, and it must not be sent itself. The caller keeps
/// the result only if it validates.
pub(crate) fn lift(object: &Map<String, Value>, schema: &Value) -> Option<Map<String, Value>> {
    let properties = schema.get("properties")?.as_object()?;
    let mut objects = properties.iter().filter(|(_, p)| p.get("type").and_then(Value::as_str) == Some("object"));
    let (Some((parameter, inner)), None) = (objects.next(), objects.next()) else { return None };
    if object.contains_key(parameter) {
        return None;
    }
    let members = inner.get("properties")?.as_object()?;
    let (mut outer, mut lifted) = (Map::new(), Map::new());
    for (key, value) in object {
        if properties.contains_key(key) {
            outer.insert(key.clone(), value.clone());
        } else if members.contains_key(key) {
            lifted.insert(key.clone(), value.clone());
        } else {
            return None;
        }
    }
    if lifted.is_empty() {
        return None;
    }
    outer.insert(parameter.clone(), Value::Object(lifted));
    Some(outer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: Value, declared: &[&str]) -> Option<Value> {
        let declared: Vec<String> = declared.iter().map(|d| d.to_string()).collect();
        unwrap(args.as_object().unwrap(), &declared, "search", ArgumentLimits::default()).map(Value::Object)
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

    #[test]
    fn wrappers_holding_text_empty_wrappers_and_members_sent_at_the_top() {
        assert_eq!(
            run(serde_json::json!({"arguments": "{\"query\": \"x\"}"}), &["query"]),
            Some(serde_json::json!({"query": "x"}))
        );
        assert_eq!(
            run(serde_json::json!({"query": "x", "arguments": {}}), &["query"]),
            Some(serde_json::json!({"query": "x"}))
        );
        assert_eq!(run(serde_json::json!({"arguments": "not json"}), &["query"]), None);
        let schema = serde_json::json!({"properties": {
            "filter": {"type": "object", "properties": {"status": {}, "customer": {}}},
            "limit": {"type": "integer"}
        }});
        let lifted = |args: Value| lift(args.as_object().unwrap(), &schema).map(Value::Object);
        assert_eq!(
            lifted(serde_json::json!({"status": "open", "limit": 2})),
            Some(serde_json::json!({"limit": 2, "filter": {"status": "open"}}))
        );
        // The parameter sent too, a key of neither, nothing to lift, two object parameters.
        assert_eq!(lifted(serde_json::json!({"status": "open", "filter": {}})), None);
        assert_eq!(lifted(serde_json::json!({"status": "open", "other": 1})), None);
        assert_eq!(lifted(serde_json::json!({"limit": 2})), None);
        let two = serde_json::json!({"properties": {"a": {"type": "object", "properties": {"x": {}}}, "b": {"type": "object", "properties": {"x": {}}}}});
        assert_eq!(lift(serde_json::json!({"x": 1}).as_object().unwrap(), &two), None);
    }
}
