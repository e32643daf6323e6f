//! Execute's preparation: one call as a model emitted it, turned into a call
//! a backend may receive, or into the answer that says why not. Pure: no
//! backend, store or clock is touched, so an invalid call can never reach a
//! tool (docs/architecture.md, "The path of one call").
//!
//! The stages run in order over one parsed value (a [`Draft`]):
//!
//! | stage | file | what it does |
//! |---|---|---|
//! | whole call | [`envelope`] | a call sent whole in the arguments, its name left empty |
//! | name | [`lookup`] | the emitted name → one tool inside the caller's set |
//! | user | [`bind`] | a tool that acts for a user needs one |
//! | syntax | [`syntax`] | the arguments' text → one JSON object, slips repaired |
//! | argument names | [`keys`] | drifted argument names renamed |
//! | envelope | [`envelope`] | arguments wrapped or beside call metadata, unwrapped |
//! | values | [`values`] | values of another type than their schema's, coerced |
//! | validation | [`validate`] | every problem, worded for the model; a key that reads as a parameter without being it, refused (strict too) |
//! | binding | [`bind`] | parameters bound to who calls, filled and checked |
//!
//! Non-strict, every stage may repair, and records what it changed; strict,
//! none does. Envelope and values are tried only when the arguments fail
//! validation (a valid call pays one `is_valid`), and each is kept only if
//! the call then passes. The arguments are serialised once, at the end: the
//! text as emitted when no stage changed them, else the object.
//!
//! A new repair rule is a case in the stage it belongs to, or a new stage in
//! this list, with its reason in a doc comment and its counter-cases tested.

mod bind;
mod envelope;
mod keys;
mod lookup;
mod syntax;
mod validate;
mod values;

use serde_json::Value;

pub(crate) use lookup::Inventory;

use super::{Call, ExecLimits, Outcome, Ready, Repair, RepairKind, RequestError, ToolError};
use crate::{
    catalog::{Catalog, Tool, ToolId},
    resolve::AvailableSet,
    similar::residue,
};

/// What the stages read: the snapshot's catalogue and limits, the call, and
/// the tools it may use.
pub(crate) struct Context<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) limits: ExecLimits,
    pub(crate) call: &'a Call,
    pub(crate) strict: bool,
    /// The tools the call may use (its tool set inside its grants).
    pub(crate) set: &'a AvailableSet,
    /// The inventory of every tool, for a call that may use every tool.
    pub(crate) everything: &'a Inventory,
}

/// A call on its way through the stages: the tool, its arguments as one
/// value (always an object), and the repairs so far.
struct Draft<'a> {
    id: ToolId,
    tool: &'a Tool,
    arguments: Value,
    /// The arguments' text as emitted, while no stage has changed them (the
    /// backend then receives it byte for byte).
    unchanged: Option<&'a str>,
    repairs: Vec<Repair>,
}

impl Draft<'_> {
    /// Records repairs; any but the name's means the arguments changed.
    fn record(&mut self, repairs: impl IntoIterator<Item = Repair>) {
        for repair in repairs {
            if repair.kind != RepairKind::ToolName {
                self.unchanged = None;
            }
            self.repairs.push(repair);
        }
    }

    /// The arguments' text: as emitted if unchanged, else serialised.
    fn text(&self) -> String {
        match self.unchanged {
            Some(text) => text.to_owned(),
            None => serde_json::to_string(&self.arguments).expect("JSON values serialise"),
        }
    }

    fn is_valid(&self) -> bool {
        self.tool.parameters.validator().is_valid(&self.arguments)
    }

    /// The answer of a call that stops at this stage.
    fn failed(self, error: ToolError) -> Outcome {
        let arguments_json = self.text();
        Outcome::failed(Some(self.tool), self.repairs, arguments_json, error)
    }

    fn ready(self) -> Ready {
        let arguments_json = self.text();
        let Value::Object(arguments) = self.arguments else { unreachable!("arguments are an object") };
        Ready { tool: self.id, arguments, arguments_json, repairs: self.repairs }
    }
}

