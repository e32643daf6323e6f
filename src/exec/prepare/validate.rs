//! Validates arguments with the schema compiled at load, collects every
//! problem, and words each for the model (docs/architecture.md, "Names and
//! messages").
//!
//! Name-level problems (a required argument missing, an argument the schema
//! forbids) come with the parameter hint; value-level problems name the field
//! and what is allowed, with no hint.

use jsonschema::{error::TypeKind, error::ValidationErrorKind, JsonType, ValidationError};
use serde_json::Value;

use crate::{
    catalog::{Schema, ToolView},
    exec::outcome::{ExpectedParameters, ToolError, Violation},
    resolve::message::python_list,
    similar::{folded_key_of, has_folded_key},
};

/// Values are shown cut to this many characters.
const MAX_SHOWN_VALUE: usize = 40;

/// Every problem of one call's arguments.
#[derive(Debug, Default)]
pub(crate) struct ArgumentProblems {
    /// Missing or unexpected arguments, each with its JSON pointer.
    names: Vec<Violation>,
    /// Wrong values.
    values: Vec<Violation>,
}

impl ArgumentProblems {
    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty() && self.values.is_empty()
    }

    /// The INVALID_ARGUMENTS error: name problems, then value problems, joined
    /// by `; `; the parameter hint ends the message, a sentence of its own,
    /// when a name was wrong.
    pub(crate) fn into_error(self, tool: ToolView<'_>) -> ToolError {
        let texts: Vec<&str> = self.names.iter().chain(&self.values).map(|v| v.description.as_str()).collect();
        let mut message = texts.join("; ");
        let mut error = ToolError::invalid_arguments(String::new());
        if !self.names.is_empty() {
            let schema = tool.parameters;
            // The problems end their sentence before the hint's begins.
            if !message.ends_with(['.', '!', '?']) {
                message.push('.');
            }
            message.push(' ');
            message.push_str(&parameter_hint(tool.name, schema.required(), schema.optional()));
            error.expected_parameters =
                Some(ExpectedParameters { required: schema.required().to_vec(), optional: schema.optional().to_vec() });
        }
        error.message = message;
        error.violations = self.names.into_iter().chain(self.values).collect();
        error
    }
}

/// `Expected parameters for 'web_search' — required: ['query'], optional: ['limit'].`
pub(crate) fn parameter_hint(tool: &str, required: &[String], optional: &[String]) -> String {
    format!(
        "Expected parameters for '{tool}' — required: {}, optional: {}.",
        python_list(required),
        python_list(optional)
    )
}

/// Validates `arguments` against the tool's compiled schema.
pub(crate) fn validate(tool: ToolView<'_>, arguments: &Value) -> ArgumentProblems {
    let schema = tool.parameters;
    let (mut missing, mut unexpected, values) = schema_errors(schema, arguments);
    let mut problems = ArgumentProblems { values, ..ArgumentProblems::default() };
    // Missing in the order of `required`, unexpected in the order given.
    let order = |name: &String| schema.required().iter().position(|r| r == name).unwrap_or(usize::MAX);
    missing.sort_by_key(order);
    missing.dedup();
    if let Value::Object(given) = arguments {
        let position = |name: &String| given.keys().position(|k| k == name).unwrap_or(usize::MAX);
        unexpected.sort_by_key(position);
    }
    unexpected.dedup();
    // A required argument missing beside an undeclared key near it (a
    // schema that allows other keys lets the misspelling through): the
    // key is named. Refused keys are named under "unexpected" below.
    // Looked at only when an argument is missing: a valid call pays nothing.
    problems.names.extend(missing_named(schema, arguments, missing, &unexpected));
    // Bound parameters are the gateway's: the model sending one, in any
    // spelling a decoder could read as it (`folded_key`), sends an
    // unexpected argument, whatever the schema allows.
    if let (Some(binding), Value::Object(given)) = (tool.binding, arguments) {
        for key in given.keys() {
            let wanted = folded_key_of(key);
            if let Some((name, _)) = binding.parameters.iter().find(|(name, _)| has_folded_key(name, &wanted)) {
                unexpected.retain(|u| u != key);
                unexpected.push(name.clone());
            }
        }
        unexpected.dedup();
    }
    let respelt = respellings(schema, arguments, &unexpected);
    // A misspelt key names the declared parameter it is near, among those
    // not given (and not bound: the gateway fills those): a suggestion,
    // never a repair (`keys.rs` renames only what one meaning allows).
    let bound = |name: &str| tool.binding.is_some_and(|b| b.parameters.iter().any(|(n, _)| n == name));
    let given = |name: &str| arguments.as_object().is_some_and(|o| o.contains_key(name));
    let open = || schema.parameters().iter().map(String::as_str).filter(|p| !given(p) && !bound(p));
    problems.names.extend(unexpected.into_iter().map(|name| {
        let statement = format!("unexpected argument: '{}'", shown_name(&name));
        Violation {
            field: pointer(&name),
            description: crate::similar::did_you_mean(&statement, &name, open(), String::new),
        }
    }));
    problems.names.extend(respelt.into_iter().map(|(name, declared)| Violation {
        field: pointer(&name),
        description: match given(&declared) {
            true => {
                format!("argument '{}' is another spelling of '{declared}', which is also given", shown_name(&name))
            }
            false => {
                format!("argument '{}' is another spelling of '{declared}': send it as '{declared}'", shown_name(&name))
            }
        },
    }));
    problems
}

