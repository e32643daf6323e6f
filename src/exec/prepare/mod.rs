//! Execute's preparation: one call as a model emitted it, turned into a call
//! a backend may receive, or into the answer that says why not. Pure: no
//! backend, store or clock is touched, so an invalid call can never reach a
//! tool (docs/architecture.md, "The path of one call").
//!
//! The stages run in order over one parsed value (a [`Draft`]):
//!
//! | stage | file | what it does |
//! |---|---|---|
//! | words | `calls::words` | where the calls of a text read whole may begin (at its start, or after a preamble before explicit call markup) and that only residue follows the last |
//! | whole call | [`calls`] | a call written whole in the name, or in the arguments under an empty, residue or agreeing name, in any syntax (JSON call objects, tags, Python, a name then its arguments), else read by its structure, anchored by the caller's tools (the general reading: `calls::general`'s `tokens`, `anchor`, `reader` and `text`); several calls are an error |
//! | markup values | [`markup`] | a value written as markup with its one reading (layout set aside; entities, CDATA, quotes, whitespace, untyped literals, keys of no parameter held) |
//! | name | [`lookup`] | the emitted name → one tool inside the caller's set |
//! | user | [`bind`] | a tool that acts for a user needs one |
//! | syntax | [`syntax`] | the arguments' text → one JSON object, dialect slips repaired ([`json`]); else read as a call in another syntax ([`calls`]); a call after the arguments is an error |
//! | markup in values | [`markup`] | a value ending in call markup cut there; markup anywhere else in a value refused |
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
mod calls;
mod envelope;
mod json;
mod keys;
mod lookup;
mod markup;
mod syntax;
mod validate;
mod values;
pub(crate) mod work;

use serde_json::{Map, Value};

pub(crate) use calls::words;
pub(crate) use lookup::Inventory;

use super::{limits::byte_size, Call, ExecLimits, Outcome, Ready, Repair, RepairKind, RequestError, ToolError};
use crate::{
    catalog::{ToolId, ToolView, Tools},
    resolve::AvailableSet,
    similar::residue,
};

/// What the stages read: the tools (a snapshot's catalogue, or the tools a
/// request declared), the limits, the call, and the tools it may use.
pub(crate) struct Context<'a> {
    pub(crate) tools: &'a dyn Tools,
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
    tool: ToolView<'a>,
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
///
/// Before any stage reads them, the name and the arguments are held to the
/// argument size limit; then the stages run under a meter of their work
/// ([`work`]): a call whose reading would pass it is refused, never acted
/// on as far as it was read.
pub(crate) fn prepare(cx: &Context<'_>) -> Result<Result<Ready, Outcome>, RequestError> {
    let call = cx.call;
    let max = cx.limits.arguments.max_bytes;
    for (what, text) in [("the tool name is", &call.tool), ("arguments are", &call.arguments_json)] {
        if text.len() > max {
            let message = format!("{what} {} bytes long; the limit is {}", text.len(), byte_size(max));
            return Ok(Err(unread(message)));
        }
    }
    let input = call.tool.len() + call.arguments_json.len();
    let (prepared, work) = work::metered(input, || stages(cx));
    if work.exhausted {
        return Ok(Err(unread(format!(
            "the tool call could not be read as written ({} of text in more pieces than one call has): \
             send the tool's name alone and its arguments as one JSON object",
            byte_size(input)
        ))));
    }
    prepared
}

/// The answer of a call refused before any stage read it whole.
fn unread(message: String) -> Outcome {
    Outcome::failed(None, Vec::new(), String::new(), ToolError::invalid_arguments(message))
}

