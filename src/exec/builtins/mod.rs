//! The built-in tools, one file each. Each is a pure function of its
//! validated arguments that returns a result or the tool's own error.

mod calculator;
mod current_time;
mod echo;

use serde_json::{Map, Value};

use crate::catalog::BuiltinTool;

/// Runs a built-in; its result as JSON text. `Err` is the tool's own error
/// (a value problem), to be passed to the model unchanged.
pub(crate) fn call(builtin: BuiltinTool, arguments: &Map<String, Value>) -> Result<String, String> {
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    // Straight into a buffer (`Display` goes through the formatter).
    let json = |value: Value| serde_json::to_string(&value).expect("JSON values serialise");
    match builtin {
        BuiltinTool::Calculator => calculator::evaluate(text("expression").unwrap_or_default()).map(json),
        BuiltinTool::CurrentTime => current_time::now(text("timezone")).map(json),
        BuiltinTool::Echo => Ok(echo::echo(arguments)),
    }
}
