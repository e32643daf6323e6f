//! The built-in layer: tools implemented inside the binary, declared here with
//! their JSON Schemas, and the table of built-in aliases. Their
//! implementations live with the executor; this module only describes them.

use serde_json::{json, Value};

/// A tool implemented in Rust inside the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuiltinTool {
    Calculator,
    CurrentTime,
    Echo,
}

impl BuiltinTool {
    pub const ALL: [BuiltinTool; 3] = [BuiltinTool::Calculator, BuiltinTool::CurrentTime, BuiltinTool::Echo];

    pub(crate) fn name(self) -> &'static str {
        match self {
            BuiltinTool::Calculator => "calculator",
            BuiltinTool::CurrentTime => "current_time",
            BuiltinTool::Echo => "echo",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    pub(crate) fn description(self) -> &'static str {
        match self {
            BuiltinTool::Calculator => {
                "Evaluate an arithmetic expression with + - * / % ^, parentheses and decimal numbers, e.g. (2 + 3) * 4.5."
            }
            BuiltinTool::CurrentTime => {
                "The current date and time, in UTC or in the IANA time zone given (e.g. Europe/Paris)."
            }
            BuiltinTool::Echo => "Return the arguments unchanged (for tests and benchmarks).",
        }
    }

    /// The JSON Schema of the tool's arguments.
    pub(crate) fn parameters(self) -> Value {
        match self {
            BuiltinTool::Calculator => json!({
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 1000,
                        "description": "An arithmetic expression, e.g. (2 + 3) * 4.5"
                    }
                },
                "required": ["expression"],
                "additionalProperties": false
            }),
            BuiltinTool::CurrentTime => json!({
                "type": "object",
                "properties": {
                    "timezone": {
                        "type": "string",
                        "description": "An IANA time zone name, e.g. Europe/Paris; UTC when omitted"
                    }
                },
                "additionalProperties": false
            }),
            BuiltinTool::Echo => json!({"type": "object"}),
        }
    }

    /// Pure functions of their arguments: retrying one is always safe.
    pub(crate) fn idempotent(self) -> bool {
        true
    }

    /// What MCP clients are told: these read nothing and change nothing
    /// outside the gateway (the clock is read, not changed).
    pub(crate) fn presentation(self) -> super::Presentation {
        let hints = [("readOnlyHint", true), ("idempotentHint", true), ("openWorldHint", false)];
        let annotations = hints.into_iter().map(|(k, v)| (k.to_owned(), serde_json::Value::Bool(v))).collect();
        super::Presentation { annotations: Some(annotations), ..super::Presentation::default() }
    }
}

/// Built-in aliases: extra exact names for built-in tools.
pub(crate) const BUILTIN_ALIASES: &[(&str, &str)] = &[("calc", "calculator"), ("get_current_time", "current_time")];
