//! Parameters bound to who calls (`bind:` in the catalogue): filled from the
//! caller after the model's arguments passed validation, never from the
//! model, then the whole is checked against the tool's full schema.

use serde_json::{Map, Value};

use crate::{
    catalog::{BindSource, Binding, ToolView},
    exec::outcome::ToolError,
    identity::Caller,
};

/// Whether the tool acts for a user: a call without one is refused before
/// anything else is looked at.
pub(crate) fn needs_user(tool: ToolView<'_>) -> bool {
    tool.binding.is_some_and(Binding::binds_user)
}

/// The arguments with each bound parameter filled from `caller`; an error
/// names a parameter the caller has nothing for, or a filled value the full
/// schema refuses.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
pub(crate) fn fill(binding: &Binding, caller: &Caller, arguments: &Value) -> Result<Map<String, Value>, ToolError> {
    let mut filled = arguments.clone();
    let object = filled.as_object_mut().expect("arguments are an object");
    for (name, source) in &binding.parameters {
        let value = match source {
            BindSource::User => caller.user.as_ref().map(|u| u.bound()),
            BindSource::Principal => caller.principal.as_deref().map(str::to_owned),
        };
        let Some(value) = value else {
            let message = format!("'{name}' is bound to the {}, and the call has none", source.word());
            return Err(ToolError::invalid_arguments(message));
        };
        object.insert(name.clone(), Value::String(value));
    }
    if let Some(error) = binding.full.validator().iter_errors(&filled).next() {
        let at = error.instance_path().as_str().trim_start_matches('/').to_owned();
        let message = format!("'{at}', filled from who calls, is not valid for the tool: {error}");
        return Err(ToolError::invalid_arguments(message));
    }
    let Value::Object(object) = filled else { unreachable!("built from an object") };
    Ok(object)
}