fn stages(cx: &Context<'_>) -> Result<Result<Ready, Outcome>, RequestError> {
    let call = cx.call;
    let whole = match whole_call(cx) {
        Ok(whole) => whole,
        Err(error) => return Ok(Err(Outcome::failed(None, Vec::new(), String::new(), error))),
    };
    let (emitted, text) = match &whole {
        Some(whole) => (whole.name.as_str(), whole.text.as_str()),
        None => (call.tool.as_str(), call.arguments_json.as_str()),
    };
    let (id, name_repair) = match name(cx, emitted) {
        Ok(found) => found,
        Err(error) => return Ok(Err(Outcome::failed(None, Vec::new(), String::new(), error))),
    };
    let tool = cx.tools.tool(id);
    if bind::needs_user(tool) && call.caller.user.is_none() {
        return Err(RequestError::NoUser(tool.name.to_owned()));
    }
    let mut repairs: Vec<Repair> = match &whole {
        Some(whole) => whole.repairs(call, tool.name),
        None => name_repair.into_iter().collect(),
    };

    // (A strict tool's parameters that allow `null` are optional.)
    let all_optional = tool.parameters.required().is_empty();
    let (parsed, text) = match syntax::parse(text, cx.strict, cx.limits.arguments, all_optional, Some((tool.name, cx)))
    {
        Ok(parsed) => (parsed, text),
        Err(error) => match (!cx.strict).then(|| written_otherwise(cx, id, text)).flatten() {
            Some(Ok(inner)) => {
                match syntax::parse(&inner, false, cx.limits.arguments, all_optional, Some((tool.name, cx))) {
                    Ok(parsed) => {
                        repairs.push(Repair {
                            kind: RepairKind::ArgumentsJson,
                            original: text.to_owned(),
                            repaired: inner,
                        });
                        (parsed, "")
                    }
                    Err(error) => return Ok(Err(Outcome::failed(Some(tool), repairs, String::new(), error))),
                }
            }
            Some(Err(many)) => return Ok(Err(Outcome::failed(Some(tool), repairs, String::new(), many))),
            None => return Ok(Err(Outcome::failed(Some(tool), repairs, String::new(), error))),
        },
    };
    // Empty arguments are sent to the backend as `{}`.
    let unchanged = (!text.trim().is_empty()).then_some(text);
    let mut draft = Draft { id, tool, arguments: Value::Object(parsed.object), unchanged, repairs: Vec::new() };
    draft.record(repairs);
    draft.record(parsed.repairs);
    let object = draft.arguments.as_object_mut().expect("arguments are an object");
    match markup::clean(object, cx.strict) {
        Ok(cleaned) => draft.record(cleaned),
        Err(error) => return Ok(Err(draft.failed(error))),
    }

    if !cx.strict {
        argument_names(&mut draft);
        strict_nulls(&mut draft);
        if !draft.is_valid() && !unwrap_envelope(&mut draft, cx.limits) {
            coerce_values(&mut draft, cx.limits);
        }
    }
    let problems = validate::validate(tool, &draft.arguments);
    if !problems.is_empty() {
        return Ok(Err(draft.failed(problems.into_error(tool))));
    }
    if let Some(binding) = tool.binding {
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

/// Whether `text`, read as one call written whole, is a call with words
/// before or after it: prose by the words rule, never run.
pub(crate) fn reads_as_words(text: &str, limits: super::limits::ArgumentLimits) -> bool {
    matches!(calls::read(text, limits), calls::Reading::Words(_) | calls::Reading::AfterProse(_))
}

/// Every call of `text`, each as its name as written and its arguments'
/// text, when `text` is nothing but calls (each with one reading) and
/// residue; each is then prepared as a call of its own. Linear, under the
/// same meter as a call's reading; `None` past it.
pub(crate) fn calls_in(cx: &Context<'_>, text: &str) -> Option<Vec<(String, String)>> {
    if text.len() > cx.limits.arguments.max_bytes {
        return None;
    }
    let (found, work) = work::metered(text.len(), || calls::read_each(text, cx, cx.limits.arguments));
    if work.exhausted {
        return None;
    }
    found?
        .into_iter()
        .map(|found| {
            let name = found.name?;
            let text = arguments_text(cx, &name, found.arguments).ok()?.unwrap_or_else(|| "{}".to_owned());
            Some((name, text))
        })
        .collect()
}

/// The caller's tools, as the general reading asks of them.
impl calls::Anchor for Context<'_> {
    fn tool(&self, name: &str) -> Option<calls::Tool<'_>> {
        let tool = self.tools.tool(lookup::means(self.tools, self.set, name)?);
        let schema = tool.parameters;
        Some(calls::Tool { parameters: schema.parameters(), required: schema.required(), lists: schema.lists() })
    }

    fn could_name(&self, key: &str) -> bool {
        let tools = self.tools;
        (0..tools.count() as u32)
            .map(crate::catalog::ToolId)
            .filter(|id| self.set.contains(*id))
            .any(|id| crate::similar::normalised_key(tools.tool(id).name).starts_with(key))
    }
}

/// A call read whole from the name or the arguments: the name to resolve,
/// the arguments' text, and the kind of the repair if the arguments were
/// read from the call (not sent as they are).
struct Whole {
    name: String,
    text: String,
    arguments_read: Option<RepairKind>,
    /// Words before the call (a preamble), set aside.
    dropped: Option<String>,
}