/// What the schema's validator says of `arguments`: the required
/// arguments missing, the undeclared ones refused (both at the top level)
/// and every other value's problem (a type problem left out where the
/// field's allowed values are listed).
fn schema_errors(schema: &Schema, arguments: &Value) -> (Vec<String>, Vec<String>, Vec<Violation>) {
    let mut values: Vec<Violation> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut unexpected: Vec<String> = Vec::new();
    // Fields whose allowed values are listed (enum, const): their type
    // problem adds nothing to the list of values.
    let mut listed: Vec<String> = Vec::new();
    let mut typed: Vec<(usize, String)> = Vec::new();
    let mut parsed: Option<Value> = None;
    // A valid call (the common case) is not walked again for its errors.
    let errors = match schema.validator().is_valid(arguments) {
        true => None,
        false => Some(schema.validator().iter_errors(arguments)),
    };
    for error in errors.into_iter().flatten() {
        let at_root = error.instance_path().as_str().is_empty();
        match error.kind() {
            ValidationErrorKind::Required { property } if at_root => {
                missing.push(property.as_str().map(str::to_owned).unwrap_or_else(|| property.to_string()));
            }
            ValidationErrorKind::AdditionalProperties { unexpected: names }
            | ValidationErrorKind::UnevaluatedProperties { unexpected: names }
                if at_root =>
            {
                unexpected.extend(names.iter().cloned());
            }
            ValidationErrorKind::FalseSchema if is_top_level_field(error.instance_path().as_str()) => {
                unexpected.push(field_name(error.instance_path().as_str()));
            }
            kind => {
                let mut field = error.instance_path().as_str().to_owned();
                if let ValidationErrorKind::Required { property } = kind {
                    field.push_str(&pointer(property.as_str().unwrap_or_default()));
                }
                match kind {
                    ValidationErrorKind::Enum { .. } | ValidationErrorKind::Constant { .. } => {
                        listed.push(field.clone())
                    }
                    ValidationErrorKind::Type { .. } => typed.push((values.len(), field.clone())),
                    _ => {}
                }
                // Parsed once, and only when a value is wrong: its words name sibling bounds.
                let json = parsed.get_or_insert_with(|| schema.json());
                values.push(Violation { field, description: describe(&error, json) });
            }
        }
    }
    for (at, field) in typed.iter().rev() {
        if listed.contains(field) {
            values.remove(*at);
        }
    }
    (missing, unexpected, values)
}

/// A violation for each required argument `missing`, naming an undeclared
/// key given near it (a schema that allows other keys lets a misspelling
/// through); keys refused as `unexpected` are named there instead.
fn missing_named(schema: &Schema, arguments: &Value, missing: Vec<String>, unexpected: &[String]) -> Vec<Violation> {
    let undeclared = || {
        arguments
            .as_object()
            .into_iter()
            .flat_map(|given| given.keys().map(String::as_str))
            .filter(|k| !schema.parameters().iter().any(|p| p == k) && !unexpected.iter().any(|u| u == k))
    };
    let named = |name: String| {
        let description = match crate::similar::nearest(&name, undeclared()) {
            Some(near) => format!(
                "missing a required argument: '{name}'; '{}' was given, did you mean '{name}'?",
                shown_name(near)
            ),
            None => format!("missing a required argument: '{name}'"),
        };
        Violation { field: pointer(&name), description }
    };
    missing.into_iter().map(named).collect()
}

