//! Built-in tools run in-process.

use serde_json::{Map, Value};

use super::Failure;
use crate::{catalog::BuiltinTool, exec::builtins, exec::outcome::ErrorKind};

pub(crate) fn run(builtin: BuiltinTool, arguments: &Map<String, Value>) -> Result<String, Failure> {
    match builtins::call(builtin, arguments) {
        // Straight into a buffer (`Display` goes through the formatter).
        Ok(value) => Ok(serde_json::to_string(&value).expect("JSON values serialise")),
        Err(message) => Err(Failure::Tool { kind: ErrorKind::InvalidArguments, message }),
    }
}