impl Whole {
    /// What reading the call whole repaired: words set aside, the name (as
    /// `name`), and the arguments when they were read from the call.
    fn repairs(&self, call: &Call, name: &str) -> Vec<Repair> {
        let dropped = self.dropped.iter().map(|words| Repair {
            kind: RepairKind::WordsDropped,
            original: words.clone(),
            repaired: String::new(),
        });
        let mut repairs: Vec<Repair> = dropped.collect();
        repairs.push(Repair { kind: RepairKind::ToolName, original: call.tool.clone(), repaired: name.to_owned() });
        if let Some(kind) = self.arguments_read {
            repairs.push(Repair { kind, original: call.arguments_json.clone(), repaired: self.text.clone() });
        }
        repairs
    }
}

/// Stage "whole call": a call written whole where only its name or only
/// its arguments belong ([`calls`]): in the name (`get_weather(city=
/// "Paris")`, with no other arguments sent), or in the arguments, its name
/// agreeing with the emitted one ([`agrees`]): `{"name": "get_weather",
/// "arguments": {...}}` with the name empty, `<tool_call><function=…>` in
/// any syntax, a parallel wrapper holding one call under
/// `multi_tool_use.parallel`. Text holding several calls is an error, never
/// cut to one. Skipped when strict, and when the emitted name is a tool of
/// the caller's set, alias included. A tool outside the set is, here as in
/// every answer, a name that does not exist: the call reads the same as
/// one naming nothing at all, so no answer tells a caller what is hidden.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn whole_call(cx: &Context<'_>) -> Result<Option<Whole>, ToolError> {
    let call = cx.call;
    if cx.strict || cx.tools.named(&call.tool).is_some_and(|id| cx.set.contains(id)) {
        return Ok(None);
    }
    let limits = cx.limits.arguments;
    if call.tool.contains(['(', '{', '<', '[']) {
        match calls::read_anchored(&call.tool, cx, limits) {
            calls::Reading::One(calls::Found { name: Some(name), arguments }) => {
                let sent = call.arguments_json.trim();
                let whole = match arguments_text(cx, &name, arguments)? {
                    None => Whole { name, text: call.arguments_json.clone(), arguments_read: None, dropped: None },
                    Some(text) if sent.is_empty() || sent == "{}" => {
                        Whole { name, text, arguments_read: Some(RepairKind::ArgumentsJson), dropped: None }
                    }
                    // Arguments in the name and others beside it: two readings.
                    Some(_) => return Ok(None),
                };
                return Ok(Some(whole));
            }
            calls::Reading::Many(count) => return Err(calls::many_named(count, None, &call.tool, cx)),
            calls::Reading::AfterProse(found) => return Err(calls::after_prose(found.name.as_deref())),
            calls::Reading::Words(found) => return Err(calls::then_words(found.name.as_deref())),
            _ => {}
        }
    }
    let kind = match call.arguments_json.trim_start().starts_with(['{', '[']) {
        true => RepairKind::ArgumentsEnvelope,
        false => RepairKind::ArgumentsJson,
    };
    // The words rule, for text read whole under a name that is residue.
    let (text, dropped) = match is_residue(&call.tool) {
        true => match calls::words::start(&call.arguments_json, cx) {
            calls::words::Start::After(words) => {
                (&call.arguments_json[words.end..], Some(call.arguments_json[words].to_owned()))
            }
            calls::words::Start::Prose => return prose(cx, &call.arguments_json),
            // A thought first is residue: the reading starts after it.
            calls::words::Start::Whole(from) => (&call.arguments_json[from..], None),
        },
        false => (call.arguments_json.as_str(), None),
    };
    match calls::read_anchored(text, cx, limits) {
        calls::Reading::One(calls::Found { name: Some(name), arguments }) if agrees(cx, &call.tool, &name) => {
            let text = arguments_text(cx, &name, arguments)?.unwrap_or_else(|| "{}".to_owned());
            Ok(Some(Whole { name, text, arguments_read: Some(kind), dropped }))
        }
        calls::Reading::Many(count) => Err(calls::many_named(count, None, text, cx)),
        calls::Reading::AfterProse(found) => Err(calls::after_prose(found.name.as_deref())),
        calls::Reading::Words(found) => Err(calls::then_words(found.name.as_deref())),
        // Words, then markup that holds no call of the caller's: prose.
        calls::Reading::One(found) if dropped.is_some() => Err(calls::after_prose(found.name.as_deref())),
        _ => Ok(None),
    }
}