/// Undeclared arguments whose folded key is that of a declared parameter
/// (`Code` beside `code`, `ſku` for `sku`), with that parameter, whether it
/// is given or not. Where the schema allows other arguments the validator
/// passes them, yet a backend decoding names case-insensitively (Go's
/// `encoding/json` folds `ſ` to `s` and `K` to `k`) would read the
/// unchecked value as the parameter. Strict calls too: nothing renamed them.
/// Those already refused as unexpected are left out.
fn respellings(schema: &Schema, arguments: &Value, unexpected: &[String]) -> Vec<(String, String)> {
    let Value::Object(given) = arguments else { return Vec::new() };
    let declared = schema.parameters();
    let mut found = Vec::new();
    for key in given.keys() {
        if declared.contains(key) || unexpected.contains(key) {
            continue;
        }
        let wanted = folded_key_of(key);
        if let Some(twin) = declared.iter().find(|d| has_folded_key(d, &wanted)) {
            found.push((key.clone(), twin.clone()));
        }
    }
    found
}

/// One sentence for one value problem, naming the field and what is allowed.
fn describe(error: &ValidationError<'_>, schema: &Value) -> String {
    let path = error.instance_path().as_str();
    let field = match path.is_empty() {
        true => "the arguments".to_owned(),
        false => format!("'{}'", field_name(path)),
    };
    let got = shown(error.instance());
    // The schema object the failing keyword sits in, for sibling bounds.
    let keyword_parent = error.schema_path().as_str().rsplit_once('/').and_then(|(parent, _)| schema.pointer(parent));
    let sibling = |key: &str| keyword_parent.and_then(|s| s.get(key));
    match error.kind() {
        ValidationErrorKind::Type { kind } => {
            format!("{field} must be {}, got {}", expected_types(kind), json_type_name(error.instance()))
        }
        ValidationErrorKind::Minimum { limit } | ValidationErrorKind::Maximum { limit } => {
            match (sibling("minimum"), sibling("maximum")) {
                (Some(low), Some(high)) => format!("{field} must be between {low} and {high}, got {got}"),
                _ if matches!(error.kind(), ValidationErrorKind::Minimum { .. }) => {
                    format!("{field} must be at least {limit}, got {got}")
                }
                _ => format!("{field} must be at most {limit}, got {got}"),
            }
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => format!("{field} must be greater than {limit}, got {got}"),
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("{field} must be less than {limit}, got {got}"),
        ValidationErrorKind::MultipleOf { .. } => {
            let of = sibling("multipleOf").map(Value::to_string).unwrap_or_default();
            format!("{field} must be a multiple of {of}, got {got}")
        }
        ValidationErrorKind::Enum { options } => {
            format!("{field} must be one of {}, got {got}", python_values(options))
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!("{field} must be {}, got {got}", shown(expected_value))
        }
        ValidationErrorKind::Pattern { pattern } => format!("{field} must match the pattern '{pattern}', got {got}"),
        ValidationErrorKind::MinLength { limit } | ValidationErrorKind::MaxLength { limit } => {
            let length = error.instance().as_str().map(|s| s.chars().count()).unwrap_or_default();
            match (sibling("minLength"), sibling("maxLength")) {
                (Some(low), Some(high)) => {
                    format!("{field} must be between {low} and {high} characters long, got {length}")
                }
                _ if matches!(error.kind(), ValidationErrorKind::MinLength { .. }) => {
                    format!("{field} must be at least {limit} characters long, got {length}")
                }
                _ => format!("{field} must be at most {limit} characters long, got {length}"),
            }
        }
        ValidationErrorKind::MinItems { limit } => {
            format!("{field} must have at least {limit} items, got {}", count(error.instance()))
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!("{field} must have at most {limit} items, got {}", count(error.instance()))
        }
        ValidationErrorKind::UniqueItems => format!("{field} must not hold the same item twice"),
        ValidationErrorKind::MinProperties { limit } => format!("{field} must have at least {limit} fields"),
        ValidationErrorKind::MaxProperties { limit } => format!("{field} must have at most {limit} fields"),
        ValidationErrorKind::Format { format } => format!("{field} must be a valid {format}, got {got}"),
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map(str::to_owned).unwrap_or_else(|| property.to_string());
            format!("missing a required field: '{}/{}'", field_name(path), shown_name(&name))
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            let fields: Vec<String> =
                unexpected.iter().map(|u| format!("{}/{}", field_name(path), shown_name(u))).collect();
            format!("unexpected fields: {}", python_list(&fields))
        }
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
            format!("{field} must match one of the allowed forms, got {got}")
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => {
            format!("{field} must match exactly one of the allowed forms, got {got}")
        }
        ValidationErrorKind::Not { .. } => format!("{field} has a value that is not allowed, got {got}"),
        ValidationErrorKind::FalseSchema => format!("{field} is not allowed"),
        ValidationErrorKind::Contains => format!("{field} must hold at least one matching item"),
        _ => format!("{field} is not valid: {error}"),
    }
}