/// Runs the stages. `Err` is a request that cannot be executed as sent;
/// `Ok(Err)` is the in-band answer of a call that stopped at a stage.
pub(crate) fn prepare(cx: &Context<'_>) -> Result<Result<Ready, Outcome>, RequestError> {
    let call = cx.call;
    let whole = whole_call(cx);
    let (emitted, text) = match &whole {
        Some((name, inner)) => (name.as_str(), inner.as_str()),
        None => (call.tool.as_str(), call.arguments_json.as_str()),
    };
    let (id, name_repair) = match name(cx, emitted) {
        Ok(found) => found,
        Err(error) => return Ok(Err(Outcome::failed(None, Vec::new(), String::new(), error))),
    };
    let tool = cx.catalog.tool(id);
    if bind::needs_user(tool) && call.caller.user.is_none() {
        return Err(RequestError::NoUser(tool.name.clone()));
    }
    let repairs: Vec<Repair> = match &whole {
        Some((_, inner)) => vec![
            Repair { kind: RepairKind::ToolName, original: call.tool.clone(), repaired: tool.name.clone() },
            Repair {
                kind: RepairKind::ArgumentsEnvelope,
                original: call.arguments_json.clone(),
                repaired: inner.clone(),
            },
        ],
        None => name_repair.into_iter().collect(),
    };

    let all_optional = tool.parameters.required().is_empty();
    let parsed = match syntax::parse(text, cx.strict, cx.limits.arguments, all_optional) {
        Ok(parsed) => parsed,
        Err(error) => return Ok(Err(Outcome::failed(Some(tool), repairs, String::new(), error))),
    };
    // Empty arguments are sent to the backend as `{}`.
    let unchanged = (!text.trim().is_empty()).then_some(text);
    let mut draft = Draft { id, tool, arguments: Value::Object(parsed.object), unchanged, repairs: Vec::new() };
    draft.record(repairs);
    draft.record(parsed.repairs);

    if !cx.strict {
        argument_names(&mut draft);
        if !draft.is_valid() && !unwrap_envelope(&mut draft) {
            coerce_values(&mut draft, cx.limits);
        }
    }
    let problems = validate::validate(tool, &draft.arguments);
    if !problems.is_empty() {
        return Ok(Err(draft.failed(problems.into_error(tool))));
    }
    if let Some(binding) = &tool.binding {
        match bind::fill(binding, &call.caller, &draft.arguments) {
            Ok(filled) => {
                draft.arguments = Value::Object(filled);
                draft.unchanged = None;
            }
            Err(error) => return Ok(Err(draft.failed(error))),
        }
    }
    Ok(Ok(draft.ready()))
}

/// Stage "whole call": a call sent whole where only its arguments belong,
/// its own name empty or only template residue (`{"name": "get_weather",
/// "arguments": {...}}`): the name and the arguments' text it carries
/// ([`envelope::named_call`]). Skipped when strict, and when the emitted
/// name is a tool's, alias included.
fn whole_call(cx: &Context<'_>) -> Option<(String, String)> {
    let call = cx.call;
    if cx.strict || cx.catalog.lookup(&call.tool).is_some() {
        return None;
    }
    if !residue::words(&call.tool).iter().all(|w| w.markup) {
        return None;
    }
    let parsed = syntax::parse(&call.arguments_json, false, cx.limits.arguments, false).ok()?;
    envelope::named_call(&parsed.object)
}

/// Stage "name": the one tool `emitted` means inside the call's set, with
/// the repair of the name if one was made; else UNKNOWN_TOOL with the
/// suggestions and the inventory of the set.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn name(cx: &Context<'_>, emitted: &str) -> Result<(ToolId, Option<Repair>), ToolError> {
    match lookup::resolve_tool(cx.catalog, cx.set, emitted, cx.strict) {
        lookup::Resolved::Tool(id, repair) => Ok((id, repair)),
        lookup::Resolved::Missing { suggestions } => Err(match cx.set {
            AvailableSet::All => lookup::unknown_tool_error(emitted, suggestions, cx.everything),
            AvailableSet::Only(_) => {
                let inventory = Inventory::of(cx.catalog, cx.set, cx.limits.inventory_cap);
                lookup::unknown_tool_error(emitted, suggestions, &inventory)
            }
        }),
    }
}

/// Stage "argument names": drifted names renamed ([`keys::repair_names`]).
fn argument_names(draft: &mut Draft<'_>) {
    let object = draft.arguments.as_object_mut().expect("arguments are an object");
    let repairs = keys::repair_names(object, &draft.tool.parameters);
    draft.record(repairs);
}

/// Stage "envelope": the arguments inside an envelope or beside call
/// metadata ([`envelope::unwrap`]), kept only if they then validate;
/// whether they were.
fn unwrap_envelope(draft: &mut Draft<'_>) -> bool {
    let object = draft.arguments.as_object().expect("arguments are an object");
    let Some(inner) = envelope::unwrap(object, draft.tool.parameters.parameters(), &draft.tool.name) else {
        return false;
    };
    let inner = Value::Object(inner);
    if !draft.tool.parameters.validator().is_valid(&inner) {
        return false;
    }
    let original = serde_json::to_string(&draft.arguments).expect("JSON values serialise");
    let repaired = serde_json::to_string(&inner).expect("JSON values serialise");
    draft.arguments = inner;
    draft.record([Repair { kind: RepairKind::ArgumentsEnvelope, original, repaired }]);
    true
}

/// Stage "values": values of another type than their schema's
/// ([`values::coerce`]), kept only if the call then validates; otherwise
/// the model hears about what it sent.
fn coerce_values(draft: &mut Draft<'_>, limits: ExecLimits) {
    let mut coerced = draft.arguments.clone();
    let object = coerced.as_object_mut().expect("arguments are an object");
    let changes = values::coerce(object, draft.tool.parameters.parsed(), limits.arguments);
    if !changes.is_empty() && draft.tool.parameters.validator().is_valid(&coerced) {
        draft.arguments = coerced;
        draft.record(changes);
    }
}
