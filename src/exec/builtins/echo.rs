//! `echo`: returns its arguments unchanged (for tests and benchmarks).

use serde_json::{Map, Value};

/// The arguments as JSON text, serialised where they are (not copied into a
/// value first).
pub(crate) fn echo(arguments: &Map<String, Value>) -> String {
    serde_json::to_string(arguments).expect("JSON values serialise")
}