fn is_top_level_field(pointer: &str) -> bool {
    pointer.len() > 1 && !pointer[1..].contains('/')
}

/// A JSON pointer as a field path: `/items/0/name` → `items/0/name`.
fn field_name(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace("~1", "/").replace("~0", "~")
}

fn pointer(name: &str) -> String {
    format!("/{}", name.replace('~', "~0").replace('/', "~1"))
}

/// An argument name as emitted, made safe to quote.
fn shown_name(name: &str) -> String {
    let quoted = crate::resolve::message::quote_emitted(name);
    quoted[1..quoted.len() - 1].to_owned()
}

fn expected_types(kind: &TypeKind) -> String {
    let names: Vec<&str> = match kind {
        TypeKind::Single(t) => vec![type_with_article(*t)],
        TypeKind::Multiple(set) => set.iter().map(type_with_article).collect(),
    };
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// The one table of JSON type names in messages: `an integer`, `a string`, …
pub(crate) fn type_with_article(t: JsonType) -> &'static str {
    match t {
        JsonType::Null => "null",
        JsonType::Boolean => "a boolean",
        JsonType::Integer => "an integer",
        JsonType::Number => "a number",
        JsonType::String => "a string",
        JsonType::Array => "an array",
        JsonType::Object => "an object",
    }
}

/// The JSON type of a value; a number without a fraction or exponent is an integer.
pub(crate) fn json_type(value: &Value) -> JsonType {
    match value {
        Value::Null => JsonType::Null,
        Value::Bool(_) => JsonType::Boolean,
        Value::Number(n) if n.is_f64() => JsonType::Number,
        Value::Number(_) => JsonType::Integer,
        Value::String(_) => JsonType::String,
        Value::Array(_) => JsonType::Array,
        Value::Object(_) => JsonType::Object,
    }
}

/// `integer`, `string`, … as in `got integer`.
fn json_type_name(value: &Value) -> &'static str {
    type_with_article(json_type(value)).trim_start_matches("an ").trim_start_matches("a ")
}

fn count(value: &Value) -> usize {
    value.as_array().map(Vec::len).unwrap_or_default()
}

/// A value as the model wrote it: strings in single quotes, escaped, cut.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => {
            let cut: String = s.chars().take(MAX_SHOWN_VALUE).collect();
            let quoted = crate::resolve::message::quote_emitted(&cut);
            if s.chars().count() > MAX_SHOWN_VALUE {
                format!("{}…'", &quoted[..quoted.len() - 1])
            } else {
                quoted
            }
        }
        other => {
            let text = other.to_string();
            match text.chars().count() > MAX_SHOWN_VALUE {
                true => format!("{}…", text.chars().take(MAX_SHOWN_VALUE).collect::<String>()),
                false => text,
            }
        }
    }
}

/// Allowed values printed like Python's lists: `['c', 'f', 1]`.
fn python_values(options: &Value) -> String {
    match options {
        Value::Array(items) => format!("[{}]", items.iter().map(shown).collect::<Vec<_>>().join(", ")),
        other => shown(other),
    }
}
