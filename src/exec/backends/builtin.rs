//! Built-in tools run in-process.

use serde_json::{Map, Value};

use super::Failure;
use crate::{catalog::BuiltinTool, exec::builtins, exec::outcome::ErrorKind};

pub(crate) fn run(builtin: BuiltinTool, arguments: &Map<String, Value>) -> Result<String, Failure> {
    builtins::call(builtin, arguments).map_err(|message| Failure::Tool {
        kind: ErrorKind::InvalidArguments,
        message,
        sent: None,
    })
}
