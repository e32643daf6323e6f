//! Values spelt as another type than the one their schema allows, made of
//! that type where exactly one reading exists (non-strict only): models
//! often send numbers and booleans as strings, and arrays or objects as the
//! JSON text of them.
//!
//! The rules, each lossless:
//! - a string that is exactly a JSON integer where the schema wants an
//!   integer (`"5"` → 5; `"5.5"`, `"five"`, `" 5"` stay), or exactly a JSON
//!   number where it wants a number; integers are read as integers, never
//!   through a float;
//! - `"true"` / `"false"`, in any case, where it wants a boolean (`"yes"`
//!   stays);
//! - a string holding a JSON (or Python-literal) array or object where it
//!   wants one;
//! - a single value where it wants an array of that value's type, unless it
//!   is a string holding `,`, `;` or a newline (a list in disguise has more
//!   than one reading), or an empty string (no value: never `[""]`);
//! - a string matching exactly one allowed `enum` value ignoring case.
//!
//! Only values whose schema allows one type (no `anyOf`, `oneOf`, type
//! lists), or one type or `null` (`type: [T, "null"]`, `anyOf` of T and
//! `{type: null}`: read as T, a `null` left as it is), and only values that
//! do not already fit.
//!
//! A strict tool's call ([`crate::catalog::Schema::strict`]) that leaves out
//! a parameter whose schema allows `null` has it filled with `null`
//! ([`fill_nulls`]): that is how such a tool says "optional". Nested values are
//! reached through `properties` and `items` (at most [`MAX_DEPTH`] deep) and
//! named by their path (`items/0/qty`).

use serde_json::{Map, Value};

use super::json::literal;
use crate::{
    catalog::{allows_null, or_null},
    exec::{
        limits::ArgumentLimits,
        outcome::{Repair, RepairKind},
    },
};

/// How deep into objects and arrays values are coerced.
pub(crate) const MAX_DEPTH: usize = 16;

/// Coerces the arguments of `object` that `schema` (the tool's parameters
/// JSON) types otherwise; one repair per value changed.
pub(crate) fn coerce(object: &mut Map<String, Value>, schema: &Value, limits: ArgumentLimits) -> Vec<Repair> {
    let mut repairs = Vec::new();
    in_object(object, schema, "", 0, limits, &mut repairs);
    repairs
}

fn in_object(
    object: &mut Map<String, Value>,
    schema: &Value,
    path: &str,
    depth: usize,
    limits: ArgumentLimits,
    repairs: &mut Vec<Repair>,
) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
    // `null` for an optional parameter whose schema does not allow it: the
    // model's way of leaving it out.
    let required = schema.get("required").and_then(Value::as_array);
    let dropped: Vec<String> = object
        .iter()
        .filter(|(name, value)| {
            value.is_null()
                && !required.is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name.as_str())))
                && properties.get(name.as_str()).is_some_and(refuses_null)
        })
        .map(|(name, _)| name.clone())
        .collect();
    for name in dropped {
        object.remove(&name);
        let field = match path {
            "" => name,
            _ => format!("{path}/{name}"),
        };
        repairs.push(Repair {
            kind: RepairKind::ArgumentValue,
            original: format!("{field}: null"),
            repaired: format!("{field} left out"),
        });
    }
    for (name, value) in object.iter_mut() {
        let Some(property) = properties.get(name) else { continue };
        let field = match path {
            "" => name.clone(),
            _ => format!("{path}/{name}"),
        };
        in_value(value, property, &field, depth, limits, repairs);
    }
}

fn in_value(
    value: &mut Value,
    property: &Value,
    field: &str,
    depth: usize,
    limits: ArgumentLimits,
    repairs: &mut Vec<Repair>,
) {
    if value.is_null() && allows_null(property) {
        return;
    }
    let single = or_null(property);
    let property = single.as_deref().unwrap_or(property);
    if property.get("anyOf").is_some() || property.get("oneOf").is_some() {
        return;
    }
    if let Some(coerced) = coerced(value, property, limits) {
        repairs.push(Repair {
            kind: RepairKind::ArgumentValue,
            original: format!("{field}: {value}"),
            repaired: format!("{field}: {coerced}"),
        });
        *value = coerced;
    }
    if depth >= MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(inner) => in_object(inner, property, field, depth + 1, limits, repairs),
        Value::Array(items) => {
            let Some(schema) = property.get("items").filter(|s| s.is_object()) else { return };
            for (i, item) in items.iter_mut().enumerate() {
                in_value(item, schema, &format!("{field}/{i}"), depth + 1, limits, repairs);
            }
        }
        _ => {}
    }
}