/// Whether an emitted name is residue only (empty included): its
/// arguments are read whole, by the words rule.
fn is_residue(emitted: &str) -> bool {
    residue::words(emitted).iter().all(|w| w.markup)
}

/// Text read whole that begins with words no explicit markup follows:
/// prose. A call the reading finds in it is never run.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn prose(cx: &Context<'_>, text: &str) -> Result<Option<Whole>, ToolError> {
    match calls::read_anchored(text, cx, cx.limits.arguments) {
        calls::Reading::Nothing => Ok(None),
        calls::Reading::Many(count) => Err(calls::many_named(count, None, text, cx)),
        calls::Reading::Words(found) => Err(calls::then_words(found.name.as_deref())),
        calls::Reading::One(found) | calls::Reading::AfterProse(found) => {
            Err(calls::after_prose(found.name.as_deref()))
        }
    }
}

/// Whether a call named `inner`, found inside the arguments, is the one
/// call the emitted name allows: `inner` means one tool of the caller's
/// set, and the emitted name is empty or residue, means that same tool, or
/// means none and suggests no other (each inside the caller's set: what
/// lies outside it is never seen).
fn agrees(cx: &Context<'_>, emitted: &str, inner: &str) -> bool {
    // A name read out of text: every word beside the tool's is markup (a
    // word a token only separates from it is text: `not_function<｜tool▁sep｜>x`).
    if residue::words(inner).iter().filter(|w| !w.markup && !w.namespace).count() > 1 {
        return false;
    }
    let Some(id) = tool_named(cx, inner) else { return false };
    if is_residue(emitted) {
        return true;
    }
    match lookup::resolve_tool(cx.tools, cx.set, emitted, false) {
        lookup::Resolved::Tool(named, _) => named == id,
        lookup::Resolved::Missing { suggestions } => {
            suggestions.is_empty() || suggestions.iter().any(|s| *s == cx.tools.tool(id).name)
        }
    }
}

/// A found call's arguments as their JSON text (`None`: none written),
/// markup's values read by the schema of the tool `name` means; the error
/// of a markup value that reads two ways (character entities).
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn arguments_text(cx: &Context<'_>, name: &str, arguments: calls::Arguments) -> Result<Option<String>, ToolError> {
    let arguments = match (arguments, tool_named(cx, name)) {
        (calls::Arguments::Unwritten, _) => return Err(unwritten(name)),
        (calls::Arguments::Markup(values), Some(id)) => {
            let tool = cx.tools.tool(id);
            calls::Arguments::Markup(markup::exact(values, tool.name, properties(cx, id))?)
        }
        (arguments, _) => arguments,
    };
    Ok(typed(cx, name, arguments).into_text())
}

/// The answer to a call object naming `name` and no arguments.
fn unwritten(name: &str) -> ToolError {
    ToolError::invalid_arguments(format!(
        "the call of '{name}' names no arguments (no arguments member): it reads as a call without arguments \
         or as one whose arguments were left out, and nothing was run: send it with its arguments, {{}} for none"
    ))
}

/// Markup's values read by the schema of the tool `name` means
/// ([`calls::Arguments::typed`]).
fn typed(cx: &Context<'_>, name: &str, arguments: calls::Arguments) -> calls::Arguments {
    match tool_named(cx, name) {
        Some(id) => arguments.typed(properties(cx, id), cx.limits.arguments),
        None => arguments,
    }
}

/// The `properties` of a tool's schema.
fn properties<'c>(cx: &Context<'c>, id: ToolId) -> Option<&'c Map<String, Value>> {
    cx.tools.tool(id).parameters.parsed().get("properties").and_then(Value::as_object)
}

/// The one tool of the call's set a name found inside a call means
/// (non-strict lookup), if any.
fn tool_named(cx: &Context<'_>, name: &str) -> Option<ToolId> {
    match lookup::resolve_tool(cx.tools, cx.set, name, false) {
        lookup::Resolved::Tool(id, _) => Some(id),
        lookup::Resolved::Missing { .. } => None,
    }
}