/// A strict tool's arguments (`object`, against `schema`): every parameter
/// the schema requires and allows to be `null` that the call left out is
/// filled with `null`, in nested objects too (a strict schema is strict at
/// every depth); one repair each.
pub(crate) fn fill_nulls(object: &mut Map<String, Value>, schema: &Value) -> Vec<Repair> {
    let mut repairs = Vec::new();
    fill_in(object, schema, "", 0, &mut repairs);
    repairs
}

fn fill_in(object: &mut Map<String, Value>, schema: &Value, path: &str, depth: usize, repairs: &mut Vec<Repair>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
    let field = |name: &str| match path {
        "" => name.to_owned(),
        _ => format!("{path}/{name}"),
    };
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !object.contains_key(name) && properties.get(name).is_some_and(allows_null) {
            object.insert(name.to_owned(), Value::Null);
            let field = field(name);
            repairs.push(Repair {
                kind: RepairKind::ArgumentValue,
                original: format!("{field} left out"),
                repaired: format!("{field}: null"),
            });
        }
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for (name, value) in object.iter_mut() {
        let Some(property) = properties.get(name) else { continue };
        let single = or_null(property);
        let property = single.as_deref().unwrap_or(property);
        match value {
            Value::Object(inner) => fill_in(inner, property, &field(name), depth + 1, repairs),
            Value::Array(items) => {
                let Some(schema) = property.get("items") else { continue };
                let single = or_null(schema);
                let schema = single.as_deref().unwrap_or(schema);
                for (i, item) in items.iter_mut().enumerate() {
                    if let Value::Object(inner) = item {
                        fill_in(inner, schema, &format!("{}/{i}", field(name)), depth + 1, repairs);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Whether `property` has one type, not `null` (no `null` in its `enum`,
/// no `anyOf`/`oneOf`).
fn refuses_null(property: &Value) -> bool {
    let one_type = property.get("type").and_then(Value::as_str).is_some_and(|t| t != "null");
    let enum_null = property.get("enum").and_then(Value::as_array).is_some_and(|e| e.contains(&Value::Null));
    one_type && !enum_null && property.get("anyOf").is_none() && property.get("oneOf").is_none()
}

/// Whether `value` is of JSON Schema type `wanted`.
pub(super) fn is_of(wanted: &str, value: &Value) -> bool {
    match (wanted, value) {
        ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("null", Value::Null)
        | ("object", Value::Object(_))
        | ("array", Value::Array(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// `value` as the one type `property` wants, if it is not of it and has
/// exactly one reading as it.
fn coerced(value: &Value, property: &Value, limits: ArgumentLimits) -> Option<Value> {
    if let (Some(allowed), Value::String(text)) = (property.get("enum").and_then(Value::as_array), value) {
        if allowed.contains(value) {
            return None;
        }
        let mut matching = allowed.iter().filter(|a| a.as_str().is_some_and(|a| a.eq_ignore_ascii_case(text)));
        return match (matching.next(), matching.next()) {
            (Some(one), None) => Some(one.clone()),
            _ => None,
        };
    }
    let wanted = property.get("type")?.as_str()?;
    match (wanted, value) {
        ("integer", Value::String(text)) => integer(text),
        ("number", Value::String(text)) => integer(text).or_else(|| number(text)),
        ("boolean", Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("array", Value::String(text)) if text.trim_start().starts_with('[') => {
            literal(text, limits).filter(Value::is_array)
        }
        ("object", Value::String(text)) if text.trim_start().starts_with('{') => {
            literal(text, limits).filter(Value::is_object)
        }
        // A one-element array where one value belongs: its element (itself
        // read by these rules).
        ("string" | "integer" | "number" | "boolean", Value::Array(items)) if items.len() == 1 => {
            let item = &items[0];
            match is_of(wanted, item) {
                true => Some(item.clone()),
                false => coerced(item, property, limits).filter(|c| is_of(wanted, c)),
            }
        }
        ("array", single) if !single.is_array() => {
            let items = property.get("items")?;
            let fits = match (items.get("type").and_then(Value::as_str)?, single) {
                // An empty string is no value: never wrapped (`[""]`).
                ("string", Value::String(text)) => !text.trim().is_empty() && !text.contains([',', ';', '\n']),
                ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
                ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) | ("object", Value::Object(_)) => true,
                _ => false,
            };
            fits.then(|| Value::Array(vec![single.clone()]))
        }
        _ => None,
    }
}

/// `"5"` → 5, exactly: optional `-`, digits, no leading zeros, within i64/u64.
fn integer(text: &str) -> Option<Value> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    match text.parse::<i64>() {
        Ok(n) => Some(Value::from(n)),
        Err(_) => text.parse::<u64>().ok().map(Value::from),
    }
}

/// `"2.5"` → 2.5: exactly a JSON number (no spaces around it).
fn number(text: &str) -> Option<Value> {
    if text.trim() != text {
        return None;
    }
    serde_json::from_str::<serde_json::Number>(text).ok().map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(schema: Value, args: Value) -> (Value, usize) {
        let mut object = args.as_object().unwrap().clone();
        let repairs = coerce(&mut object, &schema, ArgumentLimits::default());
        (Value::Object(object), repairs.len())
    }

    #[test]
    fn lossless_readings_are_taken() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}}, "ids": {"type": "array", "items": {"type": "integer"}},
            "opts": {"type": "object"}, "mode": {"type": "string", "enum": ["Fast", "slow"]}
        }});
        let (out, n) = run(
            schema.clone(),
            serde_json::json!({"n": "5", "x": "2.5", "b": "TRUE", "tags": "urgent", "ids": "[1, 2]", "opts": "{\"a\": 1}", "mode": "fast"}),
        );
        assert_eq!(
            out,
            serde_json::json!({"n": 5, "x": 2.5, "b": true, "tags": ["urgent"], "ids": [1, 2], "opts": {"a": 1}, "mode": "Fast"})
        );
        assert_eq!(n, 7);
        let (out, _) = run(schema.clone(), serde_json::json!({"n": "9007199254740993"}));
        assert_eq!(out["n"].as_i64(), Some(9_007_199_254_740_993), "no float on the way");
        let (out, _) = run(schema.clone(), serde_json::json!({"tags": "['a', 'b']", "opts": "{'deep': True}"}));
        assert_eq!(out, serde_json::json!({"tags": ["a", "b"], "opts": {"deep": true}}), "Python literals");
    }

    #[test]
    fn anything_lossy_or_ambiguous_stays() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "b": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "mode": {"type": "string", "enum": ["a", "A"]}
        }});
        for args in [
            serde_json::json!({"n": "5.5"}),
            serde_json::json!({"n": "five"}),
            serde_json::json!({"n": " 5"}),
            serde_json::json!({"n": "05"}),
            serde_json::json!({"b": "yes"}),
            serde_json::json!({"tags": "a, b"}),
            serde_json::json!({"tags": "a;b"}),
            serde_json::json!({"either": "5"}),
            serde_json::json!({"mode": "x"}),
        ] {
            let (out, n) = run(schema.clone(), args.clone());
            assert_eq!((out, n), (args.clone(), 0), "{args}");
        }
        // Two enum values equal ignoring case: two readings.
        let (_, n) = run(schema, serde_json::json!({"mode": "a"}));
        assert_eq!(n, 0);
    }

    #[test]
    fn nested_values_are_coerced_and_named_by_path() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
            "filter": {"type": "object", "properties": {"archived": {"type": "boolean"}}}
        }});
        let mut object =
            serde_json::json!({"items": [{"qty": "2"}, {"qty": 3}], "filter": "{\"archived\": \"false\"}"})
                .as_object()
                .unwrap()
                .clone();
        let repairs = coerce(&mut object, &schema, ArgumentLimits::default());
        assert_eq!(
            Value::Object(object),
            serde_json::json!({"items": [{"qty": 2}, {"qty": 3}], "filter": {"archived": false}})
        );
        let originals: Vec<&str> = repairs.iter().map(|r| r.original.as_str()).collect();
        assert_eq!(
            originals,
            ["items/0/qty: \"2\"", "filter: \"{\\\"archived\\\": \\\"false\\\"}\"", "filter/archived: \"false\""]
        );
    }

    #[test]
    fn null_for_an_optional_parameter_is_left_out_and_one_element_arrays_are_their_element() {
        let schema = serde_json::json!({
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "note": {"type": ["string", "null"]},
                "pick": {"enum": ["a", null]}
            },
            "required": ["city"]
        });
        let (value, repairs) = run(schema.clone(), serde_json::json!({"city": ["Oslo"], "days": null}));
        assert_eq!((value, repairs), (serde_json::json!({"city": "Oslo"}), 2));
        let (value, _) = run(schema.clone(), serde_json::json!({"city": "Oslo", "days": ["3"]}));
        assert_eq!(value, serde_json::json!({"city": "Oslo", "days": 3}));
        // A required parameter, a schema allowing null, two elements, an element that does not fit: left alone.
        for args in [
            serde_json::json!({"city": null}),
            serde_json::json!({"city": "Oslo", "note": null, "pick": null}),
            serde_json::json!({"city": ["Oslo", "Rome"]}),
            serde_json::json!({"city": "Oslo", "days": ["three"]}),
        ] {
            let (value, repairs) = run(schema.clone(), args.clone());
            assert_eq!((value, repairs), (args, 0));
        }
    }

    #[test]
    fn a_type_or_null_is_read_as_the_type_and_null_stays() {
        // As the Agents SDK and Pydantic AI write optional parameters strict.
        let schema = serde_json::json!({"type": "object", "properties": {
            "days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "hourly": {"type": ["boolean", "null"]},
            "units": {"oneOf": [{"type": "null"}, {"type": "string", "enum": ["metric", "imperial"]}]},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}
        }});
        let (out, n) =
            run(schema.clone(), serde_json::json!({"days": "3", "hourly": "true", "units": "Metric", "tags": "rain"}));
        assert_eq!(out, serde_json::json!({"days": 3, "hourly": true, "units": "metric", "tags": ["rain"]}));
        assert_eq!(n, 4);
        let nulls = serde_json::json!({"days": null, "hourly": null, "units": null, "tags": null});
        assert_eq!(run(schema.clone(), nulls.clone()), (nulls, 0));
        // Two types besides null: no one reading.
        let either =
            serde_json::json!({"type": "object", "properties": {"v": {"type": ["integer", "string", "null"]}}});
        assert_eq!(run(either, serde_json::json!({"v": "3"})).1, 0);
    }

    #[test]
    fn a_strict_call_has_what_it_left_out_that_may_be_null_filled_at_every_depth() {
        let schema = serde_json::json!({"type": "object", "additionalProperties": false,
        "required": ["city", "days", "where"],
        "properties": {
            "city": {"type": "string"},
            "days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "where": {"anyOf": [{"type": "object", "additionalProperties": false, "required": ["lat", "note"],
                "properties": {"lat": {"type": "number"}, "note": {"type": ["string", "null"]}}}, {"type": "null"}]}
        }});
        let mut object = serde_json::json!({"where": {"lat": 1.5}}).as_object().unwrap().clone();
        let repairs = fill_nulls(&mut object, &schema);
        // A required parameter that does not allow null is never filled.
        assert_eq!(Value::Object(object), serde_json::json!({"days": null, "where": {"lat": 1.5, "note": null}}));
        let said: Vec<(&str, &str)> = repairs.iter().map(|r| (r.original.as_str(), r.repaired.as_str())).collect();
        assert_eq!(said, [("days left out", "days: null"), ("where/note left out", "where/note: null")]);
    }
}