/// Stage "syntax", second reading: arguments that are not JSON, read as a
/// call written whole in another syntax ([`calls`]) with no name or the
/// name of the tool already resolved: the arguments' JSON text, or the
/// error of several calls; `None` when there is no such reading.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn written_otherwise(cx: &Context<'_>, id: ToolId, text: &str) -> Option<Result<String, ToolError>> {
    match calls::read_anchored(text, cx, cx.limits.arguments) {
        calls::Reading::One(calls::Found { name, arguments }) => {
            let same = name.as_deref().is_none_or(|name| tool_named(cx, name) == Some(id));
            let arguments = match arguments {
                calls::Arguments::Unwritten => return same.then(|| Err(unwritten(cx.tools.tool(id).name))),
                calls::Arguments::Markup(values) => {
                    match markup::exact(values, cx.tools.tool(id).name, properties(cx, id)) {
                        Ok(values) => calls::Arguments::Markup(values),
                        Err(error) => return same.then_some(Err(error)),
                    }
                }
                arguments => arguments,
            };
            let arguments = arguments.typed(properties(cx, id), cx.limits.arguments);
            same.then(|| Ok(arguments.into_text().unwrap_or_else(|| "{}".to_owned())))
        }
        calls::Reading::Many(count) => Some(Err(calls::many_named(count, Some(cx.tools.tool(id).name), text, cx))),
        calls::Reading::AfterProse(found) => Some(Err(calls::after_prose(found.name.as_deref()))),
        calls::Reading::Words(found) => Some(Err(calls::then_words(found.name.as_deref()))),
        calls::Reading::Nothing => None,
    }
}

/// Stage "name": the one tool `emitted` means inside the call's set, with
/// the repair of the name if one was made; else UNKNOWN_TOOL with the
/// suggestions and the inventory of the set.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn name(cx: &Context<'_>, emitted: &str) -> Result<(ToolId, Option<Repair>), ToolError> {
    match lookup::resolve_tool(cx.tools, cx.set, emitted, cx.strict) {
        lookup::Resolved::Tool(id, repair) => Ok((id, repair)),
        lookup::Resolved::Missing { suggestions } => Err(match cx.set {
            AvailableSet::All => lookup::unknown_tool_error(emitted, suggestions, cx.everything),
            AvailableSet::Only(_) => {
                let inventory = Inventory::of(cx.tools, cx.set, cx.limits.inventory_cap);
                lookup::unknown_tool_error(emitted, suggestions, &inventory)
            }
        }),
    }
}

/// Stage "argument names": drifted names renamed ([`keys::repair_names`]).
fn argument_names(draft: &mut Draft<'_>) {
    let object = draft.arguments.as_object_mut().expect("arguments are an object");
    let repairs = keys::repair_names(object, draft.tool.parameters);
    draft.record(repairs);
}

/// Stage "argument names", for a strict tool ([`crate::catalog::Schema::strict`]):
/// a parameter left out whose schema allows `null` is `null`
/// ([`values::fill_nulls`]). Not while a key is no parameter: the
/// arguments may be in an envelope, which fills what is inside it.
fn strict_nulls(draft: &mut Draft<'_>) {
    let parameters = draft.tool.parameters;
    if !parameters.is_strict() {
        return;
    }
    let object = draft.arguments.as_object_mut().expect("arguments are an object");
    if !object.keys().all(|key| parameters.parameters().contains(key)) {
        return;
    }
    let repairs = values::fill_nulls(object, draft.tool.parameters.parsed());
    draft.record(repairs);
}

/// Stage "envelope": the arguments inside an envelope or beside call
/// metadata ([`envelope::unwrap`]), kept only if they then validate;
/// whether they were.
fn unwrap_envelope(draft: &mut Draft<'_>, limits: ExecLimits) -> bool {
    let object = draft.arguments.as_object().expect("arguments are an object");
    let tool = draft.tool;
    let mut filled = Vec::new();
    let mut valid = |mut inner: Map<String, Value>| {
        if tool.parameters.is_strict() {
            filled = values::fill_nulls(&mut inner, tool.parameters.parsed());
        }
        let inner = Value::Object(inner);
        tool.parameters.validator().is_valid(&inner).then_some(inner)
    };
    let unwrapped =
        envelope::unwrap(object, tool.parameters.parameters(), tool.name, limits.arguments).and_then(&mut valid);
    let Some(inner) = unwrapped.or_else(|| envelope::lift(object, tool.parameters.parsed()).and_then(&mut valid))
    else {
        return false;
    };
    let original = serde_json::to_string(&draft.arguments).expect("JSON values serialise");
    let repaired = serde_json::to_string(&inner).expect("JSON values serialise");
    draft.arguments = inner;
    draft.record([Repair { kind: RepairKind::ArgumentsEnvelope, original, repaired }]);
    draft.record(filled);
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
